"""Shared by the kube backend tests: a scripted API server, answers in the API server's shapes, fakes.

:class:`ApiServer` is real HTTP: aiohttp.web on 127.0.0.1 with an ephemeral port, run in the test's own event
loop (``async with ApiServer(handler) as server``). It records every request it receives (:class:`Seen`:
method, path, query, headers, decoded body, arrival time) and hands it to the test's handler, which answers
with the helpers here: :func:`ok`, :func:`status` (a ``Status`` object), :func:`drop` (the connection closed
with no answer), :func:`stream` (a watch: lines, then held open, closed or cut). Held streams end when the
server stops, so a test never leaves an asyncio task behind.

:class:`FakeTime` is a monotonic clock and a ``sleep`` that advances it instead of waiting, for the client's
token bucket and retry backoff; :class:`FixedJitter` is a ``random.Random`` whose ``random()`` is 0.5, which
makes every jittered delay of the client and the reflector exactly its nominal value.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from aiohttp import web

from kubesched.backends.kube.kubeconfig import ClusterConnection

__all__ = [
    "ApiServer",
    "FakeTime",
    "FixedJitter",
    "Seen",
    "drop",
    "ok",
    "pod",
    "status",
    "stream",
    "until",
]


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # the decoded JSON body, or None
    at: float  # the loop's time at arrival

    @property
    def authorization(self) -> str | None:
        return self.headers.get("Authorization")

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "")


Handler = Callable[[web.Request, Seen], Awaitable[web.StreamResponse]]


async def _not_found(request: web.Request, seen: Seen) -> web.StreamResponse:
    return status(404, f"{seen.path} not found", "NotFound")


class ApiServer:
    """The mock API server (module doc). ``handler`` may be replaced at any time."""

    def __init__(self, handler: Handler | None = None, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler: Handler = handler or _not_found
        self._ssl_context = ssl_context
        self.seen: list[Seen] = []
        self.closing = asyncio.Event()  # set when the server stops: held streams end
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://127.0.0.1:{self.port}"

    def connection(self, **fields: Any) -> ClusterConnection:
        return ClusterConnection(server=self.url, source="mock API server", **fields)

    def requests(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        return [s for s in self.seen if (method is None or s.method == method) and (path is None or s.path == path)]

    async def __aenter__(self) -> ApiServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl_context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        # A TLS handshake the client gave up on (an untrusted certificate) ends on the server a moment later.
        await until(lambda: not _handshakes(), timeout=2.0, what="the server's TLS handshakes to end")

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        payload = await request.read()
        try:
            body = json.loads(payload) if payload else None
        except ValueError:
            body = payload.decode(errors="replace")
        seen = Seen(
            request.method,
            request.path,
            dict(request.query),
            dict(request.headers),
            body,
            asyncio.get_running_loop().time(),
        )
        self.seen.append(seen)
        return await self.handler(request, seen)


def _handshakes() -> list[asyncio.Task[Any]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and getattr(task.get_coro(), "__name__", "") == "_accept_connection2"
    ]


def ok(obj: Any, code: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(obj, status=code, headers=headers)


def status(code: int, message: str = "", reason: str = "", headers: Mapping[str, str] | None = None) -> web.Response:
    """A ``Status`` answer, as the API server sends for every error."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code, headers=headers)


def drop(request: web.Request) -> NoReturn:
    """Close the connection (a TCP reset) without answering."""
    transport = request.transport
    if transport is not None:
        raw_socket = transport.get_extra_info("socket")
        if raw_socket is not None:
            raw_socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    raise asyncio.CancelledError  # aiohttp drops the request quietly


def line(item: Mapping[str, Any] | bytes) -> bytes:
    return item if isinstance(item, bytes) else json.dumps(item).encode() + b"\n"


async def stream(
    request: web.Request,
    server: ApiServer,
    lines: Iterable[Mapping[str, Any] | bytes],
    *,
    end: str = "hold",
    release: asyncio.Event | None = None,
) -> web.StreamResponse:
    """A watch answer: 200, then ``lines`` (dicts as JSON lines, bytes as they are), then ``end``:

    ``hold`` keeps the stream open until ``release`` (or the server stops), ``close`` ends it normally,
    ``cut`` resets the connection mid-stream.
    """
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        for item in lines:
            await response.write(line(item))
        if end == "cut":
            drop(request)
        if end == "hold":
            waiters = [asyncio.ensure_future(server.closing.wait())]
            if release is not None:
                waiters.append(asyncio.ensure_future(release.wait()))
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
                await asyncio.gather(*waiters, return_exceptions=True)
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away first
    return response


def pod(
    name: str,
    rv: str,
    *,
    uid: str | None = None,
    node: str = "",
    namespace: str = "default",
    **spec: Any,
) -> dict[str, Any]:
    """A Pod as the API server serves it."""
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    if node:
        body["nodeName"] = node
    body.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "resourceVersion": rv},
        "spec": body,
        "status": {"phase": "Pending"},
    }


async def until(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.005)


@dataclass
class FakeTime:
    """A monotonic clock that only ``sleep`` moves; every sleep is recorded."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class FixedJitter(random.Random):
    """``random()`` is always 0.5: a jittered delay ``d * (0.5 + random())`` is exactly ``d``."""

    def __init__(self, seed: int = 1) -> None:
        super().__init__(seed)

    def random(self) -> float:
        return 0.5

    def getrandbits(self, k: int) -> int:  # keeps randint() random (it uses random() when this is not defined)
        return super().getrandbits(k)
