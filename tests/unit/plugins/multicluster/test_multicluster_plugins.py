"""The cluster plugins on tables of member clusters (super nodes in a real cache, state from a real source):
each Filter's verdicts and reasons, each Score's raw and normalized values, and every args error."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from kubesched.api.objects import Pod, Taint, Toleration
from kubesched.clusterapi.contract import CLUSTER_SNAPSHOT_STATE_KEY, NodeBucket
from kubesched.errors import FieldError, ValidationFailed
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.multicluster import (
    ClusterAPIEnablement,
    ClusterAPIEnablementArgs,
    ClusterBalance,
    ClusterBalanceArgs,
    ClusterCapacity,
    ClusterCapacityArgs,
    ClusterCost,
    ClusterCostArgs,
    ClusterLocality,
    ClusterLocalityArgs,
    ClusterReadiness,
    ClusterReadinessArgs,
)
from kubesched.plugins.multicluster.args import ResourceWeight
from kubesched.plugins.multicluster.capacity import general_estimate, overlay
from kubesched.plugins.multicluster.cost import hourly_price
from kubesched.testing.builders import PodBuilder, make_pod
from kubesched.testing.framework_helpers import filter_nodes, normalize, score_nodes
from kubesched.testing.multicluster_builders import (
    ClusterPlaneFixture,
    MemberClusterBuilder,
    cluster_plane,
    make_member,
)

NOON = 1772366400.0  # 2026-03-01T12:00:00Z
GI = 2**30


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, *reasons)


def plane(
    members: Sequence[MemberClusterBuilder], hub_pods: Sequence[PodBuilder] = (), **kwargs: Any
) -> ClusterPlaneFixture:
    return cluster_plane([m.obj() for m in members], [p.obj() for p in hub_pods], now=NOON, **kwargs)


def run_filter(plugin: Any, fixture: ClusterPlaneFixture, pod: PodBuilder) -> tuple[Status | None, list[Status | None]]:
    """PreFilter, then Filter on every cluster (snapshot order)."""
    state, info = CycleState(), PodInfo(pod.obj())
    pre = plugin.pre_filter(state, info, fixture.snapshot.node_infos)
    if isinstance(pre, Status):
        return pre, []
    return None, filter_nodes(plugin, state, info, fixture.snapshot)


def run_score(plugin: Any, fixture: ClusterPlaneFixture, pod: PodBuilder) -> tuple[list[int], list[int]]:
    """PreScore, Score on every cluster, NormalizeScore if the plugin has one: (raw, normalized)."""
    state, info = CycleState(), PodInfo(pod.obj())
    assert plugin.pre_score(state, info, fixture.snapshot.node_infos) is None
    raw = score_nodes(plugin, state, info, fixture.snapshot)
    return raw, normalize(plugin, state, info, raw) if hasattr(plugin, "normalize_score") else raw


# ---- ClusterReadiness ---------------------------------------------------------------------------

NOT_READY = unresolvable("cluster(s) were not ready")
STALE = unresolvable("cluster(s) had stale state")
UNKNOWN = unresolvable("cluster(s) had no reported state")


@pytest.mark.parametrize(
    ("member", "want"),
    [
        pytest.param(make_member("m"), None, id="ready-and-reporting-continuously"),
        pytest.param(make_member("m").observed("2026-03-01T11:59:00Z"), None, id="ready-observed-a-minute-ago"),
        pytest.param(make_member("m").observed("2026-03-01T11:55:00Z"), None, id="exactly-at-the-limit-is-fresh"),
        pytest.param(make_member("m").observed("2026-03-01T11:54:59Z"), STALE, id="one-second-past-the-limit"),
        pytest.param(make_member("m").ready(False), NOT_READY, id="not-ready"),
        pytest.param(make_member("m").condition("Unknown", "LeaseLost"), NOT_READY, id="ready-condition-unknown"),
        pytest.param(make_member("m").ready(False).observed("2026-03-01T10:00:00Z"), NOT_READY, id="not-ready-wins"),
    ],
)
def test_readiness_filters_clusters_not_ready_or_stale(member: MemberClusterBuilder, want: Status | None) -> None:
    fixture = plane([member])
    plugin = ClusterReadiness(ClusterReadinessArgs(max_staleness_seconds=300), fixture.handle)
    assert run_filter(plugin, fixture, make_pod("p")) == (None, [want])


def test_readiness_rejects_a_super_node_the_source_does_not_know() -> None:
    fixture = plane([make_member("known"), make_member("gone")], unknown=["gone"])
    plugin = ClusterReadiness(None, fixture.handle)
    assert run_filter(plugin, fixture, make_pod("p")) == (None, [None, UNKNOWN])


def test_readiness_under_penalize_keeps_stale_clusters_feasible_and_scores_them_zero() -> None:
    fixture = plane([make_member("fresh"), make_member("stale").observed("2026-03-01T11:00:00Z")])
    plugin = ClusterReadiness(ClusterReadinessArgs(stale_policy="Penalize"), fixture.handle)
    assert run_filter(plugin, fixture, make_pod("p")) == (None, [None, None])
    assert run_score(plugin, fixture, make_pod("p")) == ([100, 0], [100, 0])


def test_readiness_under_reject_skips_its_score() -> None:
    fixture = plane([make_member("m")])
    plugin = ClusterReadiness(None, fixture.handle)
    status = plugin.pre_score(CycleState(), PodInfo(make_pod("p").obj()), fixture.snapshot.node_infos)
    assert status is not None and status.code is Code.SKIP


def test_one_snapshot_serves_the_whole_cycle() -> None:
    fixture = plane([make_member("m")])
    state, pod = CycleState(), PodInfo(make_pod("p").obj())
    ClusterReadiness(None, fixture.handle).pre_filter(state, pod, fixture.snapshot.node_infos)
    first = state.read(CLUSTER_SNAPSHOT_STATE_KEY)
    ClusterCapacity(None, fixture.handle).pre_filter(state, pod, fixture.snapshot.node_infos)
    assert state.read(CLUSTER_SNAPSHOT_STATE_KEY) is first


def test_filter_without_its_pre_filter_fails_the_cycle_rather_than_fetching() -> None:
    fixture = plane([make_member("m")])
    plugin = ClusterReadiness(None, fixture.handle)
    with pytest.raises(RuntimeError, match="no cluster snapshot in the cycle state"):
        plugin.filter(CycleState(), PodInfo(make_pod("p").obj()), fixture.snapshot.node_infos[0])


# ---- ClusterAPIEnablement -----------------------------------------------------------------------


def core() -> MemberClusterBuilder:
    return make_member("core").apis("v1", "Pod")


def full() -> MemberClusterBuilder:
    return make_member("full").apis("v1", "Pod").apis("batch/v1", "Job").apis("ray.io/v1", "RayCluster")


RAY = "multicluster.kubesched.io/required-apis"


@pytest.mark.parametrize(
    ("pod", "args", "want"),
    [
        pytest.param(make_pod("p"), None, [None, None, None], id="a-bare-pod-needs-v1-pod"),
        pytest.param(
            make_pod("p").annotation(RAY, "ray.io/v1/RayCluster"),
            None,
            [unresolvable("cluster(s) did not serve ray.io/v1/RayCluster"), None, None],
            id="the-annotation-names-a-crd",
        ),
        pytest.param(
            make_pod("p").annotation(RAY, " ray.io/v1/RayCluster , batch/v1/Job,"),
            None,
            [unresolvable("cluster(s) did not serve batch/v1/Job"), None, None],
            id="several-apis-the-first-missing-in-sorted-order",
        ),
        pytest.param(
            make_pod("p").owner("ReplicaSet", "web-abc"),
            None,
            [
                unresolvable("cluster(s) did not serve apps/v1/ReplicaSet"),
                unresolvable("cluster(s) did not serve apps/v1/ReplicaSet"),
                None,
            ],
            id="the-controller-kind-must-be-served",
        ),
        pytest.param(
            make_pod("p").owner("ReplicaSet", "web-abc"),
            ClusterAPIEnablementArgs(include_owner_kind=False),
            [None, None, None],
            id="unless-include-owner-kind-is-off",
        ),
        pytest.param(
            make_pod("p"),
            ClusterAPIEnablementArgs(unreported_policy="Reject"),
            [None, None, unresolvable("cluster(s) did not report their served APIs")],
            id="a-cluster-reporting-no-api-list-rejected-under-reject",
        ),
    ],
)
def test_api_enablement_filters_clusters_not_serving_the_workloads_apis(
    pod: PodBuilder, args: ClusterAPIEnablementArgs | None, want: list[Status | None]
) -> None:
    fixture = plane([core(), full(), make_member("unreported")])
    assert run_filter(ClusterAPIEnablement(args, fixture.handle), fixture, pod) == (None, want)


def test_api_enablement_needs_v1_pod_even_from_a_cluster_listing_other_kinds() -> None:
    fixture = plane([make_member("jobs-only").apis("batch/v1", "Job")])
    got = run_filter(ClusterAPIEnablement(None, fixture.handle), fixture, make_pod("p"))
    assert got == (None, [unresolvable("cluster(s) did not serve v1/Pod")])


@pytest.mark.parametrize(
    ("annotation", "detail"),
    [
        pytest.param("RayCluster", '"RayCluster" is not group/version/Kind or version/Kind', id="kind-alone"),
        pytest.param(
            "ray.io/v1/rayclusters",
            '"ray.io/v1/rayclusters": a kind starts with an upper-case letter',
            id="resource-name",
        ),
        pytest.param("a/b/c/D", '"a/b/c/D" is not group/version/Kind or version/Kind', id="too-many-parts"),
        pytest.param(
            "ray.io//RayCluster", '"ray.io//RayCluster" is not group/version/Kind or version/Kind', id="empty-part"
        ),
    ],
)
def test_a_malformed_required_apis_annotation_rejects_the_pod_at_pre_filter(annotation: str, detail: str) -> None:
    fixture = plane([core()])
    status, _ = run_filter(
        ClusterAPIEnablement(None, fixture.handle), fixture, make_pod("p").annotation(RAY, annotation)
    )
    assert status == unresolvable(f"pod annotation {RAY} is malformed: {detail}")


# ---- ClusterCapacity ----------------------------------------------------------------------------


def no_node_with(resource: str) -> str:
    return f"cluster(s) had no node with enough free {resource}"


@pytest.mark.parametrize(
    ("members", "hub_pods", "pod", "want"),
    [
        pytest.param(
            [
                make_member("big").allocatable(cpu="64", pods="330").nodes(3, cpu="16", pods="100"),
                make_member("wide").allocatable(cpu="200", pods="5500").nodes(50, cpu="2", pods="100"),
            ],
            [],
            make_pod("p").req(cpu="8"),
            [None, unschedulable(no_node_with("cpu"))],
            id="100-free-cpus-at-2-per-node-do-not-take-an-8-cpu-pod",
        ),
        pytest.param(
            [
                make_member("split")
                .allocatable(cpu="16", memory="64Gi")
                .nodes(1, cpu="8", memory="1Gi")
                .nodes(1, cpu="1", memory="16Gi")
            ],
            [],
            make_pod("p").req(cpu="4", memory="8Gi"),
            [unschedulable("cluster(s) had no node that fits the pod")],
            id="each-resource-is-somewhere-but-never-together",
        ),
        pytest.param(
            [make_member("full").allocatable(cpu="16", pods="20").nodes(2, cpu="8", pods="0")],
            [],
            make_pod("p").req(cpu="1"),
            [unschedulable("cluster(s) had no node with a free pod slot")],
            id="no-free-pod-slot",
        ),
        pytest.param(
            [make_member("one").allocatable(cpu="16", pods="20").nodes(1, cpu="8").nodes(1, cpu="4")],
            [make_pod("earlier").req(cpu="6").node_name("one")],
            make_pod("p").req(cpu="4"),
            [None],
            id="in-flight-pod-takes-the-first-node-that-fits-leaving-the-second",
        ),
        pytest.param(
            [make_member("one").allocatable(cpu="16", pods="20").nodes(1, cpu="8").nodes(1, cpu="4")],
            [make_pod("a").req(cpu="6").node_name("one"), make_pod("b").req(cpu="3").node_name("one")],
            make_pod("p").req(cpu="4"),
            [unschedulable(no_node_with("cpu"))],
            id="in-flight-pods-fill-both-nodes",
        ),
        pytest.param(
            [make_member("small").allocatable(cpu="16", pods="20").nodes(4, cpu="4")],
            [],
            make_pod("p").req(cpu="32"),
            [unresolvable(no_node_with("cpu"))],
            id="more-than-the-whole-cluster-is-unresolvable",
        ),
        pytest.param(
            [
                make_member("gpu")
                .allocatable({"nvidia.com/gpu": 8}, cpu="16", pods="20")
                .nodes(2, {"nvidia.com/gpu": 4}, cpu="8")
            ],
            [],
            make_pod("p").req({"nvidia.com/gpu": 2}, cpu="1"),
            [None],
            id="extended-resources-fit-per-node",
        ),
        pytest.param(
            [make_member("nogpu").allocatable(cpu="16", pods="20").nodes(2, cpu="8")],
            [],
            make_pod("p").req({"nvidia.com/gpu": 1}),
            [unresolvable(no_node_with("nvidia.com/gpu"))],
            id="a-resource-no-node-has",
        ),
        pytest.param(
            [
                make_member("gpus")
                .allocatable({"nvidia.com/gpu": 8}, cpu="16", pods="20")
                .nodes(2, {"nvidia.com/gpu": 4}, cpu="8")
                .tainted("nvidia.com/gpu", "true", "NoSchedule")
            ],
            [],
            make_pod("p").req({"nvidia.com/gpu": 1}),
            [unresolvable("cluster(s) had untolerated taints on every node")],
            id="only-nodes-whose-taints-the-pod-does-not-tolerate",
        ),
        pytest.param(
            [
                make_member("gpus")
                .allocatable({"nvidia.com/gpu": 8}, cpu="16", pods="20")
                .nodes(2, {"nvidia.com/gpu": 4}, cpu="8")
                .tainted("nvidia.com/gpu", "true", "NoSchedule")
            ],
            [],
            make_pod("p").req({"nvidia.com/gpu": 1}).toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),
            [None],
            id="a-pod-that-tolerates-the-taints",
        ),
        pytest.param(
            [
                make_member("mixed")
                .allocatable({"nvidia.com/gpu": 8}, cpu="24", pods="20")
                .nodes(2, {"nvidia.com/gpu": 4}, cpu="8")
                .tainted("nvidia.com/gpu", "true", "NoSchedule")
                .nodes(1, cpu="8")
            ],
            [],
            make_pod("p").req({"nvidia.com/gpu": 1}),
            [unschedulable(no_node_with("nvidia.com/gpu"))],
            id="tainted-nodes-are-not-there-for-a-pod-that-does-not-tolerate-them",
        ),
    ],
)
def test_capacity_fits_the_pod_on_one_node(
    members: list[MemberClusterBuilder], hub_pods: list[PodBuilder], pod: PodBuilder, want: list[Status | None]
) -> None:
    fixture = plane(members, hub_pods)
    assert run_filter(ClusterCapacity(None, fixture.handle), fixture, pod) == (None, want)


@pytest.mark.parametrize(
    ("member", "hub_pods", "pod", "want"),
    [
        pytest.param(
            make_member("m").allocatable(cpu="16", pods="10").allocated(cpu="10", pods="2"),
            [make_pod("earlier").req(cpu="2").node_name("m")],
            make_pod("p").req(cpu="4"),
            None,
            id="allocatable-minus-allocated-minus-allocating-is-just-enough",
        ),
        pytest.param(
            make_member("m").allocatable(cpu="16", pods="10").allocated(cpu="10", pods="2"),
            [make_pod("earlier").req(cpu="2").node_name("m")],
            make_pod("p").req(cpu="5"),
            unschedulable("Insufficient cpu"),
            id="one-millicore-short-is-insufficient",
        ),
        pytest.param(
            make_member("m").allocatable(cpu="16", memory="8Gi", pods="3").allocated(pods="3"),
            [],
            make_pod("p").req(cpu="1", memory="16Gi"),
            unresolvable("Too many pods", "Insufficient memory"),
            id="every-reason-and-unresolvable-beyond-the-whole-cluster",
        ),
        pytest.param(
            make_member("m").allocatable(cpu="16"),
            [],
            make_pod("p").req(cpu="1"),
            unschedulable("Too many pods"),
            id="no-pods-in-allocatable-admits-none",
        ),
    ],
)
def test_capacity_without_node_figures_uses_karmadas_general_estimate(
    member: MemberClusterBuilder, hub_pods: list[PodBuilder], pod: PodBuilder, want: Status | None
) -> None:
    fixture = plane([member], hub_pods)
    assert run_filter(ClusterCapacity(None, fixture.handle), fixture, pod) == (None, [want])


def test_capacity_with_node_level_fit_off_ignores_the_node_summary() -> None:
    fixture = plane([make_member("wide").allocatable(cpu="200", pods="5500").nodes(50, cpu="2", pods="100")])
    plugin = ClusterCapacity(ClusterCapacityArgs(node_level_fit=False), fixture.handle)
    assert run_filter(plugin, fixture, make_pod("p").req(cpu="8")) == (None, [None])


def test_capacity_leaves_ignored_extended_resources_out() -> None:
    fixture = plane([make_member("m").allocatable(cpu="16", pods="10")])
    plugin = ClusterCapacity(ClusterCapacityArgs(ignored_resources=("example.com/license",)), fixture.handle)
    assert run_filter(plugin, fixture, make_pod("p").req({"example.com/license": 1})) == (None, [None])


def test_the_overlay_is_recomputed_after_a_bind_to_the_cluster() -> None:
    members = [make_member("one").allocatable(cpu="8", pods="10").nodes(1, cpu="8")]
    fixture = plane(members)
    plugin = ClusterCapacity(None, fixture.handle)
    pod = make_pod("p").req(cpu="6")
    assert run_filter(plugin, fixture, pod) == (None, [None])
    fixture.handle.cache.add_pod(make_pod("bound").req(cpu="6").node_name("one").obj())
    fixture.snapshot = fixture.handle.cache.snapshot()
    assert run_filter(plugin, fixture, pod) == (None, [unschedulable(no_node_with("cpu"))])


@pytest.mark.parametrize(
    ("allocatable", "allocated", "allocating", "wanted", "replicas"),
    [
        pytest.param({"cpu": 16000, "pods": 110}, {}, {}, {"cpu": 4000}, 4, id="cpu-bound"),
        pytest.param({"cpu": 16000, "pods": 3}, {}, {}, {"cpu": 1000}, 3, id="pod-bound"),
        pytest.param(
            {"cpu": 16000, "pods": 110},
            {"cpu": 8000, "pods": 1},
            {"cpu": 4000},
            {"cpu": 3000},
            1,
            id="minus-allocated-and-allocating",
        ),
        pytest.param(
            {"cpu": 16000, "pods": 110}, {}, {}, {"nvidia.com/gpu": 1}, 0, id="unreported-resource-allows-none"
        ),
        pytest.param({"cpu": 4000, "pods": 110}, {"cpu": 5000}, {}, {"cpu": 1}, 0, id="overcommitted-allows-none"),
        pytest.param(
            {"cpu": 16000, "memory": 8 * GI, "pods": 110},
            {},
            {},
            {"cpu": 1000, "memory": 3 * GI},
            2,
            id="the-scarcest-wins",
        ),
    ],
)
def test_general_estimate_is_karmadas_formula(
    allocatable: dict[str, int],
    allocated: dict[str, int],
    allocating: dict[str, int],
    wanted: dict[str, int],
    replicas: int,
) -> None:
    assert general_estimate(allocatable, allocated, allocating, wanted) == replicas


def test_overlay_places_in_flight_pods_first_fit_and_skips_one_that_fits_nowhere() -> None:
    buckets = overlay(
        [NodeBucket(2, {"cpu": 4000, "pods": 10}), NodeBucket(1, {"cpu": 8000})],
        [((("cpu", 3000),), ()), ((("cpu", 6000),), ()), ((("cpu", 9000),), ())],
    )
    assert sorted((count, free["cpu"]) for count, free, _ in buckets) == [(1, 1000), (1, 2000), (1, 4000)]
    assert [free.get("pods") for count, free, _ in buckets if free["cpu"] == 1000] == [9]


def test_overlay_places_an_in_flight_pod_on_tainted_nodes_only_when_it_tolerates_their_taints() -> None:
    gpu = Taint("nvidia.com/gpu", "true", "NoSchedule")
    tolerating = (Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)
    nodes = [NodeBucket(1, {"cpu": 8000}, (gpu,)), NodeBucket(1, {"cpu": 2000})]
    untolerated = overlay(nodes, [((("cpu", 1000),), ())])
    assert [(free["cpu"], taints) for _, free, taints in untolerated] == [(8000, (gpu,)), (1000, ())]
    tolerated = overlay(nodes, [((("cpu", 1000),), tolerating)])
    assert [(free["cpu"], taints) for _, free, taints in tolerated] == [(7000, (gpu,)), (2000, ())]


# ---- ClusterBalance -----------------------------------------------------------------------------


def test_balance_prefers_the_largest_free_share_relative_to_the_freest() -> None:
    fixture = plane(
        [
            make_member("half").allocatable(cpu="16", memory="64Gi", pods="10").allocated(cpu="8", memory="32Gi"),
            make_member("quarter").allocatable(cpu="16", memory="64Gi", pods="10").allocated(cpu="4", memory="16Gi"),
            make_member("busy-hub").allocatable(cpu="16", memory="64Gi", pods="10"),
        ],
        [make_pod("earlier").req(cpu="12", memory="48Gi").node_name("busy-hub")],
    )
    raw, normalized = run_score(ClusterBalance(None, fixture.handle), fixture, make_pod("p").req(cpu="0", memory="0"))
    # The pod's cpu and memory count as 100m and 200Mi when it names none (here: explicit 0 counts as 0).
    assert raw == [50, 75, 25]
    assert normalized == [66, 100, 33]


def test_balance_weighs_only_the_configured_resources() -> None:
    fixture = plane(
        [
            make_member("cpu-free").allocatable(cpu="16", memory="64Gi", pods="10").allocated(memory="48Gi"),
            make_member("mem-free").allocatable(cpu="16", memory="64Gi", pods="10").allocated(cpu="12"),
        ]
    )
    plugin = ClusterBalance(ClusterBalanceArgs(resources=(ResourceWeight(name="cpu", weight=1),)), fixture.handle)
    pod = make_pod("p").req(cpu="0", memory="0")
    assert run_score(plugin, fixture, pod) == ([100, 25], [100, 25])


# ---- ClusterCost --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "args", "raw", "normalized"),
    [
        pytest.param(
            [
                make_member("cheap").cost(cpu="0.02", memory="0.002"),
                make_member("mid").cost(cpu="0.03", memory="0.003"),
                make_member("dear").cost(cpu="0.04", memory="0.004"),
            ],
            None,
            [24000, 36000, 48000],  # 1 core + 2 GiB, in millionths per hour
            [100, 50, 0],
            id="cheapest-100-dearest-0-linear-between",
        ),
        pytest.param(
            [make_member("a").cost(cpu="0.03"), make_member("b").cost(cpu="0.03")],
            None,
            [30000, 30000],
            [100, 100],
            id="equal-prices-all-100",
        ),
        pytest.param(
            [make_member("priced").cost(cpu="0.03"), make_member("unpriced")],
            ClusterCostArgs(missing_cost_score=40),
            [30000, -1],
            [100, 40],
            id="a-cluster-without-prices-gets-missing-cost-score",
        ),
    ],
)
def test_cost_scores_cheaper_clusters_higher(
    members: list[MemberClusterBuilder], args: ClusterCostArgs | None, raw: list[int], normalized: list[int]
) -> None:
    fixture = plane(members)
    assert run_score(ClusterCost(args, fixture.handle), fixture, make_pod("p").req(cpu="1", memory="2Gi")) == (
        raw,
        normalized,
    )


def test_cost_counts_extended_resources_and_scoring_defaults_for_cpu_and_memory() -> None:
    member = make_member("m").cost(cpu="0.04", memory="0.004", **{"nvidia.com/gpu": "2.5"}).obj()
    prices = cluster_plane([member]).states["m"].prices
    assert prices is not None
    bare = PodInfo(make_pod("p").obj())  # counts as 100m and 200Mi
    assert hourly_price(bare, prices) == Decimal("0.004") + Decimal(200) / Decimal(1024) * Decimal("0.004")
    gpu = PodInfo(make_pod("g").req({"nvidia.com/gpu": 2}, cpu="1", memory="1Gi").obj())
    assert hourly_price(gpu, prices) == Decimal("0.04") + Decimal("0.004") + Decimal("5.0")


# ---- ClusterLocality ----------------------------------------------------------------------------


def web(name: str, *, owner: str = "") -> PodBuilder:
    builder = make_pod(name).namespace("shop").label("app", "web")
    return builder.owner("ReplicaSet", owner) if owner else builder


def running(*pods: PodBuilder) -> list[Pod]:
    return [p.obj() for p in pods]


@pytest.mark.parametrize(
    ("member_pods", "hub_pods", "pod", "args", "raw", "normalized"),
    [
        pytest.param(
            {"a": running(web("w0"), web("w1")), "b": running(web("w2"))},
            [],
            web("new"),
            None,
            [2, 1, 0],
            [100, 50, 0],
            id="the-more-pods-of-the-app-the-higher",
        ),
        pytest.param(
            {},
            [web("placed", owner="web-abc").node_name("c")],
            web("new", owner="web-abc"),
            None,
            [0, 0, 1],
            [0, 0, 100],
            id="hub-pods-in-flight-count-too",
        ),
        pytest.param(
            {"a": running(make_pod("x").namespace("shop").owner("ReplicaSet", "web-abc"))},
            [],
            web("new", owner="web-abc"),
            ClusterLocalityArgs(match_by=("app",)),
            [0, 0, 0],
            [0, 0, 0],
            id="match-by-app-ignores-the-owner",
        ),
        pytest.param(
            {"a": running(web("w0").namespace("other"))},
            [],
            web("new"),
            None,
            [0, 0, 0],
            [0, 0, 0],
            id="another-namespace-is-another-workload",
        ),
    ],
)
def test_locality_prefers_where_the_workload_already_runs(
    member_pods: dict[str, list[Pod]],
    hub_pods: list[PodBuilder],
    pod: PodBuilder,
    args: ClusterLocalityArgs | None,
    raw: list[int],
    normalized: list[int],
) -> None:
    fixture = plane([make_member("a"), make_member("b"), make_member("c")], hub_pods, member_pods=member_pods)
    assert run_score(ClusterLocality(args, fixture.handle), fixture, pod) == (raw, normalized)


def test_locality_skips_a_pod_with_no_workload() -> None:
    fixture = plane([make_member("a")])
    status = ClusterLocality(None, fixture.handle).pre_score(
        CycleState(), PodInfo(make_pod("p").obj()), fixture.snapshot.node_infos
    )
    assert status is not None and status.code is Code.SKIP


# ---- args ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        pytest.param(
            ClusterReadinessArgs(max_staleness_seconds=0),
            [FieldError.invalid("maxStalenessSeconds", 0, "must be a finite number of seconds > 0")],
            id="readiness-zero-staleness",
        ),
        pytest.param(
            ClusterReadinessArgs(max_staleness_seconds=float("inf"), stale_policy="Ignore"),
            [
                FieldError.invalid("maxStalenessSeconds", float("inf"), "must be a finite number of seconds > 0"),
                FieldError.unsupported("stalePolicy", "Ignore", ("Penalize", "Reject")),
            ],
            id="readiness-every-error",
        ),
        pytest.param(
            ClusterAPIEnablementArgs(unreported_policy="Deny"),
            [FieldError.unsupported("unreportedPolicy", "Deny", ("Allow", "Reject"))],
            id="api-enablement-policy",
        ),
        pytest.param(
            ClusterCapacityArgs(ignored_resources=("cpu", "")),
            [
                FieldError.invalid("ignoredResources[0]", "cpu", "must name an extended resource"),
                FieldError.invalid("ignoredResources[1]", "", "must name an extended resource"),
            ],
            id="capacity-ignores-only-extended-resources",
        ),
        pytest.param(
            ClusterBalanceArgs(
                resources=(ResourceWeight(name="cpu", weight=101), ResourceWeight(name="cpu"), ResourceWeight())
            ),
            [
                FieldError.invalid("resources[0].weight", 101, "must be in the range [1, 100]"),
                FieldError.duplicate("resources[1].name", "cpu"),
                FieldError.required("resources[2].name"),
            ],
            id="balance-resources",
        ),
        pytest.param(
            ClusterCostArgs(missing_cost_score=101),
            [FieldError.invalid("missingCostScore", 101, "must be between 0 and 100")],
            id="cost-missing-score-range",
        ),
        pytest.param(
            ClusterLocalityArgs(match_by=("owner", "label")),
            [FieldError.unsupported("matchBy[1]", "label", ("app", "owner"))],
            id="locality-match-kind",
        ),
        pytest.param(
            ClusterLocalityArgs(match_by=()),
            [FieldError.required("matchBy", "at least one of owner, app")],
            id="locality-nothing-to-match",
        ),
    ],
)
def test_args_report_every_error_with_its_field_path(args: Any, errors: list[FieldError]) -> None:
    assert [str(e) for e in args.validate("")] == [str(e) for e in errors]


@pytest.mark.parametrize(
    "plugin",
    [ClusterReadiness, ClusterAPIEnablement, ClusterCapacity, ClusterBalance, ClusterCost, ClusterLocality],
)
def test_defaults_are_valid_and_the_factory_validates_again(plugin: Any) -> None:
    fixture = plane([make_member("m")])
    plugin(None, fixture.handle)  # defaults
    bad = {
        ClusterReadiness: ClusterReadinessArgs(stale_policy="x"),
        ClusterAPIEnablement: ClusterAPIEnablementArgs(unreported_policy="x"),
        ClusterCapacity: ClusterCapacityArgs(ignored_resources=("cpu",)),
        ClusterBalance: ClusterBalanceArgs(resources=(ResourceWeight(name="cpu", weight=500),)),
        ClusterCost: ClusterCostArgs(missing_cost_score=-1),
        ClusterLocality: ClusterLocalityArgs(match_by=()),
    }[plugin]
    with pytest.raises(ValidationFailed):
        plugin(bad, fixture.handle)


def test_balance_defaults_to_cpu_and_memory_weight_one() -> None:
    assert ClusterBalanceArgs().resources == (
        ResourceWeight(name="cpu", weight=1),
        ResourceWeight(name="memory", weight=1),
    )
    assert ClusterBalanceArgs(resources=(ResourceWeight(name="gpu"),)).resources == (
        ResourceWeight(name="gpu", weight=1),
    )
