"""The bench harness runs workloads to completion; speed itself is never asserted here."""

from __future__ import annotations

import gc
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubesched.bench
from kubesched.api.objects import Node, Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.checks import check_placements
from kubesched.bench.runner import BenchResult, run_workload
from kubesched.bench.workload import WorkloadError, load_workload, parse_workload
from kubesched.cli.main import main
from kubesched.clock import VirtualClock

WORKLOADS = Path(kubesched.bench.__file__).parent / "workloads"  # bundled as package data
SMALL = WORKLOADS / "scheduling-basic-small.yaml"


@pytest.mark.parametrize("use_batch", [pytest.param(True, id="batch"), pytest.param(False, id="per-node")])
def test_small_workload_schedules_every_measured_pod(use_batch: bool) -> None:
    result = run_workload(load_workload(SMALL), use_batch=use_batch)
    assert result.nodes == 100
    assert result.measured_pods == 300
    assert result.scheduled == 300
    assert result.throughput > 0 and result.p99_ms >= result.p50_ms > 0
    assert gc.get_freeze_count() == 0  # frozen for the measured op, thawed with the workload


def test_bench_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "SchedulingBasicSmall", "--workload-dir", str(SMALL.parent), "--output", "json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert "CPUs" in document["machine"]
    [result] = document["results"]
    assert result["workload"] == "SchedulingBasicSmall" and result["scheduled"] == 300


def test_shipped_performance_workload_parses() -> None:
    workload = load_workload(WORKLOADS / "scheduling-basic.yaml")
    assert workload.name == "SchedulingBasic"
    assert [(op.opcode, op.count, op.collect_metrics) for op in workload.ops] == [
        ("createNodes", 5000, False),
        ("createPods", 1000, False),
        ("createPods", 10000, True),
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param({"ops": []}, "name: Required value", id="no-name"),
        pytest.param(
            {"name": "x", "ops": [{"opcode": "explode"}]}, "ops[0].opcode: Unsupported value", id="bad-opcode"
        ),
        pytest.param(
            {"name": "x", "nodeTemplate": {}, "ops": [{"opcode": "createNodes", "count": "$missing"}]},
            "unknown param '$missing'",
            id="unknown-param",
        ),
        pytest.param({"name": "x", "ops": [{"opcode": "createPods", "count": 1}]}, "no podTemplate", id="no-template"),
    ],
)
def test_bad_workloads_are_named_errors(document: dict[str, object], message: str) -> None:
    with pytest.raises(WorkloadError, match=r"w\.yaml") as exc:
        parse_workload(document, "w.yaml")
    assert message in str(exc.value)


def test_unknown_workload_name_lists_known(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "Nope", "--workload-dir", str(SMALL.parent)]) == 1
    assert "SchedulingBasicSmall" in capsys.readouterr().err


# ---- scheduler_perf shapes: the shipped workloads at small sizes; placements checked, never speed ----------

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _run_small(file: str, **params: int) -> tuple[BenchResult, SimulatedCluster]:
    """Run a shipped workload with smaller params; returns its result and the final simulated cluster."""
    captured: list[SimulatedCluster] = []
    result = run_workload(load_workload(WORKLOADS / file, params), inspect=captured.append)
    [cluster] = captured
    return result, cluster


def _node_of(cluster: SimulatedCluster, pod: Pod) -> Node:
    return cluster.nodes[pod.spec.node_name]


def _pods(cluster: SimulatedCluster, prefix: str) -> list[Pod]:
    return [pod for pod in cluster.pods.values() if pod.name.startswith(prefix)]


@pytest.mark.parametrize(
    ("file", "name", "sizes"),
    [
        pytest.param("topology-spreading.yaml", "TopologySpreading", (5000, 5000, 5000), id="topology-spreading"),
        pytest.param(
            "preferred-topology-spreading.yaml",
            "PreferredTopologySpreading",
            (5000, 5000, 5000),
            id="preferred-topology-spreading",
        ),
        pytest.param(
            "scheduling-pod-anti-affinity.yaml", "SchedulingPodAntiAffinity", (5000, 1000, 2000), id="anti-affinity"
        ),
        pytest.param("scheduling-pod-affinity.yaml", "SchedulingPodAffinity", (5000, 5000, 5000), id="affinity"),
        pytest.param(
            "scheduling-preferred-pod-anti-affinity.yaml",
            "SchedulingPreferredPodAntiAffinity",
            (5000, 5000, 5000),
            id="preferred-anti-affinity",
        ),
        pytest.param(
            "scheduling-node-affinity.yaml", "SchedulingNodeAffinity", (5000, 5000, 10000), id="node-affinity"
        ),
        pytest.param("mixed-scheduling-base-pod.yaml", "MixedSchedulingBasePod", (5000, 2000, 5000), id="mixed"),
        pytest.param("preemption-basic.yaml", "PreemptionBasic", (1000, 4000, 1000), id="preemption"),
        pytest.param("unschedulable.yaml", "Unschedulable", (5000, 100, 10000), id="unschedulable"),
    ],
)
def test_shipped_scheduler_perf_workloads_have_upstream_sizes(file: str, name: str, sizes: tuple[int, ...]) -> None:
    workload = load_workload(WORKLOADS / file)
    assert workload.name == name
    counts = [op.count for op in workload.ops if op.opcode != "churn"]
    assert (counts[0], counts[1], counts[-1]) == sizes
    assert [op.collect_metrics for op in workload.ops][-1] is True


def test_daemonset_workload_has_upstream_sizes() -> None:
    workload = load_workload(WORKLOADS / "scheduling-daemonset.yaml")
    assert [(op.opcode, op.count) for op in workload.ops] == [
        ("createNodes", 1),
        ("createNodes", 15000),
        ("createPods", 30000),
    ]


def test_topology_spreading_keeps_the_zone_skew_within_max_skew() -> None:
    result, cluster = _run_small("topology-spreading.yaml", initNodes=30, initPods=30, measurePods=240)
    assert (result.nodes, result.measured_pods, result.scheduled, result.violations) == (30, 240, 240, [])
    zones = Counter(_node_of(cluster, pod).metadata.labels[ZONE] for pod in _pods(cluster, "spreading-pod-"))
    assert set(zones) == {"moon-1", "moon-2", "moon-3"}
    assert max(zones.values()) - min(zones.values()) <= 5


def test_preferred_topology_spreading_binds_every_pod_in_every_zone() -> None:
    result, cluster = _run_small("preferred-topology-spreading.yaml", initNodes=30, initPods=30, measurePods=240)
    assert (result.scheduled, result.violations) == (240, [])
    zones = Counter(_node_of(cluster, pod).metadata.labels[ZONE] for pod in _pods(cluster, "spreading-pod-"))
    assert set(zones) == {"moon-1", "moon-2", "moon-3"}


def test_required_anti_affinity_puts_at_most_one_pod_per_node() -> None:
    result, cluster = _run_small("scheduling-pod-anti-affinity.yaml", initNodes=60, initPods=20, measurePods=40)
    assert (result.scheduled, result.pending, result.violations) == (40, 0, [])
    hosts = Counter(_node_of(cluster, pod).metadata.labels[HOSTNAME] for pod in cluster.pods.values())
    assert len(hosts) == 60 and set(hosts.values()) == {1}


def test_required_anti_affinity_leaves_the_pods_beyond_the_nodes_pending() -> None:
    result, _ = _run_small("scheduling-pod-anti-affinity.yaml", initNodes=10, initPods=5, measurePods=8)
    assert (result.scheduled, result.pending) == (5, 3)
    assert result.violations == ["3 pod(s) in namespace sched-1 were not bound"]


def test_required_affinity_binds_every_pod_in_the_one_zone() -> None:
    result, cluster = _run_small("scheduling-pod-affinity.yaml", initNodes=20, initPods=20, measurePods=60)
    assert (result.scheduled, result.violations) == (60, [])
    assert {_node_of(cluster, pod).metadata.labels[ZONE] for pod in cluster.pods.values()} == {"zone1"}


def test_preferred_anti_affinity_spreads_pods_one_per_node_while_nodes_last() -> None:
    result, cluster = _run_small(
        "scheduling-preferred-pod-anti-affinity.yaml", initNodes=40, initPods=10, measurePods=30
    )
    assert (result.scheduled, result.violations) == (30, [])
    hosts = Counter(pod.spec.node_name for pod in cluster.pods.values())
    assert len(hosts) == 40  # the score steers every pod to a node without one


def test_node_affinity_binds_every_pod_in_zone1() -> None:
    result, cluster = _run_small("scheduling-node-affinity.yaml", initNodes=20, initPods=20, measurePods=100)
    assert (result.scheduled, result.violations) == (100, [])
    assert {_node_of(cluster, pod).metadata.labels[ZONE] for pod in cluster.pods.values()} == {"zone1"}


def test_mixed_base_pods_bind_around_the_affinity_pods() -> None:
    result, cluster = _run_small("mixed-scheduling-base-pod.yaml", initNodes=20, initPods=10, measurePods=60)
    assert (result.scheduled, result.pending, result.violations) == (60, 0, [])
    assert len(cluster.pods) == 5 * 10 + 60
    anti = [pod.spec.node_name for pod in _pods(cluster, "anti-affinity-pod-")]
    assert len(set(anti)) == len(anti) == 10


def test_preemption_evicts_three_low_priority_pods_per_high_priority_pod() -> None:
    result, cluster = _run_small("preemption-basic.yaml", initNodes=10, initPods=40, measurePods=10)
    assert (result.scheduled, result.pending, result.preempted, result.violations) == (10, 0, 30, [])
    high = [pod for pod in cluster.pods.values() if pod.spec.priority == 10]
    assert sorted(pod.spec.node_name for pod in high) == sorted(cluster.nodes)  # one per node
    assert len(cluster.pods) == 40 - 30 + 10


def test_unschedulable_churned_pods_stay_pending_while_the_measured_pods_bind() -> None:
    result, cluster = _run_small(
        "unschedulable.yaml", initNodes=20, initPods=5, measurePods=200, churnIntervalMilliseconds=5
    )
    assert (result.scheduled, result.violations) == (200, [])
    churned = _pods(cluster, "pod-h-")
    assert result.pending == len(churned) >= 1
    assert all(not pod.spec.node_name for pod in churned)


def test_daemonset_pods_all_land_on_the_named_node() -> None:
    result, cluster = _run_small("scheduling-daemonset.yaml", initNodes=50, measurePods=200)
    assert (result.nodes, result.scheduled, result.violations) == (51, 200, [])
    assert {pod.spec.node_name for pod in cluster.pods.values()} == {"scheduler-perf-node"}


def _bound_pod(name: str, node: str, template: dict[str, Any], namespace: str = "sched-1") -> Pod:
    raw = {**template, "metadata": {**template["metadata"], "name": name, "namespace": namespace}}
    pod = Pod.from_dict(raw, "test")
    pod.spec.node_name = node
    return pod


def _template(file: str, index: int = -1) -> dict[str, Any]:
    document = yaml.safe_load((WORKLOADS / file).read_text())
    return dict(document["ops"][index].get("podTemplate") or document["podTemplate"])


def _node(name: str, **labels: str) -> Node:
    return Node.from_dict(
        {
            "metadata": {"name": name, "labels": {HOSTNAME: name, **labels}},
            "status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
        },
        "test",
    )


@pytest.mark.parametrize(
    ("file", "placements", "nodes", "expected"),
    [
        pytest.param(
            "scheduling-pod-anti-affinity.yaml",
            ["n1", "n1"],
            {"n1": {}},
            "required anti-affinity excludes share kubernetes.io/hostname=n1",
            id="anti-affinity-pair-on-one-node",
        ),
        pytest.param(
            "scheduling-pod-affinity.yaml",
            ["n1", "n2"],
            {"n1": {ZONE: "zone1"}, "n2": {ZONE: "zone2"}},
            "no pod its required affinity needs",
            id="affinity-pods-in-two-zones-each-alone",
        ),
        pytest.param(
            "scheduling-node-affinity.yaml",
            ["n1"],
            {"n1": {ZONE: "zone3"}},
            "required node affinity does not hold",
            id="node-affinity-wrong-zone",
        ),
        pytest.param(
            "topology-spreading.yaml",
            ["n1"] * 6,
            {"n1": {ZONE: "moon-1"}, "n2": {ZONE: "moon-2"}},
            "skew 6 > maxSkew 5",
            id="spread-skew-six",
        ),
        pytest.param(
            "preemption-basic.yaml",
            ["n1", "n1"],
            {"n1": {}},
            "cpu requested 6000 > allocatable 4000",
            id="over-committed-cpu",
        ),
    ],
)
def test_placement_checks_name_each_violation(
    file: str, placements: list[str], nodes: dict[str, dict[str, str]], expected: str
) -> None:
    template = _template(file)
    pods = [_bound_pod(f"p{i}", node, template) for i, node in enumerate(placements)]
    cluster = SimulatedCluster(VirtualClock(), [_node(name, **labels) for name, labels in nodes.items()], pods)
    report = check_placements(cluster, {pod.uid for pod in pods}, set())
    assert any(expected in violation for violation in report.violations), report.violations


def test_placement_checks_pass_a_valid_placement() -> None:
    template = _template("scheduling-pod-anti-affinity.yaml")
    pods = [_bound_pod("a", "n1", template), _bound_pod("b", "n2", template, namespace="sched-0")]
    cluster = SimulatedCluster(VirtualClock(), [_node("n1"), _node("n2")], pods)
    assert check_placements(cluster, {pod.uid for pod in pods}, set()).violations == ()


def test_workload_params_override_and_unknown_params_are_errors() -> None:
    workload = load_workload(WORKLOADS / "topology-spreading.yaml", {"measurePods": 7})
    assert workload.ops[-1].count == 7
    with pytest.raises(WorkloadError, match="no such param"):
        load_workload(WORKLOADS / "topology-spreading.yaml", {"nope": 1})


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        pytest.param(
            [{"opcode": "createNodes", "count": 1, "labelNodePrepareStrategy": {"labelKey": "k"}}],
            "labelNodePrepareStrategy.labelValues: must be a non-empty list",
            id="label-strategy-without-values",
        ),
        pytest.param(
            [{"opcode": "churn", "intervalMilliseconds": 0}],
            "intervalMilliseconds: must be greater than zero",
            id="churn-interval-zero",
        ),
        pytest.param(
            [{"opcode": "churn", "intervalMilliseconds": 5}],
            "a churn op must come before a createPods op",
            id="churn-last",
        ),
    ],
)
def test_bad_new_ops_are_named_errors(ops: list[dict[str, object]], message: str) -> None:
    document = {"name": "x", "nodeTemplate": {}, "podTemplate": {}, "ops": ops}
    with pytest.raises(WorkloadError, match=r"w\.yaml") as exc:
        parse_workload(document, "w.yaml")
    assert message in str(exc.value)
