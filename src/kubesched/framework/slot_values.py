"""Per-node values a plugin derives from NodeInfos, kept across cycles and recomputed only where a node changed.

A plugin that needs, every cycle, one number per node that depends on the node *and its pods* (the pods
matching a spread selector, whether a pod's node affinity admits the node) would otherwise walk 5000 NodeInfos
per pod. :class:`SlotValues` keeps the numbers in an array indexed by NodeTable slot and remembers how far it
has read the table's change log; a read recomputes only the slots logged since (the nodes the last cycles
bound a pod to, or that informers changed), without looking at the others. :class:`SlotValueCache` holds them
per key, so pods sharing a selector share the array, and bounds how many it keeps.

:class:`ColumnCache` does the same for values a plugin computes *vectorized* from the table's columns (the
resource scores of a pod's requests): the changed slots are recomputed as one batch. A key is kept only from
its second read on, so pods that all differ pay for their batch alone, never for the whole table.

Who calls it: batch paths of PodTopologySpread (and any plugin with per-node, per-key derived counts), and the
resource-allocation scorers. The per-node methods stay the reference; property tests hold the two equal.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from kubesched.framework.node_table import IntArray, NodeBatch, NodeTable
from kubesched.framework.types import NodeInfo

SlotFunction = Callable[[NodeInfo], int]
# Values for the slots of a batch, in the batch's order, from the table's columns only.
BatchFunction = Callable[[NodeBatch], IntArray]
# The same value for one slot, in plain Python: cheaper than numpy's per-call cost for the few slots a cycle
# changes (the node it bound a pod to).
SlotValue = Callable[[int], int]
FEW_SLOTS = 32


class SlotStamps:
    """How far a reader has read a table's change log, so it learns which slots changed since its last read.
    Shared by :class:`SlotValues` and other per-slot caches (InterPodAffinity's existing-term counts)."""

    __slots__ = ("_position", "_table")

    def __init__(self) -> None:
        self._position = 0
        self._table: NodeTable | None = None

    def changed(self, table: NodeTable) -> tuple[IntArray, bool]:
        """The slots synced or cleared since the last call (now marked read; a read-only array), and whether
        ``table`` is another table than last time (then every slot is reported and the caller's per-slot state
        must start afresh). A grown table's new slots are empty until synced; the caller grows its arrays to
        ``table.capacity``."""
        since = self._position
        fresh = self._table is not table
        self._table = table
        self._position = table.change_position
        if fresh or since < table.change_base:
            return np.arange(table.capacity, dtype=np.int64), fresh
        # Read-only, and shared with the other readers of the same stretch of the log.
        return table.changed_slots(since), False


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


class _Column:
    __slots__ = ("stamps", "values")

    def __init__(self) -> None:
        self.stamps = SlotStamps()
        self.values: IntArray = np.zeros(0, dtype=np.int64)


class ColumnCache:
    """Per key, ``fn``'s values over every slot of a table, kept across cycles: a read recomputes only the
    slots changed since (in one batch call, or one ``one`` call each when they are few). The first read of a
    key computes just the batch asked for and remembers the key; from the second on the key has a column (at
    most ``limit`` columns, the least recently read dropped; as many keys again remembered as seen once)."""

    __slots__ = ("_columns", "_seen", "limit")

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit
        self._columns: OrderedDict[Hashable, _Column] = OrderedDict()
        self._seen: OrderedDict[Hashable, None] = OrderedDict()

    def read(self, batch: NodeBatch, key: Hashable, fn: BatchFunction, one: SlotValue | None = None) -> IntArray:
        """``fn(batch)``; ``key`` must determine ``fn`` (equal keys, equal functions). ``one``, if given, must
        answer as ``fn`` does for a single slot; it recomputes a few changed slots."""
        column = self._columns.get(key)
        if column is None:
            if key not in self._seen:
                self._seen[key] = None
                if len(self._seen) > self.limit:
                    self._seen.popitem(last=False)
                return fn(batch)
            del self._seen[key]
            column = self._columns[key] = _Column()
            if len(self._columns) > self.limit:
                self._columns.popitem(last=False)
        else:
            self._columns.move_to_end(key)
        table = batch.table
        changed, fresh = column.stamps.changed(table)
        if fresh or column.values.shape[0] != table.capacity:
            values = np.zeros(table.capacity, dtype=np.int64)
            if not fresh:
                values[: column.values.shape[0]] = column.values
            column.values = values
        count = changed.shape[0]
        if count:
            if one is not None and count <= FEW_SLOTS:
                values = column.values
                for slot in changed.tolist():
                    values[slot] = one(slot)
            else:
                column.values[changed] = fn(NodeBatch(table, changed))
        return column.values[batch.slots]

    def __len__(self) -> int:
        return len(self._columns)
