"""InterPodAffinity (PreFilter + AddPod/RemovePod, Filter, PreScore, Score, NormalizeScore), kube-scheduler v1.35.

Built by the framework in the default profile; the queue also calls its queueing hints. PreFilter counts, per
topology pair, the existing pods whose required anti-affinity matches the incoming pod and the existing pods
matching the incoming pod's required terms; Filter rejects with upstream's three reasons; PreScore and Score sum the
preferred terms both ways and existing pods' required affinity (``hardPodAffinityWeight``); NormalizeScore maps
[min, max] onto [0, 100]. The "pods with affinity" of each NodeInfo are derived here and cached by NodeInfo
identity (snapshot NodeInfos are immutable copies). PreFilter and PreScore count with arrays kept across cycles
(:mod:`~kubesched.plugins.interpodaffinity.counting`); ``reference_pre_filter_counts`` and
``reference_topology_scores`` stay the reference, held equal by a property test
(docs/explanation/columnar-path.md#the-reference-held-equal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import (
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import BatchFilterResult, BoolArray, IntArray, NodeBatch
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.hints import as_nodes, as_pods
from kubesched.plugins.interpodaffinity.args import InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.counting import AffinityCounter, ClassArrays, KeyColumn
from kubesched.plugins.interpodaffinity.counting import Counts as Counts
from kubesched.plugins.interpodaffinity.counting import TopologyPair as TopologyPair
from kubesched.plugins.interpodaffinity.counting import TopologyScores as TopologyScores
from kubesched.plugins.interpodaffinity.node_pods import GroupKey, NodePods, node_pods
from kubesched.plugins.interpodaffinity.terms import (
    NO_TERMS,
    POD_AFFINITY,
    POD_ANTI_AFFINITY,
    AffinityTerm,
    PodTerms,
    WeightedAffinityTerm,
    matches_all,
    parse_pod_terms,
)

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BatchScorePlugin,
        EnqueueExtensions,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
        ScoreNormalizer,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.INTER_POD_AFFINITY
PRE_SCORE_STATE_KEY = "PreScore" + names.INTER_POD_AFFINITY

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

_AFFINITY_MISMATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
_ANTI_AFFINITY_MISMATCH = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
_EXISTING_ANTI_AFFINITY_MISMATCH = Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
_BATCH_STATUSES = (_AFFINITY_MISMATCH, _ANTI_AFFINITY_MISMATCH, _EXISTING_ANTI_AFFINITY_MISMATCH)

_PRE_FILTER_STATE_MISSING = f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'
_PRE_SCORE_STATE_MISSING = f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found'

# Parsed terms of the pods the plugin saw recently (incoming pods, pods in hints, pods on changed nodes), by uid;
# an entry serves a Pod object that shares what the parse reads. Cleared wholesale past this many entries.
_POD_CACHE_LIMIT = 4096


# ---- cycle state -----------------------------------------------------------------------------------------


class _PreFilterState:
    """What Filter reads; AddPod/RemovePod change the counts, so ``clone`` copies them."""

    __slots__ = ("affinity", "anti_affinity", "arrays", "existing_anti_affinity", "namespace_labels", "pod", "terms")

    def __init__(
        self,
        pod: Pod,
        terms: PodTerms,
        namespace_labels: Mapping[str, str],
        existing_anti_affinity: Counts,
        affinity: Counts,
        anti_affinity: Counts,
        arrays: tuple[ClassArrays, ClassArrays, ClassArrays] | None = None,
    ) -> None:
        self.pod = pod
        self.terms = terms
        self.namespace_labels = namespace_labels
        self.existing_anti_affinity = existing_anti_affinity
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        # The three counts as per-class arrays (array paths only), for filter_batch; valid until the counts
        # change, so AddPod/RemovePod drop them and a clone may share them (neither side changes them in place).
        self.arrays = arrays

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.pod,
            self.terms,
            self.namespace_labels,
            dict(self.existing_anti_affinity),
            dict(self.affinity),
            dict(self.anti_affinity),
            self.arrays,
        )

    def update_with_pod(self, other: Pod, other_terms: PodTerms, node_labels: Mapping[str, str], delta: int) -> None:
        """Account for ``other`` appearing on (``delta`` 1) or leaving (-1) a node with ``node_labels``."""
        self.arrays = None
        for term in other_terms.required_anti_affinity:
            if term.matches(self.pod, self.namespace_labels):
                _bump(self.existing_anti_affinity, node_labels, term.topology_key, delta)
        if matches_all(self.terms.required_affinity, other):
            for term in self.terms.required_affinity:
                _bump(self.affinity, node_labels, term.topology_key, delta)
        for term in self.terms.required_anti_affinity:
            if term.matches(other, None):
                _bump(self.anti_affinity, node_labels, term.topology_key, delta)


def _bump(counts: Counts, node_labels: Mapping[str, str], key: str, delta: int) -> None:
    value = node_labels.get(key)
    if value is None:
        return
    pair = (key, value)
    total = counts.get(pair, 0) + delta
    # Removals can bring a pair back to zero; a zero entry would still make the map look non-empty.
    if total == 0:
        counts.pop(pair, None)
    else:
        counts[pair] = total


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    topology_score: TopologyScores
    arrays: ClassArrays | None = field(default=None, compare=False)
    """``topology_score`` as per-class arrays (array path only), for score_batch."""

    def clone(self) -> _PreScoreState:
        return self


# ---- the reference loops' helpers --------------------------------------------------------------------------


def _credit(scores: TopologyScores, node_labels: Mapping[str, str], key: str, amount: int) -> None:
    value = node_labels.get(key)
    if value is not None:
        per_value = scores.setdefault(key, {})
        per_value[value] = per_value.get(value, 0) + amount


def _preferred_credits(
    preferred: Sequence[WeightedAffinityTerm], preferred_anti: Sequence[WeightedAffinityTerm], other: Pod
) -> tuple[tuple[str, int], ...]:
    """What an existing pod earns its domains from the incoming pod's preferred terms: +w / -w per match."""
    credits = [(t.term.topology_key, t.weight) for t in preferred if t.term.matches(other, None)]
    credits += [(t.term.topology_key, -t.weight) for t in preferred_anti if t.term.matches(other, None)]
    return tuple(credits)


class _ByKey:
    """A Counts map read per topology key, split by key on first use (the array path seldom needs it)."""

    __slots__ = ("_counts", "_split")

    def __init__(self, counts: Counts) -> None:
        self._counts = counts
        self._split: dict[str, dict[str, int]] | None = None

    def _get(self) -> dict[str, dict[str, int]]:
        if self._split is None:
            split: dict[str, dict[str, int]] = {}
            for (key, value), count in self._counts.items():
                split.setdefault(key, {})[value] = count
            self._split = split
        return self._split

    def of(self, key: str) -> Mapping[str, int]:
        return self._get().get(key, {})

    def keys(self) -> Iterable[str]:
        return self._get().keys()


# ---- the plugin --------------------------------------------------------------------------------------------


class InterPodAffinity:
    """Pod affinity and anti-affinity: required terms filter, preferred terms (and existing pods') score."""

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        self.args = validated(args, InterPodAffinityArgs)
        self.handle = handle
        self._pod_cache: dict[str, tuple[Pod, PodTerms]] = {}
        self._node_cache: dict[str, NodePods] = {}
        # Per-node counts and the existing pods' distinct terms, kept across cycles (see counting.py).
        self._counter = AffinityCounter(self._pods_of)

    @property
    def name(self) -> str:
        return names.INTER_POD_AFFINITY

    # ---- parsing and caches -----------------------------------------------------------------------------

    def pod_terms(self, pod: Pod) -> PodTerms:
        """``pod``'s parsed terms, parsed once per pod while what the parse reads stays the same."""
        affinity = pod.spec.affinity
        if affinity is None or not isinstance(affinity, Mapping) or (
            affinity.get(POD_AFFINITY) is None and affinity.get(POD_ANTI_AFFINITY) is None
        ):
            # What parse_pod_terms answers at once for a pod without pod (anti-)affinity, most pods: not worth
            # a cache entry (PreFilter and PreScore ask for every pod).
            return NO_TERMS
        uid = pod.metadata.uid
        cached = self._pod_cache.get(uid)
        if cached is not None:
            known = cached[0]
            if known is pod:
                return cached[1]
            # The parse reads the affinity, the namespace and the labels (matchLabelKeys) only; binding or
            # nominating a pod makes a new Pod object that shares its (never mutated) affinity mapping.
            if (
                known.spec.affinity is pod.spec.affinity
                and known.metadata.namespace == pod.metadata.namespace
                and known.metadata.labels == pod.metadata.labels
            ):
                self._pod_cache[uid] = (pod, cached[1])
                return cached[1]
        terms = parse_pod_terms(pod)
        if len(self._pod_cache) >= _POD_CACHE_LIMIT:
            self._pod_cache.clear()
        self._pod_cache[pod.metadata.uid] = (pod, terms)
        return terms

    def _parse_existing(self, pod_info: PodInfo) -> PodTerms:
        # Through the per-pod cache: a pod just bound was parsed as the incoming pod of its cycle.
        return self.pod_terms(pod_info.pod)

    def _pods_of(self, info: NodeInfo) -> NodePods:
        entry = self._node_cache.get(info.name)
        if entry is not None and entry.info is info:
            return entry
        entry = node_pods(info, entry, self._parse_existing)
        self._node_cache[info.name] = entry
        return entry

    def _columnar(self, nodes: Sequence[NodeInfo]) -> Snapshot | None:
        """The snapshot, when ``nodes`` is its own node list (the array paths count over exactly that)."""
        snapshot = self.handle.snapshot()
        return snapshot if nodes is snapshot.node_infos else None

    def _all_nodes(self) -> list[NodeInfo]:
        snapshot = self.handle.snapshot()
        if len(self._node_cache) > 2 * len(snapshot.node_infos) + 16:
            # Forget nodes that left the cluster.
            live = snapshot.by_name
            self._node_cache = {name: e for name, e in self._node_cache.items() if name in live}
        return snapshot.node_infos

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        found = self.handle.listers.namespaces.get(namespace)
        # Upstream reads a namespace it cannot find as one without labels.
        return dict(found.metadata.labels) if found is not None else {}

    def _resolve_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """An incoming pod's term with its namespaceSelector turned into namespace names (an empty selector,
        which selects every namespace, stays as it is)."""
        selector = term.namespace_selector
        if selector.is_everything or not selector.requirements:
            return term
        matched = frozenset(
            ns.metadata.name for ns in self.handle.listers.namespaces.list() if selector.matches(ns.metadata.labels)
        )
        return term.with_namespaces(matched)

    def _resolve_weighted(self, terms: Iterable[WeightedAffinityTerm]) -> tuple[WeightedAffinityTerm, ...]:
        return tuple(WeightedAffinityTerm(self._resolve_namespaces(t.term), t.weight) for t in terms)

    # ---- PreFilter ------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        parsed = self.pod_terms(pod.pod)
        if parsed.error is not None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {parsed.error}")
        snapshot = self._columnar(nodes)
        if (
            snapshot is not None
            and not parsed.required_affinity
            and not parsed.required_anti_affinity
            and not self._counter.any_existing_anti_affinity(snapshot.table)
        ):
            return Status(Code.SKIP)  # nothing to count: what the full pass below would conclude
        terms = PodTerms(
            required_affinity=tuple(self._resolve_namespaces(t) for t in parsed.required_affinity),
            required_anti_affinity=tuple(self._resolve_namespaces(t) for t in parsed.required_anti_affinity),
            has_affinity=parsed.has_affinity,
        )
        namespace_labels = self._namespace_labels(pod.namespace)
        incoming = pod.pod
        arrays: tuple[ClassArrays, ClassArrays, ClassArrays] | None = None
        if snapshot is not None:
            (existing_anti, e_arrays), (affinity, a_arrays), (anti, n_arrays) = self._counter.pre_filter_counts(
                snapshot, incoming, namespace_labels, terms
            )
            arrays = (e_arrays, a_arrays, n_arrays)
        else:
            existing_anti, affinity, anti = self.reference_pre_filter_counts(nodes, incoming, namespace_labels, terms)
        if not existing_anti and not terms.has_required:
            return Status(Code.SKIP)
        state.write(
            PRE_FILTER_STATE_KEY,
            _PreFilterState(incoming, terms, namespace_labels, existing_anti, affinity, anti, arrays),
        )
        return None

    def reference_pre_filter_counts(
        self, nodes: Sequence[NodeInfo], incoming: Pod, namespace_labels: Mapping[str, str], terms: PodTerms
    ) -> tuple[Counts, Counts, Counts]:
        """PreFilter's (existing anti-affinity, affinity, anti-affinity) counts node by node over ``nodes``:
        the reference for :meth:`AffinityCounter.pre_filter_counts`; ``terms`` have resolved namespaces."""
        existing_anti: Counts = {}
        affinity: Counts = {}
        anti: Counts = {}
        need_incoming = terms.has_required
        # What the incoming pod's terms say of a (namespace, labels) group, computed once per cycle.
        seen: dict[GroupKey, tuple[bool, tuple[str, ...]]] = {}
        affinity_keys = tuple(t.topology_key for t in terms.required_affinity)
        for info in nodes:
            pods = self._pods_of(info)
            labels = info.labels
            for _, other_terms in pods.with_required_anti_affinity:
                for term in other_terms.required_anti_affinity:
                    if term.matches(incoming, namespace_labels):
                        _bump(existing_anti, labels, term.topology_key, 1)
            if not need_incoming:
                continue
            for group in pods.groups:
                verdict = seen.get(group.key)
                if verdict is None:
                    verdict = seen[group.key] = self._incoming_verdict(terms, group.sample)
                matches_affinity, anti_keys = verdict
                if matches_affinity:
                    for key in affinity_keys:
                        _bump(affinity, labels, key, group.count)
                for key in anti_keys:
                    _bump(anti, labels, key, group.count)
        return existing_anti, affinity, anti

    @staticmethod
    def _incoming_verdict(terms: PodTerms, other: Pod) -> tuple[bool, tuple[str, ...]]:
        """(``other`` matches all required affinity terms, topology keys of the anti-affinity terms it matches)."""
        anti_keys = tuple(t.topology_key for t in terms.required_anti_affinity if t.matches(other, None))
        return matches_all(terms.required_affinity, other), anti_keys

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod_to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod_to_remove, node_info, -1)

    def _update(self, state: CycleState, other: PodInfo, node_info: NodeInfo, delta: int) -> Status | None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is None:
            return Status(Code.ERROR, _PRE_FILTER_STATE_MISSING)
        found.update_with_pod(other.pod, self.pod_terms(other.pod), node_info.labels, delta)
        return None

    # ---- Filter ---------------------------------------------------------------------------------------

    @staticmethod
    def _satisfies_affinity(s: _PreFilterState, labels: Mapping[str, str]) -> bool:
        pods_exist = True
        for term in s.terms.required_affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return False  # the node must have every topology key
            if s.affinity.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # The first of a group of pods with affinity to each other: if no pod anywhere matches and the pod
        # matches its own terms, any node with the topology keys will do.
        return not s.affinity and matches_all(s.terms.required_affinity, s.pod)

    @staticmethod
    def _satisfies_anti_affinity(s: _PreFilterState, labels: Mapping[str, str]) -> bool:
        if s.anti_affinity:
            for term in s.terms.required_anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and s.anti_affinity.get((term.topology_key, value), 0) > 0:
                    return False
        return True

    @staticmethod
    def _satisfies_existing_anti_affinity(s: _PreFilterState, labels: Mapping[str, str]) -> bool:
        if s.existing_anti_affinity:
            for pair in labels.items():
                if s.existing_anti_affinity.get(pair, 0) > 0:
                    return False
        return True

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if s is None:
            return Status(Code.ERROR, _PRE_FILTER_STATE_MISSING)
        labels = node_info.labels
        if not self._satisfies_affinity(s, labels):
            return _AFFINITY_MISMATCH
        if not self._satisfies_anti_affinity(s, labels):
            return _ANTI_AFFINITY_MISMATCH
        if not self._satisfies_existing_anti_affinity(s, labels):
            return _EXISTING_ANTI_AFFINITY_MISMATCH
        return None

    def _domain_values(
        self, nodes: NodeBatch, key: str, arrays: ClassArrays | None, counts: Callable[[str], Mapping[str, int]]
    ) -> tuple[BoolArray, IntArray]:
        """(node has ``key``, the amount of the node's domain) for every node of the batch, the amounts read from
        the per-class ``arrays`` the state came with when they are for this very column, else from ``counts``."""
        column: KeyColumn = self._counter.columns.of(nodes.table, key)
        ids = column.column.ids[nodes.slots]
        cached = arrays.get(key) if arrays is not None else None
        if cached is not None and cached[0] is column.column and cached[1].shape[0] == column.size:
            amounts = cached[1]
        else:
            amounts = column.per_class(counts(key))
        return column.has[ids], amounts[ids]

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        s = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        size = len(nodes)
        if s is None:
            return BatchFilterResult(np.ones(size, dtype=np.int64), [Status(Code.ERROR, _PRE_FILTER_STATE_MISSING)])
        if size == 0:
            return None
        existing_arrays, affinity_arrays, anti_arrays = s.arrays if s.arrays is not None else (None, None, None)
        affinity_failed = np.zeros(size, dtype=np.bool_)
        anti_failed = np.zeros(size, dtype=np.bool_)
        existing_failed = np.zeros(size, dtype=np.bool_)
        required = s.terms.required_affinity
        if required:
            affinity_by_key = _ByKey(s.affinity)
            missing_key = np.zeros(size, dtype=np.bool_)
            no_pods = np.zeros(size, dtype=np.bool_)
            for term in required:
                has, count = self._domain_values(nodes, term.topology_key, affinity_arrays, affinity_by_key.of)
                missing_key |= ~has
                no_pods |= has & (count <= 0)
            self_match = not s.affinity and matches_all(required, s.pod)
            affinity_failed = missing_key if self_match else missing_key | no_pods
        if s.anti_affinity:
            anti_by_key = _ByKey(s.anti_affinity)
            for term in s.terms.required_anti_affinity:
                has, count = self._domain_values(nodes, term.topology_key, anti_arrays, anti_by_key.of)
                anti_failed |= has & (count > 0)
        if s.existing_anti_affinity:
            existing_by_key = _ByKey(s.existing_anti_affinity)
            # The arrays cover every key the counts have (the counts were made from them), and a key whose
            # amounts are all 0 rejects no node, so their keys will do and spare splitting the counts.
            keys = existing_arrays.keys() if existing_arrays is not None else existing_by_key.keys()
            for key in keys:
                has, count = self._domain_values(nodes, key, existing_arrays, existing_by_key.of)
                existing_failed |= has & (count > 0)
        codes = np.where(affinity_failed, 1, np.where(anti_failed, 2, np.where(existing_failed, 3, 0)))
        if not codes.any():
            return None
        return BatchFilterResult(codes.astype(np.int64), _BATCH_STATUSES)

    # ---- Score ----------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        incoming = pod.pod
        parsed = self.pod_terms(incoming)
        has_constraints = parsed.has_preferred
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        if parsed.error is not None:
            # PreFilter rejects such a pod first; reached only when PreFilter is disabled.
            return Status(Code.ERROR, f"failed to parse pod: {parsed.error}")
        all_nodes = self._all_nodes()
        snapshot = self._columnar(all_nodes)
        if snapshot is not None and not has_constraints and not self._counter.any_existing_terms(snapshot.table):
            return Status(Code.SKIP)  # no term anywhere: the sums below would all be empty
        preferred = self._resolve_weighted(parsed.preferred_affinity)
        preferred_anti = self._resolve_weighted(parsed.preferred_anti_affinity)
        namespace_labels = self._namespace_labels(incoming.metadata.namespace)
        hard_weight = self.args.hard_pod_affinity_weight
        arrays: ClassArrays | None = None
        if snapshot is not None:
            scores, arrays = self._counter.topology_scores(
                snapshot,
                incoming,
                namespace_labels,
                preferred if has_constraints else (),
                preferred_anti if has_constraints else (),
                hard_weight,
            )
        else:
            scores = self.reference_topology_scores(
                all_nodes, incoming, namespace_labels, preferred, preferred_anti, has_constraints
            )
        if not scores:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(scores, arrays))
        return None

    def reference_topology_scores(
        self,
        nodes: Sequence[NodeInfo],
        incoming: Pod,
        namespace_labels: Mapping[str, str],
        preferred: Sequence[WeightedAffinityTerm],
        preferred_anti: Sequence[WeightedAffinityTerm],
        has_constraints: bool,
    ) -> TopologyScores:
        """PreScore's per-domain sums node by node over ``nodes``: the reference for
        :meth:`AffinityCounter.topology_scores`; ``preferred`` terms have resolved namespaces and count only
        with ``has_constraints``."""
        hard_weight = self.args.hard_pod_affinity_weight
        scores: TopologyScores = {}
        # The incoming pod's preferred terms as (topology key, signed weight) per (namespace, labels) group.
        seen: dict[GroupKey, tuple[tuple[str, int], ...]] = {}
        for info in nodes:
            pods = self._pods_of(info)
            if not pods.with_affinity and not has_constraints:
                continue
            node_labels = info.labels
            if not node_labels:
                continue
            if has_constraints:
                for group in pods.groups:
                    credits = seen.get(group.key)
                    if credits is None:
                        credits = seen[group.key] = _preferred_credits(preferred, preferred_anti, group.sample)
                    for key, amount in credits:
                        _credit(scores, node_labels, key, amount * group.count)
            for _, other_terms in pods.with_affinity:
                if hard_weight > 0:
                    for term in other_terms.required_affinity:
                        if term.matches(incoming, namespace_labels):
                            _credit(scores, node_labels, term.topology_key, hard_weight)
                for weighted in other_terms.preferred_affinity:
                    if weighted.term.matches(incoming, namespace_labels):
                        _credit(scores, node_labels, weighted.term.topology_key, weighted.weight)
                for weighted in other_terms.preferred_anti_affinity:
                    if weighted.term.matches(incoming, namespace_labels):
                        _credit(scores, node_labels, weighted.term.topology_key, -weighted.weight)
        return scores

    @staticmethod
    def _score_state(state: CycleState) -> _PreScoreState:
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        if found is None:
            raise LookupError(_PRE_SCORE_STATE_MISSING)
        return found

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        labels = node_info.labels
        total = 0
        for key, per_value in self._score_state(state).topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += per_value.get(value, 0)
        return total

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        found = self._score_state(state)
        total = np.zeros(len(nodes), dtype=np.int64)
        if len(nodes) == 0:
            return total
        scores = found.topology_score
        for key in scores:
            total += self._domain_values(nodes, key, found.arrays, scores.__getitem__)[1]
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        if found is None:
            return Status(Code.ERROR, _PRE_SCORE_STATE_MISSING)
        if not found.topology_score or scores.shape[0] == 0:
            return None
        lowest = int(scores.min())
        spread = int(scores.max()) - lowest
        if spread <= 0:
            scores[:] = 0
            return None
        # float64 then truncation, as upstream computes it, so results are bit-identical.
        fraction = (scores - lowest).astype(np.float64) / float(spread)
        scores[:] = (float(MAX_NODE_SCORE) * fraction).astype(np.int64)
        return None

    # ---- Queueing hints --------------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            # Add: a pod the rejected pod wants to be near may have arrived; Delete: a pod it (or whose
            # anti-affinity) excludes may have left; UpdatePodLabel: either may have happened by relabelling.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD,
                    ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                    "PodAdd|PodLabelChange|PodDelete",
                ),
                self.is_schedulable_after_pod_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeAdd|NodeLabelChange"
                ),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        try:
            original, modified = as_pods(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        # A pod neither bound nor nominated to a node takes no part in any topology domain.
        if modified is not None and not modified.spec.node_name and not modified.status.nominated_node_name:
            modified = None
        if original is not None and not original.spec.node_name and not original.status.nominated_node_name:
            original = None
        if modified is None and original is None:
            return QueueingHint.SKIP
        terms = self.pod_terms(pod)
        if terms.error is not None:
            return QueueingHint.QUEUE
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if modified is not None and original is not None:
            if not matches_all(affinity, original) and matches_all(affinity, modified):
                return QueueingHint.QUEUE
            if matches_all(anti, original) and not matches_all(anti, modified):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if matches_all(affinity, modified) else QueueingHint.SKIP
        assert original is not None
        return QueueingHint.QUEUE if matches_all(anti, original) else QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        try:
            original, modified = as_nodes(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.QUEUE
        terms = self.pod_terms(pod)
        if terms.error is not None:
            return QueueingHint.QUEUE
        new_labels = modified.metadata.labels
        old_labels = original.metadata.labels if original is not None else None
        for term in terms.required_affinity:
            key = term.topology_key
            if old_labels is None:
                if key in new_labels:
                    return QueueingHint.QUEUE  # a new node in some domain of the key
                continue
            if key in new_labels and (key not in old_labels or old_labels[key] != new_labels[key]):
                return QueueingHint.QUEUE  # the node gained the key, or moved to another domain
        for term in terms.required_anti_affinity:
            if old_labels is None:
                # A node without the key always admits the pod, one with it may join an empty domain; which
                # pods are in that domain is beyond a hint.
                return QueueingHint.QUEUE
            key = term.topology_key
            if key in old_labels and (key not in new_labels or old_labels[key] != new_labels[key]):
                return QueueingHint.QUEUE  # the node lost the key, or moved to another domain
        return QueueingHint.SKIP


if TYPE_CHECKING:

    def _conforms(
        plugin: InterPodAffinity,
    ) -> tuple[
        PreFilterPlugin,
        PreFilterExtensions,
        BatchFilterPlugin,
        PreScorePlugin,
        BatchScorePlugin,
        ScoreNormalizer,
        EnqueueExtensions,
    ]:
        return plugin, plugin, plugin, plugin, plugin, plugin, plugin
