"""Remote OPA: the PolicyEngine that asks an Open Policy Agent server over its v1 Data API.

Who calls it: the SecurityAudit plugins (PreFilter/PreScore call :meth:`RemoteOpaEngine.decide_batch` once
per pod; the Permit plugin awaits :meth:`RemoteOpaEngine.decide_async` off the scheduling loop) and the
engine factory that reads the plugin args. Nothing else in kubesched talks to OPA, and no library exception
leaves this module: every failure is a :class:`~kubesched.policy.contract.PolicyError` (DESIGN rule 8),
with the library exception chained as ``__cause__``. What a failure *means* (deny, retry later) is the
caller's failure policy (DESIGN rule 6); this module only guarantees that it is reported, and reported
before the deadline.

Transport. The scheduling cycle is serial and PreFilter is synchronous, so this client is synchronous and
uses the standard library's :mod:`http.client`:

* a small pool of persistent keep-alive connections, ``TCP_NODELAY`` on every socket (without it a
  keep-alive call costs ~44 ms: Nagle's algorithm against delayed ACKs, reference/opa-policy.md §4);
* one deadline per call, ``timeout_seconds`` from the start of the call: connecting, sending and every
  read of the answer get only the time that is left, so the whole call (retry and batch-module install
  included) returns by the deadline;
* a connection that the server closed while it sat idle is detected before reuse; if the server closes a
  reused connection without sending a byte of the answer (``RemoteDisconnected``, ``BrokenPipeError``,
  ``ConnectionResetError``), the request is sent once more on a new connection. That is the only retry:
  a request whose answer was partly received, or that timed out, is never sent again;
* ``Authorization: Bearer`` from ``token_file``, re-read when the file changes (checked at most once per
  second: Kubernetes rotates projected service-account tokens by swapping the file);
* for ``https`` endpoints, TLS verified against ``ca_file`` (or the system trust store).

Every query carries ``strict-builtin-errors=true`` (a failing built-in must not silently make a deny rule
undefined) and ``provenance=true`` (for bundle revisions, below).

Batch. ``decide_batch`` makes one request per pod: it POSTs the batch input to
``/v1/data/kubesched/batch/<kind>_decisions``, served by the generated module
:func:`~kubesched.policy.contract.batch_module`, which this engine installs with
``PUT /v1/policies/kubesched-batch`` (``kubesched-batch-<kind>`` for other target kinds) at first use. When
bundles own OPA's policy tree the PUT is refused; then load the module in your bundle and set
``batch_endpoint`` (or ``install_batch_module=False`` if it is served at the default path).

Revision. OPA keeps no decision cache (maintainers, OPA issue #3405), so the scheduler caches decisions
keyed by :meth:`RemoteOpaEngine.revision`. When OPA reports bundle revisions (``provenance.bundles.<name>
.revision``) the revision is ``bundles:<name>=<revision>,...``. Otherwise, and whenever no answer has
confirmed the bundle revisions for ``revision_ttl_seconds``, it is ``remote:<endpoint>:<generation>``: the
generation moves on when this engine (re)installs its batch module and every ``revision_ttl_seconds``
(default 10 s), because policies and data can be PUT into OPA behind our back and nothing tells us, so a
remote answer can be trusted for a short time only.
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import io
import json
import math
import os
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    "DEFAULT_REVISION_TTL_SECONDS",
    "OpaHttpError",
    "OpaTransportError",
    "RemoteOpaEngine",
    "batch_module_id",
]

DEFAULT_REVISION_TTL_SECONDS = 10.0
DEFAULT_POOL_SIZE = 4
TOKEN_CHECK_INTERVAL_SECONDS = 1.0
DATA_API_PREFIX = "/v1/data/"
QUERY_PARAMETERS = "strict-builtin-errors=true&provenance=true"
USAGE_WARNING_CODE = "api_usage_warning"
USER_AGENT = f"kubesched/{__version__}"

# A reused keep-alive connection that fails this way before any byte of the answer arrived was closed by
# the server while idle; the request is sent once more on a new connection.
_STALE_CONNECTION_ERRORS = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


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


# --------------------------------------------------------------------------------------------- transport


@dataclass(slots=True)
class _Budget:
    """The deadline of the request in flight on one connection, and how much of its answer has arrived."""

    deadline: float = 0.0
    received: int = 0
    phase: str = "connecting"

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left


class _DeadlineReader(io.RawIOBase):
    """Reads the socket with a timeout of the time left until the deadline, before every ``recv``."""

    def __init__(self, sock: socket.socket, budget: _Budget) -> None:
        super().__init__()
        self._sock = sock
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(self._budget.remaining())
        count = self._sock.recv_into(buffer)
        self._budget.received += count
        return count


class _DeadlineResponse(http.client.HTTPResponse):
    budget: _Budget  # set on the per-connection subclass made by _response_class

    def __init__(
        self, sock: socket.socket, debuglevel: int = 0, method: str | None = None, url: str | None = None
    ) -> None:
        super().__init__(sock, debuglevel, method, url)
        self.fp.close()  # the plain makefile() reader; reading goes through the deadline reader instead
        self.fp = io.BufferedReader(_DeadlineReader(sock, self.budget))


def _response_class(bound: _Budget) -> type[http.client.HTTPResponse]:
    class _BoundDeadlineResponse(_DeadlineResponse):
        budget = bound

    return _BoundDeadlineResponse


def _set_nodelay(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PlainConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, budget: _Budget) -> None:
        super().__init__(host, port)
        self.budget = budget
        self.response_class = _response_class(budget)

    def connect(self) -> None:
        super().connect()
        _set_nodelay(self.sock)


class _TlsConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, budget: _Budget, context: ssl.SSLContext) -> None:
        super().__init__(host, port, context=context)
        self.budget = budget
        self.response_class = _response_class(budget)

    def connect(self) -> None:
        super().connect()
        _set_nodelay(self.sock)


_Connection = _PlainConnection | _TlsConnection


def _still_open(sock: socket.socket | None) -> bool:
    """False if an idle keep-alive socket was closed by the server (readable = EOF or stray bytes)."""
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            readable = bool(poller.poll(0))
        else:  # pragma: no cover - Windows
            readable = bool(select.select([sock], [], [], 0)[0])
        if not readable:
            return True
        if isinstance(sock, ssl.SSLSocket):
            # A TLS record that carries no application data (a session ticket) leaves the socket usable.
            sock.settimeout(0)
            try:
                sock.recv(1)
            except ssl.SSLWantReadError:
                return True
    except (OSError, ValueError):
        return False
    return False


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    reason: str
    body: bytes


class _Transport:
    """Keep-alive connections to one OPA origin, each call bounded by its deadline."""

    def __init__(
        self, scheme: str, host: str, port: int, *, pool_size: int, context: ssl.SSLContext | None
    ) -> None:
        self.origin = f"{scheme}://{host}:{port}" if ":" not in host else f"{scheme}://[{host}]:{port}"
        self._host = host
        self._port = port
        self._context = context
        self._pool_size = pool_size
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self.connections_opened = 0
        self.stale_retries = 0

    def _new_connection(self) -> _Connection:
        budget = _Budget()
        if self._context is not None:
            return _TlsConnection(self._host, self._port, budget, self._context)
        return _PlainConnection(self._host, self._port, budget)

    def _acquire(self) -> tuple[_Connection, bool]:
        with self._lock:
            if self._closed:
                raise PolicyError(f"the OPA client for {self.origin} is closed")
            while self._idle:
                connection = self._idle.pop()
                if _still_open(connection.sock):
                    return connection, True
                connection.close()
        return self._new_connection(), False

    def _release(self, connection: _Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._pool_size:
                self._idle.append(connection)
                return
        connection.close()

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._drop_idle()

    def idle_sockets(self) -> list[socket.socket]:
        with self._lock:
            return [connection.sock for connection in self._idle if connection.sock is not None]

    def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], *, deadline: float, timeout: float
    ) -> _Answer:
        """Send one request and read the whole answer by ``deadline``; the only retry is a stale connection."""
        what = f"{method} {target.split('?', 1)[0]}"
        retried = False
        while True:
            connection, reused = self._acquire()
            try:
                return self._exchange(connection, method, target, body, headers, deadline)
            except _STALE_CONNECTION_ERRORS as error:
                connection.close()
                if reused and not retried and connection.budget.received == 0 and time.monotonic() < deadline:
                    # The server closed this idle connection (OPA restarted, or its idle timeout); the others
                    # in the pool are as old, so none of them is worth trying.
                    retried = True
                    self.stale_retries += 1
                    self._drop_idle()
                    continue
                raise self._translate(error, what, timeout, connection) from error
            except (OSError, http.client.HTTPException, ValueError) as error:
                connection.close()
                raise self._translate(error, what, timeout, connection) from error

    def _exchange(
        self,
        connection: _Connection,
        method: str,
        target: str,
        body: bytes,
        headers: Mapping[str, str],
        deadline: float,
    ) -> _Answer:
        budget = connection.budget
        budget.deadline = deadline
        budget.received = 0
        budget.phase = "connecting"
        if connection.sock is None:
            connection.timeout = budget.remaining()
            connection.connect()
            self.connections_opened += 1
        budget.phase = "sending the request"
        connection.sock.settimeout(budget.remaining())
        connection.request(method, target, body=body, headers=dict(headers))
        budget.phase = "waiting for the answer"
        response = connection.getresponse()
        budget.phase = "reading the answer"
        payload = response.read()
        answer = _Answer(response.status, response.reason, payload)
        if response.will_close:
            connection.close()
        else:
            self._release(connection)
        return answer

    def _translate(self, error: BaseException, what: str, timeout: float, connection: _Connection) -> PolicyError:
        where = f"OPA at {self.origin}"
        phase = connection.budget.phase
        if isinstance(error, TimeoutError):
            return OpaTransportError(f"{where} timed out after {timeout:g}s while {phase} ({what})", timed_out=True)
        if isinstance(error, ssl.SSLCertVerificationError):
            return OpaTransportError(f"{where}: TLS certificate verification failed: {error.verify_message} ({what})")
        if isinstance(error, ssl.SSLError):
            return OpaTransportError(f"{where}: TLS error while {phase}: {error.reason or error} ({what})")
        if isinstance(error, http.client.RemoteDisconnected):
            return OpaTransportError(f"{where} closed the connection without answering ({what})")
        if isinstance(error, ConnectionResetError):
            return OpaTransportError(f"{where} reset the connection while {phase} ({what})")
        if isinstance(error, BrokenPipeError):
            return OpaTransportError(f"{where} closed the connection while {phase} ({what})")
        if isinstance(error, ConnectionRefusedError):
            return OpaTransportError(f"{where} refused the connection ({what})")
        if isinstance(error, socket.gaierror):
            return OpaTransportError(f"{where}: cannot resolve the host name: {error.strerror} ({what})")
        if isinstance(error, http.client.IncompleteRead):
            return OpaTransportError(f"{where} closed the connection in the middle of the answer ({what})")
        if isinstance(error, http.client.HTTPException):
            return OpaTransportError(f"{where} sent a malformed HTTP answer: {type(error).__name__} ({what})")
        if isinstance(error, ValueError):
            return PolicyError(f"cannot send {what} to {where}: {error}")
        return OpaTransportError(f"{where}: connection error while {phase}: {error} ({what})")


# ------------------------------------------------------------------------------------------------ token


class _TokenFile:
    """A bearer token read from a file and re-read when the file changes (stat at most once a second)."""

    def __init__(self, path: str, clock: Clock) -> None:
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._identity: tuple[int, int, int, int] | None = None
        self._checked_at = -math.inf

    def current(self) -> str:
        with self._lock:
            now = self._clock.now()
            if self._token is not None and abs(now - self._checked_at) < TOKEN_CHECK_INTERVAL_SECONDS:
                return self._token
            self._checked_at = now
            try:
                status = os.stat(self._path)
                identity = (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)
                if self._token is None or identity != self._identity:
                    with open(self._path, encoding="utf-8") as handle:
                        token = handle.read().strip()
                    if not token:
                        raise PolicyError(f"the OPA token file {self._path} is empty")
                    if any(character.isspace() or ord(character) < 0x20 for character in token):
                        raise PolicyError(f"the OPA token file {self._path} holds more than one token")
                    self._token, self._identity = token, identity
            except (OSError, UnicodeDecodeError) as error:
                self._token = None
                raise PolicyError(f"cannot read the OPA token file {self._path}: {error}") from error
            return self._token

    def invalidate(self) -> None:
        """Check the file again at the next call (OPA said 401: the token may have been rotated)."""
        with self._lock:
            self._checked_at = -math.inf


# ------------------------------------------------------------------------------------------------ engine


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int


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
    """A :class:`~kubesched.policy.contract.PolicyEngine` backed by an OPA server's REST API.

    ``endpoint`` is the decision's Data API URL, e.g. ``http://opa:8181/v1/data/kubernetes/authz``; or OPA's
    base URL (``http://opa:8181``) with the document in ``decision_path`` (``kubernetes/authz``).
    ``batch_endpoint`` (same origin) may contain ``{target_kind}``, replaced by ``node`` or ``cluster``.
    Thread-safe: concurrent callers (``decide_async`` runs in worker threads) get separate connections.
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
        clock: Clock | None = None,
    ) -> None:
        if not (isinstance(timeout_seconds, int | float) and math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise PolicyError(f"timeout_seconds must be a positive number of seconds, not {timeout_seconds!r}")
        if not (math.isfinite(revision_ttl_seconds) and revision_ttl_seconds >= 0):
            raise PolicyError(f"revision_ttl_seconds must be zero or more, not {revision_ttl_seconds!r}")
        if pool_size < 1:
            raise PolicyError(f"pool_size must be at least 1, not {pool_size!r}")
        endpoint = _with_decision_path(endpoint, decision_path)
        origin, self._decision_target = _split_endpoint(endpoint, "endpoint")
        self._endpoint = endpoint
        self._decision_path = urllib.parse.unquote(self._decision_target.split("?", 1)[0][len(DATA_API_PREFIX) :])
        self._batch_endpoint = batch_endpoint
        if batch_endpoint is not None:
            batch_origin, _ = _split_endpoint(batch_endpoint.replace("{target_kind}", "node"), "batch_endpoint")
            if batch_origin != origin:
                raise PolicyError(f"batch_endpoint {batch_endpoint!r} must be on the same server as {endpoint!r}")
        self._install = install_batch_module and batch_endpoint is None
        self._batch_targets: dict[str, str] = {}
        self._timeout = float(timeout_seconds)
        self._revision_ttl = float(revision_ttl_seconds)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._token = _TokenFile(token_file, self._clock) if token_file is not None else None
        context: ssl.SSLContext | None = None
        if origin.scheme == "https":
            try:
                context = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as error:
                raise PolicyError(f"cannot load the CA bundle {ca_file}: {error}") from error
        elif ca_file is not None:
            raise PolicyError(f"ca_file is set but endpoint {endpoint!r} is not https://")
        self._transport = _Transport(origin.scheme, origin.host, origin.port, pool_size=pool_size, context=context)
        self._state_lock = threading.Lock()
        self._install_lock = threading.Lock()
        self._installed: set[str] = set()
        self._refused: dict[str, tuple[float, PolicyError]] = {}
        self._generation = 0
        self._generation_started = self._clock.now()
        self._bundles: tuple[tuple[str, str], ...] | None = None
        self._bundles_seen_at = -math.inf

    # ------------------------------------------------------------------------------------ PolicyEngine

    @property
    def kind(self) -> str:
        return "remote"

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def revision(self) -> str:
        with self._state_lock:
            now = self._clock.now()
            if self._bundles is not None and now - self._bundles_seen_at < self._revision_ttl:
                return "bundles:" + ",".join(f"{name}={revision}" for name, revision in self._bundles)
            if self._revision_ttl == 0 or now - self._generation_started >= self._revision_ttl:
                self._next_generation(now)
            return f"remote:{self._endpoint}:{self._generation}"

    def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        deadline = time.monotonic() + self._timeout
        answer = self._post_data(self._decision_target, input_doc, deadline)
        decision_id = _decision_id(answer)
        if "result" not in answer:
            return interpret_result(None, defined=False, decision_id=decision_id)
        return interpret_result(answer["result"], decision_id=decision_id)

    def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        names = [_target_name(target, target_kind) for target in targets]
        deadline = _monotonic() + self._timeout
        if self._install:
            self._ensure_batch_module(target_kind, deadline)
        document = batch_input(pod, targets, target_kind=target_kind, operation=operation, time=time)
        answer = self._post_data(self._batch_target(target_kind), document, deadline)
        decision_id = _decision_id(answer)
        undefined = undefined_decision(decision_id)
        if "result" not in answer:
            if self._install:
                # The generated rule is always defined (an empty object at worst): our module is gone.
                self._forget_batch_module(target_kind)
            return dict.fromkeys(names, undefined)
        result = answer["result"]
        if not isinstance(result, Mapping):
            raise PolicyError(
                f"batch result from {self._batch_target(target_kind).split('?', 1)[0]} is {json_type_phrase(result)}, "
                f"not an object keyed by {target_kind} name"
            )
        return {
            name: interpret_result(result[name], decision_id=decision_id) if name in result else undefined
            for name in names
        }

    def close(self) -> None:
        self._transport.close()

    async def decide_async(self, input_doc: Mapping[str, Any]) -> Decision:
        """:meth:`decide` in a worker thread, for asynchronous callers (the Permit plugin)."""
        return await asyncio.to_thread(self.decide, input_doc)

    async def decide_batch_async(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        """:meth:`decide_batch` in a worker thread."""
        call = functools.partial(
            self.decide_batch, pod, targets, target_kind=target_kind, operation=operation, time=time
        )
        return await asyncio.to_thread(call)

    def __enter__(self) -> RemoteOpaEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ diagnostics

    def idle_sockets(self) -> list[socket.socket]:
        """The sockets of the idle keep-alive connections (diagnostics: their options, their count)."""
        return self._transport.idle_sockets()

    @property
    def connections_opened(self) -> int:
        return self._transport.connections_opened

    @property
    def stale_retries(self) -> int:
        """How many requests were sent again because a reused connection had been closed by the server."""
        return self._transport.stale_retries

    # ------------------------------------------------------------------------------------ internals

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

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Content-Type": content_type, "Accept": "application/json", "User-Agent": USER_AGENT}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.current()}"
        return headers

    def _call(self, method: str, target: str, body: bytes, content_type: str, deadline: float) -> _Answer:
        headers = self._headers(content_type)
        answer = self._transport.request(method, target, body, headers, deadline=deadline, timeout=self._timeout)
        if answer.status == 401 and self._token is not None:
            self._token.invalidate()
        return answer

    def _post_data(self, target: str, input_doc: Mapping[str, Any], deadline: float) -> dict[str, Any]:
        try:
            body = json.dumps({"input": input_doc}, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as error:
            raise PolicyError(f"the policy input cannot be sent as JSON: {error}") from error
        answer = self._call("POST", target, body, "application/json", deadline)
        path = target.split("?", 1)[0]
        if not 200 <= answer.status < 300:
            raise _http_error(self._transport.origin, f"POST {path}", answer)
        document = _json_object(answer, f"POST {path}", self._transport.origin)
        warning = document.get("warning")
        if isinstance(warning, Mapping) and warning.get("code") == USAGE_WARNING_CODE:
            raise PolicyError(f"OPA warned about the request to {path}: {warning.get('message', USAGE_WARNING_CODE)}")
        self._observe_provenance(document.get("provenance"))
        return document

    def _observe_provenance(self, provenance: object) -> None:
        if not isinstance(provenance, Mapping):
            return
        bundles = provenance.get("bundles")
        revisions: list[tuple[str, str]] = []
        if isinstance(bundles, Mapping):
            for name, info in bundles.items():
                if isinstance(info, Mapping) and isinstance(info.get("revision"), str):
                    revisions.append((str(name), info["revision"]))
        with self._state_lock:
            self._bundles = tuple(sorted(revisions)) or None
            self._bundles_seen_at = self._clock.now()

    def _ensure_batch_module(self, target_kind: str, deadline: float) -> None:
        module_id = batch_module_id(target_kind)
        if module_id in self._installed:
            return
        with self._install_lock:
            if module_id in self._installed:
                return
            refused = self._refused.get(module_id)
            if refused is not None and abs(self._clock.now() - refused[0]) < max(self._revision_ttl, 1.0):
                raise refused[1]
            source = batch_module(self._decision_path, target_kind).encode()
            target = f"/v1/policies/{module_id}"
            answer = self._call("PUT", target, source, "text/plain", deadline)
            if not 200 <= answer.status < 300:
                error = _http_error(self._transport.origin, f"PUT {target}", answer)
                if 400 <= answer.status < 500:
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

    def _forget_batch_module(self, target_kind: str) -> None:
        with self._install_lock:
            self._installed.discard(batch_module_id(target_kind))


def _monotonic() -> float:
    # ``decide_batch`` has a parameter named ``time``; this keeps the module readable there.
    return time.monotonic()


def _target_name(target: Mapping[str, Any], target_kind: str) -> str:
    metadata = target.get("metadata") if isinstance(target, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise PolicyError(f"a {target_kind} in the batch has no metadata.name")
    return name


def _decision_id(document: Mapping[str, Any]) -> str | None:
    value = document.get("decision_id")
    return value if isinstance(value, str) and value else None


def _json_object(answer: _Answer, what: str, origin: str) -> dict[str, Any]:
    try:
        document = json.loads(answer.body)
    except ValueError as error:
        raise PolicyError(f"OPA at {origin} answered {what} with a body that is not JSON") from error
    if not isinstance(document, dict):
        raise PolicyError(f"OPA at {origin} answered {what} with {json_type_phrase(document)}, not an object")
    return document


def _http_error(origin: str, what: str, answer: _Answer) -> OpaHttpError:
    code: str | None = None
    message: str | None = None
    details: list[str] = []
    try:
        document = json.loads(answer.body) if answer.body else None
    except ValueError:
        document = None
    if isinstance(document, Mapping):
        code = document.get("code") if isinstance(document.get("code"), str) else None
        message = document.get("message") if isinstance(document.get("message"), str) else None
        errors = document.get("errors")
        if isinstance(errors, list):
            details = [str(item.get("message")) for item in errors[:3] if isinstance(item, Mapping)]
    text = f"OPA at {origin} answered {what} with {answer.status} {answer.reason}".rstrip()
    if code is not None or message is not None:
        text += ": " + ": ".join(part for part in (code, message) if part)
    if details:
        text += " (" + "; ".join(details) + ")"
    return OpaHttpError(text, status=answer.status, code=code, opa_message=message)
