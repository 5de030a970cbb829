"""ClusterCapacity (PreFilter, Filter): the pod must fit on one node of the cluster, not only in its total.

Built by the framework from the registry in cluster profiles. With a node summary (and ``nodeLevelFit``), the hub
pods in flight to the cluster are placed first-fit on its nodes, then the pod must fit one node whose taints it
tolerates; without one, Karmada's general estimate from the totals. The pod's request is computed once at
PreFilter; the in-flight overlay is cached per cluster and extended by the pods bound since, not recomputed.
``filter_batch`` keeps each recurring request's verdicts per cluster and asks again only the clusters that changed,
many at once through :class:`~kubesched.plugins.multicluster.capacity_index.CapacityIndex`; ``filter`` is the
reference a property test holds it equal to. The rules and reasons: docs/explanation/cross-cluster.md#cluster-capacity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api.objects import Taint, Toleration
from kubesched.clusterapi.contract import (
    SCHEDULING_TAINT_EFFECTS,
    ClusterState,
    NodeBucket,
    take_cycle_snapshot,
    tolerates_all,
)
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import BatchFilterResult, IntArray, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, NodeInfo, PodInfo, PreFilterResult, Resource
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import uniform_result
from kubesched.plugins.multicluster.args import ClusterCapacityArgs
from kubesched.plugins.multicluster.capacity_index import (
    MAX_REQUEST_ITEMS,
    MODE_TOTALS,
    MODE_UNKNOWN,
    CapacityIndex,
    decode,
)
from kubesched.plugins.multicluster.common import UNKNOWN_CLUSTER, read_snapshot, request_items, running_in
from kubesched.plugins.multicluster.slots import KeptPerRequest

if TYPE_CHECKING:
    from kubesched.framework.interface import BatchFilterPlugin, Handle, PreFilterExtensions, PreFilterPlugin

PRE_FILTER_STATE_KEY = "PreFilter" + names.CLUSTER_CAPACITY

TOO_MANY_PODS = "Too many pods"
ERR_REASON_NO_POD_SLOT = "cluster(s) had no node with a free pod slot"
ERR_REASON_NO_NODE_FITS = "cluster(s) had no node that fits the pod"
ERR_REASON_UNTOLERATED = "cluster(s) had untolerated taints on every node"
_UNTOLERATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNTOLERATED)


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def no_node_with(resource: str) -> str:
    return f"cluster(s) had no node with enough free {resource}"


def general_estimate(
    allocatable: Mapping[str, int],
    allocated: Mapping[str, int],
    allocating: Mapping[str, int],
    request: Mapping[str, int],
) -> int:
    """Karmada's general estimator: how many replicas of ``request`` the cluster's totals allow. ``pods`` in the
    maps counts pods (``request`` needs none: each replica is one pod). A resource the cluster does not report,
    or has nothing of left, allows 0."""
    replicas = allocatable.get(PODS, 0) - allocated.get(PODS, 0) - allocating.get(PODS, 0)
    for name, amount in request.items():
        if amount <= 0 or name == PODS:
            continue
        avail = allocatable.get(name, 0) - allocated.get(name, 0) - allocating.get(name, 0)
        if avail <= 0:
            return 0
        replicas = min(replicas, avail // amount)
    return max(replicas, 0)


@dataclass(frozen=True, slots=True)
class _Request:
    items: tuple[tuple[str, int], ...]
    """(resource, amount) the pod requests, non-zero, cpu/memory/ephemeral-storage first."""
    tolerations: tuple[Toleration, ...] = ()
    """The pod's tolerations that could tolerate a NoSchedule or NoExecute taint (none: tainted nodes are out)."""

    def clone(self) -> _Request:
        return self


# A node summary as a mutable first-fit working set: (count, free, scheduling taints) per bucket of alike nodes.
_Buckets = list[tuple[int, dict[str, int], tuple[Taint, ...]]]
# What places a pod on the buckets: its request items and its (scheduling-relevant) tolerations.
_Placed = tuple[tuple[tuple[str, int], ...], tuple[Toleration, ...]]


def scheduling_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """The tolerations that can tolerate a NoSchedule or NoExecute taint (an empty effect tolerates every one)."""
    return tuple(t for t in tolerations if not t.effect or t.effect in SCHEDULING_TAINT_EFFECTS)


def _usable(taints: tuple[Taint, ...], tolerations: Sequence[Toleration]) -> bool:
    return not taints or (bool(tolerations) and tolerates_all(tolerations, taints))


def _fits(free: Mapping[str, int], request: Sequence[tuple[str, int]]) -> bool:
    if PODS in free and free[PODS] < 1:
        return False
    return all(free.get(name, 0) >= amount for name, amount in request)


def place_first_fit(
    buckets: _Buckets, request: Sequence[tuple[str, int]], tolerations: Sequence[Toleration] = ()
) -> bool:
    """Take ``request`` (and one pod slot) from the first bucket whose taints ``tolerations`` tolerate with a node
    it fits on; False if none."""
    for index, (count, free, taints) in enumerate(buckets):
        if not _fits(free, request) or not _usable(taints, tolerations):
            continue
        left = dict(free)
        for name, amount in request:
            left[name] = left.get(name, 0) - amount
        if PODS in left:
            left[PODS] -= 1
        if count == 1:
            buckets[index] = (1, left, taints)
        else:
            buckets[index] = (count - 1, free, taints)
            buckets.append((1, left, taints))
        return True
    return False


def overlay(nodes: Sequence[NodeBucket], pods: Sequence[_Placed]) -> _Buckets:
    """The reported node buckets with ``pods`` (their requests and tolerations) placed first-fit, in order."""
    buckets: _Buckets = [(bucket.count, dict(bucket.free), bucket.taints) for bucket in nodes]
    for request, tolerations in pods:
        place_first_fit(buckets, request, tolerations)
    return buckets


def _amounts(resource: Resource, pods: int) -> dict[str, int]:
    amounts = {CPU: resource.milli_cpu, MEMORY: resource.memory, EPHEMERAL_STORAGE: resource.ephemeral_storage}
    amounts.update(resource.scalar)
    amounts[PODS] = pods
    return amounts


_STATUSES: dict[tuple[Code, tuple[str, ...]], Status] = {}


def _status(code: Code, reasons: list[str]) -> Status:
    # The reasons come from a few constant strings: one shared Status per combination.
    key = (code, tuple(reasons))
    status = _STATUSES.get(key)
    if status is None:
        status = _STATUSES[key] = Status(code, *reasons)
    return status


FEW_SLOTS = 16
"""Stale slots up to this many are filtered by the per-cluster method (plain Python, a cost per slot);
more by the index's arrays, whose numpy calls cost about as much whatever their length."""

MAX_KEPT_REQUESTS = 64
"""Distinct pod requests whose per-cluster verdicts are kept (workloads repeat a few pod templates)."""


class _Verdicts:
    """One request's verdict per slot, valid while the slot's index stamp is the one kept beside it."""

    __slots__ = ("_interned", "codes", "stamps", "statuses")

    def __init__(self, capacity: int) -> None:
        self.codes: IntArray = np.zeros(capacity, dtype=np.int64)
        """0: fits; k > 0: rejected with ``statuses[k - 1]``."""
        self.stamps: IntArray = np.full(capacity, -1, dtype=np.int64)
        self.statuses: list[Status] = []
        self._interned: dict[Status, int] = {}

    def ensure(self, capacity: int) -> None:
        grow = capacity - self.codes.shape[0]
        if grow > 0:
            self.codes = np.concatenate([self.codes, np.zeros(grow, dtype=np.int64)])
            self.stamps = np.concatenate([self.stamps, np.full(grow, -1, dtype=np.int64)])

    def code(self, status: Status | None) -> int:
        if status is None:
            return 0
        code = self._interned.get(status)
        if code is None:
            self.statuses.append(status)
            code = self._interned[status] = len(self.statuses)
        return code

    def put(self, slot: int, stamp: int, status: Status | None) -> None:
        self.codes[slot] = self.code(status)
        self.stamps[slot] = stamp


def _missing_state() -> Status:
    return Status.error(f"{PRE_FILTER_STATE_KEY} not found: the plugin's PreFilter did not run")


@dataclass(frozen=True, slots=True)
class _Overlay:
    """One cluster's overlaid buckets and what they were made from."""

    state: ClusterState
    generation: int
    pods: int
    """The super node's generation and pod count then: equal now means the same in-flight pods."""
    in_flight: tuple[str, ...]
    """The in-flight pods' uids, in the order they were placed."""
    buckets: _Buckets


class ClusterCapacity:
    """Filter: clusters without a node the pod fits on (node summaries), or without room in their totals."""

    def __init__(self, args: ClusterCapacityArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterCapacityArgs)
        self._ignored = frozenset(self.args.ignored_resources)
        self._handle = handle
        self._overlays: dict[str, _Overlay] = {}
        self._index = CapacityIndex(self.args.node_level_fit, self._buckets)
        self._verdicts = KeptPerRequest(_Verdicts, MAX_KEPT_REQUESTS)
        self.few_slots = FEW_SLOTS
        """See :data:`FEW_SLOTS` (an attribute so a test can send every stale slot through the arrays)."""

    @property
    def name(self) -> str:
        return names.CLUSTER_CAPACITY

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        items = tuple(request_items(pod.request, self._ignored).items())
        state.write(PRE_FILTER_STATE_KEY, _Request(items, scheduling_tolerations(pod.tolerations)))
        if running_in(take_cycle_snapshot(state, self._handle), pod.uid) is not None:
            return Status(Code.SKIP)  # a member already runs it, and counts it: ClusterReservation adopts it there
        return None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        request = state.get(PRE_FILTER_STATE_KEY, _Request)
        if request is None:
            return _missing_state()
        cluster = read_snapshot(state).get(node_info.name)
        if cluster is None:
            return UNKNOWN_CLUSTER
        if cluster.nodes is None or not self.args.node_level_fit:
            return self._estimate(request.items, cluster, node_info)
        return self._node_fit(request, cluster, self._buckets(cluster, node_info))

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        request = state.get(PRE_FILTER_STATE_KEY, _Request)
        if request is None:
            return uniform_result(len(nodes), _missing_state())
        snapshot = read_snapshot(state)
        if len(nodes) == 0:
            return None
        if len(request.items) > MAX_REQUEST_ITEMS:
            return self._filter_each(state, pod, nodes)
        table, slots, index = nodes.table, nodes.slots, self._index
        index.refresh(table, snapshot.clusters, slots)
        verdicts = self._verdicts.get(table, request)
        missing = verdicts.stamps[slots] != index.stamps[slots]
        if missing.any():
            stale = slots[missing]
            if stale.shape[0] <= self.few_slots:
                for slot in stale.tolist():
                    info = table.infos[slot]
                    assert info is not None  # a batch holds live slots only
                    verdicts.put(slot, int(index.stamps[slot]), self.filter(state, pod, info))
            else:
                fits, keys = index.verdicts(snapshot.clusters, table, stale, request.items)
                codes = np.zeros(stale.shape[0], dtype=np.int64)
                rejected = ~fits
                if rejected.any():
                    distinct, inverse = np.unique(keys[rejected], return_inverse=True)
                    found = [verdicts.code(self._rejection(request.items, int(key))) for key in distinct.tolist()]
                    codes[rejected] = np.asarray(found, dtype=np.int64)[inverse.reshape(-1)]
                # The arrays answer as if tainted nodes were not there: a pod that may tolerate them, or a cluster
                # with no other nodes (whose reason is the taints), is asked of filter.
                asked = index.tainted[stale] if request.tolerations else index.tainted[stale] & ~index.live[stale]
                if asked.any():
                    for at in np.flatnonzero(asked).tolist():
                        info = table.infos[int(stale[at])]
                        assert info is not None
                        codes[at] = verdicts.code(self.filter(state, pod, info))
                verdicts.codes[stale] = codes
                verdicts.stamps[stale] = index.stamps[stale]
        codes = verdicts.codes[slots]
        if not codes.any():
            return None
        return BatchFilterResult(codes, verdicts.statuses)

    def _filter_each(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        # The per-cluster reference, for a request too wide for the index's keys.
        statuses: list[Status] = []
        codes = np.zeros(len(nodes), dtype=np.int64)
        for index, info in enumerate(nodes.infos):
            status = self.filter(state, pod, info)
            if status is not None:
                statuses.append(status)
                codes[index] = len(statuses)
        return BatchFilterResult(codes, statuses) if statuses else None

    def _rejection(self, request: Sequence[tuple[str, int]], key: int) -> Status:
        """The Status ``filter`` gives for what the key says (the same reasons, in the same order)."""
        rejection = decode(key, len(request))
        if rejection.mode == MODE_UNKNOWN:
            return UNKNOWN_CLUSTER
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if rejection.beyond else Code.UNSCHEDULABLE
        names = [request[j][0] for j in rejection.short]
        if rejection.mode == MODE_TOTALS:
            reasons = [TOO_MANY_PODS] if rejection.full else []
            reasons.extend(insufficient(name) for name in names)
            return _status(code, reasons)
        reasons = [no_node_with(name) for name in names]
        if rejection.full:
            reasons.append(ERR_REASON_NO_POD_SLOT)
        if not reasons:
            reasons.append(ERR_REASON_NO_NODE_FITS)
        return _status(code, reasons)

    def _code(self, request: Sequence[tuple[str, int]], cluster: ClusterState, short: Sequence[str]) -> Code:
        whole = cluster.allocatable
        if any(amount > whole.get(name, 0) for name, amount in request if name in short):
            return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Code.UNSCHEDULABLE

    def _estimate(
        self, request: Sequence[tuple[str, int]], cluster: ClusterState, node_info: NodeInfo
    ) -> Status | None:
        # The super node holds allocatable, and as requested the reported allocation (the placeholder pod)
        # plus the in-flight pods: allocated + allocating, in the formula's terms.
        allocatable, requested = node_info.allocatable, node_info.requested
        totals = _amounts(allocatable, allocatable.allowed_pod_number)
        used = _amounts(requested, len(node_info.pods))
        if general_estimate(totals, used, {}, dict(request)) >= 1:
            return None
        reasons: list[str] = []
        if allocatable.allowed_pod_number - len(node_info.pods) < 1:
            reasons.append(TOO_MANY_PODS)
        short: list[str] = []
        for name, amount in request:
            if allocatable.get(name) - requested.get(name) < amount:
                short.append(name)
                reasons.append(insufficient(name))
        return _status(self._code(request, cluster, short), reasons)

    def _buckets(self, cluster: ClusterState, node_info: NodeInfo) -> _Buckets:
        cached = self._overlays.get(cluster.name)
        pods = len(node_info.pods)
        if (
            cached is not None
            and cached.state is cluster
            and cached.generation == node_info.generation
            and cached.pods == pods
        ):
            return cached.buckets
        assert cluster.nodes is not None
        # The in-flight pods' uids (common.in_flight's order), by key alone: only the pods to place are looked up.
        accounted = cluster.accounted_pods
        uids = tuple([uid for uid in node_info.pods if uid not in accounted])
        placed = len(cached.in_flight) if cached is not None else 0
        if cached is not None and cached.state is cluster and uids[:placed] == cached.in_flight:
            # The same pods first, in the same order, then the ones bound since: place only those (on a copy:
            # the cached list may be in use). No new pod (the node changed otherwise, e.g. a bind confirmed):
            # the very same list, which tells the batch index its arrays still hold.
            buckets = cached.buckets if len(uids) == placed else list(cached.buckets)
            for uid in uids[placed:]:
                place_first_fit(buckets, *self._request_of(node_info.pods[uid]))
        else:
            buckets = overlay(cluster.nodes, [self._request_of(node_info.pods[uid]) for uid in uids])
        self._overlays[cluster.name] = _Overlay(cluster, node_info.generation, pods, uids, buckets)
        return buckets

    def _request_of(self, pod: PodInfo) -> _Placed:
        items = tuple(request_items(pod.request, self._ignored).items())
        return items, scheduling_tolerations(pod.tolerations)

    def _node_fit(self, pod: _Request, cluster: ClusterState, buckets: _Buckets) -> Status | None:
        request, tolerations = pod.items, pod.tolerations
        live = [free for count, free, taints in buckets if count > 0 and _usable(taints, tolerations)]
        if not live and any(count > 0 and taints for count, _, taints in buckets):
            return _UNTOLERATED
        if any(_fits(free, request) for free in live):
            return None
        reasons: list[str] = []
        short: list[str] = []
        for name, amount in request:
            if all(free.get(name, 0) < amount for free in live):
                short.append(name)
                reasons.append(no_node_with(name))
        if live and all(PODS in free and free[PODS] < 1 for free in live):
            reasons.append(ERR_REASON_NO_POD_SLOT)
        if not reasons:
            reasons.append(ERR_REASON_NO_NODE_FITS)
        return _status(self._code(request, cluster, short), reasons)


if TYPE_CHECKING:

    def _conforms(plugin: ClusterCapacity) -> tuple[PreFilterPlugin, BatchFilterPlugin]:
        return plugin, plugin
