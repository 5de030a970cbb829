"""Remote OPA: the :class:`~kubesched.framework.policy.PolicyClient` that asks an Open Policy Agent server.

Who calls it: the scheduler's policy-engine service builds one per distinct remote
:class:`~kubesched.framework.policy.PolicyEngineSpec` (plugins get it from
:func:`~kubesched.framework.policy.policy_client`); the SecurityAudit plugins await
:meth:`RemoteOpaEngine.decide_batch` once per pod between Filter batches and the Permit plugin awaits
:meth:`RemoteOpaEngine.decide`. Nothing else in kubesched talks to OPA, and no library exception leaves this
module: every failure is a :class:`~kubesched.framework.policy.PolicyError` (DESIGN rule 8), with the library
exception chained as ``__cause__``. What a failure *means* (deny, retry later) is the caller's failure policy
(DESIGN rule 6); this module only guarantees that it is reported, and reported before the deadline.

Transport. Every call is a coroutine on an :class:`httpx.AsyncClient` (httpcore on anyio underneath), so no
network I/O blocks the event loop. The client is created lazily, on first use, inside the running loop, and
stays bound to that loop: the engine may be built before the loop runs, but it must then be used and closed
(:meth:`RemoteOpaEngine.aclose`) on that one loop. It uses OPA's v1 Data API (``POST /v1/data/<path>`` with
``{"input": ...}``):

* a pool of keep-alive connections: ``pool_size`` idle connections are kept (each at most
  :data:`KEEPALIVE_EXPIRY_SECONDS` idle, shorter than the idle timeouts of the load balancers and NATs that
  drop connections silently); at most ``max_concurrent_requests`` requests are in flight, each on a
  connection of its own, and further callers wait their turn in order, the wait counted in their deadline
  (without a bound, 2000 Permit decisions at once made httpcore's pool spend its time matching requests to
  connections, quadratically, and OPA would get 2000 connections);
* ``TCP_NODELAY`` on every socket: without it a keep-alive call costs ~44 ms (Nagle's algorithm against
  delayed ACKs, reference/opa-policy.md §4). asyncio already sets it on the TCP transports it creates and
  httpcore's anyio backend relies on that; it is passed as a socket option anyway, so that it does not depend
  on the event loop implementation. And a request goes out in one write: httpcore writes a request's head
  and body apart, which is what walks into the Nagle trap; the engine's stream wrapper joins them, as
  :mod:`http.client` does, so that a socket without ``TCP_NODELAY`` would not cost 44 ms either;
* one deadline per call, ``timeout_seconds`` from the start of the call, enforced with :func:`asyncio.timeout`
  around the whole call: reading the token file, installing the batch module, connecting, sending, a retry
  and reading the body all share it. httpx's own per-phase timeouts are set to the same value only as a
  backstop: a per-read timeout alone would let an answer that trickles in run far past the deadline;
* a connection that the server closed while it sat idle is detected before reuse: httpcore checks, before it
  hands out an idle HTTP/1.1 connection, whether the socket is readable - an idle connection has nothing to
  read unless the server closed it (EOF, or a reset) - and closes it instead (anyio stops reading idle
  sockets, so the EOF waits in the kernel where that check sees it). That is how connections to a restarted
  OPA are replaced without a failed request;
* if the server closes a *reused* connection anyway (it closed it just as we sent) before a single byte of
  the answer arrived, the request is sent once more on a new connection (the pool's other idle connections
  are closed first: they are as old). That is the only retry: a request whose answer was partly received,
  that failed on a connection opened for it, or that timed out, is never sent again. The engine counts the
  bytes each attempt received in its own wrapper of httpcore's network streams; with a foreign ``transport``
  (tests' :class:`httpx.MockTransport`) nothing is known of connections, so nothing is retried;
* ``Authorization: Bearer`` from ``token_file``, re-read (in a worker thread: it is disk I/O) when the file
  changes, checked at most once per second of the injected clock (Kubernetes rotates projected
  service-account tokens by swapping the file); a 401 makes the next call check the file again;
* for ``https`` endpoints, TLS verified against ``ca_file`` (or the system trust store, not certifi's).

Every query carries ``strict-builtin-errors=true`` (a failing built-in must not silently make a deny rule
undefined) and ``provenance=true`` (for bundle revisions, below). An answer with OPA's ``api_usage_warning``
is an error (the input did not arrive as ``input``); ``decision_id`` is kept on every Decision.

Batch. ``decide_batch`` makes one request per pod: it POSTs the batch input to
``/v1/data/kubesched/batch/<kind>_decisions``, served by the generated module
:func:`~kubesched.policy.contract.batch_module`, which this engine installs with
``PUT /v1/policies/kubesched-batch`` (``kubesched-batch-<kind>`` for other target kinds) at first use. When
bundles own OPA's policy tree the PUT is refused (a 4xx, remembered for ``max(revision_ttl_seconds, 1)`` so
that it is not repeated on every pod); then load the module in your bundle and set ``batch_endpoint`` (or
``install_batch_module=False`` if it is served at the default path). The generated rule is always defined,
so an undefined batch answer means the module was deleted behind our back: every target is an undefined
deny and the module is installed again at the next call.

Revision. OPA keeps no decision cache (maintainers, OPA issue #3405), so the scheduler caches decisions
keyed by :meth:`RemoteOpaEngine.revision`. When OPA reports bundle revisions (``provenance.bundles.<name>
.revision``) the revision is ``bundles:<name>=<revision>,...``. Otherwise, and whenever no answer has
confirmed the bundle revisions for ``revision_ttl_seconds``, it is ``remote:<endpoint>:<generation>``: the
generation moves on when this engine (re)installs its batch module and every ``revision_ttl_seconds``
(default 10 s), because policies and data can be PUT into OPA behind our back and nothing tells us, so a
remote answer can be trusted for a short time only. Every Decision carries the revision that answered it:
the bundle revisions that this very answer's provenance reported, else the generation current when the
answer arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import math
import os
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpcore
import httpx

from kubesched import __version__
from kubesched.clock import Clock, RealClock
from kubesched.errors import json_type_phrase
from kubesched.framework.policy import Decision, PolicyError, undefined_decision
from kubesched.policy.contract import (
    batch_input,
    batch_module,
    batch_path,
    interpret_result,
)

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_REVISION_TTL_SECONDS",
    "KEEPALIVE_EXPIRY_SECONDS",
    "OpaHttpError",
    "OpaTransportError",
    "PooledConnection",
    "RemoteOpaEngine",
    "batch_module_id",
]

DEFAULT_REVISION_TTL_SECONDS = 10.0
DEFAULT_POOL_SIZE = 4
DEFAULT_MAX_CONCURRENT_REQUESTS = 8
KEEPALIVE_EXPIRY_SECONDS = 60.0
TOKEN_CHECK_INTERVAL_SECONDS = 1.0
DATA_API_PREFIX = "/v1/data/"
QUERY_PARAMETERS = "strict-builtin-errors=true&provenance=true"
USAGE_WARNING_CODE = "api_usage_warning"
USER_AGENT = f"kubesched/{__version__}"

#: Set on every socket the engine's own pool opens (module-level so that a benchmark can show the Nagle trap).
SOCKET_OPTIONS: list[tuple[int, int, int]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

_T = TypeVar("_T")


class OpaTransportError(PolicyError):
    """OPA could not be reached or did not answer in time (connect, TLS, send or receive failed)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class OpaHttpError(PolicyError):
    """OPA answered with a non-2xx status; ``code`` and ``opa_message`` are from OPA's error body."""

    def __init__(self, message: str, *, status: int, code: str | None, opa_message: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.opa_message = opa_message


def batch_module_id(target_kind: str) -> str:
    """The policy id under which the generated batch module for ``target_kind`` is installed."""
    return "kubesched-batch" if target_kind == "node" else f"kubesched-batch-{target_kind}"


@dataclass(frozen=True, slots=True)
class PooledConnection:
    """Diagnostics of one open connection of the pool, read from its socket when asked."""

    local_port: int
    nodelay: bool
    tls_version: str | None


# --------------------------------------------------------------------------------------------- transport


@dataclass(slots=True)
class _Call:
    """One engine call: the request in flight (for messages) and where it stands, as far as it is known."""

    what: str
    phase: str | None = None


# httpcore's trace events that tell where a request stands (a foreign transport sends none).
_TRACE_PHASES = {
    "connection.connect_tcp.started": "connecting",
    "connection.start_tls.started": "connecting",
    "http11.send_request_headers.started": "sending the request",
    "http11.receive_response_headers.started": "waiting for the answer",
    "http11.receive_response_body.started": "reading the answer",
}


@dataclass(slots=True)
class _Attempt:
    """One sending of a request: did it open its connection, and how much of the answer arrived."""

    call: _Call
    opened: bool = False  # this attempt opened the connection it was sent on
    sent: bool = False  # it was sent on some connection (so not opened = reused)
    received: int = 0
    eof: bool = False  # the server closed the connection (a read returned no bytes)

    @property
    def reused(self) -> bool:
        return self.sent and not self.opened

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        phase = _TRACE_PHASES.get(event)
        if phase is not None:
            self.call.phase = phase
        if event == "connection.connect_tcp.started":
            self.opened = True
        elif event == "http11.send_request_headers.started":
            self.sent = True


# The attempt whose request the current task is sending; the network streams report their reads to it
# (httpcore does all of a request's I/O in the task that sent it).
_ATTEMPT: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("kubesched_opa_attempt", default=None)


class _CountingStream(httpcore.AsyncNetworkStream):
    """httpcore's network stream, reporting what each read returned to the attempt in flight.

    It also holds a request's writes back until the first read of the answer and sends them in one: httpcore
    writes the head and the body of a request separately, which without TCP_NODELAY waits for the server's
    delayed ACK (~40 ms a call) and with it still costs the server two wake-ups per request (measured: about
    a tenth of a loopback call). http.client joins them the same way.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream, backend: _CountingBackend) -> None:
        self._inner = inner
        self._backend = backend
        self._unsent: list[bytes] = []
        self._write_timeout: float | None = None
        backend.streams.add(self)

    async def _flush(self) -> None:
        unsent, self._unsent = self._unsent, []
        # As httpcore does for its own writes: the server may have closed early with an answer (a 4xx);
        # reading tells, and a server that closed without one is reported by the read.
        with contextlib.suppress(httpcore.WriteError):
            await self._inner.write(b"".join(unsent), self._write_timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        attempt = _ATTEMPT.get()
        if self._unsent:
            phase = attempt.call.phase if attempt is not None else None
            if attempt is not None:
                attempt.call.phase = "sending the request"
            await self._flush()
            if attempt is not None:
                attempt.call.phase = phase
        data = await self._inner.read(max_bytes, timeout)
        if attempt is not None:
            if data:
                attempt.received += len(data)
            else:
                attempt.eof = True
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._unsent.append(buffer)
            self._write_timeout = timeout

    async def aclose(self) -> None:
        self._unsent.clear()
        self._backend.streams.discard(self)
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        # The TLS stream replaces this one (httpcore closes the TCP stream itself when the handshake fails).
        if self._unsent:
            await self._flush()
        self._backend.streams.discard(self)
        tls = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _CountingStream(tls, self._backend)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _CountingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend, counting the connections it opens and keeping their streams for diagnostics."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()
        self.streams: set[_CountingStream] = set()
        self.connections_opened = 0

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        self.connections_opened += 1
        return _CountingStream(stream, self)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PoolTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over an httpcore pool that uses :class:`_CountingBackend`.

    httpx (0.27, 0.28) has no parameter for httpcore's ``network_backend``, so the pool httpx builds is
    replaced by one built here with our settings plus the backend (``_pool`` is the one private name this
    module touches); the rest (request and response conversion, the mapping of httpcore's exceptions onto
    httpx's) is httpx's own.
    """

    def __init__(self, pool: httpcore.AsyncConnectionPool, ssl_context: ssl.SSLContext | None) -> None:
        super().__init__(verify=ssl_context if ssl_context is not None else False, trust_env=False)
        self._pool = pool


def _open_pool(
    ssl_context: ssl.SSLContext | None, pool_size: int
) -> tuple[httpcore.AsyncConnectionPool, _CountingBackend]:
    backend = _CountingBackend()
    pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=None,  # concurrent callers never wait for one another's connection
        max_keepalive_connections=pool_size,
        keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
        socket_options=list(SOCKET_OPTIONS),
        network_backend=backend,
    )
    return pool, backend


def _is_stale(error: httpx.HTTPError | httpx.InvalidURL, attempt: _Attempt) -> bool:
    """A reused connection that the server had closed: it failed before any byte of the answer arrived."""
    return (
        isinstance(error, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError)
        and attempt.reused
        and attempt.received == 0
    )


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from (httpx wraps httpcore's, which wrap OSError/ssl's)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _find(chain: list[BaseException], kind: type[_T]) -> _T | None:
    return next((item for item in chain if isinstance(item, kind)), None)


def _while(phase: str | None) -> str:
    return f" while {phase}" if phase else ""


def _translate(error: httpx.HTTPError | httpx.InvalidURL, origin: str, call: _Call, attempt: _Attempt) -> PolicyError:
    where = f"OPA at {origin}"
    what, phase = call.what, call.phase
    chain = _causes(error)
    if isinstance(error, httpx.TimeoutException):
        return OpaTransportError(f"{where} timed out{_while(phase)} ({what})", timed_out=True)
    verification = _find(chain, ssl.SSLCertVerificationError)
    if verification is not None:
        return OpaTransportError(
            f"{where}: TLS certificate verification failed: {verification.verify_message} ({what})"
        )
    tls = _find(chain, ssl.SSLError)
    if tls is not None:
        return OpaTransportError(f"{where}: TLS error{_while(phase)}: {tls.reason or tls} ({what})")
    if _find(chain, ConnectionResetError) is not None:
        return OpaTransportError(f"{where} reset the connection{_while(phase)} ({what})")
    if _find(chain, BrokenPipeError) is not None:
        return OpaTransportError(f"{where} closed the connection{_while(phase)} ({what})")
    if _find(chain, ConnectionRefusedError) is not None:
        return OpaTransportError(f"{where} refused the connection ({what})")
    unresolved = _find(chain, socket.gaierror)
    if unresolved is not None:
        return OpaTransportError(f"{where}: cannot resolve the host name: {unresolved.strerror} ({what})")
    if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError) and attempt.eof:
        if attempt.received == 0:
            return OpaTransportError(f"{where} closed the connection without answering ({what})")
        return OpaTransportError(f"{where} closed the connection in the middle of the answer ({what})")
    if isinstance(error, httpx.RemoteProtocolError | httpx.DecodingError):
        return OpaTransportError(f"{where} sent a malformed HTTP answer: {error or type(error).__name__} ({what})")
    if isinstance(error, httpx.InvalidURL | httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return PolicyError(f"cannot send {what} to {where}: {error}")
    detail = str(error) or type(error).__name__
    if isinstance(error, httpx.TransportError):
        return OpaTransportError(f"{where}: connection error{_while(phase)}: {detail} ({what})")
    return PolicyError(f"{where}: {what} failed: {detail}")


# ------------------------------------------------------------------------------------------------ token


class _TokenFile:
    """A bearer token read from a file and re-read when the file changes (stat at most once a second)."""

    def __init__(self, path: str, clock: Clock) -> None:
        self._path = path
        self._clock = clock
        self._lock = asyncio.Lock()  # one reader at a time; binds to a loop only when contended
        self._token: str | None = None
        self._identity: tuple[int, int, int, int] | None = None
        self._checked_at = -math.inf

    def _fresh(self) -> str | None:
        if self._token is not None and abs(self._clock.now() - self._checked_at) < TOKEN_CHECK_INTERVAL_SECONDS:
            return self._token
        return None

    async def current(self) -> str:
        token = self._fresh()
        if token is not None:
            return token
        async with self._lock:
            token = self._fresh()
            if token is not None:
                return token
            self._checked_at = self._clock.now()
            try:
                read, self._identity = await asyncio.to_thread(self._read, self._token, self._identity)
            except BaseException:
                self._token = None  # every call looks again until the file is usable
                raise
            self._token = read
            return read

    def _read(
        self, token: str | None, identity: tuple[int, int, int, int] | None
    ) -> tuple[str, tuple[int, int, int, int]]:
        try:
            status = os.stat(self._path)
            now_identity = (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)
            if token is not None and now_identity == identity:
                return token, now_identity
            with open(self._path, encoding="utf-8") as handle:
                text = handle.read().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise PolicyError(f"cannot read the OPA token file {self._path}: {error}") from error
        if not text:
            raise PolicyError(f"the OPA token file {self._path} is empty")
        if any(character.isspace() or ord(character) < 0x20 for character in text):
            raise PolicyError(f"the OPA token file {self._path} holds more than one token")
        return text, now_identity

    def invalidate(self) -> None:
        """Check the file again at the next call (OPA said 401: the token may have been rotated)."""
        self._checked_at = -math.inf


# ------------------------------------------------------------------------------------------------ engine


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _with_decision_path(endpoint: str, decision_path: str | None) -> str:
    if not decision_path or not decision_path.strip("/"):
        return endpoint
    wanted = DATA_API_PREFIX + decision_path.strip("/")
    try:
        parts = urllib.parse.urlsplit(endpoint)
    except ValueError as error:
        raise PolicyError(f"endpoint {endpoint!r} is not a valid URL: {error}") from error
    if parts.path in ("", "/"):
        return urllib.parse.urlunsplit(parts._replace(path=wanted))
    if parts.path.rstrip("/") != wanted:
        raise PolicyError(f"endpoint {endpoint!r} names another document than decision_path {decision_path!r}")
    return endpoint


def _split_endpoint(url: str, name: str) -> tuple[_Origin, str]:
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise PolicyError(f"{name} {url!r} is not a valid URL: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PolicyError(f"{name} {url!r} must be an http:// or https:// URL with a host")
    if not parts.path.startswith(DATA_API_PREFIX) or not parts.path[len(DATA_API_PREFIX) :].strip("/"):
        raise PolicyError(f"{name} {url!r} must name a document under {DATA_API_PREFIX} (OPA's v1 Data API)")
    default_port = 443 if parts.scheme == "https" else 80
    target = parts.path.rstrip("/")
    target += f"?{parts.query}&{QUERY_PARAMETERS}" if parts.query else f"?{QUERY_PARAMETERS}"
    return _Origin(parts.scheme, parts.hostname, port or default_port), target


class RemoteOpaEngine:
    """A :class:`~kubesched.framework.policy.PolicyClient` backed by an OPA server's REST API.

    ``endpoint`` is the decision's Data API URL, e.g. ``http://opa:8181/v1/data/kubernetes/authz``; or OPA's
    base URL (``http://opa:8181``) with the document in ``decision_path`` (``kubernetes/authz``).
    ``batch_endpoint`` (same origin) may contain ``{target_kind}``, replaced by ``node`` or ``cluster``.
    ``transport`` replaces the engine's own connection pool (tests pass an :class:`httpx.MockTransport`).
    Concurrent calls are safe on the loop that first used the engine; see the module docstring for the rest.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_seconds: float,
        decision_path: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        batch_endpoint: str | None = None,
        install_batch_module: bool = True,
        revision_ttl_seconds: float = DEFAULT_REVISION_TTL_SECONDS,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not (isinstance(timeout_seconds, int | float) and math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise PolicyError(f"timeout_seconds must be a positive number of seconds, not {timeout_seconds!r}")
        if not (math.isfinite(revision_ttl_seconds) and revision_ttl_seconds >= 0):
            raise PolicyError(f"revision_ttl_seconds must be zero or more, not {revision_ttl_seconds!r}")
        if pool_size < 1:
            raise PolicyError(f"pool_size must be at least 1, not {pool_size!r}")
        if max_concurrent_requests < 1:
            raise PolicyError(f"max_concurrent_requests must be at least 1, not {max_concurrent_requests!r}")
        endpoint = _with_decision_path(endpoint, decision_path)
        origin, self._decision_target = _split_endpoint(endpoint, "endpoint")
        self._endpoint = endpoint
        self._origin = origin.url
        self._decision_path = urllib.parse.unquote(self._decision_target.split("?", 1)[0][len(DATA_API_PREFIX) :])
        self._batch_endpoint = batch_endpoint
        if batch_endpoint is not None:
            batch_origin, _ = _split_endpoint(batch_endpoint.replace("{target_kind}", "node"), "batch_endpoint")
            if batch_origin != origin:
                raise PolicyError(f"batch_endpoint {batch_endpoint!r} must be on the same server as {endpoint!r}")
        self._install = install_batch_module and batch_endpoint is None
        self._batch_targets: dict[str, str] = {}
        self._urls: dict[str, httpx.URL] = {}
        self._timeout = float(timeout_seconds)
        self._revision_ttl = float(revision_ttl_seconds)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._token = _TokenFile(token_file, self._clock) if token_file is not None else None
        self._ssl_context: ssl.SSLContext | None = None
        if origin.scheme == "https":
            try:
                self._ssl_context = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as error:
                raise PolicyError(f"cannot load the CA bundle {ca_file}: {error}") from error
        elif ca_file is not None:
            raise PolicyError(f"ca_file is set but endpoint {endpoint!r} is not https://")
        self._pool_size = pool_size
        self._in_flight = asyncio.Semaphore(max_concurrent_requests)
        self._foreign_transport = transport
        self._http: httpx.AsyncClient | None = None
        self._pool: httpcore.AsyncConnectionPool | None = None
        self._backend: _CountingBackend | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._stale_retries = 0
        # Revision state is read by revision(), which plugins may call from any thread; never held across awaits.
        self._state_lock = threading.Lock()
        self._install_locks: dict[str, asyncio.Lock] = {}
        self._installed: set[str] = set()
        self._refused: dict[str, tuple[float, PolicyError]] = {}
        self._generation = 0
        self._generation_started = self._clock.now()
        self._bundles: tuple[tuple[str, str], ...] | None = None
        self._bundles_seen_at = -math.inf

    # ------------------------------------------------------------------------------------ PolicyClient

    @property
    def kind(self) -> str:
        return "remote"

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def revision(self) -> str:
        now = self._clock.now()
        with self._state_lock:
            if self._bundles is not None and now - self._bundles_seen_at < self._revision_ttl:
                return _bundles_revision(self._bundles)
            return self._generation_revision(now)

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        client = self._client()
        body = _encode(input_doc)
        call = _Call(f"POST {self._decision_target.split('?', 1)[0]}")
        document, revision = await self._within_deadline(
            call, self._post_data(client, call, self._decision_target, body)
        )
        decision_id = _decision_id(document)
        if "result" not in document:
            return undefined_decision(decision_id, revision)
        return dataclasses.replace(interpret_result(document["result"], decision_id=decision_id), revision=revision)

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        client = self._client()
        names = [_target_name(target, target_kind) for target in targets]
        body = _encode(batch_input(pod, targets, target_kind=target_kind, operation=operation, time=time))
        target = self._batch_target(target_kind)
        path = target.split("?", 1)[0]
        call = _Call(f"POST {path}")

        async def install_and_ask() -> tuple[dict[str, Any], str]:
            if self._install:
                await self._ensure_batch_module(client, call, target_kind)
            return await self._post_data(client, call, target, body)

        document, revision = await self._within_deadline(call, install_and_ask())
        decision_id = _decision_id(document)
        undefined = undefined_decision(decision_id, revision)
        if "result" not in document:
            if self._install:
                # The generated rule is always defined (an empty object at worst): our module is gone.
                self._installed.discard(batch_module_id(target_kind))
            return dict.fromkeys(names, undefined)
        result = document["result"]
        if not isinstance(result, Mapping):
            raise PolicyError(
                f"batch result from {path} is {json_type_phrase(result)}, not an object keyed by {target_kind} name"
            )
        return {
            name: (
                dataclasses.replace(interpret_result(result[name], decision_id=decision_id), revision=revision)
                if name in result
                else undefined
            )
            for name in names
        }

    async def aclose(self) -> None:
        """Close the connections; the engine refuses calls from then on. Idempotent."""
        self._closed = True
        client, self._http = self._http, None
        self._pool = None
        if client is None:
            return
        if self._loop is not asyncio.get_running_loop():
            # The connections belong to another loop (gone, or running elsewhere): they cannot be closed from
            # here, and die with it.
            return
        await client.aclose()

    # ------------------------------------------------------------------------------------ diagnostics

    @property
    def connections_opened(self) -> int:
        """TCP connections the engine's pool has opened (0 with a foreign ``transport``)."""
        return self._backend.connections_opened if self._backend is not None else 0

    @property
    def stale_retries(self) -> int:
        """How many requests were sent again because a reused connection had been closed by the server."""
        return self._stale_retries

    def pooled_connections(self) -> list[PooledConnection]:
        """The pool's open connections, as their sockets say now (between calls, all of them are idle)."""
        if self._backend is None:
            return []
        found: list[PooledConnection] = []
        for stream in list(self._backend.streams):
            sock = stream.get_extra_info("socket")
            try:
                port = int(sock.getsockname()[1])
                nodelay = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            except (AttributeError, OSError, ValueError):
                continue  # closed under us
            ssl_object = stream.get_extra_info("ssl_object")
            found.append(PooledConnection(port, nodelay, ssl_object.version() if ssl_object is not None else None))
        return sorted(found, key=lambda connection: connection.local_port)

    # ------------------------------------------------------------------------------------ internals

    def _client(self) -> httpx.AsyncClient:
        if self._closed:
            raise PolicyError(f"the OPA client for {self._origin} is closed")
        loop = asyncio.get_running_loop()
        if self._http is None:
            self._http = self._open_client()
            self._loop = loop
        elif loop is not self._loop:
            raise PolicyError(
                f"the OPA client for {self._origin} is bound to the event loop that first used it, not this one"
            )
        return self._http

    def _open_client(self) -> httpx.AsyncClient:
        transport = self._foreign_transport
        if transport is None:
            self._pool, self._backend = _open_pool(self._ssl_context, self._pool_size)
            transport = _PoolTransport(self._pool, self._ssl_context)
        return httpx.AsyncClient(
            transport=transport,
            # A backstop only: the call's deadline (asyncio.timeout) ends it first.
            timeout=httpx.Timeout(self._timeout),
            # No proxies, .netrc or SSL_CERT_* from the environment: OPA is reached directly, as configured.
            trust_env=False,
            # identity: the http.client engine never asked for compression; a loopback OPA gains nothing by it.
            headers={"User-Agent": USER_AGENT, "Accept": "application/json", "Accept-Encoding": "identity"},
        )

    async def _within_deadline(self, call: _Call, work: Awaitable[_T]) -> _T:
        deadline = asyncio.timeout(self._timeout)
        try:
            async with deadline, self._in_flight:
                return await work
        except TimeoutError as error:
            if not deadline.expired():
                raise
            raise OpaTransportError(
                f"OPA at {self._origin} timed out after {self._timeout:g}s{_while(call.phase)} ({call.what})",
                timed_out=True,
            ) from error

    def _generation_revision(self, now: float) -> str:
        """``remote:<endpoint>:<generation>``, moving the generation on when the TTL is over (lock held)."""
        if self._revision_ttl == 0 or now - self._generation_started >= self._revision_ttl:
            self._next_generation(now)
        return f"remote:{self._endpoint}:{self._generation}"

    def _next_generation(self, now: float) -> None:
        self._generation += 1
        self._generation_started = now

    def _batch_target(self, target_kind: str) -> str:
        target = self._batch_targets.get(target_kind)
        if target is None:
            if self._batch_endpoint is not None:
                url = self._batch_endpoint.replace("{target_kind}", target_kind)
                target = _split_endpoint(url, "batch_endpoint")[1]
            else:
                target = f"{DATA_API_PREFIX}{batch_path(target_kind)}?{QUERY_PARAMETERS}"
            self._batch_targets[target_kind] = target
        return target

    def _url(self, target: str) -> httpx.URL:
        url = self._urls.get(target)
        if url is None:
            url = self._urls[target] = httpx.URL(self._origin + target)
        return url

    async def _exchange(
        self, client: httpx.AsyncClient, call: _Call, method: str, target: str, body: bytes, content_type: str
    ) -> httpx.Response:
        """Send one request and read its whole answer; the only retry is a stale reused connection."""
        call.what = f"{method} {target.split('?', 1)[0]}"
        headers = {"Content-Type": content_type}
        if self._token is not None:
            call.phase = "reading the token file"
            headers["Authorization"] = f"Bearer {await self._token.current()}"
        url = self._url(target)
        retried = False
        while True:
            attempt = _Attempt(call)
            # Where the request stands is known only from our own pool's trace events.
            call.phase = "waiting for a connection" if self._pool is not None else None
            reset = _ATTEMPT.set(attempt)
            try:
                response = await client.request(
                    method, url, content=body, headers=headers, extensions={"trace": attempt.trace}
                )
            except (httpx.HTTPError, httpx.InvalidURL) as error:
                if not retried and _is_stale(error, attempt):
                    retried = True
                    self._stale_retries += 1
                    await self._drop_idle_connections()
                    continue
                raise _translate(error, self._origin, call, attempt) from error
            finally:
                _ATTEMPT.reset(reset)
            if response.status_code == 401 and self._token is not None:
                self._token.invalidate()
            return response

    async def _drop_idle_connections(self) -> None:
        # The server closed one of them behind our back (OPA restarted, or its idle timeout): the others are as
        # old, so the retry goes out on a new connection.
        if self._pool is None:
            return
        for connection in self._pool.connections:
            if connection.is_idle():
                await connection.aclose()

    async def _post_data(
        self, client: httpx.AsyncClient, call: _Call, target: str, body: bytes
    ) -> tuple[dict[str, Any], str]:
        """The Data API's answer document, and the revision that answered."""
        response = await self._exchange(client, call, "POST", target, body, "application/json")
        what = f"POST {target.split('?', 1)[0]}"
        if not 200 <= response.status_code < 300:
            raise _http_error(self._origin, what, response)
        document = _json_object(response, what, self._origin)
        warning = document.get("warning")
        if isinstance(warning, Mapping) and warning.get("code") == USAGE_WARNING_CODE:
            path = target.split("?", 1)[0]
            raise PolicyError(f"OPA warned about the request to {path}: {warning.get('message', USAGE_WARNING_CODE)}")
        return document, self._answer_revision(document.get("provenance"))

    def _answer_revision(self, provenance: object) -> str:
        """Remember the bundle revisions this answer reports; the revision that answered it."""
        now = self._clock.now()
        with self._state_lock:
            if isinstance(provenance, Mapping):
                self._bundles = _bundle_revisions(provenance)
                self._bundles_seen_at = now
                if self._bundles is not None:
                    return _bundles_revision(self._bundles)
            return self._generation_revision(now)

    async def _ensure_batch_module(self, client: httpx.AsyncClient, call: _Call, target_kind: str) -> None:
        module_id = batch_module_id(target_kind)
        if module_id in self._installed:
            return
        target = f"/v1/policies/{module_id}"
        call.what, call.phase = f"PUT {target}", "waiting for another call to install the batch module"
        lock = self._install_locks.setdefault(module_id, asyncio.Lock())
        async with lock:
            if module_id in self._installed:
                return
            refused = self._refused.get(module_id)
            if refused is not None and abs(self._clock.now() - refused[0]) < max(self._revision_ttl, 1.0):
                raise refused[1]
            source = batch_module(self._decision_path, target_kind).encode()
            response = await self._exchange(client, call, "PUT", target, source, "text/plain")
            if not 200 <= response.status_code < 300:
                error = _http_error(self._origin, f"PUT {target}", response)
                if 400 <= response.status_code < 500:
                    refusal = PolicyError(
                        f"OPA refused to install kubesched's batch module: {error}. If bundles own OPA's "
                        f"policies, add the module (kubesched.policy.contract.batch_module) to your bundle and "
                        f"set batchEndpoint (or turn off installBatchModule when it is served at "
                        f"{DATA_API_PREFIX}{batch_path(target_kind)})"
                    )
                    refusal.__cause__ = error
                    self._refused[module_id] = (self._clock.now(), refusal)
                    raise refusal
                raise error
            self._refused.pop(module_id, None)
            self._installed.add(module_id)
            with self._state_lock:
                self._next_generation(self._clock.now())


def _encode(input_doc: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps({"input": input_doc}, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as error:
        raise PolicyError(f"the policy input cannot be sent as JSON: {error}") from error


def _bundle_revisions(provenance: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    bundles = provenance.get("bundles")
    revisions: list[tuple[str, str]] = []
    if isinstance(bundles, Mapping):
        for name, info in bundles.items():
            if isinstance(info, Mapping) and isinstance(info.get("revision"), str):
                revisions.append((str(name), info["revision"]))
    return tuple(sorted(revisions)) or None


def _bundles_revision(bundles: tuple[tuple[str, str], ...]) -> str:
    return "bundles:" + ",".join(f"{name}={revision}" for name, revision in bundles)


def _target_name(target: Mapping[str, Any], target_kind: str) -> str:
    metadata = target.get("metadata") if isinstance(target, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise PolicyError(f"a {target_kind} in the batch has no metadata.name")
    return name


def _decision_id(document: Mapping[str, Any]) -> str | None:
    value = document.get("decision_id")
    return value if isinstance(value, str) and value else None


def _json_object(response: httpx.Response, what: str, origin: str) -> dict[str, Any]:
    try:
        document = json.loads(response.content)
    except ValueError as error:
        raise PolicyError(f"OPA at {origin} answered {what} with a body that is not JSON") from error
    if not isinstance(document, dict):
        raise PolicyError(f"OPA at {origin} answered {what} with {json_type_phrase(document)}, not an object")
    return document


def _http_error(origin: str, what: str, response: httpx.Response) -> OpaHttpError:
    code: str | None = None
    message: str | None = None
    details: list[str] = []
    try:
        document = json.loads(response.content) if response.content else None
    except ValueError:
        document = None
    if isinstance(document, Mapping):
        code = document.get("code") if isinstance(document.get("code"), str) else None
        message = document.get("message") if isinstance(document.get("message"), str) else None
        errors = document.get("errors")
        if isinstance(errors, list):
            details = [str(item.get("message")) for item in errors[:3] if isinstance(item, Mapping)]
    status = response.status_code
    text = f"OPA at {origin} answered {what} with {status} {response.reason_phrase}".rstrip()
    if code is not None or message is not None:
        text += ": " + ": ".join(part for part in (code, message) if part)
    if details:
        text += " (" + "; ".join(details) + ")"
    return OpaHttpError(text, status=status, code=code, opa_message=message)
