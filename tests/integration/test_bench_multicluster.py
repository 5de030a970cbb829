"""``kubesched bench`` on a hub: MultiClusterSmall through the CLI (agents in-process, and over loopback HTTPS),
every pod placed in exactly one member with no node over its allocatable; the member check failing on a bad
placement; the ``multiCluster`` section validated like the rest of a workload."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubesched.bench
from kubesched.bench.checks import MemberContents, check_members
from kubesched.bench.workload import WorkloadError, parse_workload
from kubesched.cli.main import main

WORKLOADS = Path(kubesched.bench.__file__).parent / "workloads"
SMALL = WORKLOADS / "multi-cluster-small.yaml"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["bench", *args, "--output", "json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    [result] = document["results"]
    return dict(result)


def test_multicluster_small_places_every_pod_through_the_agents(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "MultiClusterSmall")
    assert (result["nodes"], result["measured_pods"], result["scheduled"]) == (5, 50, 50)
    assert (result["pending"], result["check"], result["violations"]) == (0, "ok", [])
    assert result["commit_p99_ms"] >= result["commit_p50_ms"] > 0  # pop-to-commit was measured for the pods
    assert result["throughput"] > 0 and result["p99_ms"] >= result["p50_ms"] > 0


@pytest.mark.parametrize("process", ["separate", "hub"])
def test_multicluster_small_over_loopback_https(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, process: str
) -> None:
    document = yaml.safe_load(SMALL.read_text())
    document["name"] = "MultiClusterSmallHTTPS"
    document["multiCluster"].update(transport="https", agentProcess=process)
    (tmp_path / "small-https.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    shutil.copytree(WORKLOADS / "multicluster", tmp_path / "multicluster")
    result = run_json(capsys, str(tmp_path / "small-https.yaml"))
    assert (result["scheduled"], result["pending"], result["check"]) == (50, 0, "ok")
    assert result["commit_p99_ms"] > 0
    if process == "separate":
        assert result["helper_cpu_seconds"] > 0  # the agents' process served the reservations and binds


def node(name: str, cpu: str = "1", pods: str = "2") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": pods}},
    }


def pod(name: str, node_name: str, hub_uid: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "apps",
            "annotations": {"multicluster.kubesched.io/hub-pod-uid": hub_uid},
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Pending"},
    }


def test_member_check_passes_a_valid_placement() -> None:
    members = {"a": MemberContents([node("n1")], [pod("p", "n1", "u1"), pod("q", "n1", "u2")])}
    assert check_members(members, {"u1", "u2"}) == ()


@pytest.mark.parametrize(
    ("members", "hub_pods", "message"),
    [
        pytest.param(
            {"a": MemberContents([node("n1")], [pod("p", "n1", "u1", cpu="700m"), pod("q", "n1", "u2", cpu="700m")])},
            {"u1", "u2"},
            "member a: node n1 holds 1400 cpu, more than its allocatable 1000",
            id="node-over-its-cpu",
        ),
        pytest.param(
            {"a": MemberContents([node("n1", pods="1")], [pod("p", "n1", "u1", "1m"), pod("q", "n1", "u2", "1m")])},
            {"u1", "u2"},
            "member a: node n1 holds 2 pods, more than its allocatable 1",
            id="node-over-its-pods",
        ),
        pytest.param(
            {"a": MemberContents([node("n1")], [pod("p", "n1", "u1")]), "b": MemberContents([node("n1")], [])},
            {"u1", "u2"},
            "hub pod u2 is in 0 members",
            id="a-hub-pod-nowhere",
        ),
        pytest.param(
            {
                "a": MemberContents([node("n1")], [pod("p", "n1", "u1")]),
                "b": MemberContents([node("n1")], [pod("p", "n1", "u1")]),
            },
            {"u1"},
            "hub pod u1 is in 2 members",
            id="a-hub-pod-in-two-members",
        ),
    ],
)
def test_member_check_names_each_violation(
    members: dict[str, MemberContents], hub_pods: set[str], message: str
) -> None:
    violations = check_members(members, hub_pods)
    assert any(message in violation for violation in violations), violations


def small(**multi_cluster: object) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(SMALL.read_text())
    document["multiCluster"].update(multi_cluster)
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param(small(clustrs=3), "multiCluster: unknown field 'clustrs'", id="unknown-field"),
        pytest.param(small(transport="grpc"), "multiCluster.transport: Unsupported value: 'grpc'", id="bad-transport"),
        pytest.param(small(clusters=0), "multiCluster.clusters: must be greater than zero", id="no-clusters"),
        pytest.param(small(nodeCapacity={"cpu": "8"}), "multiCluster.nodeCapacity.pods: Required value", id="no-pods"),
        pytest.param(small(regions=[]), "multiCluster.regions: must be a non-empty list", id="no-regions"),
        pytest.param(small(agentProcess="hub"), "agentProcess: Forbidden: only with transport: https", id="in-process"),
        pytest.param(
            small(transport="https", agentProcess="pod"), "agentProcess: Unsupported value: 'pod'", id="bad-process"
        ),
        pytest.param(
            {
                **small(),
                "ops": [{"opcode": "createNodes", "count": 1, "nodeTemplate": {"kind": "Node"}}, *small()["ops"]],
            },
            "ops[0].opcode: Forbidden: createNodes with multiCluster",
            id="nodes-come-from-the-clusters",
        ),
        pytest.param({**small(), "config": None}, "config: Required value (the hub profile)", id="no-hub-profile"),
    ],
)
def test_bad_multicluster_sections_are_named_errors(document: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError) as error:
        parse_workload(document, str(SMALL))
    assert message in str(error.value)


def test_the_shipped_multicluster_workloads_have_the_issue_sizes() -> None:
    for file, transport in (("multi-cluster.yaml", "inProcess"), ("multi-cluster-https.yaml", "https")):
        workload = parse_workload(yaml.safe_load((WORKLOADS / file).read_text()), str(WORKLOADS / file))
        spec = workload.multi_cluster
        assert spec is not None
        assert (spec.clusters, spec.nodes_per_cluster, spec.transport) == (100, 50, transport)
        assert sum(op.count for op in workload.ops if op.collect_metrics) == 10000
        assert workload.config is not None and Path(workload.config).is_file()
