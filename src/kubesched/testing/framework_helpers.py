"""Test helpers for plugins: a real cache and snapshot, a minimal Handle, and runners for one plugin.

Who calls it: plugin unit tests and property tests (and out-of-tree plugin authors testing theirs). The
cluster is built with the real :class:`~kubesched.scheduler.cache.cache.Cache`, so NodeInfos and the
columnar NodeTable are exactly what the scheduler would give a plugin; the runners call one plugin's
per-node method for every node, or its batch method over all nodes, and return per-node results in
snapshot order so the two can be compared directly.

``RecordingClient`` stands in for the API server (the one thing a unit test cannot reach); it is not a
mock of kubesched code. ``PluginHandle`` is a real Handle over a real cache and the scheduler's real
services; only the plugin runners, which need a whole framework, are missing.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from typing import Any

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim
from kubesched.clock import Clock, VirtualClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterClient,
    FilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreNormalizer,
    ScorePlugin,
)
from kubesched.framework.listers import Listers
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.runtime.handle import ContextHandle, FrameworkContext
from kubesched.framework.runtime.services import BackgroundTasks, Services
from kubesched.framework.runtime.waiting_pods import WaitingPods
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.policy.clients import policy_services
from kubesched.scheduler.cache.cache import Cache
from kubesched.scheduler.queue.nominator import PodNominator

__all__ = [
    "PluginHandle",
    "RecordingClient",
    "RecordingEventRecorder",
    "batch_of",
    "expand_batch_result",
    "filter_nodes",
    "filter_nodes_batch",
    "make_cluster",
    "normalize",
    "pre_filter",
    "pre_score",
    "score_nodes",
    "score_nodes_batch",
]


def make_cluster(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> tuple[Cache, Snapshot]:
    """A cache holding ``nodes`` and the assigned ``pods`` (each must name its node), and its snapshot."""
    cache = Cache()
    for node in nodes:
        cache.add_node(node)
    for pod in pods:
        if not pod.spec.node_name:
            raise ValueError(f"pod {pod.key} has no spec.nodeName; only assigned pods go into the cache")
        cache.add_pod(pod)
    return cache, cache.snapshot()


class RecordingClient:
    """A stand-in API server: records every bind, eviction and cleared nomination, or raises ``fail_with``
    (``preempt_fail_with`` for evictions)."""

    def __init__(
        self, fail_with: BaseException | None = None, *, preempt_fail_with: BaseException | None = None
    ) -> None:
        self.fail_with = fail_with
        self.preempt_fail_with = preempt_fail_with
        self.bindings: list[tuple[str, str]] = []
        self.preemptions: list[tuple[str, str]] = []  # (victim key, preemptor key)
        self.cleared_nominations: list[str] = []
        self.annotations: dict[str, dict[str, str]] = {}  # pod uid -> annotations as compare_and_set left them
        # (pod key, node, [(volume, claim key)], [claim key to provision]) per bind_volumes call.
        self.volume_bindings: list[tuple[str, str, list[tuple[str, str]], list[str]]] = []

    async def bind(self, pod: Pod, node_name: str) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.bindings.append((pod.key, node_name))

    async def preempt(self, victim: Pod, preemptor: Pod) -> None:
        if self.preempt_fail_with is not None:
            raise self.preempt_fail_with
        self.preemptions.append((victim.key, preemptor.key))

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.cleared_nominations.append(pod.key)

    async def compare_and_set_annotation(self, pod: Pod, key: str, expected: str | None, value: str) -> bool:
        if self.fail_with is not None:
            raise self.fail_with
        current = self.annotations.setdefault(pod.metadata.uid, dict(pod.metadata.annotations))
        if current.get(key) != expected:
            return False
        current[key] = value
        return True

    async def bind_volumes(
        self,
        pod: Pod,
        node_name: str,
        bindings: Sequence[tuple[PersistentVolume, PersistentVolumeClaim]],
        provisions: Sequence[PersistentVolumeClaim],
    ) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.volume_bindings.append(
            (pod.key, node_name, [(pv.name, pvc.key) for pv, pvc in bindings], [pvc.key for pvc in provisions])
        )


class RecordingEventRecorder:
    """Keeps every event a plugin emits as (pod key, type, reason, action, message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str, str]] = []

    def event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        self.events.append((pod.key, event_type, reason, action, message))


class PluginHandle(ContextHandle):
    """A Handle for one plugin under test: the cache's snapshot, a virtual clock, a recording client, the
    scheduler's real services (policy clients), and background work kept for the test to run.

    ``context`` is a complete :class:`FrameworkContext`, so a test can also build a real
    :class:`~kubesched.framework.runtime.framework.Framework` over the same cache with it. The plugin runners
    of the Handle need a framework and are not available here.
    """

    def __init__(
        self,
        cache: Cache | None = None,
        *,
        client: ClusterClient | None = None,
        clock: Clock | None = None,
        profile_name: str = "default-scheduler",
        services: Services | None = None,
        listers: Listers | None = None,
    ) -> None:
        self.cache = cache if cache is not None else Cache()
        the_clock: Clock = clock if clock is not None else VirtualClock()
        self.recorder = RecordingEventRecorder()
        self.activated: list[str] = []
        self.pods: dict[str, Pod] = {}
        self.spawned: list[Coroutine[Any, Any, None]] = []
        super().__init__(
            FrameworkContext(
                clock=the_clock,
                client=client if client is not None else RecordingClient(),
                event_recorder=self.recorder,
                nominator=PodNominator(),
                waiting_pods=WaitingPods(),
                snapshot=self.cache.snapshot,
                get_pod=self.pods.get,
                activate=self.activated.extend,
                tasks=BackgroundTasks(the_clock),
                services=services if services is not None else Services(policy_services(the_clock)),
                listers=listers if listers is not None else Listers.empty(),
            ),
            profile_name,
        )

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Unit tests run spawned work themselves (:meth:`run_spawned`): it is kept in ``spawned``."""
        self.spawned.append(work)

    async def run_spawned(self) -> None:
        """Run the work spawned so far, and whatever it spawns, to completion."""
        while self.spawned:
            work = self.spawned.pop(0)
            await work

    async def sleep(self, seconds: float) -> None:
        if isinstance(self.clock, VirtualClock):
            self.clock.advance(seconds)

    async def aclose(self) -> None:
        for work in self.spawned:
            work.close()
        self.spawned.clear()
        await self.context.services.aclose()

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        raise NotImplementedError(_NO_FRAMEWORK)

    def filter_plugins_to_run(self, state: CycleState) -> list[tuple[str, FilterPlugin]]:
        raise NotImplementedError(_NO_FRAMEWORK)

    def runs_pre_filter_extensions(self, state: CycleState) -> bool:
        raise NotImplementedError(_NO_FRAMEWORK)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        raise NotImplementedError(_NO_FRAMEWORK)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        raise NotImplementedError(_NO_FRAMEWORK)


_NO_FRAMEWORK = "a PluginHandle runs one plugin; build a Framework over handle.context to run plugin chains"


def batch_of(snapshot: Snapshot, names: Sequence[str] | None = None) -> NodeBatch:
    """A NodeBatch over every node of ``snapshot`` (snapshot order) or over ``names`` in that order."""
    if names is None:
        return NodeBatch(snapshot.table, snapshot.slots.copy())
    slots = [snapshot.by_name[name].slot for name in names]
    return NodeBatch(snapshot.table, np.asarray(slots, dtype=np.int64))


def expand_batch_result(result: BatchFilterResult | None, size: int) -> list[Status | None]:
    """One entry per node: None where the node passed, else its Status."""
    if result is None:
        return [None] * size
    assert result.codes.shape == (size,), f"batch result has {result.codes.shape} codes for {size} nodes"
    return [None if code == 0 else result.statuses[code - 1] for code in result.codes.tolist()]


def pre_filter(
    plugin: PreFilterPlugin, state: CycleState, pod: PodInfo, snapshot: Snapshot
) -> PreFilterResult | Status | None:
    return plugin.pre_filter(state, pod, snapshot.node_infos)


def pre_score(plugin: PreScorePlugin, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
    return plugin.pre_score(state, pod, snapshot.node_infos)


def filter_nodes(plugin: FilterPlugin, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> list[Status | None]:
    """The per-node Filter on every node, in snapshot order."""
    return [plugin.filter(state, pod, info) for info in snapshot.node_infos]


def filter_nodes_batch(
    plugin: BatchFilterPlugin, state: CycleState, pod: PodInfo, snapshot: Snapshot
) -> list[Status | None]:
    """The batch Filter over every node, expanded to one entry per node in snapshot order."""
    batch = batch_of(snapshot)
    return expand_batch_result(plugin.filter_batch(state, pod, batch), len(batch))


def score_nodes(plugin: ScorePlugin, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> list[int]:
    return [plugin.score(state, pod, info) for info in snapshot.node_infos]


def score_nodes_batch(plugin: BatchScorePlugin, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> list[int]:
    batch = batch_of(snapshot)
    scores = np.asarray(plugin.score_batch(state, pod, batch))
    assert scores.shape == (len(batch),), f"score_batch returned shape {scores.shape} for {len(batch)} nodes"
    return [int(s) for s in scores.tolist()]


def normalize(plugin: ScoreNormalizer, state: CycleState, pod: PodInfo, scores: Sequence[int]) -> list[int]:
    """Run NormalizeScore on a copy of ``scores`` and return the result (a failing status raises)."""
    array = np.asarray(scores, dtype=np.int64).copy()
    status = plugin.normalize_score(state, pod, array)
    if status is not None:
        raise AssertionError(f"normalize_score failed: {status}")
    return [int(s) for s in array.tolist()]
