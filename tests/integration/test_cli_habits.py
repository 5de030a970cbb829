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


@pytest.mark.parametrize("kind", ["empty-file", "blank-file", "empty-directory", "directory-of-empty-files"])
def test_an_input_without_objects_is_a_warning_and_fails_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Usually a broken pipeline upstream (``kubectl get`` failed and wrote nothing): never a silent ``0/0``."""
    if kind == "empty-file":
        target = tmp_path / "cluster.yaml"
        target.write_text("")
        said = f"{target}: no objects"
    elif kind == "blank-file":
        target = tmp_path / "cluster.yaml"
        target.write_text("---\n# nothing here\n---\n")
        said = f"{target}: no objects"
    elif kind == "empty-directory":
        target = tmp_path / "manifests"
        target.mkdir()
        (target / "notes.txt").write_text("not a manifest")
        said = f"{target}: no .yaml, .yml or .json files"
    else:
        target = tmp_path / "manifests"
        target.mkdir()
        (target / "a.yaml").write_text("")
        said = f"{target / 'a.yaml'}: no objects"
    assert main(["simulate", "-f", str(target)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {said}" in err.splitlines()
    assert main(["simulate", "-f", str(target), "--exit-code"]) == 1
    out, err = capsys.readouterr()
    assert "error: the input holds no objects: nothing was scheduled" in err.splitlines()
    assert out == ""  # no report of nothing


def test_one_empty_input_among_others_is_only_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fits = tmp_path / "fits.yaml"
    fits.write_text(ALL_FIT)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert main(["simulate", "-f", str(fits), "-f", str(empty), "--exit-code"]) == 0
    assert f"warning: {empty}: no objects" in capsys.readouterr().err.splitlines()


def test_empty_standard_input_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["simulate", "-f", "-", "--exit-code"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert "warning: <stdin>: no objects" in err
