"""CLI habits a CI job relies on: ``simulate --exit-code``, ``-f -``, ``--version``, global options after the
subcommand; the main paths through the installed console script too, so packaging mistakes fail a test."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.cli.main import build_parser, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_FIT = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: default}
  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
"""


def test_exit_code_gates_on_unschedulable_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = str(EXAMPLES / "cluster.yaml")  # batch-huge fits nowhere
    assert main(["simulate", "-f", cluster]) == 0
    assert main(["simulate", "-f", cluster, "--exit-code"]) == 1
    fits = tmp_path / "fits.yaml"
    fits.write_text(ALL_FIT)
    assert main(["simulate", "-f", str(fits), "--exit-code"]) == 0
    capsys.readouterr()


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(ALL_FIT))
    assert main(["simulate", "-f", "-", "-o", "json"]) == 0
    [pod] = json.loads(capsys.readouterr().out)["pods"]
    assert (pod["name"], pod["node"]) == ("p", "n1")


def test_global_options_may_follow_the_subcommand() -> None:
    parser = build_parser()
    assert parser.parse_args(["simulate", "-f", "x", "-v"]).verbose is True
    assert parser.parse_args(["-v", "simulate", "-f", "x"]).verbose is True
    assert parser.parse_args(["simulate", "-f", "x"]).verbose is False
    late = parser.parse_args(["audit", "query", "log", "--log-level", "info", "--logging-format", "json"])
    assert (late.log_level, late.logging_format) == ("info", "json")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("kubesched ")


def test_the_installed_console_script_runs_the_main_paths(tmp_path: Path) -> None:
    script = shutil.which("kubesched")
    if script is None:
        pytest.skip("the kubesched console script is not installed (pip install -e .)")
    version = subprocess.run([script, "--version"], capture_output=True, text=True, check=True, timeout=120)
    assert version.stdout.startswith("kubesched ")
    done = subprocess.run(
        [script, "simulate", "-f", str(EXAMPLES / "cluster.yaml"), "-o", "json", "--exit-code"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # batch-huge is unschedulable
    assert {pod["name"] for pod in json.loads(done.stdout)["pods"]} >= {"batch-huge", "web-1"}
    valid = subprocess.run(
        [script, "config", "validate", str(EXAMPLES / "config.yaml")], capture_output=True, text=True, timeout=120
    )
    assert valid.returncode == 0, valid.stderr
