"""Columnar node state: per-node aggregates as numpy arrays, for batch Filter and Score.

Each :class:`~kubesched.framework.snapshot.Snapshot` owns one table. The scheduler cache writes the rows of
the nodes that changed since the snapshot was last updated (:meth:`NodeTable.sync`), so the arrays always
equal the snapshot's :class:`~kubesched.framework.types.NodeInfo` objects, and a cycle reading them sees
one consistent generation even while informers and binding tasks change the cache. Slots are assigned by
the cache (a node keeps its slot for its lifetime; a removed node's slot is reused). Batch plugins read
columns indexed by a ``slots`` array (see :class:`NodeBatch`); the per-node methods stay the reference,
and property tests hold the two equal.

Class columns give every node a small integer id for an equivalence class chosen by a plugin (e.g.
"the node's taints"), so a plugin can evaluate its per-node rule once per class and broadcast. Ids are
append-only: an id always means the same key, so a plugin may keep per-class answers across cycles.

Image columns hold, per slot, the size a node reports for one image (0 where it has none): ImageLocality
scores a pod's few images over thousands of nodes with one multiply per image, where a class per node image set
would be one class per node once nodes carry many images. Only the images pods ask for get a column, and only
the :data:`MAX_IMAGE_COLUMNS` most recently asked for are kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast, overload

import numpy as np
import numpy.typing as npt

from kubesched.framework.status import Status
from kubesched.framework.types import NodeInfo

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ObjectArray = npt.NDArray[np.object_]

ClassKey = Callable[[NodeInfo], Hashable]

_NO_CHANGES: IntArray = np.zeros(0, dtype=np.int64)
_NO_CHANGES.flags.writeable = False
_FEW_ENTRIES = 64

MAX_IMAGE_COLUMNS = 128
"""Image columns kept per table (8 bytes per node each): beyond it the least recently used one is dropped."""


class ClassColumn:
    """Interned per-node class ids: ``ids[slot]`` indexes ``values`` (the keys, first-seen order). ``version`` counts
    the changes of ``ids`` (a slot given another class; the array itself is replaced when the table grows), so a
    reader can keep something derived from them until it moves."""

    __slots__ = ("_index", "ids", "key_fn", "values", "version")

    def __init__(self, key_fn: ClassKey, capacity: int) -> None:
        self.key_fn = key_fn
        self.ids: IntArray = np.zeros(capacity, dtype=np.int64)
        self.values: list[Hashable] = []
        self._index: dict[Hashable, int] = {}
        self.version = 0

    def assign(self, slot: int, node_info: NodeInfo) -> None:
        key = self.key_fn(node_info)
        class_id = self._index.get(key)
        if class_id is None:
            class_id = len(self.values)
            self._index[key] = class_id
            self.values.append(key)
        if self.ids[slot] != class_id:
            self.ids[slot] = class_id
            self.version += 1

    def id_of(self, key: Hashable) -> int | None:
        """The id of ``key``, None if no node has had it: a plugin can compare ids instead of keys."""
        return self._index.get(key)


class NodeTable:
    """Arrays indexed by node slot; slots are reused after a node is removed."""

    _INT_COLUMNS = (
        "alloc_cpu",
        "alloc_memory",
        "alloc_ephemeral",
        "alloc_pods",
        "req_cpu",
        "req_memory",
        "req_ephemeral",
        "nonzero_cpu",
        "nonzero_memory",
        "pod_count",
    )

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.alloc_cpu: IntArray = np.zeros(capacity, dtype=np.int64)
        self.alloc_memory: IntArray = np.zeros(capacity, dtype=np.int64)
        self.alloc_ephemeral: IntArray = np.zeros(capacity, dtype=np.int64)
        self.alloc_pods: IntArray = np.zeros(capacity, dtype=np.int64)
        self.req_cpu: IntArray = np.zeros(capacity, dtype=np.int64)
        self.req_memory: IntArray = np.zeros(capacity, dtype=np.int64)
        self.req_ephemeral: IntArray = np.zeros(capacity, dtype=np.int64)
        self.nonzero_cpu: IntArray = np.zeros(capacity, dtype=np.int64)
        self.nonzero_memory: IntArray = np.zeros(capacity, dtype=np.int64)
        self.pod_count: IntArray = np.zeros(capacity, dtype=np.int64)
        self.live: BoolArray = np.zeros(capacity, dtype=np.bool_)
        # A stamp per slot, new on every sync: a plugin that keeps per-node results can find the rows that changed
        # since it last looked by comparing integers rather than NodeInfo objects.
        self.versions: IntArray = np.zeros(capacity, dtype=np.int64)
        self._next_version = 0
        # The slots synced or cleared, in order: a reader that remembers how far it read finds what changed
        # since in O(changes), not by comparing every slot's stamp. Entries before ``change_base`` are dropped
        # once the log outgrows the table; a reader that far behind rereads everything.
        self.change_log: list[int] = []
        self.change_base = 0
        # The last answer of changed_slots as (since, up to, slots): every per-slot cache (the resource scorers',
        # NodeResourcesFit's, InterPodAffinity's) reads the same stretch of the log each cycle, so its distinct
        # slots are gathered once for all of them.
        self._changed_memo: tuple[int, int, IntArray] = (0, 0, _NO_CHANGES)
        # The slots whose node holds a pod with pod (anti-)affinity terms: while there is none, InterPodAffinity
        # knows without reading the change log that no existing pod's terms can matter.
        self._affinity_slots: set[int] = set()
        # Extended resources appear on few nodes; a column pair is created the first time one is seen.
        self.scalar_alloc: dict[str, IntArray] = {}
        self.scalar_req: dict[str, IntArray] = {}
        self.classes: dict[str, ClassColumn] = {}
        self._image_columns: OrderedDict[str, IntArray] = OrderedDict()
        self.infos: list[NodeInfo | None] = [None] * capacity
        # The same NodeInfos (and their names) as object arrays: a batch of slots becomes a list of NodeInfos
        # or names by one fancy index, not a Python loop over hundreds of nodes per cycle.
        self.info_column: ObjectArray = np.full(capacity, None, dtype=object)
        self.name_column: ObjectArray = np.full(capacity, None, dtype=object)

    def ensure_capacity(self, size: int) -> None:
        """Make room for slots ``0 .. size-1``."""
        while self.capacity < size:
            self._grow()

    def clear(self, slot: int) -> None:
        """Forget the node in ``slot`` (it was removed, or moved to another slot)."""
        self.live[slot] = False
        self._stamp(slot)
        self._affinity_slots.discard(slot)
        self.infos[slot] = None
        self.info_column[slot] = None
        self.name_column[slot] = None
        for name in self._INT_COLUMNS:
            getattr(self, name)[slot] = 0
        for array in (*self.scalar_alloc.values(), *self.scalar_req.values(), *self._image_columns.values()):
            array[slot] = 0

    def _stamp(self, slot: int) -> None:
        self._next_version += 1
        self.versions[slot] = self._next_version
        log = self.change_log
        log.append(slot)
        if len(log) > 4 * self.capacity + 64:
            self.change_base += len(log)
            log.clear()

    def changed_slots(self, since: int) -> IntArray:
        """The distinct slots synced or cleared from log position ``since`` (at least ``change_base``) up to now,
        in ascending order. Read-only: the readers of one stretch share it (see :class:`SlotStamps` in
        :mod:`kubesched.framework.slot_values`, the usual caller)."""
        position = self.change_base + len(self.change_log)
        memo = self._changed_memo
        if memo[0] == since and memo[1] == position:
            return memo[2]
        entries = self.change_log[since - self.change_base :]
        if not entries:
            return _NO_CHANGES
        if len(entries) <= _FEW_ENTRIES:  # a few cycles' binds: cheaper as a set than through numpy
            slots = np.array(sorted(set(entries)), dtype=np.int64)
        else:
            slots = np.unique(np.array(entries, dtype=np.int64))
        slots.setflags(write=False)
        self._changed_memo = (since, position, slots)
        return slots

    @property
    def change_position(self) -> int:
        """How many changes the table has logged so far (dropped ones included)."""
        return self.change_base + len(self.change_log)

    def _grow(self) -> None:
        new_capacity = max(self.capacity * 2, 1)
        for name in self._INT_COLUMNS:
            setattr(self, name, _grown(getattr(self, name), new_capacity))
        self.live = _grown(self.live, new_capacity)
        self.versions = _grown(self.versions, new_capacity)
        self.scalar_alloc = {k: _grown(v, new_capacity) for k, v in self.scalar_alloc.items()}
        self.scalar_req = {k: _grown(v, new_capacity) for k, v in self.scalar_req.items()}
        for class_column in self.classes.values():
            class_column.ids = _grown(class_column.ids, new_capacity)
        for image, sizes in self._image_columns.items():
            self._image_columns[image] = _grown(sizes, new_capacity)
        self.infos.extend([None] * (new_capacity - self.capacity))
        self.info_column = _grown(self.info_column, new_capacity)
        self.name_column = _grown(self.name_column, new_capacity)
        self.capacity = new_capacity

    def _scalar_columns(self, name: str) -> tuple[IntArray, IntArray]:
        alloc = self.scalar_alloc.get(name)
        if alloc is None:
            alloc = self.scalar_alloc[name] = np.zeros(self.capacity, dtype=np.int64)
            self.scalar_req[name] = np.zeros(self.capacity, dtype=np.int64)
        return alloc, self.scalar_req[name]

    def scalar(self, name: str) -> tuple[IntArray, IntArray]:
        """(allocatable, requested) columns of an extended resource; zeros if no node has it."""
        return self._scalar_columns(name)

    @property
    def has_pods_with_affinity(self) -> bool:
        """Whether some node holds a pod with pod affinity or anti-affinity terms."""
        return bool(self._affinity_slots)

    def replace_info(self, info: NodeInfo) -> None:
        """Put ``info`` in its slot in place of a NodeInfo with equal aggregates and equal per-pod facts (a
        snapshot copy after a confirmed bind): the columns hold, and no change is logged for the readers."""
        self.infos[info.slot] = info
        self.info_column[info.slot] = info

    def sync(self, info: NodeInfo, *, node_changed: bool) -> None:
        """Copy ``info``'s aggregates into its slot; with ``node_changed`` also allocatable and classes."""
        slot = info.slot
        if slot >= self.capacity:
            self.ensure_capacity(slot + 1)
        self.infos[slot] = info
        self.info_column[slot] = info
        self.name_column[slot] = info.name
        self.live[slot] = True
        self._stamp(slot)
        req = info.requested
        self.req_cpu[slot] = req.milli_cpu
        self.req_memory[slot] = req.memory
        self.req_ephemeral[slot] = req.ephemeral_storage
        self.nonzero_cpu[slot] = info.non_zero_requested.milli_cpu
        self.nonzero_memory[slot] = info.non_zero_requested.memory
        self.pod_count[slot] = len(info.pods)
        if info.pods_with_affinity:
            self._affinity_slots.add(slot)
        elif self._affinity_slots:
            self._affinity_slots.discard(slot)
        for name, amount in req.scalar.items():
            self._scalar_columns(name)[1][slot] = amount
        if node_changed:
            alloc = info.allocatable
            self.alloc_cpu[slot] = alloc.milli_cpu
            self.alloc_memory[slot] = alloc.memory
            self.alloc_ephemeral[slot] = alloc.ephemeral_storage
            self.alloc_pods[slot] = alloc.allowed_pod_number
            for name, alloc_column in self.scalar_alloc.items():
                alloc_column[slot] = alloc.scalar.get(name, 0)
            for name, amount in alloc.scalar.items():
                self._scalar_columns(name)[0][slot] = amount
            for class_column in self.classes.values():
                class_column.assign(slot, info)
            if self._image_columns:
                reported = info.image_sizes
                for image, sizes in self._image_columns.items():
                    sizes[slot] = reported.get(image, 0)

    def class_column(self, name: str, key_fn: ClassKey) -> ClassColumn:
        """The class column ``name``, created (and filled for every live node) on first request."""
        column = self.classes.get(name)
        if column is not None and column.key_fn is not key_fn:
            raise ValueError(f"class column {name!r} already exists with a different key function")
        if column is None:
            column = ClassColumn(key_fn, self.capacity)
            for slot, info in enumerate(self.infos):
                if info is not None:
                    column.assign(slot, info)
            self.classes[name] = column
        return column

    def image_sizes(self, image: str) -> IntArray:
        """Per slot, the size the node reports for ``image`` (0: it has none); made on first request."""
        sizes = self._image_columns.get(image)
        if sizes is not None:
            self._image_columns.move_to_end(image)
            return sizes
        sizes = np.zeros(self.capacity, dtype=np.int64)
        for slot, info in enumerate(self.infos):
            if info is not None:
                sizes[slot] = info.image_sizes.get(image, 0)
        self._image_columns[image] = sizes
        if len(self._image_columns) > MAX_IMAGE_COLUMNS:
            self._image_columns.popitem(last=False)
        return sizes


ArrayT = TypeVar("ArrayT", bound=npt.NDArray[Any])


def _grown(array: ArrayT, capacity: int) -> ArrayT:
    grown = np.full(capacity, None, dtype=object) if array.dtype == object else np.zeros(capacity, dtype=array.dtype)
    grown[: array.shape[0]] = array
    return cast(ArrayT, grown)


class NodeBatch:
    """The candidate nodes of one batch call: their slots, in search order; NodeInfos on demand."""

    __slots__ = ("_infos", "slots", "table")

    def __init__(self, table: NodeTable, slots: IntArray) -> None:
        self.table = table
        self.slots = slots
        self._infos: list[NodeInfo] | None = None

    @property
    def infos(self) -> list[NodeInfo]:
        if self._infos is None:
            # Every slot of a batch holds a live node, so no None can come out here.
            self._infos = cast(list[NodeInfo], self.table.info_column[self.slots].tolist())
        return self._infos

    def names(self) -> list[str]:
        """The batch's node names, in its order."""
        return cast(list[str], self.table.name_column[self.slots].tolist())

    def info(self, index: int) -> NodeInfo:
        """One node of the batch, without materializing the whole list."""
        return cast(NodeInfo, self.table.infos[int(self.slots[index])])

    def __len__(self) -> int:
        return len(self.slots)

    def lazy_infos(self) -> BatchInfos:
        """The batch's NodeInfos as a sequence made only when first read (most PreScore plugins never do)."""
        return BatchInfos(self)

    def lazy_names(self) -> BatchNames:
        """The batch's node names, made only when first read (by the audit or explain, if anyone listens)."""
        return BatchNames(self)


class BatchInfos(Sequence[NodeInfo]):
    """A batch's NodeInfos in its order, listed on first use; ``batch`` gives a plugin the slots directly."""

    __slots__ = ("batch",)

    def __init__(self, batch: NodeBatch) -> None:
        self.batch = batch

    @overload
    def __getitem__(self, index: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[NodeInfo]: ...

    def __getitem__(self, index: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        return self.batch.infos[index]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.batch.infos)

    def __len__(self) -> int:
        return len(self.batch)


class BatchNames(Sequence[str]):
    """A batch's node names in its order, listed on first use."""

    __slots__ = ("_batch", "_names")

    def __init__(self, batch: NodeBatch) -> None:
        self._batch = batch
        self._names: list[str] | None = None

    def _listed(self) -> list[str]:
        if self._names is None:
            self._names = self._batch.names()
        return self._names

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._listed()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed())

    def __len__(self) -> int:
        return len(self._batch)


@dataclass(frozen=True, slots=True)
class BatchFilterResult:
    """Per-candidate filter outcome: ``codes[i] == 0`` passes, ``k > 0`` means ``statuses[k-1]``."""

    codes: IntArray
    statuses: Sequence[Status]
