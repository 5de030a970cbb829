"""An audit sink that POSTs records to an HTTP endpoint in batches, without ever holding up scheduling.

Configured by whoever builds the audit observer (the live scheduler's wiring; tests). Modelled on OPA's
decision-log uploader: records are queued in memory and a background asyncio task sends them as one JSON
array per POST (``Content-Type: application/json``), when ``batch_size`` records are waiting or
``flush_interval`` seconds after the first of them arrived, whichever is first.

* ``write`` only appends to a bounded queue: when ``max_queue`` records are already waiting the new one is
  dropped and counted (``kubesched_audit_dropped_records_total{sink="webhook",reason="queue_full"}``), so a
  slow or dead receiver costs records, never scheduling latency.
* A batch is retried on connection errors, timeouts (``timeout`` seconds per POST), 408, 429 and 5xx
  answers, up to ``retries`` times, sleeping ``backoff``, 2×, 4×… seconds between tries (capped at
  ``max_backoff``); then it is dropped (``undeliverable``). Any other 4xx drops it at once (``rejected``):
  sending the same body again cannot succeed.
* ``close`` sends what is queued and waits at most ``drain_timeout`` seconds; records still queued then
  are dropped (``closed``).

This module is the only place in the audit package that speaks HTTP; aiohttp's errors never leave it
(they become retries, drops and log lines).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
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

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

_OK, _RETRY, _REJECT = "ok", "retry", "reject"


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
        self.drain_timeout = drain_timeout
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.metrics = metrics if metrics is not None else default_metrics()
        self._sleep = sleep
        self._pending: collections.deque[dict[str, Any]] = collections.deque()
        self._in_flight = 0
        self.delivered = 0
        self._wakeup = asyncio.Event()
        self._flush_requested = False
        self._closing = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        """Records waiting to be sent (not counting the batch being sent)."""
        return len(self._pending)

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
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kubesched-audit-webhook")
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
        task = self._task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), self.drain_timeout)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        left = len(self._pending) + self._in_flight
        if left:
            log.warning("audit webhook %s: closed with %d record(s) undelivered", self.url, left)
        self.metrics.drop(self.name, REASON_CLOSED, left)
        self._pending.clear()
        self._in_flight = 0
        self._closed = True

    # ---- the sender task ---------------------------------------------------------------------

    async def _run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
            while True:
                batch = await self._next_batch()
                if batch is None:
                    return
                self._in_flight = len(batch)
                await self._deliver(session, batch)
                self._in_flight = 0

    async def _next_batch(self) -> list[dict[str, Any]] | None:
        """The next batch to send; None once closing with nothing left."""
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
        batch = [self._pending.popleft() for _ in range(min(self.batch_size, len(self._pending)))]
        if not self._pending:
            self._flush_requested = False
        return batch

    def _send_now(self) -> bool:
        return len(self._pending) >= self.batch_size or self._flush_requested or self._closing

    async def _deliver(self, session: aiohttp.ClientSession, batch: list[dict[str, Any]]) -> None:
        body = json.dumps(batch, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        delay = self.backoff
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await self._sleep(delay)
                delay = min(delay * 2, self.max_backoff)
            outcome, problem = await self._post(session, body)
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

    async def _post(self, session: aiohttp.ClientSession, body: bytes) -> tuple[str, str]:
        try:
            async with session.post(self.url, data=body, headers=self.headers) as response:
                status = response.status
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _RETRY, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= status < 300:
            return _OK, ""
        if status in (408, 429) or status >= 500:
            return _RETRY, f"HTTP {status}"
        return _REJECT, f"HTTP {status}"
