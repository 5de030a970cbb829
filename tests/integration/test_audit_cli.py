"""``kubesched simulate --audit-log`` then ``kubesched audit verify`` / ``audit query``, in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kubesched.audit.chain import head_path
from kubesched.audit.sinks.jsonl import DURABILITIES
from kubesched.cli import audit as cli_audit
from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# examples/cluster.yaml: seven pods get an attempt (the gated one never does).
RECORDS = 7


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


START = "2026-03-01T12:00:00Z"


def simulate(capsys: pytest.CaptureFixture[str], log: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(
        capsys,
        "simulate",
        "-f",
        str(EXAMPLES / "cluster.yaml"),
        "--config",
        str(EXAMPLES / "config.yaml"),
        "--audit-log",
        str(log),
        "--time",
        START,
        *extra,
    )


@pytest.fixture
def log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "audit.jsonl"
    code, _, err = simulate(capsys, path)
    assert code == 0
    assert f"audit: {RECORDS} record(s) appended to {path}" in err
    return path


def test_simulate_writes_a_verifiable_log(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, err = run_cli(capsys, "audit", "verify", str(log))
    head = json.loads(log.read_text().splitlines()[-1])["hash"]
    assert (code, out, err) == (0, f"{log}: {RECORDS} records, chain intact\nhead: {head} (record {RECORDS})\n", "")
    results = {json.loads(line)["pod"]["name"]: json.loads(line)["result"] for line in log.read_text().splitlines()}
    assert results["batch-huge"] == "Unschedulable" and results["trainer"] == "Scheduled"
    assert "gated" not in results, "a pod held at PreEnqueue was never decided"


@pytest.mark.parametrize("durability", [pytest.param(d, id=f"durability-{d}") for d in DURABILITIES])
def test_every_durability_gives_the_same_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log: Path, durability: str
) -> None:
    other = tmp_path / f"{durability}.jsonl"
    code, _, _ = simulate(capsys, other, "--audit-durability", durability)
    assert code == 0
    assert other.read_bytes() == log.read_bytes(), "a seeded simulation at a given --time is reproducible to the byte"


def test_appending_runs_continues_the_chain_with_new_ids(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    first = log.read_text().splitlines()
    assert simulate(capsys, log)[0] == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 2 * RECORDS
    assert lines[RECORDS]["prev_hash"] == json.loads(first[-1])["hash"]
    assert len({line["decision_id"] for line in lines}) == 2 * RECORDS
    code, out, _ = run_cli(capsys, "audit", "verify", str(log))
    assert (code, out.splitlines()[0]) == (0, f"{log}: {2 * RECORDS} records, chain intact")


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        pytest.param(
            lambda lines: [*lines[:2], lines[2].replace(b'"node-a"', b'"node-z"'), *lines[3:]],
            "line 3: altered: its content does not match its hash",
            id="edited-node",
        ),
        pytest.param(
            lambda lines: [*lines[:3], *lines[4:]],
            "line 4: removed: the record before it is missing",
            id="deleted-record",
        ),
        pytest.param(
            lambda lines: [lines[0], lines[2], lines[1], *lines[3:]],
            "line 2: reordered: it follows line 3's record, not line 1's",
            id="swapped-records",
        ),
        pytest.param(lambda lines: lines[:-1], f"line {RECORDS}: removed: audit.jsonl.head says", id="last-deleted"),
    ],
)
def test_verify_names_the_first_bad_record(
    capsys: pytest.CaptureFixture[str], log: Path, damage: Callable[[list[bytes]], list[bytes]], expected: str
) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(damage(lines)))
    code, out, _ = run_cli(capsys, "audit", "verify", str(log))
    assert code == 1
    assert out.startswith(f"{log}: {expected}")


def test_verify_warns_without_head_file(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    head_path(log).unlink()
    code, out, err = run_cli(capsys, "audit", "verify", str(log))
    assert (code, out.splitlines()[0]) == (0, f"{log}: {RECORDS} records, chain intact")
    assert err == f"warning: {log} has no head file: records removed from its end cannot be detected\n"


def test_query_explains_why_a_pod_landed_where_it_did(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, _ = run_cli(capsys, "audit", "query", str(log), "--pod", "default/web-1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "default/web-1: Scheduled to node node-a"
    assert lines[2].startswith("  phases: queued 2026-03-01T12:00:00.000000Z, filtered +")
    assert "  policy: no verdict recorded" in lines
    assert lines[-1].startswith("  top scores: node-a 436 (ImageLocality 0, NodeResourcesBalancedAllocation 95, ")
    assert lines[-1].count(" (") == 3, "the three best nodes"


def test_query_explains_a_failure(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, _ = run_cli(capsys, "audit", "query", str(log), "--pod", "batch-huge")
    assert code == 0
    assert out.splitlines()[0] == "default/batch-huge: Unschedulable"
    assert "  why: 0/5 nodes are available: 1 node(s) had untolerated taint(s)," in out


@pytest.mark.parametrize(
    ("filters", "pods"),
    [
        pytest.param(["--node", "node-b"], ["trainer"], id="node"),
        pytest.param(["--node", "node-a", "--pod", "default/web-2"], ["web-2"], id="node-and-pod"),
        pytest.param(["--since", "2026-03-01T12:00:00Z"], None, id="since-rfc3339-includes-the-instant"),
        pytest.param(["--since", "2026-03-01T12:00:01Z"], [], id="since-after-everything"),
        pytest.param(["--since", "10m"], [], id="since-duration-is-relative-to-the-real-now"),
        pytest.param(["--verdict", "deny"], [], id="no-policy-plugins-no-denials"),
    ],
)
def test_query_filters_as_json(
    capsys: pytest.CaptureFixture[str], log: Path, filters: list[str], pods: list[str] | None
) -> None:
    code, out, _ = run_cli(capsys, "audit", "query", str(log), *filters, "--output", "json")
    assert code == 0
    names = [record["pod"]["name"] for record in json.loads(out)["records"]]
    if pods is None:
        assert len(names) == RECORDS
    else:
        assert names == pods


def test_query_table_and_no_match(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, _ = run_cli(capsys, "audit", "query", str(log), "--output", "table")
    assert code == 0
    assert out.splitlines()[0].split() == ["TIME", "POD", "RESULT", "TARGET", "VERDICT", "REASON"]
    assert len(out.splitlines()) == RECORDS + 1
    code, out, _ = run_cli(capsys, "audit", "query", str(log), "--pod", "nobody/none")
    assert (code, out) == (0, "no matching decisions\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["audit", "verify", "{dir}/missing.jsonl"], "cannot read the audit log", id="verify-missing"),
        pytest.param(["audit", "query", "{log}", "--since", "soon"], "--since 'soon': not an RFC 3339", id="since"),
        pytest.param(["audit", "query", "{log}", "--pod", "a/b/c"], "expected namespace/name", id="pod"),
        pytest.param(["audit", "query", "{dir}/missing.jsonl"], "cannot read the audit log", id="query-missing"),
    ],
)
def test_user_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log: Path, argv: list[str], message: str
) -> None:
    args = [arg.format(dir=tmp_path, log=log) for arg in argv]
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_simulate_refuses_a_damaged_log(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    log.write_bytes(log.read_bytes()[:-10])
    before = log.read_bytes()
    code, out, err = simulate(capsys, log)
    assert (code, out) == (1, "")
    assert err.strip().endswith("names the problem") and "cannot append" in err
    assert log.read_bytes() == before


def test_bad_durability_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        simulate(capsys, tmp_path / "a.jsonl", "--audit-durability", "sometimes")
    assert exited.value.code == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


def test_cli_durability_choices_match_the_sink() -> None:
    assert cli_audit.DURABILITIES == DURABILITIES


def test_virtual_time_starts_now_by_default_so_since_finds_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log: Path
) -> None:
    stamps = {json.loads(line)["timestamp"][:19] for line in log.read_text().splitlines()}
    assert stamps == {START[:19]}
    fresh = tmp_path / "now.jsonl"
    code, _, _ = run_cli(
        capsys, "simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--config", str(EXAMPLES / "config.yaml"),
        "--audit-log", str(fresh),
    )  # fmt: skip
    assert code == 0
    code, out, _ = run_cli(capsys, "audit", "query", str(fresh), "--since", "1h", "--output", "json")
    assert (code, len(json.loads(out)["records"])) == (0, RECORDS)
    code, out, _ = run_cli(capsys, "audit", "query", str(log), "--since", "1h", "--output", "json")
    assert (code, json.loads(out)["records"]) == (0, []), "the run at --time START is older than an hour"
