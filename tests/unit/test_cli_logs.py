"""``--logging-format json``: one JSON object per line, with the structured fields the scheduler passes."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from kubesched.cli.logs import JsonFormatter
from kubesched.cli.main import main
from kubesched.testing.builders import make_node, make_pod


def test_a_record_with_extra_fields_becomes_one_json_object() -> None:
    record = logging.LogRecord("kubesched.scheduler", logging.DEBUG, "x.py", 1, "bound %s", ("p",), None)
    record.pod, record.node, record.profile, record.feasibleNodes = "ns/p", "n1", "default-scheduler", 3
    entry = json.loads(JsonFormatter().format(record))
    assert {k: v for k, v in entry.items() if k != "ts"} == {
        "level": "debug",
        "logger": "kubesched.scheduler",
        "msg": "bound p",
        "pod": "ns/p",
        "node": "n1",
        "profile": "default-scheduler",
        "feasibleNodes": 3,
    }


def test_simulate_logs_each_pod_outcome_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path))
    nodes = [make_node("n1").capacity(cpu="1", memory="1Gi", pods=10).obj().raw]
    pods = [make_pod("fits").req(cpu="500m").obj().raw, make_pod("too-big").req(cpu="2").obj().raw]
    (directory / "cluster.yaml").write_text(yaml.safe_dump_all([*nodes, *pods]))
    try:
        assert (
            main(
                ["--logging-format", "json", "--log-level", "debug", "simulate", "-f", str(directory / "cluster.yaml")]
            )
            == 0
        )
    finally:
        logging.getLogger().handlers.clear()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    outcomes = {entry["pod"]: entry for entry in lines if "pod" in entry}
    assert outcomes["default/fits"]["msg"] == "Successfully bound pod to node"
    assert outcomes["default/fits"]["node"] == "n1"
    assert outcomes["default/too-big"]["msg"] == "Unable to schedule pod; no fit; waiting"
    assert outcomes["default/too-big"]["err"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
