"""HTTP/1.1 on one connection: a request encoded in one piece, its answer parsed as the bytes arrive.

Who uses it: :class:`~kubesched.net.pool.Http1Pool`, which keeps these connections alive between requests for the
kube API client, the hub's agent client and the remote OPA client. Why not aiohttp for these: its
``ClientSession.request`` costs several times this parser's CPU per small request, and a live scheduler makes
such requests per pod on the one thread that also runs the scheduling cycle
(docs/reference/benchmarks.md#api-server).

What it speaks: requests with ``Content-Length`` bodies; answers framed by ``Content-Length``, ``chunked``
transfer coding, or the end of the connection; ``Connection: close`` honoured; 1xx answers skipped. No
compression is asked for, so an answer with a ``Content-Encoding`` is refused as malformed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

MAX_HEAD_BYTES = 64 * 1024

CONNECTING = "connecting"
WAITING = "waiting for the answer"
READING = "reading the answer"


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this parser understands."""


class AnswerTooLarge(ProtocolError):
    """The answer's body is longer than the exchange allowed; it was not read further."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit} bytes")
        self.limit = limit


class ConnectionClosed(ConnectionError):
    """The connection ended before the whole answer arrived; ``received``: some of the answer had (so the
    server acted on the request). The socket's own error, if any, is the ``__cause__``."""

    def __init__(self, message: str, *, received: bool) -> None:
        super().__init__(message)
        self.received = received


class ExchangeTrace(Protocol):
    """Where one exchange got to, for a caller that explains failures or decides whether to send again: its
    phase (:data:`CONNECTING`, :data:`WAITING`, :data:`READING`), whether it went out on a connection that had
    served before, and whether any byte of its answer arrived."""

    phase: str | None
    reused: bool
    received: bool


class Answer:
    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, reason: str = "") -> None:
        self.status = status
        self.headers = headers  # names lower-cased
        self.body = body
        self.reason = reason  # the status line's reason phrase ("Bad Gateway"), for messages


class Http1Connection(asyncio.Protocol):
    """One connection: at most one exchange at a time; ``on_lost`` is told when it ends."""

    def __init__(self, on_lost: Callable[[Http1Connection], None]) -> None:
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self.idle_since = 0.0  # loop time it went back to its pool (kept by pools that expire idle connections)
        self._waiter: asyncio.Future[Answer] | None = None
        self._trace: ExchangeTrace | None = None
        self._max_body: int | None = None
        self._received = False
        self._buffer = bytearray()
        self._status = 0
        self._reason = ""
        self._headers: dict[str, str] = {}
        self._body_start = -1  # where the body begins in the buffer, once the head is parsed
        self._length = -1  # Content-Length, -1 chunked or until close
        self._chunked = False
        self._chunks: list[bytes] = []
        self._chunked_size = 0
        self._scan = 0  # chunked: where the next chunk-size line starts
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_lost(self)
        if not self.lost.done():
            self.lost.set_result(None)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if self._body_start >= 0 and self._length < 0 and not self._chunked:
                waiter.set_result(self._answer(bytes(self._buffer[self._body_start :])))  # framed by the close
            else:
                reason = f": {exc}" if exc else ""
                error = ConnectionClosed(f"the server closed the connection{reason}", received=self._received)
                error.__cause__ = exc
                waiter.set_exception(error)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            # Bytes nobody asked for: the framing is lost, and the connection with it.
            self.reusable = False
            if self.transport is not None:
                self.transport.abort()
            return
        if not self._received:
            self._received = True
            if self._trace is not None:
                self._trace.received = True
        self._buffer += data
        try:
            self._advance()
        except ProtocolError as error:
            self.reusable = False
            if not self._waiter.done():
                self._waiter.set_exception(error)

    def send(
        self, request: bytes, trace: ExchangeTrace | None = None, max_body: int | None = None
    ) -> asyncio.Future[Answer]:
        """Write ``request`` (in one write: a head sent apart from its body can wait for a delayed ACK) and
        return the future of its answer; a body longer than ``max_body`` fails it with :class:`AnswerTooLarge`."""
        assert self.transport is not None
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._trace, self._max_body, self._received = trace, max_body, False
        self._buffer.clear()
        self._body_start, self._length, self._chunked, self._chunks, self._scan = -1, -1, False, [], 0
        self._chunked_size = 0
        self.transport.write(request)
        if trace is not None:
            trace.phase = WAITING
        return waiter

    def _answer(self, body: bytes) -> Answer:
        self._waiter = None
        return Answer(self._status, self._headers, body, self._reason)

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
            if self._trace is not None:
                self._trace.phase = READING
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._chunked:
            body = self._read_chunks()
            if body is not None:
                del buffer[:]
                waiter.set_result(self._answer(body))
        elif self._length >= 0:
            if len(buffer) - self._body_start >= self._length:
                body = bytes(buffer[self._body_start : self._body_start + self._length])
                del buffer[:]
                waiter.set_result(self._answer(body))
        elif self._max_body is not None and len(buffer) - self._body_start > self._max_body:
            raise AnswerTooLarge(self._max_body)

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12 or not status_line[9:12].isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
        self._status = int(status_line[9:12])
        self._reason = status_line[13:].strip().decode("latin-1")
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
        encoding = headers.get("content-encoding")
        if encoding is not None and encoding.lower() not in ("", "identity"):
            raise ProtocolError(f"an answer in Content-Encoding {encoding[:40]!r}, which was not asked for")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in headers:
            try:
                self._length = int(headers["content-length"])
            except ValueError:
                raise ProtocolError(f"Content-Length {headers['content-length']!r}") from None
            if self._max_body is not None and self._length > self._max_body:
                raise AnswerTooLarge(self._max_body)
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
            if self._max_body is not None and self._chunked_size + size > self._max_body:
                raise AnswerTooLarge(self._max_body)
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
            self._chunked_size += size
            position = chunk_start + size + 2


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
