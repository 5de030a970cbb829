"""examples/multicluster end to end: the cluster each hub pod lands on and why the others were refused, the
simulate JSON and table, explain's cluster-level verdicts, config validate; the node plane and the cluster plane
kept apart; state growing stale as the simulated clock moves on; the cluster policy deciding on input.cluster
(labels, annotations) and the audit records naming clusters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.manifests import load_manifest_text, load_manifests
from kubesched.audit.builder import AuditObserver
from kubesched.audit.records import AuditRecord
from kubesched.cli.main import main
from kubesched.config.loader import load_config_file
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.results import SCHEDULED, UNSCHEDULABLE
from kubesched.simulation.run import simulate
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.multicluster_builders import make_member

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "multicluster"
MANIFESTS = str(EXAMPLE / "manifests")
CONFIG = str(EXAMPLE / "config.yaml")
TIME = "2026-03-01T12:00:00Z"
NOON = 1772366400.0

REFUSED_EU_ONLY = (
    "0/5 clusters are available: 1 cluster(s) didn't match Pod's node affinity/selector, 1 cluster(s) had no node "
    "with enough free cpu, 1 cluster(s) had stale state, 1 cluster(s) had untolerated taint(s), 1 cluster(s) were "
    "not ready."
)
REFUSED_HUGE = (
    "0/5 clusters are available: 1 cluster(s) had no node with enough free memory, 1 cluster(s) had stale state, "
    "1 cluster(s) had untolerated taint(s), 1 cluster(s) were not ready, 2 cluster(s) had no node with enough "
    "free cpu."
)

EXPECTED = {
    "shop/api": (SCHEDULED, "us-east-a", ""),  # ClusterCost: cheapest ready, fresh, untainted
    "shop/web-1": (SCHEDULED, "ap-south-a", ""),  # ClusterLocality: web-0 runs there; it tolerates spot
    "analytics/batch-8cpu": (SCHEDULED, "us-east-a", ""),  # ClusterCapacity: eu-west-a has 2 CPUs per node
    "analytics/ray-head": (SCHEDULED, "eu-west-a", ""),  # ClusterAPIEnablement: only eu-west-a serves RayCluster
    "shop/customer-db": (SCHEDULED, "eu-west-a", ""),  # SecurityAuditFilter: residency eu, the cluster policy
    "analytics/eu-only": (UNSCHEDULABLE, None, REFUSED_EU_ONLY),
    "analytics/huge": (UNSCHEDULABLE, None, REFUSED_HUGE),
}


def run_example(start: float = NOON) -> Any:
    registry = in_tree_registry()
    return simulate(load_manifests([MANIFESTS]), load_config_file(CONFIG, registry), registry, start_time=start)


def test_each_hub_pod_lands_where_its_plugin_sends_it_and_the_others_say_why_not() -> None:
    report = run_example()
    got = {record.pod.key: (record.result, record.node, record.message) for record in report.records}
    assert got == EXPECTED
    # ap-south-a's own Nodes belong to the member: the node plane has no node at all.
    assert report.cluster is not None and report.cluster.nodes == {}
    assert report.hub is not None and set(report.hub.nodes) == {
        "us-east-a",
        "us-east-b",
        "eu-west-a",
        "eu-west-b",
        "ap-south-a",
    }


def test_each_rejected_clusters_verdict_names_its_plugin() -> None:
    records = {record.pod.key: record for record in run_example().records}
    verdicts = {name: (s.plugin, s.reasons) for name, s in records["analytics/huge"].node_to_status.items()}
    assert verdicts == {
        "us-east-a": ("ClusterCapacity", ("cluster(s) had no node with enough free cpu",)),
        "us-east-b": ("ClusterReadiness", ("cluster(s) were not ready",)),
        "eu-west-a": (
            "ClusterCapacity",
            ("cluster(s) had no node with enough free cpu", "cluster(s) had no node with enough free memory"),
        ),
        "eu-west-b": ("ClusterReadiness", ("cluster(s) had stale state",)),
        "ap-south-a": ("TaintToleration", ("node(s) had untolerated taint(s)",)),
    }
    ray = records["analytics/ray-head"].node_to_status
    assert ray["us-east-a"].reasons == ("cluster(s) did not serve ray.io/v1/RayCluster",)


def test_an_hour_later_only_the_continuously_reporting_cluster_is_fresh() -> None:
    records = {record.pod.key: record for record in run_example(NOON + 3600).records}
    assert records["shop/api"].result == UNSCHEDULABLE
    assert records["shop/api"].message == (
        "0/5 clusters are available: 1 cluster(s) had untolerated taint(s), 1 cluster(s) were not ready, "
        "3 cluster(s) had stale state."
    )
    assert records["shop/web-1"].node == "ap-south-a"


def test_simulate_json_names_each_pods_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", MANIFESTS, "--config", CONFIG, "--time", TIME, "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    pods = {f"{p['namespace']}/{p['name']}": p for p in document["pods"]}
    assert {key: pod["cluster"] for key, pod in pods.items()} == {key: want[1] for key, want in EXPECTED.items()}
    assert pods["shop/api"]["node"] == "us-east-a"
    assert pods["shop/api"]["totals"] == {"us-east-a": 400, "eu-west-a": 166}
    notes = [e["note"] for e in document["events"] if e["reason"] == "FailedScheduling"]
    assert REFUSED_HUGE in notes


def test_simulate_table_has_a_cluster_column(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", MANIFESTS, "--config", CONFIG, "--time", TIME]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["POD", "PROFILE", "RESULT", "NODE", "CLUSTER", "SCORE", "ATTEMPTS", "REASON"]
    row = next(line for line in lines if line.startswith("shop/web-1 "))
    assert row.split()[:5] == ["shop/web-1", "multicluster-scheduler", "Scheduled", "-", "ap-south-a"]
    assert lines[-1] == "5/7 pods scheduled"


def test_explain_shows_cluster_level_verdicts_and_scores(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "shop/api", "-f", MANIFESTS, "--config", CONFIG, "--time", TIME, "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["target"], document["cluster"], document["node"]) == ("cluster", "us-east-a", "us-east-a")
    (attempt,) = document["attempts"]
    outcomes = {n["name"]: n["outcome"] for n in attempt["nodes"]}
    assert outcomes == {
        "us-east-a": "chosen",
        "us-east-b": "rejected",
        "eu-west-a": "feasible",
        "eu-west-b": "rejected",
        "ap-south-a": "rejected",
    }
    chosen = next(n for n in attempt["nodes"] if n["name"] == "us-east-a")
    cost = next(s for s in chosen["scores"] if s["plugin"] == "ClusterCost")
    assert (cost["raw"], cost["normalized"], cost["weight"]) == (19700, 100, 2)  # 0.5 core + 1 GiB: $0.0197/h


def test_explain_text_speaks_of_clusters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "analytics/batch-8cpu", "-f", MANIFESTS, "--config", CONFIG, "--time", TIME]) == 0
    text = capsys.readouterr().out
    assert "a cluster stops at its first rejection" in text
    assert "CLUSTER " in text and "eu-west-a" in text and "cluster(s) had no node with enough free cpu" in text


def test_the_example_config_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "validate", CONFIG]) == 0
    assert capsys.readouterr().out.strip() == f"{CONFIG}: valid (profiles: default-scheduler, multicluster-scheduler)"


def test_the_example_manifests_are_clean_under_strict() -> None:
    loaded = load_manifests([MANIFESTS], strict=True)
    assert loaded.warnings == []
    assert len(loaded.member_clusters) == 5


def test_node_pods_stay_on_hub_nodes_and_cluster_pods_on_clusters() -> None:
    objects = [
        make_node("hub-1").allocatable(cpu="64", memory="256Gi", pods="110").raw(),
        make_member("member-1").allocatable(cpu="64", memory="256Gi", pods="110").raw(),
        make_pod("node-pod").req(cpu="1").raw(),
        make_pod("cluster-pod").req(cpu="1").scheduler("multicluster-scheduler").raw(),
    ]
    registry = in_tree_registry()
    report = simulate(
        load_manifest_text(yaml.safe_dump_all(objects), "m.yaml"),
        load_config_file(CONFIG, registry),
        registry,
        start_time=NOON,
    )
    placed = {record.pod.name: (record.profile, record.node) for record in report.records}
    assert placed == {
        "node-pod": ("default-scheduler", "hub-1"),
        "cluster-pod": ("multicluster-scheduler", "member-1"),
    }
    assert report.cluster is not None and report.hub is not None


def test_a_burst_to_one_cluster_stops_at_its_per_node_capacity() -> None:
    """Twelve 3-CPU pods onto one cluster of 4 nodes with 8 free CPUs each: 2 per node fit (8 placed), the
    in-flight overlay refuses the rest although 8 CPUs stay free in total."""
    objects: list[dict[str, Any]] = [
        make_member("m").allocatable(cpu="32", memory="64Gi", pods="110").nodes(4, cpu="8").raw()
    ]
    objects += [make_pod(f"p{i}").req(cpu="3").scheduler("multicluster-scheduler").raw() for i in range(12)]
    registry = in_tree_registry()
    report = simulate(
        load_manifest_text(yaml.safe_dump_all(objects), "m.yaml"),
        load_config_file(CONFIG, registry),
        registry,
        start_time=NOON,
    )
    results = [record.result for record in report.records]
    assert results.count(SCHEDULED) == 8
    refused = {record.message for record in report.records if record.result == UNSCHEDULABLE}
    assert refused == {"0/1 clusters are available: 1 cluster(s) had no node with enough free cpu."}


def test_the_cluster_policy_decides_on_input_cluster() -> None:
    """customer-db may live only in eu-* regions; the denial names the region the policy read from the
    cluster's labels (were the input ``node``, every cluster would be denied with region "")."""
    records = {record.pod.key: record for record in run_example().records}
    db = records["shop/customer-db"]
    assert db.node == "eu-west-a"
    assert db.node_to_status["us-east-a"].plugin == "SecurityAuditFilter"
    assert db.node_to_status["us-east-a"].reasons == (
        'Denied by security policy: data residency eu does not allow region "us-east"',
    )
    # The attempt's verdict is the one about the chosen cluster.
    assert [(v.plugin, v.target, v.allowed) for v in db.verdicts] == [("SecurityAuditFilter", "eu-west-a", True)]


def test_a_frozen_clusters_annotation_reaches_the_policy() -> None:
    objects: list[dict[str, Any]] = [
        make_member("frozen").allocatable(cpu="64", memory="256Gi", pods="110").raw(),
        make_member("open").allocatable(cpu="64", memory="256Gi", pods="110").raw(),
        make_pod("p").req(cpu="1").scheduler("multicluster-scheduler").raw(),
    ]
    objects[0]["metadata"]["annotations"] = {"multicluster.kubesched.io/change-freeze": "true"}
    registry = in_tree_registry()
    report = simulate(
        load_manifest_text(yaml.safe_dump_all(objects), "m.yaml"),
        load_config_file(CONFIG, registry),
        registry,
        start_time=NOON,
    )
    (record,) = report.records
    assert record.node == "open"
    assert record.node_to_status["frozen"].reasons == ("Denied by security policy: the cluster is under change freeze",)


class _Collect:
    name = "memory"

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)

    def flush(self) -> None:
        pass

    async def close(self) -> None:
        pass


def audited_example() -> _Collect:
    sink = _Collect()
    registry = in_tree_registry()
    simulate(
        load_manifests([MANIFESTS]),
        load_config_file(CONFIG, registry),
        registry,
        start_time=NOON,
        observers=[AuditObserver(sink)],
    )
    return sink


def test_audit_records_of_hub_pods_name_the_cluster() -> None:
    sink = audited_example()
    targets = {record.pod.key: (record.target.kind, record.target.name) for record in sink.records if record.target}
    assert targets["shop/customer-db"] == ("cluster", "eu-west-a")
    assert targets["shop/api"] == ("cluster", "us-east-a")
    db = next(record for record in sink.records if record.pod.key == "shop/customer-db")
    assert [(verdict.plugin, verdict.allowed) for verdict in db.verdicts] == [("SecurityAuditFilter", True)]


def test_a_cross_cluster_audit_record_has_every_members_age_and_verdict() -> None:
    sink = audited_example()
    db = next(record for record in sink.records if record.pod.key == "shop/customer-db")
    seen = {c.name: (c.observed_at, c.age_ms, c.rejected_by) for c in db.clusters}
    assert seen["eu-west-b"][1] == 20 * 60 * 1000  # last heard from 20 minutes before noon
    assert seen["eu-west-b"][2] == "ClusterReadiness"
    assert seen["us-east-a"][2] == "SecurityAuditFilter"
    assert seen["eu-west-a"][2] == ""
    assert set(seen) == {"us-east-a", "us-east-b", "eu-west-a", "eu-west-b", "ap-south-a"}
    # The section survives the JSON round trip, and node records do not carry it.
    document = db.to_json()
    assert AuditRecord.from_json(json.loads(json.dumps(document))) == db
    assert "clusters" not in AuditRecord.from_json({**document, "clusters": []}).to_json()
