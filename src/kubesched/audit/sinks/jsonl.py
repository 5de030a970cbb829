"""The default audit sink: a hash-chained JSON-lines file with a chosen durability.

Created by ``kubesched simulate --audit-log`` and ``kubesched run`` (through the audit observer); its
files are checked by :func:`kubesched.audit.verify.verify_chain` and read by :mod:`kubesched.audit.query`.
The chain format is in :mod:`kubesched.audit.chain`.

Durability (when the file is fsync'ed):

* ``every``: after every record (a record is on disk before the next attempt's record is built);
* ``batch``: after every ``batch_size`` records, and on ``flush``/``close``;
* ``never``: never; the OS writes back when it likes (records survive a crash of the process, since every
  line is handed to the OS at once, but not necessarily a crash of the machine).

A newly created log is followed by an fsync of its directory (except with ``never``), so the file's name
is durable too. At every sync point the writer replaces the head file (``<log>.head``) with the record
count and the last hash, written *after* the log's fsync: the head may lag the log after a crash but
never runs ahead of it, so it never needs an fsync of its own. Verification uses it to detect records
removed from the end of the log, which the chain alone cannot show.

Appending to an existing log continues its chain from the last line's hash. The writer refuses a log
whose last line is not an intact record, and one whose head file names a record the log no longer holds
(appending would otherwise paper over a truncation). One process writes a log at a time (``flock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from types import TracebackType
from typing import Self

from kubesched.audit.chain import (
    GENESIS,
    HASH_KEY,
    AuditLogError,
    Head,
    chain_hash,
    encode_line,
    head_path,
    is_hash,
    read_head,
    seal,
)
from kubesched.audit.records import AuditRecord

DURABILITY_EVERY = "every"
DURABILITY_BATCH = "batch"
DURABILITY_NEVER = "never"
DURABILITIES = (DURABILITY_EVERY, DURABILITY_BATCH, DURABILITY_NEVER)

DEFAULT_BATCH_SIZE = 100


class JsonlSink:
    """Appends hash-chained records to ``path``; see the module docstring for durability and the head."""

    name = "jsonl"

    def __init__(self, path: str | Path, *, durability: str = DURABILITY_EVERY, batch_size: int = DEFAULT_BATCH_SIZE):
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.path = Path(path)
        self.durability = durability
        self.batch_size = batch_size
        self._unsynced = 0
        self._closed = False
        self._fd, created = _open_locked(self.path)
        try:
            if created:
                self._size = 0
                self.records = 0
                self.head = GENESIS
                if durability != DURABILITY_NEVER:
                    _fsync_directory(self.path)
            else:
                self._size = os.fstat(self._fd).st_size
                self.records, self.head = _resume(self.path, self._size)
        except BaseException:
            os.close(self._fd)
            raise
        # The chain head when the log was opened: lets a seeded run derive decision ids that differ
        # between runs appended to the same log.
        self.opened_at_head = self.head

    # ---- the sink contract -------------------------------------------------------------------

    def write(self, record: AuditRecord) -> None:
        if self._closed:
            raise AuditLogError(f"{self.path}: the audit log is closed")
        line = seal(record.to_json(), self.head)
        self._append(encode_line(line))
        self.head = line[HASH_KEY]
        self.records += 1
        self._unsynced += 1
        if self.durability == DURABILITY_EVERY or self._unsynced >= self.batch_size:
            self._sync()

    def flush(self) -> None:
        if not self._closed and self._unsynced:
            self._sync()

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            os.close(self._fd)  # releases the flock too

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close_sync()

    # ---- internals ---------------------------------------------------------------------------

    def _append(self, data: bytes) -> None:
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            # A torn line would break the chain for every later record: cut the file back to its last
            # complete line so the next write continues a valid chain.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise AuditLogError(f"{self.path}: cannot write the audit record: {exc.strerror or exc}") from exc
        self._size += written

    def _sync(self) -> None:
        if self.durability != DURABILITY_NEVER:
            os.fsync(self._fd)
        _write_head(self.path, Head(self.records, self.head))
        self._unsynced = 0


def _open_locked(path: Path) -> tuple[int, bool]:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o640)
        created = True
    except FileExistsError:
        created = False
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            raise AuditLogError(f"{path}: cannot open the audit log: {exc.strerror or exc}") from None
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot create the audit log: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise AuditLogError(f"{path}: another process is writing this audit log") from None
    return fd, created


def _fsync_directory(path: Path) -> None:
    fd = os.open(path.parent if str(path.parent) else Path("."), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_head(path: Path, head: Head) -> None:
    target = head_path(path)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_bytes(head.to_bytes())
    os.replace(temporary, target)


def _refuse(path: Path, why: str) -> AuditLogError:
    return AuditLogError(f"{path}: cannot append: {why}; `kubesched audit verify {path}` names the problem")


def _resume(path: Path, size: int) -> tuple[int, str]:
    """(records, last hash) of an existing log, after checking its last line and its head file."""
    head = read_head(path)
    anchor_line = head.records if head is not None else 0
    records, last, anchored = _scan(path, anchor_line)
    if size == 0:
        if head is not None and head.records > 0:
            raise _refuse(path, f"the log is empty but {head_path(path).name} says it had {head.records} records")
        return 0, GENESIS
    if not last.endswith(b"\n"):
        raise _refuse(path, "the last line is not an intact audit record (it does not end with a newline)")
    try:
        obj = json.loads(last)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _refuse(path, f"the last line is not an intact audit record ({exc})") from None
    if not isinstance(obj, dict) or not is_hash(obj.get(HASH_KEY)):
        raise _refuse(path, "the last line is not an intact audit record (it has no hash)")
    if chain_hash(obj) != obj[HASH_KEY]:
        raise _refuse(path, "the last line is not an intact audit record (its content does not match its hash)")
    if head is not None and head.records > 0:
        if head.records > records:
            raise _refuse(path, f"{head_path(path).name} says the log had {head.records} records but it has {records}")
        if anchored != head.hash:
            raise _refuse(path, f"line {head.records} is not the record {head_path(path).name} names")
    return records, str(obj[HASH_KEY])


def _scan(path: Path, anchor_line: int) -> tuple[int, bytes, str | None]:
    """One pass over the log: number of lines, the last line (raw), and the hash of line ``anchor_line``."""
    count = 0
    last = b""
    anchored: str | None = None
    with open(path, "rb") as handle:
        for raw in handle:
            count += 1
            last = raw
            if count == anchor_line:
                anchored = _hash_of(raw)
    return count, last, anchored


def _hash_of(raw: bytes) -> str | None:
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    value = obj.get(HASH_KEY) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None
