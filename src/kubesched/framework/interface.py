"""The plugin API: one Protocol per extension point, and the Handle plugins are built with.

A plugin is any object with a ``name`` and the methods of the points it serves; the runtime sorts
plugins into per-point lists once, when a framework is built. CPU-bound points are synchronous;
PreBind, Bind and PostBind are ``async`` because they talk to the API server or a cluster agent.
``None`` means success everywhere a Status is returned. A Filter or Score plugin may also offer
``filter_batch`` / ``score_batch`` over a :class:`NodeBatch`; results must equal the per-node method.
A Filter plugin whose answers come from elsewhere (a policy engine) offers ``prefetch_filter``: the runtime
awaits it before each Filter batch, so the fetching happens off the event loop and Filter only reads.

The :class:`Handle` is what the framework runtime gives a plugin at construction (kube-scheduler's
``framework.Handle``): the cycle's snapshot, the nominator, the waiting pods, listers, the API client, the
event recorder, the clock, named shared services and the framework's own runners.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kubesched.api.objects import Pod
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim
from kubesched.clock import Clock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ClusterEventWithHint
from kubesched.framework.listers import Listers
from kubesched.framework.node_table import BatchFilterResult, IntArray, NodeBatch
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_PERMIT_TIMEOUT_SECONDS = 15 * 60.0


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue, with the bookkeeping the queue and QueueSort need."""

    pod_info: PodInfo
    timestamp: float
    # The order in which the queue took the timestamps: it breaks ties between equal ones as a clock that moves
    # between any two queue steps would (kube-scheduler's does; a virtual clock may stand still).
    stamp_order: int = 0
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_count: int = 0
    consecutive_errors_count: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gating_plugin: str = ""

    @property
    def pod(self) -> Pod:
        return self.pod_info.pod


class Plugin(Protocol):
    @property
    def name(self) -> str: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod_info: PodInfo) -> Status | None: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class KeyedQueueSortPlugin(QueueSortPlugin, Protocol):
    """A QueueSort whose order is also a sort key: ``less(a, b)`` exactly when ``sort_key(a) < sort_key(b)``
    (keys of plain values: numbers, strings, tuples of them). The queue then orders activeQ by the keys."""

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[object, ...]: ...


class PreFilterExtensions(Protocol):
    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None: ...

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        """``None`` or a PreFilterResult is success; a Status rejects, errors or skips my Filter."""
        ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


SkipWrites = Callable[[CycleState], None]
"""The CycleState writes a plugin's PreFilter or PreScore makes when it returns Skip (see :class:`PreFilterShapeSkip`);
:func:`~kubesched.framework.cycle_state.no_writes` for a Skip that writes nothing."""


@runtime_checkable
class PreFilterShapeSkip(Protocol):
    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        """If ``pre_filter`` returns Skip for *every* pod of ``shape``, in every cluster state: the writes that
        call makes to CycleState (:func:`~kubesched.framework.cycle_state.no_writes` for none); else ``None``.

        The runtime asks once per shape and then, for pods of that shape, makes the writes and marks the plugin
        skipped instead of calling ``pre_filter`` (in cycles whose plugin calls are timed it calls it as ever).
        Answer only what the shape's bits prove; ``None`` is always correct. A property test per plugin holds
        the answer to the plugin's own PreFilter on generated pods."""
        ...


@runtime_checkable
class PreScoreShapeSkip(Protocol):
    def pre_score_skip(self, shape: PodShape) -> SkipWrites | None:
        """As :meth:`PreFilterShapeSkip.pre_filter_skip`, for ``pre_score``."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None: ...


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        """Filter every node of ``nodes`` at once; ``None`` means all pass."""
        ...


@runtime_checkable
class NodeOnlyFilter(Protocol):
    def filter_ignores_node_pods(self) -> bool:
        """True when Filter reads only the node object and the incoming pod, never the pods on the node nor
        state a PreFilter AddPod/RemovePod extension changes: nominated pods added to the node cannot change
        its verdict, so the nominated-pods pass leaves the plugin out."""
        ...


@runtime_checkable
class AddedPodsBatchFilter(Protocol):
    def filter_batch_with_added_pods(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, added: Sequence[Sequence[PodInfo]]
    ) -> BatchFilterResult | None:
        """Filter's verdicts for ``nodes`` as if node i also ran the pods ``added[i]`` (none of them on it
        yet): the nominated-pods pass for many nodes at once. Must equal :meth:`FilterPlugin.filter` on a
        clone of each node with those pods added; ``None`` means all pass."""
        ...


@runtime_checkable
class FilterPrefetcher(Protocol):
    async def prefetch_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        """Fetch what Filter will read about ``nodes`` (remote decisions), before the runtime filters them.

        Awaited by the runtime before every Filter batch of the node search, and before Filter runs on a
        single node (the nominated node); the cycle's snapshot does not change meanwhile. Keep the result
        in the cycle state; ``None`` is success, an Error status aborts the cycle, a plugin's own failure
        policy may instead record the failure and let Filter decide.
        """
        ...


NodeToStatus = Mapping[str, Status]


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What PostFilter proposes for the pod's nomination: a node name nominates it there, ``""`` clears its
    nomination, ``None`` leaves it as it is (kube-scheduler's ModeOverride and ModeNoop)."""

    nominated_node_name: str | None = None


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered_node_status: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status | None]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        """The node's raw score; raise to fail the cycle with an Error status."""
        ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray: ...


@runtime_checkable
class ScoreNormalizer(Protocol):
    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        """Rewrite ``scores`` (one per feasible node, search order) in place into [0, 100]."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """(status, timeout seconds); a WAIT status holds the pod until allowed, rejected or timed out."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Bind the pod; a SKIP status passes the pod to the next Bind plugin."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class BindingLimiter(Protocol):
    """A plugin that bounds its profile's binding cycles in flight (ours; kube-scheduler has no such point).

    ``max_bindings_in_flight`` is read once, when the framework is built: ``None`` is no bound, else ``n >= 1``.
    The scheduler counts the profile's binding cycles (from the end of the scheduling cycle until the pod is
    bound or given back) and pops no pod while a profile has ``n`` of them: a burst then waits in the queue, in
    its order, instead of between pop and commit. The count is the scheduler's, so it never drifts.
    """

    def max_bindings_in_flight(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class DecisionCacheStats:
    """Lookups of a plugin's decision cache since the plugin was built: found there, or not yet."""

    hits: int
    misses: int


@runtime_checkable
class DecisionCacheReporter(Protocol):
    """A plugin that keeps policy decisions between attempts and reports its cache's lookups (ours).

    The scheduler's metrics read it at scrape time, summed over every plugin of every profile, as
    ``kubesched_policy_decision_cache_hits_total`` and ``..._misses_total``; a plugin reports here instead of
    being looked into, so it may keep its cache however it likes.
    """

    def decision_cache_stats(self) -> DecisionCacheStats: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]: ...


class WaitingPod(Protocol):
    """A pod held at Permit; plugins may allow or reject it through the Handle."""

    @property
    def pod(self) -> PodInfo: ...

    @property
    def node_name(self) -> str: ...

    def pending_plugins(self) -> list[str]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


# The events API refuses a note longer than this (events.k8s.io/v1 validation); kube-scheduler truncates.
EVENT_MESSAGE_LIMIT = 1024


def truncate_event_message(message: str) -> str:
    if len(message) <= EVENT_MESSAGE_LIMIT:
        return message
    return message[: EVENT_MESSAGE_LIMIT - 4] + " ..."


class EventRecorder(Protocol):
    def event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None: ...


class ApiError(Exception):
    """An API call failed (the backend translates its client's exceptions into this)."""


class ClusterClient(Protocol):
    """The API operations plugins may perform (DefaultBinder binds through it, DefaultPreemption evicts)."""

    async def bind(self, pod: Pod, node_name: str) -> None: ...

    async def preempt(self, victim: Pod, preemptor: Pod) -> None:
        """Evict ``victim`` to make room for ``preemptor``, as kube-scheduler's preemption does: add the
        ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) to its status, then delete it. A
        victim that is already gone counts as evicted; any other failure raises :class:`ApiError`."""
        ...

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        """Remove ``status.nominatedNodeName`` from a pending pod (nothing to do if it has none or is gone);
        raises :class:`ApiError`."""
        ...

    async def compare_and_set_annotation(self, pod: Pod, key: str, expected: str | None, value: str) -> bool:
        """Set annotation ``key`` of ``pod`` (the same uid) to ``value`` if it is ``expected`` now (None: absent);
        whether it was. Two writers that read the same ``expected`` cannot both succeed (ClusterBind records its
        commit this way). Raises :class:`ApiError` when the pod is gone or the write fails."""
        ...

    async def bind_volumes(
        self,
        pod: Pod,
        node_name: str,
        bindings: Sequence[tuple[PersistentVolume, PersistentVolumeClaim]],
        provisions: Sequence[PersistentVolumeClaim],
    ) -> None:
        """VolumeBinding's PreBind: bind each (volume, claim) pair (the volume carries the ``claimRef`` to
        write) and have each claim provisioned on ``node_name`` (it carries the ``selected-node``
        annotation); return once the claims are bound. Raises :class:`ApiError` when that cannot be done."""
        ...


class PodNominator(Protocol):
    """Pods nominated to nodes (by preemption, or from ``status.nominatedNodeName``); lives with the queue."""

    def add_nominated_pod(self, pod: PodInfo, node_name: str) -> None: ...

    def delete_nominated_pod_if_exists(self, uid: str) -> None: ...

    def update_nominated_pod(self, pod: PodInfo) -> None:
        """Replace the PodInfo of a nominated pod by its latest version (no-op if it is not nominated)."""
        ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def nominated_node_names(self) -> frozenset[str]:
        """The nodes that have at least one nominated pod."""
        ...

    def node_generations(self) -> Mapping[str, int]:
        """Per node that has nominated pods, a stamp that changes whenever they do (a read-only view), so that
        what a plugin derives from a node's nominated pods is recomputed only when they change."""
        ...


class Handle(Protocol):
    """What a plugin gets at construction (the framework runtime itself implements it)."""

    @property
    def profile_name(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def client(self) -> ClusterClient: ...

    @property
    def event_recorder(self) -> EventRecorder: ...

    def snapshot(self) -> Snapshot:
        """The snapshot of the cycle in progress (or of the last one), immutable until the next cycle."""
        ...

    @property
    def nominator(self) -> PodNominator: ...

    @property
    def listers(self) -> Listers:
        """Typed listers of the objects plugins read besides pods and nodes (namespaces, PriorityClasses,
        PDBs, Services and workloads, volumes and storage)."""
        ...

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]: ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def reject_waiting_pod(self, uid: str) -> bool: ...

    def activate(self, pods: Iterable[Pod]) -> None: ...

    def get_pod(self, uid: str) -> Pod | None:
        """The latest version of a pod this scheduler is placing (pending or waiting at Permit)."""
        ...

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run background work (e.g. an approval check) tracked by the scheduler, never blocking a cycle."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep on the scheduler's clock (virtual in simulation), from spawned work."""
        ...

    def service(self, kind: str, spec: Hashable) -> object:
        """The scheduler's shared service of ``kind`` for ``spec`` (one per distinct spec, made on first
        request; e.g. :func:`kubesched.policyapi.contract.policy_client`). Raises KeyError for an unknown kind."""
        ...

    def observe_preemption_attempt(self) -> None:
        """Count one preemption attempt (``scheduler_preemption_attempts_total``); nothing without metrics."""
        ...

    def observe_preemption_victims(self, victims: int) -> None:
        """Record how many victims one preemption evicts (``scheduler_preemption_victims``)."""
        ...

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Filter ``node_info`` as if the pods nominated to it with priority ≥ the pod's were running there,
        then (if any were added) as it is; both must pass (kube-scheduler's two-pass filtering)."""
        ...

    def filter_plugins_to_run(self, state: CycleState) -> Sequence[tuple[str, FilterPlugin]]:
        """The Filter plugins :meth:`run_filter_plugins_with_nominated_pods` calls for ``state``, in order (those
        PreFilter did not skip), so that a plugin answering for them in bulk can check it knows every one."""
        ...

    def runs_pre_filter_extensions(self, state: CycleState) -> bool:
        """Whether AddPod/RemovePod call any plugin for ``state`` (a PreFilter not skipped has extensions)."""
        ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...


PluginFactory = Callable[[Any, Handle], Plugin]
"""factory(args, handle) -> plugin; ``args`` is the plugin's validated Args instance or None."""
