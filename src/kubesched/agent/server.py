"""The cluster agent's HTTPS endpoints, in front of one member cluster's API server (``kubesched agent``).

Who calls it: ``kubesched agent`` (:func:`serve`) and the tests, which start an :class:`AgentServer` on loopback;
the hub's :class:`~kubesched.federation.agent_client.AgentClient` is its client. Every request needs ``Authorization:
Bearer <token>`` (compared in constant time); a mutating call may carry the hub's fencing token in the
``Kubesched-Fencing-Token`` header; errors are ``{"reason", "message"}``; the member's API failing is 502 (it
answered an error) or 503 (no answer). The endpoints, their bodies and answers are specified in the OpenAPI document
docs/reference/agent-api.yaml (a test holds it equal to the routes and answers here); the shapes are
:mod:`kubesched.federation.wire`'s. Expired reservations are swept every ``sweep_interval`` seconds on the agent's
clock.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from kubesched.agent.core import Agent, HubPodRef, Refused
from kubesched.api import jsonwire
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.clock import sleep
from kubesched.federation.wire import (
    BIND_PATH,
    FENCING_TOKEN_HEADER,
    HUB_PODS_PATH,
    PODS_PATH,
    RESERVATIONS_PATH,
    STATE_PATH,
    WireError,
    reservation_request_from_json,
    state_to_json,
)
from kubesched.net.tls import Pem, server_context
from kubesched.serving import start_site, url_of

__all__ = ["AgentServer", "server_ssl_context"]

log = logging.getLogger(__name__)

DEFAULT_SWEEP_INTERVAL = 5.0
MAX_BODY_BYTES = 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def server_ssl_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The agent's serving context, from the files of ``--tls-cert`` and ``--tls-key``; TlsError naming them."""
    return server_context(Pem("--tls-cert", path=str(cert)), Pem("--tls-key", path=str(key)))


def _json(data: Any, *, status: int = 200) -> web.Response:
    """``web.json_response``'s answer, encoded by :mod:`kubesched.api.jsonwire` (orjson) rather than ``json``."""
    return web.Response(body=jsonwire.dumps(data), status=status, content_type="application/json", charset="utf-8")


def _error(status: int, reason: str, message: str, retry_after: float | None = None) -> web.Response:
    response = _json({"reason": reason, "message": message}, status=status)
    if retry_after is not None:
        response.headers["Retry-After"] = str(max(1, round(retry_after)))
    return response


def _token(request: web.Request) -> int:
    """The fencing token the hub sent (0 without one)."""
    given = request.headers.get(FENCING_TOKEN_HEADER, "0")
    if not given.isdigit():
        raise WireError(f"{FENCING_TOKEN_HEADER}: must be a non-negative integer")
    return int(given)


class AgentServer:
    """HTTPS endpoints of one :class:`Agent` (module doc); ``port`` 0 picks a free port."""

    def __init__(
        self,
        agent: Agent,
        *,
        token: str,
        ssl_context: ssl.SSLContext | None,
        host: str = "127.0.0.1",
        port: int = 0,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    ) -> None:
        self.agent = agent
        self._expected = f"Bearer {token}".encode()
        self.ssl_context = ssl_context
        self.host = host
        self._requested_port = port
        self.sweep_interval = sweep_interval
        self._runner: web.AppRunner | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._port: int | None = None
        app = web.Application(middlewares=[self._authenticate, self._translate], client_max_size=MAX_BODY_BYTES)
        app.router.add_get(STATE_PATH, self._state)
        app.router.add_post(RESERVATIONS_PATH, self._reserve)
        app.router.add_delete(RESERVATIONS_PATH + "/{id}", self._release)
        app.router.add_post(BIND_PATH, self._bind)
        app.router.add_delete(PODS_PATH + "/{namespace}/{name}", self._delete_pod)
        app.router.add_get(HUB_PODS_PATH + "/{uid}", self._find)
        self.app = app

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the agent server is not started")
        return self._port

    @property
    def url(self) -> str:
        return url_of(self.host, self.port, tls=self.ssl_context is not None)

    async def start(self) -> None:
        if self._runner is not None:
            return
        await self.agent.ensure_namespace()
        self._runner, self._port = await start_site(self.app, self.host, self._requested_port, self.ssl_context)
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="kubesched-agent-sweeper")
        log.info("cluster agent serving on %s (namespace %s)", self.url, self.agent.namespace)

    async def close(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        await self.agent.aclose()  # its watches of the member serve these endpoints only

    async def __aenter__(self) -> AgentServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _sweep_forever(self) -> None:
        while True:
            await sleep(self.agent.clock, self.sweep_interval)
            try:
                await self.agent.sweep_expired()
            except (KubeApiError, KubeTransportError) as error:  # the member is down: try again next round
                log.warning("sweeping expired reservations failed: %s", error)
            except Exception:  # a bug must not end the sweeps: unconfirmed reservations would then never expire
                log.exception("sweeping expired reservations failed")

    # ------------------------------------------------------------------------------------------- middleware

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            return _error(401, "Unauthorized", "a valid bearer token is required")
        return await handler(request)

    @web.middleware
    async def _translate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except Refused as refusal:
            return _error(refusal.status, refusal.reason, refusal.message, refusal.retry_after)
        except WireError as error:
            return _error(400, "Invalid", str(error))
        except KubeApiError as error:
            log.warning("%s %s: the member's API answered %s", request.method, request.path, error.status)
            return _error(502, "MemberUnavailable", f"the member's API answered {error.status}: {error.message}")
        except KubeTransportError as error:
            log.warning("%s %s: the member's API did not answer: %s", request.method, request.path, error)
            return _error(503, "MemberUnavailable", f"the member's API did not answer: {error}")

    # --------------------------------------------------------------------------------------------- handlers

    @staticmethod
    async def _body(request: web.Request) -> Any:
        try:
            return jsonwire.loads(await request.read())
        except ValueError as error:
            raise WireError(f"the body is not JSON: {error}") from error

    async def _state(self, request: web.Request) -> web.Response:
        state, reservations = await self.agent.state()
        return _json(state_to_json(state, [r.to_json() for r in reservations]))

    async def _reserve(self, request: web.Request) -> web.Response:
        wanted = reservation_request_from_json(await self._body(request))
        reservation, created = await self.agent.reserve(wanted, _token(request))
        return _json({"reservation": reservation.to_json()}, status=201 if created else 200)

    async def _release(self, request: web.Request) -> web.Response:
        query = request.query
        hub_pod = None
        if query.get("hubPodUID"):
            hub_pod = HubPodRef(query["hubPodUID"], query.get("namespace", ""), query.get("name", ""))
        released, pod = await self.agent.release(request.match_info["id"], _token(request), hub_pod)
        return _json({"released": released, "pod": pod})

    async def _find(self, request: web.Request) -> web.Response:
        query = request.query
        ref = HubPodRef(request.match_info["uid"], query.get("namespace", ""), query.get("name", ""))
        return _json({"pod": await self.agent.find(ref)})

    async def _delete_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        deleted = await self.agent.delete_pod(namespace, name, request.query.get("hubPodUID", ""), _token(request))
        return _json({"deleted": deleted})

    async def _bind(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict) or not isinstance(body.get("reservationId"), str):
            raise WireError("reservationId: required (a string)")
        pod = body.get("pod")
        if not isinstance(pod, dict):
            raise WireError("pod: required (a Pod manifest)")
        expires_at = body.get("reservationExpiresAt")
        if expires_at is not None and (isinstance(expires_at, bool) or not isinstance(expires_at, int | float)):
            raise WireError("reservationExpiresAt: must be a number (the reservation's expiresAt)")
        member_pod, created = await self.agent.bind(
            body["reservationId"], pod, _token(request), None if expires_at is None else float(expires_at)
        )
        return _json({"pod": member_pod}, status=201 if created else 200)
