"""InterPodAffinity's counting over the whole snapshot, as arrays: per-domain sums in a few numpy passes.

PreFilter and PreScore sum, per topology domain, the existing pods that match the incoming pod's terms and the
existing pods whose terms match the incoming pod. Walking 5000 NodeInfos and their pods for every pod with terms
was ~80 % of an affinity workload's cycle. Here:

- the incoming pod's side: pods matching a term (or all required affinity terms) per node come from a
  :class:`~kubesched.framework.slot_values.SlotValueCache` keyed by what the match reads (namespaces, namespace
  selector, label selector), recomputed only for nodes whose table stamp moved since the last read, with each
  (namespace, labels) group of pods matched once;
- the existing pods' side: :class:`_ExistingTerms` keeps how many pods carry each distinct term (kind, term,
  weight), updated from the changed nodes only, so a cycle matches each distinct term against the incoming pod
  once; the per-node occurrences of a matching term are again a cached per-slot column;
- a domain's sum is one ``bincount`` over the topology key's class column (:class:`TopologyColumns`).

The results are the reference loops' dictionaries (equal as dictionaries; nothing reads their order), plus the
per-class arrays they were made from, which Filter and Score batches read instead of turning the dictionaries
back into arrays.

Who calls it: :class:`~kubesched.plugins.interpodaffinity.inter_pod_affinity.InterPodAffinity`, when the nodes
it is asked about are the snapshot's own list; its node-by-node loops (``reference_pre_filter_counts``,
``reference_topology_scores``) stay the reference, held equal by the property test in
``tests/unit/plugins/interpodaffinity/test_counting_equivalence.py``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import cast

import numpy as np

from kubesched.api.objects import Pod
from kubesched.framework.node_table import BoolArray, ClassColumn, IntArray, NodeTable
from kubesched.framework.slot_values import SlotFunction, SlotStamps, SlotValueCache
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo
from kubesched.plugins.helper.classes import label_value
from kubesched.plugins.interpodaffinity.node_pods import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    GroupKey,
    NodePods,
    TermKey,
)
from kubesched.plugins.interpodaffinity.terms import AffinityTerm, PodTerms, WeightedAffinityTerm

TopologyPair = tuple[str, str]
Counts = dict[TopologyPair, int]
TopologyScores = dict[str, dict[str, int]]
ClassArrays = dict[str, tuple[ClassColumn, IntArray]]
"""Per topology key: (the class column, the per-class amounts a Counts / TopologyScores entry was made from)."""

PodsOf = Callable[[NodeInfo], NodePods]
_PerKey = dict[str, tuple[IntArray, tuple[Hashable, ...]]]
"""Per topology key: per-slot amounts and what they were summed from (the key of their rendered dictionary)."""

# Verdicts of one term on (namespace, labels) groups, kept with the term's per-slot column; cleared past this size
# (pods with unique labels would otherwise grow it without bound).
_MEMO_LIMIT = 1 << 16


# ---- topology-value class columns --------------------------------------------------------------------------

# The node-label-value column every plugin shares for a key (one NodeTable column, not one per plugin).
topology_spec = label_value


class KeyColumn:
    """One topology key's class column, with per-class facts kept as classes are appended (ids never change)."""

    __slots__ = ("column", "has", "index", "none_id", "size")

    def __init__(self, column: ClassColumn) -> None:
        self.column = column
        self.size = 0
        self.none_id = -1
        self.index: dict[str, int] = {}
        self.has: BoolArray = np.zeros(0, dtype=np.bool_)

    def refresh(self) -> None:
        values = self.column.values
        if len(values) == self.size:
            return
        for class_id in range(self.size, len(values)):
            value = values[class_id]
            if isinstance(value, str):
                self.index[value] = class_id
            else:
                self.none_id = class_id
        self.size = len(values)
        has = np.ones(self.size, dtype=np.bool_)
        if self.none_id >= 0:
            has[self.none_id] = False
        self.has = has

    def per_class(self, per_value: Mapping[str, int]) -> IntArray:
        """``per_value`` (domain value -> amount) as an array over the classes, 0 for the rest."""
        out = np.zeros(self.size, dtype=np.int64)
        index = self.index
        for value, amount in per_value.items():
            class_id = index.get(value)
            if class_id is not None:
                out[class_id] = amount
        return out

    def sums(self, slots: IntArray | None, per_slot: IntArray) -> IntArray:
        """``per_slot`` (aligned with ``slots``; None: with the table's slots) summed per class; the class of nodes
        without the key gets 0."""
        ids = self.column.ids if slots is None else self.column.ids[slots]
        # Float sums of pod counts are exact far beyond any cluster's size.
        out = np.bincount(ids, weights=per_slot, minlength=self.size).astype(np.int64)
        if self.none_id >= 0:
            out[self.none_id] = 0
        return out


class TopologyColumns:
    """:class:`KeyColumn` per topology key for the table last asked about."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: dict[str, KeyColumn] = {}

    def of(self, table: NodeTable, key: str) -> KeyColumn:
        spec = topology_spec(key)
        column = table.class_column(spec.name, spec.key_fn)
        entry = self._keys.get(key)
        if entry is None or entry.column is not column:
            entry = self._keys[key] = KeyColumn(column)
        entry.refresh()
        return entry


# ---- existing pods' distinct terms ----------------------------------------------------------------------------


class _ExistingTerms:
    """How many pods of the table carry each distinct term, updated from the slots whose stamp moved."""

    __slots__ = ("_per_slot", "_stamps", "totals")

    def __init__(self) -> None:
        self._stamps = SlotStamps()
        self._per_slot: list[Mapping[TermKey, int] | None] = []
        self.totals: dict[TermKey, int] = {}

    def refresh(self, table: NodeTable, pods_of: PodsOf) -> Mapping[TermKey, int]:
        changed, fresh = self._stamps.changed(table)
        capacity = table.capacity
        if fresh:
            self._per_slot = [None] * capacity
            self.totals = {}
        elif len(self._per_slot) != capacity:
            self._per_slot.extend([None] * (capacity - len(self._per_slot)))
        if changed.shape[0]:
            totals, per_slot, infos = self.totals, self._per_slot, table.infos
            for slot in changed.tolist():
                old = per_slot[slot]
                if old:
                    for key, count in old.items():
                        left = totals[key] - count
                        if left:
                            totals[key] = left
                        else:
                            del totals[key]
                info = infos[slot]
                # Most nodes hold no pod with terms; their view (built from every pod) is not needed here.
                new = pods_of(info).term_counts if info is not None and info.pods_with_affinity else None
                if new:
                    for key, count in new.items():
                        totals[key] = totals.get(key, 0) + count
                per_slot[slot] = new
        return self.totals


# ---- the counter ---------------------------------------------------------------------------------------------


class AffinityCounter:
    """Per-domain sums over a snapshot; one per plugin instance, kept across cycles."""

    __slots__ = ("_existing", "_pods_of", "_rendered", "_values", "columns")

    def __init__(self, pods_of: PodsOf) -> None:
        self._pods_of = pods_of
        # One column per distinct incoming-term selector and per distinct existing term that matched lately.
        self._values = SlotValueCache(limit=256)
        self._existing = _ExistingTerms()
        self._rendered = _Renderings()
        self.columns = TopologyColumns()

    # ---- per-slot inputs -------------------------------------------------------------------------------

    def _group_counter(self, predicate: Callable[[Pod], bool]) -> SlotFunction:
        """Per node, the pods (counted by (namespace, labels) group) that ``predicate`` admits; each group's
        verdict is remembered, since most groups recur on many nodes."""
        memo: dict[GroupKey, bool] = {}
        pods_of = self._pods_of

        def count(info: NodeInfo) -> int:
            total = 0
            for group in pods_of(info).groups:
                verdict = memo.get(group.key)
                if verdict is None:
                    if len(memo) >= _MEMO_LIMIT:
                        memo.clear()
                    verdict = memo[group.key] = predicate(group.sample)
                if verdict:
                    total += group.count
            return total

        return count

    def matching(self, table: NodeTable, term: AffinityTerm) -> IntArray:
        """Pods matching ``term`` (namespace selector resolved or unset) per slot."""
        key = ("matching", term.namespaces, term.namespace_selector, term.selector)
        return self._values.read(table, key, self._group_counter(lambda pod: term.matches(pod, None)))

    def matching_all(self, table: NodeTable, terms: Sequence[AffinityTerm]) -> IntArray:
        """Pods matching every one of ``terms`` per slot (upstream ``podMatchesAllAffinityTerms``)."""
        key = ("matching-all", tuple((t.namespaces, t.namespace_selector, t.selector) for t in terms))
        return self._values.read(table, key, self._group_counter(lambda pod: all(t.matches(pod, None) for t in terms)))

    def existing(self, table: NodeTable, key: TermKey) -> IntArray:
        """Occurrences of the existing-pod term ``key`` per slot."""
        pods_of = self._pods_of

        def occurrences(info: NodeInfo) -> int:
            return pods_of(info).term_counts.get(key, 0)

        return self._values.read(table, ("existing", key), occurrences)

    # ---- PreFilter -------------------------------------------------------------------------------------

    def any_existing_terms(self, table: NodeTable) -> bool:
        """Whether some pod of ``table`` has any affinity term: when none has and the incoming pod has no
        preferred terms, PreScore has nothing to score."""
        # The table knows at once when no pod has terms (most clusters): then the change log is not read.
        return table.has_pods_with_affinity and bool(self._existing.refresh(table, self._pods_of))

    def any_existing_anti_affinity(self, table: NodeTable) -> bool:
        """Whether some pod of ``table`` has a required anti-affinity term (which could reject the incoming
        pod): when none has and the pod has no required terms, PreFilter skips without counting anything."""
        return table.has_pods_with_affinity and any(
            kind == REQUIRED_ANTI_AFFINITY for kind, _, _ in self._existing.refresh(table, self._pods_of)
        )

    def pre_filter_counts(
        self, snapshot: Snapshot, incoming: Pod, namespace_labels: Mapping[str, str], terms: PodTerms
    ) -> tuple[tuple[Counts, ClassArrays], tuple[Counts, ClassArrays], tuple[Counts, ClassArrays]]:
        """(existing pods' required anti-affinity matching ``incoming``, pods matching all of its required
        affinity terms, pods matching each of its required anti-affinity terms) per domain over the snapshot,
        each with its per-class arrays; ``terms`` have their namespace selectors resolved."""
        table, slots = snapshot.table, _counted_slots(snapshot)
        existing: _PerKey = {}
        for key in self._existing.refresh(table, self._pods_of):
            kind, term, _ = key
            if kind == REQUIRED_ANTI_AFFINITY and term.matches(incoming, namespace_labels):
                _accumulate(existing, term.topology_key, _pick(self.existing(table, key), slots), key)
        affinity: _PerKey = {}
        if terms.required_affinity:
            matched = _pick(self.matching_all(table, terms.required_affinity), slots)
            selectors = tuple(_selector_key(t) for t in terms.required_affinity)
            # One bump per term, as the reference does (two terms over one key count the pod twice).
            for term in terms.required_affinity:
                _accumulate(affinity, term.topology_key, matched, selectors)
        anti: _PerKey = {}
        for term in terms.required_anti_affinity:
            _accumulate(anti, term.topology_key, _pick(self.matching(table, term), slots), _selector_key(term))
        return (
            self._domain_counts(table, slots, "existing", existing),
            self._domain_counts(table, slots, "affinity", affinity),
            self._domain_counts(table, slots, "anti", anti),
        )

    def _domain_counts(
        self, table: NodeTable, slots: IntArray | None, kind: str, per_key: _PerKey
    ) -> tuple[Counts, ClassArrays]:
        counts: Counts = {}
        arrays: ClassArrays = {}
        for key, (per_slot, sources) in per_key.items():
            column = self.columns.of(table, key)
            sums = column.sums(slots, per_slot)
            arrays[key] = (column.column, sums)
            part = self._rendered.render((kind, key, sources), column, sums, sums, _pair_namer(key))
            counts.update(cast(Mapping[TopologyPair, int], part))
        return counts, arrays

    # ---- PreScore --------------------------------------------------------------------------------------

    def topology_scores(
        self,
        snapshot: Snapshot,
        incoming: Pod,
        namespace_labels: Mapping[str, str],
        preferred: Iterable[WeightedAffinityTerm],
        preferred_anti: Iterable[WeightedAffinityTerm],
        hard_weight: int,
    ) -> tuple[TopologyScores, ClassArrays]:
        """PreScore's per-domain sums: ``incoming``'s (resolved) preferred terms over existing pods (+w / -w) and
        existing pods' required affinity (+``hard_weight`` when positive) and preferred terms (+w / -w) matching
        ``incoming``. A domain is present when any pod in it was credited, even with a zero amount."""
        table, slots = snapshot.table, _counted_slots(snapshot)
        weighted: dict[str, IntArray] = {}
        touched: dict[str, IntArray] = {}
        sources: dict[str, list[Hashable]] = {}

        def credit(key: str, per_slot: IntArray, amount: int, source: Hashable) -> None:
            column = self.columns.of(table, key)
            credited = column.sums(slots, per_slot)
            if key in touched:
                touched[key] = touched[key] + credited
                weighted[key] = weighted[key] + credited * amount
                sources[key].append(source)
            else:
                touched[key] = credited
                weighted[key] = credited * amount
                sources[key] = [source]

        for w in preferred:
            credit(
                w.term.topology_key, _pick(self.matching(table, w.term), slots), w.weight, (_selector_key(w.term), 1)
            )
        for w in preferred_anti:
            credit(
                w.term.topology_key, _pick(self.matching(table, w.term), slots), -w.weight, (_selector_key(w.term), -1)
            )
        for term_key in self._existing.refresh(table, self._pods_of):
            kind, term, weight = term_key
            if kind == REQUIRED_AFFINITY:
                if hard_weight <= 0:
                    continue
                amount = hard_weight
            elif kind == PREFERRED_AFFINITY:
                amount = weight
            elif kind == PREFERRED_ANTI_AFFINITY:
                amount = -weight
            else:
                continue
            if term.matches(incoming, namespace_labels):
                credit(term.topology_key, _pick(self.existing(table, term_key), slots), amount, (term_key, amount))
        scores: TopologyScores = {}
        arrays: ClassArrays = {}
        for key, credited in touched.items():
            if not credited.any():
                continue
            column = self.columns.of(table, key)
            amounts = weighted[key]
            rendered = self._rendered.render(("scores", key, tuple(sources[key])), column, credited, amounts, str)
            scores[key] = dict(cast(Mapping[str, int], rendered))
            arrays[key] = (column.column, amounts)
        return scores, arrays


class _Rendering:
    """One dictionary made from per-class arrays, and the arrays it was made from."""

    __slots__ = ("amounts", "column", "out", "touched")

    def __init__(self, column: ClassColumn, touched: IntArray, amounts: IntArray, out: dict[Hashable, int]) -> None:
        self.column = column
        self.touched = touched
        self.amounts = amounts
        self.out = out


class _Renderings:
    """Per-class arrays as dictionaries (domain -> amount, for the domains with ``touched`` > 0), each kept per
    purpose and updated from the classes that moved since the last cycle: the state must be the reference's
    dictionaries, and building a 2000-entry dictionary per cycle cost more than all the counting."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._entries: OrderedDict[Hashable, _Rendering] = OrderedDict()

    def render(
        self,
        purpose: Hashable,
        column: KeyColumn,
        touched: IntArray,
        amounts: IntArray,
        name: Callable[[str], Hashable],
    ) -> Mapping[Hashable, int]:
        """The dictionary ``{name(value): amounts[c]}`` over the classes ``c`` with ``touched[c] > 0``; the
        caller copies it (it changes in place next time). The arrays must not be changed afterwards."""
        values = _domain_names(column)
        entry = self._entries.get(purpose)
        if entry is None or entry.column is not column.column or entry.touched.shape[0] > touched.shape[0]:
            present = np.flatnonzero(touched).tolist()
            out = dict(zip([name(values[c]) for c in present], amounts[present].tolist(), strict=True))
            self._entries[purpose] = _Rendering(column.column, touched, amounts, out)
            self._entries.move_to_end(purpose)
            if len(self._entries) > self.limit:
                self._entries.popitem(last=False)
            return out
        self._entries.move_to_end(purpose)
        old_touched, old_amounts = entry.touched, entry.amounts
        if old_touched.shape[0] < touched.shape[0]:
            # New classes since: they were absent (zero) before.
            old_touched = _padded(old_touched, touched.shape[0])
            old_amounts = _padded(old_amounts, touched.shape[0])
        out = entry.out
        for c in np.flatnonzero((touched != old_touched) | (amounts != old_amounts)).tolist():
            if touched[c] > 0:
                out[name(values[c])] = int(amounts[c])
            else:
                out.pop(name(values[c]), None)
        entry.touched, entry.amounts = touched, amounts
        return out


def _padded(array: IntArray, size: int) -> IntArray:
    out = np.zeros(size, dtype=np.int64)
    out[: array.shape[0]] = array
    return out


def _pair_namer(key: str) -> Callable[[str], Hashable]:
    def pair(value: str) -> Hashable:
        return (key, value)

    return pair


def _selector_key(term: AffinityTerm) -> Hashable:
    """What ``term.matches(pod, None)`` reads of the term."""
    return (term.namespaces, term.namespace_selector, term.selector)


def _counted_slots(snapshot: Snapshot) -> IntArray | None:
    """The slots to count over: None when they are all the table's live slots, so per-slot columns (0 on empty
    slots) are summed whole, without gathering 5000 entries of each first."""
    slots = snapshot.slots
    table = snapshot.table
    if slots.shape[0] == int(np.count_nonzero(table.live)):
        return None
    return slots


def _pick(per_slot: IntArray, slots: IntArray | None) -> IntArray:
    return per_slot if slots is None else per_slot[slots]


def _domain_names(column: KeyColumn) -> list[str]:
    # Only classes of nodes with the key (never the None class) have non-zero sums, so every name read is a str.
    return cast(list[str], column.column.values)


def _accumulate(per_key: _PerKey, key: str, per_slot: IntArray, source: Hashable) -> None:
    # Never in place: the arrays may be the cache's own or shared between keys.
    found = per_key.get(key)
    per_key[key] = (per_slot, (source,)) if found is None else (found[0] + per_slot, (*found[1], source))
