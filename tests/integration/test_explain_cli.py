"""``kubesched explain`` end to end, in-process: the table, the JSON document, errors and exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CASES = Path(__file__).parent / "testdata" / "explain-cases.yaml"
CLUSTER = ["-f", str(EXAMPLES / "cluster.yaml"), "--config", str(EXAMPLES / "config.yaml")]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_is_aligned_and_has_no_colour_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "explain", *CLUSTER, "default/web-1")
    assert code == 0
    assert "\x1b[" not in out
    lines = out.splitlines()
    assert lines[0] == "Pod default/web-1 (profile default-scheduler): Scheduled on node-a, 1 attempt shown"
    header = next(line for line in lines if line.strip().startswith("NODE") and "NodeUnschedulable" in line)
    rows = [line for line in lines if line.strip().startswith("node-") and "passed" in line]
    # Every verdict cell starts under its plugin's name.
    column = header.index("TaintToleration")
    node_b = next(line for line in rows if line.strip().startswith("node-b"))
    assert node_b[column:].startswith("REJECTED")
    assert "Selection: node-a has the highest total score (436)" in out
    # Raw 1 (one PreferNoSchedule taint), normalized to 0 (reversed), weight 3.
    assert re.search(r"^  node-e +TaintToleration +1 +0 +3 +0$", out, re.MULTILINE)


def test_json_document_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "explain", *CLUSTER, "-o", "json", "batch-huge")
    assert code == 0
    document = json.loads(out)
    assert document["schema"] == "kubesched.io/explain/v1"
    assert {
        "pod",
        "profile",
        "result",
        "node",
        "message",
        "preempted",
        "filterPlugins",
        "scorePlugins",
        "attempts",
    } <= set(document)
    assert document["pod"]["name"] == "batch-huge" and document["result"] == "Unschedulable"
    (attempt,) = document["attempts"]
    assert attempt["selection"]["rule"] == "none"
    nodes = {node["name"]: node for node in attempt["nodes"]}
    assert set(nodes) == {"node-a", "node-b", "node-c", "node-d", "node-e"}
    fit = {v["plugin"]: v for v in nodes["node-e"]["filter"]}["NodeResourcesFit"]
    assert fit == {
        "plugin": "NodeResourcesFit",
        "verdict": "rejected",
        # 12 CPUs are more than node-e has at all: no eviction can help (kube-scheduler v1.35's code).
        "code": "UnschedulableAndUnresolvable",
        "reasons": ["Insufficient cpu"],
    }
    assert attempt["preemption"]["plugin"] == "DefaultPreemption"
    assert attempt["preemption"]["candidates"] == []


def test_json_of_a_preempting_pod(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "explain", "-f", str(CASES), "-o", "json", "default/urgent")
    assert code == 0
    document = json.loads(out)
    first, last = document["attempts"][0], document["attempts"][-1]
    chosen = first["preemption"]["chosen"]
    assert {c["node"] for c in first["preemption"]["candidates"]} == {"n1", "n2"}
    assert last["result"] == "Scheduled" and last["node"] == chosen == document["node"]
    assert document["preempted"] == [
        v for c in first["preemption"]["candidates"] if c["node"] == chosen for v in c["victims"]
    ]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param("default/conflict", "PreFilter: NodeAffinity rejected the pod", id="rejected-at-prefilter"),
        pytest.param("gated", "PreEnqueue: SchedulingGates holds the pod back", id="gated-at-preenqueue"),
        pytest.param("urgent", "CANDIDATE  PDB-VIOLATIONS  VICTIMS", id="preempting"),
    ],
)
def test_pods_stopped_early_are_explained(capsys: pytest.CaptureFixture[str], pod: str, expected: str) -> None:
    code, out, _ = run_cli(capsys, "explain", "-f", str(CASES), pod)
    assert code == 0
    assert expected in out


def test_unknown_pod_lists_near_matches(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "explain", *CLUSTER, "payment")
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1] == (
        'error: pod "payment" not found (10 pods in the manifests); did you mean: prod/payments?'
    )


def test_malformed_manifests_are_the_loaders_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p\n")
    code, out, err = run_cli(capsys, "explain", "-f", str(path), "p")
    assert code == 1 and out == ""
    assert err.startswith("error: ") and "could not parse YAML" in err and "Traceback" not in err
