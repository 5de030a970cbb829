"""The hub's client of one cluster agent (:mod:`kubesched.agent.server`): state, reserve, release, bind, delete.

Who calls it: :class:`~kubesched.federation.cache.ClusterStateCache` (state, in the background), the
two-phase commit (reserve / release / bind) and the live hub (delete a member pod whose hub pod is gone).
Transport: the keep-alive HTTP/1.1 pool of :mod:`kubesched.net` (a fraction of aiohttp's CPU per small request;
the hub makes several agent calls per placed pod on the scheduler's one thread).

Failure policy, stated once: every call has a deadline (``timeout``, per call overridable) and is **not
retried here** -- the caller knows whether a retry is safe and when (the cache retries at its next interval;
reserve and bind are idempotent by reservation id, so the two-phase commit may repeat them). What can go wrong
is one of our errors, never a library's:

* :class:`AgentUnreachable` -- no answer: refused or reset connection, TLS failure, the deadline passed;
* :class:`AgentRefused` -- the agent answered an error: ``status`` and its constant ``reason`` (``Unfit``,
  ``Conflict``, ``NotFound``, ``Expired``, ``Unauthorized``, ``MemberUnavailable``, ...);
* :class:`AgentProtocolError` -- an answer that is not the agent's shape.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.api import jsonwire
from kubesched.clusterapi.contract import ClusterState
from kubesched.errors import KubeschedError
from kubesched.federation.wire import (
    BIND_PATH,
    FENCING_TOKEN_HEADER,
    HUB_PODS_PATH,
    PODS_PATH,
    RESERVATIONS_PATH,
    STATE_PATH,
    ReservationRequest,
    WireError,
    state_from_json,
)
from kubesched.net.http1 import ProtocolError, encode_request
from kubesched.net.pool import Http1Pool
from kubesched.net.tls import client_context

__all__ = [
    "AgentClient",
    "AgentError",
    "AgentProtocolError",
    "AgentRefused",
    "AgentUnreachable",
    "BoundPod",
    "HeldReservation",
    "MemberEndpoint",
    "Released",
]

DEFAULT_TIMEOUT = 2.0
CLOSE_GRACE_SECONDS = 1.0


class AgentError(KubeschedError):
    """A call to a cluster agent failed; ``agent`` is its URL."""

    def __init__(self, agent: str, message: str) -> None:
        super().__init__(f"agent {agent}: {message}")
        self.agent = agent


class AgentUnreachable(AgentError):
    """No answer (connection, TLS or deadline): the agent may or may not have acted on the request, unless
    ``delivered`` is False (the connection was refused: the request never left)."""

    def __init__(self, agent: str, message: str, *, delivered: bool = True) -> None:
        super().__init__(agent, message)
        self.delivered = delivered


class AgentRefused(AgentError):
    """The agent answered an error status. ``definite``: it said no (a 4xx); a 5xx says it could not tell (its
    member's API failed, or a create may still take effect), so asking again later can help."""

    def __init__(self, agent: str, status: int, reason: str, message: str) -> None:
        super().__init__(agent, f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason

    @property
    def definite(self) -> bool:
        return self.status < 500


class AgentProtocolError(AgentError):
    """The answer is not what the agent's wire format says."""


@dataclass(frozen=True, slots=True)
class HeldReservation:
    id: str
    node: str
    expires_at: float
    created: bool


@dataclass(frozen=True, slots=True)
class BoundPod:
    namespace: str
    name: str
    uid: str
    node: str
    created: bool

    @staticmethod
    def from_summary(summary: Mapping[str, Any], created: bool) -> BoundPod:
        """From the agent's ``{namespace, name, uid, node}``."""
        namespace, name, uid, node = (str(summary.get(key) or "") for key in ("namespace", "name", "uid", "node"))
        return BoundPod(namespace, name, uid, node, created)


@dataclass(frozen=True, slots=True)
class Released:
    """A release's answer: whether the member held the reservation -- or the pod made under it, or for the hub pod
    named (the commit happened; nothing was released)."""

    released: bool
    made: BoundPod | None = None


class MemberEndpoint(Protocol):
    """What the hub needs of one member, however it reaches it: an :class:`AgentClient` (pull mode, over HTTPS)
    or :class:`kubesched.agent.push.PushEndpoint` (push mode: the agent's logic in the hub, on the member's
    kubeconfig). Same calls, same results, same errors."""

    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState: ...

    async def reserve(
        self, request: ReservationRequest, *, token: int = 0, timeout: float | None = None
    ) -> HeldReservation: ...

    async def release(
        self,
        reservation_id: str,
        *,
        hub_pod: tuple[str, str, str] | None = None,
        token: int = 0,
        timeout: float | None = None,
    ) -> Released:
        """Let the reservation go; ``hub_pod`` (uid, namespace, name) names the pod it was for, so the member can
        say whether a pod was made for it."""
        ...

    async def bind(
        self,
        reservation_id: str,
        pod: Mapping[str, Any],
        *,
        token: int = 0,
        timeout: float | None = None,
        expires_at: float | None = None,
    ) -> BoundPod:
        """Have the member create ``pod`` under the reservation; ``expires_at``: the reservation's as the reserve was
        answered (a reservation made again under that id after a release is not consumed)."""
        ...

    async def delete_pod(
        self, namespace: str, name: str, hub_uid: str, *, token: int = 0, timeout: float | None = None
    ) -> bool:
        """Delete the member pod made for hub pod ``hub_uid``; whether there was one."""
        ...

    async def find_pod(self, hub_pod: tuple[str, str, str], *, timeout: float | None = None) -> BoundPod | None:
        """The member pod made for ``hub_pod`` (uid, namespace, name), finished or not; None when it has none."""
        ...

    async def aclose(self) -> None: ...


class AgentClient:
    """Calls to the agent at ``url`` (``https://host:port``) with ``token``; create inside the running loop,
    close with :meth:`aclose`. ``ssl_context`` None: the system's trust store."""

    def __init__(
        self, url: str, token: str, *, ssl_context: ssl.SSLContext | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"agent URL {url!r}: must be https://host[:port]")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc
        self._headers = {"Authorization": f"Bearer {token}"}
        self._fixed = b"User-Agent: kubesched-hub\r\nAccept: application/json\r\n"
        context = ssl_context or client_context()
        self._pool = Http1Pool(parts.hostname, parts.port or 443, ssl_context=context, server_hostname=parts.hostname)
        self.requests_sent = 0

    @property
    def connections_opened(self) -> int:
        return self._pool.opened

    async def aclose(self) -> None:
        await self._pool.aclose(CLOSE_GRACE_SECONDS)

    async def _call(
        self, method: str, path: str, body: Any = None, timeout: float | None = None, token: int = 0
    ) -> tuple[int, Any]:
        data = None if body is None else jsonwire.dumps(body, default=str)
        headers = dict(self._headers)
        if token:
            headers[FENCING_TOKEN_HEADER] = str(token)
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = encode_request(method, self._prefix + path, self._host_header, headers, data, self._fixed)
        self.requests_sent += 1
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                answer = await self._pool.exchange(request)
        except TimeoutError as error:
            raise AgentUnreachable(self.url, f"{method} {path}: no answer within the deadline") from error
        except (ProtocolError, OSError) as error:  # refused, reset, TLS (ssl.SSLError is an OSError)
            raise AgentUnreachable(
                self.url,
                f"{method} {path}: {type(error).__name__}: {error}",
                delivered=not isinstance(error, ConnectionRefusedError),
            ) from error
        try:
            decoded = jsonwire.loads(answer.body) if answer.body else None
        except ValueError as error:
            raise AgentProtocolError(self.url, f"{method} {path}: the answer is not JSON") from error
        if answer.status >= 400:
            reason = decoded.get("reason", "") if isinstance(decoded, dict) else ""
            message = decoded.get("message", "") if isinstance(decoded, dict) else str(decoded)[:200]
            raise AgentRefused(self.url, answer.status, str(reason), str(message))
        return answer.status, decoded

    def _field(self, obj: Any, *keys: str) -> Any:
        for key in keys:
            if not isinstance(obj, Mapping) or key not in obj:
                raise AgentProtocolError(self.url, f"the answer has no {'.'.join(keys)}")
            obj = obj[key]
        return obj

    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState:
        """The member's state, named ``name`` as the hub knows it."""
        _, body = await self._call("GET", STATE_PATH, timeout=timeout)
        try:
            return state_from_json(body, name, generation)
        except WireError as error:
            raise AgentProtocolError(self.url, str(error)) from error

    async def reserve(
        self, request: ReservationRequest, *, token: int = 0, timeout: float | None = None
    ) -> HeldReservation:
        status, body = await self._call("POST", RESERVATIONS_PATH, request.to_json(), timeout, token)
        held = self._field(body, "reservation")
        try:
            return HeldReservation(str(held["id"]), str(held["node"]), float(held["expiresAt"]), status == 201)
        except (KeyError, TypeError, ValueError) as error:
            raise AgentProtocolError(self.url, f"reservation answer: {error}") from error

    async def release(
        self,
        reservation_id: str,
        *,
        hub_pod: tuple[str, str, str] | None = None,
        token: int = 0,
        timeout: float | None = None,
    ) -> Released:
        path = f"{RESERVATIONS_PATH}/{urllib.parse.quote(reservation_id)}"
        if hub_pod is not None:
            uid, namespace, name = hub_pod
            path += "?" + urllib.parse.urlencode({"hubPodUID": uid, "namespace": namespace, "name": name})
        _, body = await self._call("DELETE", path, None, timeout, token)
        made = body.get("pod") if isinstance(body, Mapping) else None
        if made is not None and not isinstance(made, Mapping):
            raise AgentProtocolError(self.url, "the answer's pod is not an object")
        return Released(
            bool(self._field(body, "released")), None if made is None else BoundPod.from_summary(made, False)
        )

    async def bind(
        self,
        reservation_id: str,
        pod: Mapping[str, Any],
        *,
        token: int = 0,
        timeout: float | None = None,
        expires_at: float | None = None,
    ) -> BoundPod:
        body: dict[str, Any] = {"reservationId": reservation_id, "pod": pod}
        if expires_at is not None:
            body["reservationExpiresAt"] = expires_at
        status, answer = await self._call("POST", BIND_PATH, body, timeout, token)
        member_pod = self._field(answer, "pod")
        if not isinstance(member_pod, Mapping):
            raise AgentProtocolError(self.url, "the answer's pod is not an object")
        return BoundPod.from_summary(member_pod, status == 201)

    async def find_pod(self, hub_pod: tuple[str, str, str], *, timeout: float | None = None) -> BoundPod | None:
        uid, namespace, name = hub_pod
        query = urllib.parse.urlencode({"namespace": namespace, "name": name})
        _, body = await self._call("GET", f"{HUB_PODS_PATH}/{urllib.parse.quote(uid)}?{query}", None, timeout)
        found = self._field(body, "pod")
        if found is not None and not isinstance(found, Mapping):
            raise AgentProtocolError(self.url, "the answer's pod is not an object")
        return None if found is None else BoundPod.from_summary(found, False)

    async def delete_pod(
        self, namespace: str, name: str, hub_uid: str, *, token: int = 0, timeout: float | None = None
    ) -> bool:
        path = f"{PODS_PATH}/{urllib.parse.quote(namespace)}/{urllib.parse.quote(name)}"
        query = urllib.parse.urlencode({"hubPodUID": hub_uid})
        _, body = await self._call("DELETE", f"{path}?{query}", None, timeout, token)
        return bool(self._field(body, "deleted"))
