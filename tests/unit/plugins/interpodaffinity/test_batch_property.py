"""Property test: InterPodAffinity's ``filter_batch`` / ``score_batch`` answer what ``filter`` / ``score`` answer.

Random clusters (nodes with and without each topology key, values shared across nodes, node labels changed
after the first cycle so class columns are refreshed, a node removed and another added so slots are reused),
random existing pods with required/preferred (anti-)affinity terms over present and absent topology keys, with
namespaces, namespace selectors and matchLabelKeys, and random incoming pods; over the whole snapshot and a
shuffled subset, before and after AddPod/RemovePod changes the PreFilter state. The PreFilter counts and the
PreScore domain scores (computed with per-node caches and per-cycle grouping of pods) are also held equal to
a naive computation straight from their definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ipatest_helpers import namespace_stores

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import PodInfo
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.inter_pod_affinity import (
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    Counts,
    _PreFilterState,
    _PreScoreState,
)
from kubesched.plugins.interpodaffinity.terms import AffinityTerm, parse_pod_terms
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result

TOPOLOGY_KEYS = ("zone", "region", "host", "absent")
LABEL_KEYS = ("app", "tier")
LABEL_VALUES = ("a", "b", "c")
NAMESPACES = {"default": {"team": "t1"}, "ns1": {"team": "t2"}, "ns2": {"team": "t1"}}


@st.composite
def node_labels(draw: st.DrawFn, name: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    if draw(st.booleans()):
        labels["zone"] = draw(st.sampled_from(["z1", "z2"]))
    if draw(st.booleans()):
        labels["region"] = draw(st.sampled_from(["r1", "r2"]))
    if draw(st.integers(0, 3)):
        labels["host"] = name
    return labels


@st.composite
def selector(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["in", "notin", "exists", "doesnotexist", "labels", "empty"]))
    key = draw(st.sampled_from(LABEL_KEYS))
    values = draw(st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=2, unique=True))
    if kind == "labels":
        return {"matchLabels": {key: values[0]}}
    if kind == "empty":
        return {}
    operator = {"in": "In", "notin": "NotIn", "exists": "Exists", "doesnotexist": "DoesNotExist"}[kind]
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if operator in ("In", "NotIn"):
        requirement["values"] = values
    return {"matchExpressions": [requirement]}


@st.composite
def affinity_term(draw: st.DrawFn) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": draw(selector()), "topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS))}
    namespaces = draw(st.sampled_from(["own", "list", "selector", "all"]))
    if namespaces == "list":
        term["namespaces"] = draw(st.lists(st.sampled_from(sorted(NAMESPACES)), min_size=1, max_size=2, unique=True))
    elif namespaces == "selector":
        term["namespaceSelector"] = {"matchLabels": {"team": draw(st.sampled_from(["t1", "t2"]))}}
    elif namespaces == "all":
        term["namespaceSelector"] = {}
    if draw(st.integers(0, 5)) == 0:
        term["matchLabelKeys"] = [draw(st.sampled_from(LABEL_KEYS))]
    return term


@st.composite
def a_pod(draw: st.DrawFn, name: str, node_name: str = "") -> Pod:
    builder = make_pod(name).namespace(draw(st.sampled_from(sorted(NAMESPACES))))
    for key in LABEL_KEYS:
        if draw(st.booleans()):
            builder.label(key, draw(st.sampled_from(LABEL_VALUES)))
    if node_name:
        builder.node_name(node_name)
    for _ in range(draw(st.integers(0, 2))):
        anti = draw(st.booleans())
        weight = draw(st.one_of(st.none(), st.integers(1, 100)))
        builder.pod_affinity_term(draw(affinity_term()), anti=anti, weight=weight)
    return builder.obj()


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod, Pod, list[int], dict[str, str], bool, int]:
    count = draw(st.integers(1, 7))
    names = [f"n{i}" for i in range(count)]
    nodes = [make_node(n).labels(draw(node_labels(n))).obj() for n in names]
    existing = [draw(a_pod(f"e{i}", draw(st.sampled_from(names)))) for i in range(draw(st.integers(0, 8)))]
    incoming = draw(a_pod("incoming"))
    added = draw(a_pod("added", draw(st.sampled_from(names))))
    order = draw(st.permutations(list(range(count))))
    relabel = draw(node_labels(names[0]))
    ignore = draw(st.booleans())
    hard = draw(st.sampled_from([0, 1, 7]))
    return nodes, existing, incoming, added, order, relabel, ignore, hard


def _resolved(term: AffinityTerm) -> AffinityTerm:
    if term.namespace_selector.is_everything or not term.namespace_selector.requirements:
        return term
    names = frozenset(n for n, labels in NAMESPACES.items() if term.namespace_selector.matches(labels))
    return term.with_namespaces(names)


def _naive_state(snapshot: Snapshot, incoming: Pod) -> tuple[Counts, Counts, Counts]:
    """The three PreFilter counts straight from their definition: every pod on every node, no caches."""
    own = parse_pod_terms(incoming)
    required = [_resolved(t) for t in own.required_affinity]
    required_anti = [_resolved(t) for t in own.required_anti_affinity]
    ns_labels = NAMESPACES.get(incoming.metadata.namespace, {})
    existing: Counts = {}
    affinity: Counts = {}
    anti: Counts = {}

    def bump(counts: Counts, labels: Mapping[str, str], key: str) -> None:
        if key in labels:
            counts[(key, labels[key])] = counts.get((key, labels[key]), 0) + 1

    for info in snapshot.node_infos:
        for other in info.pods.values():
            for t in parse_pod_terms(other.pod).required_anti_affinity:
                if t.matches(incoming, ns_labels):
                    bump(existing, info.labels, t.topology_key)
            if required and all(t.matches(other.pod, None) for t in required):
                for t in required:
                    bump(affinity, info.labels, t.topology_key)
            for t in required_anti:
                if t.matches(other.pod, None):
                    bump(anti, info.labels, t.topology_key)
    return existing, affinity, anti


def _naive_scores(snapshot: Snapshot, incoming: Pod, hard_weight: int) -> dict[str, dict[str, int]]:
    own = parse_pod_terms(incoming)
    preferred = [(_resolved(w.term), w.weight) for w in own.preferred_affinity]
    preferred += [(_resolved(w.term), -w.weight) for w in own.preferred_anti_affinity]
    ns_labels = NAMESPACES.get(incoming.metadata.namespace, {})
    scores: dict[str, dict[str, int]] = {}

    def credit(labels: Mapping[str, str], key: str, amount: int) -> None:
        if key in labels:
            per_value = scores.setdefault(key, {})
            per_value[labels[key]] = per_value.get(labels[key], 0) + amount

    for info in snapshot.node_infos:
        if not info.labels:
            continue
        for other in info.pods.values():
            for t, w in preferred:
                if t.matches(other.pod, None):
                    credit(info.labels, t.topology_key, w)
            terms = parse_pod_terms(other.pod)
            if hard_weight > 0:
                for t in terms.required_affinity:
                    if t.matches(incoming, ns_labels):
                        credit(info.labels, t.topology_key, hard_weight)
            for weighted in terms.preferred_affinity:
                if weighted.term.matches(incoming, ns_labels):
                    credit(info.labels, weighted.term.topology_key, weighted.weight)
            for weighted in terms.preferred_anti_affinity:
                if weighted.term.matches(incoming, ns_labels):
                    credit(info.labels, weighted.term.topology_key, -weighted.weight)
    return scores


def _check(plugin: InterPodAffinity, cache: Cache, incoming: PodInfo, added: Pod, order: list[int]) -> None:
    snapshot = cache.snapshot()
    names = [info.name for info in snapshot.node_infos]
    subsets = [names, [names[i] for i in order if i < len(names)][: max(1, len(names) // 2)]]
    state = CycleState()
    status = plugin.pre_filter(state, incoming, snapshot.node_infos)
    if status is None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        assert found is not None
        got = (found.existing_anti_affinity, found.affinity, found.anti_affinity)
        assert got == _naive_state(snapshot, incoming.pod)
        for subset in subsets:
            batch = batch_of(snapshot, subset)
            per_node = [plugin.filter(state, incoming, snapshot.by_name[n]) for n in subset]
            assert expand_batch_result(plugin.filter_batch(state, incoming, batch), len(batch)) == per_node
        with_added = state.clone()
        node_info = snapshot.by_name[added.spec.node_name]
        assert plugin.add_pod(with_added, incoming, PodInfo(added), node_info) is None
        batch = batch_of(snapshot)
        per_node = [plugin.filter(with_added, incoming, info) for info in snapshot.node_infos]
        assert expand_batch_result(plugin.filter_batch(with_added, incoming, batch), len(batch)) == per_node
        assert plugin.remove_pod(with_added, incoming, PodInfo(added), node_info) is None
        per_node_again = [plugin.filter(with_added, incoming, info) for info in snapshot.node_infos]
        assert per_node_again == [plugin.filter(state, incoming, info) for info in snapshot.node_infos]
    score_state = CycleState()
    score_status = plugin.pre_score(score_state, incoming, snapshot.node_infos)
    if score_status is None:
        found_scores = score_state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        assert found_scores is not None
        assert found_scores.topology_score == _naive_scores(
            snapshot, incoming.pod, plugin.args.hard_pod_affinity_weight
        )
        for subset in subsets:
            per_node_scores = [plugin.score(score_state, incoming, snapshot.by_name[n]) for n in subset]
            batch_scores = plugin.score_batch(score_state, incoming, batch_of(snapshot, subset))
            assert batch_scores.tolist() == per_node_scores
            normalized = np.asarray(per_node_scores, dtype=np.int64)
            assert plugin.normalize_score(score_state, incoming, normalized) is None
            assert all(0 <= s <= 100 for s in normalized.tolist())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_batch_methods_equal_per_node_methods(
    case: tuple[list[Node], list[Pod], Pod, Pod, list[int], dict[str, str], bool, int],
) -> None:
    nodes, existing, incoming, added, order, relabel, ignore, hard = case
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    for p in existing:
        cache.add_pod(p)
    handle = PluginHandle(cache, listers=namespace_stores(NAMESPACES).listers())
    args = InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=ignore, hard_pod_affinity_weight=hard)
    plugin = InterPodAffinity(args, handle)
    info = PodInfo(incoming)
    _check(plugin, cache, info, added, order)
    # A second cycle after the cluster changed: a node relabelled, one removed and a new one in its slot.
    cache.update_node(make_node(nodes[0].metadata.name).labels(relabel).obj())
    if len(nodes) > 1:
        removed = nodes[-1].metadata.name
        for p in existing:
            if p.spec.node_name == removed:
                cache.remove_pod(p)
        cache.remove_node(removed)
        cache.add_node(make_node("fresh").labels({"zone": "z3", "host": "fresh"}).obj())
        if added.spec.node_name == removed:
            return
    _check(plugin, cache, info, added, order)
