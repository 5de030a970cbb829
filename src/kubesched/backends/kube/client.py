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
* A 429 or 5xx answer, or no answer, is retried up to ``max_retries`` times, after the server's
  ``Retry-After`` when it sent one (capped at :data:`MAX_RETRY_AFTER`), else a jittered exponential backoff;
  what is left is raised as :class:`~kubesched.backends.kube.errors.KubeApiError` or
  :class:`~kubesched.backends.kube.errors.KubeTransportError`.
* Each request has a deadline (``timeout``); a watch has a read timeout per line instead, so a stream that
  went silent (no event and no bookmark) is noticed.
* Credentials: a bearer token (fixed, from a file re-read when it changes at most once a minute, or from an
  exec plugin, re-run when its credential expires or after a 401), client certificates, or basic auth.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import random
import shutil
import socket
import ssl
import tempfile
import time
import urllib.parse
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiohttp
import aiohttp.http_exceptions

from kubesched.backends.kube.errors import KubeApiError, KubeConfigError, KubeTransportError
from kubesched.backends.kube.kubeconfig import ClusterConnection, ExecCredentialPlugin
from kubesched.net.http1 import ProtocolError, encode_request
from kubesched.net.pool import Http1Pool

MAX_RETRY_AFTER = 30.0
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


def _ssl_context(connection: ClusterConnection) -> ssl.SSLContext | bool:
    if not connection.server.startswith("https://"):
        return True
    context = ssl.create_default_context()
    if connection.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif connection.ca_data:
        try:
            context.load_verify_locations(cadata=connection.ca_data.decode())
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as error:
            raise KubeConfigError(f"{connection.source}: certificate-authority: not a PEM certificate") from error
    if connection.client_certificate_data or connection.client_key_data:
        if not (connection.client_certificate_data and connection.client_key_data):
            raise KubeConfigError(f"{connection.source}: client-certificate and client-key must be given together")
        # ssl loads a certificate chain only from files: write them to a private directory for the call.
        directory = tempfile.mkdtemp(prefix="kubesched-tls-")
        try:
            cert, key = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
            for path, data in ((cert, connection.client_certificate_data), (key, connection.client_key_data)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                    handle.write(data)
            context.load_cert_chain(cert, key)
        except ssl.SSLError as error:
            raise KubeConfigError(f"{connection.source}: client-certificate/client-key: {error}") from error
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return context


class _Credentials:
    """The Authorization header for the next request."""

    def __init__(self, connection: ClusterConnection) -> None:
        self._connection = connection
        self._token = connection.token
        self._token_checked = -1e18
        self._token_mtime: float | None = None
        self._exec_expires: float | None = None
        self._exec_lock = asyncio.Lock()

    async def header(self) -> str | None:
        connection = self._connection
        if connection.exec_plugin is not None:
            if self._exec_expires is not None and time.time() >= self._exec_expires - 10:
                self._token = ""
            if not self._token:
                async with self._exec_lock:
                    if not self._token:
                        self._token, self._exec_expires = await _run_exec_plugin(connection.exec_plugin)
        elif connection.token_file and time.monotonic() - self._token_checked >= TOKEN_FILE_RECHECK_SECONDS:
            self._token_checked = time.monotonic()
            await asyncio.to_thread(self._reread_token_file)
        if self._token:
            return f"Bearer {self._token}"
        if connection.username:
            pair = f"{connection.username}:{connection.password}".encode()
            return "Basic " + base64.b64encode(pair).decode()
        return None

    def _reread_token_file(self) -> None:
        path = self._connection.token_file
        try:
            mtime = os.stat(path).st_mtime
            if mtime != self._token_mtime:
                with open(path) as handle:
                    self._token = handle.read().strip()
                self._token_mtime = mtime
        except OSError:
            pass  # keep the token we have; the server's 401 will say if it no longer works

    def rejected(self) -> None:
        """The server answered 401: fetch the credential again before the next request."""
        self._token_checked = -1e18
        self._token_mtime = None
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


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` of an answer (our parser's lower-cased headers, or aiohttp's case-insensitive ones)."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return None


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
    ) -> None:
        self.connection = connection
        self.server = connection.server
        self.limiter = TokenBucket(qps, burst)
        self.max_retries = max_retries
        self.timeout = timeout
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._credentials = _Credentials(connection)
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
            ssl_context=context if isinstance(context, ssl.SSLContext) else None,
            server_hostname=self._server_hostname or url.hostname,
        )
        self._fixed_headers = f"User-Agent: {user_agent}\r\nAccept: {JSON}\r\n".encode("latin-1")
        # Made at the first watch: a client that never watches (a scheduler whose plugins could not be built)
        # leaves no session to close.
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0
        self.retries = 0

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
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=0, socket_factory=self._sockets),
                timeout=aiohttp.ClientTimeout(),
                headers={"User-Agent": self._user_agent, "Accept": JSON},
                trust_env=False,
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session

    def _backoff(self, attempt: int) -> float:
        return min(0.2 * 2.0**attempt, 5.0) * (0.5 + self._rng.random())

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
                if not retry or attempt >= self.max_retries:
                    raise
                await self._sleep(self._backoff(attempt))
            else:
                if status < 400:
                    return answer
                error = KubeApiError.from_response(status, answer, retry_after)
                if status == 401:
                    self._credentials.rejected()
                if not retry or not error.retryable or attempt >= self.max_retries:
                    raise error
                await self._sleep(retry_after if retry_after is not None else self._backoff(attempt))
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
        authorization = await self._credentials.header()
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
        return answer.status, _decode(answer.body), _retry_after(answer.headers)

    @asynccontextmanager
    async def stream_lines(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A watch: the lines of a streamed answer; a line not arriving within ``read_timeout`` ends it.

        Raises KubeApiError when the server answers the request itself with an error (410 included), and
        KubeTransportError when the stream breaks or goes silent.
        """
        headers: dict[str, str] = {}
        authorization = await self._credentials.header()
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
                raise KubeApiError.from_response(response.status, _decode(payload), _retry_after(response.headers))

            async def lines() -> AsyncIterator[bytes]:
                while True:
                    try:
                        async with asyncio.timeout(read_timeout):
                            line = await response.content.readline()
                    except TimeoutError as error:
                        raise KubeTransportError(f"GET {path} (watch): silent for {read_timeout:g} s") from error
                    except (aiohttp.ClientError, aiohttp.http_exceptions.HttpProcessingError, OSError) as error:
                        # HttpProcessingError: LineTooLong, an event beyond WATCH_READ_BUFSIZE
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
