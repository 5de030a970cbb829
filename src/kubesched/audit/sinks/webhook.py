"""An audit sink that POSTs records to an HTTP endpoint in batches, without ever holding up scheduling.

Configured by whoever builds the audit observer (the live scheduler's wiring; tests). Modelled on OPA's decision-log
uploader: ``write`` only appends to a bounded queue, and a background task sends one JSON array per POST when
``batch_size`` records wait or ``flush_interval`` after the first. A batch is retried on connection errors,
timeouts, 408, 429 and 5xx by :mod:`kubesched.net.retry`'s policy (after the receiver's ``Retry-After``, at most
``max_backoff``, else ``backoff`` doubling up to ``max_backoff``), dropped after ``retries`` or at once on another
4xx; ``close`` sends what is queued within ``drain_timeout``. Every drop is counted by reason
(docs/reference/metrics.md#audit-trail). A sender task that dies of a bug is replaced (its batch may arrive twice).
aiohttp's errors never leave this module; the environment's proxies and ``.netrc`` are ignored, so they cannot
reroute audit records.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import random
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from kubesched.audit.metrics import (
    REASON_CLOSED,
    REASON_QUEUE_FULL,
    REASON_REJECTED,
    REASON_UNDELIVERABLE,
    AuditMetrics,
    default_metrics,
)
from kubesched.audit.records import AuditRecord
from kubesched.clock import Clock, RealClock
from kubesched.net.retry import Backoff, RetryPolicy, parse_retry_after

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

_OK, _RETRY, _REJECT = "ok", "retry", "reject"
_MAX_RESTART_DELAY = 5.0


class WebhookSink:
    """Batched, retried, bounded delivery of audit records to ``url``; see the module docstring."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        batch_size: int = 100,
        flush_interval: float = 1.0,
        max_queue: int = 10_000,
        timeout: float = 5.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        drain_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        metrics: AuditMetrics | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock | None = None,
    ) -> None:
        problems = [
            f"{label} must be {rule}, not {value}"
            for label, value, ok, rule in (
                ("batch_size", batch_size, batch_size >= 1, "at least 1"),
                ("max_queue", max_queue, max_queue >= 1, "at least 1"),
                ("flush_interval", flush_interval, flush_interval > 0, "positive"),
                ("timeout", timeout, timeout > 0, "positive"),
                ("retries", retries, retries >= 0, "0 or more"),
                ("backoff", backoff, backoff >= 0, "0 or more"),
                ("drain_timeout", drain_timeout, drain_timeout >= 0, "0 or more"),
            )
            if not ok
        ]
        problems.extend(_url_problems(url))
        problems.extend(_header_problems(headers or {}))
        if problems:
            raise ValueError("; ".join(problems))
        self.url = url
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max(max_backoff, backoff)
        self._retry = RetryPolicy(Backoff(backoff, self.max_backoff, jitter=False), retries, self.max_backoff)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rng = random.Random()
        self.drain_timeout = drain_timeout
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.metrics = metrics if metrics is not None else default_metrics()
        self._sleep = sleep
        self._pending: collections.deque[dict[str, Any]] = collections.deque()
        # The batch being sent, and one a dead sender left behind for its replacement to send again.
        self._in_flight: list[dict[str, Any]] | None = None
        self._resend: list[dict[str, Any]] | None = None
        self._resending = False
        self.delivered = 0
        #: How many times a sender task died and was replaced.
        self.restarts = 0
        self._deaths_in_row = 0
        self._metrics_given = metrics is not None
        self._wakeup = asyncio.Event()
        self._flush_requested = False
        self._closing = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        """Records waiting to be sent (not counting the batch being sent)."""
        return len(self._pending) + len(self._resend or ())

    def share_metrics(self, metrics: AuditMetrics) -> None:
        """Called by the audit observer: count drops on its metrics, unless this sink was given its own."""
        if not self._metrics_given:
            self.metrics = metrics

    # ---- the sink contract -------------------------------------------------------------------

    def write(self, record: AuditRecord) -> None:
        """Queue one record; must be called from the running event loop. Never waits."""
        if self._closing:
            self.metrics.drop(self.name, REASON_CLOSED)
            return
        if len(self._pending) >= self.max_queue:
            self.metrics.drop(self.name, REASON_QUEUE_FULL)
            return
        self._pending.append(record.to_json())
        if self._task is None:
            self._start_sender(0.0)
        elif self._task.done():
            self._replace(self._task, even_if_cancelled=True)
        self._wakeup.set()

    def flush(self) -> None:
        """Send every queued record now instead of waiting for a full batch or the flush interval."""
        if self._pending:
            self._flush_requested = True
            self._wakeup.set()

    async def close(self) -> None:
        if self._closed:
            return
        self._closing = True
        self._wakeup.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.drain_timeout
        # A loop rather than one wait: a sender that dies while draining is replaced, and the drain goes on
        # with its replacement until the deadline.
        while (task := self._live_sender()) is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                break
            await asyncio.wait({task}, timeout=remaining)
        left = len(self._pending) + len(self._in_flight or ()) + len(self._resend or ())
        if left:
            log.warning("audit webhook %s: closed with %d record(s) undelivered", self.url, left)
        self.metrics.drop(self.name, REASON_CLOSED, left)
        self._pending.clear()
        self._in_flight = self._resend = None
        self._closed = True

    # ---- the sender task ---------------------------------------------------------------------

    def _start_sender(self, delay: float) -> None:
        task = asyncio.get_running_loop().create_task(self._run(delay), name="kubesched-audit-webhook")
        task.add_done_callback(self._replace)
        self._task = task

    def _live_sender(self) -> asyncio.Task[None] | None:
        """The running sender, after replacing one that died; None once the sender has finished."""
        task = self._task
        if task is not None and task.done():
            # A dead sender's done callback may not have run yet (its replacement can even have died in
            # turn): a finished task is not a drained queue unless it ended without an exception.
            self._replace(task)
            task = self._task
        return task if task is not None and not task.done() else None

    def _replace(self, task: asyncio.Task[None], *, even_if_cancelled: bool = False) -> None:
        """Start a new sender in place of ``task`` if it died of an exception; otherwise do nothing.

        The done callback of every sender; ``write`` and ``close`` call it too, since they may see a dead
        sender before its callback has run. Whoever comes first replaces it, once. A cancelled sender is
        replaced only from ``write`` (``even_if_cancelled``): as a done callback, a cancellation is the
        loop shutting down, where a new task would be left pending.
        """
        if task is not self._task or not task.done():
            return
        if task.cancelled():
            if not even_if_cancelled or self._closing:
                return
            log.warning("audit webhook %s: the sender task was cancelled; starting a new one", self.url)
        else:
            error = task.exception()
            if error is None:
                return
            log.error("audit webhook %s: the sender task failed; starting a new one", self.url, exc_info=error)
        self.restarts += 1
        batch, self._in_flight = self._in_flight, None
        if batch is not None and self._resending:
            log.error(
                "audit webhook %s: the sender failed twice on a batch of %d record(s); dropping it",
                self.url,
                len(batch),
            )
            self.metrics.drop(self.name, REASON_UNDELIVERABLE, len(batch))
        elif batch is not None:
            self._resend = batch
        self._deaths_in_row += 1
        # The first replacement starts at once; one that keeps dying backs off instead of spinning the loop.
        delay = 0.0 if self._deaths_in_row <= 1 else min(0.05 * 2 ** (self._deaths_in_row - 2), _MAX_RESTART_DELAY)
        self._start_sender(delay)

    async def _run(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        # No aiohttp timeout: _post bounds each whole POST itself. No cookies: a receiver's are of no use here.
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(), trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
        ) as session:
            while True:
                batch = await self._next_batch()
                if batch is None:
                    return
                await self._deliver(session, batch)
                self._in_flight = None
                self._deaths_in_row = 0

    async def _next_batch(self) -> list[dict[str, Any]] | None:
        """The next batch to send (kept as ``_in_flight``); None once closing with nothing left."""
        if self._resend is not None:
            self._in_flight, self._resend = self._resend, None
            self._resending = True
            return self._in_flight
        self._resending = False
        while not self._pending:
            if self._closing:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        if not self._send_now():
            # Wait for a full batch, a flush or close, but no longer than the flush interval.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_interval):
                    while not self._send_now():
                        self._wakeup.clear()
                        await self._wakeup.wait()
        batch = self._in_flight = [self._pending.popleft() for _ in range(min(self.batch_size, len(self._pending)))]
        if not self._pending:
            self._flush_requested = False
        return batch

    def _send_now(self) -> bool:
        return len(self._pending) >= self.batch_size or self._flush_requested or self._closing

    async def _deliver(self, session: aiohttp.ClientSession, batch: list[dict[str, Any]]) -> None:
        body = json.dumps(batch, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        problem, retry_after = "", None
        for attempt in range(self.retries + 1):
            if attempt:
                await self._sleep(self._retry.delay(attempt - 1, retry_after, self._rng))
            outcome, problem, retry_after = await self._post(session, body)
            if outcome == _OK:
                self.delivered += len(batch)
                return
            if outcome == _REJECT:
                log.warning("audit webhook %s rejected %d record(s): %s", self.url, len(batch), problem)
                self.metrics.drop(self.name, REASON_REJECTED, len(batch))
                return
            log.debug("audit webhook %s: try %d failed: %s", self.url, attempt + 1, problem)
        log.warning(
            "audit webhook %s: dropped %d record(s) after %d tries: %s", self.url, len(batch), self.retries + 1, problem
        )
        self.metrics.drop(self.name, REASON_UNDELIVERABLE, len(batch))

    async def _post(self, session: aiohttp.ClientSession, body: bytes) -> tuple[str, str, float | None]:
        """The outcome, what went wrong, and the receiver's ``Retry-After`` in seconds when it sent one."""
        try:
            # The whole POST, redirects and the answer's body included, as ``timeout`` promises.
            async with asyncio.timeout(self.timeout):
                async with session.post(self.url, data=body, headers=self.headers) as response:
                    # Read, so that the connection can carry the next batch.
                    await response.read()
                    status = response.status
                    retry_after = parse_retry_after(response.headers.get("Retry-After"), self._clock.now())
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _RETRY, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, None
        if 200 <= status < 300:
            return _OK, "", None
        if status in (408, 429) or status >= 500:
            return _RETRY, f"HTTP {status}", retry_after
        return _REJECT, f"HTTP {status}", None


def _url_problems(url: str) -> list[str]:
    # Checked up front: aiohttp refuses these at every POST, which no retry can fix.
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        return [f"url {url!r} is not a URL: {exc}"]
    if parts.scheme not in ("http", "https"):
        return [f"url must be http:// or https://, not {url!r}"]
    return [] if parts.hostname else [f"url {url!r} has no host"]


def _header_problems(headers: Mapping[str, str]) -> list[str]:
    # aiohttp raises ValueError for these at every POST (they would split the request): the sender would die.
    return [
        f"header {name!r} has a line break or NUL in its name or value"
        for name, value in headers.items()
        if any(character in f"{name}{value}" for character in "\r\n\0")
    ]
