"""Members to cluster state and super nodes: figures from the status or derived from the member's own Nodes and
Pods, the super node and its placeholder pod, and the upstream plugins running unchanged on super nodes."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubesched.clusterapi.contract import NodeBucket, PriceList
from kubesched.federation.adapter import PLACEHOLDER_PRIORITY, allocated_pod, super_node
from kubesched.federation.state import (
    StaticClusterStateSource,
    cluster_state,
    member_capacity,
    placeholder_uid,
    takes_new_pods,
)
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from kubesched.plugins.noderesources import Fit, NodeResourcesFitArgs
from kubesched.plugins.tainttoleration import TaintToleration
from kubesched.testing.builders import NodeBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import filter_nodes, normalize, pre_filter, score_nodes
from kubesched.testing.multicluster_builders import cluster_plane, make_member

GI = 2**30
CLUSTER_LABEL = "multicluster.kubesched.io/cluster"


def test_a_member_described_by_its_status_keeps_its_figures() -> None:
    member = (
        make_member("east")
        .observed("2026-03-01T12:00:00Z")
        .allocatable(cpu="64", memory="256Gi", pods="330")
        .allocated(cpu="16", memory="64Gi", pods="40")
        .nodes(3, cpu="16", memory="64Gi", pods="96")
        .apis("v1", "Pod")
        .apis("batch/v1", "Job")
        .cost(cpu="0.031", memory="0.0042")
        .obj()
    )
    state = cluster_state(member)
    assert state.name == "east" and state.ready and state.observed_at == 1772366400.0
    assert state.allocatable == {"cpu": 64000, "memory": 256 * GI, "pods": 330}
    assert state.allocated == {"cpu": 16000, "memory": 64 * GI, "pods": 40}
    assert state.nodes == (NodeBucket(3, {"cpu": 16000, "memory": 64 * GI, "pods": 96}),)
    assert state.apis == frozenset({"v1/Pod", "batch/v1/Job"})
    assert state.prices == PriceList(Decimal("0.031"), Decimal("0.0042"), {})
    assert state.accounted_pods == frozenset({placeholder_uid("east")})
    assert state.workloads == {}


def test_a_member_without_summary_or_api_list_reports_none_of_them() -> None:
    state = cluster_state(make_member("east").obj())
    assert state.nodes is None and state.apis is None and state.prices is None and state.observed_at is None


def test_a_member_described_by_its_nodes_derives_totals_buckets_and_running_workloads() -> None:
    member = make_member("south").without_figures().obj()
    nodes = [
        make_node(f"south-{i}").label(CLUSTER_LABEL, "south").allocatable(cpu="8", memory="32Gi", pods="110").obj()
        for i in (1, 2, 3)
    ]
    cordoned = make_node("south-4").label(CLUSTER_LABEL, "south").allocatable(cpu="8", memory="32Gi", pods="110")
    nodes.append(cordoned.unschedulable().obj())
    pods = [
        make_pod("web-0").namespace("shop").label("app", "web").req(cpu="1", memory="2Gi").node_name("south-1").obj(),
        make_pod("web-1").namespace("shop").label("app", "web").req(cpu="1", memory="2Gi").node_name("south-2").obj(),
        make_pod("job").namespace("shop").owner("Job", "nightly").req(cpu="3").node_name("south-1").obj(),
        make_pod("done").req(cpu="4").node_name("south-3").phase("Succeeded").obj(),  # finished: frees its share
    ]
    state = cluster_state(member, nodes, pods)
    assert state.allocatable == {"cpu": 32000, "memory": 128 * GI, "pods": 440}
    assert state.allocated == {"cpu": 5000, "memory": 4 * GI, "pods": 3}
    # south-1: 1+3 CPU used, 2 pods; south-2: 1 CPU, 1 pod; south-3 idle; south-4 cordoned: no bucket.
    assert sorted((b.count, b.free["cpu"], b.free["pods"]) for b in state.nodes or ()) == [
        (1, 4000, 108),
        (1, 7000, 109),
        (1, 8000, 110),
    ]
    assert state.workloads == {("app", "shop", "web"): 2, ("owner", "shop", "Job", "nightly"): 1}


def test_the_static_source_reports_each_states_age_at_the_snapshot_time() -> None:
    fresh = cluster_state(make_member("fresh").obj())
    old = cluster_state(make_member("old").observed("2026-03-01T11:50:00Z").obj())
    snapshot = StaticClusterStateSource([fresh, old]).snapshot(1772366400.0)  # 12:00:00Z
    assert snapshot.age("fresh") == 0.0
    assert snapshot.age("old") == 600.0
    assert snapshot.age("gone") is None


def test_the_super_node_carries_the_members_name_labels_taints_and_allocatable() -> None:
    member = (
        make_member("east")
        .region("us-east")
        .provider("aws")
        .taint("spot", "true")
        .allocatable(cpu="64", memory="256Gi", pods="330")
        .allocated(cpu="16", memory="64Gi", pods="40")
        .obj()
    )
    state = cluster_state(member)
    node = super_node(member, state)
    assert node.metadata.name == "east"
    assert node.metadata.labels == {
        "topology.kubernetes.io/region": "us-east",
        "multicluster.kubesched.io/provider": "aws",
    }
    assert [(t.key, t.value, t.effect) for t in node.taints] == [("spot", "true", "NoSchedule")]
    # 290 free pod slots, plus the one the placeholder takes.
    assert node.allocatable == {"cpu": 64000, "memory": 256 * GI, "pods": 291}
    placeholder = allocated_pod(state)
    assert placeholder is not None
    assert placeholder.spec.node_name == "east" and placeholder.metadata.uid == placeholder_uid("east")
    assert placeholder.spec.priority == PLACEHOLDER_PRIORITY
    assert PodInfo(placeholder).request.milli_cpu == 16000 and PodInfo(placeholder).request.memory == 64 * GI


def test_nothing_allocated_means_no_placeholder_and_the_allocatable_as_reported() -> None:
    member = make_member("idle").allocatable(cpu="8", pods="10").obj()
    state = cluster_state(member)
    assert allocated_pod(state) is None
    assert super_node(member, state).allocatable == {"cpu": 8000, "pods": 10}


def test_node_resources_fit_counts_the_reported_allocation_and_in_flight_pods_on_the_super_node() -> None:
    members = [
        make_member("roomy").allocatable(cpu="16", pods="10").allocated(cpu="4", pods="2").obj(),
        make_member("busy").allocatable(cpu="16", pods="10").allocated(cpu="10", pods="2").obj(),
        make_member("slots").allocatable(cpu="16", pods="3").allocated(cpu="1", pods="2").obj(),
    ]
    in_flight = make_pod("earlier").req(cpu="4").node_name("roomy").obj()
    plane = cluster_plane(members, [in_flight])
    plugin = Fit(NodeResourcesFitArgs(), plane.handle)
    state, pod = CycleState(), PodInfo(make_pod("p").req(cpu="8").obj())
    assert pre_filter(plugin, state, pod, plane.snapshot) is None
    assert filter_nodes(plugin, state, pod, plane.snapshot) == [
        None,  # 16 - 4 reported - 4 in flight = 8
        Status(Code.UNSCHEDULABLE, "Insufficient cpu"),
        None,  # one pod slot left: the placeholder took the "+1"
    ]
    second = make_pod("second").req(cpu="1").node_name("slots").obj()
    plane = cluster_plane(members, [second])
    state = CycleState()
    pre_filter(Fit(NodeResourcesFitArgs(), plane.handle), state, pod, plane.snapshot)
    statuses = filter_nodes(Fit(NodeResourcesFitArgs(), plane.handle), state, pod, plane.snapshot)
    assert statuses[2] == Status(Code.UNSCHEDULABLE, "Too many pods")


def test_taint_toleration_and_node_affinity_work_on_cluster_taints_and_labels() -> None:
    members = [
        make_member("us").region("us-east").obj(),
        make_member("eu").region("eu-west").obj(),
        make_member("spot").region("eu-west").taint("spot", "true").obj(),
    ]
    plane = cluster_plane(members)
    pod = PodInfo(make_pod("p").node_selector({"topology.kubernetes.io/region": "eu-west"}).obj())
    taints = TaintToleration(None, plane.handle)
    state = CycleState()
    assert filter_nodes(taints, state, pod, plane.snapshot) == [
        None,
        None,
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)"),
    ]
    affinity = NodeAffinity(NodeAffinityArgs(), plane.handle)
    assert pre_filter(affinity, state, pod, plane.snapshot) is None
    mismatch = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector")
    assert filter_nodes(affinity, state, pod, plane.snapshot) == [mismatch, None, None]


def test_node_affinity_picks_clusters_by_name_through_match_fields() -> None:
    plane = cluster_plane([make_member("a").obj(), make_member("b").obj()])
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
    pod = PodInfo(
        make_pod("p")
        .affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
        .obj()
    )
    affinity = NodeAffinity(NodeAffinityArgs(), plane.handle)
    state = CycleState()
    result = pre_filter(affinity, state, pod, plane.snapshot)
    assert result is not None and not isinstance(result, Status) and result.node_names == frozenset({"b"})


@pytest.mark.parametrize(
    ("tolerate", "want"),
    [
        pytest.param(False, [100, 0], id="an-untolerated-prefer-no-schedule-taint-scores-the-cluster-lower"),
        pytest.param(True, [100, 100], id="a-tolerated-one-does-not"),
    ],
)
def test_taint_toleration_scores_prefer_no_schedule_cluster_taints(tolerate: bool, want: list[int]) -> None:
    plane = cluster_plane(
        [make_member("clean").obj(), make_member("soft").taint("busy", "true", "PreferNoSchedule").obj()]
    )
    taints = TaintToleration(None, plane.handle)
    builder = make_pod("p")
    if tolerate:
        builder.toleration("busy", "Equal", "true", "PreferNoSchedule")
    state, pod = CycleState(), PodInfo(builder.obj())
    assert taints.pre_score(state, pod, plane.snapshot.node_infos) is None
    raw = score_nodes(taints, state, pod, plane.snapshot)
    assert normalize(taints, state, pod, raw) == want


def test_only_nodes_that_take_new_pods_offer_free_capacity_with_the_taints_a_pod_must_tolerate() -> None:
    """The agent binds by nodeName, past the member's scheduler: a node not Ready or cordoned must not be offered
    (it still counts in the totals); one with NoSchedule/NoExecute taints is offered in a bucket of its own that
    names them, for the pods that tolerate them."""

    def node(name: str) -> NodeBuilder:
        return make_node(name).capacity(cpu="4", memory="8Gi", pods=10)

    nodes = [
        node("ready").condition("Ready").obj(),
        node("no-conditions").obj(),  # a manifest: no kubelet reports on it
        node("not-ready").condition("Ready", "False").obj(),
        node("unknown").condition("Ready", "Unknown").obj(),
        node("cordoned").unschedulable().obj(),
        node("gpu-only").taint("nvidia.com/gpu", "true", "NoSchedule").obj(),
        node("draining").taint("node.kubernetes.io/unreachable", "", "NoExecute").obj(),
        node("prefer-not").taint("spot", "true", "PreferNoSchedule").obj(),
    ]
    offered = ["ready", "no-conditions", "gpu-only", "draining", "prefer-not"]
    assert [n.metadata.name for n in nodes if takes_new_pods(n)] == offered
    allocatable, _, buckets = member_capacity(nodes, [])
    assert allocatable["cpu"] == 8 * 4000
    by_taints = {tuple(t.key for t in bucket.taints): bucket.count for bucket in buckets}
    assert by_taints == {(): 3, ("nvidia.com/gpu",): 1, ("node.kubernetes.io/unreachable",): 1}
