"""Signed checkpoints: the writer signs what it synced, verify_chain with the public key catches every rewrite
the unkeyed chain and head file let through, and reports records after the last checkpoint as unanchored."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from audittest_helpers import make_record, write_log
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kubesched.audit.chain import GENESIS, AuditLogError, Head, encode_line, head_path, seal
from kubesched.audit.checkpoints import Checkpoint, checkpoints_path, parse_line, sign
from kubesched.audit.keys import key_id
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.audit.verify import (
    ALTERED,
    BAD_CHECKPOINTS,
    BAD_SIGNATURE,
    REMOVED,
    UNANCHORED,
    UNEXPECTED_HEAD,
    UNSIGNED,
    verify_chain,
)

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
NOW = 1_780_000_000.0


def signed_log(
    path: Path, count: int, *, every: int = 4, durability: str = "every", key: Ed25519PrivateKey = KEY, start: int = 0
) -> JsonlSink:
    with JsonlSink(path, durability=durability, signing_key=key, checkpoint_every=every, clock=lambda: NOW) as sink:
        for index in range(start, start + count):
            sink.write(make_record(index))
    return sink


def checkpoints(path: Path) -> list[Checkpoint]:
    lines = checkpoints_path(path).read_bytes().splitlines()
    return [parse_line(raw, f"line {number}") for number, raw in enumerate(lines, 1)]


def rewrite_chain(path: Path, edit: Callable[[int, dict[str, Any]], None]) -> None:
    """What someone with write access to the disk can do: edit records, recompute every hash and the head."""
    prev, out = GENESIS, b""
    lines = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    for number, line in enumerate(lines, 1):
        edit(number, line)
        sealed = seal(line, prev)
        prev = sealed["hash"]
        out += encode_line(sealed)
    path.write_bytes(out)
    head_path(path).write_bytes(Head(len(lines), prev).to_bytes())


def set_result(at: int) -> Callable[[int, dict[str, Any]], None]:
    def edit(number: int, line: dict[str, Any]) -> None:
        if number == at:
            line["result"] = "Unschedulable"

    return edit


# ---- the writer --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "every", "durability", "batch", "expected"),
    [
        pytest.param(10, 4, "every", 100, [4, 8, 10], id="every-n-records-and-at-close"),
        pytest.param(8, 4, "every", 100, [4, 8], id="no-repeat-at-close-when-nothing-is-new"),
        pytest.param(12, 4, "batch", 3, [6, 12], id="batch-at-the-first-sync-point-n-after-the-last"),
        pytest.param(10, 100, "never", 5, [10], id="never-still-signs-at-close"),
        pytest.param(0, 4, "every", 100, [], id="empty-log-nothing-to-sign"),
    ],
)
def test_checkpoints_are_written_at_sync_points_and_close(
    tmp_path: Path, count: int, every: int, durability: str, batch: int, expected: list[int]
) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlSink(
        path, durability=durability, batch_size=batch, signing_key=KEY, checkpoint_every=every, clock=lambda: NOW
    ) as sink:
        for index in range(count):
            sink.write(make_record(index))
    found = checkpoints(path)
    assert [checkpoint.records for checkpoint in found] == expected
    lines = path.read_bytes().splitlines()
    for checkpoint in found:
        assert checkpoint.hash == json.loads(lines[checkpoint.records - 1])["hash"]
        assert checkpoint.key_id == key_id(KEY.public_key())
        assert checkpoint.time == "2026-05-28T20:26:40.000000Z"
        assert checkpoint.verifies(KEY.public_key())
    assert sink.last_checkpoint == (found[-1] if found else None)


def test_a_checkpoint_never_covers_records_whose_fsync_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "audit.jsonl"
    real = os.fsync
    log_syncs: list[int] = []

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == str(path):
            log_syncs.append(fd)
            if len(log_syncs) == 5:
                raise OSError(errno.EIO, "Input/output error")
        real(fd)

    with JsonlSink(path, durability="every", signing_key=KEY, checkpoint_every=2, clock=lambda: NOW) as sink:
        monkeypatch.setattr(os, "fsync", fsync)
        for index in range(5):
            sink.write(make_record(index))
    assert len(log_syncs) == 5
    # The fifth record is in the log, but the disk never confirmed it: the checkpoint at close stops at the fourth.
    assert [checkpoint.records for checkpoint in checkpoints(path)] == [2, 4]
    result = verify_chain(path, public_key=KEY.public_key())
    assert result.ok and (result.records, result.unanchored_records) == (5, 1)


def test_signing_and_verifying_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 10)
    result = verify_chain(path, public_key=KEY.public_key())
    assert result.ok, result.describe()
    assert (result.records, result.checkpoints, result.anchored, result.unanchored_records) == (10, 3, 10, 0)
    assert result.key_ids == (key_id(KEY.public_key()),)
    assert result.warnings == ()


def test_signature_covers_the_schema_records_hash_and_time() -> None:
    checkpoint = sign(KEY, Head(3, "a" * 64), NOW)
    assert checkpoint.verifies(KEY.public_key())
    for changed in (
        Checkpoint(4, checkpoint.hash, checkpoint.time, checkpoint.key_id, checkpoint.signature),
        Checkpoint(3, "b" * 64, checkpoint.time, checkpoint.key_id, checkpoint.signature),
        Checkpoint(3, checkpoint.hash, "2026-05-28T20:26:41.000000Z", checkpoint.key_id, checkpoint.signature),
    ):
        assert not changed.verifies(KEY.public_key())
    assert not checkpoint.verifies(OTHER.public_key())


def test_appending_signs_on_and_a_different_key_may_take_over(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 5)
    signed_log(path, 3, start=5, key=OTHER)  # a rotated key: its checkpoints follow the old ones
    assert [(c.records, c.key_id == key_id(OTHER.public_key())) for c in checkpoints(path)] == [
        (4, False),
        (5, False),
        (8, True),
    ]
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.problem) == (False, BAD_SIGNATURE), "the new key's checkpoints need the new key"
    assert f"line 3: signed by key {key_id(OTHER.public_key())}" in result.detail
    both = verify_chain(path, public_key=[KEY.public_key(), OTHER.public_key()])
    assert both.ok and (both.checkpoints, both.anchored) == (3, 8)


# ---- what the public key catches -----------------------------------------------------------------


def test_rewritten_chain_with_recomputed_head_passes_without_the_key_and_fails_with_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 10)
    rewrite_chain(path, set_result(6))
    assert verify_chain(path).ok, "the unkeyed chain and head file cannot tell"
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.line, result.problem) == (False, 8, ALTERED), result.describe()
    assert "checkpoint audit.jsonl.checkpoints:2 signed" in result.detail
    assert "after line 4" in result.detail, "the checkpoint before it narrows down where the rewrite began"
    assert result.records == 10, "the chain itself was read to its end"


def test_forged_checkpoints_for_a_rewritten_chain_fail_the_signature(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 8)
    rewrite_chain(path, set_result(2))
    # The forger rewrites the checkpoints to name the new hashes, keeping the key id and the old signatures.
    lines = path.read_bytes().splitlines()
    forged = b""
    for checkpoint in checkpoints(path):
        obj = json.loads(checkpoint.to_line())
        obj["hash"] = json.loads(lines[checkpoint.records - 1])["hash"]
        forged += json.dumps(obj).encode() + b"\n"
    checkpoints_path(path).write_bytes(forged)
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.problem) == (False, BAD_SIGNATURE)
    assert "line 1: the signature does not verify" in result.detail


def test_a_checkpoint_signed_by_another_key_fails(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 8)
    rewrite_chain(path, set_result(2))
    # Correct records and hashes for the rewritten chain, properly signed, but by the forger's own key.
    lines = path.read_bytes().splitlines()
    resigned = b"".join(
        sign(OTHER, Head(c.records, json.loads(lines[c.records - 1])["hash"]), NOW).to_line() for c in checkpoints(path)
    )
    checkpoints_path(path).write_bytes(resigned)
    assert verify_chain(path, public_key=OTHER.public_key()).ok, "the forger's key vouches for the forgery"
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.problem) == (False, BAD_SIGNATURE)
    assert f"signed by key {key_id(OTHER.public_key())}, not by --public-key's key {key_id(KEY.public_key())}" in (
        result.detail
    )


def test_records_removed_below_a_checkpoint_are_caught_even_with_the_head_adjusted(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 10)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:9]))
    head_path(path).write_bytes(Head(9, json.loads(lines[8])["hash"]).to_bytes())
    assert verify_chain(path).ok
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.line, result.problem) == (False, 10, REMOVED)
    assert "vouches for 10 records; the last 1 are missing" in result.detail


def test_records_after_the_last_checkpoint_are_unanchored(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 5)
    write_log(path, 3, start=5)  # appended by a writer without the key
    result = verify_chain(path, public_key=KEY.public_key())
    assert result.ok, result.describe()
    assert (result.records, result.anchored, result.unanchored_records) == (8, 5, 3)
    assert result.warnings == (
        f"{path}: 3 record(s) after the last checkpoint (record 5) are unanchored: only the unkeyed chain vouches "
        "for them",
    )
    assert result.to_json()["unanchored_records"] == 3
    too_many = verify_chain(path, public_key=KEY.public_key(), max_unanchored=2)
    assert (too_many.ok, too_many.problem) == (False, UNANCHORED)
    assert verify_chain(path, public_key=KEY.public_key(), max_unanchored=3).ok


def test_a_log_without_checkpoints_fails_with_the_key(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.problem) == (False, UNSIGNED)
    assert "audit.jsonl.checkpoints does not exist" in result.detail
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert verify_chain(empty, public_key=KEY.public_key()).ok


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(lambda lines: [lines[1], lines[0], *lines[2:]], "records go back from 8 to 4", id="reordered"),
        pytest.param(lambda lines: [lines[0], b"{not json", *lines[1:]], "line 2: not a checkpoint", id="garbled"),
        pytest.param(
            lambda lines: [lines[0].replace(b'"records":4', b'"records":-4'), *lines[1:]],
            "line 1: records: must be a whole number",
            id="negative-records",
        ),
        pytest.param(
            lambda lines: [lines[0].replace(b'"signature":"', b'"signature":"!'), *lines[1:]],
            "line 1: signature: not base64",
            id="signature-not-base64",
        ),
    ],
)
def test_a_damaged_checkpoints_file_fails_naming_its_line(
    tmp_path: Path, damage: Callable[[list[bytes]], list[bytes]], message: str
) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 10)
    sidecar = checkpoints_path(path)
    sidecar.write_bytes(b"\n".join(damage(sidecar.read_bytes().splitlines())) + b"\n")
    result = verify_chain(path, public_key=KEY.public_key())
    assert (result.ok, result.problem) == (False, BAD_CHECKPOINTS)
    assert str(sidecar) in result.detail and message in result.detail
    assert result.records == 10


def test_a_torn_last_checkpoint_is_ignored_and_cut_off_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 10)
    sidecar = checkpoints_path(path)
    whole = sidecar.read_bytes()
    sidecar.write_bytes(whole + whole.splitlines(keepends=True)[-1][:40])
    result = verify_chain(path, public_key=KEY.public_key())
    assert result.ok and result.checkpoints == 3
    assert result.warnings == (f"{sidecar}: ignored a torn last line (a checkpoint a crash interrupted)",)
    signed_log(path, 1, start=10)
    assert [c.records for c in checkpoints(path)] == [4, 8, 10, 11]


# ---- --expect-head ---------------------------------------------------------------------------------


def test_expect_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 4)
    lines = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    result = verify_chain(path, expect_head=lines[-1]["hash"])
    assert result.ok and (result.anchored, result.unanchored_records, result.warnings) == (4, 0, ())
    older = verify_chain(path, expect_head=lines[1]["hash"])
    assert (older.ok, older.problem) == (False, UNEXPECTED_HEAD)
    assert "that is record 2's hash: 2 record(s) were appended since" in older.detail
    rewritten = verify_chain(path, expect_head="c" * 64)
    assert (rewritten.ok, rewritten.problem) == (False, UNEXPECTED_HEAD)
    assert "no record of the log has that hash" in rewritten.detail
    rewrite_chain(path, set_result(4))
    assert not verify_chain(path, expect_head=lines[-1]["hash"]).ok, "an external copy of the head catches a rewrite"


def test_json_form(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 6)
    lines = path.read_bytes().splitlines()
    assert verify_chain(path, public_key=KEY.public_key()).to_json() == {
        "path": str(path),
        "ok": True,
        "records": 6,
        "head": json.loads(lines[-1])["hash"],
        "head_file": True,
        "key_ids": [key_id(KEY.public_key())],
        "checkpoints": 2,
        "last_checkpoint": {"records": 6, "hash": json.loads(lines[-1])["hash"], "time": "2026-05-28T20:26:40.000000Z"},
        "expect_head_matched": None,  # no expect_head was given
        "after_head_records": 0,
        "anchored": 6,
        "unanchored_records": 0,
        "problem": None,
        "line": None,
        "detail": None,
        "warnings": [],
    }
    unchecked = verify_chain(path).to_json()
    assert (unchecked["checkpoints"], unchecked["anchored"], unchecked["unanchored_records"]) == (None, None, None)
    assert unchecked["warnings"] == [
        "audit.jsonl.checkpoints was not checked: pass --public-key to check its signatures"
    ]


# ---- the writer refuses to sign over a rewrite --------------------------------------------------------


def test_the_writer_refuses_to_sign_on_after_a_rewritten_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 8)
    rewrite_chain(path, set_result(3))
    before = path.read_bytes(), checkpoints_path(path).read_bytes()
    with pytest.raises(AuditLogError, match=r"cannot append: line 8 is not the record its last checkpoint"):
        signed_log(path, 1, start=8)
    assert (path.read_bytes(), checkpoints_path(path).read_bytes()) == before


def test_the_writer_refuses_a_last_checkpoint_it_did_not_sign(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 4)
    sidecar = checkpoints_path(path)
    obj = json.loads(sidecar.read_bytes().splitlines()[-1])
    obj["time"] = "2030-01-01T00:00:00.000000Z"  # the key id is ours, the signature no longer is
    sidecar.write_bytes(json.dumps(obj).encode() + b"\n")
    with pytest.raises(AuditLogError, match="claims this key but its signature does not verify"):
        signed_log(path, 1, start=4)


def test_a_new_log_beside_old_checkpoints_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    signed_log(path, 4)
    path.unlink()
    with pytest.raises(AuditLogError, match=r"the log is new but audit.jsonl.checkpoints vouches for 4 records"):
        signed_log(path, 1)
    assert not path.exists(), "a refused start leaves no empty log behind"


def test_checkpoint_every_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="checkpoint_every must be at least 1"):
        JsonlSink(tmp_path / "audit.jsonl", signing_key=KEY, checkpoint_every=0)
