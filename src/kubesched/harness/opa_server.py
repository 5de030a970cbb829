"""A test server that speaks OPA's REST API, evaluates with the embedded regorus engine, and breaks on demand.

Who calls it: tests of :mod:`kubesched.policy.remote` and of the SecurityAudit plugins with a remote engine, and the
remote benchmark workloads, where no ``opa`` binary is available. Real HTTP on 127.0.0.1 with an ephemeral port,
served by aiohttp from a background thread with its own event loop, so a test's own loop (or a synchronous test) can
talk to it; ``server.faults`` switches faults (delays, error statuses, reset connections, odd answers) at any time.
It answers as OPA's v1 Data and Policy APIs do (undefined results without ``result``, ``api_usage_warning``,
``decision_id``, ``provenance``, 400 for a module that does not compile, 401 without the token). Known differences:
a PUT module is checked by evaluating its packages once without input; path segments that look like integers are
object keys; ``/health`` needs no token.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import socket
import ssl
import struct
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import regorus
from aiohttp import web

__all__ = ["Faults", "OpaTestServer", "RecordedRequest"]

_PACKAGE = re.compile(r"^\s*package\s+([^\s#]+)", re.MULTILINE)
_STATUS_CODES = {400: "invalid_parameter", 401: "unauthorized", 404: "resource_not_found", 409: "resource_conflict"}


async def _oversized(request: web.Request, size: int) -> web.StreamResponse:
    """A chunked answer of ``size`` bytes: {"result": "xxx..."}."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(b'{"result": "')
    chunk = b"x" * (1 << 16)
    written = 0
    try:
        while written < size:
            await response.write(chunk)
            written += len(chunk)
        await response.write(b'"}')
    except (ConnectionResetError, OSError):
        pass  # the client stopped reading, as it should
    return response


@dataclass
class Faults:
    """Failures to inject, read at every request (set them from the test's thread at any time).

    ``hold``, ``delay_seconds``, ``status_code``, ``reset_connection`` and ``reset_requests`` apply to every API
    request except ``/health``; ``undefined``, ``non_boolean`` and ``usage_warning`` to Data API reads only.
    """

    hold: threading.Event | None = None  # answer only once the test sets it (a request held for as long as needed)
    delay_seconds: float = 0.0
    status_code: int | None = None  # answer with this status and an OPA error body (500 → internal_error)
    reset_connection: bool = False  # close the connection with a TCP reset instead of answering
    reset_requests: int = 0  # reset the next N requests, then answer normally
    undefined: bool = False  # answer {} (no result)
    non_boolean: bool = False  # answer {"result": "yes"}
    usage_warning: bool = False  # add OPA's api_usage_warning to the answer
    oversized_bytes: int = 0  # answer a Data API read with a JSON document this large, streamed without a length

    def clear(self) -> None:
        for name, value in vars(Faults()).items():
            setattr(self, name, value)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    query: Mapping[str, str]
    authorization: str | None
    connection: int  # which connection carried it, numbered in the order of their first requests
    client_port: int = 0  # the client's TCP port on that connection (ties a client socket to it)


@dataclass
class _Counters:
    connections: int = 0
    requests: int = 0
    answered: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    log: list[RecordedRequest] = field(default_factory=list)


class _Store:
    """Policies and data, and the regorus engine built from them. Lives in the server thread only."""

    def __init__(self, policies: Mapping[str, str], data: Mapping[str, Any]) -> None:
        self.policies: dict[str, str] = {}
        self.data: dict[str, Any] = json.loads(json.dumps(dict(data)))
        self.engine = self._build(self.policies, self.data)
        for module_id, source in policies.items():
            failure = self.put_policy(module_id, source)
            if failure is not None:
                raise ValueError(f"policy {module_id} does not compile: {failure}")

    @staticmethod
    def _build(policies: Mapping[str, str], data: Mapping[str, Any]) -> regorus.Engine:
        engine = regorus.Engine()
        for module_id, source in policies.items():
            engine.add_policy(module_id, source)
        engine.add_data_json(json.dumps(data))
        return engine

    def put_policy(self, module_id: str, source: str) -> str | None:
        """Install a module; returns regorus' message instead when it does not compile.

        (Not raised: the traceback would keep the candidate engine alive, and an engine freed on another
        thread is an error.)
        """
        candidate = dict(self.policies)
        candidate[module_id] = source
        try:
            engine = self._build(candidate, self.data)
            for package in _PACKAGE.findall(source):
                engine.clone().eval_query_as_json(f"data.{package}")  # compiles lazily: evaluate once
        except RuntimeError as error:
            return _regorus_message(error)
        self.policies, self.engine = candidate, engine
        return None

    def delete_policy(self, module_id: str) -> None:
        candidate = {key: value for key, value in self.policies.items() if key != module_id}
        self.engine = self._build(candidate, self.data)
        self.policies = candidate

    def put_data(self, parts: list[str], value: Any) -> str | None:
        """Create or replace the document at ``parts``; returns the reason instead when it cannot."""
        data = json.loads(json.dumps(self.data))
        if not parts:
            if not isinstance(value, dict):
                return "the root document must be an object"
            data = value
        else:
            node = data
            for part in parts[:-1]:
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    return f"{part} is not an object"
                node = child
            node[parts[-1]] = value
        try:
            engine = self._build(self.policies, data)
        except RuntimeError as error:
            return _regorus_message(error)
        self.engine, self.data = engine, data
        return None

    def evaluate(self, parts: list[str], input_doc: Any, has_input: bool) -> tuple[bool, Any]:
        """(defined, value) of ``data.<parts>``; raises RuntimeError on evaluation errors."""
        engine = self.engine.clone()
        if has_input:
            engine.set_input_json(json.dumps(input_doc))
        reference = "data" + "".join(f"[{json.dumps(part)}]" for part in parts)
        answer = json.loads(engine.eval_query_as_json(reference))
        results = answer.get("result") or []
        if not results:
            return False, None
        return True, results[0]["expressions"][0]["value"]


def _error(status: int, code: str, message: str, errors: list[dict[str, Any]] | None = None) -> web.Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if errors:
        body["errors"] = errors
    return web.json_response(body, status=status)


def _regorus_message(error: BaseException) -> str:
    return str(error).split("Stack backtrace:", 1)[0].strip()


def _path_parts(tail: str) -> list[str]:
    return [part for part in tail.split("/") if part]


class OpaTestServer:
    """OPA's REST API over real HTTP, for tests; a context manager (``start``/``stop`` also work).

    ``token`` turns on bearer-token authentication; ``decision_logging`` adds a ``decision_id`` to Data API
    answers; ``bundle_revisions`` ({bundle name: revision}) appear in provenance; ``owning_bundle`` makes
    policy and data writes fail as when a bundle owns every path; ``ssl_context`` serves HTTPS; ``port`` (0 = an
    ephemeral one) lets a test restart "the same" OPA.
    These attributes may be changed while the server runs.
    """

    def __init__(
        self,
        policies: Mapping[str, str] | None = None,
        data: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        decision_logging: bool = False,
        bundle_revisions: Mapping[str, str] | None = None,
        owning_bundle: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        port: int = 0,
    ) -> None:
        self.token = token
        self.decision_logging = decision_logging
        self.bundle_revisions: dict[str, str] = dict(bundle_revisions or {})
        self.owning_bundle = owning_bundle
        self.faults = Faults()
        self._initial_policies = dict(policies or {})
        self._initial_data = dict(data or {})
        self._ssl_context = ssl_context
        self._counters = _Counters()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._store: _Store | None = None
        self._delayed: set[asyncio.Task[Any]] = set()
        self.port = port
        self._connection_numbers: dict[object, int] = {}  # keeps the handlers alive, so ids stay unique

    # ------------------------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> OpaTestServer:
        if self._thread is not None:
            raise RuntimeError("the OPA test server is already running")
        # regorus engines are bound to their thread, and Python's cycle collector runs on whichever thread
        # happens to allocate: collect the caller's cyclic garbage now, so that the server thread never
        # frees an engine the caller made (which regorus reports as an error).
        gc.collect()
        self._thread = threading.Thread(target=self._run, name="opa-test-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the OPA test server did not start within 30 s")
        if self._startup_error is not None:
            raise RuntimeError(f"the OPA test server did not start: {self._startup_error}") from self._startup_error
        return self

    def stop(self) -> None:
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        self._thread = None

    def __enter__(self) -> OpaTestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------ observation

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._counters.connections

    @property
    def requests(self) -> int:
        """HTTP requests received so far (every path, /health included)."""
        return self._counters.requests

    @property
    def answered(self) -> int:
        """Requests whose handler has produced its answer."""
        return self._counters.answered

    @property
    def most_in_flight(self) -> int:
        """The most requests this server was handling at the same time (a client's concurrency, seen from here)."""
        return self._counters.most_in_flight

    def request_log(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._counters.log)

    def put_policy(self, module_id: str, source: str) -> None:
        """Install a module from the test's thread (ValueError if it does not compile)."""
        self._call(lambda store: store.put_policy(module_id, source))

    def put_data(self, path: str, value: Any) -> None:
        """Create or replace a document under ``data`` from the test's thread (``compliance/nodes``)."""
        self._call(lambda store: store.put_data(_path_parts(path), value))

    def _call(self, action: Callable[[_Store], str | None]) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            raise RuntimeError("the OPA test server is not running")

        async def run() -> str | None:
            assert self._store is not None
            return action(self._store)

        failure = asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=30)
        if failure is not None:
            raise ValueError(failure)

    # ------------------------------------------------------------------------------------ serving

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as error:  # reported to start() if it happens before the server is ready
            # A copy without the traceback: its frames may hold regorus engines, which must die on this thread.
            self._startup_error = RuntimeError(f"{type(error).__name__}: {error}")
            self._ready.set()
        finally:
            self._store = None
            loop.close()
            gc.collect()  # free this thread's engines here, not on another thread later

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._store = _Store(self._initial_policies, self._initial_data)  # regorus engines are thread-bound
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("GET", "/health", self._health)
        app.router.add_route("*", "/v1/data", self._data)
        app.router.add_route("*", "/v1/data/{tail:.*}", self._data)
        app.router.add_route("GET", "/v1/policies", self._list_policies)
        app.router.add_route("*", "/v1/policies/{id:.+}", self._policy)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        handler_factory = runner.server
        assert handler_factory is not None

        def accept() -> asyncio.Protocol:
            with self._lock:
                self._counters.connections += 1
            return handler_factory()

        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        server = await asyncio.get_running_loop().create_server(accept, sock=listener, ssl=self._ssl_context)
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._delayed):
                task.cancel()
            await runner.cleanup()
            await server.wait_closed()

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        connection = self._connection_number(request)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        client_port = int(peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else 0
        with self._lock:
            counters = self._counters
            counters.requests += 1
            counters.in_flight += 1
            counters.most_in_flight = max(counters.most_in_flight, counters.in_flight)
            counters.log.append(
                RecordedRequest(
                    request.method,
                    request.path,
                    dict(request.query),
                    request.headers.get("Authorization"),
                    connection,
                    client_port,
                )
            )
        try:
            return await self._answer(request, handler)
        finally:
            with self._lock:
                self._counters.in_flight -= 1

    async def _answer(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path != "/health":
            faults = self.faults
            hold = faults.hold
            if hold is not None and not hold.is_set():
                held = asyncio.current_task()
                assert held is not None
                self._delayed.add(held)  # cancelled by stop() like a delayed one
                try:
                    while not hold.is_set():
                        await asyncio.sleep(0.001)
                finally:
                    self._delayed.discard(held)
            if faults.delay_seconds > 0:
                task = asyncio.current_task()
                assert task is not None
                self._delayed.add(task)
                try:
                    await asyncio.sleep(faults.delay_seconds)
                finally:
                    self._delayed.discard(task)
            if faults.reset_connection or faults.reset_requests > 0:
                if faults.reset_requests > 0:
                    faults.reset_requests -= 1
                return self._reset(request)
            if faults.status_code is not None:
                status = faults.status_code
                response: web.StreamResponse = _error(
                    status, _STATUS_CODES.get(status, "internal_error"), "injected fault"
                )
            elif faults.oversized_bytes > 0 and request.path.startswith("/v1/data"):
                response = await _oversized(request, faults.oversized_bytes)
            elif self.token is not None and request.headers.get("Authorization") != f"Bearer {self.token}":
                response = _error(401, "unauthorized", "request rejected by administrative policy")
            else:
                response = await handler(request)
        else:
            response = await handler(request)
        with self._lock:
            self._counters.answered += 1
        return response

    def _connection_number(self, request: web.Request) -> int:
        number = self._connection_numbers.get(request.protocol)
        if number is None:
            number = self._connection_numbers[request.protocol] = len(self._connection_numbers) + 1
            transport = request.transport
            raw_socket = transport.get_extra_info("socket") if transport is not None else None
            if raw_socket is not None:  # asyncio sets it already; OPA (Go) does too. Say so explicitly.
                raw_socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return number

    @staticmethod
    def _reset(request: web.Request) -> web.StreamResponse:
        transport = request.transport
        if transport is not None:
            raw_socket = transport.get_extra_info("socket")
            if raw_socket is not None:
                raw_socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        raise asyncio.CancelledError  # nothing is answered; aiohttp drops the request quietly

    async def _health(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({})

    # ------------------------------------------------------------------------------------ Data API

    async def _data(self, request: web.Request) -> web.StreamResponse:
        parts = _path_parts(request.match_info.get("tail", ""))
        if request.method in ("POST", "GET"):
            return await self._read_data(request, parts)
        if request.method == "PUT":
            return await self._write_data(request, parts)
        return _error(405, "invalid_operation", f"method {request.method} is not supported on the Data API")

    async def _read_data(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        has_input = False
        input_doc: Any = None
        if request.method == "POST":
            text = await request.text()
            if text.strip():
                try:
                    body = json.loads(text)
                except ValueError as error:
                    return _error(400, "invalid_parameter", f"body contains malformed input document: {error}")
                if isinstance(body, dict) and "input" in body:
                    has_input, input_doc = True, body["input"]
        elif "input" in request.query:
            try:
                has_input, input_doc = True, json.loads(request.query["input"])
            except ValueError as error:
                return _error(400, "invalid_parameter", f"input parameter format is json: {error}")
        answer: dict[str, Any] = {}
        faults = self.faults
        if faults.undefined:
            pass
        elif faults.non_boolean:
            answer["result"] = "yes"
        else:
            assert self._store is not None
            try:
                defined, value = self._store.evaluate(parts, input_doc, has_input)
            except RuntimeError as error:
                return _error(500, "internal_error", f"1 error occurred: {_regorus_message(error)}")
            if defined:
                answer["result"] = value
        if self.decision_logging:
            answer["decision_id"] = str(uuid.uuid4())
        if request.query.get("provenance") == "true":
            answer["provenance"] = self._provenance()
        if (request.method == "POST" and not has_input) or faults.usage_warning:
            answer["warning"] = {"code": "api_usage_warning", "message": "'input' key missing from the request"}
        return web.json_response(answer)

    def _provenance(self) -> dict[str, Any]:
        provenance: dict[str, Any] = {
            "version": "kubesched-opa-test-server",
            "build_commit": "",
            "build_timestamp": "",
            "build_hostname": "",
        }
        if self.bundle_revisions:
            provenance["bundles"] = {name: {"revision": rev} for name, rev in self.bundle_revisions.items()}
        return provenance

    async def _write_data(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        if self.owning_bundle is not None:
            return _error(400, "invalid_parameter", f"all paths owned by bundle {json.dumps(self.owning_bundle)}")
        try:
            value = json.loads(await request.text())
        except ValueError as error:
            return _error(400, "invalid_parameter", f"body contains malformed JSON: {error}")
        assert self._store is not None
        failure = self._store.put_data(parts, value)
        if failure is not None:
            return _error(404, "resource_conflict", f"write conflict: {failure}")
        return web.Response(status=204)

    # ------------------------------------------------------------------------------------ Policy API

    async def _list_policies(self, request: web.Request) -> web.StreamResponse:
        assert self._store is not None
        listed = [{"id": key, "raw": source, "ast": {}} for key, source in sorted(self._store.policies.items())]
        return web.json_response({"result": listed})

    async def _policy(self, request: web.Request) -> web.StreamResponse:
        module_id = request.match_info["id"]
        store = self._store
        assert store is not None
        if request.method == "GET":
            if module_id not in store.policies:
                return _error(404, "resource_not_found", f"storage_not_found_error: policy id {json.dumps(module_id)}")
            return web.json_response({"result": {"id": module_id, "raw": store.policies[module_id], "ast": {}}})
        if request.method == "PUT":
            if self.owning_bundle is not None:
                return _error(400, "invalid_parameter", f"all paths owned by bundle {json.dumps(self.owning_bundle)}")
            failure = store.put_policy(module_id, (await request.text()))
            if failure is not None:
                detail = {"code": "rego_compile_error", "message": failure, "location": {"file": module_id}}
                return _error(400, "invalid_parameter", "error(s) occurred while compiling module(s)", [detail])
            return web.json_response({})
        if request.method == "DELETE":
            if module_id not in store.policies:
                return _error(404, "resource_not_found", f"storage_not_found_error: policy id {json.dumps(module_id)}")
            if self.owning_bundle is not None:
                return _error(400, "invalid_parameter", f"all paths owned by bundle {json.dumps(self.owning_bundle)}")
            store.delete_policy(module_id)
            return web.json_response({})
        return _error(405, "invalid_operation", f"method {request.method} is not supported on the Policy API")
