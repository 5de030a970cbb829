"""Property test: PodTopologySpread's ``filter_batch`` / ``score_batch`` answer exactly what ``filter`` /
``score`` answer, node by node (the sibling of tests/unit/plugins/test_batch_equivalence.py for this plugin).

Random clusters: nodes with or without zone / hostname / rack labels (a hostname label that is not the node's
name included), tainted or not, updated, removed and re-added so table slots and class columns are reused;
existing pods in two namespaces, some terminating. Random pending pods: up to three constraints of either kind
on those keys, every selector shape (missing, ``{}``, expressions, labels), minDomains, both node-inclusion
policies, matchLabelKeys, a nodeSelector and tolerations; profiles with List defaulting, and System defaulting
with a Service selecting the pod. Compared over the whole snapshot and a shuffled subset, after PreFilter and
again after AddPod of a nominated pod on a cloned state; scores compared raw, and normalized scores checked to
lie in [0, 100].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node, Pod
from kubesched.api.workloads import Service
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.listers import Listers, ListerStores
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code
from kubesched.framework.types import PodInfo
from kubesched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs, TopologySpreadConstraint
from kubesched.plugins.podtopologyspread.common import NodeInclusion
from kubesched.plugins.podtopologyspread.counting import snapshot_slots
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result, normalize

HOSTNAME = "kubernetes.io/hostname"
KEYS = ("zone", HOSTNAME, "rack")
NODE_NAMES = tuple(f"n{i}" for i in range(10))
SELECTORS: tuple[dict[str, Any] | None, ...] = (
    None,
    {},
    {"matchLabels": {"app": "a"}},
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["b"]}]},
    {"matchLabels": {"tier": "web"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
)


@st.composite
def node_manifest(draw: st.DrawFn, name: str) -> Node:
    builder = make_node(name)
    if draw(st.integers(0, 4)):
        builder.label("zone", draw(st.sampled_from(["za", "zb", "zc"])))
    hostname = draw(st.sampled_from([name, name, "shared", None]))
    if hostname is not None:
        builder.label(HOSTNAME, hostname)
    if draw(st.booleans()):
        builder.label("rack", draw(st.sampled_from(["r1", "r2"])))
    if draw(st.booleans()):
        builder.label("disk", "ssd")
    if draw(st.integers(0, 3)) == 0:
        builder.taint("dedicated", "x", draw(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])))
    return builder.obj()


@st.composite
def existing_pod(draw: st.DrawFn, index: int, node_names: list[str]) -> Pod:
    builder = make_pod(f"existing-{index}").node_name(draw(st.sampled_from(node_names)))
    builder.namespace(draw(st.sampled_from(["default", "default", "other"])))
    if draw(st.booleans()):
        builder.label("app", draw(st.sampled_from(["a", "b"])))
    if draw(st.booleans()):
        builder.label("tier", "web")
    if draw(st.booleans()):
        builder.label("version", draw(st.sampled_from(["1", "2"])))
    if draw(st.integers(0, 5)) == 0:
        builder.terminating()
    return builder.obj()


@st.composite
def spread_constraint(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "maxSkew": draw(st.sampled_from([1, 1, 2, 3, 0])),
        "topologyKey": draw(st.sampled_from(KEYS)),
        "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
    }
    selector = draw(st.sampled_from(SELECTORS))
    if selector is not None:
        out["labelSelector"] = selector
    if draw(st.booleans()):
        out["minDomains"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        out["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    if draw(st.booleans()):
        out["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    if draw(st.booleans()):
        out["matchLabelKeys"] = draw(st.lists(st.sampled_from(["version", "app", "missing"]), max_size=2))
    return out


@st.composite
def pending_pod(draw: st.DrawFn) -> Pod:
    builder = make_pod("pending")
    if draw(st.booleans()):
        builder.label("app", draw(st.sampled_from(["a", "b"])))
    if draw(st.booleans()):
        builder.label("version", "1")
    if draw(st.booleans()):
        builder.label("tier", "web")
    for constraint in draw(st.lists(spread_constraint(), max_size=3)):
        builder.spread(constraint)
    if draw(st.booleans()):
        builder.node_selector({"disk": "ssd"})
    if draw(st.booleans()):
        builder.toleration("dedicated", "Exists", "", "")
    return builder.obj()


@dataclass
class Cluster:
    cache: Cache
    snapshot: Snapshot
    pod: PodInfo
    subset: list[str]
    nominated: PodInfo
    nominated_node: str
    args: PodTopologySpreadArgs
    listers: Listers


ARGS = (
    PodTopologySpreadArgs(defaulting_type="List"),
    PodTopologySpreadArgs(),
    PodTopologySpreadArgs(
        defaulting_type="List",
        default_constraints=(
            TopologySpreadConstraint(max_skew=1, topology_key="zone", when_unsatisfiable="DoNotSchedule"),
            TopologySpreadConstraint(max_skew=2, topology_key=HOSTNAME, when_unsatisfiable="ScheduleAnyway"),
        ),
    ),
)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    count = draw(st.integers(min_value=1, max_value=7))
    names = list(NODE_NAMES[:count])
    cache = Cache()
    for name in names:
        cache.add_node(draw(node_manifest(name)))
    for i in range(draw(st.integers(min_value=0, max_value=10))):
        cache.add_pod(draw(existing_pod(i, names)))
    for name in draw(st.lists(st.sampled_from(names), unique=True, max_size=2)):
        cache.update_node(draw(node_manifest(name)))
    removed = draw(st.lists(st.sampled_from(names), unique=True, max_size=min(2, len(names) - 1)))
    for name in removed:
        cache.remove_node(name)
    live = [n for n in names if n not in removed]
    for name in NODE_NAMES[count : count + draw(st.integers(min_value=0, max_value=2))]:
        cache.add_node(draw(node_manifest(name)))
        live.append(name)
    snapshot = cache.snapshot()
    subset = draw(st.permutations(live).flatmap(lambda order: st.integers(1, len(order)).map(lambda k: order[:k])))
    nominated_node = draw(st.sampled_from(live))
    nominated = PodInfo(draw(existing_pod(99, [nominated_node])))
    stores = ListerStores()
    if draw(st.booleans()):
        raw = {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"app": "a"}}}
        stores.services.add(Service.from_dict(raw, "test"))
    return Cluster(
        cache,
        snapshot,
        PodInfo(draw(pending_pod())),
        list(subset),
        nominated,
        nominated_node,
        draw(st.sampled_from(ARGS)),
        stores.listers(),
    )


def _orders(cluster: Cluster) -> list[list[str]]:
    return [[info.name for info in cluster.snapshot.node_infos], cluster.subset]


def _check_filter(plugin: PodTopologySpread, state: CycleState, cluster: Cluster) -> None:
    for order in _orders(cluster):
        per_node = [plugin.filter(state, cluster.pod, cluster.snapshot.by_name[name]) for name in order]
        batch = plugin.filter_batch(state, cluster.pod, batch_of(cluster.snapshot, order))
        assert expand_batch_result(batch, len(order)) == per_node, order


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_filter_batch_equals_filter_on_every_node(cluster: Cluster) -> None:
    plugin = PodTopologySpread(cluster.args, PluginHandle(cluster.cache, listers=cluster.listers))
    state = CycleState()
    status = plugin.pre_filter(state, cluster.pod, cluster.snapshot.node_infos)
    if status is not None:
        assert status.code is Code.SKIP  # the random selectors always parse
        return
    _check_filter(plugin, state, cluster)
    # A nominated pod added to a copy of the state (two-pass filtering), the original left as it was.
    copy = state.clone()
    node_info = cluster.snapshot.by_name[cluster.nominated_node]
    assert plugin.add_pod(copy, cluster.pod, cluster.nominated, node_info) is None
    _check_filter(plugin, copy, cluster)
    assert plugin.remove_pod(copy, cluster.pod, cluster.nominated, node_info) is None
    _check_filter(plugin, copy, cluster)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_score_batch_equals_score_on_every_node(cluster: Cluster) -> None:
    plugin = PodTopologySpread(cluster.args, PluginHandle(cluster.cache, listers=cluster.listers))
    for order in _orders(cluster):
        state = CycleState()
        filtered = [cluster.snapshot.by_name[name] for name in order]
        status = plugin.pre_score(state, cluster.pod, filtered)
        if status is not None:
            assert status.code is Code.SKIP
            return
        per_node = [plugin.score(state, cluster.pod, info) for info in filtered]
        batch = plugin.score_batch(state, cluster.pod, batch_of(cluster.snapshot, order)).tolist()
        assert batch == per_node, order
        normalized = normalize(plugin, state, cluster.pod, per_node)
        # maxSkew 0 (which the API server refuses) can push upstream's formula out of range; skip those.
        if all(c.get("maxSkew", 0) >= 1 for c in cluster.pod.pod.spec.topology_spread_constraints):
            assert all(0 <= s <= 100 for s in normalized), normalized


def _assert_counts_equal_reference(plugin: PodTopologySpread, cluster: Cluster) -> None:
    """The array counting (SpreadCounter) against the node-by-node loops, domain order included."""
    snapshot = cluster.cache.snapshot()
    nodes = snapshot.node_infos
    pod = cluster.pod
    inclusion = NodeInclusion(pod.pod)
    hard = plugin.constraints(pod.pod, "DoNotSchedule")
    fast = plugin.counter.hard_counts(snapshot, hard, pod.namespace, inclusion)
    reference = plugin.reference_hard_counts(nodes, hard, pod.namespace, inclusion)
    assert [list(d.items()) for d in fast] == [list(d.items()) for d in reference]
    all_soft = plugin.constraints(pod.pod, "ScheduleAnyway")
    filtered = [snapshot.by_name[name] for name in cluster.subset if name in snapshot.by_name]
    slots = snapshot_slots(snapshot.table, filtered)
    assert slots is not None
    for require_all in (True, False):
        opened, ignored = plugin.counter.open_domains(snapshot.table, slots, all_soft, require_all)
        names = {filtered[i].name for i in np.flatnonzero(ignored).tolist()}
        expected_opened, expected_ignored = plugin.reference_open_domains(filtered, all_soft, require_all)
        assert ([list(d.items()) for d in opened], names) == (
            [list(d.items()) for d in expected_opened],
            expected_ignored,
        )
    assert snapshot_slots(snapshot.table, [info.clone() for info in filtered]) is None
    soft = [c for c in all_soft if c.topology_key != HOSTNAME]
    for require_all in (True, False):
        opened = [{info.labels.get(c.topology_key, ""): 0 for info in nodes[::2]} for c in soft]
        expected = [dict(d) for d in opened]
        plugin.reference_soft_counts(nodes, soft, expected, pod.namespace, inclusion, require_all)
        keys = [c.topology_key for c in soft] if require_all else []
        for constraint, domains in zip(soft, opened, strict=True):
            plugin.counter.soft_counts(snapshot, constraint, domains, pod.namespace, inclusion, keys)
        assert opened == expected, require_all


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_array_counting_equals_the_loops_as_the_cluster_changes(cluster: Cluster, data: st.DataObject) -> None:
    """Counted, then pods bound, deleted and relabelled and nodes replaced, then counted again by the same
    plugin: the per-slot caches recompute exactly the nodes that changed."""
    plugin = PodTopologySpread(cluster.args, PluginHandle(cluster.cache, listers=cluster.listers))
    _assert_counts_equal_reference(plugin, cluster)
    live = [info.name for info in cluster.cache.snapshot().node_infos]
    for i in range(data.draw(st.integers(0, 4))):
        cluster.cache.add_pod(data.draw(existing_pod(100 + i, live)))
    for info in data.draw(st.lists(st.sampled_from(cluster.cache.snapshot().node_infos), max_size=2, unique_by=id)):
        for pod_info in list(info.pods.values())[:1]:
            removed = cluster.cache.remove_pod(pod_info.pod)
            assert removed is not None
    for name in data.draw(st.lists(st.sampled_from(live), unique=True, max_size=2)):
        cluster.cache.update_node(data.draw(node_manifest(name)))
    _assert_counts_equal_reference(plugin, cluster)
