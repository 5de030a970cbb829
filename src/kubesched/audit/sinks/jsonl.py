"""The default audit sink: a hash-chained JSON-lines file, persisted by a writer thread of its own.

Created by ``kubesched simulate --audit-log`` (:func:`kubesched.cli.audit.simulation_audit`) and by the live
scheduler's audit wiring; its files are checked by :func:`kubesched.audit.verify.verify_chain` and read by
:mod:`kubesched.audit.query`. The chain is :mod:`kubesched.audit.chain`'s, the checkpoints
:mod:`kubesched.audit.checkpoints`'. ``write`` runs on the scheduler's event loop and never touches the disk; how
the writer seals, syncs, keeps the head file, signs, recovers from a torn line and counts what it loses is in
docs/explanation/threat-model.md#writing and #chain-and-head.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Self

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
from kubesched.audit.metrics import REASON_QUEUE_FULL, REASON_WRITE_ERROR, AuditMetrics, default_metrics
from kubesched.audit.records import AuditRecord

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from kubesched.audit.checkpoints import Checkpoint, CheckpointWriter

log = logging.getLogger(__name__)

DURABILITY_EVERY = "every"
DURABILITY_BATCH = "batch"
DURABILITY_NEVER = "never"
DURABILITIES = (DURABILITY_EVERY, DURABILITY_BATCH, DURABILITY_NEVER)

DEFAULT_BATCH_SIZE = 100
# kubesched.audit.checkpoints.DEFAULT_EVERY, repeated so an unsigned log never imports cryptography.
DEFAULT_CHECKPOINT_EVERY = 1000
# Records waiting for the writer; only reached when the disk stalls for a long while.
DEFAULT_MAX_QUEUE = 100_000

# How often a thread waiting for the writer checks that the writer is still alive.
_LIVENESS_INTERVAL = 0.5
# A step (a record, a sync) is tried this often by successive writers before it is given up.
_MAX_TRIES = 2
_MAX_RESTART_DELAY = 2.0


@dataclass(eq=False, slots=True)
class _Pending:
    """A record handed to ``write``: its JSON snapshot, and what to call it in log lines."""

    body: dict[str, Any]
    key: str


@dataclass(eq=False, slots=True)
class _Barrier:
    """Queued behind the records a flush/drain/close waits for; the writer sets ``done`` on reaching it."""

    sync: bool
    stop: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class _SyncDue:
    """The sync a record made due (``every``, or a full batch): a step of its own so it can be retried."""


_SYNC_DUE: Final = _SyncDue()

_Item = _Pending | _Barrier
_Step = _Pending | _Barrier | _SyncDue


class JsonlSink:
    """Appends hash-chained records to ``path`` from a writer thread.

    ``durability``: ``every`` syncs after every record, before the next is appended; ``batch`` after every
    ``batch_size`` records and on ``flush``/``close``; ``never`` leaves write-back to the OS. At every sync point the
    head file is replaced after the log's fsync, and with a signing key a checkpoint is appended at the first sync point
    after every ``checkpoint_every`` records and at close. The constructor refuses a log whose last line is not an
    intact record, or whose head file or last checkpoint names a record the log no longer holds; one process writes a
    log at a time (``flock``). A record the writer cannot append or sync, or that finds ``max_queue`` records waiting,
    is dropped and counted on the metrics (:mod:`kubesched.audit.metrics`) and in :attr:`dropped`.
    """

    name = "jsonl"

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = DURABILITY_EVERY,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_queue: int = DEFAULT_MAX_QUEUE,
        metrics: AuditMetrics | None = None,
        signing_key: Ed25519PrivateKey | None = None,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        clock: Callable[[], float] = time.time,
    ):
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, not {max_queue}")
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be at least 1, not {checkpoint_every}")
        self.path = Path(path)
        self.durability = durability
        self.batch_size = batch_size
        self.max_queue = max_queue
        self._metrics = metrics
        self._metrics_given = metrics is not None
        self.checkpoint_every = checkpoint_every
        self._checkpointer: CheckpointWriter | None = None
        self._fd, created = _open_locked(self.path)
        self.created = created  # this sink made the file (it did not exist)
        try:
            if signing_key is not None:
                from kubesched.audit.checkpoints import CheckpointWriter

                self._checkpointer = CheckpointWriter(
                    self.path, signing_key, fsync=durability != DURABILITY_NEVER, clock=clock
                )
            last = self._checkpointer.last if self._checkpointer is not None else None
            if created:
                if last is not None and last.records > 0:
                    raise _refuse(
                        self.path,
                        f"the log is new but {self._checkpointer_name()} vouches for {last.records} records",
                    )
                self._size = 0
                chain = Head(0, GENESIS)
                if durability != DURABILITY_NEVER:
                    _fsync_directory(self.path)
            else:
                size = os.fstat(self._fd).st_size
                self._size = _intact_size(self.path, size)
                chain = Head(*_resume(self.path, self._size, last))
                if self._size < size:
                    _move_torn_tail(self.path, self._fd, self._size, size, fsync=durability != DURABILITY_NEVER)
                if self._checkpointer is not None:
                    self._check_last_checkpoint(last, chain)
        except BaseException:
            if self._checkpointer is not None:
                self._checkpointer.close()
            os.close(self._fd)
            if created:
                # Only an empty file of our own making: leave no trace of a refused start.
                self.path.unlink(missing_ok=True)
            raise
        # Replaced whole by the writer, so another thread never reads a count and a hash that disagree.
        self._chain = chain
        # The chain head when the log was opened: lets a seeded run derive decision ids that differ
        # between runs appended to the same log.
        self.opened_at_head = chain.hash
        #: Records handed to ``write`` that were lost (any reason); the metrics count them too.
        self.dropped = 0
        #: How many times a writer thread died and was replaced.
        self.restarts = 0

        # Shared with the writer, under _lock (held for queue operations only, never across I/O).
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._queue: collections.deque[_Item] = collections.deque()
        self._closing = False
        self._stopped = False
        self._overflowing = False
        self._closed = threading.Event()

        # The writer's own state; a replacement writer takes it over from a dead one.
        self._unsynced = 0
        # The chain as far as the last sync confirmed it: the most a checkpoint may vouch for.
        self._synced = chain
        self._torn = False  # bytes past _size may be on disk (a partial line not yet cut off)
        self._current: _Step | None = None  # the step in hand, kept so a replacement can retry it
        self._tries = 0
        self._deaths_in_row = 0

        self._thread = self._new_writer(0.0)
        with _open_sinks_lock:
            _open_sinks.add(self)

    # ---- what other threads see ----------------------------------------------------------------

    @property
    def records(self) -> int:
        """Records in the log, as far as the writer has got (``drain`` or ``flush`` first for a settled count)."""
        return self._chain.records

    @property
    def head(self) -> str:
        """The hash of the last record the writer appended (GENESIS for an empty log)."""
        return self._chain.hash

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint in ``<log>.checkpoints`` (None without a signing key or before the first)."""
        return self._checkpointer.last if self._checkpointer is not None else None

    @property
    def metrics(self) -> AuditMetrics:
        return self._metrics if self._metrics is not None else default_metrics()

    def share_metrics(self, metrics: AuditMetrics) -> None:
        """Called by the audit observer: count drops on its metrics, unless this sink was given its own."""
        if not self._metrics_given:
            self._metrics = metrics

    # ---- the sink contract -------------------------------------------------------------------

    def write(self, record: AuditRecord) -> None:
        """Queue one record for the writer and return; raises only when the sink is closed."""
        body = record.to_json()
        with self._lock:
            if self._closing:
                raise AuditLogError(f"{self.path}: the audit log is closed")
            if len(self._queue) >= self.max_queue:
                first = not self._overflowing
                self._overflowing = True
                self._count_drop_locked(REASON_QUEUE_FULL)
            else:
                first = False
                self._overflowing = False
                self._queue.append(_Pending(body, record.pod.key))
                self._wakeup.notify()
                self._ensure_writer_locked()
                return
        if first:
            log.warning(
                "audit log %s: %d records are waiting for the disk; dropping new ones until it catches up",
                self.path,
                self.max_queue,
            )

    def flush(self) -> None:
        """Block until every record handed in so far is appended and synced per the durability."""
        self._wait_for_writer(sync=True)

    def drain(self) -> None:
        """Block until the writer has handled every record handed in so far, without forcing a sync."""
        self._wait_for_writer(sync=False)

    async def close(self) -> None:
        """Flush and close from a coroutine: the blocking part runs in a worker thread, not on the loop."""
        if not self._closed.is_set():
            await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        """Flush, stop the writer and close the file (releasing the flock); later writes raise."""
        with self._lock:
            if not self._closing:
                self._closing = True
                self._enqueue_locked(_Barrier(sync=True, stop=True))
        # The writer closes the file itself when it reaches the stop barrier: a closer interrupted while it
        # waits (Ctrl-C) must not close a descriptor the writer is still writing to.
        self._wait(self._closed)
        with self._lock:
            thread = self._thread
        thread.join()

    def close_unused(self) -> None:
        """Close, and remove the log again when this sink created it and no record was ever handed in: a run
        that fails before its first decision (a plugin that cannot be built) leaves no empty log behind."""
        self.close_sync()
        if self.created and self.records == 0 and not self.dropped:
            self.path.unlink(missing_ok=True)
            head_path(self.path).unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close_sync()

    # ---- callers' side of the queue ------------------------------------------------------------

    def _enqueue_locked(self, barrier: _Barrier) -> _Barrier:
        self._queue.append(barrier)
        self._wakeup.notify()
        self._ensure_writer_locked()
        return barrier

    def _wait_for_writer(self, *, sync: bool) -> None:
        with self._lock:
            if self._closing:
                return
            barrier = self._enqueue_locked(_Barrier(sync=sync))
        self._wait(barrier.done)

    def _wait(self, done: threading.Event) -> None:
        # Waking up now and then lets a waiter notice a writer that vanished without being replaced.
        while not done.wait(_LIVENESS_INTERVAL):
            with self._lock:
                self._ensure_writer_locked()

    def _ensure_writer_locked(self) -> None:
        """Replace a writer that is gone although it was never stopped (its own replacement failed)."""
        if self._stopped or self._thread.is_alive():
            return
        log.error("audit log %s: the writer thread is gone; starting a new one", self.path)
        try:
            self._thread = self._new_writer(self._next_restart_delay())
        except Exception:
            # Whatever was queued stays queued; the next write, flush or close tries again.
            log.exception("audit log %s: could not start a new writer", self.path)
            return
        self.restarts += 1

    def _count_drop_locked(self, reason: str, count: int = 1) -> None:
        self.dropped += count
        self.metrics.drop(self.name, reason, count)

    def _count_drop(self, reason: str, count: int = 1) -> None:
        with self._lock:
            self._count_drop_locked(reason, count)

    # ---- the writer thread ---------------------------------------------------------------------

    def _new_writer(self, delay: float) -> threading.Thread:
        # A daemon, so a sink nobody closed cannot hang the interpreter's exit; the atexit hook flushes it.
        thread = threading.Thread(
            target=self._writer_main, args=(delay,), name=f"kubesched-audit-writer:{self.path.name}", daemon=True
        )
        thread.start()
        return thread

    def _next_restart_delay(self) -> float:
        # The first replacement starts at once; a writer that keeps dying without progress backs off
        # instead of spinning.
        self._deaths_in_row += 1
        if self._deaths_in_row <= 1:
            return 0.0
        return float(min(0.05 * 2 ** (self._deaths_in_row - 2), _MAX_RESTART_DELAY))

    def _writer_main(self, delay: float) -> None:
        try:
            if delay:
                time.sleep(delay)
            # Check before the first append that nothing follows the last committed line: a writer that
            # died mid-append may have left part of a line (or a whole uncommitted one) behind.
            self._torn = True
            self._loop()
        except BaseException:
            log.exception("audit log %s: the writer thread failed; starting a new one", self.path)
            with self._lock:
                if self._thread is threading.current_thread() and not self._stopped:
                    try:
                        self._thread = self._new_writer(self._next_restart_delay())
                        self.restarts += 1
                    except Exception:
                        # This thread ends anyway; the next write, flush or close finds it gone and retries.
                        log.exception("audit log %s: could not start a new writer", self.path)

    def _loop(self) -> None:
        while True:
            step = self._current
            if step is None:
                step = self._take()
                self._advance(step)
            if self._tries >= _MAX_TRIES:
                stopped = self._give_up(step)
            else:
                self._tries += 1
                stopped = self._do(step)
            self._deaths_in_row = 0
            if stopped:
                return

    def _take(self) -> _Item:
        with self._wakeup:
            while not self._queue:
                self._wakeup.wait()
            return self._queue.popleft()

    def _advance(self, step: _Step | None) -> None:
        self._current = step
        self._tries = 0

    def _do(self, step: _Step) -> bool:
        """Carry out one step; True once the stop barrier is reached."""
        if isinstance(step, _Pending):
            self._append_record(step)
        elif isinstance(step, _SyncDue):
            self._sync()
            self._advance(None)
        else:
            if step.sync and self._unsynced:
                self._sync()
            if step.stop:
                self._checkpoint(force=True)
            return self._pass(step)
        return False

    def _pass(self, barrier: _Barrier) -> bool:
        if barrier.stop:
            with self._lock:
                self._stopped = True
            self._release()
        self._advance(None)
        barrier.done.set()
        return barrier.stop

    def _release(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        try:
            os.close(self._fd)  # releases the flock too
        except OSError as exc:
            log.warning("audit log %s: error closing the log: %s", self.path, exc.strerror or exc)
        finally:
            with _open_sinks_lock:
                _open_sinks.discard(self)
            self._closed.set()

    def _give_up(self, step: _Step) -> bool:
        if isinstance(step, _Pending):
            log.error("audit log %s: the writer failed twice on the record of %s; dropping it", self.path, step.key)
            self._advance(None)
            self._count_drop(REASON_WRITE_ERROR)
        elif isinstance(step, _SyncDue):
            log.error("audit log %s: the writer failed twice to sync; the next sync point will", self.path)
            self._advance(None)
        else:
            log.error("audit log %s: the writer failed twice at a flush; releasing its caller", self.path)
            return self._pass(step)
        return False

    def _append_record(self, pending: _Pending) -> None:
        chain = self._chain
        try:
            line = seal(pending.body, chain.hash)
            data = encode_line(line)
        except (TypeError, ValueError) as exc:
            log.error("audit log %s: cannot encode the record of %s (%s); dropping it", self.path, pending.key, exc)
            self._advance(None)
            self._count_drop(REASON_WRITE_ERROR)
            return
        try:
            if self._torn:
                self._cut_back()
            self._append(data)
        except AuditLogError as exc:
            log.error("%s; the record of %s is dropped, the chain goes on from the one before", exc, pending.key)
            self._advance(None)
            self._count_drop(REASON_WRITE_ERROR)
            return
        # Committing the line and moving to the next step involve nothing that can fail, so a writer that
        # dies is either before the commit (the line is cut off and retried) or after it (never repeated).
        self._size += len(data)
        self._chain = Head(chain.records + 1, line[HASH_KEY])
        self._unsynced += 1
        due = self.durability == DURABILITY_EVERY or self._unsynced >= self.batch_size
        self._advance(_SYNC_DUE if due else None)

    def _append(self, data: bytes) -> None:
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            # A torn line would break the chain for every later record: cut the file back to its last
            # complete line so the next write continues a valid chain.
            self._torn = True
            with contextlib.suppress(AuditLogError):
                self._cut_back()
            raise AuditLogError(f"{self.path}: cannot write the audit record: {exc.strerror or exc}") from exc

    def _cut_back(self) -> None:
        """Remove whatever follows the last committed line (only ever shrinks the file)."""
        try:
            if os.fstat(self._fd).st_size > self._size:
                os.ftruncate(self._fd, self._size)
        except OSError as exc:
            raise AuditLogError(
                f"{self.path}: cannot cut a partial line off the audit log: {exc.strerror or exc}"
            ) from exc
        self._torn = False

    def _sync(self) -> None:
        """fsync the log (unless ``never``), then replace the head file: in that order, never the other."""
        covered = self._chain
        if self.durability != DURABILITY_NEVER:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                unconfirmed, self._unsynced = self._unsynced, 0
                log.error(
                    "audit log %s: fsync failed (%s): %d record(s) are in the log but may not be on disk; "
                    "counted as dropped, the head file is not moved",
                    self.path,
                    exc.strerror or exc,
                    unconfirmed,
                )
                self._count_drop(REASON_WRITE_ERROR, unconfirmed)
                return
        self._unsynced = 0
        self._synced = covered
        try:
            _write_head(self.path, covered)
        except OSError as exc:
            # The records are durable; the head only lags, which verification and resuming tolerate.
            log.warning("audit log %s: cannot replace the head file (%s); it lags the log", self.path, exc)
        self._checkpoint(force=False)

    def _checkpoint(self, *, force: bool) -> None:
        """Sign the synced chain when ``checkpoint_every`` records have been synced since the last checkpoint
        (or, with ``force``, at close, when there is anything new)."""
        checkpointer = self._checkpointer
        if checkpointer is None:
            return
        synced = self._synced
        last = checkpointer.last
        since = synced.records - (last.records if last is not None else 0)
        if synced.records == 0 or (last is not None and last.records == synced.records):
            return
        if not force and since < self.checkpoint_every:
            return
        try:
            checkpointer.append(synced)
        except OSError as exc:
            log.error(
                "audit log %s: cannot write a checkpoint (%s); the records since the last one stay unanchored "
                "until the next",
                checkpointer.path,
                exc.strerror or exc,
            )

    def _checkpointer_name(self) -> str:
        return self._checkpointer.path.name if self._checkpointer is not None else ""

    def _check_last_checkpoint(self, last: Checkpoint | None, chain: Head) -> None:
        """Refuse to sign on after a checkpoint our own key cannot vouch for; note a log no checkpoint covers."""
        assert self._checkpointer is not None
        if last is None:
            if chain.records:
                log.warning(
                    "audit log %s: no checkpoint covers its %d records yet; the first one will vouch for them as "
                    "they are now (check them with `kubesched audit verify` first)",
                    self.path,
                    chain.records,
                )
            return
        if last.key_id == self._checkpointer.key_id and not last.verifies(self._checkpointer.key.public_key()):
            raise _refuse(
                self.path,
                f"the last checkpoint in {self._checkpointer_name()} claims this key but its signature does not verify",
            )


# Sinks still open, closed (so flushed) at interpreter exit: the writer threads are daemons.
_open_sinks: set[JsonlSink] = set()
_open_sinks_lock = threading.Lock()


@atexit.register
def _close_open_sinks() -> None:
    with _open_sinks_lock:
        sinks = list(_open_sinks)
    for sink in sinks:
        try:
            sink.close_sync()
        except Exception:
            log.exception("audit log %s: could not close at exit", sink.path)


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


def _intact_size(path: Path, size: int) -> int:
    """Where the log's last whole line ends: ``size`` unless its last line is torn (no newline)."""
    if size == 0:
        return 0
    with open(path, "rb") as handle:
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            handle.seek(start)
            chunk = handle.read(end - start)
            if end == size and chunk.endswith(b"\n"):
                return size
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
    return 0


def _move_torn_tail(path: Path, fd: int, intact: int, size: int, *, fsync: bool) -> None:
    """Cut off a torn last line — a write the process died in, never acknowledged, counted by no head file or
    checkpoint (``_resume`` checked) — after appending its bytes to ``<log>.torn`` for whoever investigates."""
    with open(path, "rb") as handle:
        handle.seek(intact)
        torn = handle.read(size - intact)
    kept = path.with_name(path.name + ".torn")
    with open(kept, "ab") as out:
        out.write(torn + b"\n")
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    os.ftruncate(fd, intact)
    if fsync:
        os.fsync(fd)
    log.warning(
        "%s: its last line was torn (%d bytes: a write cut short); moved to %s, appending after the intact records",
        path,
        len(torn),
        kept.name,
    )


def _resume(path: Path, size: int, checkpoint: Checkpoint | None = None) -> tuple[int, str]:
    """(records, last hash) of an existing log, after checking its last line, its head file and its last
    checkpoint (whoever signed it: the chain must still pass through what was signed)."""
    head = read_head(path)
    wanted = {anchor.records for anchor in (head, checkpoint) if anchor is not None}
    records, last, hashes = _scan(path, wanted, size)
    if checkpoint is not None and checkpoint.records > 0:
        # Checked first: a signed statement outranks the unsigned head file.
        name = path.name + ".checkpoints"
        if checkpoint.records > records:
            raise _refuse(
                path, f"its last checkpoint ({name}) vouches for {checkpoint.records} records but it has {records}"
            )
        if hashes.get(checkpoint.records) != checkpoint.hash:
            raise _refuse(path, f"line {checkpoint.records} is not the record its last checkpoint ({name}) signed")
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
        if hashes.get(head.records) != head.hash:
            raise _refuse(path, f"line {head.records} is not the record {head_path(path).name} names")
    return records, str(obj[HASH_KEY])


def _scan(path: Path, anchor_lines: set[int], size: int) -> tuple[int, bytes, dict[int, str | None]]:
    """One pass over the log's first ``size`` bytes: number of lines, the last line (raw), and the hashes of
    lines ``anchor_lines``."""
    count = 0
    last = b""
    hashes: dict[int, str | None] = {}
    with open(path, "rb") as handle:
        for raw in _lines_up_to(handle, size):
            count += 1
            last = raw
            if count in anchor_lines:
                hashes[count] = _hash_of(raw)
    return count, last, hashes


def _lines_up_to(handle: BinaryIO, size: int) -> Iterator[bytes]:
    read = 0
    for raw in handle:
        if read + len(raw) > size:
            return
        read += len(raw)
        yield raw


def _hash_of(raw: bytes) -> str | None:
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    value = obj.get(HASH_KEY) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None
