"""Check a hash-chained audit log: is every record there, unaltered, in the order it was written, and signed?

Called by ``kubesched audit verify FILE`` and ``audit query`` (:mod:`kubesched.cli.audit`) and by tests. Reads the
log once, line by line, and stops at the first line that is wrong, naming it and the problem (``truncated``,
``garbled``, ``altered``, ``reordered``, ``removed``: docs/reference/audit-schema.md#verify-results). It checks the
chain, the head file, the signed checkpoints with the public keys given (a log with records but no checkpoints file
fails then), and an expected head kept elsewhere; records after the last checkpoint are counted as unanchored, and
records after the one the head file names are counted too (a warning, as is an empty log without a head file). What
each piece of evidence can and cannot prove: docs/explanation/threat-model.md#what-each-piece-detects.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.audit.chain import GENESIS, HASH_KEY, PREV_KEY, AuditLogError, chain_hash, head_path, is_hash, read_head
from kubesched.audit.lines import TOO_LONG, bounded_lines, max_line_bytes, too_long_detail

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from kubesched.audit.checkpoints import Checkpoint

TRUNCATED = "truncated"
GARBLED = "garbled"
ALTERED = "altered"
REORDERED = "reordered"
REMOVED = "removed"
BAD_HEAD = "bad head file"
BAD_CHECKPOINTS = "bad checkpoints file"
BAD_SIGNATURE = "bad signature"
UNSIGNED = "unsigned"
UNANCHORED = "unanchored"
UNEXPECTED_HEAD = "unexpected head"


@dataclass(frozen=True, slots=True)
class VerifyResult:
    path: Path
    ok: bool
    records: int  # intact records read (all of them when ok; those before the first bad line otherwise)
    line: int | None = None  # the first bad line (1-based)
    problem: str = ""
    detail: str = ""
    head: str = GENESIS  # hash of the last intact record
    head_file: bool = False  # a head file was found and checked
    key_ids: tuple[str, ...] = ()  # the public keys' ids, when checkpoints were checked
    checkpoints: int = 0  # checkpoints whose signature and (records, hash) were checked
    last_checkpoint: Checkpoint | None = None
    expected_head: bool = False  # expect_head was given and the chain ends there
    warnings: tuple[str, ...] = field(default=())
    expect_head_given: bool = False
    head_file_records: int | None = None  # the record the head file names (None: no head file)

    @property
    def checked_anchors(self) -> bool:
        """Was anything beyond the unkeyed chain and head file asked for (a public key, an expected head)?"""
        return bool(self.key_ids) or self.expected_head

    @property
    def anchored(self) -> int:
        """Records vouched for by a signed checkpoint or by the expected head."""
        if self.expected_head:
            return self.records
        return self.last_checkpoint.records if self.last_checkpoint is not None else 0

    @property
    def after_head_records(self) -> int | None:
        """Records after the one the head file names (the head lags, or records were appended); None without one."""
        return None if self.head_file_records is None else max(self.records - self.head_file_records, 0)

    @property
    def unanchored_records(self) -> int | None:
        """Records after the last anchor; None when no anchor was asked for (nothing was checked)."""
        return self.records - self.anchored if self.checked_anchors else None

    def describe(self) -> str:
        if self.ok:
            return f"{self.path}: {self.records} records, chain intact"
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.path}: {where}{self.problem}: {self.detail}"

    def report(self) -> list[str]:
        """The lines ``audit verify`` prints: the verdict, the head hash (always), what the checkpoints said."""
        lines = [self.describe()]
        where = "" if self.ok else ", the last read before the problem"
        lines.append(f"head: {self.head} (record {self.records}{where})")
        if self.key_ids and self.ok:
            last = self.last_checkpoint
            keys = f"key{'s' if len(self.key_ids) > 1 else ''} {', '.join(self.key_ids)}"
            if last is None:
                lines.append(f"checkpoints: none ({keys})")
            else:
                lines.append(
                    f"checkpoints: {self.checkpoints} signed by {keys}, the last at record {last.records} ({last.time})"
                )
        if self.expected_head:
            lines.append("head matches --expect-head")
        return lines

    def to_json(self) -> dict[str, Any]:
        last = self.last_checkpoint
        return {
            "path": str(self.path),
            "ok": self.ok,
            "records": self.records,
            "head": self.head,
            "head_file": self.head_file,
            "key_ids": list(self.key_ids),
            "checkpoints": self.checkpoints if self.key_ids else None,
            "last_checkpoint": None
            if last is None
            else {"records": last.records, "hash": last.hash, "time": last.time},
            "expect_head_matched": self.expected_head if self.expect_head_given else None,
            "after_head_records": self.after_head_records,
            "anchored": self.anchored if self.checked_anchors else None,
            "unanchored_records": self.unanchored_records,
            "problem": self.problem or None,
            "line": self.line,
            "detail": self.detail or None,
            "warnings": list(self.warnings),
        }


def verify_chain(
    path: str | Path,
    *,
    public_key: Ed25519PublicKey | Sequence[Ed25519PublicKey] | None = None,
    expect_head: str | None = None,
    max_unanchored: int | None = None,
) -> VerifyResult:
    """Check the whole chain of ``path``, its head file if any, and with ``public_key`` (or keys) its checkpoints.

    ``expect_head`` (a hash) must be the chain's last; ``max_unanchored`` bounds the records after the last
    anchor. AuditLogError when the log cannot be read at all; every other problem is in the result.
    """
    path = Path(path)
    try:
        head = read_head(path)
    except AuditLogError as exc:
        return VerifyResult(path, False, 0, problem=BAD_HEAD, detail=str(exc))
    signed: _Signed | None = None
    if public_key is not None:
        from kubesched.audit.keys import key_id

        given = [public_key] if not isinstance(public_key, Sequence) else list(public_key)
        signed = _load_checkpoints(path, {key_id(key): key for key in given})
    wanted: set[int] = set()
    if head is not None:
        wanted.add(head.records)
    if signed is not None:
        wanted.update(checkpoint.records for _, checkpoint in signed.checkpoints)
    hashes: dict[int, str] = {0: GENESIS}
    expected = GENESIS
    count = 0
    expect_seen_at: int | None = 0 if expect_head == GENESIS else None

    def failed(line: int | None, problem: str, detail: str) -> VerifyResult:
        return VerifyResult(
            path,
            False,
            count,
            line,
            problem,
            detail,
            expected,
            head is not None,
            key_ids=signed.key_ids if signed is not None else (),
            expect_head_given=expect_head is not None,
            head_file_records=head.records if head is not None else None,
        )

    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below; the loop returns from inside
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot read the audit log: {exc.strerror or exc}") from None
    limit = max_line_bytes()
    with handle:
        for number, raw in bounded_lines(handle, limit):
            if raw == TOO_LONG:
                return failed(number, GARBLED, too_long_detail(limit))
            if not raw.endswith(b"\n"):
                return failed(number, TRUNCATED, "the line does not end with a newline (a write was cut short)")
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                what = "an empty line" if not raw.strip() else f"not JSON ({exc})"
                return failed(number, GARBLED, what)
            if not isinstance(obj, dict) or HASH_KEY not in obj or PREV_KEY not in obj:
                return failed(number, GARBLED, "not a chained audit record (it has no prev_hash and hash)")
            for key in (HASH_KEY, PREV_KEY):
                if not is_hash(obj[key]):
                    return failed(number, ALTERED, f"its {key} is not 64 lower-case hex digits")
            if chain_hash(obj) != obj[HASH_KEY]:
                return failed(number, ALTERED, "its content does not match its hash")
            if obj[PREV_KEY] != expected:
                if obj[PREV_KEY] == GENESIS:
                    return failed(
                        number, REORDERED, "it starts a chain but is not the first line (a copied first record)"
                    )
                elsewhere = _line_with_hash(path, obj[PREV_KEY], skip=number - 1)
                if elsewhere is not None:
                    return failed(
                        number,
                        REORDERED,
                        f"it follows line {elsewhere}'s record, not line {number - 1}'s (lines were swapped or moved)"
                        if number > 1
                        else f"it follows line {elsewhere}'s record but is the first line (lines were moved)",
                    )
                return failed(
                    number,
                    REMOVED,
                    "the record before it is missing (its prev_hash matches no line of the file)"
                    if number > 1
                    else "the records before it are missing (it is the first line but does not start the chain)",
                )
            expected = obj[HASH_KEY]
            count = number
            if number in wanted:
                hashes[number] = expected
            if expect_seen_at is None and expected == expect_head:
                expect_seen_at = number
    if head is not None and head.records > count:
        missing = head.records - count
        return failed(
            count + 1,
            REMOVED,
            f"{head_path(path).name} says the log had {head.records} records; the last {missing} are missing",
        )
    if head is not None and head.records > 0 and hashes.get(head.records) != head.hash:
        return failed(
            head.records,
            ALTERED,
            f"it is not the record {head_path(path).name} names (the chain was rewritten at or before this line)",
        )
    if signed is not None:
        bad = (BAD_CHECKPOINTS, signed.error) if signed.error else _bad_signature(signed)
        if bad is not None:
            return failed(None, *bad)
        if signed.missing and count > 0:
            return failed(
                None,
                UNSIGNED,
                f"{signed.path.name} does not exist: no record of the log is signed (was it written without "
                "--audit-signing-key, or was the file deleted?)",
            )
        previous = 0
        for number, checkpoint in signed.checkpoints:
            where = f"checkpoint {signed.path.name}:{number}"
            if checkpoint.records > count:
                return failed(
                    count + 1,
                    REMOVED,
                    f"{where} vouches for {checkpoint.records} records; "
                    f"the last {checkpoint.records - count} are missing",
                )
            if hashes.get(checkpoint.records) != checkpoint.hash:
                since = f"after line {previous}, which the checkpoint before signed, and " if previous else ""
                return failed(
                    checkpoint.records,
                    ALTERED,
                    f"it is not the record {where} signed (the chain was rewritten {since}at or before this line)",
                )
            previous = checkpoint.records
    if expect_head is not None and expected != expect_head:
        if expect_seen_at is not None:
            after = f"; that is record {expect_seen_at}'s hash: {count - expect_seen_at} record(s) were appended since"
        else:
            after = "; no record of the log has that hash (it was rewritten, or cut back and continued)"
        return failed(
            None, UNEXPECTED_HEAD, f"the chain ends at {expected} (record {count}), not at {expect_head}{after}"
        )
    result = VerifyResult(
        path,
        True,
        count,
        head=expected,
        head_file=head is not None,
        key_ids=signed.key_ids if signed is not None else (),
        checkpoints=len(signed.checkpoints) if signed is not None else 0,
        last_checkpoint=signed.checkpoints[-1][1] if signed is not None and signed.checkpoints else None,
        expected_head=expect_head is not None,
        expect_head_given=expect_head is not None,
        head_file_records=head.records if head is not None else None,
    )
    unanchored = result.unanchored_records
    if max_unanchored is not None and unanchored is not None and unanchored > max_unanchored:
        return failed(
            None,
            UNANCHORED,
            f"{unanchored} record(s) follow the last checkpoint, more than the {max_unanchored} allowed "
            "(nothing signed vouches for them)",
        )
    return _with_warnings(result, signed)


def _with_warnings(result: VerifyResult, signed: _Signed | None) -> VerifyResult:
    from dataclasses import replace

    from kubesched.audit.checkpoints import checkpoints_path

    warnings = []
    unanchored = result.unanchored_records
    if not result.head_file and result.records and unanchored != 0:
        warnings.append(f"{result.path} has no head file: records removed from its end cannot be detected")
    if not result.head_file and not result.records and not result.expected_head:
        warnings.append(
            f"{result.path} is empty and has no head file: a log whose records were all removed, with its head "
            "file, looks the same"
        )
    after_head = result.after_head_records
    if after_head and result.head_file_records is not None and not result.expected_head:
        warnings.append(
            f"{result.path}: {after_head} record(s) after record {result.head_file_records}, the last "
            f"{head_path(result.path).name} names: only the unkeyed chain vouches for them (the writer stopped "
            "before it moved the head, or something else appended them)"
        )
    if unanchored:
        last = result.last_checkpoint
        after = f"after the last checkpoint (record {last.records})" if last is not None else "and no checkpoint"
        warnings.append(
            f"{result.path}: {unanchored} record(s) {after} are unanchored: only the unkeyed chain vouches for them"
        )
    if signed is None and checkpoints_path(result.path).exists():
        warnings.append(
            f"{checkpoints_path(result.path).name} was not checked: pass --public-key to check its signatures"
        )
    if signed is not None and signed.torn_tail:
        warnings.append(f"{signed.path}: ignored a torn last line (a checkpoint a crash interrupted)")
    return replace(result, warnings=tuple(warnings)) if warnings else result


@dataclass(frozen=True, slots=True)
class _Signed:
    """The checkpoints file, its lines already checked for format, signature and order."""

    path: Path
    keys: dict[str, Ed25519PublicKey]  # by key id
    checkpoints: tuple[tuple[int, Checkpoint], ...]
    missing: bool
    torn_tail: bool
    error: str = ""

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self.keys)


def _load_checkpoints(path: Path, keys: dict[str, Ed25519PublicKey]) -> _Signed:
    """The checkpoints file, each line's format checked; a bad line is kept as ``error`` and reported once the
    chain has been read (so the result still says how many records are intact and where the chain ends)."""
    from kubesched.audit.checkpoints import CheckpointError, checkpoints_path, read_checkpoints

    sidecar = checkpoints_path(path)
    try:
        found = read_checkpoints(path)
    except CheckpointError as exc:
        return _Signed(sidecar, keys, (), missing=False, torn_tail=False, error=str(exc))
    if found is None:
        return _Signed(sidecar, keys, (), missing=True, torn_tail=False)
    return _Signed(sidecar, keys, found.checkpoints, missing=False, torn_tail=found.torn_tail)


def _bad_signature(signed: _Signed) -> tuple[str, str] | None:
    """(problem, detail) for the first checkpoint not signed by one of the keys, or out of order; None if none."""
    previous = 0
    for number, checkpoint in signed.checkpoints:
        where = f"{signed.path}: line {number}"
        key = signed.keys.get(checkpoint.key_id)
        if key is None:
            ours = f"key{'s' if len(signed.keys) > 1 else ''} {', '.join(signed.keys)}"
            return BAD_SIGNATURE, f"{where}: signed by key {checkpoint.key_id}, not by --public-key's {ours}"
        if not checkpoint.verifies(key):
            return (
                BAD_SIGNATURE,
                f"{where}: the signature does not verify with key {checkpoint.key_id} (the checkpoint was forged or "
                "edited)",
            )
        if checkpoint.records < previous:
            return (
                BAD_CHECKPOINTS,
                f"{where}: records go back from {previous} to {checkpoint.records} (lines were moved)",
            )
        previous = checkpoint.records
    return None


def _line_with_hash(path: Path, wanted: str, *, skip: int) -> int | None:
    """The number of the line whose hash is ``wanted`` (other than line ``skip``), if any."""
    with open(path, "rb") as handle:
        for number, raw in bounded_lines(handle, max_line_bytes()):
            if number == skip or raw == TOO_LONG:
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict) and obj.get(HASH_KEY) == wanted:
                return number
    return None
