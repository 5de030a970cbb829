"""``kubesched bench`` as a command: a broken workload file fails alone while the others run and report; the
bundled workloads run from any directory and ship in the wheel; each result is printed as it finishes; the
progress line appears on a terminal only. Workloads here are tiny: a few nodes, a few pods."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubesched.bench
from kubesched.bench.runner import main as bench_main
from kubesched.bench.workload import WorkloadError, bundled_workloads, parse_workload, scan_workloads
from kubesched.cli.main import build_parser, main

WORKLOADS = Path(kubesched.bench.__file__).parent / "workloads"
ROOT = Path(__file__).resolve().parents[2]


def tiny(name: str, nodes: int = 3, **changes: object) -> dict[str, object]:
    """SchedulingBasicSmall's shape at a few nodes and pods, renamed; ``changes`` replace top-level fields."""
    document = yaml.safe_load((WORKLOADS / "scheduling-basic-small.yaml").read_text())
    document.update(name=name, params={"initNodes": nodes, "initPods": 2, "measurePods": 5}, **changes)
    return dict(document)


def write(directory: Path, file: str, document: dict[str, object] | bytes) -> Path:
    path = directory / file
    if isinstance(document, bytes):
        path.write_bytes(document)
    else:
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def with_op(name: str, index: int, **fields: object) -> dict[str, object]:
    document = tiny(name)
    ops = [dict(op) for op in document["ops"]]  # type: ignore[attr-defined]
    ops[index].update(fields)
    document["ops"] = ops
    return document


# ---- one broken file fails alone ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        pytest.param(bytes(range(128, 256)) * 8, "not UTF-8 text (invalid start byte)", id="binary-file"),
        pytest.param(
            b"name: Broken\nops: [\n  - {opcode: createNodes\n",
            "line 3, column 3: could not parse YAML: expected the node content, but found '-'",
            id="yaml-syntax-error",
        ),
        pytest.param(
            with_op("Broken", 2, collectMetrics="yes"),
            "ops[2].collectMetrics: must be true or false, got 'yes'",
            id="wrong-field-type",
        ),
        pytest.param(
            with_op("Broken", 1, count="ten"), "ops[1].count: must be a non-negative integer, got 'ten'", id="bad-count"
        ),
        pytest.param(
            with_op("Broken", 0, opcode="deleteEverything"),
            "ops[0].opcode: Unsupported value: 'deleteEverything': supported values: createNodes, createPods, churn",
            id="unknown-op",
        ),
        pytest.param(
            with_op("Broken", 2, colectMetrics=True), "ops[2]: unknown field 'colectMetrics'", id="unknown-op-field"
        ),
        pytest.param(
            tiny("Broken", nodes=0),
            "ops[0].count ($initNodes = 0): 0 nodes, but ops[1] creates 2 pod(s) that could never be scheduled",
            id="zero-nodes",
        ),
        pytest.param(  # fails when it runs, not when it is read: the other workloads run all the same
            tiny("Broken", config="no-such-config.yaml"),
            "config: ",
            id="missing-config-file",
        ),
        pytest.param(
            tiny("Broken", podTemplate={"apiVersion": "v1", "kind": "Pod", "spec": {"containers": 5}}),
            "ops[1] pod 0: spec.containers: expected a list, got integer",
            id="bad-pod-template",
        ),
    ],
)
def test_a_broken_workload_file_fails_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: dict[str, object] | bytes, message: str
) -> None:
    write(tmp_path, "a-good.yaml", tiny("Good"))
    bad = write(tmp_path, "b-broken.yaml", broken)
    write(tmp_path, "c-good.yaml", tiny("AlsoGood"))
    assert main(["bench", "--workload-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    [error] = err.splitlines()
    assert error.startswith(f"error: {bad}: ") and message in error, error
    rows = out.splitlines()
    assert rows[0].split()[:2] == ["WORKLOAD", "MODE"]
    assert [row.split()[0] for row in rows[1:-1]] == ["Good", "AlsoGood"]
    assert all(row.split()[-1] == "ok" and row.split()[4] == "5" for row in rows[1:-1])
    assert rows[-1].startswith("machine: ")


def test_broken_files_are_listed_in_the_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    write(tmp_path, "good.yaml", tiny("Good"))
    bad = write(tmp_path, "zero.yaml", tiny("Zero", nodes=0))
    assert main(["bench", "--workload-dir", str(tmp_path), "--output", "json"]) == 1
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert [r["workload"] for r in document["results"]] == ["Good"]
    [failure] = document["failures"]
    assert failure["file"] == str(bad) and "0 nodes" in failure["error"]
    assert err.startswith(f"error: {bad}: ")


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        pytest.param(
            [{"opcode": "createPods", "count": 4}],
            "ops[0]: no createNodes op before it: ops[0] creates 4 pod(s) that could never be scheduled",
            id="pods-before-any-node",
        ),
        pytest.param(
            [{"opcode": "createNodes", "count": 0}, {"opcode": "createPods", "count": 1, "expectUnschedulable": True}],
            "ops[0].count: 0 nodes, but ops[1] creates 1 pod(s)",
            id="zero-nodes-even-for-pods-expected-pending",
        ),
    ],
)
def test_pods_without_nodes_are_refused_naming_the_field(ops: list[dict[str, object]], message: str) -> None:
    with pytest.raises(WorkloadError, match=r"^w\.yaml: ") as exc:
        parse_workload({"name": "x", "nodeTemplate": {}, "podTemplate": {}, "ops": ops}, "w.yaml")
    assert message in str(exc.value)


def test_zero_nodes_and_zero_pods_run_and_report_nothing_scheduled(tmp_path: Path) -> None:
    """Nothing to schedule is no error: the run reports 0 pods, 0 pods/s, no division by zero."""
    document = tiny("Empty", nodes=0)
    document["params"] = {"initNodes": 0, "initPods": 0, "measurePods": 0}
    write(tmp_path, "empty.yaml", document)
    out = io.StringIO()
    args = build_parser().parse_args(["bench", "--workload-dir", str(tmp_path)])
    assert bench_main(args, out, io.StringIO()) == 0
    row = out.getvalue().splitlines()[1].split()
    assert row[:7] == ["Empty", "batch", "0", "0", "0", "0.00", "0.0"]


def test_two_files_with_one_name_fail_the_second(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", tiny("Same"))
    write(tmp_path, "b.yaml", tiny("Same"))
    scan = scan_workloads(tmp_path)
    assert list(scan.workloads) == ["Same"]
    [failure] = scan.failures
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert str(failure) == f"{second}: name: Duplicate value: 'Same' (also the name in {first})"


# ---- the bundled workloads: from any directory, inside the wheel ----------------------------------------


def test_bundled_workloads_run_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    # SecurityAudit reads its config, policy and data next to the workload: none of it is in the cwd.
    params = ["--param", "initNodes=4", "--param", "initPods=2", "--param", "measurePods=6"]
    assert main(["bench", "SchedulingBasicSmall", "SecurityAudit", *params]) == 0
    rows = capsys.readouterr().out.splitlines()[1:3]
    assert [(row.split()[0], row.split()[4], row.split()[-1]) for row in rows] == [
        ("SchedulingBasicSmall", "6", "ok"),
        ("SecurityAudit", "6", "ok"),
    ]


def test_every_bundled_workload_reads_and_names_files_that_exist() -> None:
    with bundled_workloads() as directory:
        scan = scan_workloads(directory)
        assert scan.failures == []
        assert len(scan.workloads) == len(list(directory.glob("*.yaml"))) >= 18
        for workload in scan.workloads.values():
            needed = [workload.config] if workload.config else []
            if workload.opa_server is not None:
                needed += [*workload.opa_server.policies, *workload.opa_server.data]
            assert [path for path in needed if not Path(path).is_file()] == [], workload.name


def test_the_bundled_policy_is_the_example_policy() -> None:
    bundled = WORKLOADS / "security" / "placement.rego"
    assert bundled.read_text() == (ROOT / "examples" / "policies" / "placement.rego").read_text()


def test_the_wheel_carries_the_workloads(tmp_path: Path) -> None:
    """Built from a copy of the sources, so no build/ directory is left in (or reused from) the checkout."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("kubesched-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"kubesched/bench/workloads/{path.relative_to(WORKLOADS).as_posix()}"
        for path in WORKLOADS.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert len(expected) > 20
    assert expected - names == set()


# ---- streaming and progress -----------------------------------------------------------------------------


class Tape:
    """Two streams writing to one tape, so a test sees the order of stdout and stderr writes."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []

    def stream(self, name: str, tty: bool) -> io.StringIO:
        tape = self

        class Stream(io.StringIO):
            def write(self, text: str) -> int:
                tape.writes.append((name, text))
                return super().write(text)

            def isatty(self) -> bool:
                return tty

        return Stream()


@pytest.mark.parametrize("output", ["table", "json"])
def test_each_result_is_printed_as_its_workload_finishes(tmp_path: Path, output: str) -> None:
    write(tmp_path, "a.yaml", tiny("First"))
    write(tmp_path, "b.yaml", tiny("Second"))
    tape = Tape()
    args = build_parser().parse_args(["bench", "--workload-dir", str(tmp_path), "--output", output])
    # stderr a terminal: the progress line shows when each workload starts, so the tape orders rows and runs.
    assert bench_main(args, tape.stream("out", tty=False), tape.stream("err", tty=True)) == 0
    second_starts = next(i for i, (name, text) in enumerate(tape.writes) if name == "err" and "Second:" in text)
    before = "".join(text for name, text in tape.writes[:second_starts] if name == "out")
    if output == "table":
        assert [line.split()[0] for line in before.splitlines()] == ["WORKLOAD", "First"]
    else:
        assert before == ""  # JSON stays one document, written at the end
        assert '"workload": "Second"' in "".join(text for name, text in tape.writes if name == "out")


def test_progress_on_a_terminal_and_silence_elsewhere(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", tiny("Tiny"))
    args = build_parser().parse_args(["bench", "--workload-dir", str(tmp_path)])
    tape = Tape()
    assert bench_main(args, tape.stream("out", tty=False), tape.stream("err", tty=True)) == 0
    progress = "".join(text for name, text in tape.writes if name == "err")
    # The first update of each phase shows at once; the line is erased before the row is printed.
    assert progress.startswith("\rTiny: 0/3 nodes")
    assert "\rTiny: 0/5 pods" in progress
    assert progress.endswith("\r")
    assert progress.replace("\r", "").strip() != ""
    quiet = Tape()
    assert bench_main(args, quiet.stream("out", tty=False), quiet.stream("err", tty=False)) == 0
    assert [name for name, _ in quiet.writes if name == "err"] == []


def test_simulate_shows_progress_on_a_terminal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = ROOT / "examples" / "cluster.yaml"
    assert main(["simulate", "-f", str(cluster)]) == 0
    quiet_out, quiet_err = capsys.readouterr()
    assert "\r" not in quiet_err
    tape = Tape()
    monkeypatch.setattr(sys, "stderr", tape.stream("err", tty=True))
    assert main(["simulate", "-f", str(cluster)]) == 0
    shown = "".join(text for _, text in tape.writes)
    assert f"\rreading {cluster}: 1 objects" in shown
    assert "\rscheduling: 1/" in shown and "pods attempted" in shown
    # Erased before anything else goes to stderr (here: the warning about a pod no profile schedules).
    assert shown.partition("warning:")[0].endswith("\r")
    assert capsys.readouterr().out == quiet_out  # the report itself is unchanged


# ---- rounds and ratios to another workload of the run ---------------------------------------------------


@pytest.mark.parametrize("output", ["table", "json"])
def test_a_relative_workload_runs_right_after_its_peer_and_gets_the_median_of_those_ratios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    from kubesched.bench import runner

    write(tmp_path, "a.yaml", tiny("Base"))
    write(tmp_path, "b.yaml", tiny("Other"))
    write(tmp_path, "c.yaml", tiny("Judged", relativeTo="Base"))
    # Each round: Base, Other, Base again (Judged is measured next to a run of Base), Judged. Base's runs give
    # 100, 90 | 200, 190 | 100, 95 pods/s and Judged's 50 | 150 | 80: the ratios to the run just before are 0.56,
    # 0.79, 0.84 (median 0.79), where Base's median (100, from its round runs) would say 0.8.
    throughput = {"Base": [100.0, 90.0, 200.0, 190.0, 100.0, 95.0], "Other": [1.0] * 3, "Judged": [50.0, 150.0, 80.0]}
    calls: list[str] = []

    def fake_run(workload: Any, *, use_batch: bool, on_progress: Any) -> runner.BenchResult:
        value = throughput[workload.name][sum(1 for name in calls if name == workload.name)]
        calls.append(workload.name)
        return runner.BenchResult(
            workload.name, 3, 5, 5, 5 / value, value, 0.1, 0.2, "batch", cpu_us_per_pod=1e6 / value
        )

    monkeypatch.setattr(runner, "run_workload", fake_run)
    out = io.StringIO()
    args = build_parser().parse_args(["bench", "--workload-dir", str(tmp_path), "--repeat", "3", "--output", output])
    assert bench_main(args, out, io.StringIO()) == 0
    assert calls == ["Base", "Other", "Base", "Judged"] * 3
    if output == "table":
        assert "Base  " in out.getvalue() and " 100.0 " in out.getvalue()  # the median of Base's round runs
        assert "Judged / Base  pods/s 0.79 (rounds: 0.56 0.79 0.84)  CPU per pod 0.79" in out.getvalue()
    else:
        document = json.loads(out.getvalue())
        assert [r["throughput"] for r in document["results"]] == [100.0, 1.0, 80.0]
        (ratio,) = document["relative"]
        assert ratio["workload"] == "Judged" and ratio["relative_to"] == "Base"
        assert [round(r, 4) for r in ratio["throughput_ratio_per_round"]] == [0.5556, 0.7895, 0.8421]
        assert ratio["throughput_ratio"] == ratio["cpu_per_pod_ratio"] == pytest.approx(150 / 190)


def test_a_relative_workload_without_its_peer_in_the_run_gets_no_ratio(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", tiny("Judged", relativeTo="Base"))
    out = io.StringIO()
    args = build_parser().parse_args(["bench", "--workload-dir", str(tmp_path)])
    assert bench_main(args, out, io.StringIO()) == 0
    assert "relative to" not in out.getvalue()


@pytest.mark.parametrize("value", ["Judged", "", 3])
def test_relative_to_must_name_another_workload(value: object) -> None:
    with pytest.raises(WorkloadError, match="relativeTo: must name another workload"):
        parse_workload(tiny("Judged", relativeTo=value), "judged.yaml")


def test_unique_token_mounts_give_every_pod_its_own_token_volume_in_every_container(tmp_path: Path) -> None:
    from kubesched.bench.runner import _PodFactory

    document = with_op("Tokens", 2, uniqueTokenMounts=True)
    workload = parse_workload(document, str(write(tmp_path, "t.yaml", document)))
    op = workload.ops[2]
    factory = _PodFactory(workload)
    pods = [factory.make(op, 2, i).raw for i in range(3)]
    volumes = [[volume["name"] for volume in pod["spec"]["volumes"]] for pod in pods]
    assert volumes == [["kube-api-access-00000"], ["kube-api-access-00001"], ["kube-api-access-00002"]]
    for pod, (volume,) in zip(pods, volumes, strict=True):
        assert pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["path"] == "token"
        assert [m["name"] for c in pod["spec"]["containers"] for m in c["volumeMounts"]] == [volume] * len(
            pod["spec"]["containers"]
        )
