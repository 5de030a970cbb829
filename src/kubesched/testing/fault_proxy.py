"""A fault-injecting reverse proxy between kubesched and a real kube-apiserver (or a cluster agent), for the fault
e2e tests.

Who calls it: ``tests/e2e/test_live_faults.py`` and ``tests/e2e/test_commit_crashes.py``. The client under test
talks plain HTTP to the proxy (``http://127.0.0.1:PORT``, through a kubeconfig or a :class:`ClusterConnection` from
:meth:`FaultProxy.connection`); the proxy forwards every request over HTTPS to the
:class:`~kubesched.harness.envtest.ControlPlane` (its CA, the client's ``Authorization`` header passed through)
and streams the answer back as it comes, so watches work. In front of a cluster agent it is
``FaultProxy(upstream=agent_url, upstream_ca=ca_file, server_ssl=context)``: it serves HTTPS itself (with the
agent's own certificate, so the hub trusts it as the agent) and forwards to the agent. Between the two it
injects the faults a real cluster shows now and then, on rules the test sets and changes while the clients run::

    async with FaultProxy(plane) as proxy:
        proxy.fail("POST", r"/pods/[^/]+/binding$", 500, times=3, per_path=True)   # 3 per pod
        proxy.fail("PATCH", r"/status$", 429, times=2, headers={"Retry-After": "1"})
        proxy.drop("GET", r"^/api/v1/nodes$", times=1, watch=False)              # no answer to a list
        proxy.drop("GET", r"^/api/v1/pods$", times=1, watch=True, after_events=3)  # cut a watch
        proxy.delay("POST", r"/binding$", 2.0, times=2)
        proxy.mutate(r"^/api/v1/pods$", spoil)                                   # malformed objects
        proxy.watch_error(r"^/api/v1/pods$", code=410, after_events=1)           # ERROR 410 in a stream
        proxy.hook("POST", r"/pods$", kill_agent, when="answer")                  # the member made it; then
        connection = proxy.connection("scheduler")
        ...
        assert [r.status for r in proxy.log if r.method == "POST"] == [...]

A rule matches a request by method (``None`` or ``"*"``: any), a regular expression *searched* in the path,
optionally one searched in the decoded query string (``query=``, e.g. ``"spec.schedulerName=NAME"``), and
whether it is a watch (``watch=``: ``None`` for both). ``times`` is how often it fires (``None``: for ever),
counted over all requests or, with ``per_path=True``, for each path on its own. For each request the proxy
applies every matching ``delay`` (their seconds add up), then the first matching ``fail`` or ``drop`` (the
request ends there), else, for a watch, the first matching stream rule (``drop(after_events=N)``,
``watch_error``); ``mutate`` rules rewrite every JSON object of list answers (``items``) and watch events
(``object``) they match, as the real server never would (that is how malformed objects get in). Every
request lands in :attr:`FaultProxy.log` with its method, path, query, status (``None``: no answer) and the
fault applied.

A ``hook`` calls a function of the test when a matching request arrives (``when="request"``: before any delay
and before it is forwarded) or when its answer came back from upstream (``when="answer"``: the server has carried
it out, the client has not heard), with the :class:`LoggedRequest`; then the request goes on (``drop=False``) or
the client's connection is closed without an answer (``drop=True``, the default) -- e.g. SIGKILL the client
process at that exact step. A hook is terminal like ``fail`` and ``drop``. The callback runs in the proxy's event
loop: it must not block.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp
import yaml
from aiohttp import web

from kubesched.backends.kube.kubeconfig import ClusterConnection
from kubesched.harness.envtest import USERS, ControlPlane

__all__ = ["FaultProxy", "LoggedRequest", "Mutation", "Rule"]

Action = Literal["fail", "drop", "delay", "mutate", "watch_error", "hook"]
# A mutation takes one object of a list answer or a watch event and returns what to send instead (or None
# after changing it in place).
Mutation = Callable[[dict[str, Any]], "dict[str, Any] | None"]

REASONS = {
    400: "BadRequest",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
# Hop-by-hop headers and those the proxy recomputes; never forwarded either way.
_SKIPPED_HEADERS = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Host",
        "Content-Length", "Content-Encoding", "Accept-Encoding", "Date", "Server",
    )
)  # fmt: skip


def status_body(code: int, message: str = "", reason: str = "") -> dict[str, Any]:
    """A ``Status`` object as the API server sends with an error."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or f"injected by the fault proxy ({code})",
        "reason": reason or REASONS.get(code, ""),
        "code": code,
    }


@dataclass(eq=False)
class Rule:
    """One fault; :meth:`FaultProxy.remove` takes it back. ``hits`` counts the requests it applied to."""

    action: Action
    method: str | None
    path: re.Pattern[str]
    times: int | None = None
    per_path: bool = False
    watch: bool | None = None
    query: re.Pattern[str] | None = None
    status: int = 500
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    seconds: float = 0.0
    after_events: int | None = None  # drop: cut a watch after this many events; watch_error: inject after them
    after_upstream: bool = False  # drop: forward the request first, then give no answer
    mutation: Mutation | None = None
    callback: Callable[[LoggedRequest], object] | None = None  # hook: called with the request
    when: Literal["request", "answer"] = "request"  # hook: before forwarding, or once upstream answered
    hits: int = 0
    _per_path_hits: dict[str, int] = field(default_factory=dict)

    def matches(self, method: str, path: str, query: str, watch: bool) -> bool:
        if self.method not in (None, "*") and self.method != method:
            return False
        if self.watch is not None and self.watch != watch:
            return False
        if not self.path.search(path) or (self.query is not None and not self.query.search(query)):
            return False
        if self.times is None:
            return True
        used = self._per_path_hits.get(path, 0) if self.per_path else self.hits
        return used < self.times

    def consume(self, path: str) -> None:
        self.hits += 1
        self._per_path_hits[path] = self._per_path_hits.get(path, 0) + 1


@dataclass
class LoggedRequest:
    """One request the proxy saw. ``status`` is what the client got (``None``: the connection was dropped)."""

    method: str
    path: str
    query: dict[str, str]
    started: float  # time.monotonic()
    status: int | None = None
    fault: str = ""  # "", "fail", "drop", "cut", "watch_error", "upstream-error"; "delay+..." when delayed
    events: int = 0  # watch lines forwarded (bookmarks included)
    last_resource_version: str = ""  # of the last watch event forwarded
    ended: float | None = None

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")

    @property
    def is_list(self) -> bool:
        return self.method == "GET" and not self.watch


def _is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch") in ("1", "true")


def _forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _SKIPPED_HEADERS}


class _Dropped(Exception):
    """The handler closed the client's connection: there is no response to send."""


class FaultProxy:
    """The proxy (module doc). ``async with FaultProxy(plane) as proxy`` starts it in the running loop.

    ``plane``: forward to that control plane. Or ``upstream`` (an ``https://`` URL) with ``upstream_ca`` (the CA
    file its certificate is checked with); ``server_ssl``: serve HTTPS with that context instead of plain HTTP.
    ``port`` 0 picks a free port (kept across :meth:`stop` and :meth:`start`)."""

    def __init__(
        self,
        plane: ControlPlane | None = None,
        *,
        upstream: str = "",
        upstream_ca: Path | None = None,
        server_ssl: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if (plane is None) == (not upstream):
            raise ValueError("give a control plane or an upstream URL, not both")
        self.plane = plane
        self._upstream = upstream.rstrip("/")
        self._upstream_ca = upstream_ca if plane is None else plane.ca_file
        self.server_ssl = server_ssl
        self.host = host
        self._port = port
        self.rules: list[Rule] = []
        self.log: list[LoggedRequest] = []
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._late: set[asyncio.Task[None]] = set()  # requests forwarded after their client was answered

    # ---------------------------------------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the fault proxy is already started")
        context = ssl.create_default_context(cafile=None if self._upstream_ca is None else str(self._upstream_ca))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=0),
            timeout=aiohttp.ClientTimeout(),
            auto_decompress=False,
            trust_env=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._port, ssl_context=self.server_ssl)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Close the listener and every open connection (watches included), then the upstream session."""
        runner, self._runner = self._runner, None
        for late in list(self._late):
            late.cancel()
        await asyncio.gather(*self._late, return_exceptions=True)
        session, self._session = self._session, None
        try:
            if runner is not None:
                await runner.cleanup()
        finally:
            if session is not None:
                await session.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https://`` with ``server_ssl``), where the client under test connects."""
        if self._runner is None:
            raise RuntimeError("the fault proxy is not started")
        return f"{'https' if self.server_ssl is not None else 'http'}://{self.host}:{self._port}"

    @property
    def upstream(self) -> str:
        """Where requests are forwarded to."""
        return self.plane.url if self.plane is not None else self._upstream

    # ---------------------------------------------------------------------------------------------- clients

    def _plane(self) -> ControlPlane:
        if self.plane is None:
            raise RuntimeError("the fault proxy is in front of an upstream URL, not a control plane")
        return self.plane

    def connection(self, user: str = "scheduler") -> ClusterConnection:
        """A connection to the proxy as ``user`` of the control plane (its bearer token)."""
        return ClusterConnection(server=self.url, source=f"fault proxy {self.url}", token=self._plane().token(user))

    def write_kubeconfig(
        self, path: Path, user: str = "scheduler", context_name: str = "kubesched-fault-proxy"
    ) -> Path:
        """Write a kubeconfig for ``user`` pointing at the proxy (plain http, the user's token)."""
        name = USERS[user][0]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context_name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": {"token": self._plane().token(user)}}],
            "contexts": [{"name": context_name, "context": {"cluster": context_name, "user": name}}],
            "current-context": context_name,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # ---------------------------------------------------------------------------------------------- rules

    def _add(self, rule: Rule) -> Rule:
        self.rules.append(rule)
        return rule

    def fail(
        self,
        method: str | None,
        path_regex: str,
        status: int,
        times: int | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        watch: bool | None = None,
        query: str | None = None,
        per_path: bool = False,
        forward_after: float | None = None,
    ) -> Rule:
        """Answer ``status`` with ``body`` (default: a ``Status`` object) and ``headers``; not forwarded -- or, with
        ``forward_after``, forwarded that many seconds later all the same, its answer discarded: a server that
        answered ``504`` while still carrying the request out (a slow etcd write)."""
        return self._add(Rule(
            "fail", method, re.compile(path_regex), times, per_path, watch, _compile(query), status,
            dict(headers or {}), body if body is not None else status_body(status), seconds=forward_after or 0.0,
            after_upstream=forward_after is not None,
        ))  # fmt: skip

    def drop(
        self,
        method: str | None,
        path_regex: str,
        times: int | None = None,
        *,
        after_events: int | None = None,
        after_upstream: bool = False,
        watch: bool | None = None,
        query: str | None = None,
        per_path: bool = False,
    ) -> Rule:
        """Close the client's connection without an answer (``after_upstream``: once the server handled it);
        with ``after_events``, a watch is cut (no end of stream) after forwarding that many events."""
        if after_events is not None and watch is False:
            raise ValueError("after_events applies to watches")
        return self._add(Rule(
            "drop", method, re.compile(path_regex), times, per_path, True if after_events is not None else watch,
            _compile(query), after_events=after_events, after_upstream=after_upstream,
        ))  # fmt: skip

    def delay(
        self,
        method: str | None,
        path_regex: str,
        seconds: float,
        times: int | None = None,
        *,
        watch: bool | None = None,
        query: str | None = None,
        per_path: bool = False,
    ) -> Rule:
        """Wait ``seconds`` before forwarding (or failing) the request."""
        return self._add(Rule(
            "delay", method, re.compile(path_regex), times, per_path, watch, _compile(query), seconds=seconds
        ))  # fmt: skip

    def mutate(self, path_regex: str, fn: Mutation, *, query: str | None = None) -> Rule:
        """Rewrite each object of GET list answers and watch events on matching paths with ``fn``."""
        return self._add(Rule("mutate", "GET", re.compile(path_regex), None, query=_compile(query), mutation=fn))

    def watch_error(
        self,
        path_regex: str,
        code: int = 410,
        *,
        after_events: int = 0,
        times: int | None = 1,
        query: str | None = None,
        message: str = "",
    ) -> Rule:
        """After ``after_events`` events of a matching watch, send an ``ERROR`` event with a ``Status`` of
        ``code`` (410: reason Expired, "too old resource version") and end the stream, as the server does."""
        body = status_body(code, message or ("too old resource version: injected" if code == 410 else ""))
        return self._add(Rule(
            "watch_error", "GET", re.compile(path_regex), times, False, True, _compile(query), code,
            body=body, after_events=after_events,
        ))  # fmt: skip

    def hook(
        self,
        method: str | None,
        path_regex: str,
        callback: Callable[[LoggedRequest], object],
        times: int | None = 1,
        *,
        when: Literal["request", "answer"] = "answer",
        drop: bool = True,
        query: str | None = None,
    ) -> Rule:
        """Call ``callback`` when a matching request arrives or once upstream answered it, then close the client's
        connection without an answer (``drop``) or carry on (module doc). Never for watches."""
        return self._add(Rule(
            "hook", method, re.compile(path_regex), times, False, False, _compile(query), callback=callback,
            when=when, after_upstream=drop,
        ))  # fmt: skip

    def remove(self, rule: Rule) -> None:
        if rule in self.rules:
            self.rules.remove(rule)

    def clear(self) -> None:
        """No more faults: every rule is removed (the log stays)."""
        self.rules.clear()

    def requests(
        self, method: str | None = None, path_regex: str | None = None, *, watch: bool | None = None
    ) -> list[LoggedRequest]:
        """The log entries for ``method`` (any when None), a path regex searched in the path, watch or not."""
        pattern = _compile(path_regex)
        return [
            entry
            for entry in self.log
            if (method is None or entry.method == method)
            and (pattern is None or pattern.search(entry.path))
            and (watch is None or entry.watch == watch)
        ]

    # ---------------------------------------------------------------------------------------------- serving

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        watch = _is_watch(query)
        entry = LoggedRequest(request.method, request.path, query, time.monotonic())
        self.log.append(entry)
        try:
            return await self._serve(request, entry, watch)
        except _Dropped:
            if entry.fault.endswith("drop"):
                entry.status = None  # a cut watch keeps its 200: the stream started
            # The connection is closed: aiohttp finds nothing to write this on and sends nothing.
            return web.Response(status=499)
        finally:
            entry.ended = time.monotonic()

    def _select(self, method: str, path: str, query: str, watch: bool) -> tuple[float, Rule | None, list[Rule]]:
        seconds, terminal, stream, mutations = 0.0, None, None, []
        for rule in list(self.rules):
            if not rule.matches(method, path, query, watch):
                continue
            if rule.action == "delay":
                rule.consume(path)
                seconds += rule.seconds
            elif rule.action == "mutate":
                rule.consume(path)
                mutations.append(rule)
            elif rule.action == "watch_error" or (rule.action == "drop" and rule.after_events is not None):
                if stream is None and terminal is None:
                    stream = rule
            elif terminal is None:
                terminal = rule
        chosen = terminal or stream
        if chosen is not None:
            chosen.consume(path)
        return seconds, chosen, mutations

    async def _serve(self, request: web.Request, entry: LoggedRequest, watch: bool) -> web.StreamResponse:
        body = await request.read()
        query = urllib.parse.unquote_plus(request.query_string)
        seconds, rule, mutations = self._select(request.method, request.path, query, watch)
        faults = []
        if rule is not None and rule.action == "hook" and rule.when == "request":
            faults.append("hook")  # on arrival, before any delay
            entry.fault = "hook"
            assert rule.callback is not None
            rule.callback(entry)
        if seconds:
            faults.append("delay")
            entry.fault = "+".join(faults)
            await asyncio.sleep(seconds)
        if rule is not None and rule.action == "fail":
            entry.fault = "+".join([*faults, "fail"])
            entry.status = rule.status
            if rule.after_upstream:
                late = asyncio.get_running_loop().create_task(
                    self._forward_late(request.method, request.path_qs, dict(request.headers), body, rule.seconds)
                )
                self._late.add(late)
                late.add_done_callback(self._late.discard)
            text = rule.body if isinstance(rule.body, str | bytes) else json.dumps(rule.body)
            headers = {"Content-Type": "application/json", **rule.headers}
            return web.Response(status=rule.status, body=text, headers=headers)
        if rule is not None and rule.action == "drop" and rule.after_events is None and not rule.after_upstream:
            entry.fault = "+".join([*faults, "drop"])
            self._abort(request)
        if rule is not None and rule.action == "hook" and rule.when == "request" and rule.after_upstream:  # drop
            self._abort(request)
        assert self._session is not None
        url = self.upstream + request.path_qs
        try:
            upstream = await self._session.request(
                request.method,
                url,
                headers=_forwarded(request.headers),
                data=body if body else None,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as error:
            entry.fault = "+".join([*faults, "upstream-error"])
            entry.status = 502
            return web.json_response(status_body(502, f"fault proxy: upstream: {error}", "BadGateway"), status=502)
        try:
            if rule is not None and rule.action == "drop" and rule.after_upstream:
                await upstream.read()
                entry.fault = "+".join([*faults, "drop"])
                self._abort(request)
            if rule is not None and rule.action == "hook" and rule.when == "answer":
                answer = await upstream.read()
                entry.fault = "+".join([*faults, "hook"])
                entry.status = upstream.status  # what the server answered; the client gets it only without drop
                assert rule.callback is not None
                rule.callback(entry)
                if rule.after_upstream:  # drop
                    entry.status = None
                    self._abort(request)
                return web.Response(status=upstream.status, body=answer, headers=_forwarded(upstream.headers))
            headers = _forwarded(upstream.headers)
            if watch and upstream.status == 200:
                stream_rule = rule if rule is not None and rule.after_events is not None else None
                return await self._stream_watch(request, entry, upstream, headers, stream_rule, mutations, faults)
            entry.status = upstream.status
            if mutations and request.method == "GET" and upstream.status == 200:
                payload = _mutate_list(await upstream.read(), mutations)
                return web.Response(status=upstream.status, body=payload, headers=headers)
            response = web.StreamResponse(status=upstream.status, headers=headers)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
        finally:
            upstream.release()

    async def _stream_watch(
        self,
        request: web.Request,
        entry: LoggedRequest,
        upstream: aiohttp.ClientResponse,
        headers: dict[str, str],
        rule: Rule | None,
        mutations: list[Rule],
        faults: list[str],
    ) -> web.StreamResponse:
        entry.status = upstream.status
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)

        async def strike() -> None:
            """The stream rule's moment: cut the connection, or send the ERROR event (the stream then ends)."""
            assert rule is not None
            if rule.action == "drop":
                entry.fault = "+".join([*faults, "cut"])
                self._abort(request)  # raises: no end of stream, the client sees a broken answer
            entry.fault = "+".join([*faults, "watch_error"])
            await response.write(json.dumps({"type": "ERROR", "object": rule.body}).encode() + b"\n")

        async def forward(line: bytes) -> bool:
            """Send one event line; False once the rule ended the stream."""
            await response.write(_mutate_event(line, mutations, entry))
            entry.events += 1
            if rule is not None and entry.events == rule.after_events:
                await strike()
                return False
            return True

        if rule is not None and rule.after_events == 0:
            await strike()
        else:
            buffer = b""
            async for chunk in upstream.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                if not await _forward_all(forward, lines):
                    break
            else:
                if buffer.strip():
                    await forward(buffer)
        await response.write_eof()
        return response

    async def _forward_late(
        self, method: str, path_qs: str, headers: dict[str, str], body: bytes, seconds: float
    ) -> None:
        """Send a request the client was already answered for, ``seconds`` from now; the answer is logged only."""
        await asyncio.sleep(seconds)
        entry = LoggedRequest(method, path_qs.split("?", 1)[0], {}, time.monotonic(), fault="late")
        self.log.append(entry)
        assert self._session is not None
        try:
            async with self._session.request(
                method, self.upstream + path_qs, headers=_forwarded(headers), data=body or None, allow_redirects=False
            ) as answer:
                await answer.read()
                entry.status = answer.status
        except (aiohttp.ClientError, OSError):
            entry.status = 502
        finally:
            entry.ended = time.monotonic()

    @staticmethod
    def _abort(request: web.Request) -> None:
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise _Dropped


async def _forward_all(forward: Callable[[bytes], Any], lines: list[bytes]) -> bool:
    for line in lines:
        if line.strip() and not await forward(line + b"\n"):
            return False
    return True


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern is not None else None


def _apply(mutations: list[Rule], obj: Any) -> Any:
    for rule in mutations:
        if isinstance(obj, dict) and rule.mutation is not None:
            result = rule.mutation(obj)
            obj = obj if result is None else result
    return obj


def _mutate_list(payload: bytes, mutations: list[Rule]) -> bytes:
    try:
        document = json.loads(payload)
    except ValueError:
        return payload
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        return payload
    document["items"] = [_apply(mutations, item) for item in document["items"]]
    return json.dumps(document).encode()


def _mutate_event(line: bytes, mutations: list[Rule], entry: LoggedRequest) -> bytes:
    try:
        event = json.loads(line)
    except ValueError:
        return line
    if not isinstance(event, dict):
        return line
    obj = event.get("object")
    if isinstance(obj, dict):
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if isinstance(version, str) and version:
            entry.last_resource_version = version
        if mutations and event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            event["object"] = _apply(mutations, obj)
            return json.dumps(event).encode() + b"\n"
    return line
