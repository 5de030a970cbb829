"""The kubesched command end to end, in-process: outputs, exit codes and error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TESTDATA = Path(__file__).parent / "testdata"
START = "2026-01-01T00:00:00Z"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_json_schema_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "simulate",
        "-f",
        str(EXAMPLES / "cluster.yaml"),
        "--config",
        str(EXAMPLES / "config.yaml"),
        "--output",
        "json",
    )
    assert code == 0
    document = json.loads(out)
    pods = {pod["name"]: pod for pod in document["pods"]}
    required = {"namespace", "name", "profile", "result", "node", "message", "attempts", "filter", "scores", "totals"}
    for pod in document["pods"]:
        assert required <= pod.keys()
        assert pod["result"] in {"Scheduled", "Unschedulable", "Error", "SchedulingGated"}
        assert (pod["node"] is None) == (pod["result"] != "Scheduled")
        for status in pod["filter"].values():
            assert set(status) == {"plugin", "code", "reasons"}
        for node, total in pod["totals"].items():
            assert all(0 <= score <= 100 for score in pod["scores"][node].values())
            assert total >= 0
    assert pods["trainer"]["node"] == "node-b", "only node-b has a GPU and the pod tolerates its taint"
    huge = pods["batch-huge"]
    assert huge["result"] == "Unschedulable"
    assert huge["message"] == (
        "0/5 nodes are available: 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable, 2 Insufficient memory, 3 Insufficient cpu. no new claims to deallocate, "
        # 12 CPUs are more than any node has: no eviction helps anywhere (kube-oracle v1.35.4 agrees).
        "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    )
    assert huge["filter"]["node-b"] == {
        "plugin": "TaintToleration",
        "code": "UnschedulableAndUnresolvable",
        "reasons": ["node(s) had untolerated taint(s)"],
    }
    assert huge["filter"]["node-d"]["plugin"] == "NodeUnschedulable"
    # As the API server's PodScheduled condition has it (pkg/registry/core/pod/strategy.go); the gates are in
    # the PreEnqueue status that held it back.
    assert pods["gated"]["result"] == "SchedulingGated"
    assert pods["gated"]["attempts"] == 0
    assert pods["gated"]["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    assert pods["gated"]["preEnqueue"] == {
        "plugin": "SchedulingGates",
        "code": "UnschedulableAndUnresolvable",
        "reasons": ["waiting for scheduling gates: [example.com/quota-check]"],
    }
    assert "preEnqueue" not in pods["web-1"]
    for name in ("web-1", "web-2", "payments", "besteffort"):
        assert pods[name]["result"] == "Scheduled", name
        assert pods[name]["node"] not in {"node-b", "node-d"}, name
    # The higher-priority pod is scheduled first; then arrival order.
    assert [pod["name"] for pod in document["pods"]] == [
        "payments",
        "web-1",
        "web-2",
        "trainer",
        "batch-huge",
        "besteffort",
        "packed-1",
        "gated",
    ]
    assert pods["payments"]["node"] == "node-e" and pods["payments"]["scores"] == {}, "one feasible node: no scoring"
    # web-1, worked by hand from reference §5: LeastAllocated, BalancedAllocation, TaintToleration (reverse
    # normalized, node-e has an untolerated PreferNoSchedule taint), weights 1/1/3.
    web = pods["web-1"]
    assert web["node"] == "node-a"
    assert web["scores"]["node-a"] == {
        "TaintToleration": 100,
        "NodeResourcesFit": 41,
        "NodeResourcesBalancedAllocation": 95,
        "ImageLocality": 0,
    }
    assert web["scores"]["node-e"]["TaintToleration"] == 0
    assert web["totals"] == {"node-a": 436, "node-c": 399, "node-e": 155}
    # MostAllocated in the bin-packing profile prefers the fuller node-a.
    assert pods["packed-1"]["node"] == "node-a"
    assert pods["packed-1"]["scores"]["node-a"]["NodeResourcesFit"] == 84


def test_simulate_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "simulate", "-f", str(EXAMPLES / "cluster.yaml"))
    assert code == 0
    assert out.splitlines()[0].split() == ["POD", "PROFILE", "RESULT", "NODE", "SCORE", "ATTEMPTS", "REASON"]
    assert "default/batch-huge" in out and "0/5 nodes are available" in out
    assert out.rstrip().endswith("pods scheduled")


def test_simulate_is_deterministic_for_a_seed_and_same_on_both_paths(capsys: pytest.CaptureFixture[str]) -> None:
    # --time too: the events' times are virtual time, which starts at the wall clock unless told otherwise.
    args = ["simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--output", "json", "--seed", "7", "--time", START]
    _, batch, _ = run_cli(capsys, *args)
    _, again, _ = run_cli(capsys, *args)
    _, reference, _ = run_cli(capsys, *args, "--reference")
    assert batch == again == reference


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p\n", "could not parse YAML", id="malformed-yaml"),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1}\nspec:\n  containers:\n  - name: c\n    image: i\n"
            "    resources: {requests: {cpu: 12x}}\n",
            "Pod default/web-1: spec.containers[0].resources.requests.cpu",
            id="bad-quantity-names-object-and-field",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n",
            "Pod default/p: spec.containers",
            id="missing-containers",
        ),
    ],
)
def test_bad_manifest_is_one_line_error_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(content)
    code, out, err = run_cli(capsys, "simulate", "-f", str(path))
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and str(path) in lines[0] and expected in lines[0]
    assert "Traceback" not in err


def test_missing_file_is_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "simulate", "-f", str(tmp_path / "nope.yaml"))
    assert code == 1 and "nope.yaml" in err


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulate"])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(TESTDATA / "kube-scheduler-defaults.yaml", id="kube-scheduler-defaults"),
        pytest.param(EXAMPLES / "config.yaml", id="example-config"),
    ],
)
def test_config_validate_accepts(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    code, out, _ = run_cli(capsys, "config", "validate", str(path))
    assert code == 0 and "valid" in out


def test_config_validate_lists_every_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = TESTDATA / "broken-config.yaml"
    code, _, err = run_cli(capsys, "config", "validate", str(path))
    assert code == 1
    assert "parallelism: Invalid value: 0: should be an integer value greater than zero" in err
    assert "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds" in err
    assert 'profiles[0].plugins.score.enabled[1].name: Invalid value: "Foo": plugin does not exist' in err
    assert "profiles[1].schedulerName: Duplicate value" in err


def test_plugins_lists_built_and_planned(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "plugins", "--output", "json")
    assert code == 0
    plugins = {p["name"]: p for p in json.loads(out)}
    assert plugins["NodeResourcesFit"]["status"] == "built"
    assert set(plugins["NodeResourcesFit"]["extensionPoints"]) >= {"preFilter", "filter", "score"}
    assert plugins["PodTopologySpread"]["status"] == "built"
    assert plugins["VolumeZone"]["status"] == "built"
    assert {p["status"] for p in plugins.values()} <= {"built", "not built yet"}


def test_config_view_round_trips(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run_cli(capsys, "config", "view", str(EXAMPLES / "config.yaml"))
    assert code == 0
    dumped = tmp_path / "dumped.yaml"
    dumped.write_text(out)
    code, again, _ = run_cli(capsys, "config", "view", str(dumped))
    assert code == 0 and again == out


def test_seed_configuration_loads_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    seed = ROOT / "tests" / "unit" / "config" / "testdata" / "seed-config.yaml"
    code, view, _ = run_cli(capsys, "config", "view", str(seed))
    assert code == 0
    assert "- name: ComplianceScore\n        weight: 30" in view, "the seed's args weight becomes the score weight"
