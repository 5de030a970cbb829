"""The scheduler's HTTP endpoints: ``/metrics``, ``/healthz`` (and ``/livez``), ``/readyz``.

An aiohttp server on the scheduler's own event loop, so a scrape reads the queue and the cache between
scheduling cycles, never in the middle of one:

* ``/metrics``: the registry in Prometheus' text format (OpenMetrics when the scraper asks for it);
* ``/healthz`` and ``/livez``: ``200 ok`` while the event loop answers and the optional ``healthy`` check
  passes, else ``503`` with the check's reason (say, the scheduling loop ended);
* ``/readyz``: ``200 ok`` when the ``ready`` check passes, else ``503`` with its reason
  (``informers not synced``, ``not leading``).

A check is a callable returning ``None`` when all is well and the reason text when not; one that raises
counts as failing with the exception as its reason. Plain HTTP: put it behind what the cluster uses to
protect its endpoints (kube-scheduler's own port, 10259, serves HTTPS with delegated authentication).

Use as ``async with HealthServer(...) as server:`` or ``await server.start()`` … ``await server.close()``;
port 0 picks a free port, and :attr:`HealthServer.port` is the one bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder

from kubesched.serving import start_site, url_of

log = logging.getLogger(__name__)

#: kube-scheduler's port for these endpoints.
DEFAULT_PORT = 10259
DEFAULT_HOST = "127.0.0.1"

Check = Callable[[], str | None]


def all_of(*checks: Check) -> Check:
    """One check failing with the first failing check's reason."""

    def check() -> str | None:
        for each in checks:
            reason = each()
            if reason:
                return reason
        return None

    return check


class HealthServer:
    def __init__(
        self,
        *,
        registry: CollectorRegistry = REGISTRY,
        ready: Check | None = None,
        healthy: Check | None = None,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
    ) -> None:
        self.registry = registry
        self.ready = ready
        self.healthy = healthy
        self.host = host
        self._requested_port = port
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self.app = app

    @property
    def port(self) -> int:
        """The port bound (the one chosen when asked for port 0)."""
        if self._port is None:
            raise RuntimeError("the health server is not started")
        return self._port

    @property
    def url(self) -> str:
        return url_of(self.host, self.port, tls=False)

    async def start(self) -> None:
        if self._runner is not None:
            return
        self._runner, self._port = await start_site(self.app, self.host, self._requested_port)
        log.info("serving /metrics, /healthz and /readyz on %s", self.url)

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---- handlers ----------------------------------------------------------------------------

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        try:
            body = encoder(self.registry)
        except Exception:
            log.exception("collecting metrics failed")
            return web.Response(status=500, text="collecting metrics failed\n")
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        return _answer(self.healthy)

    async def _readyz(self, request: web.Request) -> web.Response:
        return _answer(self.ready)


def _answer(check: Check | None) -> web.Response:
    reason: str | None = None
    if check is not None:
        try:
            reason = check()
        except Exception as exc:
            reason = f"check failed: {type(exc).__name__}: {exc}"
    if reason:
        return web.Response(status=503, text=f"{reason}\n")
    return web.Response(text="ok")
