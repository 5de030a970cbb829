"""Keep-alive HTTP/1.1 exchanges with the API server for ordinary requests (bindings, events, status patches,
leases, lists): one request written in one piece, one answer read by a small parser.

Who calls it: :class:`~kubesched.backends.kube.client.KubeClient` for every request that is not a watch (watches
stay on aiohttp's streaming reader). Why not aiohttp for these: its ``ClientSession.request`` costs several times
this client's CPU per small request, and a live scheduler makes two such requests per pod (its Binding and its
``Scheduled`` event) on the one thread that also runs the scheduling cycle (docs/reference/benchmarks.md#api-server).

What it speaks: requests with ``Content-Length`` bodies; answers framed by ``Content-Length``, ``chunked``
transfer coding, or the end of the connection; ``Connection: close`` honoured; 1xx answers skipped. No
compression is asked for, so none comes. An idle connection the server closed is dropped from the pool. A
request on a connection that breaks is never sent again here: the server may have acted on it (a Binding), so
the caller decides (:class:`~kubesched.backends.kube.client.KubeClient` retries with backoff, counted).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping

MAX_HEAD_BYTES = 64 * 1024


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this parser understands."""


class ConnectionClosed(ConnectionError):
    """The connection ended before the whole answer arrived."""


class Answer:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # names lower-cased
        self.body = body


class _Connection(asyncio.Protocol):
    """One connection: at most one exchange at a time; parses the answer as its bytes arrive."""

    def __init__(self, pool: Http1Pool) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._waiter: asyncio.Future[Answer] | None = None
        self._buffer = bytearray()
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body_start = -1  # where the body begins in the buffer, once the head is parsed
        self._length = -1  # Content-Length, -1 chunked or until close
        self._chunked = False
        self._chunks: list[bytes] = []
        self._scan = 0  # chunked: where the next chunk-size line starts
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        if not self.lost.done():
            self.lost.set_result(None)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if self._body_start >= 0 and self._length < 0 and not self._chunked:
                waiter.set_result(self._answer(bytes(self._buffer[self._body_start :])))  # framed by the close
            else:
                reason = f": {exc}" if exc else ""
                waiter.set_exception(ConnectionClosed(f"the server closed the connection{reason}"))

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            self.reusable = False  # bytes nobody asked for: the framing is lost
            return
        self._buffer += data
        try:
            self._advance()
        except ProtocolError as error:
            self.reusable = False
            if not self._waiter.done():
                self._waiter.set_exception(error)

    def send(self, request: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._buffer.clear()
        self._body_start, self._length, self._chunked, self._chunks, self._scan = -1, -1, False, [], 0
        self.transport.write(request)
        return self._waiter

    def _answer(self, body: bytes) -> Answer:
        self._waiter = None
        return Answer(self._status, self._headers, body)

    def _advance(self) -> None:
        buffer = self._buffer
        while self._body_start < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise ProtocolError(f"an answer head longer than {MAX_HEAD_BYTES} bytes")
                return
            self._parse_head(bytes(buffer[:end]))
            if 100 <= self._status < 200:
                del buffer[: end + 4]  # 100 Continue and the like: the real answer follows
                continue
            self._body_start = end + 4
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._chunked:
            body = self._read_chunks()
            if body is not None:
                del buffer[:]
                waiter.set_result(self._answer(body))
        elif self._length >= 0 and len(buffer) - self._body_start >= self._length:
            body = bytes(buffer[self._body_start : self._body_start + self._length])
            del buffer[:]
            waiter.set_result(self._answer(body))

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12 or not status_line[9:12].isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
        self._status = int(status_line[9:12])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise ProtocolError(f"a header line without a colon: {line[:80]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        self._headers = headers
        if 100 <= self._status < 200:
            return  # an interim answer: it frames nothing
        if headers.get("connection", "").lower() == "close":
            self.reusable = False
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in headers:
            try:
                self._length = int(headers["content-length"])
            except ValueError:
                raise ProtocolError(f"Content-Length {headers['content-length']!r}") from None
        elif self._status in (204, 304):
            self._length = 0
        else:
            self._length, self.reusable = -1, False  # the body ends with the connection

    def _read_chunks(self) -> bytes | None:
        """The whole body once its last chunk is in; None while more is to come."""
        buffer = self._buffer
        position = self._scan or self._body_start
        while True:
            line_end = buffer.find(b"\r\n", position)
            if line_end < 0:
                self._scan = position
                return None
            size_text = bytes(buffer[position:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"a chunk size that is not hexadecimal: {size_text[:20]!r}") from None
            if size == 0:
                # The last chunk; trailer lines, if any, end with an empty line ("0\r\n\r\n" without).
                if buffer.find(b"\r\n\r\n", line_end) < 0:
                    self._scan = position
                    return None
                return b"".join(self._chunks)
            chunk_start = line_end + 2
            if len(buffer) < chunk_start + size + 2:
                self._scan = position
                return None
            self._chunks.append(bytes(buffer[chunk_start : chunk_start + size]))
            position = chunk_start + size + 2


class Http1Pool:
    """Idle keep-alive connections to one server, newest first; a new one when none is idle."""

    def __init__(
        self, host: str, port: int, *, ssl_context: ssl.SSLContext | None, server_hostname: str | None
    ) -> None:
        self._host, self._port = host, port
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._closed = False
        self.opened = 0

    def forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        if connection in self._idle:
            self._idle.remove(connection)

    async def _connect(self) -> _Connection:
        # A connect cancelled mid-handshake (a caller's deadline) can leave its socket unclosed in Python 3.11;
        # so the connect is never cancelled: it finishes in the background, and a caller that stopped waiting
        # leaves the new connection to the pool (closed if the pool was closed meanwhile).
        connecting = asyncio.ensure_future(self._open_connection())
        try:
            return await asyncio.shield(connecting)
        except asyncio.CancelledError:
            connecting.add_done_callback(self._adopt)
            raise

    async def _open_connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            lambda: _Connection(self),
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._server_hostname,
        )
        self.opened += 1
        self._open.add(connection)
        return connection

    def _adopt(self, connecting: asyncio.Future[_Connection]) -> None:
        if connecting.cancelled() or connecting.exception() is not None:
            return
        connection = connecting.result()
        if self._closed and connection.transport is not None:
            connection.transport.abort()
        elif not connection.closed:
            self._idle.append(connection)

    async def exchange(self, request: bytes) -> Answer:
        """Send ``request`` (a whole HTTP/1.1 request) and read its answer."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return await self._on(connection, request)
        return await self._on(await self._connect(), request)

    async def _on(self, connection: _Connection, request: bytes) -> Answer:
        try:
            answer = await connection.send(request)
        except BaseException:
            # Cancelled (a deadline) or broken mid-answer: what follows on this connection cannot be framed.
            if connection.transport is not None and not connection.closed:
                connection.transport.abort()
            raise
        if connection.reusable and not connection.closed:
            self._idle.append(connection)
        elif connection.transport is not None and not connection.closed:
            connection.transport.close()
        return answer

    async def aclose(self, grace: float) -> None:
        """Close every connection, waiting up to ``grace`` seconds for the TLS goodbyes."""
        self._closed = True
        connections = list(self._open)
        self._idle.clear()
        for connection in connections:
            if connection.transport is not None:
                connection.transport.close()
        pending = [connection.lost for connection in connections if not connection.lost.done()]
        if pending:
            await asyncio.wait(pending, timeout=grace)
            for connection in connections:
                if not connection.lost.done() and connection.transport is not None:
                    connection.transport.abort()


def encode_request(
    method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None, fixed_headers: bytes
) -> bytes:
    """The request's bytes: request line, Host, the client's fixed headers, these headers, then the body."""
    parts = [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n".encode("latin-1"), fixed_headers]
    for name, value in headers.items():
        parts.append(f"{name}: {value}\r\n".encode("latin-1"))
    if body is not None:
        parts.append(f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1"))
        parts.append(body)
    else:
        parts.append(b"\r\n")
    return b"".join(parts)
