"""Log lines: ``--logging-format json`` is one JSON object per line, with the structured fields the scheduler
passes; text is klog's layout (severity, date and time, then the message and the same fields as key="value")."""

from __future__ import annotations

import json
import logging
import re
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


KLOG_HEADER = re.compile(r"^([IWE])(\d{4}) (\d{2}:\d{2}:\d{2}\.\d{6}) ([\w.]+)\] ")


def test_simulate_text_logs_name_the_pod_node_and_time_like_klog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [make_node("n1").capacity(cpu="1", memory="1Gi", pods=10).obj().raw]
    pods = [make_pod("fits").req(cpu="500m").obj().raw, make_pod("too-big").req(cpu="2").obj().raw]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([*nodes, *pods]))
    try:
        assert main(["-v", "simulate", "-f", str(tmp_path / "cluster.yaml")]) == 0
    finally:
        logging.getLogger().handlers.clear()
    lines = capsys.readouterr().err.splitlines()
    [waiting] = [line for line in lines if "Unable to schedule pod" in line]
    header = KLOG_HEADER.match(waiting)
    assert header is not None, waiting
    assert header.group(1) == "I" and header.group(4).startswith("kubesched")
    assert waiting[header.end() :].startswith('"Unable to schedule pod; no fit; waiting" pod="default/too-big" ')
    assert 'err="0/1 nodes are available: 1 Insufficient cpu.' in waiting
    [bound] = [line for line in lines if "Successfully bound pod" in line]
    assert 'pod="default/fits"' in bound and 'node="n1"' in bound


def test_a_record_without_fields_is_its_message_and_values_are_quoted_like_go() -> None:
    from kubesched.cli.logs import TextFormatter

    plain = logging.LogRecord("kubesched", logging.WARNING, "x.py", 1, "skipping %s", ("x",), None)
    line = TextFormatter().format(plain)
    assert KLOG_HEADER.match(line) is not None and line.startswith("W")
    assert line.endswith("kubesched] skipping x")
    fielded = logging.LogRecord("kubesched.scheduler", logging.ERROR, "x.py", 1, "bind failed", (), None)
    fielded.pod, fielded.attempts, fielded.err = "ns/p", 3, 'said "no"\nthen left'
    assert (
        TextFormatter()
        .format(fielded)
        .endswith('] "bind failed" pod="ns/p" attempts=3 err="said \\"no\\"\\nthen left"')
    )
