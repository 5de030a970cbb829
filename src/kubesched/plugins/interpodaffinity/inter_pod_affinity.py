"""InterPodAffinity (PreFilter + AddPod/RemovePod, Filter, PreScore, Score, NormalizeScore), kube-scheduler v1.35.

- PreFilter counts, per topology pair (key, value): existing pods whose *required anti-affinity* matches the
  incoming pod; existing pods matching all of the incoming pod's required affinity terms; existing pods
  matching each of its required anti-affinity terms. An incoming pod's namespaceSelector is resolved to names
  through the Namespace lister here, once. A pod whose terms do not parse is rejected
  UnschedulableAndUnresolvable "parsing pod: ...". Skip when the pod has no required terms and no existing
  pod's required anti-affinity matches it.
- Filter, in order: "node(s) didn't match pod affinity rules" (UnschedulableAndUnresolvable) when the node
  lacks a term's topology key or its domain has no matching pod — unless no pod anywhere matches and the pod
  matches all its own terms; "node(s) didn't match pod anti-affinity rules" (Unschedulable);
  "node(s) didn't satisfy existing pods anti-affinity rules" (Unschedulable).
- PreScore sums, per (key, value): the incoming pod's preferred terms over existing pods (+w / -w), existing
  pods' required affinity terms matching the incoming pod (+hardPodAffinityWeight) and their preferred terms
  (+w / -w); over all nodes when the incoming pod has preferred terms, else over nodes with pods that have
  affinity. Score sums the node's domains; NormalizeScore maps [min, max] onto [0, 100] (float, truncated).

Who calls it: the framework runtime, at the points above; the scheduling queue, through the queueing hints.

The scheduler cache keeps no "pods with affinity" lists, so the plugin derives them itself, per NodeInfo:
snapshot NodeInfos are immutable copies, so a cache entry is valid while it holds the very NodeInfo object it
was computed from; a node that changed is recomputed, reusing the parsed terms of the PodInfos it still has.
A node's pods are also grouped by (namespace, labels) — all that the incoming pod's terms can see of a pod —
and each group is matched against those terms once per cycle, however many nodes and replicas share it.

Batch forms read, for each topology key involved, a class column of the node's value for that key, and look
the per-domain counts up as arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import ClassSpec
from kubesched.plugins.helper.hints import as_nodes, as_pods
from kubesched.plugins.interpodaffinity.args import InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.terms import (
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

# Parsed terms of the pods the plugin saw recently (incoming pods, pods in hints), by uid; an entry is used only
# for the very Pod object it was parsed from. Cleared wholesale when it grows past this many entries.
_POD_CACHE_LIMIT = 4096

TopologyPair = tuple[str, str]
Counts = dict[TopologyPair, int]
TopologyScores = dict[str, dict[str, int]]


# ---- per-node view of the pods that matter ---------------------------------------------------------------


GroupKey = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class _PodGroup:
    """Pods of one node that the incoming pod's terms cannot tell apart: same namespace, same labels."""

    key: GroupKey
    sample: Pod
    count: int


@dataclass(frozen=True, slots=True)
class _NodePods:
    info: NodeInfo
    with_affinity: tuple[tuple[PodInfo, PodTerms], ...]
    with_required_anti_affinity: tuple[tuple[PodInfo, PodTerms], ...]
    groups: tuple[_PodGroup, ...]
    """Every pod of the node, grouped by (namespace, labels)."""


def _node_pods(info: NodeInfo, previous: _NodePods | None, parse: Callable[[PodInfo], PodTerms]) -> _NodePods:
    reusable: dict[str, tuple[PodInfo, PodTerms]] = {}
    if previous is not None:
        reusable = {pod_info.uid: (pod_info, terms) for pod_info, terms in previous.with_affinity}
    with_affinity: list[tuple[PodInfo, PodTerms]] = []
    samples: dict[GroupKey, Pod] = {}
    counts: dict[GroupKey, int] = {}
    for pod_info in info.pods.values():
        pod = pod_info.pod
        affinity = pod.spec.affinity
        if affinity and (affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None):
            known = reusable.get(pod_info.uid)
            terms = known[1] if known is not None and known[0] is pod_info else parse(pod_info)
            with_affinity.append((pod_info, terms))
        key = (pod.metadata.namespace, frozenset(pod.metadata.labels.items()))
        if key not in samples:
            samples[key] = pod
        counts[key] = counts.get(key, 0) + 1
    groups = tuple(_PodGroup(key, sample, counts[key]) for key, sample in samples.items())
    anti = tuple(entry for entry in with_affinity if entry[1].has_required_anti_affinity)
    return _NodePods(info, tuple(with_affinity), anti, groups)


# ---- cycle state -----------------------------------------------------------------------------------------


class _PreFilterState:
    """What Filter reads; AddPod/RemovePod change the counts, so ``clone`` copies them."""

    __slots__ = ("affinity", "anti_affinity", "existing_anti_affinity", "namespace_labels", "pod", "terms")

    def __init__(
        self,
        pod: Pod,
        terms: PodTerms,
        namespace_labels: Mapping[str, str],
        existing_anti_affinity: Counts,
        affinity: Counts,
        anti_affinity: Counts,
    ) -> None:
        self.pod = pod
        self.terms = terms
        self.namespace_labels = namespace_labels
        self.existing_anti_affinity = existing_anti_affinity
        self.affinity = affinity
        self.anti_affinity = anti_affinity

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.pod,
            self.terms,
            self.namespace_labels,
            dict(self.existing_anti_affinity),
            dict(self.affinity),
            dict(self.anti_affinity),
        )

    def update_with_pod(self, other: Pod, other_terms: PodTerms, node_labels: Mapping[str, str], delta: int) -> None:
        """Account for ``other`` appearing on (``delta`` 1) or leaving (-1) a node with ``node_labels``."""
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

    def clone(self) -> _PreScoreState:
        return self


# ---- topology-value class columns (batch forms) ----------------------------------------------------------

_TOPOLOGY_SPECS: dict[str, ClassSpec[str | None]] = {}


def _topology_spec(key: str) -> ClassSpec[str | None]:
    """One class column per topology key: the node's value for the key, ``None`` when it has none. The key
    function must be the same object every time the column is asked for, hence the module-level table."""
    spec = _TOPOLOGY_SPECS.get(key)
    if spec is None:

        def value_of(info: NodeInfo, key: str = key) -> str | None:
            return info.labels.get(key)

        spec = _TOPOLOGY_SPECS[key] = ClassSpec(f"interpodaffinity-topology:{key}", value_of)
    return spec


def _domain_values(nodes: NodeBatch, key: str, per_value: Mapping[str, int]) -> tuple[BoolArray, IntArray]:
    """(node has ``key``, ``per_value`` of the node's value or 0) for every node of the batch."""
    spec = _topology_spec(key)
    column = nodes.table.class_column(spec.name, spec.key_fn)
    ids = column.ids[nodes.slots]
    values = column.values
    has = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
    amounts = np.fromiter(
        (per_value.get(v, 0) if isinstance(v, str) else 0 for v in values), dtype=np.int64, count=len(values)
    )
    return has[ids], amounts[ids]


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


def _by_key(counts: Counts) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (key, value), count in counts.items():
        out.setdefault(key, {})[value] = count
    return out


# ---- the plugin --------------------------------------------------------------------------------------------


class InterPodAffinity:
    """Pod affinity and anti-affinity: required terms filter, preferred terms (and existing pods') score."""

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        self.args = validated(args, InterPodAffinityArgs)
        self.handle = handle
        self._pod_cache: dict[str, tuple[Pod, PodTerms]] = {}
        self._node_cache: dict[str, _NodePods] = {}
        # Which positions of the snapshot's node list hold pods with affinity terms (any) and with required
        # anti-affinity: upstream's HavePodsWithAffinityList / HavePodsWithRequiredAntiAffinityList, kept
        # across cycles. A pod without terms of its own needs only those nodes, so a cycle looks at the
        # NodeInfos that changed since the last one (one vectorized identity compare), not at every node.
        self._index_slots: object = None
        self._index_versions: IntArray | None = None
        self._with_affinity: set[int] = set()
        self._with_anti: set[int] = set()

    @property
    def name(self) -> str:
        return names.INTER_POD_AFFINITY

    # ---- parsing and caches -----------------------------------------------------------------------------

    def pod_terms(self, pod: Pod) -> PodTerms:
        """``pod``'s parsed terms, parsed once per Pod object."""
        cached = self._pod_cache.get(pod.metadata.uid)
        if cached is not None and cached[0] is pod:
            return cached[1]
        terms = parse_pod_terms(pod)
        if len(self._pod_cache) >= _POD_CACHE_LIMIT:
            self._pod_cache.clear()
        self._pod_cache[pod.metadata.uid] = (pod, terms)
        return terms

    def _parse_existing(self, pod_info: PodInfo) -> PodTerms:
        return parse_pod_terms(pod_info.pod)

    def _pods_of(self, info: NodeInfo) -> _NodePods:
        entry = self._node_cache.get(info.name)
        if entry is not None and entry.info is info:
            return entry
        entry = _node_pods(info, entry, self._parse_existing)
        self._node_cache[info.name] = entry
        return entry

    def _nodes_with_terms(self, nodes: Sequence[NodeInfo]) -> tuple[list[NodeInfo], list[NodeInfo]] | None:
        """(nodes with pods with affinity terms, nodes with pods with required anti-affinity), in ``nodes``'
        order; None when ``nodes`` is not the snapshot's node list (the caller then walks every node)."""
        snapshot = self.handle.snapshot()
        if nodes is not snapshot.node_infos:
            return None
        slots = snapshot.slots
        current = snapshot.table.versions[slots]
        seen = self._index_versions
        changed: Iterable[int]
        if seen is None or self._index_slots is not slots or seen.shape != current.shape:
            changed = range(len(nodes))
            self._with_affinity = set()
            self._with_anti = set()
        else:
            changed = np.flatnonzero(current != seen).tolist()
        for position in changed:
            entry = self._pods_of(nodes[position])
            if entry.with_affinity:
                self._with_affinity.add(position)
            else:
                self._with_affinity.discard(position)
            if entry.with_required_anti_affinity:
                self._with_anti.add(position)
            else:
                self._with_anti.discard(position)
        self._index_slots = slots
        self._index_versions = current
        return [nodes[i] for i in sorted(self._with_affinity)], [nodes[i] for i in sorted(self._with_anti)]

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
        terms = PodTerms(
            required_affinity=tuple(self._resolve_namespaces(t) for t in parsed.required_affinity),
            required_anti_affinity=tuple(self._resolve_namespaces(t) for t in parsed.required_anti_affinity),
            has_affinity=parsed.has_affinity,
        )
        namespace_labels = self._namespace_labels(pod.namespace)
        incoming = pod.pod
        existing_anti: Counts = {}
        affinity: Counts = {}
        anti: Counts = {}
        need_incoming = terms.has_required
        # What the incoming pod's terms say of a (namespace, labels) group, computed once per cycle.
        seen: dict[GroupKey, tuple[bool, tuple[str, ...]]] = {}
        affinity_keys = tuple(t.topology_key for t in terms.required_affinity)
        indexed = None if need_incoming else self._nodes_with_terms(nodes)
        for info in nodes if indexed is None else indexed[1]:
            node_pods = self._pods_of(info)
            labels = info.labels
            for _, other_terms in node_pods.with_required_anti_affinity:
                for term in other_terms.required_anti_affinity:
                    if term.matches(incoming, namespace_labels):
                        _bump(existing_anti, labels, term.topology_key, 1)
            if not need_incoming:
                continue
            for group in node_pods.groups:
                verdict = seen.get(group.key)
                if verdict is None:
                    verdict = seen[group.key] = self._incoming_verdict(terms, group.sample)
                matches_affinity, anti_keys = verdict
                if matches_affinity:
                    for key in affinity_keys:
                        _bump(affinity, labels, key, group.count)
                for key in anti_keys:
                    _bump(anti, labels, key, group.count)
        if not existing_anti and not terms.has_required:
            return Status(Code.SKIP)
        state.write(
            PRE_FILTER_STATE_KEY, _PreFilterState(incoming, terms, namespace_labels, existing_anti, affinity, anti)
        )
        return None

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

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        s = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        size = len(nodes)
        if s is None:
            return BatchFilterResult(np.ones(size, dtype=np.int64), [Status(Code.ERROR, _PRE_FILTER_STATE_MISSING)])
        affinity_failed = np.zeros(size, dtype=np.bool_)
        anti_failed = np.zeros(size, dtype=np.bool_)
        existing_failed = np.zeros(size, dtype=np.bool_)
        required = s.terms.required_affinity
        if required:
            affinity_by_key = _by_key(s.affinity)
            missing_key = np.zeros(size, dtype=np.bool_)
            no_pods = np.zeros(size, dtype=np.bool_)
            for term in required:
                has, count = _domain_values(nodes, term.topology_key, affinity_by_key.get(term.topology_key, {}))
                missing_key |= ~has
                no_pods |= has & (count <= 0)
            self_match = not s.affinity and matches_all(required, s.pod)
            affinity_failed = missing_key if self_match else missing_key | no_pods
        if s.anti_affinity:
            anti_by_key = _by_key(s.anti_affinity)
            for term in s.terms.required_anti_affinity:
                has, count = _domain_values(nodes, term.topology_key, anti_by_key.get(term.topology_key, {}))
                anti_failed |= has & (count > 0)
        if s.existing_anti_affinity:
            for key, per_value in _by_key(s.existing_anti_affinity).items():
                positive = {value: count for value, count in per_value.items() if count > 0}
                if positive:
                    has, count = _domain_values(nodes, key, positive)
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
        preferred = self._resolve_weighted(parsed.preferred_affinity)
        preferred_anti = self._resolve_weighted(parsed.preferred_anti_affinity)
        namespace_labels = self._namespace_labels(incoming.metadata.namespace)
        hard_weight = self.args.hard_pod_affinity_weight
        scores: TopologyScores = {}

        # The incoming pod's preferred terms as (topology key, signed weight) per (namespace, labels) group.
        seen: dict[GroupKey, tuple[tuple[str, int], ...]] = {}
        all_nodes = self._all_nodes()
        indexed = None if has_constraints else self._nodes_with_terms(all_nodes)
        for info in all_nodes if indexed is None else indexed[0]:
            node_pods = self._pods_of(info)
            if not node_pods.with_affinity and not has_constraints:
                continue
            node_labels = info.labels
            if not node_labels:
                continue
            if has_constraints:
                for group in node_pods.groups:
                    credits = seen.get(group.key)
                    if credits is None:
                        credits = seen[group.key] = _preferred_credits(preferred, preferred_anti, group.sample)
                    for key, amount in credits:
                        _credit(scores, node_labels, key, amount * group.count)
            for _, other_terms in node_pods.with_affinity:
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
        if not scores:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(scores))
        return None

    @staticmethod
    def _scores(state: CycleState) -> TopologyScores:
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        if found is None:
            raise LookupError(_PRE_SCORE_STATE_MISSING)
        return found.topology_score

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        labels = node_info.labels
        total = 0
        for key, per_value in self._scores(state).items():
            value = labels.get(key)
            if value is not None:
                total += per_value.get(value, 0)
        return total

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        total = np.zeros(len(nodes), dtype=np.int64)
        for key, per_value in self._scores(state).items():
            total += _domain_values(nodes, key, per_value)[1]
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
