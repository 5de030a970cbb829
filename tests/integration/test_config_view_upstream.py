"""``kubesched config view`` is safe to copy: the real kube-scheduler (``KUBEBUILDER_ASSETS``) accepts what it
prints and reads the same plugins at every extension point, every default plugin included, with the same weights
and plugin arguments. Skipped without the binaries (see tests/e2e/conftest.py for how to get them)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli.main import main
from kubesched.harness.envtest import ASSETS_VARIABLE, assets_directory

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: unused}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""

TUNED = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: tuned
  plugins:
    score:
      disabled: [{name: ImageLocality}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
    filter:
      disabled: [{name: NodeUnschedulable}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]}
"""


def _kube_scheduler() -> Path:
    if not os.environ.get(ASSETS_VARIABLE):
        pytest.skip(f"{ASSETS_VARIABLE} is not set: this test runs the real kube-scheduler (setup-envtest)")
    directory = assets_directory()
    binary = directory / "kube-scheduler" if directory is not None else None
    if binary is None or not binary.exists():
        pytest.skip(f"no kube-scheduler in {ASSETS_VARIABLE}")
    return binary


def _points(profile: dict[str, Any]) -> dict[str, list[tuple[str, int]]]:
    plugins = profile.get("plugins") or {}
    return {
        point: [(p["name"], int(p.get("weight") or 0)) for p in (entries or {}).get("enabled") or []]
        for point, entries in plugins.items()
        if point != "multiPoint" and (entries or {}).get("enabled")
    }


@pytest.mark.parametrize("source", [pytest.param(None, id="defaults"), pytest.param(TUNED, id="tuned")])
def test_kube_scheduler_reads_config_view_as_kubesched_does(
    source: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = _kube_scheduler()
    argv = ["config", "view"]
    if source is not None:
        (tmp_path / "in.yaml").write_text(source)
        argv.append(str(tmp_path / "in.yaml"))
    assert main(argv) == 0
    ours = yaml.safe_load(capsys.readouterr().out)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    ours["clientConnection"]["kubeconfig"] = str(tmp_path / "kubeconfig")
    (tmp_path / "view.yaml").write_text(yaml.safe_dump(ours))
    written = tmp_path / "written.yaml"
    done = subprocess.run(
        [str(binary), "--config", str(tmp_path / "view.yaml"), "--write-config-to", str(written)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = yaml.safe_load(written.read_text())
    assert [p["schedulerName"] for p in theirs["profiles"]] == [p["schedulerName"] for p in ours["profiles"]]
    for mine, upstream in zip(ours["profiles"], theirs["profiles"], strict=True):
        assert _points(upstream) == _points(mine), mine["schedulerName"]
        # every default plugin is there: nothing a copy into kube-scheduler would silently switch off
        assert "PodTopologySpread" in dict(_points(upstream)["filter"])
        assert {c["name"]: _set(c["args"]) for c in upstream["pluginConfig"]} == {
            c["name"]: _set(c["args"]) for c in mine["pluginConfig"]
        }


def _set(value: Any) -> Any:
    """The fields that are set: kube-scheduler leaves out empty lists (``omitempty``), which mean the same."""
    if isinstance(value, dict):
        return {k: _set(v) for k, v in value.items() if v != []}
    if isinstance(value, list):
        return [_set(v) for v in value]
    return value
