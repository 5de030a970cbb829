"""``kubesched simulate --audit-log`` then ``kubesched audit verify`` / ``audit query``, in-process."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kubesched.audit.chain import head_path
from kubesched.audit.checkpoints import checkpoints_path
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


# ---- signed checkpoints ------------------------------------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    private, public = tmp_path / "audit-key.pem", tmp_path / "audit-key.pub"
    code, out, err = run_cli(capsys, "audit", "keygen", "--private", str(private), "--public", str(public))
    assert (code, err) == (0, "")
    assert out.startswith("key ") and "keep it secret" in out
    return private, public


@pytest.fixture
def signed(tmp_path: Path, capsys: pytest.CaptureFixture[str], keys: tuple[Path, Path]) -> Path:
    path = tmp_path / "signed.jsonl"
    code, _, err = simulate(capsys, path, "--audit-signing-key", str(keys[0]), "--audit-checkpoint-every", "3")
    assert code == 0, err
    return path


def reseal_with_an_edit(path: Path, line: int, old: bytes, new: bytes) -> None:
    """Edit one record and recompute the whole chain and the head file, as someone with disk access can."""
    from kubesched.audit.chain import GENESIS, Head, encode_line, seal

    prev, out = GENESIS, b""
    raws = path.read_bytes().splitlines()
    for number, raw in enumerate(raws, 1):
        sealed = seal(json.loads(raw.replace(old, new) if number == line else raw), prev)
        prev = sealed["hash"]
        out += encode_line(sealed)
    path.write_bytes(out)
    head_path(path).write_bytes(Head(len(raws), prev).to_bytes())


def test_signed_log_verifies_with_its_public_key(
    capsys: pytest.CaptureFixture[str], signed: Path, keys: tuple[Path, Path]
) -> None:
    assert [json.loads(line)["records"] for line in checkpoints_path(signed).read_text().splitlines()] == [3, 6, 7]
    code, out, err = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]))
    head = json.loads(signed.read_text().splitlines()[-1])["hash"]
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[:2] == [f"{signed}: {RECORDS} records, chain intact", f"head: {head} (record {RECORDS})"]
    assert lines[2].startswith("checkpoints: 3 signed by key ") and ", the last at record 7 (" in lines[2]
    code, out, err = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]), "-o", "json")
    report = json.loads(out)
    assert (code, err) == (0, "")
    assert {key: report[key] for key in ("ok", "records", "head", "checkpoints", "anchored", "unanchored_records")} == {
        "ok": True,
        "records": RECORDS,
        "head": head,
        "checkpoints": 3,
        "anchored": RECORDS,
        "unanchored_records": 0,
    }
    assert (report["problem"], report["line"], report["detail"]) == (None, None, None)


def test_without_the_key_verify_says_the_checkpoints_were_not_checked(
    capsys: pytest.CaptureFixture[str], signed: Path
) -> None:
    code, _, err = run_cli(capsys, "audit", "verify", str(signed))
    assert (code, err) == (
        0,
        "warning: signed.jsonl.checkpoints was not checked: pass --public-key to check its signatures\n",
    )


def test_a_rewritten_log_and_head_fail_with_the_public_key(
    capsys: pytest.CaptureFixture[str], signed: Path, keys: tuple[Path, Path]
) -> None:
    reseal_with_an_edit(signed, 2, b'"Scheduled"', b'"Unschedulable"')
    assert run_cli(capsys, "audit", "verify", str(signed))[0] == 0, "the unkeyed chain cannot tell"
    code, out, _ = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]))
    assert code == 1
    assert out.startswith(
        f"{signed}: line 3: altered: it is not the record checkpoint signed.jsonl.checkpoints:1 signed"
    )
    assert out.splitlines()[1].startswith("head: ") and "the last read before the problem" in out
    code, out, _ = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]), "-o", "json")
    report = json.loads(out)
    assert (code, report["ok"], report["problem"], report["line"]) == (1, False, "altered", 3)


def test_a_checkpoint_signed_by_another_key_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Path, keys: tuple[Path, Path]
) -> None:
    other_private, other_public = tmp_path / "other.pem", tmp_path / "other.pub"
    run_cli(capsys, "audit", "keygen", "--private", str(other_private), "--public", str(other_public))
    code, out, _ = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(other_public))
    assert code == 1
    assert f"{signed}: bad signature: " in out and "not by --public-key's key" in out


def test_records_appended_after_the_last_checkpoint_are_unanchored(
    capsys: pytest.CaptureFixture[str], signed: Path, keys: tuple[Path, Path]
) -> None:
    assert simulate(capsys, signed)[0] == 0  # a run without the key appends unsigned records
    code, out, err = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]))
    assert code == 0 and out.startswith(f"{signed}: {2 * RECORDS} records, chain intact")
    assert err == (
        f"warning: {signed}: {RECORDS} record(s) after the last checkpoint (record {RECORDS}) are unanchored: only "
        "the unkeyed chain vouches for them\n"
    )
    code, out, _ = run_cli(capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]), "-o", "json")
    assert (code, json.loads(out)["unanchored_records"], json.loads(out)["anchored"]) == (0, RECORDS, RECORDS)
    code, out, _ = run_cli(
        capsys, "audit", "verify", str(signed), "--public-key", str(keys[1]), "--max-unanchored", "0"
    )
    assert code == 1 and f"unanchored: {RECORDS} record(s) follow the last checkpoint" in out


def test_expect_head(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, _ = run_cli(capsys, "audit", "verify", str(log), "-o", "json")
    head = json.loads(out)["head"]
    code, out, err = run_cli(capsys, "audit", "verify", str(log), "--expect-head", head.upper())
    assert (code, out.splitlines()[-1], err) == (0, "head matches --expect-head", "")
    assert simulate(capsys, log)[0] == 0
    code, out, _ = run_cli(capsys, "audit", "verify", str(log), "--expect-head", head)
    assert code == 1
    assert "unexpected head: the chain ends at " in out and f"that is record {RECORDS}'s hash" in out


def test_query_warns_when_the_log_does_not_verify_and_still_answers(
    capsys: pytest.CaptureFixture[str], log: Path
) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join([*lines[:2], lines[2].replace(b'"node-a"', b'"node-z"'), b"{garbage\n", *lines[3:]]))
    code, out, err = run_cli(capsys, "audit", "query", str(log), "--output", "json")
    assert code == 0
    assert err.splitlines()[0] == (
        f"warning: the log does not verify ({log}: line 3: altered: its content does not match its hash); the "
        "answers below may come from altered, moved or forged records"
    )
    assert "warning: skipped 1 line(s) that are not audit records (the first: line 4" in err
    answer = json.loads(out)
    assert len(answer["records"]) == RECORDS, "every line that is still a record is answered from"
    assert (answer["verification"]["ok"], answer["verification"]["line"]) == (False, 3)
    code, out, err = run_cli(capsys, "audit", "query", str(log), "--no-verify", "--pod", "web-1")
    assert (code, out) == (1, ""), "unverified, a line that is not a record stops the query, as before"
    assert err.startswith("error: ") and "line 4 is not an audit record" in err and err.count("\n") == 1


def test_query_with_the_public_key_warns_about_a_rewritten_log(
    capsys: pytest.CaptureFixture[str], signed: Path, keys: tuple[Path, Path]
) -> None:
    reseal_with_an_edit(signed, 2, b'"Scheduled"', b'"Unschedulable"')
    code, out, err = run_cli(capsys, "audit", "query", str(signed), "--output", "table")
    assert code == 0 and "does not verify" not in err
    code, out, err = run_cli(capsys, "audit", "query", str(signed), "--public-key", str(keys[1]), "--output", "table")
    assert code == 0 and len(out.splitlines()) == RECORDS + 1
    assert err.startswith("warning: the log does not verify (") and "altered: it is not the record checkpoint" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["simulate-signed", "{dir}/missing.pem"],
            "missing.pem: cannot read the signing key",
            id="signing-key-missing",
        ),
        pytest.param(
            ["simulate-signed", "{garbage}"], "garbage.key: not an Ed25519 private key", id="signing-key-garbage"
        ),
        pytest.param(
            ["simulate-signed", "{public}"],
            "audit-key.pub: this is a public key; --audit-signing-key",
            id="public-to-sign",
        ),
        pytest.param(
            ["audit", "verify", "{log}", "--public-key", "{garbage}"],
            "not an Ed25519 public key",
            id="public-key-garbage",
        ),
        pytest.param(
            ["audit", "verify", "{log}", "--public-key", "{private}"], "this is a private key", id="private-to-verify"
        ),
        pytest.param(["audit", "verify", "{log}", "--expect-head", "abc"], "--expect-head 'abc': expected", id="head"),
        pytest.param(["audit", "verify", "{log}", "--max-unanchored", "1"], "--max-unanchored needs", id="max-alone"),
        pytest.param(
            ["audit", "keygen", "--private", "{private}", "--public", "{dir}/new.pub"],
            "audit-key.pem: already exists; not overwriting a key",
            id="keygen-overwrite",
        ),
    ],
)
def test_bad_key_files_and_options_are_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    log: Path,
    keys: tuple[Path, Path],
    argv: list[str],
    message: str,
) -> None:
    garbage = tmp_path / "garbage.key"
    garbage.write_text("not a key\n")
    args = [arg.format(dir=tmp_path, log=log, garbage=garbage, private=keys[0], public=keys[1]) for arg in argv]
    target = tmp_path / "new.jsonl"
    if args[0] == "simulate-signed":
        code, out, err = simulate(capsys, target, "--audit-signing-key", args[1])
    else:
        code, out, err = run_cli(capsys, *args)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not target.exists(), "a bad key is refused before the log is created"


def test_checkpoint_options_need_a_key_and_a_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = simulate(capsys, tmp_path / "a.jsonl", "--audit-checkpoint-every", "10")
    assert (code, err) == (1, "error: --audit-checkpoint-every needs --audit-signing-key: nothing signs checkpoints\n")
    with pytest.raises(SystemExit) as exited:
        simulate(capsys, tmp_path / "a.jsonl", "--audit-checkpoint-every", "0")
    assert exited.value.code == 2
    assert "argument --audit-checkpoint-every: 0 is less than 1" in capsys.readouterr().err
    code, _, err = run_cli(
        capsys, "simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--audit-signing-key", str(tmp_path / "k.pem")
    )
    assert (code, err) == (1, "error: --audit-signing-key needs --audit-log: there is no log to sign\n")


def test_cli_checkpoint_default_matches_the_sink() -> None:
    from kubesched.audit.checkpoints import DEFAULT_EVERY
    from kubesched.audit.sinks.jsonl import DEFAULT_CHECKPOINT_EVERY

    assert cli_audit.CHECKPOINT_EVERY == DEFAULT_CHECKPOINT_EVERY == DEFAULT_EVERY


def test_records_after_the_one_the_head_file_names_are_counted(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    """The head file lags the log after a crash between the log's fsync and the head's replacement, or when
    something other than kubesched appended: those records are reported as unanchored ones are."""
    head = head_path(log).read_bytes()
    assert simulate(capsys, log)[0] == 0
    head_path(log).write_bytes(head)
    code, out, err = run_cli(capsys, "audit", "verify", str(log))
    assert code == 0 and out.startswith(f"{log}: {2 * RECORDS} records, chain intact")
    assert err == (
        f"warning: {log}: {RECORDS} record(s) after record {RECORDS}, the last {head_path(log).name} names: only the "
        "unkeyed chain vouches for them (the writer stopped before it moved the head, or something else appended "
        "them)\n"
    )
    code, out, _ = run_cli(capsys, "audit", "verify", str(log), "-o", "json")
    assert (code, json.loads(out)["after_head_records"]) == (0, RECORDS)


def test_expect_head_matched_is_only_reported_when_expect_head_was_given(
    capsys: pytest.CaptureFixture[str], log: Path
) -> None:
    code, out, _ = run_cli(capsys, "audit", "verify", str(log), "-o", "json")
    document = json.loads(out)
    assert (code, document["expect_head_matched"], document["after_head_records"]) == (0, None, 0)
    code, out, _ = run_cli(capsys, "audit", "verify", str(log), "-o", "json", "--expect-head", document["head"])
    assert (code, json.loads(out)["expect_head_matched"]) == (0, True)
    code, out, _ = run_cli(capsys, "audit", "verify", str(log), "-o", "json", "--expect-head", "0" * 64)
    assert (code, json.loads(out)["expect_head_matched"]) == (1, False)


def test_an_empty_log_without_head_file_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Exit 0: it is also what a writer leaves that stopped before its first record; but a log emptied along with
    its head file looks the same, so it is not silent."""
    empty = tmp_path / "audit.jsonl"
    empty.write_bytes(b"")
    code, out, err = run_cli(capsys, "audit", "verify", str(empty))
    assert (code, out.splitlines()[0]) == (0, f"{empty}: 0 records, chain intact")
    assert err == (
        f"warning: {empty} is empty and has no head file: a log whose records were all removed, with its head file, "
        "looks the same\n"
    )
    code, out, _ = run_cli(capsys, "audit", "verify", str(empty), "-o", "json")
    assert json.loads(out)["after_head_records"] is None  # no head file: nothing to count from


def test_a_config_whose_plugins_fail_to_build_leaves_no_audit_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: default-scheduler\n  plugins: {filter: {enabled: [{name: SecurityAuditFilter}]}}\n"
        "  pluginConfig:\n  - {name: SecurityAuditFilter, args: {policies: [missing.rego]}}\n"
    )
    log = tmp_path / "audit.jsonl"
    code, _, err = run_cli(
        capsys, "simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--config", str(config), "--audit-log", str(log)
    )
    assert code == 1 and "missing.rego" in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.yaml"]


def test_a_failed_run_keeps_an_existing_log_as_it_was(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    before = log.read_bytes()
    code, _, _ = run_cli(
        capsys, "simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--config", "/no/such.yaml", "--audit-log", str(log)
    )
    assert code == 1 and log.read_bytes() == before


def test_run_whose_plugins_fail_to_build_leaves_no_audit_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "current-context: c\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: "
        "{leaderElect: false}\nprofiles:\n- schedulerName: kubesched\n  plugins: {filter: {enabled: "
        "[{name: SecurityAuditFilter}]}}\n  pluginConfig:\n  - {name: SecurityAuditFilter, args: {policies: "
        "[missing.rego]}}\n"
    )
    log = tmp_path / "audit.jsonl"
    argv = ["run", "--config", str(config), "--kubeconfig", str(kubeconfig), "--port", "0", "--audit-log", str(log)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 1 and "missing.rego" in err
    assert not log.exists() and not head_path(log).exists()
    gc.collect()  # nothing the failed start made is left unclosed (pytest fails on what __del__ warns of)
