"""JsonlSink: the hash chain on disk, durability (fsync counts), appending, refusals, torn writes, locking.

The writer thread itself (write never waiting, ordering, errors, restarts) is tested in test_audit_jsonl_writer.py.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from audittest_helpers import fresh_metrics, make_record, write_log

from kubesched.audit.chain import GENESIS, AuditLogError, chain_hash, head_path, read_head
from kubesched.audit.records import AuditRecord
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.audit.verify import verify_chain


class FsyncCounter:
    """Wraps os.fsync (the OS, not our code) and notes whether each call was for a directory or a file."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real: Callable[[int], None] = os.fsync

        def counting(fd: int) -> None:
            self.calls.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
            real(fd)

        monkeypatch.setattr(os, "fsync", counting)

    def count(self, kind: str) -> int:
        return self.calls.count(kind)


@pytest.mark.parametrize(
    ("durability", "batch_size", "records", "file_syncs", "dir_syncs", "head_while_open"),
    [
        pytest.param("every", 100, 10, 10, 1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], id="every-record-is-fsynced"),
        pytest.param("batch", 4, 10, 3, 1, [0, 0, 0, 4, 4, 4, 4, 8, 8, 8], id="batch-fsyncs-every-n-and-on-close"),
        pytest.param("batch", 5, 10, 2, 1, [0, 0, 0, 0, 5, 5, 5, 5, 5, 10], id="batch-with-nothing-left-at-close"),
        pytest.param("never", 4, 10, 0, 0, [0, 0, 0, 4, 4, 4, 4, 8, 8, 8], id="never-fsyncs-but-moves-the-head"),
    ],
)
def test_durability_settings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    durability: str,
    batch_size: int,
    records: int,
    file_syncs: int,
    dir_syncs: int,
    head_while_open: list[int],
) -> None:
    fsyncs = FsyncCounter(monkeypatch)
    path = tmp_path / "audit.jsonl"
    heads = []
    with JsonlSink(path, durability=durability, batch_size=batch_size) as sink:
        for index in range(records):
            sink.write(make_record(index))
            sink.drain()  # the writer has handled the record; drain forces no sync of its own
            head = read_head(path)
            heads.append(head.records if head is not None else 0)
            # Every line reaches the OS once the writer has it, whatever the durability: a crash of the
            # process loses nothing the writer got to.
            assert len(path.read_bytes().splitlines()) == index + 1
    assert heads == head_while_open
    assert (fsyncs.count("file"), fsyncs.count("dir")) == (file_syncs, dir_syncs)
    head = read_head(path)
    assert head is not None and head.records == records, "close moves the head to the last record"
    assert verify_chain(path).ok


def test_flush_syncs_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs = FsyncCounter(monkeypatch)
    path = tmp_path / "audit.jsonl"
    with JsonlSink(path, durability="batch", batch_size=50) as sink:
        sink.write(make_record(0))
        sink.write(make_record(1))
        sink.flush()
        assert fsyncs.count("file") == 1
        head = read_head(path)
        assert head is not None and head.records == 2
        sink.flush()
        assert fsyncs.count("file") == 1, "nothing new to sync"


def test_chain_format_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["prev_hash"] == GENESIS
    for before, after in itertools.pairwise(lines):
        assert after["prev_hash"] == before["hash"]
    for line in lines:
        assert line["hash"] == chain_hash(line)
        assert list(line)[-2:] == ["prev_hash", "hash"]
        assert AuditRecord.from_json(line) == make_record(lines.index(line))
    head = read_head(path)
    assert head is not None and (head.records, head.hash) == (3, lines[-1]["hash"])


def test_appending_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    last_hash = json.loads(path.read_text().splitlines()[-1])["hash"]
    with JsonlSink(path) as sink:
        assert (sink.records, sink.head, sink.opened_at_head) == (3, last_hash, last_hash)
        sink.write(make_record(3))
        sink.write(make_record(4))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 5 and lines[3]["prev_hash"] == last_hash
    result = verify_chain(path)
    assert result.ok and result.records == 5


def test_appending_without_a_head_file_counts_the_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 4)
    head_path(path).unlink()
    with JsonlSink(path) as sink:
        assert sink.records == 4
        sink.write(make_record(4))
    head = read_head(path)
    assert head is not None and head.records == 5
    assert verify_chain(path).ok


def test_empty_existing_file_starts_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"")
    with JsonlSink(path) as sink:
        sink.write(make_record(0))
    assert json.loads(path.read_text())["prev_hash"] == GENESIS
    assert verify_chain(path).ok


def _torn(lines: list[bytes]) -> bytes:
    return b"".join(lines)[:-15]


def _garbled(lines: list[bytes]) -> bytes:
    return b"".join([*lines[:-1], b"{not json\n"])


def _altered(lines: list[bytes]) -> bytes:
    return b"".join([*lines[:-1], lines[-1].replace(b'"Scheduled"', b'"Error"')])


def _hashless(lines: list[bytes]) -> bytes:
    return b"".join([*lines, b'{"record": 1}\n'])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        # A torn last line counted by the head file: a record that was acknowledged, then damaged.
        pytest.param(_torn, "audit.jsonl.head says the log had 3 records but it has 2", id="torn-counted-last-line"),
        pytest.param(_garbled, "the last line is not an intact audit record (Expecting", id="garbled-last-line"),
        pytest.param(_altered, "its content does not match its hash", id="altered-last-line"),
        pytest.param(_hashless, "it has no hash", id="last-line-without-hash"),
    ],
)
def test_corrupt_tail_is_refused_naming_the_file(
    tmp_path: Path, damage: Callable[[list[bytes]], bytes], message: str
) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    path.write_bytes(damage(path.read_bytes().splitlines(keepends=True)))
    before = path.read_bytes()
    with pytest.raises(AuditLogError) as raised:
        JsonlSink(path)
    assert str(raised.value).startswith(f"{path}: cannot append: ")
    assert message in str(raised.value)
    assert "kubesched audit verify" in str(raised.value)
    assert path.read_bytes() == before, "a refused log is left untouched"


def test_a_torn_last_line_from_a_crash_is_moved_aside_and_the_chain_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    intact = path.read_bytes()
    torn = b'{"schema": "kubesched.io/audit/v1", "pod": {"namespace": "prod", "na'  # the process died mid-write
    path.write_bytes(intact + torn)
    with JsonlSink(path) as sink:
        sink.write(make_record(3))
    assert path.read_bytes().startswith(intact), "the intact records are kept as they were"
    result = verify_chain(path)
    assert (result.ok, result.records) == (True, 4), result.describe()
    assert (tmp_path / "audit.jsonl.torn").read_bytes() == torn + b"\n"
    assert "its last line was torn (68 bytes: a write cut short); moved to audit.jsonl.torn" in caplog.text


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        pytest.param(2, "audit.jsonl.head says the log had 3 records but it has 2", id="last-record-removed"),
        pytest.param(0, "the log is empty but audit.jsonl.head says it had 3 records", id="log-emptied"),
    ],
)
def test_truncated_log_is_refused_instead_of_laundered(tmp_path: Path, keep: int, message: str) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:keep]))
    with pytest.raises(AuditLogError, match=message):
        JsonlSink(path)


def test_rewritten_anchor_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, 3)
    head_before = head_path(path).read_bytes()
    path.unlink()
    write_log(path, 4, start=10)  # a different log of more records under the same name
    head_path(path).write_bytes(head_before)
    with pytest.raises(AuditLogError, match=r"line 3 is not the record audit\.jsonl\.head names"):
        JsonlSink(path)


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlSink(path), pytest.raises(AuditLogError, match="another process is writing this audit log"):
        JsonlSink(path)
    with JsonlSink(path) as again:  # the lock went with the first writer
        again.write(make_record(0))


def test_write_after_close_raises(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "audit.jsonl")
    sink.close_sync()
    sink.close_sync()
    with pytest.raises(AuditLogError, match="closed"):
        sink.write(make_record(0))


def test_failed_write_leaves_no_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    metrics = fresh_metrics()
    with JsonlSink(path, durability="never", metrics=metrics) as sink:
        sink.write(make_record(0))
        sink.drain()
        size = path.stat().st_size
        # The OS refuses to grow the file past 100 more bytes (a full disk, in effect): the next line is
        # written in part, then fails.
        previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
        try:
            sink.write(make_record(1))  # returns: the writer meets the error, counts and logs it
            sink.drain()
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, previous_handler)
        assert path.stat().st_size == size, "the partial line was cut off again"
        assert (sink.dropped, metrics.dropped_total("jsonl", "write_error")) == (1, 1)
        sink.write(make_record(2))
    result = verify_chain(path)
    assert result.ok and result.records == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"durability": "sometimes"}, "durability must be one of every, batch, never", id="bad-durability"),
        pytest.param({"batch_size": 0}, "batch_size must be at least 1", id="bad-batch-size"),
        pytest.param({"max_queue": 0}, "max_queue must be at least 1", id="bad-max-queue"),
    ],
)
def test_bad_settings(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JsonlSink(tmp_path / "audit.jsonl", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "audit.jsonl").exists()


def test_missing_directory_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(AuditLogError, match="cannot create the audit log"):
        JsonlSink(tmp_path / "nowhere" / "audit.jsonl")
