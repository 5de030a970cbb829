"""Which table slots' cached per-cluster values a batch Filter or Score must recompute.

Who calls it: the cluster plugins' batch paths (:mod:`kubesched.plugins.multicluster.capacity_index`,
:mod:`kubesched.plugins.multicluster.readiness`; :class:`KeptPerRequest` for ClusterCapacity and ClusterBalance).
A cluster plugin's answer for one super node depends on two things: the node's row in the snapshot's
:class:`~kubesched.framework.node_table.NodeTable` (its pods, for the in-flight overlay) and the cluster's
:class:`~kubesched.clusterapi.contract.ClusterState`. The table stamps every
slot it rewrites (``versions``), and the state sources hand out a new ``clusters`` mapping whenever any state
changed (copy on write), so both are checked per slot with integer comparisons over the whole batch; only the
slots that fail the check go back to Python. A slot the tracker flags for the mapping alone may still hold the
same state (another cluster changed): the caller compares the states and keeps its values when they are equal.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, Protocol, TypeVar

import numpy as np

from kubesched.clusterapi.contract import ClusterState
from kubesched.framework.node_table import IntArray, NodeTable

__all__ = ["KeptPerRequest", "SlotTracker"]


class SlotTracker:
    """Per slot, the table version and the ``clusters`` mapping (as an epoch) its cached values were made from."""

    __slots__ = ("_clusters", "_epoch", "_epochs", "_versions", "states", "table")

    def __init__(self) -> None:
        self.table: NodeTable | None = None
        self._clusters: Mapping[str, ClusterState] | None = None
        self._epoch = 0
        self._versions: IntArray = np.zeros(0, dtype=np.int64)
        self._epochs: IntArray = np.zeros(0, dtype=np.int64)
        self.states: list[ClusterState | None] = []
        """The state each slot's values were made from (None: the cluster was unknown, or never made)."""

    def reset(self, table: NodeTable) -> None:
        """Forget every slot (a new table: slots mean other nodes)."""
        self.table = table
        self._clusters = None
        self._versions = np.full(table.capacity, -1, dtype=np.int64)
        self._epochs = np.full(table.capacity, -1, dtype=np.int64)
        self.states = [None] * table.capacity

    def stale(self, table: NodeTable, clusters: Mapping[str, ClusterState], slots: IntArray) -> list[int]:
        """The slots of ``slots`` whose values may be out of date; the caller recomputes or confirms each and
        then calls :meth:`mark`. Returns every slot after a table change (the caller resets its own arrays
        when :attr:`table` is not ``table`` before calling)."""
        if table is not self.table:
            self.reset(table)
        if clusters is not self._clusters:
            self._clusters = clusters
            self._epoch += 1
        if self._versions.shape[0] < table.capacity:
            grow = table.capacity - self._versions.shape[0]
            self._versions = np.concatenate([self._versions, np.full(grow, -1, dtype=np.int64)])
            self._epochs = np.concatenate([self._epochs, np.full(grow, -1, dtype=np.int64)])
            self.states.extend([None] * grow)
        changed = (self._versions[slots] != table.versions[slots]) | (self._epochs[slots] != self._epoch)
        if not changed.any():
            return []
        return [int(slot) for slot in slots[changed].tolist()]

    def version_changed(self, slot: int) -> bool:
        """Whether the node's row changed since ``slot`` was last marked (else only the mapping did)."""
        assert self.table is not None
        return bool(self._versions[slot] != self.table.versions[slot])

    def mark(self, slot: int, state: ClusterState | None) -> None:
        """``slot``'s values are now made from its current row and ``state``."""
        assert self.table is not None
        self._versions[slot] = self.table.versions[slot]
        self._epochs[slot] = self._epoch
        self.states[slot] = state


class PerSlot(Protocol):
    """Per-slot values one request keeps: grown with the table."""

    def ensure(self, capacity: int) -> None: ...


V = TypeVar("V", bound=PerSlot)


class KeptPerRequest(Generic[V]):
    """Per recurring request (a workload's few pod templates), the per-slot values a batch method keeps over one
    table: made empty the first time, or for a new table (its slots mean other nodes); the least recently used
    request forgotten past ``size``. Who uses it: ClusterCapacity's verdicts, ClusterBalance's scores."""

    def __init__(self, make: Callable[[int], V], size: int) -> None:
        self._make = make
        self._size = size
        self._kept: OrderedDict[Hashable, V] = OrderedDict()
        self._table: NodeTable | None = None

    def get(self, table: NodeTable, request: Hashable) -> V:
        if table is not self._table:
            self._table = table
            self._kept.clear()
        kept = self._kept.get(request)
        if kept is None:
            kept = self._kept[request] = self._make(table.capacity)
            if len(self._kept) > self._size:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(request)
            kept.ensure(table.capacity)
        return kept
