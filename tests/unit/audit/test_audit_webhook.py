"""WebhookSink (an aiohttp client) against a real aiohttp server on loopback: batching, flush, retries with
backoff, timeouts, rejections, the bounded queue and its drop counter, a sender task that dies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any

import pytest
from aiohttp import web
from audittest_helpers import fresh_metrics, make_record

from kubesched.audit.builder import AuditObserver
from kubesched.audit.metrics import AuditMetrics
from kubesched.audit.sinks.webhook import WebhookSink
from kubesched.clock import VirtualClock

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
SLOW = "slow"


class Receiver:
    """An HTTP endpoint that answers each POST per its script (a status, a status and its Retry-After, or SLOW),
    then 200."""

    def __init__(self, *script: int | str | tuple[int, str]) -> None:
        self.script = list(script)
        self.batches: list[list[dict[str, Any]]] = []
        self.requests = 0
        self.content_types: list[str] = []
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.content_types.append(request.content_type)
        body = await request.json()
        action = self.script.pop(0) if self.script else 200
        if action == SLOW:
            # Longer than the client's timeout; released when the test ends so no handler is left behind.
            await self._release.wait()
            return web.Response(status=200)
        if isinstance(action, tuple):
            return web.Response(status=action[0], headers={"Retry-After": action[1]})
        assert isinstance(action, int)
        if action == 200:
            self.batches.append(body)
        return web.Response(status=action)

    async def moved(self, request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/audit")  # 307: the POST and its body go to /audit

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/audit", self.handle)
        app.router.add_post("/moved", self.moved)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/audit"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release.set()
        assert self._runner is not None
        await self._runner.cleanup()

    def names(self) -> list[list[str]]:
        return [[record["pod"]["name"] for record in batch] for batch in self.batches]


class Sleeps:
    """Injected backoff sleep: notes each delay and yields once instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def sink_for(receiver: Receiver, metrics: AuditMetrics, **settings: Any) -> WebhookSink:
    defaults: dict[str, Any] = {"flush_interval": 60.0, "timeout": 2.0, "backoff": 0.5, "drain_timeout": 5.0}
    return WebhookSink(receiver.url, metrics=metrics, **{**defaults, **settings})


async def eventually(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.005)


@pytest.mark.parametrize(
    ("batch_size", "records", "batches"),
    [
        pytest.param(3, 7, [3, 3, 1], id="full-batches-then-the-rest-at-close"),
        pytest.param(10, 4, [4], id="fewer-than-a-batch-go-at-close"),
        pytest.param(1, 3, [1, 1, 1], id="batch-of-one"),
    ],
)
def test_batches_are_json_arrays_in_order(run_async: Runner, batch_size: int, records: int, batches: list[int]) -> None:
    async def scenario() -> tuple[Receiver, AuditMetrics, WebhookSink]:
        metrics = fresh_metrics()
        async with Receiver() as receiver:
            sink = sink_for(receiver, metrics, batch_size=batch_size)
            for index in range(records):
                sink.write(make_record(index))
            await sink.close()
        return receiver, metrics, sink

    receiver, metrics, sink = run_async(scenario())
    assert [len(batch) for batch in receiver.batches] == batches
    assert [name for batch in receiver.names() for name in batch] == [f"web-{i}" for i in range(records)]
    assert set(receiver.content_types) == {"application/json"}
    assert receiver.batches[0][0] == make_record(0).to_json()
    assert (sink.delivered, metrics.dropped_total("webhook")) == (records, 0)


@pytest.mark.parametrize(
    ("trigger",),
    [
        pytest.param("interval", id="flush-interval-sends-a-partial-batch"),
        pytest.param("flush", id="flush-sends-a-partial-batch-now"),
    ],
)
def test_partial_batch_is_sent_without_close(run_async: Runner, trigger: str) -> None:
    async def scenario() -> list[int]:
        async with Receiver() as receiver:
            interval = 0.05 if trigger == "interval" else 60.0
            sink = sink_for(receiver, fresh_metrics(), batch_size=100, flush_interval=interval)
            sink.write(make_record(0))
            sink.write(make_record(1))
            if trigger == "flush":
                sink.flush()
            await eventually(lambda: receiver.batches != [])
            sizes = [len(batch) for batch in receiver.batches]
            await sink.close()
            return sizes

    assert run_async(scenario()) == [2]


@pytest.mark.parametrize(
    ("script", "retries", "requests", "delivered", "dropped", "delays"),
    [
        pytest.param((500, 503, 200), 3, 3, 2, {}, [0.5, 1.0], id="5xx-retried-with-exponential-backoff"),
        pytest.param((429, 408, 200), 3, 3, 2, {}, [0.5, 1.0], id="429-and-408-are-retried"),
        pytest.param((500,) * 9, 2, 3, 0, {"undeliverable": 2}, [0.5, 1.0], id="dropped-after-the-last-retry"),
        pytest.param((500,) * 9, 6, 7, 0, {"undeliverable": 2}, [0.5, 1, 2, 2, 2, 2], id="backoff-capped"),
        pytest.param((400,), 3, 1, 0, {"rejected": 2}, [], id="4xx-is-rejected-without-retrying"),
        pytest.param((500, 200), 0, 1, 0, {"undeliverable": 2}, [], id="no-retries-configured"),
    ],
)
def test_retries_and_drops(
    run_async: Runner,
    script: tuple[int, ...],
    retries: int,
    requests: int,
    delivered: int,
    dropped: dict[str, int],
    delays: list[float],
) -> None:
    async def scenario() -> tuple[Receiver, WebhookSink, AuditMetrics, Sleeps]:
        sleeps = Sleeps()
        metrics = fresh_metrics()
        async with Receiver(*script) as receiver:
            sink = sink_for(receiver, metrics, batch_size=2, retries=retries, max_backoff=2.0, sleep=sleeps)
            sink.write(make_record(0))
            sink.write(make_record(1))
            await sink.close()
        return receiver, sink, metrics, sleeps

    receiver, sink, metrics, sleeps = run_async(scenario())
    assert receiver.requests == requests
    assert sink.delivered == delivered
    assert sleeps.delays == delays
    for reason in ("undeliverable", "rejected", "queue_full", "closed"):
        assert metrics.dropped_total("webhook", reason) == dropped.get(reason, 0), reason


def test_the_receivers_retry_after_is_waited_for_up_to_max_backoff(run_async: Runner) -> None:
    clock = VirtualClock(start=1_445_412_480.0)  # Wed, 21 Oct 2015 07:28:00 GMT

    async def scenario() -> tuple[Receiver, WebhookSink, Sleeps]:
        sleeps = Sleeps()
        script = ((429, "7"), (503, "Wed, 21 Oct 2015 07:28:03 GMT"), (503, "3600"), (503, "soon"), 200)
        async with Receiver(*script) as receiver:
            sink = sink_for(
                receiver, fresh_metrics(), batch_size=1, retries=5, max_backoff=20.0, sleep=sleeps, clock=clock
            )
            sink.write(make_record(0))
            await sink.close()
        return receiver, sink, sleeps

    receiver, sink, sleeps = run_async(scenario())
    assert sleeps.delays == [7.0, 3.0, 20.0, 4.0]  # seconds, a date, capped, and the backoff (0.5 doubled thrice)
    assert (receiver.requests, sink.delivered) == (5, 1)


def test_slow_endpoint_times_out_and_the_retry_succeeds(run_async: Runner) -> None:
    async def scenario() -> tuple[Receiver, WebhookSink]:
        async with Receiver(SLOW) as receiver:
            sink = sink_for(receiver, fresh_metrics(), batch_size=1, timeout=0.2, backoff=0.01)
            sink.write(make_record(0))
            await sink.close()
        return receiver, sink

    receiver, sink = run_async(scenario())
    assert receiver.requests == 2
    assert receiver.names() == [["web-0"]]
    assert sink.delivered == 1


def test_full_queue_drops_and_counts_and_write_never_waits(run_async: Runner) -> None:
    async def scenario() -> tuple[int, WebhookSink, AuditMetrics, Receiver]:
        metrics = fresh_metrics()
        async with Receiver(*([SLOW] * 50)) as receiver:
            sink = sink_for(receiver, metrics, batch_size=2, max_queue=5, timeout=0.2, retries=0, drain_timeout=0.3)
            records = [make_record(index) for index in range(100)]
            for record in records:
                sink.write(record)
            # The receiver serves on this loop: a write that sent (or waited for) anything could not have
            # returned before it answered.
            sent_during_writes = receiver.requests
            await asyncio.sleep(0.05)  # the sender takes a batch; the endpoint hangs
            for index in range(100, 110):
                sink.write(make_record(index))
            await sink.close()
        return sent_during_writes, sink, metrics, receiver

    sent_during_writes, sink, metrics, receiver = run_async(scenario())
    assert sent_during_writes == 0, "write only queues: nothing goes out, nothing is waited for"
    assert metrics.dropped_total("webhook", "queue_full") == 95 + 8, "5 queued; 2 more fit once a batch left"
    assert sink.delivered == 0
    lost = metrics.dropped_total("webhook")
    assert lost == 110, "every record is either delivered or counted as dropped"
    assert receiver.requests >= 1


def test_redirects_are_followed(run_async: Runner) -> None:
    async def scenario() -> tuple[Receiver, WebhookSink]:
        async with Receiver() as receiver:
            sink = WebhookSink(receiver.url.replace("/audit", "/moved"), metrics=fresh_metrics(), timeout=2.0)
            sink.write(make_record(0))
            await sink.close()
        return receiver, sink

    receiver, sink = run_async(scenario())
    assert receiver.names() == [["web-0"]]
    assert sink.delivered == 1


def test_proxy_variables_of_the_environment_are_ignored(run_async: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> tuple[Receiver, WebhookSink]:
        async with Receiver() as nowhere:
            dead = nowhere.url.removesuffix("/audit")
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, dead)  # a proxy that refuses connections
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with Receiver() as receiver:
            sink = sink_for(receiver, fresh_metrics(), retries=0)
            sink.write(make_record(0))
            await sink.close()
        return receiver, sink

    receiver, sink = run_async(scenario())
    assert receiver.names() == [["web-0"]]
    assert sink.delivered == 1


def test_unreachable_endpoint_counts_undeliverable(run_async: Runner) -> None:
    async def scenario() -> tuple[WebhookSink, AuditMetrics, Sleeps]:
        async with Receiver() as receiver:
            url = receiver.url
        # The server is gone: its port refuses connections.
        metrics = fresh_metrics()
        sleeps = Sleeps()
        sink = WebhookSink(url, batch_size=3, retries=2, timeout=1.0, metrics=metrics, sleep=sleeps)
        for index in range(3):
            sink.write(make_record(index))
        await sink.close()
        return sink, metrics, sleeps

    sink, metrics, sleeps = run_async(scenario())
    assert metrics.dropped_total("webhook", "undeliverable") == 3
    assert sleeps.delays == [0.5, 1.0]
    assert sink.delivered == 0


def test_write_after_close_is_dropped_as_closed(run_async: Runner) -> None:
    async def scenario() -> AuditMetrics:
        metrics = fresh_metrics()
        async with Receiver() as receiver:
            sink = sink_for(receiver, metrics)
            await sink.close()
            sink.write(make_record(0))
            await sink.close()
        return metrics

    metrics = run_async(scenario())
    assert metrics.dropped_total("webhook", "closed") == 1


def test_drain_timeout_drops_what_is_left(run_async: Runner) -> None:
    async def scenario() -> AuditMetrics:
        metrics = fresh_metrics()
        async with Receiver(SLOW, SLOW, SLOW) as receiver:
            sink = sink_for(receiver, metrics, batch_size=2, timeout=5.0, drain_timeout=0.1)
            for index in range(5):
                sink.write(make_record(index))
            await sink.close()
        return metrics

    metrics = run_async(scenario())
    assert metrics.dropped_total("webhook", "closed") == 5


def failing_deliveries(
    monkeypatch: pytest.MonkeyPatch, sink: WebhookSink, fails: Callable[[list[dict[str, Any]], int], bool]
) -> list[list[str]]:
    """Make the sender raise (a bug) before sending a batch whenever ``fails(batch, calls so far)``; returns
    the pod names of every batch the sender took, in order."""
    real = sink._deliver
    taken: list[list[str]] = []

    async def deliver(client: Any, batch: list[dict[str, Any]]) -> None:
        taken.append([record["pod"]["name"] for record in batch])
        if fails(batch, len(taken)):
            raise RuntimeError("bug in the sender")
        await real(client, batch)

    monkeypatch.setattr(sink, "_deliver", deliver)
    return taken


def test_a_dead_sender_is_restarted_and_resends_its_batch(
    run_async: Runner, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[Receiver, WebhookSink, AuditMetrics, list[list[str]]]:
        metrics = fresh_metrics()
        async with Receiver() as receiver:
            sink = sink_for(receiver, metrics, batch_size=1, max_queue=3)
            taken = failing_deliveries(monkeypatch, sink, lambda batch, calls: calls == 1)
            # More records than the queue holds, one at a time: a sender that stayed dead would leave them
            # queued until the queue overflowed.
            for index in range(8):
                sink.write(make_record(index))
                await eventually(lambda: sink.delivered == index + 1)  # noqa: B023 - awaited in this iteration
            await sink.close()
        return receiver, sink, metrics, taken

    receiver, sink, metrics, taken = run_async(scenario())
    assert taken[:2] == [["web-0"], ["web-0"]], "the batch in hand when the sender died is sent again"
    assert receiver.names() == [[f"web-{index}"] for index in range(8)]
    assert (sink.restarts, sink.delivered, metrics.dropped_total("webhook")) == (1, 8, 0)
    assert "the sender task failed; starting a new one" in caplog.text and "RuntimeError" in caplog.text


def test_a_batch_that_kills_the_sender_twice_is_dropped(
    run_async: Runner, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[Receiver, WebhookSink, AuditMetrics]:
        metrics = fresh_metrics()
        async with Receiver() as receiver:
            sink = sink_for(receiver, metrics, batch_size=2)
            failing_deliveries(monkeypatch, sink, lambda batch, calls: batch[0]["pod"]["name"] == "web-2")
            for index in range(6):
                sink.write(make_record(index))
            await sink.close()
        return receiver, sink, metrics

    receiver, sink, metrics = run_async(scenario())
    assert receiver.names() == [["web-0", "web-1"], ["web-4", "web-5"]]
    assert sink.restarts == 2
    assert metrics.dropped_total("webhook", "undeliverable") == 2 == metrics.dropped_total("webhook")
    assert "failed twice on a batch of 2 record(s); dropping it" in caplog.text


def test_the_observer_shares_its_metrics_with_the_webhook(tmp_path: Any) -> None:
    observer_metrics, own = fresh_metrics(), fresh_metrics()
    shared = WebhookSink("http://127.0.0.1:1/audit")
    given = WebhookSink("http://127.0.0.1:1/audit", metrics=own)
    AuditObserver(shared, given, metrics=observer_metrics)
    assert shared.metrics is observer_metrics and given.metrics is own


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param({"batch_size": 0}, "batch_size must be at least 1, not 0", id="batch-size"),
        pytest.param({"max_queue": 0}, "max_queue must be at least 1, not 0", id="max-queue"),
        pytest.param({"flush_interval": 0}, "flush_interval must be positive, not 0", id="flush-interval"),
        pytest.param({"timeout": -1}, "timeout must be positive, not -1", id="timeout"),
        pytest.param({"retries": -1, "backoff": -2}, "retries must be 0 or more, not -1; backoff", id="several"),
        pytest.param({"url": "ftp://host/audit"}, "url must be http:// or https://", id="scheme"),
        pytest.param({"url": "http://[::1/audit"}, "is not a URL", id="malformed-url"),
        pytest.param({"url": "http:///audit"}, "has no host", id="no-host"),
        pytest.param({"headers": {"X-Tenant": "a\r\nX-Evil: 1"}}, "header 'X-Tenant' has a line break", id="header"),
    ],
)
def test_bad_settings_are_reported_together(settings: dict[str, Any], message: str) -> None:
    url = settings.pop("url", "http://127.0.0.1:1/audit")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        WebhookSink(url, metrics=fresh_metrics(), **settings)
