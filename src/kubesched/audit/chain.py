"""The hash chain of a JSON-lines audit log: how a line is sealed and how its hash is computed.

Used by :class:`kubesched.audit.sinks.jsonl.JsonlSink` when it writes and by
:func:`kubesched.audit.verify.verify_chain` when it checks. Each line of the log is one JSON object: the
record's fields plus ``prev_hash`` (the ``hash`` of the line before it; 64 zeros on the first line) and
``hash``::

    hash = sha256(canonical(record fields + {"prev_hash": prev_hash})).hexdigest()

``canonical`` is ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
allow_nan=False)`` encoded as ASCII: keys sorted, no whitespace, every non-ASCII character escaped as
``\\uXXXX`` (lower-case hex, as Python writes it). The hash covers the parsed content, not the bytes of
the line, so a verifier in any language re-serializes the object without ``hash`` and compares. Changing
any field, including ``prev_hash``, changes the hash; removing or moving a line breaks the next line's
``prev_hash``. Removing the *last* lines cannot show in the chain itself, which is why the writer also
keeps a head file (:func:`head_path`) naming the number of records and the last hash. Neither is keyed:
whoever can rewrite the log can recompute both, which signed checkpoints (:mod:`kubesched.audit.checkpoints`)
are for.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.errors import KubeschedError

GENESIS = "0" * 64
HASH_KEY = "hash"
PREV_KEY = "prev_hash"
HEAD_SUFFIX = ".head"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def chain_hash(body: Mapping[str, Any]) -> str:
    """The hash of a line: sha256 over the canonical JSON of everything but ``hash`` itself."""
    unsigned = {key: value for key, value in body.items() if key != HASH_KEY}
    return hashlib.sha256(canonical(unsigned)).hexdigest()


def seal(record: Mapping[str, Any], prev_hash: str) -> dict[str, Any]:
    """The line object for ``record`` following a line whose hash is ``prev_hash``."""
    line: dict[str, Any] = {key: value for key, value in record.items() if key not in (HASH_KEY, PREV_KEY)}
    line[PREV_KEY] = prev_hash
    line[HASH_KEY] = chain_hash(line)
    return line


def encode_line(line: Mapping[str, Any]) -> bytes:
    """One log line: compact JSON in the record's own key order (readable), ASCII, newline-terminated."""
    return json.dumps(line, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii") + b"\n"


def is_hash(value: object) -> bool:
    return isinstance(value, str) and _HEX64.match(value) is not None


def head_path(path: str | Path) -> Path:
    """The head file beside a log: ``{"records": N, "hash": "<hash of line N>"}``."""
    path = Path(path)
    return path.with_name(path.name + HEAD_SUFFIX)


class AuditLogError(KubeschedError):
    """An audit log cannot be opened, appended to or read: names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class Head:
    """What the writer last vouched for: the log had ``records`` lines, the last one hashing to ``hash``."""

    records: int
    hash: str

    def to_bytes(self) -> bytes:
        return json.dumps({"records": self.records, "hash": self.hash}).encode("ascii") + b"\n"


def read_head(log_path: str | Path) -> Head | None:
    """The head file of ``log_path``; None when there is none; AuditLogError when it is not a head file."""
    path = head_path(log_path)
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditLogError(f"{path}: cannot read the head file: {exc}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AuditLogError(f"{path}: not a head file: {exc}") from None
    if not isinstance(obj, dict):
        raise AuditLogError(f"{path}: not a head file: expected a JSON object")
    records, last = obj.get("records"), obj.get("hash")
    if not isinstance(records, int) or isinstance(records, bool) or records < 0:
        raise AuditLogError(f"{path}: not a head file: records must be a whole number ≥ 0")
    if not is_hash(last):
        raise AuditLogError(f"{path}: not a head file: hash must be 64 lower-case hex digits")
    return Head(records, str(last))
