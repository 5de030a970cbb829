"""Property test: InterPodAffinity's array paths (counting.py) produce the reference loops' state, cycle after cycle.

One plugin keeps its per-node counts, the index of existing pods' distinct terms and its rendered dictionaries
across cycles; a second one, over the same cache, always walks every node (its ``_columnar`` answers None).
Between cycles the cluster changes the ways a scheduler sees it change: pods bound (as the very Pod the cycle
saw, re-wrapped with a node name, so parsed terms are reused) and deleted, a pod relabelled under its uid, nodes
relabelled (topology values move, keys appear and vanish), removed and added (slots reused). Every cycle an
incoming pod with random terms is run through PreFilter and PreScore of both plugins: statuses, the three
PreFilter counts and the PreScore domain scores must be equal, and the batch Filter / Score answers read from the
array path's per-class arrays must equal those of the reference state (which has none), also after AddPod changed
the state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ipatest_helpers import namespace_stores

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import IntArray
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.inter_pod_affinity import (
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    _PreFilterState,
    _PreScoreState,
)
from kubesched.plugins.interpodaffinity.node_pods import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    TermKey,
)
from kubesched.plugins.interpodaffinity.terms import parse_pod_terms
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result

TOPOLOGY_KEYS = ("zone", "region", "host", "absent")
LABEL_KEYS = ("app", "tier")
LABEL_VALUES = ("a", "b", "c")
NAMESPACES = {"default": {"team": "t1"}, "ns1": {"team": "t2"}, "ns2": {"team": "t1"}}


class _Reference(InterPodAffinity):
    """The plugin with its array paths off: PreFilter and PreScore walk every node."""

    def _columnar(self, nodes: Sequence[NodeInfo]) -> None:
        return None


@st.composite
def node_labels(draw: st.DrawFn, name: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    if draw(st.integers(0, 3)):
        labels["zone"] = draw(st.sampled_from(["z1", "z2", "z3"]))
    if draw(st.booleans()):
        labels["region"] = draw(st.sampled_from(["r1", "r2"]))
    if draw(st.integers(0, 3)):
        labels["host"] = name
    return labels


@st.composite
def affinity_term(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(LABEL_KEYS))
    value = draw(st.sampled_from(LABEL_VALUES))
    selector = draw(
        st.sampled_from(
            [
                {"matchLabels": {key: value}},
                {"matchExpressions": [{"key": key, "operator": "In", "values": [value, "c"]}]},
                {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]},
                {"matchExpressions": [{"key": key, "operator": "Exists"}]},
                {},
            ]
        )
    )
    # Few distinct topology keys and selectors, so terms of different pods often coincide (the index shares them).
    term: dict[str, Any] = {"labelSelector": selector, "topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS))}
    namespaces = draw(st.sampled_from(["own", "own", "list", "selector", "all"]))
    if namespaces == "list":
        term["namespaces"] = draw(st.lists(st.sampled_from(sorted(NAMESPACES)), min_size=1, max_size=2, unique=True))
    elif namespaces == "selector":
        term["namespaceSelector"] = {"matchLabels": {"team": draw(st.sampled_from(["t1", "t2"]))}}
    elif namespaces == "all":
        term["namespaceSelector"] = {}
    if draw(st.integers(0, 3)) == 0:
        term["matchLabelKeys"] = [draw(st.sampled_from(LABEL_KEYS))]
    return term


@st.composite
def a_pod(draw: st.DrawFn, name: str) -> Pod:
    builder = make_pod(name).namespace(draw(st.sampled_from(sorted(NAMESPACES))))
    for key in LABEL_KEYS:
        if draw(st.booleans()):
            builder.label(key, draw(st.sampled_from(LABEL_VALUES)))
    for _ in range(draw(st.integers(0, 3))):
        anti = draw(st.booleans())
        weight = draw(st.one_of(st.none(), st.none(), st.integers(0, 5), st.integers(-3, 100)))
        builder.pod_affinity_term(draw(affinity_term()), anti=anti, weight=weight)
    return builder.obj()


STEP = st.sampled_from(["bind", "bind", "bind", "delete", "relabel-pod", "relabel-node", "remove-node", "add-node"])


def _bound(pod: Pod, node: str) -> Pod:
    # What binding does to a pod: a new Pod object sharing its spec's contents (and affinity mapping).
    return replace(pod, spec=replace(pod.spec, node_name=node))


def _states(plugin: InterPodAffinity, incoming: PodInfo, nodes: list[NodeInfo]) -> tuple[Any, ...]:
    state = CycleState()
    status = plugin.pre_filter(state, incoming, nodes)
    found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
    counts = None if found is None else (found.existing_anti_affinity, found.affinity, found.anti_affinity)
    score_state = CycleState()
    score_status = plugin.pre_score(score_state, incoming, nodes)
    scores = score_state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
    return state, status, counts, score_state, score_status, None if scores is None else scores.topology_score


def _check_cycle(fast: InterPodAffinity, reference: InterPodAffinity, cache: Cache, incoming: Pod, added: Pod) -> None:
    snapshot = cache.snapshot()
    info = PodInfo(incoming)
    f_state, f_status, f_counts, f_score_state, f_score_status, f_scores = _states(fast, info, snapshot.node_infos)
    # The index of existing pods' distinct terms is what the nodes hold now, updated from the changed ones (read
    # only while some pod has terms: the table answers for a cluster without any, whatever the index last held).
    terms_anywhere = _term_totals(fast, snapshot.node_infos)
    assert snapshot.table.has_pods_with_affinity is bool(terms_anywhere)
    if terms_anywhere:
        assert fast._counter._existing.totals == terms_anywhere
    r_state, r_status, r_counts, r_score_state, r_score_status, r_scores = _states(
        reference, info, list(snapshot.node_infos)
    )
    assert f_status == r_status
    assert f_counts == r_counts
    assert f_score_status == r_score_status
    assert f_scores == r_scores
    batch = batch_of(snapshot)
    if f_counts is not None:
        for f, r in ((f_state, r_state), (f_state.clone(), r_state.clone())):
            assert expand_batch_result(fast.filter_batch(f, info, batch), len(batch)) == expand_batch_result(
                reference.filter_batch(r, info, batch), len(batch)
            )
        with_added = f_state.clone()
        node_info = snapshot.node_infos[0]
        assert fast.add_pod(with_added, info, PodInfo(_bound(added, node_info.name)), node_info) is None
        per_node = [fast.filter(with_added, info, n) for n in snapshot.node_infos]
        assert expand_batch_result(fast.filter_batch(with_added, info, batch), len(batch)) == per_node
        # The clone's change left the original's counts (and the arrays it shares) as they were.
        assert (f_state.get(PRE_FILTER_STATE_KEY, _PreFilterState).existing_anti_affinity) == f_counts[0]
    if f_scores is not None:
        got: IntArray = fast.score_batch(f_score_state, info, batch)
        want: IntArray = reference.score_batch(r_score_state, info, batch)
        assert got.tolist() == want.tolist()
        assert got.tolist() == [reference.score(r_score_state, info, n) for n in snapshot.node_infos]


def _term_totals(plugin: InterPodAffinity, nodes: Sequence[NodeInfo]) -> dict[TermKey, int]:
    totals: Counter[TermKey] = Counter()
    for info in nodes:
        for pod_info in info.pods.values():
            terms = parse_pod_terms(pod_info.pod)
            totals.update((REQUIRED_AFFINITY, t, 0) for t in terms.required_affinity)
            totals.update((REQUIRED_ANTI_AFFINITY, t, 0) for t in terms.required_anti_affinity)
            totals.update((PREFERRED_AFFINITY, w.term, w.weight) for w in terms.preferred_affinity)
            totals.update((PREFERRED_ANTI_AFFINITY, w.term, w.weight) for w in terms.preferred_anti_affinity)
    return dict(totals)


@st.composite
def scenario(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 6))
    names = [f"n{i}" for i in range(count)]
    return {
        "nodes": [make_node(n).labels(draw(node_labels(n))).obj() for n in names],
        "existing": [(draw(a_pod(f"e{i}")), draw(st.sampled_from(names))) for i in range(draw(st.integers(0, 8)))],
        # Incoming pods come from a few templates, as replicas of workloads do, so the rendered dictionaries of
        # one template are updated cycle after cycle (and interleaved with another's).
        "templates": draw(st.lists(a_pod("template"), min_size=1, max_size=2)),
        "cycles": [(draw(st.lists(STEP, max_size=4)), draw(st.data())) for c in range(draw(st.integers(1, 6)))],
        "args": InterPodAffinityArgs(
            ignore_preferred_terms_of_existing_pods=draw(st.booleans()),
            hard_pod_affinity_weight=draw(st.sampled_from([0, 1, 7])),
        ),
    }


def _apply(step: str, data: st.DataObject, cache: Cache, bound: dict[str, Pod], nodes: dict[str, Node], n: int) -> None:
    names = sorted(nodes)
    if step == "bind" and names:
        pod = data.draw(a_pod(f"b{n}"))
        node = data.draw(st.sampled_from(names))
        bound[pod.metadata.uid] = cache.add_pod(_bound(pod, node)).pod
    elif step == "delete" and bound:
        uid = data.draw(st.sampled_from(sorted(bound)))
        cache.remove_pod(bound.pop(uid))
    elif step == "relabel-pod" and bound:
        uid = data.draw(st.sampled_from(sorted(bound)))
        old = bound[uid]
        labels = {k: data.draw(st.sampled_from(LABEL_VALUES)) for k in LABEL_KEYS if data.draw(st.booleans())}
        new = replace(old, metadata=replace(old.metadata, labels=labels))
        cache.remove_pod(old)
        bound[uid] = cache.add_pod(new).pod
    elif step == "relabel-node" and names:
        name = data.draw(st.sampled_from(names))
        nodes[name] = make_node(name).labels(data.draw(node_labels(name))).obj()
        cache.update_node(nodes[name])
    elif step == "remove-node" and len(names) > 1:
        name = data.draw(st.sampled_from(names))
        for uid, pod in list(bound.items()):
            if pod.spec.node_name == name:
                cache.remove_pod(bound.pop(uid))
        cache.remove_node(name)
        del nodes[name]
    elif step == "add-node":
        name = f"fresh{n}"
        nodes[name] = make_node(name).labels(data.draw(node_labels(name))).obj()
        cache.add_node(nodes[name])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_array_paths_equal_the_reference_loops_as_the_cluster_changes(case: dict[str, Any]) -> None:
    cache = Cache()
    nodes: dict[str, Node] = {}
    for node in case["nodes"]:
        nodes[node.metadata.name] = node
        cache.add_node(node)
    bound: dict[str, Pod] = {}
    for pod, node_name in case["existing"]:
        bound[pod.metadata.uid] = cache.add_pod(_bound(pod, node_name)).pod
    handle = PluginHandle(cache, listers=namespace_stores(NAMESPACES).listers())
    fast = InterPodAffinity(case["args"], handle)
    reference = _Reference(case["args"], handle)
    step_number = 0
    for cycle, (steps, data) in enumerate(case["cycles"]):
        template: Pod = data.draw(st.sampled_from(case["templates"]))
        incoming = replace(template, metadata=replace(template.metadata, name=f"in{cycle}", uid=f"uid-in{cycle}"))
        _check_cycle(fast, reference, cache, incoming, data.draw(a_pod("added")))
        # The incoming pod lands somewhere, as the cycle's own Pod object re-wrapped (its parsed terms reused).
        if data.draw(st.booleans()):
            node = data.draw(st.sampled_from(sorted(nodes)))
            bound[incoming.metadata.uid] = cache.add_pod(_bound(incoming, node)).pod
        for step in steps:
            step_number += 1
            _apply(step, data, cache, bound, nodes, step_number)
    _check_cycle(fast, reference, cache, make_pod("last").obj(), make_pod("added").obj())


def test_array_paths_keep_nothing_of_a_table_they_no_longer_see() -> None:
    """A fresh snapshot (another table) is counted from scratch, not from the arrays of the old one."""
    term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "host"}
    cache = Cache()
    for name in ("n0", "n1"):
        cache.add_node(make_node(name).labels({"host": name}).obj())
    cache.add_pod(make_pod("e0").label("app", "a").pod_affinity_term(term, anti=True).node_name("n0").obj())
    handle = PluginHandle(cache, listers=namespace_stores(NAMESPACES).listers())
    plugin = InterPodAffinity(None, handle)
    incoming = PodInfo(make_pod("in").label("app", "a").obj())
    state = CycleState()
    assert plugin.pre_filter(state, incoming, cache.snapshot().node_infos) is None
    found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
    assert found is not None and found.existing_anti_affinity == {("host", "n0"): 1}
    other = Cache()
    other.add_node(make_node("n1").labels({"host": "n1"}).obj())
    other.add_pod(make_pod("e1").label("app", "a").pod_affinity_term(term, anti=True).node_name("n1").obj())
    plugin.handle = PluginHandle(other, listers=namespace_stores(NAMESPACES).listers())
    state = CycleState()
    assert plugin.pre_filter(state, incoming, other.snapshot().node_infos) is None
    found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
    assert found is not None and found.existing_anti_affinity == {("host", "n1"): 1}
    codes = expand_batch_result(plugin.filter_batch(state, incoming, batch_of(other.snapshot())), 1)
    assert [s is not None for s in codes] == [True]
