"""What a new user of ``kubesched bench`` meets first: ``--param`` overrides checked against what the workloads
declare (a typo is an error with a suggestion), a size that cannot hold its pods refused before the run, ``bench
--list``, and a bare ``bench`` that asks what to run rather than starting every shape at full size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import kubesched.bench
from kubesched.bench.workload import WorkloadError, bundled_workloads, parse_workload, scan_workloads
from kubesched.cli.main import main

WORKLOADS = Path(kubesched.bench.__file__).parent / "workloads"


def tiny(name: str, **params: int) -> dict[str, object]:
    document = yaml.safe_load((WORKLOADS / "scheduling-basic-small.yaml").read_text())
    document.update(name=name, params={"initNodes": 3, "initPods": 2, "measurePods": 5, **params})
    return dict(document)


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()[1:] if line and not line.startswith("machine:")]


# ---- a size whose pods cannot fit ------------------------------------------------------------------------


def test_shrinking_only_the_nodes_is_refused_before_the_run_naming_the_params(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """10 nodes of 4 CPU hold 400 pods of 100m; SchedulingBasic's 1000 initPods would leave its 20 measured pods
    nowhere to go and fail the placement check after the run: it is refused up front, saying what to change."""
    code = main(["bench", "SchedulingBasic", "--param", "initNodes=10", "--param", "measurePods=20"])
    out, err = capsys.readouterr()
    assert code == 1
    [error] = err.splitlines()
    assert "scheduling-basic.yaml" in error
    assert "1020 pod(s)" in error and "$initPods = 1000" in error and "$measurePods = 20" in error
    assert "102 cpu" in error and "40 cpu" in error and "10 node(s)" in error and "$initNodes = 10" in error
    assert "at most 400" in error
    assert rows(out) == [], "nothing ran"


def test_shrinking_every_count_runs_and_schedules_every_measured_pod(capsys: pytest.CaptureFixture[str]) -> None:
    params = ["--param", "initNodes=10", "--param", "initPods=100", "--param", "measurePods=20"]
    assert main(["bench", "SchedulingBasic", *params]) == 0
    [row] = rows(capsys.readouterr().out)
    assert (row[0], row[3], row[4], row[-1]) == ("SchedulingBasic", "20", "20", "ok")


def test_pods_that_may_preempt_or_are_expected_pending_are_not_counted_against_the_nodes() -> None:
    with bundled_workloads() as directory:
        for file, params in [
            ("preemption-basic.yaml", {"initNodes": 10, "initPods": 40, "measurePods": 10}),
            ("unschedulable-waiting.yaml", {"initNodes": 10, "initPods": 10, "waitingPods": 100, "measurePods": 10}),
        ]:
            document = yaml.safe_load((directory / file).read_text())
            parse_workload(document, str(directory / file), params)  # no error


# ---- --param names and values ----------------------------------------------------------------------------


def test_a_mistyped_param_is_an_error_with_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "SchedulingBasic", "--param", "initNodes=10", "--param", "measurepods=5"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    [error] = err.splitlines()
    assert "--param measurepods=5" in error
    assert 'did you mean "measurePods"?' in error
    assert "initNodes, initPods, measurePods" in error


def test_a_param_no_selected_workload_declares_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(tiny("Tiny")))
    code = main(["bench", "--workload-dir", str(tmp_path), "--all", "--param", "waitingPods=3"])
    assert code == 1
    [error] = capsys.readouterr().err.splitlines()
    assert "waitingPods" in error and "initNodes, initPods, measurePods" in error


def test_a_param_applies_to_the_workloads_that_declare_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(tiny("WithExtra", extra=1)))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(tiny("Without")))
    assert main(["bench", "--workload-dir", str(tmp_path), "--all", "--param", "extra=2"]) == 0
    out = capsys.readouterr().out
    assert [row[0] for row in rows(out)] == ["WithExtra", "Without"]
    assert "params overridden: extra=2" in out


def test_a_param_value_that_leaves_no_nodes_is_an_error_about_that_value(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "SchedulingBasic", "--param", "initNodes=0"])
    err = capsys.readouterr().err
    assert code == 1
    [error] = err.splitlines()
    assert "unknown workload" not in error and "unreadable" not in error
    assert "scheduling-basic.yaml" in error and "($initNodes = 0): 0 nodes" in error


# ---- bench --list, and bench with nothing named ---------------------------------------------------------


def test_bench_list_names_every_bundled_workload_with_its_size_and_what_it_measures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["WORKLOAD", "NODES", "PODS", "PARAMS", "MEASURES"]
    listed = {line.split()[0]: line for line in lines[1:]}
    with bundled_workloads() as directory:
        scan = scan_workloads(directory)
    assert set(listed) == set(scan.workloads)
    basic = listed["SchedulingBasic"].split()
    assert basic[1:4] == ["5000", "1000+10000", "initNodes=5000,initPods=1000,measurePods=10000"]
    assert "1000 pods placed first" in listed["SchedulingBasic"]
    assert listed["MultiCluster"].split()[1] == "100x50"
    for workload in scan.workloads.values():
        assert workload.description, f"{workload.name} says nothing about what it measures"


def test_bench_list_shows_the_sizes_after_overrides_and_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list", "SchedulingBasic", "--param", "measurePods=500", "-o", "json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["name"] == "SchedulingBasic"
    assert (entry["nodes"], entry["pods"], entry["measured_pods"]) == (5000, 1500, 500)
    assert entry["params"] == {"initNodes": 5000, "initPods": 1000, "measurePods": 500}
    assert entry["file"].endswith("scheduling-basic.yaml")


def test_bare_bench_asks_for_a_workload_or_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "--all" in err and "--list" in err


def test_all_runs_every_workload_of_the_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(tiny("One")))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(tiny("Two")))
    assert main(["bench", "--workload-dir", str(tmp_path), "--all"]) == 0
    assert [row[0] for row in rows(capsys.readouterr().out)] == ["One", "Two"]


def test_a_workload_named_with_all_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "SchedulingBasic", "--all"]) == 2
    assert "--all" in capsys.readouterr().err


def test_the_capacity_error_is_a_workload_error() -> None:
    document = tiny("Packed")
    document["params"] = {"initNodes": 1, "initPods": 0, "measurePods": 50}
    with pytest.raises(WorkloadError, match=r"^p\.yaml: ops\[2\]: 50 pod\(s\) \(\$measurePods = 50\) ask for 5 cpu"):
        parse_workload(document, "p.yaml")
