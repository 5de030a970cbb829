"""JsonlSink's writer thread: write never waits on the disk, many threads share one ordered chain, a write
or fsync error costs exactly its records (counted, logged, chain intact), a dead writer is replaced and
nothing is lost or repeated, a stalled disk fills a bounded queue, close does not stall the event loop."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from audittest_helpers import fresh_metrics, make_record, schedule

from kubesched.audit import chain
from kubesched.audit.builder import AuditObserver
from kubesched.audit.chain import AuditLogError, read_head
from kubesched.audit.metrics import default_metrics
from kubesched.audit.sinks import jsonl
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.audit.verify import verify_chain
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


def is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def logged(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def ids(*indexes: int) -> list[str]:
    return [make_record(index).decision_id for index in indexes]


class Disk:
    """Stands in for os.fsync in the sink's module: optionally held until ``gate`` is set (``entered`` says a
    sync is waiting there) or failed; on each fsync of the log, notes how many lines the log holds and how many
    records its head file names at that moment."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        path: Path,
        *,
        gate: threading.Event | None = None,
        fail_at: int | None = None,
    ) -> None:
        self.path = path
        self.seen: list[tuple[int, int]] = []
        self.entered = threading.Event()
        real: Callable[[int], None] = os.fsync

        def fsync(fd: int) -> None:
            if gate is not None and is_file(fd):
                self.entered.set()
                assert gate.wait(30), "the test never let the disk go on"
            if is_file(fd):
                head = read_head(path)
                self.seen.append((len(path.read_bytes().splitlines()), head.records if head is not None else 0))
                if len(self.seen) == fail_at:
                    raise OSError(errno.EIO, "Input/output error")
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)  # the sink's writer calls os.fsync


class FailingWrite:
    """os.write that fails the line of one record: at once, or after a short write of half of it (a torn line).

    ``error`` is an OSError (a full disk, which costs that record) or any other exception (a bug, which
    kills the writer)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, marker: bytes, error: BaseException, *, partial: bool) -> None:
        self.state = "armed"
        real: Callable[[int, bytes], int] = os.write

        def write(fd: int, data: bytes) -> int:
            if self.state == "armed" and marker in data:
                if partial:
                    self.state = "torn"
                    return real(fd, data[: len(data) // 2])
                self.state = "done"
                raise error
            if self.state == "torn":
                self.state = "done"
                raise error
            return real(fd, data)

        monkeypatch.setattr(os, "write", write)


def test_write_returns_without_waiting_for_a_slow_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "audit.jsonl"
    disk_may_go_on = threading.Event()
    with JsonlSink(path, durability="every") as sink:
        disk = Disk(monkeypatch, path, gate=disk_may_go_on)
        for index in range(20):
            sink.write(make_record(index))
        # Every write has returned while the disk holds the first record's fsync: none of them waited for it.
        assert disk.entered.wait(10), "the writer reached the disk"
        assert len(logged(path)) == 1 and disk.seen == []
        disk_may_go_on.set()
        sink.flush()
        assert len(disk.seen) == 20, "flush returned only once every record was fsynced"
        assert [line["decision_id"] for line in logged(path)] == ids(*range(20)), "all on disk after flush"
        head = read_head(path)
        assert head is not None and head.records == 20
    # `every`: each record is fsynced before the next one is written, and the head file is replaced only
    # after the fsync, so at each fsync the head names the record before.
    assert disk.seen == [(n, n - 1) for n in range(1, 21)]
    result = verify_chain(path)
    assert result.ok and result.records == 20


def test_writers_in_many_threads_share_one_ordered_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    threads, each = 4, 60
    with JsonlSink(path, durability="batch", batch_size=7) as sink:
        start = threading.Barrier(threads)

        def produce(thread: int) -> None:
            start.wait()
            for index in range(each):
                sink.write(make_record(thread * 1000 + index))

        workers = [threading.Thread(target=produce, args=(thread,)) for thread in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        sink.flush()
        assert sink.records == threads * each
    result = verify_chain(path)
    assert result.ok and result.records == threads * each
    written = [line["decision_id"] for line in logged(path)]
    for thread in range(threads):
        mine = ids(*(thread * 1000 + index for index in range(each)))
        assert [decision for decision in written if decision in set(mine)] == mine, f"thread {thread}'s order"


@pytest.mark.parametrize("partial", [pytest.param(False, id="refused"), pytest.param(True, id="torn-line")])
def test_a_write_error_drops_exactly_that_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, partial: bool
) -> None:
    path = tmp_path / "audit.jsonl"
    metrics = fresh_metrics()
    failing = FailingWrite(
        monkeypatch,
        make_record(4).decision_id.encode(),
        OSError(errno.ENOSPC, "No space left on device"),
        partial=partial,
    )
    with JsonlSink(path, durability="every", metrics=metrics) as sink:
        for index in range(10):
            sink.write(make_record(index))
    assert failing.state == "done"
    assert [line["decision_id"] for line in logged(path)] == ids(0, 1, 2, 3, 5, 6, 7, 8, 9)
    result = verify_chain(path)
    assert result.ok and result.records == 9
    head = read_head(path)
    assert head is not None and head.records == 9
    assert (sink.dropped, metrics.dropped_total("jsonl", "write_error"), metrics.dropped_total()) == (1, 1, 1)
    assert "No space left on device" in caplog.text and "default/web-4" in caplog.text
    assert sink.restarts == 0, "a full disk is an error to count, not a bug"


def test_a_failed_fsync_counts_its_record_and_does_not_move_the_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    metrics = fresh_metrics()
    with JsonlSink(path, durability="every", metrics=metrics) as sink:
        disk = Disk(monkeypatch, path, fail_at=3)
        for index in range(5):
            sink.write(make_record(index))
    # The third fsync fails: its record stays in the log (the chain goes through it) but is counted as
    # dropped, and the head skips it until the next good fsync.
    assert disk.seen == [(1, 0), (2, 1), (3, 2), (4, 2), (5, 4)]
    assert metrics.dropped_total("jsonl", "write_error") == 1 == sink.dropped
    assert "fsync failed" in caplog.text
    result = verify_chain(path)
    assert result.ok and result.records == 5 and result.head_file


def _seal_failing(monkeypatch: pytest.MonkeyPatch, decision_id: str, times: int) -> list[int]:
    """Make sealing the record ``decision_id`` raise (a bug) its first ``times`` times; returns the count."""
    real = chain.seal
    failures: list[int] = []

    def seal(record: Any, prev_hash: str) -> dict[str, Any]:
        if record["decision_id"] == decision_id and len(failures) < times:
            failures.append(1)
            raise RuntimeError("bug in sealing")
        return real(record, prev_hash)

    monkeypatch.setattr(jsonl, "seal", seal)
    return failures


def _head_failing_once(monkeypatch: pytest.MonkeyPatch) -> None:
    real = jsonl._write_head
    calls: list[int] = []

    def write_head(path: Path, head: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("bug after the line was committed")
        real(path, head)

    monkeypatch.setattr(jsonl, "_write_head", write_head)


@pytest.mark.parametrize(
    "inject",
    [
        pytest.param(lambda mp: _seal_failing(mp, make_record(3).decision_id, 1), id="before-the-append"),
        pytest.param(
            lambda mp: FailingWrite(mp, make_record(3).decision_id.encode(), RuntimeError("bug"), partial=True),
            id="mid-append-leaving-a-torn-line",
        ),
        pytest.param(_head_failing_once, id="after-the-commit-in-the-sync"),
    ],
)
def test_a_dead_writer_is_replaced_and_nothing_is_lost_or_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, inject: Callable[[Any], Any]
) -> None:
    path = tmp_path / "audit.jsonl"
    metrics = fresh_metrics()
    inject(monkeypatch)
    with JsonlSink(path, durability="every", metrics=metrics) as sink:
        for index in range(6):
            sink.write(make_record(index))
        sink.flush()
        assert sink.restarts == 1
        for index in range(6, 8):  # the replacement goes on with later records
            sink.write(make_record(index))
    assert [line["decision_id"] for line in logged(path)] == ids(*range(8))
    result = verify_chain(path)
    assert result.ok and result.records == 8
    head = read_head(path)
    assert head is not None and head.records == 8
    assert metrics.dropped_total() == 0 == sink.dropped
    assert "the writer thread failed; starting a new one" in caplog.text and "RuntimeError" in caplog.text


def test_a_record_that_kills_the_writer_twice_is_dropped_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    metrics = fresh_metrics()
    failures = _seal_failing(monkeypatch, make_record(2).decision_id, times=99)
    with JsonlSink(path, durability="batch", batch_size=2, metrics=metrics) as sink:
        for index in range(5):
            sink.write(make_record(index))
    assert len(failures) == 2 and sink.restarts == 2
    assert [line["decision_id"] for line in logged(path)] == ids(0, 1, 3, 4)
    assert verify_chain(path).ok
    assert metrics.dropped_total("jsonl", "write_error") == 1 == sink.dropped
    assert "failed twice on the record of default/web-2; dropping it" in caplog.text


def test_a_writer_gone_without_a_replacement_is_restarted_by_its_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    _seal_failing(monkeypatch, make_record(1).decision_id, times=1)
    real_new_writer = JsonlSink._new_writer
    refused: list[int] = []

    def new_writer(self: JsonlSink, delay: float) -> threading.Thread:
        # The dying writer cannot start its replacement (say, the process is out of threads).
        if threading.current_thread().name.startswith("kubesched-audit-writer") and not refused:
            refused.append(1)
            raise RuntimeError("can't start new thread")
        return real_new_writer(self, delay)

    monkeypatch.setattr(JsonlSink, "_new_writer", new_writer)
    sink = JsonlSink(path, durability="never")
    for index in range(4):
        sink.write(make_record(index))
    # flush notices, while it waits, that the writer is gone, and starts one; bounded so that a sink that
    # does not fails here instead of hanging the run.
    flusher = threading.Thread(target=sink.flush, daemon=True)
    flusher.start()
    flusher.join(10)
    assert not flusher.is_alive(), "flush waited for a writer that is gone"
    assert refused == [1] and sink.restarts == 1
    sink.close_sync()
    assert [line["decision_id"] for line in logged(path)] == ids(0, 1, 2, 3)
    assert "could not start a new writer" in caplog.text and "the writer thread is gone" in caplog.text


def test_a_stalled_disk_fills_the_bounded_queue_and_the_rest_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    metrics = fresh_metrics()
    entered, release = threading.Event(), threading.Event()
    real: Callable[[int], None] = os.fsync

    def fsync(fd: int) -> None:
        if is_file(fd):
            entered.set()
            release.wait(10)
        real(fd)

    with JsonlSink(path, durability="every", max_queue=5, metrics=metrics) as sink:
        monkeypatch.setattr(os, "fsync", fsync)  # the sink's writer calls os.fsync
        sink.write(make_record(0))
        assert entered.wait(5), "the writer is stuck in the first fsync"
        # The disk stays stuck until after these writes: a write that waited for room in the queue would never
        # return, so getting past the loop shows that a full queue drops instead.
        for index in range(1, 10):
            sink.write(make_record(index))
        release.set()
    assert [line["decision_id"] for line in logged(path)] == ids(0, 1, 2, 3, 4, 5)
    assert metrics.dropped_total("jsonl", "queue_full") == 4 == sink.dropped
    assert caplog.text.count("dropping new ones until it catches up") == 1


def test_close_from_a_coroutine_does_not_stall_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_async: Runner
) -> None:
    path = tmp_path / "audit.jsonl"
    disk_may_go_on = threading.Event()

    async def scenario() -> tuple[int, bool]:
        sink = JsonlSink(path, durability="every")
        disk = Disk(monkeypatch, path, gate=disk_may_go_on)
        for index in range(3):
            sink.write(make_record(index))
        closing = asyncio.ensure_future(sink.close())
        turns = 0
        # The disk holds an fsync until the loop has turned a few times while close is under way: a close
        # that blocked the loop would leave it no turn (and never return).
        while turns < 3 and not closing.done():
            await asyncio.sleep(0)
            turns += disk.entered.is_set()
        closed_before_the_disk = closing.done()
        disk_may_go_on.set()
        await closing
        return turns, closed_before_the_disk

    turns, closed_before_the_disk = run_async(scenario())
    assert turns == 3
    assert not closed_before_the_disk, "close waited for the records still being fsynced"
    result = verify_chain(path)
    assert result.ok and result.records == 3


def test_the_observer_shares_its_metrics_with_sinks_that_have_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_async: Runner
) -> None:
    metrics = fresh_metrics()
    global_before = default_metrics().dropped_total("jsonl")
    path = tmp_path / "audit.jsonl"
    FailingWrite(monkeypatch, b'"name":"p1"', OSError(errno.EIO, "Input/output error"), partial=False)
    nodes = [make_node("n").capacity(cpu="8", memory="16Gi", pods=10).obj()]
    pods = [make_pod(f"p{index}").req(cpu="100m").obj() for index in range(3)]
    with JsonlSink(path) as sink:
        run_async(schedule(nodes, pods, sink, metrics=metrics))
    assert [line["pod"]["name"] for line in logged(path)] == ["p0", "p2"]
    assert metrics.handed_total("jsonl") == 3, "write returned for each record"
    assert metrics.dropped_total("jsonl", "write_error") == 1, "the writer's drop is on the observer's metrics"
    assert default_metrics().dropped_total("jsonl") == global_before

    own, other = fresh_metrics(), fresh_metrics()
    with JsonlSink(tmp_path / "own.jsonl", metrics=own) as mine:
        AuditObserver(mine, metrics=other)
        assert mine.metrics is own, "metrics given to the sink win"


def test_a_sink_left_open_is_flushed_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, durability="batch", batch_size=100)
    for index in range(3):
        sink.write(make_record(index))
    jsonl._close_open_sinks()  # what the atexit hook runs
    head = read_head(path)
    assert head is not None and head.records == 3
    assert verify_chain(path).ok
    with pytest.raises(AuditLogError, match="closed"):
        sink.write(make_record(3))


def test_records_and_head_follow_the_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    path = tmp_path / "audit.jsonl"
    with JsonlSink(path, durability="never") as sink:
        opened = sink.head
        for index in range(3):
            sink.write(make_record(index))
        sink.drain()
        assert sink.records == 3
        assert sink.head == logged(path)[-1]["hash"] != opened
    assert caplog.text == ""
