"""Control characters and bidi overrides from inputs are escaped in table and text output, never sent raw."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.cli.main import main
from kubesched.terminal_text import safe, safe_lines

EVIL = "evil\x1b[2Jname\u202e\x07"
CLUSTER = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: "evil\\e[2Jname\\u202e\\a", namespace: default}
  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
"""


def test_safe_escapes_controls_and_overrides_only() -> None:
    assert safe(EVIL) == "evil\\x1b[2Jname\\u202e\\x07"
    assert safe("策略拒绝: ok\ttab") == "策略拒绝: ok\\x09tab"
    assert safe_lines("a\x1b\nb") == "a\\x1b\nb"


def test_simulate_table_and_audit_query_escape_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    log = tmp_path / "audit.jsonl"
    assert main(["simulate", "-f", str(cluster), "--audit-log", str(log)]) == 0
    out = capsys.readouterr().out
    assert "default/evil\\x1b[2Jname\\u202e\\x07" in out
    assert "\x1b" not in out and "\u202e" not in out
    for output in ("text", "table"):
        assert main(["audit", "query", str(log), "--output", output]) == 0
        shown = capsys.readouterr().out
        assert "evil\\x1b[2Jname" in shown and "\x1b" not in shown and "\u202e" not in shown, output
