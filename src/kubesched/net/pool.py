"""Keep-alive HTTP/1.1 connections to one server: one exchange per connection at a time, idle ones reused.

Who uses it: the kube API client (:mod:`kubesched.backends.kube.client`) for every request but watches, the hub's
agent client (:mod:`kubesched.federation.agent_client`) and the remote OPA client (:mod:`kubesched.policy.remote`).
A request on a connection that breaks is never sent again here: the server may have acted on it (a Binding), so
the caller decides, with what :class:`~kubesched.net.http1.ExchangeTrace` tells it (was the connection reused, did
any of the answer arrive). An idle connection the server closed is dropped as soon as the loop reads the close;
``check_idle`` also looks at its socket before reusing it, for a close the loop has not read yet.
"""

from __future__ import annotations

import asyncio
import ipaddress
import select
import socket
import ssl

from kubesched.net.http1 import CONNECTING, Answer, ExchangeTrace, Http1Connection


class Http1Pool:
    """Idle keep-alive connections to one server, newest first; a new one when none is idle.

    ``check_idle``: before reusing an idle connection, see whether its socket is readable (the server closed it,
    or sent what no request asked for) and drop it if so. ``idle_expiry``: drop a connection idle that long
    (seconds of loop time) instead of reusing it.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        check_idle: bool = False,
        idle_expiry: float | None = None,
    ) -> None:
        self._host, self._port = host, port
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self._check_idle = check_idle or idle_expiry is not None
        self._idle_expiry = idle_expiry
        self._idle: list[Http1Connection] = []
        self._open: set[Http1Connection] = set()
        self._closed = False
        self.opened = 0

    def forget(self, connection: Http1Connection) -> None:
        self._open.discard(connection)
        if connection in self._idle:
            self._idle.remove(connection)

    async def exchange(self, request: bytes, trace: ExchangeTrace | None = None, max_body: int | None = None) -> Answer:
        """Send ``request`` (a whole HTTP/1.1 request) and read its answer; see the class doc."""
        while self._idle:
            connection = self._idle.pop()
            if connection.closed or (self._check_idle and not self._still_usable(connection)):
                continue
            if trace is not None:
                trace.reused = True
            return await self._on(connection, request, trace, max_body)
        if trace is not None:
            trace.phase = CONNECTING
        return await self._on(await self._connect(), request, trace, max_body)

    def _still_usable(self, connection: Http1Connection) -> bool:
        transport = connection.transport
        expiry = self._idle_expiry
        expired = expiry is not None and asyncio.get_running_loop().time() - connection.idle_since > expiry
        if transport is None or expired or _readable(transport):
            if transport is not None:
                transport.abort()
            return False
        return True

    async def _connect(self) -> Http1Connection:
        # A connect cancelled mid-handshake (a caller's deadline) can leave its socket unclosed in Python 3.11;
        # so the connect is never cancelled: it finishes in the background, and a caller that stopped waiting
        # leaves the new connection to the pool (closed if the pool was closed meanwhile).
        connecting = asyncio.ensure_future(self._open_connection())
        try:
            return await asyncio.shield(connecting)
        except asyncio.CancelledError:
            connecting.add_done_callback(self._adopt)
            raise

    async def _open_connection(self) -> Http1Connection:
        loop = asyncio.get_running_loop()
        last_error: OSError | None = None
        # Each address in turn, so that the error raised is a socket's own (ConnectionRefusedError, ...), not
        # asyncio's summary of several.
        for family, address in await _addresses(self._host, self._port):
            # IPPROTO_TCP named: asyncio's transports set TCP_NODELAY only on sockets that say they are TCP.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, address)
                _, connection = await loop.create_connection(
                    lambda: Http1Connection(self.forget),
                    sock=sock,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname,
                )
            except OSError as error:
                sock.close()
                last_error = error
                continue
            except BaseException:
                sock.close()
                raise
            self.opened += 1
            self._open.add(connection)
            return connection
        assert last_error is not None
        raise last_error

    def _adopt(self, connecting: asyncio.Future[Http1Connection]) -> None:
        if connecting.cancelled() or connecting.exception() is not None:
            return
        connection = connecting.result()
        if self._closed and connection.transport is not None:
            connection.transport.abort()
        elif not connection.closed:
            self._park(connection)

    def _park(self, connection: Http1Connection) -> None:
        if self._closed:
            # An exchange that finished after the pool was closed: nobody will take or close this connection.
            if connection.transport is not None:
                connection.transport.close()
            return
        if self._idle_expiry is not None:
            connection.idle_since = asyncio.get_running_loop().time()
        self._idle.append(connection)

    async def _on(
        self, connection: Http1Connection, request: bytes, trace: ExchangeTrace | None, max_body: int | None
    ) -> Answer:
        try:
            answer = await connection.send(request, trace, max_body)
        except BaseException:
            # Cancelled (a deadline) or broken mid-answer: what follows on this connection cannot be framed.
            if connection.transport is not None and not connection.closed:
                connection.transport.abort()
            raise
        if connection.reusable and not connection.closed:
            self._park(connection)
        elif connection.transport is not None and not connection.closed:
            connection.transport.close()
        return answer

    def trim(self, keep: int) -> None:
        """Close the oldest idle connections beyond ``keep``."""
        while len(self._idle) > keep:
            connection = self._idle.pop(0)
            if connection.transport is not None:
                connection.transport.close()

    def transports(self) -> list[asyncio.Transport]:
        """The transports of the open connections, idle or busy."""
        return [connection.transport for connection in self._open if connection.transport is not None]

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


async def _addresses(host: str, port: int) -> list[tuple[int, tuple[str, int] | tuple[str, int, int, int]]]:
    """Where ``host`` is: an IP address as it is (no resolver round trip), a name resolved by the loop's
    resolver (``socket.gaierror`` when it cannot be)."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        resolved = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(family, address) for family, _, _, _, address in resolved]
    if literal.version == 6:
        return [(socket.AF_INET6, (host, port, 0, 0))]
    return [(socket.AF_INET, (host, port))]


def _readable(transport: asyncio.Transport) -> bool:
    """Whether an idle connection's socket is readable: the server closed it (EOF, a reset) or sent what no
    request asked for; either way it cannot carry a request."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])  # pragma: no cover - Windows
    except (OSError, ValueError):
        return True
