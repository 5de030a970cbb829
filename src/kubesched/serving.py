"""Serving an aiohttp application on a socket bound before the site starts, so the port chosen for port 0 is
known: the scheduler's health server (:mod:`kubesched.scheduler.health`) and the cluster agent
(:mod:`kubesched.agent.server`) start their sites through :func:`start_site`."""

from __future__ import annotations

import socket
import ssl

from aiohttp import web


def listening_socket(host: str, port: int) -> socket.socket:
    """A non-blocking socket bound to ``host:port`` and listening (IPv6 when ``host`` has a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def start_site(
    app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port``; (the runner to clean up, the port bound). Nothing is left open on failure."""
    sock = listening_socket(host, port)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    try:
        await runner.setup()
        await web.SockSite(runner, sock, ssl_context=ssl_context).start()
    except BaseException:
        await runner.cleanup()
        sock.close()
        raise
    return runner, sock.getsockname()[1]


def url_of(host: str, port: int, *, tls: bool) -> str:
    """``http(s)://host:port``, an IPv6 host in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"
