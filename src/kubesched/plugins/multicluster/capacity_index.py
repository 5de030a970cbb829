"""ClusterCapacity's columnar form: what every member cluster offers, as arrays, for one Filter call over all.

Who calls it: :class:`kubesched.plugins.multicluster.capacity.ClusterCapacity` (``filter_batch``). The per-cluster
``filter`` stays the reference; a property test holds the two equal.

Per super node (indexed by its table slot) the index keeps what ``filter`` derives from the cluster's state and
its in-flight overlay, and keeps it until the node's row or the cluster's state changes
(:class:`~kubesched.plugins.multicluster.slots.SlotTracker`), so a cycle recomputes only the clusters the last
bind (or refresh) touched:

- node-level fit: the free capacity of every live bucket that has a pod slot, one row per bucket
  (``rows[resource, slot, row]``, padded with invalid rows), the largest free amount per resource over all live
  buckets (what "no node with enough free r" asks), and whether every live bucket is out of pod slots;
- the general estimate: the super node's allocatable minus requested per resource and whether it has a free pod
  slot left;
- both: the whole cluster's allocatable per resource (what makes a rejection unresolvable).

A pod's verdict is then a few comparisons over ``(clusters, rows)`` arrays, whatever the number of clusters. A
rejection comes back as an integer key (:func:`decode`) naming exactly what ``filter`` would report, so the
caller builds one Status per distinct key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kubesched.api.objects import Taint
from kubesched.clusterapi.contract import ClusterState
from kubesched.framework.node_table import BoolArray, IntArray, NodeTable
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, NodeInfo
from kubesched.plugins.multicluster.slots import SlotTracker

__all__ = ["MODE_NODES", "MODE_TOTALS", "MODE_UNKNOWN", "CapacityIndex", "Rejection", "decode"]

MODE_UNKNOWN = 0
"""The state source does not know the cluster."""
MODE_NODES = 1
"""Node-level fit over the cluster's node buckets."""
MODE_TOTALS = 2
"""The general estimate over the super node's totals."""

_FULL_BIT = 1 << 2
_BEYOND_BIT = 1 << 3
_SHORT_SHIFT = 4
MAX_REQUEST_ITEMS = 58
"""Short resources are bits of an int64 key: a pod requesting more resources than this takes the per-node path."""

Bucket = tuple[int, Mapping[str, int], tuple[Taint, ...]]
BucketsOf = Callable[[ClusterState, NodeInfo], Sequence[Bucket]]


@dataclass(frozen=True, slots=True)
class Rejection:
    """What one rejection key says (see :func:`decode`)."""

    mode: int
    full: bool
    """Node-level fit: every live bucket is out of pod slots. Estimate: no free pod slot in the totals."""
    beyond: bool
    """A short resource is requested beyond the whole cluster's allocatable (unresolvable)."""
    short: tuple[int, ...]
    """Indexes, into the pod's request items, of the resources no node (or the totals) has enough of."""


def decode(key: int, items: int) -> Rejection:
    """The :class:`Rejection` a key from :meth:`CapacityIndex.verdicts` stands for; ``items``: request length."""
    short = tuple(j for j in range(items) if key >> (_SHORT_SHIFT + j) & 1)
    return Rejection(key & 3, bool(key & _FULL_BIT), bool(key & _BEYOND_BIT), short)


def _basic_and_scalars(info: NodeInfo) -> set[str]:
    names = {CPU, MEMORY, EPHEMERAL_STORAGE}
    names.update(info.allocatable.scalar)
    names.update(info.requested.scalar)
    return names


class CapacityIndex:
    """Per-slot capacity arrays (module doc); one per plugin instance, over the scheduler's table."""

    def __init__(self, node_level_fit: bool, buckets_of: BucketsOf) -> None:
        self._node_level_fit = node_level_fit
        self._buckets_of = buckets_of
        self._tracker = SlotTracker()
        self._columns: dict[str, int] = {}
        self._capacity = 0
        self._width = 1  # rows per slot
        # Per slot, the overlay its node-fit arrays were made from (identity: the plugin's cache hands out the
        # same list while the cluster's in-flight pods and state are unchanged).
        self._made_from: list[Sequence[Bucket] | None] = []
        # Per slot, the overlay its stamp was given for (None: not a node-level verdict).
        self._stamped_from: list[Sequence[Bucket] | None] = []
        self._alloc(0, 0, 1)
        self.stamps: IntArray = np.zeros(0, dtype=np.int64)
        """Per slot, a number that changes whenever the slot's verdicts may (its row or its cluster's state did):
        a caller may keep verdicts per slot and stamp, see ClusterCapacity's per-request cache."""
        self._next_stamp = 0
        self._made: IntArray = np.zeros(0, dtype=np.int64)  # per slot, the stamp its arrays were made at

    # ---- storage --------------------------------------------------------------------------------

    def _alloc(self, columns: int, capacity: int, width: int) -> None:
        self.mode: IntArray = np.zeros(capacity, dtype=np.int64)
        self._made_from = self._made_from[:capacity] + [None] * max(capacity - len(self._made_from), 0)
        self._stamped_from = self._stamped_from[:capacity] + [None] * max(capacity - len(self._stamped_from), 0)
        self.live: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.tainted: BoolArray = np.zeros(capacity, dtype=np.bool_)
        """Per slot: some bucket with nodes has scheduling taints (left out of the arrays: ask ``filter``)."""
        self.full: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.valid: BoolArray = np.zeros((capacity, width), dtype=np.bool_)
        self.rows: IntArray = np.zeros((columns, capacity, width), dtype=np.int64)
        self.best: IntArray = np.zeros((columns, capacity), dtype=np.int64)
        self.whole: IntArray = np.zeros((columns, capacity), dtype=np.int64)
        self._capacity, self._width = capacity, width

    def _resize(self, columns: int, capacity: int, width: int) -> None:
        """Grow to at least these sizes, keeping every value (new cells are 0 / False: correct for a resource
        no slot had, and for rows and slots not made yet)."""
        old = (self.mode, self.live, self.full, self.valid, self.rows, self.best, self.whole, self.tainted)
        old_columns, old_capacity, old_width = self.rows.shape
        self._alloc(max(columns, old_columns), max(capacity, old_capacity), max(width, old_width))
        self.mode[:old_capacity] = old[0]
        self.live[:old_capacity] = old[1]
        self.full[:old_capacity] = old[2]
        self.valid[:old_capacity, :old_width] = old[3]
        self.rows[:old_columns, :old_capacity, :old_width] = old[4]
        self.best[:old_columns, :old_capacity] = old[5]
        self.whole[:old_columns, :old_capacity] = old[6]
        self.tainted[:old_capacity] = old[7]

    def _column(self, name: str) -> int:
        column = self._columns.get(name)
        if column is None:
            column = self._columns[name] = len(self._columns)
            if column >= self.rows.shape[0]:
                self._resize(max(2 * self.rows.shape[0], column + 1), self._capacity, self._width)
        return column

    # ---- making a slot's values -----------------------------------------------------------------

    def refresh(self, table: NodeTable, clusters: Mapping[str, ClusterState], slots: IntArray) -> None:
        """Give every slot of ``slots`` whose node row or cluster state changed a new :attr:`stamps` value; its
        arrays are remade when :meth:`verdicts` next reads them."""
        tracker = self._tracker
        if tracker.table is not table:
            self._columns = {}
            self._made_from = []
            self._stamped_from = []
            self._alloc(0, table.capacity, 1)
            self.stamps = np.zeros(table.capacity, dtype=np.int64)
            self._made = np.full(table.capacity, -1, dtype=np.int64)
        stale = tracker.stale(table, clusters, slots)
        if not stale:
            return
        if self._capacity < table.capacity:
            self._resize(self.rows.shape[0], table.capacity, self._width)
        if self.stamps.shape[0] < table.capacity:
            grow = table.capacity - self.stamps.shape[0]
            self.stamps = np.concatenate([self.stamps, np.zeros(grow, dtype=np.int64)])
            self._made = np.concatenate([self._made, np.full(grow, -1, dtype=np.int64)])
        for slot in stale:
            info = table.infos[slot]
            assert info is not None  # a batch holds live slots only
            cluster = clusters.get(info.name)
            # A node-level verdict reads the cluster's state and its overlay alone: a row change that left the
            # overlay the very same object (a bind confirmed, no pod added or removed) changes none.
            if tracker.states[slot] is not cluster or (
                tracker.version_changed(slot)
                and (self._stamped_from[slot] is None or self._overlay(info, cluster) is not self._stamped_from[slot])
            ):
                self._restamp(slot, info, cluster)
            tracker.mark(slot, cluster)  # else another cluster's state changed, not this one's

    def _overlay(self, info: NodeInfo, cluster: ClusterState | None) -> Sequence[Bucket] | None:
        """The overlay a node-level verdict of ``info`` reads; None where the verdict reads the row itself."""
        if cluster is None or cluster.nodes is None or not self._node_level_fit:
            return None
        return self._buckets_of(cluster, info)

    def _restamp(self, slot: int, info: NodeInfo, cluster: ClusterState | None) -> None:
        self._next_stamp += 1
        self.stamps[slot] = self._next_stamp
        self._stamped_from[slot] = self._overlay(info, cluster)

    def _ensure_made(self, table: NodeTable, clusters: Mapping[str, ClusterState], slots: IntArray) -> None:
        behind = self._made[slots] != self.stamps[slots]
        if not behind.any():
            return
        for slot in slots[behind].tolist():
            info = table.infos[slot]
            assert info is not None
            self._make(slot, info, clusters.get(info.name))
            self._made[slot] = self.stamps[slot]

    def _make(self, slot: int, info: NodeInfo, cluster: ClusterState | None) -> None:
        buckets = (
            self._buckets_of(cluster, info)
            if cluster is not None and cluster.nodes is not None and self._node_level_fit
            else None
        )
        if buckets is not None and self._made_from[slot] is buckets:
            return  # the same overlay object (the node changed, its in-flight pods did not): arrays still hold
        self._made_from[slot] = buckets
        self.valid[slot] = False
        self.rows[:, slot, :] = 0
        self.best[:, slot] = 0
        self.whole[:, slot] = 0
        self.full[slot] = False
        self.live[slot] = False
        self.tainted[slot] = False
        if cluster is None:
            self.mode[slot] = MODE_UNKNOWN
            return
        # A column is found before its array is indexed: adding one may reallocate the arrays.
        for name, amount in cluster.allocatable.items():
            if name != PODS:
                column = self._column(name)
                self.whole[column, slot] = amount
        if buckets is None:
            self.mode[slot] = MODE_TOTALS
            self.live[slot] = True
            allocatable, requested = info.allocatable, info.requested
            for name in _basic_and_scalars(info):
                column = self._column(name)
                self.best[column, slot] = allocatable.get(name) - requested.get(name)
            self.full[slot] = allocatable.allowed_pod_number - len(info.pods) < 1
            return
        self.mode[slot] = MODE_NODES
        # A pod without tolerations sees only the untainted buckets; one with tolerations is asked of filter.
        live = [free for count, free, taints in buckets if count > 0 and not taints]
        self.tainted[slot] = any(count > 0 and taints for count, _, taints in buckets)
        if not live:
            return
        fitting = [free for free in live if not (PODS in free and free[PODS] < 1)]
        if len(fitting) > self._width:
            self._resize(self.rows.shape[0], self._capacity, max(len(fitting), 2 * self._width))
        names = {name for free in live for name in free if name != PODS}
        columns = [(name, self._column(name)) for name in names]
        self.valid[slot, : len(fitting)] = True
        for name, column in columns:
            # A bucket without the resource has 0 of it free, as filter's free.get(name, 0) says.
            amounts = [free.get(name, 0) for free in fitting]
            if amounts:
                self.rows[column, slot, : len(amounts)] = amounts
            self.best[column, slot] = max(free.get(name, 0) for free in live)
        self.live[slot] = True
        self.full[slot] = all(PODS in free and free[PODS] < 1 for free in live)

    # ---- the verdicts -------------------------------------------------------------------------------

    def verdicts(
        self,
        clusters: Mapping[str, ClusterState],
        table: NodeTable,
        slots: IntArray,
        request: Sequence[tuple[str, int]],
    ) -> tuple[BoolArray, IntArray]:
        """Per slot of ``slots`` (refreshed by :meth:`refresh` this cycle): whether the pod fits, and for those
        that do not, a key for :func:`decode`. ``request``: the pod's non-zero (resource, amount) items, at most
        :data:`MAX_REQUEST_ITEMS`."""
        self._ensure_made(table, clusters, slots)
        mode = self.mode[slots]
        live = self.live[slots]
        ok = self.valid[slots]
        keys = mode.copy()
        beyond = np.zeros(slots.shape[0], dtype=np.bool_)
        any_short = np.zeros(slots.shape[0], dtype=np.bool_)
        for j, (name, amount) in enumerate(request):
            column = self._columns.get(name)
            if column is None:
                # No cluster reports the resource: no node has it and no cluster's allocatable covers it.
                ok = np.zeros_like(ok)
                short = np.ones(slots.shape[0], dtype=np.bool_)
                beyond[:] = True
            else:
                ok &= self.rows[column][slots] >= amount
                short = ~live | (self.best[column][slots] < amount)
                beyond |= short & (self.whole[column][slots] < amount)
            any_short |= short
            keys |= short.astype(np.int64) << (_SHORT_SHIFT + j)
        full = self.full[slots]
        fits = np.where(mode == MODE_NODES, ok.any(axis=1), (mode == MODE_TOTALS) & ~full & ~any_short)
        keys |= full.astype(np.int64) * _FULL_BIT
        keys |= beyond.astype(np.int64) * _BEYOND_BIT
        # An unknown cluster has one verdict whatever the request: one key for all of them.
        return fits, np.where(mode == MODE_UNKNOWN, MODE_UNKNOWN, keys)
