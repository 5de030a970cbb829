"""``kubesched bench --api`` on a tiny shape: both schedulers, as processes, bind every pod through kube-apiserver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.cli.main import main

pytestmark = pytest.mark.e2e


def test_both_schedulers_bind_every_pod_and_the_ratio_is_reported(
    assets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its own control planes (one fresh per scheduler, as the benchmark does), not the session's shared one.
    argv = ["bench", "--api", "--nodes", "20", "--init-pods", "10", "--pods", "100", "-o", "json"]
    code = main([*argv, "--workdir", str(tmp_path), "--stall-timeout", "30"])
    out = capsys.readouterr().out
    assert code == 0, out
    result = json.loads(out)
    assert result["shape"] == {"nodes": 20, "init_pods": 10, "pods": 100, "qps": 5000.0, "burst": 5000}
    assert set(result["schedulers"]) == {"kubesched", "kube-scheduler"}
    for name, summary in result["schedulers"].items():
        assert summary["bound"] == summary["pods"] == 100, name
        assert summary["outcomes"] == ["complete"], name
        assert summary["pods_per_second"] > 0 and summary["pods_per_second_from_start"] > 0, name
        assert 0 < summary["start_to_first_seconds"] <= summary["start_to_last_seconds"], name
    assert result["ratio"] is not None and result["ratio"] > 0
    assert result["creation_seconds"] > 0
    assert result["machine"]["cpus"] >= 1 and result["machine"]["cpu_model"]
    for run in result["runs"]:
        assert Path(run["log"]).is_file()
