"""The HTTP client for one API server: JSON requests and watch streams, rate-limited, retried, authenticated.

Built by ``kubesched run`` from a :class:`~kubesched.backends.kube.kubeconfig.ClusterConnection` and the
configuration's ``clientConnection`` (QPS and burst); used by the reflectors, the writers and the leader elector of
this package and by nothing else. Watches are aiohttp streams, as for remote OPA
(docs/explanation/design.md#own-the-client-and-its-errors); every other request goes through
the keep-alive HTTP/1.1 pool of :mod:`kubesched.net`, a quarter of aiohttp's CPU per request (two per scheduled
pod). Not lightkube: the scheduler decodes API objects into its own types (:mod:`kubesched.api.objects`)
straight from JSON, so lightkube's typed models would be a second decode of every object.

* Every request (not a watch: a watch is one long request that must not hold a token) first takes a token
  from a bucket refilled at ``qps`` and holding at most ``burst`` (client-go's flowcontrol limiter).
* A 429 or 5xx answer, or no answer, is retried up to ``max_retries`` times by :mod:`kubesched.net.retry`'s
  policy: after the server's ``Retry-After`` when it sent one (capped at :data:`MAX_RETRY_AFTER`), else a
  jittered exponential backoff; what is left is raised as :class:`~kubesched.backends.kube.errors.KubeApiError`
  or :class:`~kubesched.backends.kube.errors.KubeTransportError`.
* Each request has a deadline (``timeout``); a watch has a read timeout per line instead, so a stream that
  went silent (no event and no bookmark) is noticed.
* Credentials: a bearer token (fixed, from a file looked at again at most once a minute on the injected clock by
  :mod:`kubesched.net.token_file`, or from an exec plugin, re-run when its credential expires or after a 401),
  client certificates (:mod:`kubesched.net.tls`), or basic auth. A token file that cannot give a token fails the
  request with a :class:`~kubesched.backends.kube.errors.KubeTransportError` naming the file.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import random
import socket
import ssl
import time
import urllib.parse
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiohttp

from kubesched.backends.kube.errors import KubeApiError, KubeConfigError, KubeTransportError
from kubesched.backends.kube.kubeconfig import ClusterConnection, ExecCredentialPlugin
from kubesched.clock import Clock, RealClock
from kubesched.net.http1 import ProtocolError, encode_request
from kubesched.net.pool import Http1Pool
from kubesched.net.retry import Backoff, RetryPolicy, parse_retry_after
from kubesched.net.tls import Pem, TlsError, client_context
from kubesched.net.token_file import TokenFile, TokenFileError

MAX_RETRY_AFTER = 30.0
BACKOFF = Backoff(initial=0.2, maximum=5.0)
DEFAULT_TIMEOUT = 30.0
TOKEN_FILE_RECHECK_SECONDS = 60.0
# A watch line holds one whole object; aiohttp refuses lines longer than twice the read buffer (256 KiB by
# default), and etcd allows 1.5 MiB objects, whose JSON is larger still: lines up to 8 MiB.
WATCH_READ_BUFSIZE = 4 * 1024 * 1024
JSON = "application/json"
# How long aclose waits for the TLS goodbyes of connections closed before it; on loopback they take milliseconds.
CLOSE_GRACE_SECONDS = 1.0
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"

Sleep = Callable[[float], Awaitable[None]]


class TokenBucket:
    """client-go's token-bucket limiter: ``qps`` tokens a second, at most ``burst`` saved up."""

    def __init__(self, qps: float, burst: int, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._tokens = float(self.burst)
        self._monotonic = monotonic
        self._stamp = monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    async def acquire(self, sleep: Sleep = asyncio.sleep) -> None:
        if self.qps <= 0:
            return  # clientConnection.qps < 0 disables client-side limiting (as in client-go)
        async with self._lock:  # first come, first served
            self._refill()
            if self._tokens < 1.0:
                await sleep((1.0 - self._tokens) / self.qps)
                self._refill()
            self._tokens -= 1.0


def _ssl_context(connection: ClusterConnection) -> ssl.SSLContext | None:
    if not connection.server.startswith("https://"):
        return None
    certificate, key = connection.client_certificate_data, connection.client_key_data
    if (certificate is None) != (key is None):
        raise KubeConfigError(f"{connection.source}: client-certificate and client-key must be given together")
    try:
        return client_context(
            ca=Pem("certificate-authority", data=connection.ca_data) if connection.ca_data else None,
            client=(Pem("client-certificate", data=certificate), Pem("client-key", data=key))
            if certificate is not None and key is not None
            else None,
            verify=not connection.insecure_skip_tls_verify,
            where=connection.source,
        )
    except TlsError as error:
        raise KubeConfigError(str(error)) from error


class _Credentials:
    """The Authorization header for the next request."""

    def __init__(self, connection: ClusterConnection, clock: Clock) -> None:
        self._connection = connection
        self._clock = clock
        self._token = connection.token
        self._token_file = (
            TokenFile(connection.token_file, clock=clock, recheck_seconds=TOKEN_FILE_RECHECK_SECONDS)
            if connection.token_file and connection.exec_plugin is None
            else None
        )
        self._exec_expires: float | None = None
        self._exec_lock = asyncio.Lock()

    async def header(self) -> str | None:
        """Raises TokenFileError when the token file cannot give a token."""
        connection = self._connection
        if connection.exec_plugin is not None:
            if self._exec_expires is not None and self._clock.now() >= self._exec_expires - 10:
                self._token = ""
            if not self._token:
                async with self._exec_lock:
                    if not self._token:
                        self._token, self._exec_expires = await _run_exec_plugin(connection.exec_plugin)
        elif self._token_file is not None:
            self._token = await self._token_file.current()
        if self._token:
            return f"Bearer {self._token}"
        if connection.username:
            pair = f"{connection.username}:{connection.password}".encode()
            return "Basic " + base64.b64encode(pair).decode()
        return None

    def rejected(self) -> None:
        """The server answered 401: fetch the credential again before the next request."""
        if self._token_file is not None:
            self._token_file.invalidate()
        if self._connection.exec_plugin is not None:
            self._token = ""


async def _run_exec_plugin(plugin: ExecCredentialPlugin) -> tuple[str, float | None]:
    environment = dict(os.environ)
    environment.update(plugin.env)
    environment["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    )
    try:
        process = await asyncio.create_subprocess_exec(
            plugin.command,
            *plugin.args,
            env=environment,
            cwd=plugin.working_dir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    except (OSError, TimeoutError) as error:
        raise KubeTransportError(f"exec credential plugin {plugin.command}: {error}") from error
    if process.returncode != 0:
        raise KubeTransportError(
            f"exec credential plugin {plugin.command} exited with {process.returncode}: {stderr.decode()[-300:]}"
        )
    try:
        status = json.loads(stdout)["status"]
        token = str(status["token"])
    except (ValueError, KeyError, TypeError) as error:
        raise KubeTransportError(
            f"exec credential plugin {plugin.command}: the output is not an ExecCredential with status.token"
        ) from error
    expires: float | None = None
    stamp = status.get("expirationTimestamp")
    if isinstance(stamp, str) and stamp:
        try:
            expires = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            expires = None
    return token, expires


def _decode(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode(errors="replace")


class _OpenedSockets:
    """The connector's socket factory, remembering what it made. A connection aiohttp closed before the session
    (a cancelled request) says its TLS goodbye on its own, which waits for the server's; it must end before
    the loop is closed, or the socket is left to the collector."""

    def __init__(self) -> None:
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self.count = 0  # connections opened so far (each a TLS handshake with the API server)

    def __call__(self, address: tuple[Any, ...]) -> socket.socket:
        family, kind, protocol = address[0], address[1], address[2]
        opened = socket.socket(family=family, type=kind, proto=protocol)
        self._sockets.add(opened)
        self.count += 1
        return opened

    def still_open(self) -> list[socket.socket]:
        return [opened for opened in list(self._sockets) if opened.fileno() != -1]

    async def wait_closed(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the goodbyes, then shut the sockets still open: the transport reads
        the end of its stream and closes itself, as when a server hangs up."""
        await asyncio.sleep(0)  # a closed transport lets its socket go in a callback of the next loop pass
        deadline = time.monotonic() + grace
        while self.still_open() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for lingering in self.still_open():
            with suppress(OSError):
                lingering.shutdown(socket.SHUT_RDWR)
        for _ in range(100):
            if not self.still_open():
                return
            await asyncio.sleep(0.01)


class KubeClient:
    """Requests to one API server (see the module doc); create inside the running loop, close with aclose."""

    overlaps_requests = True  # concurrent requests overlap their round trips (kubesched.agent.api.MemberApi)

    def __init__(
        self,
        connection: ClusterConnection,
        *,
        qps: float = 50.0,
        burst: int = 100,
        max_retries: int = 5,
        timeout: float = DEFAULT_TIMEOUT,
        user_agent: str = "kubesched",
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.connection = connection
        self.server = connection.server
        self.limiter = TokenBucket(qps, burst)
        self.timeout = timeout
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._retry = RetryPolicy(BACKOFF, max_retries, MAX_RETRY_AFTER)
        self._credentials = _Credentials(connection, self._clock)
        self._server_hostname = connection.tls_server_name or None
        self._sockets = _OpenedSockets()
        context = _ssl_context(connection)
        self._ssl = context
        self._user_agent = user_agent
        url = urllib.parse.urlsplit(self.server)
        self._prefix = url.path.rstrip("/")
        self._host_header = url.netloc.rpartition("@")[2]
        self._pool = Http1Pool(
            url.hostname or "",
            url.port or (443 if url.scheme == "https" else 80),
            ssl_context=context,
            server_hostname=self._server_hostname or url.hostname,
        )
        self._fixed_headers = f"User-Agent: {user_agent}\r\nAccept: {JSON}\r\n".encode("latin-1")
        # Made at the first watch: a client that never watches (a scheduler whose plugins could not be built)
        # leaves no session to close.
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0
        self.retries = 0

    @property
    def max_retries(self) -> int:
        return self._retry.max_retries

    @property
    def connections_opened(self) -> int:
        return self._sockets.count + self._pool.opened

    async def aclose(self) -> None:
        await self._pool.aclose(CLOSE_GRACE_SECONDS)
        if self._session is not None:
            await self._session.close()
        await self._sockets.wait_closed(CLOSE_GRACE_SECONDS)

    def _watch_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    ssl=self._ssl if self._ssl is not None else True, limit=0, socket_factory=self._sockets
                ),
                timeout=aiohttp.ClientTimeout(),
                headers={"User-Agent": self._user_agent, "Accept": JSON},
                trust_env=False,
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session

    def _retry_after(self, headers: Mapping[str, str]) -> float | None:
        """``Retry-After`` of an answer (our parser's lower-cased headers, or aiohttp's case-insensitive ones),
        capped as the retry policy caps it."""
        seconds = parse_retry_after(headers.get("retry-after"), self._clock.now())
        return None if seconds is None else min(seconds, MAX_RETRY_AFTER)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        retry: bool = True,
    ) -> Any:
        """One API call; the decoded JSON answer. Raises KubeApiError / KubeTransportError (module doc)."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        attempt = 0
        while True:
            await self.limiter.acquire(self._sleep)
            try:
                status, answer, retry_after = await self._once(method, path, query, data, content_type, timeout)
            except KubeTransportError:
                if not retry or not self._retry.allows(attempt):
                    raise
                await self._sleep(self._retry.delay(attempt, None, self._rng))
            else:
                if status < 400:
                    return answer
                error = KubeApiError.from_response(status, answer, retry_after)
                if status == 401:
                    self._credentials.rejected()
                if not retry or not error.retryable or not self._retry.allows(attempt):
                    raise error
                await self._sleep(self._retry.delay(attempt, retry_after, self._rng))
            attempt += 1
            self.retries += 1

    async def _once(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        data: bytes | None,
        content_type: str,
        timeout: float | None,
    ) -> tuple[int, Any, float | None]:
        headers = {"Content-Type": content_type} if data is not None else {}
        authorization = await self._authorization(method, path)
        if authorization:
            headers["Authorization"] = authorization
        target = self._prefix + path + ("?" + urllib.parse.urlencode(query) if query else "")
        request = encode_request(method, target, self._host_header, headers, data, self._fixed_headers)
        self.requests_sent += 1
        deadline = timeout if timeout is not None else self.timeout
        try:
            async with asyncio.timeout(deadline):
                answer = await self._pool.exchange(request)
        except TimeoutError as error:
            raise KubeTransportError(f"{method} {path}: no answer within the deadline ({deadline:g} s)") from error
        except (ProtocolError, OSError) as error:  # ConnectionClosed and ssl.SSLError are OSErrors
            raise KubeTransportError(f"{method} {path}: {type(error).__name__}: {error}") from error
        return answer.status, _decode(answer.body), self._retry_after(answer.headers)

    async def _authorization(self, method: str, path: str) -> str | None:
        try:
            return await self._credentials.header()
        except TokenFileError as error:
            raise KubeTransportError(f"{method} {path}: {error}") from error

    @asynccontextmanager
    async def stream_lines(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A watch: the lines of a streamed answer; a line not arriving within ``read_timeout`` ends it.

        Raises KubeApiError when the server answers the request itself with an error (410 included), and
        KubeTransportError when the stream breaks or goes silent.
        """
        headers: dict[str, str] = {}
        authorization = await self._authorization("GET", f"{path} (watch)")
        if authorization:
            headers["Authorization"] = authorization
        self.requests_sent += 1
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._watch_session().get(
                    self.server + path,
                    params=query,
                    headers=headers,
                    server_hostname=self._server_hostname,
                    read_bufsize=WATCH_READ_BUFSIZE,
                )
        except TimeoutError as error:
            raise KubeTransportError(f"GET {path} (watch): no answer within the deadline") from error
        except (aiohttp.ClientError, OSError) as error:
            raise KubeTransportError(f"GET {path} (watch): {type(error).__name__}: {error}") from error
        try:
            if response.status >= 400:
                payload = await response.read()
                if response.status == 401:
                    self._credentials.rejected()
                raise KubeApiError.from_response(response.status, _decode(payload), self._retry_after(response.headers))

            async def lines() -> AsyncIterator[bytes]:
                while True:
                    try:
                        async with asyncio.timeout(read_timeout):
                            line = await response.content.readline()
                    except TimeoutError as error:
                        raise KubeTransportError(f"GET {path} (watch): silent for {read_timeout:g} s") from error
                    except Exception as error:
                        # aiohttp's ClientErrors, OSErrors, and its parser's LineTooLong (an event beyond
                        # WATCH_READ_BUFSIZE), which it raises from a module it does not export: reading a stream
                        # fails only in ways of the connection, so every one is a transport error.
                        raise KubeTransportError(f"GET {path} (watch): {type(error).__name__}: {error}") from error
                    if not line:
                        return
                    if line.strip():
                        yield line

            yield lines()
        finally:
            # A stream given up midway (cancelled, silent, broken) is cut off: a TLS goodbye on a stream
            # the server keeps writing to would outlive the client.
            connection = response.connection
            if connection is not None and connection.transport is not None:
                connection.transport.abort()
            response.close()
