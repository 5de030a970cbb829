"""Per-node values a plugin derives from NodeInfos, kept across cycles and recomputed only where a node changed.

A plugin that needs, every cycle, one number per node that depends on the node *and its pods* (the pods
matching a spread selector, whether a pod's node affinity admits the node) would otherwise walk 5000 NodeInfos
per pod. :class:`SlotValues` keeps the numbers in an array indexed by NodeTable slot next to the table stamp
each one was computed at; a read recomputes only the slots whose stamp moved since (the nodes the last cycle
bound a pod to, or that informers changed), a vectorized compare away. :class:`SlotValueCache` holds them per
key, so pods sharing a selector share the array, and bounds how many it keeps.

Who calls it: batch paths of PodTopologySpread (and any plugin with per-node, per-key derived counts). The
per-node methods stay the reference; property tests hold the two equal.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from kubesched.framework.node_table import IntArray, NodeTable
from kubesched.framework.types import NodeInfo

SlotFunction = Callable[[NodeInfo], int]


class SlotStamps:
    """The table stamp each slot was last seen at, so a reader learns which slots changed since its last read.
    Shared by :class:`SlotValues` and other per-slot caches (InterPodAffinity's existing-term counts)."""

    __slots__ = ("_stamps", "_table")

    def __init__(self) -> None:
        self._stamps: IntArray = np.zeros(0, dtype=np.int64)
        self._table: NodeTable | None = None

    def changed(self, table: NodeTable) -> tuple[IntArray, bool]:
        """The slots whose stamp moved since the last call (marked seen now), and whether ``table`` is another
        table than last time (then every slot is reported and the caller's per-slot state must start afresh).
        A grown table reports its new slots; the caller grows its arrays to ``table.capacity``."""
        capacity = table.capacity
        fresh = self._table is not table
        if fresh:
            self._table = table
            self._stamps = np.full(capacity, -1, dtype=np.int64)
        elif self._stamps.shape[0] != capacity:
            grown = np.full(capacity, -1, dtype=np.int64)
            grown[: self._stamps.shape[0]] = self._stamps
            self._stamps = grown
        versions = table.versions
        changed = np.flatnonzero(self._stamps != versions)
        if changed.shape[0]:
            self._stamps[changed] = versions[changed]
        return changed, fresh


class SlotValues:
    """``fn(node)`` for every live slot of one table; 0 for empty slots."""

    __slots__ = ("_stamps", "fn", "values")

    def __init__(self, fn: SlotFunction) -> None:
        self.fn = fn
        self.values: IntArray = np.zeros(0, dtype=np.int64)
        self._stamps = SlotStamps()

    def read(self, table: NodeTable) -> IntArray:
        """The values over all of ``table``'s slots (index with a snapshot's or batch's ``slots``)."""
        changed, fresh = self._stamps.changed(table)
        capacity = table.capacity
        if fresh:
            self.values = np.zeros(capacity, dtype=np.int64)
        elif self.values.shape[0] != capacity:
            values = np.zeros(capacity, dtype=np.int64)
            values[: self.values.shape[0]] = self.values
            self.values = values
        if changed.shape[0]:
            fn, infos, values = self.fn, table.infos, self.values
            for slot in changed.tolist():
                info = infos[slot]
                values[slot] = 0 if info is None else fn(info)
        return self.values


class SlotValueCache:
    """:class:`SlotValues` per key, the least recently read dropped beyond ``limit`` keys."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._entries: OrderedDict[Hashable, SlotValues] = OrderedDict()

    def read(self, table: NodeTable, key: Hashable, fn: SlotFunction) -> IntArray:
        """``fn``'s values over ``table``'s slots; ``key`` must determine ``fn`` (equal keys, equal functions)."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = SlotValues(fn)
            if len(self._entries) > self.limit:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return entry.read(table)

    def __len__(self) -> int:
        return len(self._entries)
