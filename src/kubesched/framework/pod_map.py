"""NodeInfo's pods by uid: a dict's behaviour and order, stored in chunks that copies share until written.

Who uses it: :class:`~kubesched.framework.types.NodeInfo` (``info.pods``), which is the only writer; plugins
read it as a ``Mapping[str, PodInfo]``. Why: every scheduling cycle copies the NodeInfos that changed into its
snapshot (:meth:`NodeInfo.clone`), and a node that gains a pod per cycle -- a DaemonSet's target with tens of
thousands of pods -- made that copy O(pods on the node) per cycle. Here a copy shares every chunk and takes
O(chunks); the first write to a shared chunk copies that chunk alone (at most :data:`CHUNK` entries).

It behaves as a dict does, order included: iteration follows insertion, setting an existing uid keeps its
place, a uid removed and added again goes to the end (new uids are appended to the last chunk, which is the
end). :meth:`PodMap.changes_since` gives what changed between two maps of one lineage without looking at the
chunks they still share.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from itertools import chain
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubesched.framework.types import PodInfo

CHUNK = 512
"""Most entries in one chunk: what a first write after a copy copies."""

Item = tuple[str, "PodInfo"]


class _Values(ValuesView["PodInfo"]):
    _mapping: PodMap

    def __iter__(self) -> Iterator[PodInfo]:
        return chain.from_iterable(chunk.values() for chunk in self._mapping._chunks)


class _Items(ItemsView[str, "PodInfo"]):
    _mapping: PodMap

    def __iter__(self) -> Iterator[Item]:
        return chain.from_iterable(chunk.items() for chunk in self._mapping._chunks)


class PodMap(Mapping[str, "PodInfo"]):
    """uid -> PodInfo, in insertion order, in chunks a :meth:`copy` shares (see the module docstring)."""

    __slots__ = ("_chunks", "_owned", "_size")

    def __init__(self) -> None:
        self._chunks: list[dict[str, PodInfo]] = []
        # Whether this map may write chunk i in place (it is not shared with a copy).
        self._owned: list[bool] = []
        self._size = 0

    # ---- reading (Mapping) -------------------------------------------------------------------

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, uid: str) -> PodInfo:
        for chunk in self._chunks:
            found = chunk.get(uid)
            if found is not None:
                return found
        raise KeyError(uid)

    def __contains__(self, uid: object) -> bool:
        chunks = self._chunks
        if len(chunks) == 1:
            return uid in chunks[0]
        return any(uid in chunk for chunk in chunks)

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._chunks)

    def keys(self) -> KeysView[str]:
        if len(self._chunks) == 1:
            return self._chunks[0].keys()
        return KeysView(self)

    def values(self) -> ValuesView[PodInfo]:
        # One chunk (nodes with up to CHUNK pods, nearly all of them): the dict's own view, at C speed.
        if len(self._chunks) == 1:
            return self._chunks[0].values()
        return _Values(self)

    def items(self) -> ItemsView[str, PodInfo]:
        if len(self._chunks) == 1:
            return self._chunks[0].items()
        return _Items(self)

    def __repr__(self) -> str:
        return f"PodMap({dict(self.items())!r})"

    # ---- writing (NodeInfo only) -------------------------------------------------------------

    def put(self, uid: str, pod_info: PodInfo) -> None:
        """``map[uid] = pod_info`` with a dict's order rules."""
        chunks = self._chunks
        for index, chunk in enumerate(chunks):
            if uid in chunk:
                self._writable(index)[uid] = pod_info
                return
        if chunks and len(chunks[-1]) < CHUNK:
            self._writable(len(chunks) - 1)[uid] = pod_info
        else:
            chunks.append({uid: pod_info})
            self._owned.append(True)
        self._size += 1

    def pop(self, uid: str) -> PodInfo | None:
        """Remove ``uid``; its PodInfo, or None when it is not here."""
        for index, chunk in enumerate(self._chunks):
            if uid in chunk:
                writable = self._writable(index)
                found = writable.pop(uid)
                self._size -= 1
                if not writable:
                    del self._chunks[index], self._owned[index]
                elif len(self._chunks) > 2 * (self._size // CHUNK + 1):
                    self._compact()
                return found
        return None

    def copy(self) -> PodMap:
        """A map equal to this one that shares its chunks; whichever writes a shared chunk first copies it."""
        twin = PodMap.__new__(PodMap)
        twin._chunks = list(self._chunks)
        twin._owned = [False] * len(self._chunks)
        self._owned = [False] * len(self._chunks)
        twin._size = self._size
        return twin

    def _writable(self, index: int) -> dict[str, PodInfo]:
        if not self._owned[index]:
            self._chunks[index] = dict(self._chunks[index])
            self._owned[index] = True
        return self._chunks[index]

    def _compact(self) -> None:
        # Removals left many sparse chunks (look-ups scan chunks): refill them, order kept.
        items = list(self.items())
        self._chunks = [dict(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]
        self._owned = [True] * len(self._chunks)

    # ---- what changed ------------------------------------------------------------------------

    def changes_since(self, older: PodMap) -> tuple[set[Item], set[Item]]:
        """(items of ``older`` not here, items here not in ``older``), compared by uid and PodInfo identity;
        chunks the two maps still share are skipped."""
        shared = {id(chunk) for chunk in self._chunks} & {id(chunk) for chunk in older._chunks}
        before: set[Item] = set()
        for chunk in older._chunks:
            if id(chunk) not in shared:
                before.update(chunk.items())
        after: set[Item] = set()
        for chunk in self._chunks:
            if id(chunk) not in shared:
                after.update(chunk.items())
        return before - after, after - before
