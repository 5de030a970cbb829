"""The bench harness runs workloads to completion; speed itself is never asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.bench.runner import run_workload
from kubesched.bench.workload import WorkloadError, load_workload, parse_workload
from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "bench" / "workloads" / "scheduling-basic-small.yaml"


@pytest.mark.parametrize("use_batch", [pytest.param(True, id="batch"), pytest.param(False, id="per-node")])
def test_small_workload_schedules_every_measured_pod(use_batch: bool) -> None:
    result = run_workload(load_workload(SMALL), use_batch=use_batch)
    assert result.nodes == 100
    assert result.measured_pods == 300
    assert result.scheduled == 300
    assert result.throughput > 0 and result.p99_ms >= result.p50_ms > 0


def test_bench_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "SchedulingBasicSmall", "--workload-dir", str(SMALL.parent), "--output", "json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert "CPUs" in document["machine"]
    [result] = document["results"]
    assert result["workload"] == "SchedulingBasicSmall" and result["scheduled"] == 300


def test_shipped_performance_workload_parses() -> None:
    workload = load_workload(ROOT / "bench" / "workloads" / "scheduling-basic.yaml")
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
