"""Remote OPA: the :class:`~kubesched.policyapi.contract.PolicyClient` that asks an Open Policy Agent server.

Who calls it: the scheduler's policy-engine service builds one per distinct remote
:class:`~kubesched.policyapi.contract.PolicyEngineSpec` (plugins get it from
:func:`~kubesched.policyapi.contract.policy_client`); the SecurityAudit plugins await
:meth:`RemoteOpaEngine.decide_batch` once per pod between Filter batches, the Permit plugin
:meth:`RemoteOpaEngine.decide`. The transport is :mod:`kubesched.net`'s (keep-alive HTTP/1.1, TLS, the token file).
Every failure is a :class:`~kubesched.policyapi.contract.PolicyError` with the transport's exception chained
(docs/explanation/design.md#own-the-client-and-its-errors); what it means is the caller's failure policy. The
transport's rules (one deadline per call, ``TCP_NODELAY``, the one retry when nothing arrived, token
re-reads, the batch module check, revisions) and why are in
docs/explanation/policy-decisions.md#talking-to-a-remote-opa.

Revision: what OPA reports about its policy -- bundle revisions (``provenance``) as ``bundles:<name>=<rev>,...``
and a digest of ``GET /v1/policies`` as ``policies:<digest>`` -- asked again once the last answer is
``refresh_seconds`` old (docs/explanation/policy-freshness.md#freshness-bound-of-each-engine).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kubesched import __version__
from kubesched.clock import Clock, RealClock
from kubesched.errors import json_type_phrase
from kubesched.net.http1 import Answer, AnswerTooLarge, ConnectionClosed, ProtocolError, encode_request
from kubesched.net.pool import Http1Pool
from kubesched.net.tls import Pem, TlsError, client_context
from kubesched.net.token_file import TokenFile, TokenFileError
from kubesched.policy.contract import (
    batch_input,
    batch_module,
    batch_path,
    interpret_result,
)
from kubesched.policyapi.contract import Decision, InputPaths, PolicyError, undefined_decision

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_REFRESH_SECONDS",
    "KEEPALIVE_EXPIRY_SECONDS",
    "OpaHttpError",
    "OpaTransportError",
    "PooledConnection",
    "RemoteOpaEngine",
    "batch_module_id",
]

DEFAULT_REFRESH_SECONDS = 2.0
POLICIES_TARGET = "/v1/policies"
DEFAULT_POOL_SIZE = 4
DEFAULT_MAX_CONCURRENT_REQUESTS = 8
# An answer for a batch of 5000 nodes is well under 1 MB; a bigger one is a misconfigured decision path (a whole
# data tree) or a hostile server, and reading it whole would hold the policy worker's memory hostage.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
KEEPALIVE_EXPIRY_SECONDS = 60.0
TOKEN_CHECK_INTERVAL_SECONDS = 1.0
DATA_API_PREFIX = "/v1/data/"
QUERY_PARAMETERS = "strict-builtin-errors=true&provenance=true"
USAGE_WARNING_CODE = "api_usage_warning"
USER_AGENT = f"kubesched/{__version__}"
# identity: a loopback OPA gains nothing by compression, and it costs CPU at both ends.
FIXED_HEADERS = f"User-Agent: {USER_AGENT}\r\nAccept: application/json\r\nAccept-Encoding: identity\r\n".encode()
# How long aclose waits for the TLS goodbyes of the connections it closes.
CLOSE_GRACE_SECONDS = 1.0
# The phase of a call that waits for one of the max_concurrent_requests in flight to finish.
WAITING_FOR_A_TURN = "waiting for a turn (max_concurrent_requests in flight)"

_T = TypeVar("_T")

log = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class PooledConnection:
    """Diagnostics of one open connection of the pool, read from its socket when asked."""

    local_port: int
    nodelay: bool
    tls_version: str | None


# --------------------------------------------------------------------------------------------- transport


@dataclass(slots=True)
class _Call:
    """One engine call: the request in flight (for messages), where it stands, and -- for the exchange under way
    (an :class:`~kubesched.net.http1.ExchangeTrace`) -- whether it went out on a reused connection and whether
    any byte of its answer arrived (from then on, it is never sent again)."""

    what: str
    phase: str | None = None
    reused: bool = False
    received: bool = False


def _is_stale(error: BaseException, call: _Call) -> bool:
    """A reused connection that the server had closed: it ended before any byte of the answer arrived."""
    return call.reused and not call.received and isinstance(error, ConnectionClosed)


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from (a closed connection chains the socket's error)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _find(chain: list[BaseException], kind: type[_T]) -> _T | None:
    return next((item for item in chain if isinstance(item, kind)), None)


def _while(phase: str | None) -> str:
    return f" while {phase}" if phase else ""


def _translate(error: BaseException, origin: str, call: _Call) -> PolicyError:
    where = f"OPA at {origin}"
    what, phase = call.what, call.phase
    chain = _causes(error)
    verification = _find(chain, ssl.SSLCertVerificationError)
    if verification is not None:
        return OpaTransportError(
            f"{where}: TLS certificate verification failed: {verification.verify_message} ({what})"
        )
    tls = _find(chain, ssl.SSLError)
    if tls is not None:
        return OpaTransportError(f"{where}: TLS error{_while(phase)}: {tls.reason or tls} ({what})")
    if isinstance(error, ConnectionClosed) and error.received:
        return OpaTransportError(f"{where} closed the connection in the middle of the answer ({what})")
    if _find(chain, ConnectionResetError) is not None:
        return OpaTransportError(f"{where} reset the connection{_while(phase)} ({what})")
    if _find(chain, BrokenPipeError) is not None:
        return OpaTransportError(f"{where} closed the connection{_while(phase)} ({what})")
    if _find(chain, ConnectionRefusedError) is not None:
        return OpaTransportError(f"{where} refused the connection ({what})")
    unresolved = _find(chain, socket.gaierror)
    if unresolved is not None:
        return OpaTransportError(f"{where}: cannot resolve the host name: {unresolved.strerror} ({what})")
    if isinstance(error, ConnectionClosed):
        return OpaTransportError(f"{where} closed the connection without answering ({what})")
    if isinstance(error, ProtocolError):
        return OpaTransportError(f"{where} sent a malformed HTTP answer: {error} ({what})")
    detail = str(error) or type(error).__name__
    if isinstance(error, OSError):
        return OpaTransportError(f"{where}: connection error{_while(phase)}: {detail} ({what})")
    return PolicyError(f"{where}: {what} failed: {detail}")


# ------------------------------------------------------------------------------------------------ engine


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


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
    """A :class:`~kubesched.policyapi.contract.PolicyClient` backed by an OPA server's REST API.

    ``endpoint`` is the decision's Data API URL, e.g. ``http://opa:8181/v1/data/kubernetes/authz``; or OPA's
    base URL (``http://opa:8181``) with the document in ``decision_path`` (``kubernetes/authz``).
    ``batch_endpoint`` (same origin) may contain ``{target_kind}``, replaced by ``node`` or ``cluster``.
    Its connection pool is made on first use, in the running loop, and stays bound to that loop: use the engine and
    close it (:meth:`aclose`) there. Concurrent calls are safe on that loop.
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
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        clock: Clock | None = None,
    ) -> None:
        if not (isinstance(timeout_seconds, int | float) and math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise PolicyError(f"timeout_seconds must be a positive number of seconds, not {timeout_seconds!r}")
        if not (math.isfinite(refresh_seconds) and refresh_seconds >= 0):
            raise PolicyError(f"refresh_seconds must be zero or more, not {refresh_seconds!r}")
        if pool_size < 1:
            raise PolicyError(f"pool_size must be at least 1, not {pool_size!r}")
        if max_concurrent_requests < 1:
            raise PolicyError(f"max_concurrent_requests must be at least 1, not {max_concurrent_requests!r}")
        endpoint = _with_decision_path(endpoint, decision_path)
        origin, self._decision_target = _split_endpoint(endpoint, "endpoint")
        self._endpoint = endpoint
        self._origin = origin.url
        self._decision_path = urllib.parse.unquote(self._decision_target.split("?", 1)[0][len(DATA_API_PREFIX) :])
        self._batch_endpoint = batch_endpoint
        if batch_endpoint is not None:
            batch_origin, _ = _split_endpoint(batch_endpoint.replace("{target_kind}", "node"), "batch_endpoint")
            if batch_origin != origin:
                raise PolicyError(f"batch_endpoint {batch_endpoint!r} must be on the same server as {endpoint!r}")
        self._install = install_batch_module and batch_endpoint is None
        self._batch_targets: dict[str, str] = {}
        self._timeout = float(timeout_seconds)
        self._refresh = float(refresh_seconds)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._token = (
            TokenFile(
                token_file, clock=self._clock, recheck_seconds=TOKEN_CHECK_INTERVAL_SECONDS, label="OPA token file"
            )
            if token_file is not None
            else None
        )
        self._ssl_context: ssl.SSLContext | None = None
        if origin.scheme == "https":
            try:
                self._ssl_context = client_context(ca=Pem("caFile", path=ca_file) if ca_file is not None else None)
            except TlsError as error:
                raise PolicyError(f"cannot load the CA bundle: {error}") from error
        elif ca_file is not None:
            raise PolicyError(f"ca_file is set but endpoint {endpoint!r} is not https://")
        self._host, self._port = origin.host, origin.port
        default_port = 443 if origin.scheme == "https" else 80
        host = f"[{origin.host}]" if ":" in origin.host else origin.host
        self._host_header = host if origin.port == default_port else f"{host}:{origin.port}"
        self._pool_size = pool_size
        self._max_answer_bytes = max_answer_bytes
        self._in_flight = asyncio.Semaphore(max_concurrent_requests)
        self._pool: Http1Pool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._stale_retries = 0
        self._calls = 0  # calls in flight or waiting for their turn
        # Revision state is read by revision(), which plugins may call from any thread; never held across awaits.
        self._state_lock = threading.Lock()
        self._install_locks: dict[str, asyncio.Lock] = {}
        self._installed: dict[str, float] = {}  # module id -> when its content was last found to be ours
        self._refused: dict[str, tuple[float, PolicyError]] = {}
        # What OPA reported about its policy: bundle revisions (every answer's provenance) and the digest of its
        # modules (a refresh's GET /v1/policies; None: not read yet, or refused).
        self._bundles: tuple[tuple[str, str], ...] | None = None
        self._policies: str | None = None
        self._refreshes = 0  # names the revision only when OPA reports nothing (see revision())
        self._refreshed_at = -math.inf
        self._refresh_lock: asyncio.Lock | None = None

    # ------------------------------------------------------------------------------------ PolicyClient

    @property
    def kind(self) -> str:
        return "remote"

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def revision(self) -> str:
        with self._state_lock:
            return self._reported_revision()

    async def refresh(self) -> str:
        """The revision OPA reports now, asked again (``GET /v1/policies``, and the provenance of the batch document
        when OPA runs bundles) once the last refresh is ``refresh_seconds`` old; raises PolicyError by the deadline
        when OPA cannot be asked."""
        if self._fresh():
            return self.revision()
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        async with self._refresh_lock:
            if not self._fresh():
                pool = self._client()
                call = _Call(f"GET {POLICIES_TARGET}", WAITING_FOR_A_TURN)
                await self._within_deadline(call, self._ask_revision(pool, call))
        return self.revision()

    def input_paths(self, revision: str) -> InputPaths | None:
        # Not analysed: OPA's AST (GET /v1/policies) is not regorus' and the policies can change on the server
        # between two reads; decisions stay keyed on the whole input.
        return None

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        pool = self._client()
        body = _encode(input_doc)
        call = _Call(f"POST {self._decision_target.split('?', 1)[0]}", WAITING_FOR_A_TURN)
        document, revision = await self._within_deadline(call, self._post_data(pool, call, self._decision_target, body))
        decision_id = _decision_id(document)
        if "result" not in document:
            return undefined_decision(decision_id, revision)
        return dataclasses.replace(interpret_result(document["result"], decision_id=decision_id), revision=revision)

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        pool = self._client()
        names = [_target_name(target, target_kind) for target in targets]
        body = _encode(batch_input(pod, targets, target_kind=target_kind, operation=operation, time=time))
        target = self._batch_target(target_kind)
        path = target.split("?", 1)[0]
        call = _Call(f"POST {path}", WAITING_FOR_A_TURN)

        async def install_and_ask() -> tuple[dict[str, Any], str]:
            if self._install:
                await self._ensure_batch_module(pool, call, target_kind)
            return await self._post_data(pool, call, target, body)

        document, revision = await self._within_deadline(call, install_and_ask())
        decision_id = _decision_id(document)
        undefined = undefined_decision(decision_id, revision)
        if "result" not in document:
            if self._install:
                # The generated rule is always defined (an empty object at worst): our module is gone. Not the
                # policy's answer, so not one to cache: a failure, and the module is installed at the next call.
                self._installed.pop(batch_module_id(target_kind), None)
                raise PolicyError(
                    f"OPA at {self._origin} no longer serves kubesched's batch module at {path} (deleted behind our "
                    "back); it is installed again at the next call"
                )
            return dict.fromkeys(names, undefined)
        result = document["result"]
        if not isinstance(result, Mapping):
            raise PolicyError(
                f"batch result from {path} is {json_type_phrase(result)}, not an object keyed by {target_kind} name"
            )
        return {
            name: (
                dataclasses.replace(interpret_result(result[name], decision_id=decision_id), revision=revision)
                if name in result
                else undefined
            )
            for name in names
        }

    async def aclose(self) -> None:
        """Close the connections; the engine refuses calls from then on. Idempotent."""
        self._closed = True
        pool = self._pool  # kept: its counts stay readable after the close
        if pool is None:
            return
        if self._loop is not asyncio.get_running_loop():
            # The connections belong to another loop (gone, or running elsewhere): they cannot be closed from
            # here, and die with it.
            return
        await pool.aclose(CLOSE_GRACE_SECONDS)

    # ------------------------------------------------------------------------------------ diagnostics

    @property
    def connections_opened(self) -> int:
        """TCP connections the engine's pool has opened."""
        return self._pool.opened if self._pool is not None else 0

    @property
    def stale_retries(self) -> int:
        """How many requests were sent again because a reused connection had been closed by the server."""
        return self._stale_retries

    def pooled_connections(self) -> list[PooledConnection]:
        """The pool's open connections, as their sockets say now (between calls, all of them are idle)."""
        if self._pool is None:
            return []
        found: list[PooledConnection] = []
        for transport in self._pool.transports():
            sock = transport.get_extra_info("socket")
            try:
                port = int(sock.getsockname()[1])
                nodelay = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            except (AttributeError, OSError, ValueError):
                continue  # closed under us
            ssl_object = transport.get_extra_info("ssl_object")
            found.append(PooledConnection(port, nodelay, ssl_object.version() if ssl_object is not None else None))
        return sorted(found, key=lambda connection: connection.local_port)

    # ------------------------------------------------------------------------------------ internals

    def _client(self) -> Http1Pool:
        if self._closed:
            raise PolicyError(f"the OPA client for {self._origin} is closed")
        loop = asyncio.get_running_loop()
        if self._pool is None:
            # No proxies or .netrc from the environment, no cookies: OPA is reached directly, as configured.
            self._pool = Http1Pool(
                self._host,
                self._port,
                ssl_context=self._ssl_context,
                server_hostname=self._host,
                check_idle=True,
                idle_expiry=KEEPALIVE_EXPIRY_SECONDS,
            )
            self._loop = loop
        elif loop is not self._loop:
            raise PolicyError(
                f"the OPA client for {self._origin} is bound to the event loop that first used it, not this one"
            )
        return self._pool

    async def _within_deadline(self, call: _Call, work: Awaitable[_T]) -> _T:
        deadline = asyncio.timeout(self._timeout)
        self._calls += 1
        try:
            async with deadline, self._in_flight:
                return await work
        except TimeoutError as error:
            if not deadline.expired():
                raise
            raise OpaTransportError(
                f"OPA at {self._origin} timed out after {self._timeout:g}s{_while(call.phase)} ({call.what})",
                timed_out=True,
            ) from error
        finally:
            self._calls -= 1
            # Only once no call is in flight or waiting for its turn: in a burst, a connection closed for being
            # idle would be opened again at once by the next caller.
            if self._calls == 0 and self._pool is not None:
                self._pool.trim(self._pool_size)

    def _reported_revision(self) -> str:
        """What OPA reported, as one string (state lock held)."""
        parts = []
        if self._bundles is not None:
            parts.append(_bundles_revision(self._bundles))
        if self._policies is not None:
            parts.append(f"policies:{self._policies}")
        return ";".join(parts) if parts else f"unreported:{self._refreshes}"

    def _fresh(self) -> bool:
        return self._refresh > 0 and abs(self._clock.now() - self._refreshed_at) < self._refresh

    async def _ask_revision(self, pool: Http1Pool, call: _Call) -> None:
        """Read what OPA reports about its policy now: its modules, and its bundles' revisions when it runs any."""
        answer = await self._exchange(pool, call, "GET", POLICIES_TARGET, b"", "application/json")
        policies: str | None = None
        if answer.status == 200:
            listed = _json_object(answer, f"GET {POLICIES_TARGET}", self._origin).get("result")
            if not isinstance(listed, list):
                raise PolicyError(
                    f"OPA at {self._origin} answered GET {POLICIES_TARGET} with a result that is "
                    f"{json_type_phrase(listed)}, not a list of modules"
                )
            policies = self._policies_digest(listed)
        elif answer.status not in (401, 403):  # refused to this token: OPA reports nothing of its modules to us
            raise _http_error(self._origin, f"GET {POLICIES_TARGET}", answer)
        bundles = self._bundles
        if bundles is not None:
            # Bundles carry data as well as modules: their revisions say when either changed.
            target = self._batch_target("node")
            call.what = f"GET {target.split('?', 1)[0]}"
            provenance = await self._exchange(pool, call, "GET", target, b"", "application/json")
            if not 200 <= provenance.status < 300:
                raise _http_error(self._origin, call.what, provenance)
            reported = _json_object(provenance, call.what, self._origin).get("provenance")
            bundles = _bundle_revisions(reported) if isinstance(reported, Mapping) else None
        with self._state_lock:
            self._policies, self._bundles = policies, bundles
            self._refreshes += 1
            self._refreshed_at = self._clock.now()

    def _policies_digest(self, listed: list[Any]) -> str:
        """A digest of OPA's modules (id and source), leaving out kubesched's batch modules while they are ours
        byte for byte (installing one changes no decision; a module that differs is counted)."""
        ours = {batch_module_id(kind): batch_module(self._decision_path, kind) for kind in ("node", "cluster")}
        modules = []
        for item in listed:
            if not isinstance(item, Mapping):
                continue
            module_id, raw = str(item.get("id", "")), str(item.get("raw", ""))
            if ours.get(module_id) != raw:
                modules.append((module_id, raw))
        encoded = json.dumps(sorted(modules), separators=(",", ":")).encode()
        return hashlib.sha256(encoded).hexdigest()[:16]

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

    async def _exchange(
        self, pool: Http1Pool, call: _Call, method: str, target: str, body: bytes, content_type: str
    ) -> Answer:
        """Send one request and read its whole answer; the only retry is a stale reused connection."""
        call.what = f"{method} {target.split('?', 1)[0]}"
        headers = {"Content-Type": content_type}
        if self._token is not None:
            call.phase = "reading the token file"
            try:
                headers["Authorization"] = f"Bearer {await self._token.current()}"
            except TokenFileError as error:
                raise PolicyError(str(error)) from error
        request = encode_request(method, target, self._host_header, headers, body, FIXED_HEADERS)
        retried = False
        while True:
            call.reused = call.received = False
            try:
                answer = await pool.exchange(request, call, self._max_answer_bytes)
            except AnswerTooLarge as error:
                raise PolicyError(
                    f"OPA at {self._origin}: {call.what}: the answer is larger than {error.limit} bytes "
                    "(max_answer_bytes); is the decision path a whole data tree?"
                ) from error
            except (ProtocolError, OSError) as error:  # ConnectionClosed and ssl.SSLError are OSErrors
                if not retried and _is_stale(error, call):
                    retried = True
                    self._stale_retries += 1
                    # The server closed one of them behind our back (OPA restarted, or its idle timeout): the
                    # others are as old, so the retry goes out on a new connection.
                    pool.trim(0)
                    continue
                raise _translate(error, self._origin, call) from error
            if answer.status == 401 and self._token is not None:
                self._token.invalidate()
            return answer

    async def _post_data(self, pool: Http1Pool, call: _Call, target: str, body: bytes) -> tuple[dict[str, Any], str]:
        """The Data API's answer document, and the revision that answered."""
        answer = await self._exchange(pool, call, "POST", target, body, "application/json")
        what = f"POST {target.split('?', 1)[0]}"
        if not 200 <= answer.status < 300:
            raise _http_error(self._origin, what, answer)
        document = _json_object(answer, what, self._origin)
        warning = document.get("warning")
        if isinstance(warning, Mapping) and warning.get("code") == USAGE_WARNING_CODE:
            path = target.split("?", 1)[0]
            raise PolicyError(f"OPA warned about the request to {path}: {warning.get('message', USAGE_WARNING_CODE)}")
        return document, self._answer_revision(document.get("provenance"))

    def _answer_revision(self, provenance: object) -> str:
        """Remember the bundle revisions this answer reports; the revision that answered it."""
        with self._state_lock:
            if isinstance(provenance, Mapping):
                self._bundles = _bundle_revisions(provenance)
            return self._reported_revision()

    async def _ensure_batch_module(self, pool: Http1Pool, call: _Call, target_kind: str) -> None:
        """Make sure the module at ``/v1/policies/kubesched-batch`` is ours, byte for byte, before trusting its
        answers: checked with a GET (read access is enough when a bundle already ships it) at first use and
        again once ``refresh_seconds`` (at least 1 s) have passed; written with a PUT when it is missing
        or differs."""
        module_id = batch_module_id(target_kind)
        if self._verified_recently(module_id):
            return
        target = f"/v1/policies/{module_id}"
        call.what, call.phase = f"GET {target}", "waiting for another call to check the batch module"
        lock = self._install_locks.setdefault(module_id, asyncio.Lock())
        async with lock:
            if self._verified_recently(module_id):
                return
            refused = self._refused.get(module_id)
            if refused is not None and abs(self._clock.now() - refused[0]) < max(self._refresh, 1.0):
                raise refused[1]
            source = batch_module(self._decision_path, target_kind)
            found = await self._installed_source(pool, call, target)
            if found == source:
                self._refused.pop(module_id, None)
                self._installed[module_id] = self._clock.now()
                return
            answer = await self._exchange(pool, call, "PUT", target, source.encode(), "text/plain")
            if not 200 <= answer.status < 300:
                error = _http_error(self._origin, f"PUT {target}", answer)
                if 400 <= answer.status < 500:
                    if found is not None:
                        refusal = PolicyError(
                            f"the module at {target} is not kubesched's batch module for decisionPath "
                            f"{self._decision_path!r} (its content differs) and OPA refused to replace it: {error}; "
                            f"its answers are not used. Ship the module `kubesched policy batch-module` prints"
                        )
                    else:
                        refusal = PolicyError(
                            f"OPA refused to install kubesched's batch module: {error}. If bundles own OPA's "
                            f"policies, add the module `kubesched policy batch-module` prints to your bundle and "
                            f"set batchEndpoint (or turn off installBatchModule when it is served at "
                            f"{DATA_API_PREFIX}{batch_path(target_kind)})"
                        )
                    refusal.__cause__ = error
                    self._refused[module_id] = (self._clock.now(), refusal)
                    raise refusal
                raise error
            if found is not None:
                log.warning("replaced the module at %s: its content was not kubesched's batch module", target)
            self._refused.pop(module_id, None)
            self._installed[module_id] = self._clock.now()

    def _verified_recently(self, module_id: str) -> bool:
        verified_at = self._installed.get(module_id)
        return verified_at is not None and abs(self._clock.now() - verified_at) < max(self._refresh, 1.0)

    async def _installed_source(self, pool: Http1Pool, call: _Call, target: str) -> str | None:
        """The source OPA holds at ``target``; None when there is none or we may not read it (then a PUT decides)."""
        answer = await self._exchange(pool, call, "GET", target, b"", "application/json")
        if answer.status != 200:
            return None
        result = _json_object(answer, f"GET {target}", self._origin).get("result")
        raw = result.get("raw") if isinstance(result, Mapping) else None
        return raw if isinstance(raw, str) else ""


def _encode(input_doc: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps({"input": input_doc}, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as error:
        raise PolicyError(f"the policy input cannot be sent as JSON: {error}") from error


def _bundle_revisions(provenance: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    bundles = provenance.get("bundles")
    revisions: list[tuple[str, str]] = []
    if isinstance(bundles, Mapping):
        for name, info in bundles.items():
            if isinstance(info, Mapping) and isinstance(info.get("revision"), str):
                revisions.append((str(name), info["revision"]))
    return tuple(sorted(revisions)) or None


def _bundles_revision(bundles: tuple[tuple[str, str], ...]) -> str:
    return "bundles:" + ",".join(f"{name}={revision}" for name, revision in bundles)


def _target_name(target: Mapping[str, Any], target_kind: str) -> str:
    metadata = target.get("metadata") if isinstance(target, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise PolicyError(f"a {target_kind} in the batch has no metadata.name")
    return name


def _decision_id(document: Mapping[str, Any]) -> str | None:
    value = document.get("decision_id")
    return value if isinstance(value, str) and value else None


def _json_object(answer: Answer, what: str, origin: str) -> dict[str, Any]:
    try:
        document = json.loads(answer.body)
    except ValueError as error:
        raise PolicyError(f"OPA at {origin} answered {what} with a body that is not JSON") from error
    if not isinstance(document, dict):
        raise PolicyError(f"OPA at {origin} answered {what} with {json_type_phrase(document)}, not an object")
    return document


def _http_error(origin: str, what: str, answer: Answer) -> OpaHttpError:
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
    status = answer.status
    text = f"OPA at {origin} answered {what} with {status} {answer.reason}".rstrip()
    if code is not None or message is not None:
        text += ": " + ": ".join(part for part in (code, message) if part)
    if details:
        text += " (" + "; ".join(details) + ")"
    return OpaHttpError(text, status=status, code=code, opa_message=message)
