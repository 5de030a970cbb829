"""The API client's HTTP/1.1 exchanges against a scripted server: every framing the API server may use, split
at every byte, keep-alive reuse, ``Connection: close``, and a server that hangs up."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from kubesched.net.http1 import ConnectionClosed, ProtocolError, encode_request
from kubesched.net.pool import Http1Pool


async def serve(answers: list[list[bytes]], *, close_after: bool = False) -> tuple[asyncio.Server, int, list[bytes]]:
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break  # the client closed its connection
            lines = head.split(b"\r\n")
            length = next((int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length")), 0)
            seen.append(head + await reader.readexactly(length))
            for piece in answers.pop(0):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0)
            if close_after:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def split_everywhere(answer: bytes) -> list[list[bytes]]:
    return [[answer[:i], answer[i:]] for i in range(1, len(answer))]


LENGTH = b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"a": true}'
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
    b'4\r\n{"a"\r\n7;ext=1\r\n: true}\r\n0\r\n\r\n'
)
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH


@pytest.mark.parametrize("answer", [LENGTH, CHUNKED, CONTINUE], ids=["content-length", "chunked", "100-continue"])
def test_every_framing_split_at_every_byte(answer: bytes) -> None:
    async def scenario() -> None:
        pieces = split_everywhere(answer)
        server, port, seen = await serve([list(p) for p in pieces])
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        try:
            for _ in pieces:
                got = await pool.exchange(encode_request("POST", "/x", "h", {"A": "b"}, b"{}", b"Accept: j\r\n"))
                assert (got.status in (200, 201), got.body) == (True, b'{"a": true}')
            assert pool.opened == 1, "one keep-alive connection served every exchange"
        finally:
            await pool.aclose(1.0)
            server.close()
        assert seen[0] == b"POST /x HTTP/1.1\r\nHost: h\r\nAccept: j\r\nA: b\r\nContent-Length: 2\r\n\r\n{}"

    asyncio.run(scenario())


def test_headers_are_lower_cased_and_a_get_has_no_body() -> None:
    async def scenario() -> None:
        server, port, seen = await serve([[CHUNKED]])
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        try:
            got = await pool.exchange(encode_request("GET", "/y?a=1", "h", {}, None, b""))
        finally:
            await pool.aclose(1.0)
            server.close()
        assert got.headers["retry-after"] == "3"
        assert seen == [b"GET /y?a=1 HTTP/1.1\r\nHost: h\r\n\r\n"]

    asyncio.run(scenario())


def test_connection_close_and_an_answer_ended_by_the_close() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    unframed = b"HTTP/1.1 200 OK\r\n\r\nuntil the end"

    async def scenario() -> None:
        server, port, _ = await serve([[closing], [unframed]], close_after=True)
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        try:
            assert (await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))).body == b"ok"
            assert (await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))).body == b"until the end"
            assert pool.opened == 2, "a connection the server asked to close is not reused"
        finally:
            await pool.aclose(1.0)
            server.close()

    asyncio.run(scenario())


def test_a_server_that_hangs_up_mid_answer_and_a_garbled_answer_are_errors() -> None:
    async def scenario() -> None:
        server, port, _ = await serve([[LENGTH[:-4]]], close_after=True)
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        with pytest.raises(ConnectionClosed):
            await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))
        server.close()
        server, port, _ = await serve([[b"HTTP/1.1 OK\r\n\r\n"]])
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        with pytest.raises(ProtocolError, match=r"not an HTTP/1\.1 status line"):
            await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))
        await pool.aclose(1.0)
        server.close()

    asyncio.run(scenario())


def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    async def scenario() -> None:
        server, port, _ = await serve([[LENGTH], [LENGTH]], close_after=True)
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        try:
            await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))
            for _ in range(20):
                await asyncio.sleep(0.01)  # the server's close reaches the client
            assert (await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))).status == 201
            assert pool.opened == 2
        finally:
            await pool.aclose(1.0)
            server.close()

    asyncio.run(scenario())


def test_a_pooled_connection_has_tcp_nodelay_on_its_socket(run_async: Any) -> None:
    """A small request must not wait for the server's delayed ACK of the one before it (Nagle's algorithm)."""

    async def scenario() -> int:
        server, port, _ = await serve([[b"HTTP/1.1 204 No Content\r\n\r\n"]])
        pool = Http1Pool("127.0.0.1", port, ssl_context=None, server_hostname=None)
        try:
            await pool.exchange(encode_request("GET", "/", "h", {}, None, b""))
            (transport,) = pool.transports()
            return int(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        finally:
            await pool.aclose(1.0)
            server.close()
            await server.wait_closed()

    assert run_async(scenario()) != 0
