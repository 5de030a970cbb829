"""Check a hash-chained audit log: is every record there, unaltered, in the order it was written?

Called by ``kubesched audit verify FILE`` and by tests. Reads the log once, line by line (a log may be
large), and stops at the first line that is wrong, naming it and why:

* ``truncated``: the last line does not end with a newline (a write was cut short);
* ``garbled``: the line is not a JSON object carrying ``prev_hash`` and ``hash``;
* ``altered``: the line's content does not hash to its ``hash`` (any field was edited, the hash too), or
  a hash is not a sha256 digest;
* ``reordered``: its ``prev_hash`` is the hash of another line of the file than the one before it
  (lines were swapped, moved or copied); the detail names the line it belongs after;
* ``removed``: its ``prev_hash`` matches no line of the file (the record before it was deleted), or, with a
  head file, the log has fewer records than the head says (the last records were deleted).

Without a head file (``<log>.head``, see :mod:`kubesched.audit.chain`) records removed from the end of a
log cannot be detected; the result says so (``anchored`` is False). Someone who can rewrite a line *and*
recompute its hash is caught at the next line (reported as ``removed``, the earliest line the evidence
points to); someone who rewrites everything from a line to the end, head file included, is not caught:
keep the head hash somewhere else (the verify output prints it) to detect that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kubesched.audit.chain import GENESIS, HASH_KEY, PREV_KEY, AuditLogError, chain_hash, head_path, is_hash, read_head

TRUNCATED = "truncated"
GARBLED = "garbled"
ALTERED = "altered"
REORDERED = "reordered"
REMOVED = "removed"
BAD_HEAD = "bad head file"


@dataclass(frozen=True, slots=True)
class VerifyResult:
    path: Path
    ok: bool
    records: int  # intact records read (all of them when ok; those before the first bad line otherwise)
    line: int | None = None  # the first bad line (1-based)
    problem: str = ""
    detail: str = ""
    head: str = GENESIS  # hash of the last intact record
    anchored: bool = False  # a head file was found and checked

    def describe(self) -> str:
        if self.ok:
            return f"{self.path}: {self.records} records, chain intact"
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.path}: {where}{self.problem}: {self.detail}"


def verify_chain(path: str | Path) -> VerifyResult:
    """Check the whole chain of ``path`` (and its head file, if any); AuditLogError if it cannot be read."""
    path = Path(path)
    try:
        head = read_head(path)
    except AuditLogError as exc:
        return VerifyResult(path, False, 0, problem=BAD_HEAD, detail=str(exc))
    expected = GENESIS
    count = 0
    anchor: str | None = None

    def failed(line: int, problem: str, detail: str) -> VerifyResult:
        return VerifyResult(path, False, count, line, problem, detail, expected, head is not None)

    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below; the loop returns from inside
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot read the audit log: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
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
            if head is not None and number == head.records:
                anchor = expected
    if head is not None and head.records > count:
        missing = head.records - count
        return failed(
            count + 1,
            REMOVED,
            f"{head_path(path).name} says the log had {head.records} records; the last {missing} are missing",
        )
    if head is not None and head.records > 0 and anchor != head.hash:
        return failed(
            head.records,
            ALTERED,
            f"it is not the record {head_path(path).name} names (the chain was rewritten at or before this line)",
        )
    return VerifyResult(path, True, count, head=expected, anchored=head is not None)


def _line_with_hash(path: Path, wanted: str, *, skip: int) -> int | None:
    """The number of the line whose hash is ``wanted`` (other than line ``skip``), if any."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == skip:
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict) and obj.get(HASH_KEY) == wanted:
                return number
    return None
