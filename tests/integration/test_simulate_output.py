"""What ``kubesched simulate`` prints beyond placements: gated pods as SchedulingGated (and what ``--exit-code``
makes of them), the events the run emitted under ``events``, the chosen node's total score in the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubesched.backends.simulated.cluster import RecordedEvent
from kubesched.cli.main import main
from kubesched.cli.report import events_to_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
START = "2026-01-01T00:00:00Z"

FITS_AND_GATED = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: default}
  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: waits, namespace: default}
  spec:
    schedulingGates: [{name: example.com/quota}, {name: example.com/approval}]
    containers: [{name: c, image: x}]
"""

# One run that emits every kind of event: urgent fits nowhere (FailedScheduling), preempts low (Preempted) and
# is then bound (Scheduled); the policy gate in warn mode lets miner's untrusted image through with a
# PolicyViolation; fixer uses the break-glass label where it is allowed (BreakGlass); huge fits nowhere at all.
EVENTFUL = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: urgent}, value: 1000}
- apiVersion: v1
  kind: Pod
  metadata: {name: low, namespace: batch}
  spec:
    nodeName: n1
    containers: [{name: c, image: busybox, resources: {requests: {cpu: "2"}}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: urgent, namespace: default}
  spec:
    priorityClassName: urgent
    containers: [{name: c, image: busybox, resources: {requests: {cpu: "2"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: miner, namespace: default}
  spec:
    containers: [{name: c, image: evil.example.com/miner:1, resources: {requests: {cpu: 100m}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: fixer, namespace: ops, labels: {kubesched.io/break-glass: "true"}}
  spec:
    containers: [{name: c, image: evil.example.com/fix:1, resources: {requests: {cpu: 100m}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: huge, namespace: default}
  spec:
    containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
"""

POLICY_DATA = {
    "compliance": {"nodes": {"n1": {"level": "standard"}, "n2": {"level": "standard"}}},
    "config": {"required_level": {}, "trusted_image_prefixes": ["busybox"]},
}


def warn_mode_config(tmp_path: Path) -> Path:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(POLICY_DATA))
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: default-scheduler\n"
        "  plugins: {filter: {enabled: [{name: SecurityAuditFilter}]}}\n"
        "  pluginConfig:\n"
        "  - name: SecurityAuditFilter\n"
        "    args:\n"
        f"      policies: [{json.dumps(str(EXAMPLES / 'policies' / 'placement.rego'))}]\n"
        f"      data: [{json.dumps(str(data))}]\n"
        "      enforcementAction: warn\n"
        "      breakGlassNamespaces: [ops]\n"
    )
    return config


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def table_rows(out: str) -> dict[str, dict[str, str]]:
    """The table's rows by pod, cells cut at the header's column starts (cells may be empty)."""
    lines = out.splitlines()
    header = lines[0]
    names = header.split()
    starts = [header.index(name) for name in names]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        if not line.strip():
            break
        cells = [line[start:end].strip() for start, end in zip(starts, [*starts[1:], None], strict=True)]
        rows[cells[0]] = dict(zip(names, cells, strict=True))
    return rows


def test_gated_pods_read_scheduling_gated_and_do_not_fail_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(FITS_AND_GATED)
    # Never offered to a node, so not a failure to fit: the CI gate passes (Unschedulable would fail it).
    code, out = run_cli(capsys, "simulate", "-f", str(manifests), "--exit-code")
    assert code == 0, out
    waits = table_rows(out)["default/waits"]
    assert (waits["RESULT"], waits["NODE"], waits["SCORE"], waits["ATTEMPTS"]) == ("SchedulingGated", "-", "", "0")
    assert waits["REASON"] == "Scheduling is blocked due to non-empty scheduling gates"

    code, out = run_cli(capsys, "simulate", "-f", str(manifests), "-o", "json", "--exit-code")
    assert code == 0
    pods = {pod["name"]: pod for pod in json.loads(out)["pods"]}
    assert pods["waits"]["result"] == "SchedulingGated"
    assert pods["waits"]["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    gates = "waiting for scheduling gates: [example.com/quota example.com/approval]"
    assert pods["waits"]["preEnqueue"]["reasons"] == [gates]

    code, page = run_cli(capsys, "simulate", "-f", str(manifests), "-o", "html")
    assert code == 0
    assert '<td class="SchedulingGated">SchedulingGated</td>' in page
    assert "Held at PreEnqueue by SchedulingGates: waiting for scheduling gates: [example.com/quota" in page
    assert ".SchedulingGated{" in page, "the result has a style of its own"


def test_the_table_shows_the_chosen_nodes_total_score(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--config", str(EXAMPLES / "config.yaml")]
    code, out = run_cli(capsys, *args)
    assert code == 0
    assert out.splitlines()[0].split() == ["POD", "PROFILE", "RESULT", "NODE", "SCORE", "ATTEMPTS", "REASON"]
    rows = table_rows(out)
    _, document = run_cli(capsys, *args, "-o", "json")
    for pod in json.loads(document)["pods"]:
        row = rows[f"{pod['namespace']}/{pod['name']}"]
        expected = str(pod["totals"][pod["node"]]) if pod["node"] in pod["totals"] else ""
        assert row["SCORE"] == expected, pod["name"]
    assert rows["default/web-1"]["SCORE"] == "436"  # the weighted sum for node-a (test_cli's worked example)
    assert rows["prod/payments"]["SCORE"] == "", "one feasible node: kube-scheduler does not score"
    assert rows["default/batch-huge"]["SCORE"] == "", "not scheduled"


def test_json_lists_every_event_the_run_emitted_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(EVENTFUL)
    config = warn_mode_config(tmp_path)
    args = ["simulate", "-f", str(manifests), "--config", str(config), "-o", "json", "--time", START]
    code, out = run_cli(capsys, *args)
    assert code == 0
    events: list[dict[str, Any]] = json.loads(out)["events"]
    seen = [(e["reason"], f"{e['regarding']['namespace']}/{e['regarding']['name']}") for e in events]
    # Each binding finishes while the next pod's cycle is in flight (after its snapshot): miner's while fixer's
    # cycle asks the policy, fixer's while huge's runs; urgent binds once its victim is gone.
    assert seen == [
        ("FailedScheduling", "default/urgent"),
        ("Preempted", "batch/low"),
        ("PolicyViolation", "default/miner"),
        ("Scheduled", "default/miner"),
        ("BreakGlass", "ops/fixer"),
        ("Scheduled", "ops/fixer"),
        ("FailedScheduling", "default/huge"),
        ("Scheduled", "default/urgent"),
    ]
    for event in events:
        assert event["eventTime"] == "2026-01-01T00:00:00.000000Z"  # virtual time does not move here
        assert event["regarding"]["kind"] == "Pod"
        assert event["reportingController"] == "default-scheduler"
        assert "count" not in event, "no event repeats back to back"
    by_reason = {(e["reason"], e["regarding"]["name"]): e for e in events}
    assert {k: (e["type"], e["action"]) for k, e in by_reason.items()} == {
        ("FailedScheduling", "urgent"): ("Warning", "Scheduling"),
        ("Preempted", "low"): ("Normal", "Preempting"),
        ("PolicyViolation", "miner"): ("Warning", "Scheduling"),
        ("BreakGlass", "fixer"): ("Warning", "Scheduling"),
        ("Scheduled", "miner"): ("Normal", "Binding"),
        ("Scheduled", "fixer"): ("Normal", "Binding"),
        ("FailedScheduling", "huge"): ("Warning", "Scheduling"),
        ("Scheduled", "urgent"): ("Normal", "Binding"),
    }
    assert by_reason["Scheduled", "urgent"]["note"] == "Successfully assigned default/urgent to n1"
    assert by_reason["FailedScheduling", "urgent"]["note"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert by_reason["Preempted", "low"]["note"].startswith("Preempted by pod ")
    assert by_reason["PolicyViolation", "miner"]["note"].startswith("warn: security policy would deny 2 of 2 nodes")
    assert by_reason["BreakGlass", "fixer"]["note"] == (
        "security policy not evaluated: break-glass label kubesched.io/break-glass=true, allowed in namespace ops"
    )


def test_an_event_repeated_back_to_back_is_one_entry_with_a_count() -> None:
    def event(name: str, at: float, note: str = "0/1 nodes are available: 1 Insufficient cpu.") -> RecordedEvent:
        return RecordedEvent(
            "default", name, "Warning", "FailedScheduling", "Scheduling", note, at, "default-scheduler", f"uid-{name}"
        )

    entries = events_to_json(
        [event("a", 0), event("a", 300), event("a", 600), event("b", 601), event("a", 900), event("a", 901, "other")]
    )
    assert [(e["regarding"]["name"], e.get("count"), e["note"][:5]) for e in entries] == [
        ("a", 3, "0/1 n"),
        ("b", None, "0/1 n"),
        ("a", None, "0/1 n"),  # the same again, but after another event: its own entry, so order is kept
        ("a", None, "other"),
    ]
    assert entries[0]["eventTime"] == "1970-01-01T00:00:00.000000Z"
    assert entries[0]["lastObservedTime"] == "1970-01-01T00:10:00.000000Z"
