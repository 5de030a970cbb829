"""Property test: every plugin's batch method answers exactly what its per-node method answers.

For random clusters (capacities with extended resources, taints, labels, cordoned nodes, images,
existing pods with and without requests, nodes updated, removed and re-added so table slots get reused)
and random pending pods (requests, tolerations, nodeName, nodeSelector, required/preferred node affinity
incl. matchFields and unparsable terms, host ports, images), each Filter plugin's ``filter_batch`` and each
Score plugin's ``score_batch`` are compared with the per-node methods on every node, over the whole
snapshot and over a shuffled subset of it, for every NodeResourcesFit scoring strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import BatchFilterPlugin, BatchScorePlugin, ScoreNormalizer
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.imagelocality import ImageLocality
from kubesched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from kubesched.plugins.nodename import NodeName
from kubesched.plugins.nodeports import NodePorts
from kubesched.plugins.noderesources import (
    BalancedAllocation,
    Fit,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.plugins.nodeunschedulable import NodeUnschedulable
from kubesched.plugins.tainttoleration import TaintToleration
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result, normalize

EXTENDED = ("example.com/gpu", "hugepages-2Mi", "kubernetes.io/widget", "other.io/fpga")
LABEL_KEYS = ("zone", "tier", "n")
LABEL_VALUES = ("a", "b", "1", "7", "-3")
TAINT_KEYS = ("a", "b", "node.kubernetes.io/unschedulable")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
IMAGES = {"gcr.io/small": 10, "gcr.io/medium": 300, "gcr.io/big:v1": 1200, "app": 50}
NODE_NAMES = tuple(f"n{i}" for i in range(12))

# Few, round amounts so that "request == free capacity" boundaries come up often.
cpu = st.sampled_from(["0", "500m", "1", "2", "4", "1500m"])
memory = st.sampled_from(["0", "512Mi", "1Gi", "2Gi", "1000"])
ephemeral = st.sampled_from([None, "0", "1Gi", "2Gi"])
small_count = st.integers(min_value=0, max_value=4)


@st.composite
def resource_map(draw: st.DrawFn, *, for_pod: bool) -> dict[str, str | int]:
    out: dict[str, str | int] = {}
    if draw(st.booleans()):
        out["cpu"] = draw(cpu)
    if draw(st.booleans()):
        out["memory"] = draw(memory)
    storage = draw(ephemeral)
    if storage is not None:
        out["ephemeral-storage"] = storage
    for name in draw(st.lists(st.sampled_from(EXTENDED), unique=True, max_size=3)):
        out[name] = (
            draw(small_count) if not name.startswith("hugepages") else draw(st.sampled_from(["0", "2Mi", "4Mi"]))
        )
    if not for_pod:
        out["pods"] = draw(st.sampled_from([0, 1, 2, 3, 110]))
    return out


@st.composite
def node_manifest(draw: st.DrawFn, name: str) -> Node:
    builder = make_node(name).capacity(draw(resource_map(for_pod=False)))
    seen: set[tuple[str, str]] = set()
    for key, value, effect in draw(
        st.lists(
            st.tuples(st.sampled_from(TAINT_KEYS), st.sampled_from(["", "x", "y"]), st.sampled_from(EFFECTS)),
            max_size=3,
        )
    ):
        if (key, effect) not in seen:  # the API server rejects duplicate (key, effect) pairs
            seen.add((key, effect))
            builder.taint(key, value, effect)
    builder.labels(draw(st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=3)))
    builder.unschedulable(draw(st.booleans()))
    for image in draw(st.lists(st.sampled_from(sorted(IMAGES)), unique=True, max_size=3)):
        name_with_tag = image if ":" in image else f"{image}:latest"
        builder.image(name_with_tag, size=IMAGES[image] * 1024 * 1024)
    return builder.obj()


def _containers(draw: st.DrawFn, builder: Any, *, for_pending: bool) -> None:
    for i in range(draw(st.integers(min_value=1, max_value=2))):
        image = draw(st.sampled_from(sorted(IMAGES)))
        builder.container(draw(resource_map(for_pod=True)), name=f"c{i}", image=image)
    if draw(st.booleans()):
        builder.init_container(
            draw(resource_map(for_pod=True)), name="init", image=draw(st.sampled_from(sorted(IMAGES)))
        )
    if for_pending or draw(st.booleans()):
        for port in draw(st.lists(st.sampled_from([80, 443, 8080]), unique=True, max_size=2)):
            builder.host_port(
                port, protocol=draw(st.sampled_from(["TCP", "UDP"])), host_ip=draw(st.sampled_from(["", "10.0.0.1"]))
            )


@st.composite
def existing_pod(draw: st.DrawFn, index: int, node_names: Sequence[str]) -> Pod:
    builder = make_pod(f"existing-{index}").node_name(draw(st.sampled_from(node_names)))
    _containers(draw, builder, for_pending=False)
    return builder.obj()


expression = st.builds(
    lambda key, op, values: {"key": key, "operator": op, **({"values": values} if values is not None else {})},
    st.sampled_from(LABEL_KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.one_of(st.none(), st.lists(st.sampled_from([*LABEL_VALUES, "not an int!"]), min_size=1, max_size=2)),
)
name_field = st.builds(
    lambda op, name: {"key": "metadata.name", "operator": op, "values": [name]},
    st.sampled_from(["In", "NotIn"]),
    st.sampled_from(NODE_NAMES),
)
term = st.builds(
    lambda exprs, fields: {
        **({"matchExpressions": exprs} if exprs else {}),
        **({"matchFields": fields} if fields else {}),
    },
    st.lists(expression, max_size=2),
    st.lists(name_field, max_size=1),
)


@st.composite
def node_affinity(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": draw(st.lists(term, max_size=2))}
    if draw(st.booleans()):
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.integers(min_value=0, max_value=100)), "preference": t}
            for t in draw(st.lists(term, max_size=3))
        ]
    return out


@st.composite
def pending_pod(draw: st.DrawFn, node_names: Sequence[str]) -> Pod:
    builder = make_pod("pending")
    _containers(draw, builder, for_pending=True)
    if draw(st.booleans()):
        builder.overhead(draw(resource_map(for_pod=True)))
    for key, operator, value, effect in draw(
        st.lists(
            st.tuples(
                st.sampled_from(["", *TAINT_KEYS]),
                st.sampled_from(["Equal", "Exists"]),
                st.sampled_from(["", "x", "y"]),
                st.sampled_from(["", *EFFECTS]),
            ),
            max_size=3,
        )
    ):
        if not key:
            builder.toleration("", "Exists", "", effect)  # an empty key requires Exists
        elif operator == "Exists":
            builder.toleration(key, "Exists", "", effect)
        else:
            builder.toleration(key, "Equal", value, effect)
    choice = draw(st.sampled_from(["none", "existing", "missing"]))
    if choice == "existing":
        builder.node_name(draw(st.sampled_from(node_names)))
    elif choice == "missing":
        builder.node_name("no-such-node")
    builder.node_selector(draw(st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2)))
    affinity = draw(node_affinity())
    if affinity:
        builder.affinity({"nodeAffinity": affinity})
    return builder.obj()


@dataclass
class Cluster:
    cache: Cache
    snapshot: Snapshot
    pod: PodInfo
    subset: list[str]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    count = draw(st.integers(min_value=1, max_value=7))
    names = list(NODE_NAMES[:count])
    cache = Cache()
    for name in names:
        cache.add_node(draw(node_manifest(name)))
    for i in range(draw(st.integers(min_value=0, max_value=8))):
        cache.add_pod(draw(existing_pod(i, names)))
    # Churn: update some nodes (class columns and allocatable re-synced), remove some, add new ones that
    # may reuse the freed table slots.
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
    return Cluster(cache, snapshot, PodInfo(draw(pending_pod(live))), list(subset))


def _rtcr(shape: Sequence[tuple[int, int]], resources: tuple[ResourceSpec, ...]) -> ScoringStrategy:
    points = tuple(UtilizationShapePoint(utilization=u, score=s) for u, s in shape)
    return ScoringStrategy(
        type="RequestedToCapacityRatio",
        resources=resources,
        requested_to_capacity_ratio=RequestedToCapacityRatioParam(shape=points),
    )


WIDE = (
    ResourceSpec(name="cpu", weight=3),
    ResourceSpec(name="memory", weight=1),
    ResourceSpec(name="ephemeral-storage", weight=2),
    ResourceSpec(name="example.com/gpu", weight=5),
    ResourceSpec(name="hugepages-2Mi", weight=1),
    ResourceSpec(name="pods", weight=1),
)
FIT_ARGS = [
    NodeResourcesFitArgs(),
    NodeResourcesFitArgs(
        ignored_resources=("example.com/gpu",),
        ignored_resource_groups=("other.io",),
        scoring_strategy=ScoringStrategy(type="MostAllocated", resources=WIDE),
    ),
    NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="LeastAllocated", resources=WIDE)),
    NodeResourcesFitArgs(scoring_strategy=_rtcr([(0, 10), (100, 0)], ())),
    NodeResourcesFitArgs(scoring_strategy=_rtcr([(0, 2), (30, 9), (70, 1), (100, 4)], WIDE)),
]
BALANCED_ARGS = [
    NodeResourcesBalancedAllocationArgs(),
    NodeResourcesBalancedAllocationArgs(
        resources=tuple(ResourceSpec(name=r.name, weight=1) for r in WIDE if r.name != "pods")
    ),
]
ADDED = NodeAffinityArgs(
    added_affinity={
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["b"]}]}]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}
        ],
    }
)


def _plugins(handle: PluginHandle) -> list[object]:
    return [
        NodeUnschedulable(None, handle),
        NodeName(None, handle),
        TaintToleration(None, handle),
        NodeAffinity(None, handle),
        NodeAffinity(ADDED, handle),
        NodePorts(None, handle),
        ImageLocality(None, handle),
        *(Fit(args, handle) for args in FIT_ARGS),
        *(BalancedAllocation(args, handle) for args in BALANCED_ARGS),
    ]


def _orders(cluster: Cluster) -> list[list[str]]:
    return [[info.name for info in cluster.snapshot.node_infos], cluster.subset]


def _check_filter(plugin: BatchFilterPlugin, state: CycleState, cluster: Cluster) -> None:
    for order in _orders(cluster):
        infos = [cluster.snapshot.by_name[name] for name in order]
        per_node = [plugin.filter(state, cluster.pod, info) for info in infos]
        batch = expand_batch_result(
            plugin.filter_batch(state, cluster.pod, batch_of(cluster.snapshot, order)), len(order)
        )
        assert batch == per_node, (plugin.name, order)


def _check_score(plugin: BatchScorePlugin, state: CycleState, cluster: Cluster) -> None:
    for order in _orders(cluster):
        infos = [cluster.snapshot.by_name[name] for name in order]
        per_node = [plugin.score(state, cluster.pod, info) for info in infos]
        batch = [int(s) for s in plugin.score_batch(state, cluster.pod, batch_of(cluster.snapshot, order)).tolist()]
        assert batch == per_node, (plugin.name, order)
        if isinstance(plugin, ScoreNormalizer):
            normalized = normalize(plugin, state, cluster.pod, per_node)
            assert all(0 <= s <= 100 for s in normalized), (plugin.name, normalized)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_filter_batch_equals_filter_on_every_node(cluster: Cluster) -> None:
    for plugin in _plugins(PluginHandle(cluster.cache)):
        if not isinstance(plugin, BatchFilterPlugin):
            continue
        state = CycleState()
        pre_filter = getattr(plugin, "pre_filter", None)
        if pre_filter is not None:
            result = pre_filter(state, cluster.pod, cluster.snapshot.node_infos)
            if isinstance(result, Status) and result.code is Code.SKIP:
                continue
        _check_filter(plugin, state, cluster)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_score_batch_equals_score_on_every_node(cluster: Cluster) -> None:
    for plugin in _plugins(PluginHandle(cluster.cache)):
        if not isinstance(plugin, BatchScorePlugin):
            continue
        state = CycleState()
        pre_score = getattr(plugin, "pre_score", None)
        status = pre_score(state, cluster.pod, cluster.snapshot.node_infos) if pre_score is not None else None
        if status is not None and status.code is Code.SKIP:
            continue
        if status is not None and status.code is Code.ERROR:
            continue  # an unparsable preferred term fails the cycle on both paths alike
        _check_score(plugin, state, cluster)


def test_without_prescore_state_batch_and_per_node_recompute_alike() -> None:
    nodes = [make_node("a").capacity(cpu="2", memory="2Gi").obj(), make_node("b").capacity(cpu="1", memory="8Gi").obj()]
    cache = Cache()
    for node in nodes:
        cache.add_node(node)
    snapshot = cache.snapshot()
    pod = PodInfo(make_pod().req(cpu="500m", memory="1Gi").obj())
    for plugin in _plugins(PluginHandle(cache)):
        if isinstance(plugin, (Fit, BalancedAllocation)):
            per_node = [plugin.score(CycleState(), pod, info) for info in snapshot.node_infos]
            batch = plugin.score_batch(CycleState(), pod, batch_of(snapshot)).tolist()
            assert batch == per_node


@st.composite
def changes(draw: st.DrawFn, names: Sequence[str]) -> list[tuple[str, Any]]:
    """Cluster changes between two cycles: pods bound or deleted, nodes updated, removed or added."""
    out: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(min_value=0, max_value=4))):
        kind = draw(st.sampled_from(["add_pod", "update_node", "remove_node", "add_node"]))
        if kind == "add_pod":
            out.append((kind, draw(existing_pod(100 + i, names))))
        elif kind == "add_node":
            out.append((kind, draw(node_manifest(NODE_NAMES[-1 - i]))))
        else:
            name = draw(st.sampled_from(names))
            out.append((kind, draw(node_manifest(name)) if kind == "update_node" else name))
    return out


def _apply(cache: Cache, change: tuple[str, Any]) -> None:
    kind, value = change
    if kind == "add_pod":
        if cache.node(value.spec.node_name) is not None:
            cache.add_pod(value)
    elif kind == "update_node":
        if cache.node(value.metadata.name) is not None:
            cache.update_node(value)
    elif kind == "remove_node":
        if cache.node_count > 1:
            cache.remove_node(value)
    elif cache.node(value.metadata.name) is None:
        cache.add_node(value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_resource_verdicts_kept_across_cycles_follow_every_change(cluster: Cluster, data: st.DataObject) -> None:
    """NodeResourcesFit's filter, the resource scorers and ImageLocality keep a recurring pod's results per node
    across cycles: after any changes to the cluster, what they answer is still what the per-node reference
    computes on the updated snapshot."""
    handle = PluginHandle(cluster.cache)
    plugins: list[Fit | BalancedAllocation | ImageLocality] = [
        *(Fit(args, handle) for args in FIT_ARGS),
        *(BalancedAllocation(args, handle) for args in BALANCED_ARGS),
        ImageLocality(None, handle),
    ]
    snapshot = cluster.snapshot
    # Two pods in turn, so that a key which failed to tell their requests apart would answer for the wrong one.
    pods = [cluster.pod, PodInfo(data.draw(pending_pod([info.name for info in snapshot.node_infos])))]
    for _ in range(4):  # a key gets its column on its second read; later reads see the changes in between
        names = [info.name for info in snapshot.node_infos]
        for pod in pods:
            for fit in plugins[: len(FIT_ARGS)]:
                assert isinstance(fit, Fit)
                state = CycleState()
                fit.pre_filter(state, pod, snapshot.node_infos)
                per_node_verdicts = [fit.filter(state, pod, info) for info in snapshot.node_infos]
                verdicts = fit.filter_batch(state, pod, batch_of(snapshot, names))
                assert expand_batch_result(verdicts, len(names)) == per_node_verdicts
            for plugin in plugins:
                state = CycleState()
                pre_score = getattr(plugin, "pre_score", None)
                if pre_score is not None and pre_score(state, pod, snapshot.node_infos) is not None:
                    continue
                per_node = [plugin.score(state, pod, info) for info in snapshot.node_infos]
                batch = plugin.score_batch(state, pod, batch_of(snapshot, names)).tolist()
                assert batch == per_node, plugin.name
        for change in data.draw(changes(names)):
            _apply(cluster.cache, change)
        cluster.cache.update_snapshot(snapshot)
