"""NodeResourcesFit (PreFilter, Filter, PreScore, Score), kube-scheduler v1.35 behaviour.

- PreFilter computes the pod's effective request (component-helpers ``PodRequests``, no non-zero
  defaults) into CycleState under ``PreFilterNodeResourcesFit``.
- Filter collects every failing reason, in this order: "Too many pods" (pods on the node + 1 > allocatable
  pods); then, for each of cpu, memory, ephemeral-storage the pod requests (> 0), "Insufficient <name>"
  when the request exceeds allocatable − requested; then each non-zero scalar resource of the pod (in the
  pod's order) the same way, except extended resources listed in ``ignoredResources`` or whose prefix is
  in ``ignoredResourceGroups``. The status code is Unschedulable, or **UnschedulableAndUnresolvable**
  when some failing request exceeds the node's whole allocatable, so that no preemption could make room
  (since v1.34, PR #131345; "Too many pods" alone stays Unschedulable).
- PreScore/Score: the configured scoring strategy (LeastAllocated by default, MostAllocated,
  RequestedToCapacityRatio) over the configured resources, see :mod:`.resource_allocation`.

Batch forms: the Filter compares the NodeTable columns for all candidates at once, each node's failing
checks as one integer key, and interns one Status per distinct key; a recurring request keeps its keys per
node across cycles (recomputed where a node changed). Score runs the strategy over ``resources × nodes``
arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.api.resources import pod_requests
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import (
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.node_table import BatchFilterResult, IntArray, NodeBatch, NodeTable
from kubesched.framework.slot_values import ColumnCache
from kubesched.framework.status import Code, Status
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo, PreFilterResult, Resource
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import uniform_result
from kubesched.plugins.helper.hints import as_nodes, as_pods
from kubesched.plugins.helper.resources import is_extended_resource_name, is_scalar_resource_name
from kubesched.plugins.noderesources.args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NodeResourcesFitArgs,
    ScoringStrategy,
)
from kubesched.plugins.noderesources.resource_allocation import (
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
    ResourceAllocationScorer,
    Strategy,
)

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        AddedPodsBatchFilter,
        BatchFilterPlugin,
        BatchScorePlugin,
        EnqueueExtensions,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_RESOURCES_FIT
PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_RESOURCES_FIT
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


_INSUFFICIENT_CPU = insufficient("cpu")
_INSUFFICIENT_MEMORY = insufficient("memory")
_INSUFFICIENT_EPHEMERAL = insufficient("ephemeral-storage")


@dataclass(frozen=True, slots=True)
class FitRequest:
    """What Filter checks for one pod: its cpu/memory/ephemeral request and the scalar requests to check
    (non-zero, scalar names, not ignored), in the pod's order."""

    milli_cpu: int
    memory: int
    ephemeral_storage: int
    scalars: tuple[tuple[str, int], ...]

    def clone(self) -> FitRequest:
        return self


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


ResourceColumns = tuple[str, int, IntArray, IntArray, str]
"""(resource name, the pod's request, allocatable column, requested column, reason when it does not fit)."""


def resource_columns(request: FitRequest, table: NodeTable) -> list[ResourceColumns]:
    """The resources Filter compares for ``request``, in its order, with their whole-table columns: cpu,
    memory, ephemeral-storage (a request of 0 is not compared), then the request's scalars."""
    columns: list[ResourceColumns] = []
    for resource, amount, alloc, used, reason in (
        (CPU, request.milli_cpu, table.alloc_cpu, table.req_cpu, _INSUFFICIENT_CPU),
        (MEMORY, request.memory, table.alloc_memory, table.req_memory, _INSUFFICIENT_MEMORY),
        (
            EPHEMERAL_STORAGE,
            request.ephemeral_storage,
            table.alloc_ephemeral,
            table.req_ephemeral,
            _INSUFFICIENT_EPHEMERAL,
        ),
    ):
        if amount > 0:
            columns.append((resource, amount, alloc, used, reason))
    for resource, amount in request.scalars:
        if amount > 0:
            columns.append((resource, amount, *table.scalar(resource), insufficient(resource)))
    return columns


MAX_KEYED_CHECKS = 61  # "too many pods", the resources and "beyond": one bit each in an int64 key


def failure_keys(
    pod_count: IntArray, alloc_pods: IntArray, checks: Sequence[tuple[int, IntArray, IntArray, str]]
) -> IntArray:
    """Per node, which checks fail, as one integer: "too many pods" the highest bit, then each checked
    resource in order, and bit 0 when some request exceeds the node's whole allocatable (nothing running there
    could be evicted to make room). 0 or 1: the node fits."""
    keys = (pod_count + 1 > alloc_pods).astype(np.int64)
    beyond = np.zeros(pod_count.shape[0], dtype=bool)
    for amount, alloc, used, _ in checks:
        keys = (keys << 1) | (amount > alloc - used)
        beyond |= amount > alloc
    return (keys << 1) | beyond


# The ufunc's own reduction: ndarray.max() reaches it through a Python-level wrapper, a cost per call that the
# hot path pays once per cycle for an array it only asks "anything above 1?".
_highest = np.maximum.reduce


def result_from_keys(keys: IntArray, reasons: Sequence[str]) -> BatchFilterResult | None:
    """The verdict for :func:`failure_keys`' keys, ``reasons`` in check order: one Status per distinct
    combination of failing checks (in the keys' order, i.e. lexicographic over the checks), None when all fit."""
    if not (keys > 1).any():
        return None
    width = len(reasons) + 1
    distinct, index = np.unique(keys, return_inverse=True)
    statuses: list[Status] = []
    combo_codes = np.zeros(distinct.shape[0], dtype=np.int64)
    for j, key in enumerate(distinct.tolist()):
        if key <= 1:
            continue
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if key & 1 else Code.UNSCHEDULABLE
        statuses.append(Status(code, *(r for bit, r in enumerate(reasons) if key >> (width - 1 - bit) & 1)))
        combo_codes[j] = len(statuses)
    return BatchFilterResult(combo_codes[index.reshape(-1)], statuses)


def fit_columns(
    pod_count: IntArray, alloc_pods: IntArray, checks: Sequence[tuple[int, IntArray, IntArray, str]]
) -> BatchFilterResult | None:
    """Filter's verdict for nodes given as columns (the batch form, and DefaultPreemption's dry run, which
    passes what the nodes would hold with some pods removed): ``pod_count`` pods of ``alloc_pods`` allowed,
    and per checked resource (the pod's request, allocatable, requested, reason). None when all fit."""
    reasons = [TOO_MANY_PODS, *(reason for *_, reason in checks)]
    if len(checks) <= MAX_KEYED_CHECKS:
        return result_from_keys(failure_keys(pod_count, alloc_pods, checks), reasons)
    failing = [pod_count + 1 > alloc_pods]
    beyond = np.zeros(pod_count.shape[0], dtype=bool)
    for amount, alloc, used, _ in checks:
        failing.append(amount > alloc - used)
        beyond |= amount > alloc
    failed = np.vstack([*failing, beyond])
    if not failed[:-1].any():
        return None
    unique_rows, index = np.unique(failed.T, axis=0, return_inverse=True)
    statuses: list[Status] = []
    combo_codes = np.zeros(len(unique_rows), dtype=np.int64)
    for j, combo in enumerate(unique_rows.tolist()):
        *bits, unresolvable = combo
        if not any(bits):
            continue
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        statuses.append(Status(code, *(r for r, bit in zip(reasons, bits, strict=True) if bit)))
        combo_codes[j] = len(statuses)
    return BatchFilterResult(combo_codes[index.reshape(-1)], statuses)


def build_strategy(strategy: ScoringStrategy) -> Strategy:
    weights = [r.weight for r in strategy.resources]
    if strategy.type == LEAST_ALLOCATED:
        return LeastAllocated(weights)
    if strategy.type == MOST_ALLOCATED:
        return MostAllocated(weights)
    ratio = strategy.requested_to_capacity_ratio
    return RequestedToCapacityRatio(weights, ratio.shape if ratio is not None else ())


class Fit:
    """PreFilter/Filter: the node has room for the pod's requests; Score: the configured strategy."""

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Handle) -> None:
        del handle
        args = validated(args, NodeResourcesFitArgs)
        self.args = args
        self._ignored_resources = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        # Without pod-level requests, as kube-scheduler v1.35 builds this plugin's scorer (resource_allocation).
        self.scorer = ResourceAllocationScorer(
            strategy.resources, build_strategy(strategy), use_requested=False, pod_level_resources=False
        )
        self._failures = ColumnCache()  # per recurring request, each node's failure key, kept across cycles

    @property
    def name(self) -> str:
        return names.NODE_RESOURCES_FIT

    # ---- PreFilter -----------------------------------------------------------------------------

    def _ignored(self, resource: str) -> bool:
        if not is_extended_resource_name(resource):
            return False
        if resource in self._ignored_resources:
            return True
        return bool(self._ignored_groups) and resource.split("/", 1)[0] in self._ignored_groups

    def compute_request(self, request: Resource) -> FitRequest:
        scalars = tuple(
            (resource, amount)
            for resource, amount in request.scalar.items()
            if amount != 0 and is_scalar_resource_name(resource) and not self._ignored(resource)
        )
        return FitRequest(request.milli_cpu, request.memory, request.ephemeral_storage, scalars)

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        state.write(PRE_FILTER_STATE_KEY, self.compute_request(pod.request))
        return None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # ---- Filter --------------------------------------------------------------------------------

    @staticmethod
    def _missing_state() -> Status:
        return Status(Code.ERROR, f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')

    @staticmethod
    def insufficient_resources(request: FitRequest, info: NodeInfo) -> list[str]:
        """Every reason the node cannot hold the request, in kube-scheduler's order."""
        return Fit.check(request, info)[0]

    @staticmethod
    def check(request: FitRequest, info: NodeInfo) -> tuple[list[str], bool]:
        """The reasons (as :meth:`insufficient_resources`) and whether one of the failing requests exceeds
        the node's whole allocatable (nothing running there could be evicted to make room)."""
        reasons: list[str] = []
        unresolvable = False
        allocatable = info.allocatable
        requested = info.requested
        if len(info.pods) + 1 > allocatable.allowed_pod_number:
            reasons.append(TOO_MANY_PODS)
        checks = (
            (request.milli_cpu, allocatable.milli_cpu, requested.milli_cpu, _INSUFFICIENT_CPU),
            (request.memory, allocatable.memory, requested.memory, _INSUFFICIENT_MEMORY),
            (
                request.ephemeral_storage,
                allocatable.ephemeral_storage,
                requested.ephemeral_storage,
                _INSUFFICIENT_EPHEMERAL,
            ),
        )
        for amount, alloc, used, reason in checks:
            if amount > 0 and amount > alloc - used:
                reasons.append(reason)
                unresolvable = unresolvable or amount > alloc
        for resource, amount in request.scalars:
            alloc = allocatable.scalar.get(resource, 0)
            if amount > alloc - requested.scalar.get(resource, 0):
                reasons.append(insufficient(resource))
                unresolvable = unresolvable or amount > alloc
        return reasons, unresolvable

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        request = state.get(PRE_FILTER_STATE_KEY, FitRequest)
        if request is None:
            return self._missing_state()
        reasons, unresolvable = self.check(request, node_info)
        if not reasons:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE, *reasons)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        request = state.get(PRE_FILTER_STATE_KEY, FitRequest)
        if request is None:
            return uniform_result(len(nodes), self._missing_state())
        if len(nodes) == 0:
            return None
        columns = resource_columns(request, nodes.table)
        if len(columns) > MAX_KEYED_CHECKS:
            slots = nodes.slots
            checks = [(amount, alloc[slots], used[slots], reason) for _, amount, alloc, used, reason in columns]
            return fit_columns(nodes.table.pod_count[slots], nodes.table.alloc_pods[slots], checks)

        def keys_of(batch: NodeBatch) -> IntArray:
            slots, table = batch.slots, batch.table
            checks = [(amount, alloc[slots], used[slots], reason) for _, amount, alloc, used, reason in columns]
            return failure_keys(table.pod_count[slots], table.alloc_pods[slots], checks)

        table = nodes.table

        def key_of(slot: int) -> int:
            key = int(int(table.pod_count[slot]) + 1 > int(table.alloc_pods[slot]))
            beyond = False
            for _, amount, alloc, used, _ in columns:
                free_of_all = int(alloc[slot])
                key = (key << 1) | (amount > free_of_all - int(used[slot]))
                beyond = beyond or amount > free_of_all
            return (key << 1) | beyond

        keys = self._failures.read(nodes, request, keys_of, key_of)
        if _highest(keys) <= 1:
            return None  # every node fits (what result_from_keys concludes, without its list of reasons)
        return result_from_keys(keys, [TOO_MANY_PODS, *(column[4] for column in columns)])

    def filter_batch_with_added_pods(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, added: Sequence[Sequence[PodInfo]]
    ) -> BatchFilterResult | None:
        request = state.get(PRE_FILTER_STATE_KEY, FitRequest)
        if request is None:
            return uniform_result(len(nodes), self._missing_state())
        if len(nodes) == 0:
            return None
        table = nodes.table
        slots = nodes.slots
        columns = resource_columns(request, table)
        # What NodeInfo.add_pod does to a clone: every added request counts; a uid already there is replaced,
        # so it adds no pod to the count.
        extra = np.array(
            [[sum(other.request.get(column[0]) for other in pods) for column in columns] for pods in added],
            dtype=np.int64,
        ).reshape(len(added), len(columns))
        new_pods = np.fromiter(
            (
                sum(1 for other in pods if other.uid not in info.pods)
                for info, pods in zip(nodes.infos, added, strict=True)
            ),
            dtype=np.int64,
            count=len(added),
        )
        checks = [
            (amount, alloc[slots], used[slots] + extra[:, j], reason)
            for j, (_, amount, alloc, used, reason) in enumerate(columns)
        ]
        return fit_columns(table.pod_count[slots] + new_pods, table.alloc_pods[slots], checks)

    # ---- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(self.scorer.pod_requests(pod)))
        return None

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> tuple[int, ...]:
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        # Without PreScore (e.g. disabled in the profile) recompute, as upstream does.
        return found.pod_requests if found is not None else self.scorer.pod_requests(pod)

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return self.scorer.score_node(node_info, self._pod_requests(state, pod))

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        return self.scorer.score_batch(nodes, self._pod_requests(state, pod))

    # ---- Queueing hints ------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN, "PodDelete|PodScaleDown"
                ),
                self.is_schedulable_after_pod_event,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE,
                    "NodeAdd|NodeAllocatableChange",
                ),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_event(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """A deleted assigned pod frees resources; a scale-down helps if it shrinks what this pod asks for."""
        try:
            original, modified = as_pods(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            if original is None or not original.spec.node_name:
                return QueueingHint.SKIP
            return QueueingHint.QUEUE
        if original is None:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if _scale_down_helps(pod, original, modified) else QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue for a new node the pod fits on, or a node whose allocatable grew for what the pod asks."""
        try:
            original, modified = as_nodes(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        request = _max_request(pod)
        fit_request = FitRequest(
            request.milli_cpu,
            request.memory,
            request.ephemeral_storage,
            tuple((r, a) for r, a in request.scalar.items() if a != 0 and is_scalar_resource_name(r)),
        )
        if self.insufficient_resources(fit_request, NodeInfo(modified)):
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if _requested_resources_increased(request, original, modified) else QueueingHint.SKIP


def _max_request(pod: Pod) -> Resource:
    return Resource.from_mapping(pod_requests(pod))


def _scale_down_helps(target: Pod, original: Pod, modified: Pod) -> bool:
    if modified.metadata.uid == target.metadata.uid:
        return True
    if not modified.spec.node_name:
        return False
    before = _max_request(original)
    after = _max_request(modified)
    for resource, amount in pod_requests(target).items():
        if amount == 0:
            continue
        counted = resource in ("cpu", "memory", "ephemeral-storage") or is_scalar_resource_name(resource)
        if counted and before.get(resource) > after.get(resource):
            return True
    return False


def _requested_resources_increased(request: Resource, original: Node, modified: Node) -> bool:
    before = Resource.from_mapping(original.allocatable)
    after = Resource.from_mapping(modified.allocatable)
    if after.allowed_pod_number > before.allowed_pod_number:
        return True
    if request.is_zero() and not request.scalar:
        return False
    for resource, amount in (
        ("cpu", request.milli_cpu),
        ("memory", request.memory),
        ("ephemeral-storage", request.ephemeral_storage),
        *request.scalar.items(),
    ):
        if amount > 0 and after.get(resource) > before.get(resource):
            return True
    return False


if TYPE_CHECKING:

    def _conforms(
        plugin: Fit,
    ) -> tuple[
        PreFilterPlugin, BatchFilterPlugin, AddedPodsBatchFilter, PreScorePlugin, BatchScorePlugin, EnqueueExtensions
    ]:
        return plugin, plugin, plugin, plugin, plugin, plugin
