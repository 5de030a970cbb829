"""ClusterReadiness (PreFilter, Filter, PreScore, Score): only clusters that are ready and recently heard from.

PreFilter takes the cycle's :class:`~kubesched.clusterapi.contract.ClusterSnapshot` (the first cluster plugin
of a cycle does; the rest read the same one). Filter rejects, as UnschedulableAndUnresolvable (evicting hub pods
would not make a cluster ready):

- a cluster that is not ready: ``cluster(s) were not ready``;
- with ``stalePolicy: Reject`` (the default), a cluster whose state is older than ``maxStalenessSeconds``:
  ``cluster(s) had stale state``;
- a super node the source does not know: ``cluster(s) had no reported state``.

With ``stalePolicy: Penalize`` a stale cluster stays feasible and Score gives it 0 and every fresh cluster
100 (PreScore skips the Score under ``Reject``). Age is the snapshot's time minus the state's ``observedAt``.
A rejected pod is requeued on any cluster event (no queueing hints yet: a member turning ready arrives as an
update of its super node, which requeues everything).

``filter_batch`` and ``score_batch`` answer for every candidate at once: per table slot the plugin keeps whether
the cluster is known and ready and when its state was observed, until the super node or the states change
(:class:`~kubesched.plugins.multicluster.slots.SlotTracker`), and whether any kept cluster is not ready and its
earliest observation; only when that observation is stale is an age computed per candidate. ``filter`` and
``score`` are the reference (a property test holds the two equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kubesched.clusterapi.contract import ClusterSnapshot, take_cycle_snapshot
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubesched.framework.node_table import BatchFilterResult, BoolArray, IntArray, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import STALE_REJECT, ClusterReadinessArgs
from kubesched.plugins.multicluster.common import UNKNOWN_CLUSTER, read_snapshot
from kubesched.plugins.multicluster.slots import SlotTracker

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BatchScorePlugin,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
    )

ERR_REASON_NOT_READY = "cluster(s) were not ready"
ERR_REASON_STALE = "cluster(s) had stale state"

_NOT_READY = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NOT_READY)
_STALE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_STALE)
_SKIP = Status(Code.SKIP)

# Per-slot kinds, and the batch statuses in the same order (kind k rejects with _BATCH_STATUSES[k - 1]).
_READY, _UNKNOWN, _NOT_READY_KIND, _STALE_KIND = 0, 1, 2, 3
_BATCH_STATUSES = (UNKNOWN_CLUSTER, _NOT_READY, _STALE)

FloatArray = npt.NDArray[np.float64]


class ClusterReadiness:
    """Filter: clusters that are not ready or whose state is stale; Score (Penalize): fresh over stale."""

    def __init__(self, args: ClusterReadinessArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterReadinessArgs)
        self._handle = handle
        self._tracker = SlotTracker()
        self._kinds: IntArray = np.zeros(0, dtype=np.int64)
        # When each slot's state was observed; NaN for a state observed at every snapshot (age 0).
        self._observed: FloatArray = np.zeros(0, dtype=np.float64)
        self._all_ready = True  # no kept slot is unknown or not ready
        self._earliest = np.inf  # the earliest observation kept

    @property
    def name(self) -> str:
        return names.CLUSTER_READINESS

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        take_cycle_snapshot(state, self._handle)
        return None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _stale(self, age: float | None) -> bool:
        return age is not None and age > self.args.max_staleness_seconds

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        snapshot = read_snapshot(state)
        cluster = snapshot.get(node_info.name)
        if cluster is None:
            return UNKNOWN_CLUSTER
        if not cluster.ready:
            return _NOT_READY
        if self.args.stale_policy == STALE_REJECT and self._stale(snapshot.age(node_info.name)):
            return _STALE
        return None

    def _columns(self, snapshot: ClusterSnapshot, nodes: NodeBatch) -> tuple[IntArray | None, BoolArray | None]:
        """Per candidate: its kind (ready, unknown, not ready) and whether its (known) state is stale; None for
        "all ready" and "none stale" (what every cycle finds while the members are healthy)."""
        table, slots, tracker = nodes.table, nodes.slots, self._tracker
        grown = tracker.table is not table or self._kinds.shape[0] < table.capacity
        if grown:
            if tracker.table is not table:
                tracker.reset(table)
            grow = table.capacity - self._kinds.shape[0]
            self._kinds = np.concatenate([self._kinds, np.zeros(max(grow, 0), dtype=np.int64)])
            self._observed = np.concatenate([self._observed, np.full(max(grow, 0), np.nan)])
        clusters = snapshot.clusters
        changed = tracker.stale(table, clusters, slots)
        for slot in changed:
            info = table.infos[slot]
            assert info is not None  # a batch holds live slots only
            cluster = clusters.get(info.name)
            if cluster is None:
                self._kinds[slot] = _UNKNOWN
            else:
                self._kinds[slot] = _READY if cluster.ready else _NOT_READY_KIND
                self._observed[slot] = np.nan if cluster.observed_at is None else cluster.observed_at
            tracker.mark(slot, cluster)
        if changed or grown:
            # Over every slot kept (cleared ones too, which can only make these answers more cautious).
            self._all_ready = not self._kinds.any()
            self._earliest = float(np.fmin.reduce(self._observed, initial=np.inf))  # NaN: observed every snapshot
        kinds = None if self._all_ready else self._kinds[slots]
        if snapshot.taken_at - self._earliest <= self.args.max_staleness_seconds:
            return kinds, None  # not even the oldest observation is stale
        # snapshot.age: max(taken_at - observed_at, 0); NaN (observed at every snapshot) compares as not stale.
        age = np.maximum(snapshot.taken_at - self._observed[slots], 0.0)
        stale = (self._kinds[slots] != _UNKNOWN) & (age > self.args.max_staleness_seconds)
        return kinds, stale

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        snapshot = read_snapshot(state)
        if len(nodes) == 0:
            return None
        kinds, stale = self._columns(snapshot, nodes)
        if self.args.stale_policy == STALE_REJECT and stale is not None:
            kinds = np.zeros(len(nodes), dtype=np.int64) if kinds is None else kinds
            kinds = np.where((kinds == _READY) & stale, _STALE_KIND, kinds)
        if kinds is None or not kinds.any():
            return None
        return BatchFilterResult(kinds, _BATCH_STATUSES)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        if self.args.stale_policy == STALE_REJECT:
            return _SKIP
        take_cycle_snapshot(state, self._handle)
        return None

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        snapshot = read_snapshot(state)
        return MIN_NODE_SCORE if self._stale(snapshot.age(node_info.name)) else MAX_NODE_SCORE

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        snapshot = read_snapshot(state)
        if len(nodes) == 0:
            return np.zeros(0, dtype=np.int64)
        _, stale = self._columns(snapshot, nodes)
        if stale is None:
            return np.full(len(nodes), MAX_NODE_SCORE, dtype=np.int64)
        return np.where(stale, MIN_NODE_SCORE, MAX_NODE_SCORE).astype(np.int64)


if TYPE_CHECKING:

    def _conforms(
        plugin: ClusterReadiness,
    ) -> tuple[PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin]:
        return plugin, plugin, plugin, plugin
