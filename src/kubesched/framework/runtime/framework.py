"""The framework runtime: one per profile, built once from config and the registry; it is the plugins' Handle.

As kube-scheduler's ``frameworkImpl``, a :class:`Framework` both runs its plugins and *is* the
:class:`~kubesched.framework.interface.Handle` they were built with: the cycle's snapshot, the nominator,
waiting pods, named services, the event recorder, the client, the clock and the runners a plugin may call
(``run_filter_plugins_with_nominated_pods`` and the PreFilter extensions, for preemption). What it needs
from the scheduler comes in one :class:`FrameworkContext`.

The scheduler calls the ``run_*`` methods in the order of the scheduling and binding cycles. Plugins
are instantiated once (a plugin serving several points is one object), sorted into typed per-point lists
and checked at build time (a plugin configured at a point whose method it lacks is a
:class:`FrameworkBuildError`, as upstream's ``updatePluginList``); a plugin that raises in any runner
yields an Error status for that pod, never a crash. Filter and Score have two interchangeable paths: per
node (the reference) and batch (numpy over a :class:`NodeBatch`, using ``filter_batch``/``score_batch``
where a plugin has them). ``run_prefetch`` awaits the plugins that fetch Filter's answers off the loop.

Metrics (optional, :class:`FrameworkMetrics`; kube-scheduler's names in :mod:`kubesched.scheduler.metrics`):
a framework built with a recorder observes every runner's duration and outcome
(``scheduler_framework_extension_point_duration_seconds``; Filter is observed once per cycle by the node
search instead), and in the cycles the recorder samples (~10 %) every plugin call
(``scheduler_plugin_execution_duration_seconds``; a ``filter_batch``/``score_batch`` call is one observation
for its whole batch). Each runner checks once for a recorder: without one it runs its plugins at once; with
one it runs them through one helper that observes the extension point (``Framework._observed``; the timing
helpers are in :mod:`kubesched.framework.runtime.instrumentation`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from kubesched.config.catalog import PLUGIN_INTERFACES
from kubesched.config.types import ProfileConfig
from kubesched.errors import KubeschedError
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ClusterEventWithHint
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    MAX_PERMIT_TIMEOUT_SECONDS,
    MIN_NODE_SCORE,
    AddedPodsBatchFilter,
    BatchFilterPlugin,
    BatchScorePlugin,
    BindingLimiter,
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    FilterPrefetcher,
    KeyedQueueSortPlugin,
    NodeOnlyFilter,
    NodeToStatus,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScoreNormalizer,
    SkipWrites,
)
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.runtime.handle import ContextHandle, FrameworkContext
from kubesched.framework.runtime.instrumentation import (
    BIND,
    FILTER,
    FILTER_PREFETCH,
    PERMIT,
    POST_BIND,
    POST_FILTER,
    PRE_BIND,
    PRE_ENQUEUE,
    PRE_FILTER,
    PRE_FILTER_EXTENSION_ADD_POD,
    PRE_FILTER_EXTENSION_REMOVE_POD,
    PRE_SCORE,
    RESERVE,
    SCORE,
    SCORE_EXTENSION_NORMALIZE,
    UNRESERVE,
    FrameworkMetrics,
    Record,
    measure,
    measure_async,
    timed,
    timed_async,
    timed_scores,
)
from kubesched.framework.runtime.outcomes import FilterOutcome, PreFilterOutcome, ScoreOutcome
from kubesched.framework.runtime.registry import POINT_METHODS, Registry
from kubesched.framework.runtime.score_kernel import ScorePlan, ScorePluginEntry, fused_scores, make_plan
from kubesched.framework.runtime.services import close_quietly
from kubesched.framework.runtime.waiting_pods import WaitingPodEntry
from kubesched.framework.status import REJECTED_CODES, Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult

log = logging.getLogger(__name__)

MAX_ATTRIBUTIONS = 4096
"""Statuses kept with their plugin attributed (plugins that make a new status per call would grow it)."""

# Points whose plugins can reject a pod, so their queueing hints decide its requeue.
_REJECTING_POINTS = ("preEnqueue", "preFilter", "filter", "reserve", "permit")

R = TypeVar("R")
P = ParamSpec("P")

class FrameworkBuildError(KubeschedError):
    """A profile that cannot be built; ``problems`` holds one line per plugin that failed (``str`` joins them)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Framework(ContextHandle):
    """The plugins of one profile, sorted into typed per-point lists, the code that runs them, and their Handle."""

    def __init__(
        self,
        profile: ProfileConfig,
        registry: Registry,
        context: FrameworkContext,
        *,
        use_batch: bool = True,
        metrics: FrameworkMetrics | None = None,
    ) -> None:
        super().__init__(context, profile.scheduler_name)
        self.metrics = metrics
        self.percentage_of_nodes_to_score: int | None = profile.percentage_of_nodes_to_score
        self.use_batch = use_batch
        points = profile.plugins
        self._points = points
        args: Mapping[str, object] = profile.plugin_args
        self.plugins: dict[str, Plugin] = {}
        failed: dict[str, str] = {}  # every plugin is tried, so one error does not hide the next
        for refs in points.values():
            for ref in refs:
                if ref.name in self.plugins or ref.name in failed:
                    continue
                try:
                    self.plugins[ref.name] = self._build_plugin(ref.name, registry, args.get(ref.name))
                except FrameworkBuildError as exc:
                    failed[ref.name] = str(exc)
        if failed:
            raise FrameworkBuildError(*failed.values())

        self.pre_enqueue_plugins: list[tuple[str, PreEnqueuePlugin]] = self._at("preEnqueue")
        queue_sort: list[tuple[str, QueueSortPlugin]] = self._at("queueSort")
        if len(queue_sort) != 1:
            raise FrameworkBuildError(
                f"only one queue sort plugin required for profile with scheduler name "
                f'"{self.profile_name}", but got {len(queue_sort)}'
            )
        self.queue_sort: QueueSortPlugin = queue_sort[0][1]
        self.pre_filter_plugins: list[tuple[str, PreFilterPlugin]] = self._at("preFilter")
        self.filter_plugins: list[tuple[str, FilterPlugin]] = self._at("filter")
        self.post_filter_plugins: list[tuple[str, PostFilterPlugin]] = self._at("postFilter")
        self.pre_score_plugins: list[tuple[str, PreScorePlugin]] = self._at("preScore")
        # Per PodShape, each PreFilter / PreScore plugin with the writes its Skip makes for every pod of that shape
        # (None: it must be called); made on first use, at most one per shape (2**7).
        self._attributions: dict[tuple[int, str], tuple[Status, Status]] = {}  # see _attributed
        self._pre_filter_plans: dict[int, _ShapePlan[PreFilterPlugin]] = {}
        self._pre_score_plans: dict[int, _ShapePlan[PreScorePlugin]] = {}
        # Every plugin called: the plan of cycles whose calls are timed (they observe every plugin, as ever).
        self._pre_filter_calls: _ShapePlan[PreFilterPlugin] = tuple((n, p, None) for n, p in self.pre_filter_plugins)
        self._pre_score_calls: _ShapePlan[PreScorePlugin] = tuple((n, p, None) for n, p in self.pre_score_plugins)
        self.score_plugins: list[ScorePluginEntry] = [
            ScorePluginEntry(
                name=name,
                plugin=plugin,
                weight=weight,
                batch=plugin if isinstance(plugin, BatchScorePlugin) else None,
                normalizer=plugin if isinstance(plugin, ScoreNormalizer) else None,
            )
            for (name, plugin), weight in zip(
                self._at("score"), (ref.weight or 1 for ref in points.get("score", ())), strict=True
            )
        ]
        self._score_plans: dict[frozenset[str], ScorePlan] = {}
        self.reserve_plugins: list[tuple[str, ReservePlugin]] = self._at("reserve")
        self.permit_plugins: list[tuple[str, PermitPlugin]] = self._at("permit")
        self.pre_bind_plugins: list[tuple[str, PreBindPlugin]] = self._at("preBind")
        self.bind_plugins: list[tuple[str, BindPlugin]] = self._at("bind")
        self.post_bind_plugins: list[tuple[str, PostBindPlugin]] = self._at("postBind")
        if not self.bind_plugins:
            raise FrameworkBuildError(
                f'at least one bind plugin is needed for profile with scheduler name "{self.profile_name}"'
            )
        self._batch_filter: dict[str, BatchFilterPlugin] = {
            name: plugin for name, plugin in self.filter_plugins if isinstance(plugin, BatchFilterPlugin)
        }
        # Per set of plugins PreFilter skipped, the Filter plugins left, each with its batch form on the batch path.
        self._filter_plans: dict[frozenset[str], tuple[tuple[str, FilterPlugin, BatchFilterPlugin | None], ...]] = {}
        self.prefetchers: list[tuple[str, FilterPrefetcher]] = [
            (name, plugin) for name, plugin in self.filter_plugins if isinstance(plugin, FilterPrefetcher)
        ]
        # The tightest bound any enabled plugin sets on this profile's binding cycles in flight (None: unbounded).
        bounds = [
            bound
            for plugin in self.plugins.values()
            if isinstance(plugin, BindingLimiter) and (bound := plugin.max_bindings_in_flight()) is not None
        ]
        self.max_bindings_in_flight: int | None = min(bounds) if bounds else None
        rejecting: dict[str, Plugin] = {}
        for point in _REJECTING_POINTS:
            for ref in points.get(point, ()):
                rejecting[ref.name] = self.plugins[ref.name]
        self.rejecting_plugins = rejecting

    def _build_plugin(self, name: str, registry: Registry, args: object) -> Plugin:
        registration = registry.get(name)
        if registration is None or registration.factory is None:
            raise FrameworkBuildError(f'plugin "{name}" does not exist')
        try:
            return registration.factory(args, self)
        except KubeschedError as exc:
            raise FrameworkBuildError(f'initializing plugin "{name}": {exc}') from exc
        except Exception as exc:
            raise FrameworkBuildError(f'initializing plugin "{name}": {type(exc).__name__}: {exc}') from exc

    def _at(self, point: str) -> list[tuple[str, Any]]:
        """The plugins configured at ``point``, checked to have the point's method (typed by the caller)."""
        method = POINT_METHODS[point]
        found: list[tuple[str, Any]] = []
        for ref in self._points.get(point, ()):
            plugin = self.plugins[ref.name]
            if not callable(getattr(plugin, method, None)):
                raise FrameworkBuildError(f'plugin "{ref.name}" does not extend {PLUGIN_INTERFACES[point]} plugin')
            found.append((ref.name, plugin))
        return found

    # ---- metrics a plugin reports through its Handle ----------------------------------------

    def observe_preemption_attempt(self) -> None:
        if self.metrics is not None:
            self.metrics.preemption_attempted()

    def observe_preemption_victims(self, victims: int) -> None:
        if self.metrics is not None:
            self.metrics.preemption_victims_selected(victims)

    # ---- instrumentation ---------------------------------------------------------------------
    #
    # A runner observed as a whole dispatches to its body: without a recorder it calls the body at once, with
    # None for the plugin timing; with one, through _observed / _observed_async, with its cycle's
    # _plugin_timing. Runners timed per plugin only (Filter's: the node search observes Filter) read
    # _plugin_timing themselves. A framework without a recorder pays one ``is None`` check and one call per
    # runner call: the binding cycle's runners are plain functions returning their body's coroutine, so they
    # add no coroutine of their own.

    def _plugin_timing(self, state: CycleState | None) -> FrameworkMetrics | None:
        """The recorder when this cycle's plugin calls are timed, else None (``state`` None: a call outside any
        cycle, PreEnqueue). Callers check ``self.metrics is None`` first, so a framework without one never
        calls this."""
        metrics = self.metrics
        if metrics is None:
            return None
        return metrics if (metrics.sample() if state is None else metrics.sampled(state)) else None

    def _observed(
        self,
        point: str,
        body: Callable[Concatenate[FrameworkMetrics | None, P], R],
        timing: FrameworkMetrics | None,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``body(timing, *args)`` observed as one call of extension point ``point`` (its duration and status
        label; an exception is observed as Error and re-raised). ``timing``: the :meth:`_plugin_timing` of the
        call's cycle, which the body times its plugin calls with."""
        return measure(self._point_record(point), body, timing, *args, **kwargs)

    async def _observed_async(
        self,
        point: str,
        body: Callable[Concatenate[FrameworkMetrics | None, P], Awaitable[R]],
        timing: FrameworkMetrics | None,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """:meth:`_observed` for the binding cycle's async points."""
        return await measure_async(self._point_record(point), body, timing, *args, **kwargs)

    def _point_record(self, point: str) -> Record:
        metrics, profile = self.metrics, self.profile_name
        assert metrics is not None  # only runners with a recorder are observed
        return lambda status, seconds: metrics.observe_extension_point(point, status, profile, seconds)

    # ---- queue hooks -------------------------------------------------------------------------

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint] | None]:
        """Per rejecting plugin: its registered events, or None for "every event"."""
        result: dict[str, list[ClusterEventWithHint] | None] = {}
        for name, plugin in self.rejecting_plugins.items():
            if not isinstance(plugin, EnqueueExtensions):
                result[name] = None
                continue
            try:
                result[name] = list(plugin.events_to_register())
            except Exception:
                # Requeueing on every event is always correct, only slower.
                log.exception("EventsToRegister of plugin %s failed; its pods are requeued on every event", name)
                result[name] = None
        return result

    def run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        if self.metrics is None:
            return self._pre_enqueue(None, pod)
        return self._observed(PRE_ENQUEUE, self._pre_enqueue, self._plugin_timing(None), pod)

    def _pre_enqueue(self, metrics: FrameworkMetrics | None, pod: PodInfo) -> Status | None:
        for name, plugin in self.pre_enqueue_plugins:
            try:
                status = (
                    plugin.pre_enqueue(pod)
                    if metrics is None
                    else timed(metrics, name, PRE_ENQUEUE, plugin.pre_enqueue, pod)
                )
            except Exception as exc:
                return Status.error(exc, plugin=name)
            if status is not None and status.code is not Code.SUCCESS:
                return status.with_plugin(name)
        return None

    @property
    def sort_key(self) -> Callable[[QueuedPodInfo], tuple[object, ...]] | None:
        """The QueueSort plugin's sort key, if it has one (else the queue orders by :meth:`less`)."""
        plugin = self.queue_sort
        if not isinstance(plugin, KeyedQueueSortPlugin):
            return None
        name = plugin.name

        def key(qpi: QueuedPodInfo) -> tuple[object, ...]:
            try:
                return plugin.sort_key(qpi)
            except Exception:
                # As for a failing less: a pod whose key fails goes after every keyed pod, in arrival order.
                log.exception("QueueSort plugin %s failed; ordering by arrival", name)
                return (math.inf,)

        return key

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        try:
            return self.queue_sort.less(a, b)
        except Exception:
            # A broken QueueSort must not break the queue's heap: fall back to arrival order.
            log.exception("QueueSort plugin %s failed; ordering by arrival", self.queue_sort.name)
            return (a.timestamp, a.stamp_order) < (b.timestamp, b.stamp_order)

    # ---- scheduling cycle --------------------------------------------------------------------

    def _attributed(self, status: Status, plugin: str) -> Status:
        """``status.with_plugin(plugin)``, made once per status object: plugins return a few shared statuses,
        and a batch that rejects nodes attributes them every cycle."""
        key = (id(status), plugin)
        kept = self._attributions.get(key)
        if kept is not None and kept[0] is status:
            return kept[1]
        if len(self._attributions) >= MAX_ATTRIBUTIONS:
            self._attributions.clear()
        attributed = status.with_plugin(plugin)
        self._attributions[key] = (status, attributed)  # the status kept: its id is not reused meanwhile
        return attributed

    def run_pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterOutcome:
        """Run every PreFilter; Unschedulable keeps running the rest, Unresolvable stops at once.

        A plugin that has said it skips every pod of this pod's shape is not called: its Skip's writes are made
        and its Filter skipped, in its place in the order, so the outcome and the state are the call's."""
        if self.metrics is None:
            return self._pre_filter(None, state, pod, nodes)
        return self._observed(PRE_FILTER, self._pre_filter, self._plugin_timing(state), state, pod, nodes)

    def _pre_filter(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> PreFilterOutcome:
        outcome = PreFilterOutcome()
        plan = (
            _shape_plan(self._pre_filter_plans, self.pre_filter_plugins, "pre_filter_skip", pod.shape)
            if metrics is None
            else self._pre_filter_calls
        )
        for name, plugin, skip in plan:
            if skip is not None:
                skip(state)
                state.skip_filter_plugins.add(name)
                continue
            try:
                returned = (
                    plugin.pre_filter(state, pod, nodes)
                    if metrics is None
                    else timed(metrics, name, PRE_FILTER, plugin.pre_filter, state, pod, nodes)
                )
            except Exception as exc:
                outcome.status = Status.error(f'running PreFilter plugin "{name}": {exc}', plugin=name)
                return outcome
            if returned is None:
                continue
            if isinstance(returned, PreFilterResult):
                if returned.node_names is None:
                    continue
                outcome.narrowed_by.append(name)
                outcome.result = returned if outcome.result is None else outcome.result.merge(returned)
                if outcome.result.node_names is not None and not outcome.result.node_names:
                    narrowed = outcome.narrowed_by
                    message = (
                        f"node(s) didn't satisfy plugin {narrowed[0]}"
                        if len(narrowed) == 1
                        else f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowed))}] simultaneously"
                    )
                    outcome.rejected_by.update(narrowed)
                    outcome.status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message, plugin=name)
                    return outcome
                continue
            if returned.code is Code.SUCCESS:
                continue
            if returned.code is Code.SKIP:
                state.skip_filter_plugins.add(name)
                continue
            if returned.code not in REJECTED_CODES:
                outcome.status = Status.error(f'running PreFilter plugin "{name}": {returned.message}', plugin=name)
                return outcome
            outcome.rejected_by.add(name)
            if returned.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                outcome.status = returned.with_plugin(name)
                return outcome
            if outcome.status is None:
                outcome.status = returned.with_plugin(name)
        return outcome

    def filter_plugins_to_run(self, state: CycleState) -> list[tuple[str, FilterPlugin]]:
        skipped = state.skip_filter_plugins
        return [(name, plugin) for name, plugin in self.filter_plugins if name not in skipped]

    def runs_pre_filter_extensions(self, state: CycleState) -> bool:
        skipped = state.skip_filter_plugins
        for name, plugin in self.pre_filter_plugins:
            if name in skipped:
                continue
            try:
                if plugin.pre_filter_extensions() is not None:
                    return True
            except Exception:
                # The runners would turn this into an Error status: callers must go through them.
                return True
        return False

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extension("AddPod", state, pod, pod_to_add, node_info)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extension("RemovePod", state, pod, pod_to_remove, node_info)

    def _run_pre_filter_extension(
        self, which: str, state: CycleState, pod: PodInfo, other: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        metrics = None if self.metrics is None else self._plugin_timing(state)
        for name, plugin in self.pre_filter_plugins:
            if name in state.skip_filter_plugins:
                continue
            try:
                extensions = plugin.pre_filter_extensions()
                if extensions is None:
                    continue
                if metrics is not None:
                    add = which == "AddPod"
                    call = extensions.add_pod if add else extensions.remove_pod
                    point = PRE_FILTER_EXTENSION_ADD_POD if add else PRE_FILTER_EXTENSION_REMOVE_POD
                    status = timed(metrics, name, point, call, state, pod, other, node_info)
                elif which == "AddPod":
                    status = extensions.add_pod(state, pod, other, node_info)
                else:
                    status = extensions.remove_pod(state, pod, other, node_info)
            except Exception as exc:
                return Status.error(f'running {which} on PreFilter plugin "{name}": {exc}', plugin=name)
            if status is not None and status.code is not Code.SUCCESS:
                return Status.error(f'running {which} on PreFilter plugin "{name}": {status.message}', plugin=name)
        return None

    def nominated_pods_to_add(self, pod: PodInfo, node_name: str) -> list[PodInfo]:
        """The pods the nominated-pods pass adds to ``node_name``: those nominated there, other than ``pod``,
        whose priority is at least ``pod``'s."""
        return [
            other
            for other in self.context.nominator.nominated_pods_for_node(node_name)
            if other.uid != pod.uid and other.priority >= pod.priority
        ]

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, *, passes_as_is: bool = False
    ) -> Status | None:
        """Filter ``node_info`` twice: with the nominated pods of at least the pod's priority added, then as it
        is. ``passes_as_is``: the caller already knows the second pass succeeds (a batch filtered the node)."""
        nominated = self.nominated_pods_to_add(pod, node_info.name)
        if nominated:
            # Pass 1: as if the nominated pods of at least the pod's priority were running there already.
            state_with = state.clone()
            info_with = node_info.clone()
            for other in nominated:
                info_with.add_pod(other)
                status = self.run_pre_filter_extension_add_pod(state_with, pod, other, info_with)
                if status is not None:
                    return status
            status = self.run_filter(state_with, pod, info_with)
            if status is not None:
                return status
        if passes_as_is:
            return None
        # Pass 2 (or the only one): as the node is.
        return self.run_filter(state, pod, node_info)

    def run_filter_batch_with_added_pods(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, added: Sequence[Sequence[PodInfo]]
    ) -> list[Status | None] | None:
        """The first pass of :meth:`run_filter_plugins_with_nominated_pods` for many nodes that pass as they
        are, each with its pods to add, in columns; ``None`` when that cannot be done (or on the reference
        path): a PreFilter extension runs for this pod (it must see each pod added), or a plugin that reads
        the node's pods has no
        :class:`AddedPodsBatchFilter` form. Plugins that read only the node passed already and are left out."""
        if not self.use_batch or self.runs_pre_filter_extensions(state):
            return None
        steps: list[tuple[str, AddedPodsBatchFilter]] = []
        for name, candidate in self.filter_plugins_to_run(state):
            if isinstance(candidate, NodeOnlyFilter) and candidate.filter_ignores_node_pods():
                continue
            if not isinstance(candidate, AddedPodsBatchFilter):
                return None
            steps.append((name, candidate))
        verdicts: list[Status | None] = [None] * len(nodes)
        remaining = np.arange(len(nodes), dtype=np.int64)
        for name, plugin in steps:
            if not len(remaining):
                break
            picked = remaining.tolist()
            try:
                result = plugin.filter_batch_with_added_pods(
                    state, pod, NodeBatch(nodes.table, nodes.slots[remaining]), [added[i] for i in picked]
                )
            except Exception as exc:
                return [Status.error(f'running "{name}" filter plugin: {exc}', plugin=name)] * len(nodes)
            if result is None:
                continue
            for index, code in zip(picked, result.codes.tolist(), strict=True):
                if code:
                    status = result.statuses[code - 1]
                    if status.code not in REJECTED_CODES:
                        message = f'running "{name}" filter plugin: {status.message}'
                        return [Status.error(message, plugin=name)] * len(nodes)
                    verdicts[index] = status.with_plugin(name)
            remaining = remaining[result.codes == 0]
        return verdicts

    async def run_prefetch(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> Status | None:
        """Await every prefetching Filter plugin for ``batch``; the first Error aborts the cycle."""
        metrics = None if self.metrics is None else self._plugin_timing(state)
        for name, plugin in self.prefetchers:
            if name in state.skip_filter_plugins:
                continue
            try:
                status = (
                    await plugin.prefetch_filter(state, pod, batch)
                    if metrics is None
                    else await timed_async(metrics, name, FILTER_PREFETCH, plugin.prefetch_filter, state, pod, batch)
                )
            except Exception as exc:
                return Status.error(f'running "{name}" filter plugin: {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                continue
            return Status(Code.ERROR, status.message, plugin=name)
        return None

    def run_filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        """The reference path: every Filter plugin in order on one node, stopping at the first rejection."""
        metrics = None if self.metrics is None else self._plugin_timing(state)
        for name, plugin in self.filter_plugins:
            if name in state.skip_filter_plugins:
                continue
            try:
                status = (
                    plugin.filter(state, pod, node_info)
                    if metrics is None
                    else timed(metrics, name, FILTER, plugin.filter, state, pod, node_info)
                )
            except Exception as exc:
                return Status.error(f'running "{name}" filter plugin: {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.code not in REJECTED_CODES:
                return Status.error(f'running "{name}" filter plugin: {status.message}', plugin=name)
            return status.with_plugin(name)
        return None

    def run_filter_batch(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> FilterOutcome:
        """The batch path: each plugin over all candidates; a node keeps its first rejection.

        An Error on any node is returned in ``error``; the caller aborts the cycle on it.
        """
        if len(batch) == 1:
            # Each batch plugin's numpy calls cost tens of microseconds whatever the batch size, and the
            # per-plugin loop below as much again; one node (a DaemonSet pod's PreFilterResult) is cheaper on
            # the reference path, which gives the same status, or the same error, for a single node.
            status = self.run_filter(state, pod, batch.info(0))
            if status is None:
                return FilterOutcome(np.zeros(1, dtype=np.int64), [])
            if status.code is Code.ERROR:
                return FilterOutcome(np.zeros(1, dtype=np.int64), [], status)
            return FilterOutcome(np.ones(1, dtype=np.int64), [status])
        status_ids = np.zeros(len(batch), dtype=np.int64)
        statuses: list[Status] = []
        metrics = None if self.metrics is None else self._plugin_timing(state)
        for name, plugin, batch_plugin in self._filter_plan(state):
            if batch_plugin is not None:
                try:
                    result = (
                        batch_plugin.filter_batch(state, pod, batch)
                        if metrics is None
                        else timed(metrics, name, FILTER, batch_plugin.filter_batch, state, pod, batch)
                    )
                except Exception as exc:
                    return _error_outcome(len(batch), f'running "{name}" filter plugin: {exc}', name)
                if result is None:
                    continue
                if not statuses and len(result.statuses) == 1:
                    # The first rejecting plugin, with one status (a policy's one denial reason, say): every node is
                    # still feasible and the remap would be the identity, so the codes are the status ids (copied:
                    # later plugins write into them). The status counts only if some node has it.
                    if not result.codes.any():
                        continue
                    status = result.statuses[0]
                    if status.code not in REJECTED_CODES:
                        return _error_outcome(len(batch), f'running "{name}" filter plugin: {status.message}', name)
                    statuses.append(self._attributed(status, name))
                    status_ids = result.codes.astype(np.int64)
                    continue
                # Only statuses that reach a still-feasible node count (the per-node path never asks this
                # plugin about nodes an earlier filter rejected), and only those are copied. While no node has
                # been rejected, every node is still feasible: the result's codes are remapped whole.
                if statuses:
                    newly = (status_ids == 0) & (result.codes > 0)
                    codes = result.codes[newly]
                else:
                    codes = result.codes
                remap = np.zeros(len(result.statuses) + 1, dtype=np.int64)
                for code in np.flatnonzero(np.bincount(codes)).tolist():  # the distinct codes, ascending
                    if code == 0:
                        continue
                    status = result.statuses[code - 1]
                    if status.code not in REJECTED_CODES:
                        return _error_outcome(len(batch), f'running "{name}" filter plugin: {status.message}', name)
                    statuses.append(self._attributed(status, name))
                    remap[code] = len(statuses)
                if statuses:
                    if codes is result.codes:
                        status_ids = remap[codes]
                    else:
                        status_ids[newly] = remap[codes]
                continue
            interned: dict[Status, int] = {}
            for index in np.flatnonzero(status_ids == 0).tolist():
                try:
                    status = (
                        plugin.filter(state, pod, batch.info(index))
                        if metrics is None
                        else timed(metrics, name, FILTER, plugin.filter, state, pod, batch.info(index))
                    )
                except Exception as exc:
                    return _error_outcome(len(batch), f'running "{name}" filter plugin: {exc}', name)
                if status is None or status.code is Code.SUCCESS:
                    continue
                if status.code not in REJECTED_CODES:
                    return _error_outcome(len(batch), f'running "{name}" filter plugin: {status.message}', name)
                status = status.with_plugin(name)
                status_id = interned.get(status)
                if status_id is None:
                    statuses.append(status)
                    status_id = interned[status] = len(statuses)
                status_ids[index] = status_id
        return FilterOutcome(status_ids, statuses)

    def _filter_plan(self, state: CycleState) -> tuple[tuple[str, FilterPlugin, BatchFilterPlugin | None], ...]:
        skipped = state.skip_filter_plugins
        key = frozenset(skipped)
        plan = self._filter_plans.get(key)
        if plan is None:
            # Few distinct skip sets occur (one per pod shape and cluster state); bounded all the same.
            if len(self._filter_plans) >= 64:
                self._filter_plans.clear()
            plan = self._filter_plans[key] = tuple(
                (name, plugin, self._batch_filter.get(name) if self.use_batch else None)
                for name, plugin in self.filter_plugins
                if name not in skipped
            )
        return plan

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, filtered: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        if self.metrics is None:
            return self._post_filter(None, state, pod, filtered)
        return self._observed(POST_FILTER, self._post_filter, self._plugin_timing(state), state, pod, filtered)

    def _post_filter(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, filtered: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        reasons: list[str] = []
        result: PostFilterResult | None = None
        for name, plugin in self.post_filter_plugins:
            try:
                outcome, status = (
                    plugin.post_filter(state, pod, filtered)
                    if metrics is None
                    else timed(metrics, name, POST_FILTER, plugin.post_filter, state, pod, filtered)
                )
            except Exception as exc:
                return None, Status.error(f'running PostFilter plugin "{name}": {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                return outcome, Status(Code.SUCCESS, plugin=name)
            if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return outcome, status.with_plugin(name)
            if status.code is not Code.UNSCHEDULABLE:
                # Upstream passes the plugin's own text on (AsStatus(s.AsError())): it ends the FailedScheduling
                # message.
                return None, Status(Code.ERROR, *status.reasons, plugin=name, cause=status.cause)
            reasons.extend(status.reasons)
            # A result naming no node ("") still means something: clear the pod's nomination (upstream's
            # ModeOverride); only None is a no-op.
            if outcome is not None and outcome.nominated_node_name is not None:
                result = outcome
        return result, Status(Code.UNSCHEDULABLE, *reasons)

    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        """Run every PreScore (a plugin that skips every pod of this pod's shape as in :meth:`run_pre_filter`)."""
        if self.metrics is None:
            return self._pre_score(None, state, pod, nodes)
        return self._observed(PRE_SCORE, self._pre_score, self._plugin_timing(state), state, pod, nodes)

    def _pre_score(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        plan = (
            _shape_plan(self._pre_score_plans, self.pre_score_plugins, "pre_score_skip", pod.shape)
            if metrics is None
            else self._pre_score_calls
        )
        for name, plugin, skip in plan:
            if skip is not None:
                skip(state)
                state.skip_score_plugins.add(name)
                continue
            try:
                status = (
                    plugin.pre_score(state, pod, nodes)
                    if metrics is None
                    else timed(metrics, name, PRE_SCORE, plugin.pre_score, state, pod, nodes)
                )
            except Exception as exc:
                return Status.error(f'running PreScore plugin "{name}": {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.code is Code.SKIP:
                state.skip_score_plugins.add(name)
                continue
            return Status.error(f'running PreScore plugin "{name}": {status.message}', plugin=name)
        return None

    def run_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> ScoreOutcome | Status:
        """Score, normalize and weight every non-skipped plugin over the feasible nodes in ``batch``.

        On the batch path, in a cycle whose plugin calls are not timed, the fused kernel
        (:mod:`kubesched.framework.runtime.score_kernel`) answers; whatever it declines (an error, a score out
        of range) goes through the reference loop below, which also serves the per-node path and timed cycles.
        """
        if self.metrics is None:
            return self._score(None, state, pod, batch)
        return self._observed(SCORE, self._score, self._plugin_timing(state), state, pod, batch)

    def _score(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, batch: NodeBatch
    ) -> ScoreOutcome | Status:
        if metrics is None and self.use_batch:
            fused = fused_scores(self._score_plan(state), state, pod, batch)
            if fused is not None:
                return ScoreOutcome(fused.per_plugin, fused.totals, fused.raw)
        return self._run_score_plugins(state, pod, batch, metrics)

    def _score_plan(self, state: CycleState) -> ScorePlan:
        skipped = state.skip_score_plugins
        key = frozenset(skipped) if skipped else frozenset()
        plan = self._score_plans.get(key)
        if plan is None:
            # Few distinct skip sets occur (one per pod shape, at most 2**plugins); bounded all the same.
            if len(self._score_plans) >= 64:
                self._score_plans.clear()
            plan = self._score_plans[key] = make_plan(self.score_plugins, key)
        return plan

    def _run_score_plugins(
        self, state: CycleState, pod: PodInfo, batch: NodeBatch, metrics: FrameworkMetrics | None
    ) -> ScoreOutcome | Status:
        """The reference: one plugin at a time, each checked for range, weighted and added up."""
        totals = np.zeros(len(batch), dtype=np.int64)
        per_plugin: dict[str, IntArray] = {}
        raw: dict[str, IntArray] = {}
        for entry in self.score_plugins:
            if entry.name in state.skip_score_plugins:
                continue
            try:
                if metrics is not None:
                    scores = timed_scores(metrics, entry, state, pod, batch, self.use_batch)
                elif self.use_batch and entry.batch is not None:
                    scores = np.asarray(entry.batch.score_batch(state, pod, batch), dtype=np.int64)
                else:
                    scores = np.fromiter(
                        (entry.plugin.score(state, pod, info) for info in batch.infos),
                        dtype=np.int64,
                        count=len(batch),
                    )
                raw[entry.name] = scores
                if entry.normalizer is not None:
                    # NormalizeScore works in place: on a copy, so the raw scores stay to explain (and an array
                    # the plugin keeps is never written).
                    scores = scores.copy()
                    status = (
                        entry.normalizer.normalize_score(state, pod, scores)
                        if metrics is None
                        else timed(
                            metrics,
                            entry.name,
                            SCORE_EXTENSION_NORMALIZE,
                            entry.normalizer.normalize_score,
                            state,
                            pod,
                            scores,
                        )
                    )
                    if status is not None and status.code is not Code.SUCCESS:
                        return Status.error(f'plugin "{entry.name}" failed with: {status.message}', plugin=entry.name)
            except Exception as exc:
                return Status.error(f'plugin "{entry.name}" failed with: {exc}', plugin=entry.name)
            highest, lowest = (int(scores.max()), int(scores.min())) if len(scores) else (0, 0)
            if highest > MAX_NODE_SCORE or lowest < MIN_NODE_SCORE:
                bad = highest if highest > MAX_NODE_SCORE else lowest
                return Status.error(
                    f'plugin "{entry.name}" returns an invalid score {bad}, it should in the range of '
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                )
            per_plugin[entry.name] = scores
            totals += scores * entry.weight
        return ScoreOutcome(per_plugin, totals, raw)

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        if self.metrics is None:
            return self._reserve(None, state, pod, node_name)
        return self._observed(RESERVE, self._reserve, self._plugin_timing(state), state, pod, node_name)

    def _reserve(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, node_name: str
    ) -> Status | None:
        for name, plugin in self.reserve_plugins:
            try:
                status = (
                    plugin.reserve(state, pod, node_name)
                    if metrics is None
                    else timed(metrics, name, RESERVE, plugin.reserve, state, pod, node_name)
                )
            except Exception as exc:
                return Status.error(f'running Reserve plugin "{name}": {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.code in REJECTED_CODES:
                return status.with_plugin(name)
            return Status.error(f'running Reserve plugin "{name}": {status.message}', plugin=name)
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        if self.metrics is None:
            return self._unreserve(None, state, pod, node_name)
        return self._observed(UNRESERVE, self._unreserve, self._plugin_timing(state), state, pod, node_name)

    def _unreserve(self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for name, plugin in reversed(self.reserve_plugins):
            try:
                if metrics is None:
                    plugin.unreserve(state, pod, node_name)
                else:
                    timed(metrics, name, UNRESERVE, plugin.unreserve, state, pod, node_name)
            except Exception:
                log.exception("Unreserve of plugin %s failed for pod %s", name, pod.key)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        if self.metrics is None:
            return self._permit(None, state, pod, node_name)
        return self._observed(PERMIT, self._permit, self._plugin_timing(state), state, pod, node_name)

    def _permit(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, node_name: str
    ) -> Status | None:
        timeouts: dict[str, float] = {}
        for name, plugin in self.permit_plugins:
            try:
                status, timeout = (
                    plugin.permit(state, pod, node_name)
                    if metrics is None
                    else timed(metrics, name, PERMIT, plugin.permit, state, pod, node_name)
                )
            except Exception as exc:
                return Status.error(f'running Permit plugin "{name}": {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.code in REJECTED_CODES:
                return status.with_plugin(name)
            if status.code is Code.WAIT:
                timeouts[name] = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT_SECONDS)
                continue
            return Status.error(f'running Permit plugin "{name}": {status.message}', plugin=name)
        if timeouts:
            self.waiting_pods.add(WaitingPodEntry(pod, node_name, timeouts, self.clock))
            return Status(Code.WAIT, f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"')
        return None

    # ---- binding cycle -----------------------------------------------------------------------

    async def wait_on_permit(self, pod: PodInfo) -> Status | None:
        entry = self.waiting_pods.get(pod.uid)
        if entry is None:
            return None
        try:
            return await entry.wait()
        finally:
            self.waiting_pods.remove(pod.uid)

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Coroutine[Any, Any, Status | None]:
        if self.metrics is None:
            return self._pre_bind(None, state, pod, node_name)
        return self._observed_async(PRE_BIND, self._pre_bind, self._plugin_timing(state), state, pod, node_name)

    async def _pre_bind(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, node_name: str
    ) -> Status | None:
        for name, plugin in self.pre_bind_plugins:
            try:
                status = (
                    await plugin.pre_bind(state, pod, node_name)
                    if metrics is None
                    else await timed_async(metrics, name, PRE_BIND, plugin.pre_bind, state, pod, node_name)
                )
            except Exception as exc:
                return Status.error(f'running PreBind plugin "{name}": {exc}', plugin=name)
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.code in REJECTED_CODES:
                return status.with_plugin(name)
            return Status.error(f'running PreBind plugin "{name}": {status.message}', plugin=name)
        return None

    def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Coroutine[Any, Any, Status | None]:
        if self.metrics is None:
            return self._bind(None, state, pod, node_name)
        return self._observed_async(BIND, self._bind, self._plugin_timing(state), state, pod, node_name)

    async def _bind(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, node_name: str
    ) -> Status | None:
        for name, plugin in self.bind_plugins:
            try:
                status = (
                    await plugin.bind(state, pod, node_name)
                    if metrics is None
                    else await timed_async(metrics, name, BIND, plugin.bind, state, pod, node_name)
                )
            except Exception as exc:
                return Status.error(f'running Bind plugin "{name}": {exc}', plugin=name)
            if status is not None and status.code is Code.SKIP:
                continue
            if status is None or status.code is Code.SUCCESS:
                return None
            if status.code in REJECTED_CODES:
                return status.with_plugin(name)
            return Status.error(f'running Bind plugin "{name}": {status.message}', plugin=name)
        return Status(Code.SKIP, "all bind plugins skipped")

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Coroutine[Any, Any, None]:
        if self.metrics is None:
            return self._post_bind(None, state, pod, node_name)
        return self._observed_async(POST_BIND, self._post_bind, self._plugin_timing(state), state, pod, node_name)

    async def _post_bind(
        self, metrics: FrameworkMetrics | None, state: CycleState, pod: PodInfo, node_name: str
    ) -> None:
        for name, plugin in self.post_bind_plugins:
            try:
                if metrics is None:
                    await plugin.post_bind(state, pod, node_name)
                else:
                    await timed_async(metrics, name, POST_BIND, plugin.post_bind, state, pod, node_name)
            except Exception:
                log.exception("PostBind plugin %s failed for pod %s", name, pod.key)

    async def close(self) -> None:
        for plugin in self.plugins.values():
            await close_quietly(plugin, f"plugin {plugin.name}")


PluginT = TypeVar("PluginT")
_ShapePlan = tuple[tuple[str, PluginT, SkipWrites | None], ...]
"""One point's plugins in order, each with the writes of the Skip it returns for the shape (None: call it)."""


def _shape_plan(
    plans: dict[int, _ShapePlan[PluginT]], plugins: Sequence[tuple[str, PluginT]], method: str, shape: int
) -> _ShapePlan[PluginT]:
    """The plugins of one extension point for pods of ``shape``, each with the writes of its Skip when its
    ``method`` (``pre_filter_skip`` / ``pre_score_skip``) proves one; made once per shape and kept in ``plans``."""
    plan = plans.get(shape)
    if plan is None:
        plan = plans[shape] = tuple((name, plugin, _shape_skip(plugin, method, shape)) for name, plugin in plugins)
    return plan


def _shape_skip(plugin: object, method: str, shape: int) -> SkipWrites | None:
    """The plugin's answer to ``pre_filter_skip`` / ``pre_score_skip`` for ``shape``; None when it has no such
    method or the method fails (the plugin is then called, which is always correct)."""
    ask = getattr(plugin, method, None)
    if not callable(ask):
        return None
    try:
        writes = ask(PodShape(shape))
    except Exception:
        log.exception("%s of plugin %s failed; the plugin is called for every pod", method, plugin)
        return None
    return writes if callable(writes) else None


def _error_outcome(size: int, message: str, plugin: str) -> FilterOutcome:
    return FilterOutcome(np.zeros(size, dtype=np.int64), [], Status(Code.ERROR, message, plugin=plugin))
