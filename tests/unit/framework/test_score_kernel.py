"""Property test: the fused Score kernel answers exactly what the per-plugin reference loop answers.

Real frameworks built from a real config (kube-scheduler's default Score plugins, each at a random weight, and a
test plugin whose scores can leave [0, 100]) score random clusters: nodes with capacities, taints of every
effect, zones and images; existing pods; a pending pod with requests, tolerations, images and preferred node
affinity. For every shuffled subset of feasible nodes the batch framework's ``run_score`` (the fused kernel) must
equal the per-node framework's (the reference loop over ``score``) and the batch framework's own reference loop:
the same per-plugin normalized and raw scores, the same weighted totals, or the same error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node, Pod
from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.outcomes import ScoreOutcome
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, make_cluster

SCORERS = (
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
    "TaintToleration",
    "NodeAffinity",
    "PodTopologySpread",
    "InterPodAffinity",
)
IMAGES = {"gcr.io/small:1": 30, "gcr.io/medium:1": 400, "gcr.io/big:1": 1500}
TAINTS = [("a", "x", "PreferNoSchedule"), ("b", "", "PreferNoSchedule"), ("c", "y", "NoSchedule")]
ZONES = ("z1", "z2", "z3")


class Wild:
    """A batch Score plugin whose scores (its label ``wild`` on the node) may be out of range."""

    name = "Wild"

    def __init__(self, args: object, handle: Handle) -> None:
        del args
        self._handle = handle

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return int(node_info.labels.get("wild", "0"))

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        return np.fromiter((self.score(state, pod, info) for info in nodes.infos), dtype=np.int64, count=len(nodes))


def _registry() -> Registry:
    return merge(in_tree_registry(), {"Wild": PluginRegistration.of("Wild", Wild)})


@st.composite
def nodes(draw: st.DrawFn, count: int, wild: bool) -> list[Node]:
    out: list[Node] = []
    for i in range(count):
        node = (
            make_node(f"n{i}")
            .zone(draw(st.sampled_from(ZONES)))
            .capacity(cpu=str(draw(st.integers(1, 8))), memory=f"{draw(st.integers(1, 16))}Gi", pods=20)
        )
        for key, value, effect in draw(st.lists(st.sampled_from(TAINTS), max_size=3, unique=True)):
            node = node.taint(key, value, effect)
        for image in draw(st.lists(st.sampled_from(sorted(IMAGES)), max_size=3, unique=True)):
            node = node.image(image, size=IMAGES[image] * 1024 * 1024)
        if wild:
            node = node.label("wild", str(draw(st.sampled_from([0, 50, 100, 101, -1]))))
        out.append(node.obj())
    return out


@st.composite
def pending(draw: st.DrawFn) -> Pod:
    pod = make_pod("p").label("app", "web")
    requests = {
        k: v
        for k, v in (
            ("cpu", draw(st.sampled_from([None, "100m", "1", "3"]))),
            ("memory", draw(st.sampled_from([None, "256Mi", "2Gi"]))),
        )
        if v
    }
    if requests:
        pod = pod.req(requests)
    for key, value, effect in draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)):
        pod = pod.toleration(key=key, operator="Equal", value=value, effect=effect)
    images = draw(st.lists(st.sampled_from([*sorted(IMAGES), "gcr.io/absent:1"]), max_size=2))
    for index, image in enumerate(images):
        pod = pod.container(name=f"img{index}", image=image)
    if draw(st.booleans()):
        preference = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]}
        preferred = [{"weight": 7, "preference": preference}]
        pod = pod.affinity({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}})
    if draw(st.booleans()):
        pod = pod.spread(
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        )
    return pod.obj()


@st.composite
def existing(draw: st.DrawFn, node_names: Sequence[str]) -> list[Pod]:
    return [
        make_pod(f"e{i}")
        .label("app", draw(st.sampled_from(["web", "db"])))
        .req(cpu=draw(st.sampled_from(["100m", "1"])), memory="512Mi")
        .node_name(draw(st.sampled_from(list(node_names))))
        .obj()
        for i in range(draw(st.integers(0, 6)))
    ]


def _framework(handle: PluginHandle, weights: dict[str, int], *, use_batch: bool) -> Framework:
    plugins: dict[str, Any] = {
        "multiPoint": {"enabled": [{"name": name} for name in SCORERS]},
        "score": {"enabled": [{"name": name, "weight": weight} for name, weight in weights.items()]},
    }
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "plugins": plugins}],
    }
    config = load_config_dict(document, "test", _registry())
    return Framework(config.profiles[0], _registry(), handle.context, use_batch=use_batch)


def _scored(fwk: Framework, pod: PodInfo, batch: NodeBatch, *, fused: bool = True) -> object:
    """What ``run_score`` answers after PreFilter and PreScore, as plain values."""
    state = CycleState()
    infos = fwk.snapshot().node_infos
    pre = fwk.run_pre_filter(state, pod, infos)
    if pre.status is not None:
        return ("prefilter", pre.status.message)
    status = fwk.run_pre_score(state, pod, [batch.info(i) for i in range(len(batch))])
    if status is not None:
        return ("prescore", status.message)
    outcome = fwk.run_score(state, pod, batch) if fused else fwk._run_score_plugins(state, pod, batch, None)
    if isinstance(outcome, Status):
        return ("error", outcome.code, outcome.message)
    assert isinstance(outcome, ScoreOutcome)
    return (
        {name: scores.tolist() for name, scores in outcome.per_plugin.items()},
        {name: scores.tolist() for name, scores in outcome.raw.items()},
        outcome.totals.tolist(),
        str(outcome.totals.dtype),
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fused_scores_equal_the_reference_loop(data: st.DataObject) -> None:
    wild = data.draw(st.booleans(), label="wild")
    count = data.draw(st.integers(2, 8), label="nodes")
    node_objs = data.draw(nodes(count, wild))
    names = [node.metadata.name for node in node_objs]
    cache, snapshot = make_cluster(node_objs, data.draw(existing(names)))
    handle = PluginHandle(cache)
    scorers = [*SCORERS, "Wild"] if wild else list(SCORERS)
    weights = {name: data.draw(st.integers(1, 10), label=f"weight {name}") for name in scorers}
    pod = PodInfo(data.draw(pending()))
    order = data.draw(st.permutations(names))
    subset = order[: data.draw(st.integers(2, len(order)))]
    batch = batch_of(snapshot, subset)
    fused = _framework(handle, weights, use_batch=True)
    per_node = _framework(handle, weights, use_batch=False)
    answer = _scored(fused, pod, batch)
    assert answer == _scored(per_node, pod, batch)
    assert answer == _scored(fused, pod, batch, fused=False)


def test_a_score_out_of_range_is_the_reference_error() -> None:
    node_objs = [make_node("n0").label("wild", "101").obj(), make_node("n1").label("wild", "3").obj()]
    cache, snapshot = make_cluster(node_objs)
    fwk = _framework(PluginHandle(cache), {"TaintToleration": 1, "Wild": 2}, use_batch=True)
    answer = _scored(fwk, PodInfo(make_pod("p").obj()), batch_of(snapshot))
    assert answer == (
        "error",
        Code.ERROR,
        'plugin "Wild" returns an invalid score 101, it should in the range of [0, 100] after normalizing',
    )


def test_weights_are_integer_sums_of_normalized_scores() -> None:
    node_objs = [make_node("n0").taint("a", "x", "PreferNoSchedule").obj(), make_node("n1").obj()]
    cache, snapshot = make_cluster(node_objs)
    fwk = _framework(PluginHandle(cache), {"TaintToleration": 3, "ImageLocality": 1}, use_batch=True)
    answer = _scored(fwk, PodInfo(make_pod("p").obj()), batch_of(snapshot))
    assert isinstance(answer, tuple)
    per_plugin, _, totals, dtype = answer
    assert per_plugin["TaintToleration"] == [0, 100]
    assert totals == [0, 300] and dtype == "int64"
