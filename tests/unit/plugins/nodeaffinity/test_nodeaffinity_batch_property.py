"""Property test: NodeAffinity's column path (label-value class columns, parsed Gt/Lt values, name compares)
answers what the per-node reference answers, for one plugin kept across a changing cluster.

The columns outlive a cycle: class ids are appended as nodes meet new label values, and the parsed Gt/Lt
values are extended rather than rebuilt. So the same plugin instance (and the same Cache and Snapshot)
is checked after each of a run of random changes: label updates that bring new values, nodes removed and
re-added (slots reused), unique hostname labels as scheduler_perf gives. Pods draw nodeSelector,
required and preferred terms over all operators (incl. unparsable ones) and matchFields, and the profile's
addedAffinity. Also the scheduler's O(names) PreFilterResult lookup against the walk over every node.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from kubesched.scheduler.algorithm import narrowed_slots, narrowed_slots_reference
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
KEYS = (ZONE, "n", HOSTNAME)
VALUES = ("a", "b", "1", "7", "-3", "+4", "99999999999999999999", "x1")
NAMES = tuple(f"n{i}" for i in range(10))

values = st.lists(st.sampled_from([*VALUES, *NAMES]), min_size=1, max_size=3)
expression = st.builds(
    lambda key, op, vals: {"key": key, "operator": op, **({"values": vals} if vals is not None else {})},
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.one_of(st.none(), values, values.map(lambda v: v[:1])),
)
name_field = st.builds(
    lambda op, name: {"key": "metadata.name", "operator": op, "values": [name]},
    st.sampled_from(["In", "NotIn"]),
    st.sampled_from([*NAMES, "elsewhere"]),
)
term = st.builds(
    lambda exprs, fields: {
        **({"matchExpressions": exprs} if exprs else {}),
        **({"matchFields": fields} if fields else {}),
    },
    st.lists(expression, max_size=3),
    st.lists(name_field, max_size=1),
)


@st.composite
def pod_affinity(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": draw(st.lists(term, max_size=3))}
    if draw(st.booleans()):
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.integers(min_value=0, max_value=100)), "preference": t}
            for t in draw(st.lists(term, max_size=3))
        ]
    return out


@st.composite
def node(draw: st.DrawFn, name: str) -> Node:
    labels = draw(st.dictionaries(st.sampled_from(KEYS[:2]), st.sampled_from(VALUES), max_size=2))
    if draw(st.integers(0, 3)):
        labels[HOSTNAME] = name
    return make_node(name).labels(labels).obj()


ADDED = [
    None,
    NodeAffinityArgs(
        added_affinity={
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["b"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["0"]}]}}
            ],
        }
    ),
]


def _check(plugin: NodeAffinity, cache: Cache, pod: PodInfo, order: list[str]) -> None:
    snapshot = cache.snapshot()
    state = CycleState()
    pre = plugin.pre_filter(state, pod, snapshot.node_infos)
    if not (isinstance(pre, Status) and pre.code is Code.SKIP):
        infos = [snapshot.by_name[name] for name in order]
        per_node = [plugin.filter(state, pod, info) for info in infos]
        batch = expand_batch_result(plugin.filter_batch(state, pod, batch_of(snapshot, order)), len(order))
        assert batch == per_node, order
    score_state = CycleState()
    status = plugin.pre_score(score_state, pod, snapshot.node_infos)
    if status is None:
        infos = [snapshot.by_name[name] for name in order]
        scores = [plugin.score(score_state, pod, info) for info in infos]
        assert plugin.score_batch(score_state, pod, batch_of(snapshot, order)).tolist() == scores, order


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_column_path_equals_per_node_as_the_cluster_changes(data: st.DataObject) -> None:
    cache = Cache()
    live: list[str] = []
    for name in NAMES[: data.draw(st.integers(1, 6))]:
        cache.add_node(data.draw(node(name)))
        live.append(name)
    plugins = [NodeAffinity(args, PluginHandle(cache)) for args in ADDED]
    for _ in range(data.draw(st.integers(1, 5))):
        pod = make_pod("p").node_selector(
            data.draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from([*VALUES, *NAMES]), max_size=2))
        )
        affinity = data.draw(pod_affinity())
        if affinity:
            pod.affinity({"nodeAffinity": affinity})
        incoming = PodInfo(pod.obj())
        order = data.draw(st.permutations(live).flatmap(lambda o: st.integers(1, len(o)).map(lambda k: o[:k])))
        for plugin in plugins:
            _check(plugin, cache, incoming, list(order))
        change = data.draw(st.sampled_from(["update", "remove", "add"]))
        if change == "update":
            name = data.draw(st.sampled_from(live))
            cache.update_node(data.draw(node(name)))
        elif change == "remove" and len(live) > 1:
            name = data.draw(st.sampled_from(live))
            cache.remove_node(name)
            live.remove(name)
        else:
            spare = [n for n in NAMES if n not in live]
            if spare:
                name = data.draw(st.sampled_from(spare))
                cache.add_node(data.draw(node(name)))
                live.append(name)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_narrowed_slots_equal_the_walk_over_every_node(data: st.DataObject) -> None:
    cache = Cache()
    live: list[str] = []
    for name in NAMES[: data.draw(st.integers(1, 8))]:
        cache.add_node(data.draw(node(name)))
        live.append(name)
    for name in data.draw(st.lists(st.sampled_from(live), unique=True, max_size=len(live) - 1)):
        cache.remove_node(name)
        live.remove(name)
    for name in data.draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)):
        if name not in live:
            cache.add_node(data.draw(node(name)))
            live.append(name)
    snapshot = cache.snapshot()
    names = frozenset(data.draw(st.lists(st.sampled_from([*NAMES, "gone"]), max_size=6)))
    assert narrowed_slots(snapshot, names).tolist() == narrowed_slots_reference(snapshot, names).tolist()
