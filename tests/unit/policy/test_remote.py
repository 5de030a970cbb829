"""RemoteOpaEngine against real HTTP: the OPA test server (regorus behind OPA's REST API) and raw sockets.

Every failure mode the remote engine must turn into a PolicyError or an UNDEFINED deny, the deadline over the
whole call, the keep-alive pool (one connection for many calls, TCP_NODELAY on it, stale connections
replaced, at most max_concurrent_requests in flight), bearer tokens that rotate, TLS with a CA bundle, one
request per pod for a batch, and the revision every Decision carries. Nothing is mocked: the server is a real
aiohttp server on 127.0.0.1 and the scripted servers are real sockets. Every scenario runs in ``run_async``,
which fails a test that leaves asyncio tasks behind, and closes its engines.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kubesched.clock import VirtualClock
from kubesched.harness.certificates import write_server_certificates
from kubesched.harness.opa_server import OpaTestServer
from kubesched.net.http1 import ConnectionClosed
from kubesched.policy import remote
from kubesched.policy.contract import batch_module, interpret_result
from kubesched.policy.remote import (
    OpaHttpError,
    OpaTransportError,
    RemoteOpaEngine,
    batch_module_id,
)
from kubesched.policyapi.contract import Decision, PolicyClient, PolicyError, undefined_decision

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]

POLICY = """package kubernetes.authz

import rego.v1

default allow := false

allow if {
\tinput.pod.metadata.namespace != "forbidden"
\tcount(deny) == 0
}

deny contains "node is not compliant" if input.node.metadata.labels.compliant == "false"

deny contains "namespace is forbidden" if input.pod.metadata.namespace == "forbidden"
"""

# A decision that is undefined for nodes without a "zone" label (no default): exercises "missing from the batch".
ZONED = """package zoned

import rego.v1

allow if input.node.metadata.labels.zone == "a"

allow := false if input.node.metadata.labels.zone == "b"
"""

DECISION = "/v1/data/kubernetes/authz"
ALLOWED_POD = {"metadata": {"namespace": "apps", "labels": {"app": "web"}}}
FORBIDDEN_POD = {"metadata": {"namespace": "forbidden"}}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels, "annotations": {}}, "spec": {"taints": []}}


def single(pod: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    return {"pod": pod, "node": target, "operation": "schedule", "time": "2026-01-01T00:00:00Z"}


async def batch(
    engine: RemoteOpaEngine, pod: Mapping[str, Any], targets: list[dict[str, Any]]
) -> dict[str, Decision]:
    return await engine.decide_batch(
        pod, targets, target_kind="node", operation="schedule", time="2026-01-01T00:00:00Z"
    )


def bare(decision: Decision) -> Decision:
    """The decision without its revision (tests of the answer itself; revisions have tests of their own)."""
    return dataclasses.replace(decision, revision="")


def bare_all(decisions: Mapping[str, Decision]) -> dict[str, Decision]:
    return {name: bare(decision) for name, decision in decisions.items()}


def closing(run_async: RunAsync[T], scenario: Coroutine[Any, Any, T], *engines: RemoteOpaEngine) -> T:
    """Run ``scenario`` on a fresh loop and close the engines on that loop, whatever happens."""

    async def run() -> T:
        try:
            return await scenario
        finally:
            for engine in engines:
                await engine.aclose()

    return run_async(run())


@pytest.fixture
def server() -> Iterator[OpaTestServer]:
    with OpaTestServer(policies={"authz.rego": POLICY, "zoned.rego": ZONED}) as running:
        yield running


@pytest.fixture
def engine(server: OpaTestServer) -> RemoteOpaEngine:
    # Built outside any event loop, as a plugin may be: the connection pool is made at first use.
    return RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)


# --------------------------------------------------------------------------------------------- decisions


def test_the_engine_is_a_policy_client(engine: RemoteOpaEngine) -> None:
    assert isinstance(engine, PolicyClient)
    assert engine.kind == "remote"


def test_decide_returns_the_policy_answer_with_reasons(engine: RemoteOpaEngine, run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[Decision, Decision]:
        allowed = await engine.decide(single(ALLOWED_POD, node("n1")))
        denied = await engine.decide(single(FORBIDDEN_POD, node("n1", compliant="false")))
        return allowed, denied

    allowed, denied = closing(run_async, scenario(), engine)
    assert bare(allowed) == Decision(True)
    assert bare(denied) == Decision(False, ("namespace is forbidden", "node is not compliant"))


def test_every_query_asks_for_strict_builtin_errors_and_provenance(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        await engine.decide(single(ALLOWED_POD, node("n1")))
        await batch(engine, ALLOWED_POD, [node("n1")])

    closing(run_async, scenario(), engine)
    reads = [r for r in server.request_log() if r.method == "POST"]
    assert len(reads) == 2
    assert all(r.query == {"strict-builtin-errors": "true", "provenance": "true"} for r in reads)


@pytest.mark.parametrize("logging_on", [pytest.param(True, id="logging-on-keeps-id"), pytest.param(False, id="off")])
def test_decision_id_is_kept_when_opa_sends_one(logging_on: bool, run_async: RunAsync[Any]) -> None:
    with OpaTestServer(policies={"authz.rego": POLICY}, decision_logging=logging_on) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)

        async def scenario() -> tuple[Decision, dict[str, Decision]]:
            decision = await engine.decide(single(ALLOWED_POD, node("n1")))
            return decision, await batch(engine, ALLOWED_POD, [node("n1"), node("n2")])

        decision, decisions = closing(run_async, scenario(), engine)
    assert decision.allowed
    if logging_on:
        assert decision.decision_id and len(decision.decision_id) == 36
        ids = {d.decision_id for d in decisions.values()}
        assert len(ids) == 1 and None not in ids and decision.decision_id not in ids
    else:
        assert decision.decision_id is None
        assert all(d.decision_id is None for d in decisions.values())


def test_a_document_that_does_not_exist_is_an_undefined_deny(server: OpaTestServer, run_async: RunAsync[Any]) -> None:
    engine = RemoteOpaEngine(server.url + "/v1/data/no/such/rule", timeout_seconds=2.0)
    decision = closing(run_async, engine.decide(single(ALLOWED_POD, node("n1"))), engine)
    assert bare(decision) == undefined_decision()
    assert decision.undefined and not decision.allowed


def test_decision_path_can_be_given_apart_from_the_base_url(server: OpaTestServer, run_async: RunAsync[Any]) -> None:
    engine = RemoteOpaEngine(server.url, decision_path="kubernetes/authz", timeout_seconds=2.0)
    assert closing(run_async, engine.decide(single(ALLOWED_POD, node("n1"))), engine).allowed
    assert engine.endpoint == server.url + DECISION
    with pytest.raises(PolicyError, match="another document"):
        RemoteOpaEngine(server.url + "/v1/data/other", decision_path="kubernetes/authz", timeout_seconds=1.0)


def test_an_evaluation_error_is_a_policy_error_with_opas_code(server: OpaTestServer, run_async: RunAsync[Any]) -> None:
    server.put_policy("broken.rego", "package broken\n\nimport rego.v1\n\nallow if to_number(input.n) > 1\n")
    engine = RemoteOpaEngine(server.url + "/v1/data/broken/allow", timeout_seconds=2.0)

    async def scenario() -> OpaHttpError:
        assert (await engine.decide({"n": "2"})).allowed
        with pytest.raises(OpaHttpError) as caught:
            await engine.decide({"n": "two"})
        return caught.value

    error = closing(run_async, scenario(), engine)
    assert error.status == 500
    assert error.code == "internal_error"
    assert "internal_error" in str(error)
    assert "answered POST /v1/data/broken/allow with 500" in str(error)


# ---------------------------------------------------------------------------------------------- faults

FAULTS = [
    pytest.param({"undefined": True}, None, id="undefined-is-an-undefined-deny"),
    pytest.param({"non_boolean": True}, "string", id="non-boolean-result-is-an-error"),
    pytest.param({"usage_warning": True}, "input", id="api-usage-warning-is-an-error"),
    pytest.param({"status_code": 500}, "500.*internal_error: injected fault", id="http-500-is-an-error-with-opa-code"),
    pytest.param({"status_code": 400}, "400.*invalid_parameter", id="http-400-is-an-error-with-opa-code"),
    pytest.param({"reset_connection": True}, "reset the connection", id="connection-reset-is-an-error"),
]


@pytest.mark.parametrize(("faults", "error"), FAULTS)
def test_single_decision_faults(
    server: OpaTestServer,
    engine: RemoteOpaEngine,
    faults: dict[str, Any],
    error: str | None,
    run_async: RunAsync[None],
) -> None:
    async def scenario() -> None:
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed  # the same call works without the fault
        for name, value in faults.items():
            setattr(server.faults, name, value)
        if error is None:
            assert bare(await engine.decide(single(ALLOWED_POD, node("n1")))) == undefined_decision()
        else:
            with pytest.raises(PolicyError, match=error):
                await engine.decide(single(ALLOWED_POD, node("n1")))

    closing(run_async, scenario(), engine)


@pytest.mark.parametrize(("faults", "error"), FAULTS)
def test_batch_faults(
    server: OpaTestServer,
    engine: RemoteOpaEngine,
    faults: dict[str, Any],
    error: str | None,
    run_async: RunAsync[None],
) -> None:
    nodes = [node("n1"), node("n2")]

    async def scenario() -> None:
        assert all(d.allowed for d in (await batch(engine, ALLOWED_POD, nodes)).values())
        for name, value in faults.items():
            setattr(server.faults, name, value)
        if error is None:
            # The generated rule is always defined: an undefined answer means the module is gone, not a deny.
            with pytest.raises(PolicyError, match="no longer serves kubesched's batch module"):
                await batch(engine, ALLOWED_POD, nodes)
        else:
            with pytest.raises(PolicyError, match="object keyed by node name" if error == "string" else error):
                await batch(engine, ALLOWED_POD, nodes)

    closing(run_async, scenario(), engine)


def test_http_error_keeps_status_code_and_message(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[Any]
) -> None:
    server.faults.status_code = 500

    async def scenario() -> OpaHttpError:
        with pytest.raises(OpaHttpError) as caught:
            await engine.decide({})
        return caught.value

    error = closing(run_async, scenario(), engine)
    assert (error.status, error.code, error.opa_message) == (500, "internal_error", "injected fault")


def causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def test_library_exceptions_are_chained_not_leaked(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[Any]
) -> None:
    server.faults.reset_connection = True

    async def scenario() -> OpaTransportError:
        with pytest.raises(OpaTransportError) as caught:
            await engine.decide({})
        return caught.value

    error = closing(run_async, scenario(), engine)
    assert isinstance(error.__cause__, ConnectionClosed)  # the transport's exception, chained
    assert any(isinstance(cause, ConnectionResetError) for cause in causes(error))  # and what it was made of
    assert not error.timed_out
    assert f"OPA at {server.url} reset the connection while waiting for the answer (POST {DECISION})" == str(error)


def test_connection_refused_is_a_policy_error(run_async: RunAsync[None]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = RemoteOpaEngine(f"http://127.0.0.1:{port}{DECISION}", timeout_seconds=1.0)

    async def scenario() -> None:
        with pytest.raises(OpaTransportError, match=f"OPA at http://127.0.0.1:{port} refused the connection"):
            await engine.decide({})

    closing(run_async, scenario(), engine)


@pytest.mark.parametrize(
    "payload",
    [pytest.param({"bad": {1, 2}}, id="a-set-is-not-json"), pytest.param({"bad": float("nan")}, id="nan-is-not-json")],
)
def test_input_that_is_not_json_is_a_policy_error(
    engine: RemoteOpaEngine, payload: dict[str, Any], run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        with pytest.raises(PolicyError, match="cannot be sent as JSON"):
            await engine.decide(payload)

    closing(run_async, scenario(), engine)


def test_a_closed_engine_refuses_calls(server: OpaTestServer, run_async: RunAsync[None]) -> None:
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=1.0)
    never_used = RemoteOpaEngine(server.url + DECISION, timeout_seconds=1.0)

    async def scenario() -> None:
        await engine.decide({})
        await engine.aclose()
        await engine.aclose()  # idempotent
        with pytest.raises(PolicyError, match="closed"):
            await engine.decide({})
        with pytest.raises(PolicyError, match="closed"):
            await batch(engine, ALLOWED_POD, [node("a")])
        await never_used.aclose()
        with pytest.raises(PolicyError, match="closed"):
            await never_used.decide({})

    run_async(scenario())
    assert server.requests == 1


def test_the_client_is_made_in_the_loop_and_bound_to_it(server: OpaTestServer, run_async: RunAsync[None]) -> None:
    async def scenario() -> None:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)  # built inside the loop this time
        try:
            assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
            with pytest.raises(PolicyError, match="bound to the event loop"):
                # Another loop, in a worker thread: the pool's connections belong to this one.
                await asyncio.to_thread(asyncio.run, engine.decide({}))
            assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
        finally:
            await engine.aclose()

    run_async(scenario())
    assert server.requests == 2


@pytest.mark.parametrize(
    ("endpoint", "options", "error"),
    [
        pytest.param("ftp://opa/v1/data/x", {}, "http:// or https://", id="ftp-scheme"),
        pytest.param("http://opa:8181/v0/data/x", {}, "v1 Data API", id="v0-api"),
        pytest.param("http://opa:8181/v1/data/", {}, "v1 Data API", id="no-document"),
        pytest.param("http://opa:8181/v1/data/x", {"timeout_seconds": 0}, "positive", id="zero-timeout"),
        pytest.param("http://opa:8181/v1/data/x", {"pool_size": 0}, "pool_size", id="zero-pool"),
        pytest.param("http://opa:8181/v1/data/x", {"refresh_seconds": -1}, "zero or more", id="negative-refresh"),
        pytest.param("http://opa:8181/v1/data/x", {"ca_file": "/ca.pem"}, "not https", id="ca-file-on-http"),
        pytest.param(
            "http://opa:8181/v1/data/x",
            {"batch_endpoint": "http://other:8181/v1/data/b"},
            "same server",
            id="batch-endpoint-elsewhere",
        ),
        pytest.param("https://opa/v1/data/x", {"ca_file": "/no/such/ca.pem"}, "CA bundle", id="missing-ca-file"),
    ],
)
def test_configuration_errors_are_policy_errors(endpoint: str, options: dict[str, Any], error: str) -> None:
    arguments: dict[str, Any] = {"timeout_seconds": 1.0, **options}
    with pytest.raises(PolicyError, match=error):
        RemoteOpaEngine(endpoint, **arguments)


# -------------------------------------------------------------------------------------------- deadline


def test_deadline_cuts_a_slow_answer_short(server: OpaTestServer, run_async: RunAsync[Any]) -> None:
    server.faults.delay_seconds = 2.0
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=0.2)

    async def scenario() -> tuple[OpaTransportError, int, int]:
        answered_before = server.answered
        with pytest.raises(OpaTransportError, match=r"timed out after 0\.2s while waiting for the answer") as caught:
            await engine.decide(single(ALLOWED_POD, node("n1")))
        return caught.value, answered_before, server.answered

    error, answered_before, answered_at_return = closing(run_async, scenario(), engine)
    assert error.timed_out
    assert isinstance(error.__cause__, TimeoutError)
    assert str(error).endswith(f"(POST {DECISION})")
    assert server.requests >= 1 and answered_at_return == answered_before  # we left before the server answered


def test_deadline_covers_the_batch_module_install_and_the_query_together(
    server: OpaTestServer, run_async: RunAsync[Any]
) -> None:
    # Every request takes 0.4 s: each fits in the 1 s deadline alone, the GET, PUT and POST of a first batch call
    # do not together. Which request the deadline cuts (the last, unanswered) shows that it bounds the whole call.
    server.faults.delay_seconds = 0.4
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=1.0)

    async def scenario() -> tuple[OpaTransportError, int]:
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed  # one request fits in the deadline
        with pytest.raises(OpaTransportError) as caught:
            await batch(engine, ALLOWED_POD, [node("a")])
        return caught.value, server.answered

    error, answered_at_return = closing(run_async, scenario(), engine)
    assert error.timed_out
    assert "timed out after 1s while waiting for the answer (POST /v1/data/kubesched/batch/node_decisions)" in str(
        error
    )
    assert [r.method for r in server.request_log()] == ["POST", "GET", "PUT", "POST"]
    assert answered_at_return == 3, "the GET and PUT were answered, the last POST was not"


class ScriptedServer:
    """A raw TCP server that answers every connection with ``script(connection)``; real sockets, no HTTP library."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self._script = script
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stopping = threading.Event()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            if self._stopping.is_set():
                connection.close()
                return
            with connection:
                connection.settimeout(5)
                with contextlib.suppress(OSError):
                    self._script(connection)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError), socket.create_connection(self._listener.getsockname(), timeout=5):
            pass  # wakes accept()
        self._thread.join(timeout=10)
        self._listener.close()


def read_request(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head


def test_deadline_bounds_the_whole_call_even_when_the_answer_trickles_in(run_async: RunAsync[Any]) -> None:
    answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"result": true}'
    stopped = threading.Event()

    sent: list[int] = []

    def trickle(connection: socket.socket) -> None:
        read_request(connection)
        for byte in answer:  # one byte every 20 ms: every single read is quick, the whole answer is not
            if stopped.wait(0.02):
                return
            connection.sendall(bytes([byte]))
            sent.append(byte)

    with ScriptedServer(trickle) as scripted:
        engine = RemoteOpaEngine(scripted.url + DECISION, timeout_seconds=0.3)

        async def scenario() -> tuple[OpaTransportError, int]:
            with pytest.raises(OpaTransportError, match=r"timed out after 0\.3s") as caught:
                await engine.decide({})
            return caught.value, len(sent)

        try:
            error, sent_at_return = closing(run_async, scenario(), engine)
        finally:
            stopped.set()
    assert error.timed_out
    # A per-read timeout alone would have waited for the whole answer, each byte arriving well within it.
    assert sent_at_return < len(answer), "the call gave up while the answer was still arriving"


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nnot json", "not JSON", id="body-not-json"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n[1]\n", "not an object", id="body-not-object"),
        pytest.param(b"SMTP ready\r\n\r\n", "malformed HTTP answer", id="not-http"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", "middle of the answer", id="cut-short"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 10", "middle of the answer", id="cut-in-the-head"),
        pytest.param(b"", "closed the connection without answering", id="closed-without-answer"),
        pytest.param(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad", "502 Bad Gateway", id="http-502"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope",
            "malformed HTTP answer",
            id="bad-gzip",
        ),
    ],
)
def test_broken_answers_are_policy_errors(answer: bytes, error: str, run_async: RunAsync[None]) -> None:
    def reply(connection: socket.socket) -> None:
        read_request(connection)
        connection.sendall(answer)

    with ScriptedServer(reply) as scripted:
        engine = RemoteOpaEngine(scripted.url + DECISION, timeout_seconds=2.0)

        async def scenario() -> None:
            with pytest.raises(PolicyError, match=error) as caught:
                await engine.decide({})
            assert str(caught.value).startswith(f"OPA at {scripted.url}")
            assert str(caught.value).endswith(f"(POST {DECISION})") or "answered" in str(caught.value)

        closing(run_async, scenario(), engine)
    assert engine.stale_retries == 0  # each answer came on a connection opened for it: nothing is sent twice


# ------------------------------------------------------------------------------------------ the wire


def test_the_data_api_request_on_the_wire(run_async: RunAsync[Decision]) -> None:
    seen: list[bytes] = []

    def record(connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        while len(body) < 20:
            body += connection.recv(65536)
        seen.extend([head, body])
        connection.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{"result": true}')

    with ScriptedServer(record) as scripted:
        engine = RemoteOpaEngine(scripted.url + DECISION, timeout_seconds=2.0)
        decision = closing(run_async, engine.decide({"pod": {}}), engine)
    assert decision.allowed
    head, body = seen
    request_line, *header_lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    assert request_line == f"POST {DECISION}?strict-builtin-errors=true&provenance=true HTTP/1.1"
    assert body == b'{"input":{"pod":{}}}'
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(body))
    assert headers["user-agent"].startswith("kubesched/")
    assert headers["accept-encoding"] == "identity"
    assert "cookie" not in headers and "authorization" not in headers


def test_proxy_variables_of_the_environment_are_ignored(
    server: OpaTestServer, run_async: RunAsync[Decision], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, nowhere)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)
    assert closing(run_async, engine.decide(single(ALLOWED_POD, node("n1"))), engine).allowed
    assert server.requests == 1


def test_a_host_name_that_does_not_resolve_is_a_policy_error(run_async: RunAsync[None]) -> None:
    engine = RemoteOpaEngine("http://opa.invalid:8181" + DECISION, timeout_seconds=5.0)

    async def scenario() -> None:
        with pytest.raises(OpaTransportError, match=r"opa\.invalid:8181: cannot resolve the host name") as caught:
            await engine.decide({})
        assert isinstance(caught.value.__cause__, socket.gaierror)
        assert str(caught.value).endswith(f"(POST {DECISION})")

    closing(run_async, scenario(), engine)


# ------------------------------------------------------------------------------------------ keep-alive


def test_many_calls_share_one_keep_alive_connection(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        for _ in range(50):
            assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed

    closing(run_async, scenario(), engine)
    assert server.requests == 50
    assert server.connections == 1
    assert engine.connections_opened == 1
    assert {r.connection for r in server.request_log()} == {1}


def test_tcp_nodelay_is_set_on_the_socket_of_the_connection_to_the_server(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[Any]
) -> None:
    async def scenario() -> list[remote.PooledConnection]:
        await engine.decide({})
        return engine.pooled_connections()

    pooled = closing(run_async, scenario(), engine)
    assert len(pooled) == 1
    assert pooled[0].nodelay  # read with getsockopt from the client's socket
    assert pooled[0].tls_version is None
    assert [r.client_port for r in server.request_log()] == [pooled[0].local_port]  # the very connection served


def nodelay_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make asyncio leave TCP_NODELAY off where its transports would turn it on."""

    def off(sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)

    monkeypatch.setattr("asyncio.base_events._set_nodelay", off)


def test_a_request_goes_out_in_one_write_so_no_delayed_ack_stalls_it(
    server: OpaTestServer,
    run_async: RunAsync[tuple[list[int], list[remote.PooledConnection]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without TCP_NODELAY a request written as head, then body, waits for the server's delayed ACK (~40 ms)
    # before the body leaves; written at once, it does not wait even then. Counted on the client's transports:
    # one write (or writelines) per request.
    nodelay_off(monkeypatch)
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)
    client_thread = threading.get_ident()
    writes: list[str] = []
    transport_class = asyncio.selector_events._SelectorSocketTransport  # type: ignore[attr-defined]
    for method in ("write", "writelines"):
        original = getattr(transport_class, method)

        def counted(self: asyncio.Transport, data: Any, _original: Any = original, _method: str = method) -> None:
            if threading.get_ident() == client_thread:  # not the server's answers, on its own thread
                writes.append(_method)
            _original(self, data)

        monkeypatch.setattr(transport_class, method, counted)

    async def scenario() -> tuple[list[int], list[remote.PooledConnection]]:
        await engine.decide(single(ALLOWED_POD, node("n1")))
        per_request = []
        for _ in range(5):
            writes.clear()
            assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
            per_request.append(len(writes))
        return per_request, engine.pooled_connections()

    per_request, pooled = closing(run_async, scenario(), engine)
    assert [connection.nodelay for connection in pooled] == [False]  # the socket really was without it
    assert per_request == [1] * 5
    assert engine.connections_opened == 1


def test_a_reused_connection_closed_by_the_server_is_retried_once(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        await engine.decide({})
        server.faults.reset_requests = 1  # the next request on the kept-alive connection is dropped unanswered
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed

    closing(run_async, scenario(), engine)
    assert engine.stale_retries == 1
    assert server.requests == 3
    assert server.connections == 2
    assert engine.connections_opened == 2


def test_a_reused_connection_is_retried_only_once(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        await engine.decide({})
        server.faults.reset_connection = True
        with pytest.raises(OpaTransportError, match="reset"):
            await engine.decide({})

    closing(run_async, scenario(), engine)
    assert server.requests == 3  # the first call, the request, one retry: never a third send
    assert engine.stale_retries == 1


def test_the_retry_goes_out_on_a_new_connection_not_another_idle_one(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        # Two idle connections in the pool.
        await asyncio.gather(*(engine.decide(single(ALLOWED_POD, node("n"))) for _ in range(2)))
        assert engine.connections_opened == 2
        server.faults.reset_requests = 1
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed

    closing(run_async, scenario(), engine)
    assert engine.stale_retries == 1
    assert engine.connections_opened == 3
    log = server.request_log()
    assert log[-1].connection == 3  # neither of the old connections


@pytest.mark.parametrize(
    ("partial", "error"),
    [
        pytest.param(b'HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{"res', "middle of the answer", id="in-the-body"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Len", "middle of the answer", id="in-the-head"),
        pytest.param(b"H", "middle of the answer", id="one-byte"),
        pytest.param(b"HTTP/1.1 2", "middle of the answer", id="in-the-status-line"),
    ],
)
def test_an_answer_partly_received_is_not_sent_again(partial: bytes, error: str, run_async: RunAsync[None]) -> None:
    answers = iter(
        [
            b'HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{"result": true}',
            partial,  # then the connection is closed
        ]
    )
    requests = []

    def keep_alive(connection: socket.socket) -> None:
        for answer in answers:  # both on one connection, which is closed after the second, partial, answer
            requests.append(read_request(connection))
            connection.sendall(answer)

    with ScriptedServer(keep_alive) as scripted:
        engine = RemoteOpaEngine(scripted.url + DECISION, timeout_seconds=2.0)

        async def scenario() -> None:
            assert (await engine.decide({})).allowed
            with pytest.raises(OpaTransportError, match=error):
                await engine.decide({})

        closing(run_async, scenario(), engine)
    assert len(requests) == 2
    assert engine.stale_retries == 0


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("decide", id="post"),
        # A GET or PUT is idempotent, yet not sent again on a fresh connection either.
        pytest.param("batch", id="batch-module-check"),
    ],
)
def test_a_fresh_connection_that_fails_is_not_retried(
    kind: str, server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    server.faults.reset_requests = 1

    async def scenario() -> None:
        with pytest.raises(OpaTransportError, match="reset") as caught:
            if kind == "decide":
                await engine.decide({})
            else:
                await batch(engine, ALLOWED_POD, [node("a")])
        assert ("GET /v1/policies/kubesched-batch" in str(caught.value)) == (kind == "batch")

    closing(run_async, scenario(), engine)
    assert server.requests == 1
    assert engine.stale_retries == 0


def test_a_batch_module_check_on_a_stale_connection_is_retried_once(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        await engine.decide({})
        server.faults.reset_requests = 1
        assert (await batch(engine, ALLOWED_POD, [node("a")]))["a"].allowed

    closing(run_async, scenario(), engine)
    assert [(r.method, r.connection) for r in server.request_log()] == [
        ("POST", 1),
        ("GET", 1),
        ("GET", 2),
        ("PUT", 2),
        ("POST", 2),
    ]
    assert engine.stale_retries == 1


@pytest.mark.parametrize(
    "loop_ran",
    [
        # The usual case: the loop reads the server's close of the idle connection, the pool drops it.
        pytest.param(True, id="seen-by-the-event-loop"),
        # The loop has not run since the close arrived: the pool's readability check catches it.
        pytest.param(False, id="seen-by-the-pool-before-reuse"),
    ],
)
def test_connections_to_a_restarted_opa_are_replaced_without_a_failed_request(
    loop_ran: bool, run_async: RunAsync[Any]
) -> None:
    first = OpaTestServer(policies={"authz.rego": POLICY}).start()
    servers = [first]
    engine = RemoteOpaEngine(first.url + DECISION, timeout_seconds=2.0)

    async def scenario() -> OpaTestServer:
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
        first.stop()  # closes the idle keep-alive connection
        second = OpaTestServer(policies={"authz.rego": POLICY}, port=first.port).start()
        servers.append(second)
        if loop_ran:
            await asyncio.sleep(0.05)
            assert engine.pooled_connections() == []
        else:
            assert len(engine.pooled_connections()) == 1  # still open as far as the loop knows
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
        return second

    try:
        second = closing(run_async, scenario(), engine)
    finally:
        for running in servers:
            running.stop()
    assert second.requests == 1  # the dead connection was noticed before sending, not by a failed request
    assert engine.stale_retries == 0
    assert engine.connections_opened == 2


def test_concurrent_callers_get_connections_of_their_own_up_to_the_bound(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[tuple[list[Decision], int]]
) -> None:
    server.faults.delay_seconds = 0.05  # long enough for every caller to be waiting at once

    async def many() -> tuple[list[Decision], int]:
        calls = [engine.decide(single(ALLOWED_POD if i % 2 else FORBIDDEN_POD, node("n"))) for i in range(16)]
        decisions = list(await asyncio.gather(*calls))
        return decisions, len(engine.pooled_connections())

    decisions, idle = closing(run_async, many(), engine)
    assert [d.allowed for d in decisions] == [bool(i % 2) for i in range(16)]
    assert server.requests == 16
    bound = remote.DEFAULT_MAX_CONCURRENT_REQUESTS
    assert server.most_in_flight == bound  # never more, and every request in flight on a connection of its own
    assert engine.connections_opened == server.connections == bound  # the second eight reused the first's
    assert idle == remote.DEFAULT_POOL_SIZE  # then only pool_size stay open


@pytest.mark.parametrize("kind", ["decide", "batch"])
def test_at_most_max_concurrent_requests_reach_the_server_at_once(kind: str, run_async: RunAsync[Any]) -> None:
    with OpaTestServer(policies={"authz.rego": POLICY}) as server:
        server.faults.delay_seconds = 0.1
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=5.0, max_concurrent_requests=2)

        async def ask(index: int) -> bool:
            if kind == "decide":
                return (await engine.decide(single(ALLOWED_POD, node(f"n{index}")))).allowed
            return (await batch(engine, ALLOWED_POD, [node(f"n{index}")]))[f"n{index}"].allowed

        async def many() -> list[bool]:
            return list(await asyncio.gather(*(ask(index) for index in range(7))))

        answers = closing(run_async, many(), engine)
        assert answers == [True] * 7  # every caller answered, none timed out
        assert server.most_in_flight == 2
        assert server.requests == 7 + 2 * (kind == "batch")  # and the batch module's GET and PUT
        assert engine.connections_opened <= 2


def test_the_wait_for_a_turn_counts_in_the_deadline(run_async: RunAsync[list[BaseException | Decision]]) -> None:
    with OpaTestServer(policies={"authz.rego": POLICY}) as server:
        server.faults.delay_seconds = 0.3
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=0.45, max_concurrent_requests=1)

        async def two() -> list[BaseException | Decision]:
            calls = [engine.decide(single(ALLOWED_POD, node("n"))) for _ in range(2)]
            return list(await asyncio.gather(*calls, return_exceptions=True))

        first, second = closing(run_async, two(), engine)
    assert isinstance(first, Decision) and first.allowed
    assert isinstance(second, OpaTransportError) and second.timed_out
    assert "timed out after 0.45s while waiting for the answer" in str(second)
    assert server.requests == 2  # its turn came after 0.3 s, and 0.15 s was not enough


def test_concurrent_batches_install_the_module_once(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[list[dict[str, Decision]]]
) -> None:
    async def many() -> list[dict[str, Decision]]:
        calls = [batch(engine, ALLOWED_POD, [node("a"), node("b", compliant="false")]) for _ in range(8)]
        return list(await asyncio.gather(*calls))

    answers = closing(run_async, many(), engine)
    expected = {"a": Decision(True), "b": Decision(False, ("node is not compliant",))}
    assert all(bare_all(answer) == expected for answer in answers)
    assert [r.method for r in server.request_log()].count("PUT") == 1


# ---------------------------------------------------------------------------------------------- tokens


def write_token(path: Path, token: str) -> None:
    """Replace the file the way the kubelet rotates a projected token: write aside, then rename over."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(token + "\n")
    os.replace(staged, path)


def test_token_is_sent_and_re_read_at_most_once_a_second_after_rotation(
    tmp_path: Path, run_async: RunAsync[None]
) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "first")
    clock = VirtualClock()
    with OpaTestServer(policies={"authz.rego": POLICY}) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file), clock=clock)

        async def scenario() -> None:
            await engine.decide({})
            write_token(token_file, "second")
            await engine.decide({})  # within the second: the file is not looked at again
            clock.advance(1.0)
            await engine.decide({})
            clock.advance(5.0)
            await engine.decide({})

        closing(run_async, scenario(), engine)
        sent = [r.authorization for r in server.request_log()]
    assert sent == ["Bearer first", "Bearer first", "Bearer second", "Bearer second"]


def test_the_token_file_is_read_off_the_event_loop(
    tmp_path: Path, server: OpaTestServer, run_async: RunAsync[None], monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "t")
    readers: list[int] = []
    real_open = open

    def watching_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(token_file):
            readers.append(threading.get_ident())
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watching_open)
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file))

    async def scenario() -> None:
        await engine.decide({})
        assert readers and threading.get_ident() not in readers

    closing(run_async, scenario(), engine)


def test_a_401_makes_the_next_call_re_read_the_token(tmp_path: Path, run_async: RunAsync[None]) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "old")
    clock = VirtualClock()
    with OpaTestServer(policies={"authz.rego": POLICY}, token="new") as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file), clock=clock)

        async def scenario() -> None:
            with pytest.raises(OpaHttpError, match=r"401.*unauthorized") as caught:
                await engine.decide({})
            assert caught.value.status == 401
            write_token(token_file, "new")
            # no clock advance needed after a 401
            assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed

        closing(run_async, scenario(), engine)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        pytest.param(None, "cannot read the OPA token file", id="missing-file"),
        pytest.param("  \n", "is empty", id="empty-file"),
        pytest.param("two tokens", "more than one token", id="whitespace-inside"),
    ],
)
def test_unusable_token_files_are_policy_errors(
    tmp_path: Path, content: str | None, error: str, run_async: RunAsync[None]
) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    with OpaTestServer(policies={"authz.rego": POLICY}) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file))

        async def scenario() -> None:
            for _ in range(2):  # and again at the next call: an unusable file is never remembered as a token
                with pytest.raises(PolicyError, match=error):
                    await engine.decide({})

        closing(run_async, scenario(), engine)
        assert server.requests == 0


# ------------------------------------------------------------------------------------------------- TLS


def _certificates_with_openssl(directory: Path) -> tuple[Path, Path, Path]:
    ca_key, ca_file = directory / "ca.key", directory / "ca.pem"
    key_file, csr, cert_file = directory / "tls.key", directory / "tls.csr", directory / "tls.crt"
    extensions = directory / "server.ext"
    extensions.write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nbasicConstraints=CA:FALSE\n"
    )

    def run(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], check=True, capture_output=True, timeout=60)

    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(ca_key))
    run(
        "req", "-x509", "-new", "-key", str(ca_key), "-subj", "/CN=kubesched test CA", "-days", "1",
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        "-out", str(ca_file),
    )  # fmt: skip
    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key_file))
    run("req", "-new", "-key", str(key_file), "-subj", "/CN=opa", "-out", str(csr))
    run(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_file), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "1", "-extfile", str(extensions), "-out", str(cert_file),
    )  # fmt: skip
    return ca_file, cert_file, key_file


def _has_cryptography() -> bool:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return False
    return True


CERTIFICATE_MAKERS = [
    pytest.param(
        write_server_certificates,
        id="cryptography",
        marks=pytest.mark.skipif(not _has_cryptography(), reason="the cryptography package is not installed"),
    ),
    pytest.param(
        _certificates_with_openssl,
        id="openssl-cli",
        marks=pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command on PATH"),
    ),
]


@pytest.mark.parametrize("make_certificates", CERTIFICATE_MAKERS)
def test_tls_with_a_ca_bundle(
    tmp_path: Path, make_certificates: Callable[[Path], tuple[Path, Path, Path]], run_async: RunAsync[None]
) -> None:
    ca_file, cert_file, key_file = make_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    with OpaTestServer(policies={"authz.rego": POLICY}, ssl_context=context) as server:
        assert server.url.startswith("https://")
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=5.0, ca_file=str(ca_file))
        untrusting = RemoteOpaEngine(server.url + DECISION, timeout_seconds=5.0)

        async def scenario() -> None:
            for _ in range(3):
                assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
            assert server.connections == 1
            (pooled,) = engine.pooled_connections()
            assert pooled.tls_version is not None and pooled.tls_version.startswith("TLS")
            assert pooled.nodelay
            with pytest.raises(OpaTransportError, match="certificate verification failed"):
                await untrusting.decide({})

        closing(run_async, scenario(), engine, untrusting)


# ----------------------------------------------------------------------------------------------- batch


def test_batch_installs_the_module_once_and_makes_one_request_per_pod(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[dict[str, Decision]]
) -> None:
    nodes = [node(f"n{i}", compliant="false" if i % 3 == 0 else "true") for i in range(100)]

    async def scenario() -> dict[str, Decision]:
        for pod in (ALLOWED_POD, FORBIDDEN_POD, ALLOWED_POD):
            decisions = await batch(engine, pod, nodes)
            assert list(decisions) == [n["metadata"]["name"] for n in nodes]
        return decisions

    decisions = closing(run_async, scenario(), engine)
    assert [name for name, d in decisions.items() if not d.allowed] == [f"n{i}" for i in range(0, 100, 3)]
    assert decisions["n0"].reasons == ("node is not compliant",)
    log = [(r.method, r.path) for r in server.request_log()]
    module = "/v1/policies/kubesched-batch"
    assert log == [("GET", module), ("PUT", module)] + [("POST", "/v1/data/kubesched/batch/node_decisions")] * 3


def test_batch_answers_are_those_of_single_decisions(server: OpaTestServer, run_async: RunAsync[Any]) -> None:
    nodes = [node("a", zone="a"), node("b", zone="b"), node("c")]
    engine = RemoteOpaEngine(server.url + "/v1/data/zoned/allow", timeout_seconds=2.0)

    async def scenario() -> tuple[dict[str, Decision], dict[str, Decision]]:
        decisions = await batch(engine, ALLOWED_POD, nodes)
        singles = {n["metadata"]["name"]: await engine.decide(single(ALLOWED_POD, n)) for n in nodes}
        return decisions, singles

    decisions, singles = closing(run_async, scenario(), engine)
    assert decisions == singles  # revisions included: nothing changed in between
    assert bare_all(decisions) == {"a": Decision(True), "b": Decision(False), "c": undefined_decision()}


def test_batch_for_clusters_installs_its_own_module(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[dict[str, Decision]]
) -> None:
    clusters = [node("east"), node("west", compliant="false")]
    decisions = closing(
        run_async,
        engine.decide_batch(ALLOWED_POD, clusters, target_kind="cluster", operation="schedule", time="t"),
        engine,
    )
    assert set(decisions) == {"east", "west"}
    assert ("PUT", f"/v1/policies/{batch_module_id('cluster')}") in [(r.method, r.path) for r in server.request_log()]


def test_configured_batch_endpoint_is_used_without_installing(
    server: OpaTestServer, run_async: RunAsync[dict[str, Decision]]
) -> None:
    server.put_policy("mine.rego", batch_module("kubernetes/authz").replace("kubesched.batch", "team.batch"))
    engine = RemoteOpaEngine(
        server.url + DECISION,
        timeout_seconds=2.0,
        batch_endpoint=server.url + "/v1/data/team/batch/{target_kind}_decisions",
    )
    decisions = closing(run_async, batch(engine, ALLOWED_POD, [node("a"), node("b", compliant="false")]), engine)
    assert bare_all(decisions) == {"a": Decision(True), "b": Decision(False, ("node is not compliant",))}
    assert [(r.method, r.path) for r in server.request_log()] == [("POST", "/v1/data/team/batch/node_decisions")]


def test_a_refused_install_says_to_configure_batch_endpoint_and_is_not_repeated(run_async: RunAsync[None]) -> None:
    clock = VirtualClock()
    with OpaTestServer(policies={"authz.rego": POLICY}, owning_bundle="authz") as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock)

        async def scenario() -> None:
            for _ in range(2):
                with pytest.raises(PolicyError, match="batchEndpoint") as caught:
                    await batch(engine, ALLOWED_POD, [node("a")])
            assert "owned by bundle" in str(caught.value)
            assert isinstance(caught.value.__cause__, OpaHttpError)
            assert server.requests == 2  # GET, PUT: the refusal is remembered for a while
            clock.advance(60)
            with pytest.raises(PolicyError, match="batchEndpoint"):
                await batch(engine, ALLOWED_POD, [node("a")])
            assert server.requests == 4

        closing(run_async, scenario(), engine)


FORGED_BATCH_MODULE = """package kubesched.batch

import rego.v1

node_decisions[target.metadata.name] := true if some target in input.nodes
"""


def test_a_bundled_module_that_is_ours_needs_no_write_access(run_async: RunAsync[dict[str, Decision]]) -> None:
    ours = batch_module("kubernetes/authz", "node")
    policies = {"authz.rego": POLICY, "kubesched-batch": ours}
    with OpaTestServer(policies=policies, owning_bundle="authz") as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)
        decisions = closing(run_async, batch(engine, ALLOWED_POD, [node("a"), node("b", compliant="false")]), engine)
        assert bare_all(decisions) == {"a": Decision(True), "b": Decision(False, ("node is not compliant",))}
        log = [(r.method, r.path) for r in server.request_log()]
    assert log == [("GET", "/v1/policies/kubesched-batch"), ("POST", "/v1/data/kubesched/batch/node_decisions")]


def test_a_forged_module_is_not_trusted_when_it_cannot_be_replaced(run_async: RunAsync[None]) -> None:
    policies = {"authz.rego": POLICY, "kubesched-batch": FORGED_BATCH_MODULE}
    with OpaTestServer(policies=policies, owning_bundle="authz") as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0)

        async def scenario() -> None:
            with pytest.raises(PolicyError, match=r"is not kubesched's batch module .*its content differs"):
                await batch(engine, ALLOWED_POD, [node("b", compliant="false")])

        closing(run_async, scenario(), engine)
        assert not any(r.method == "POST" for r in server.request_log())


def test_a_forged_module_is_replaced_at_first_use_and_when_rechecked(
    run_async: RunAsync[None], caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    with OpaTestServer(policies={"authz.rego": POLICY, "kubesched-batch": FORGED_BATCH_MODULE}) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock, refresh_seconds=10)
        denied = node("b", compliant="false")

        async def scenario() -> None:
            assert not (await batch(engine, ALLOWED_POD, [denied]))["b"].allowed
            await asyncio.to_thread(put_policy, server, "kubesched-batch", FORGED_BATCH_MODULE)
            clock.advance(5)  # within the check interval: the module is trusted as checked
            assert (await batch(engine, ALLOWED_POD, [denied]))["b"].allowed
            clock.advance(6)  # checked again: forged, so replaced before the pod is decided
            assert not (await batch(engine, ALLOWED_POD, [denied]))["b"].allowed

        closing(run_async, scenario(), engine)
        puts = [r for r in server.request_log() if r.method == "PUT"]
    assert len(puts) == 1 + 2  # ours twice, the forgery once (by the test)
    assert caplog.text.count("its content was not kubesched's batch module") == 2


def put_policy(server: OpaTestServer, module_id: str, source: str) -> None:
    import urllib.request

    request = urllib.request.Request(f"{server.url}/v1/policies/{module_id}", data=source.encode(), method="PUT")
    urllib.request.urlopen(request, timeout=5).close()


def test_a_module_that_does_not_compile_is_refused_with_opas_error_shape(server: OpaTestServer) -> None:
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        server.url + "/v1/policies/bad", data=b"package bad\n\nx := nope(1)\n", method="PUT"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    body = json.loads(caught.value.read())
    caught.value.close()
    assert caught.value.code == 400
    assert body["code"] == "invalid_parameter"
    assert body["message"] == "error(s) occurred while compiling module(s)"
    assert "nope" in body["errors"][0]["message"]


def delete_policy(server: OpaTestServer, module_id: str) -> None:
    import urllib.request

    request = urllib.request.Request(f"{server.url}/v1/policies/{module_id}", method="DELETE")
    urllib.request.urlopen(request, timeout=5).close()


def test_a_batch_module_removed_behind_our_back_is_reinstalled(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[None]
) -> None:
    async def scenario() -> None:
        assert (await batch(engine, ALLOWED_POD, [node("a")]))["a"].allowed
        revision = await engine.refresh()
        await asyncio.to_thread(delete_policy, server, "kubesched-batch")
        # Not the policy's answer, so nothing a cache could keep as one: a failure, for the failure policy.
        with pytest.raises(PolicyError, match="no longer serves kubesched's batch module"):
            await batch(engine, ALLOWED_POD, [node("a")])
        assert (await batch(engine, ALLOWED_POD, [node("a")]))["a"].allowed  # and healed at the next call
        assert engine.revision() == revision, "kubesched's own module is no change of the policy"

    closing(run_async, scenario(), engine)
    puts = [r for r in server.request_log() if r.method == "PUT"]
    assert len(puts) == 2


def test_a_target_without_a_name_is_a_policy_error(engine: RemoteOpaEngine, run_async: RunAsync[None]) -> None:
    async def scenario() -> None:
        with pytest.raises(PolicyError, match=r"no metadata\.name"):
            await batch(engine, ALLOWED_POD, [{"metadata": {}}])

    closing(run_async, scenario(), engine)


# -------------------------------------------------------------------------------------------- revision


def test_revision_without_bundles_is_a_digest_of_opas_modules_refreshed_within_the_bound(
    server: OpaTestServer, run_async: RunAsync[None]
) -> None:
    clock = VirtualClock()
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock, refresh_seconds=2)

    def policy_reads() -> int:
        return sum(1 for r in server.request_log() if (r.method, r.path) == ("GET", "/v1/policies"))

    async def scenario() -> None:
        assert engine.revision() == "unreported:0", "nothing heard from OPA yet"
        first = await engine.refresh()
        assert first.startswith("policies:") and engine.revision() == first
        await batch(engine, ALLOWED_POD, [node("a")])  # installs kubesched's batch module
        clock.advance(2)
        assert await engine.refresh() == first, "kubesched's own batch module is not a change of the policy"
        await asyncio.to_thread(put_policy, server, "zoned.rego", ZONED + "\n# changed\n")
        clock.advance(1.9)
        assert await engine.refresh() == first, "within the bound, what OPA reported last is trusted"
        reads = policy_reads()
        clock.advance(0.1)
        second = await engine.refresh()
        assert second.startswith("policies:") and second != first
        assert policy_reads() == reads + 1
        decision = await engine.decide(single(ALLOWED_POD, node("n1")))
        assert decision.revision == second, "a decision names the revision OPA reported"

    closing(run_async, scenario(), engine)


def test_a_forged_batch_module_counts_as_a_change_of_the_policy(
    server: OpaTestServer, run_async: RunAsync[None]
) -> None:
    clock = VirtualClock()
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock, refresh_seconds=1)

    async def scenario() -> None:
        await batch(engine, ALLOWED_POD, [node("a")])
        ours = await engine.refresh()
        await asyncio.to_thread(put_policy, server, "kubesched-batch", FORGED_BATCH_MODULE)
        clock.advance(1)
        assert await engine.refresh() != ours

    closing(run_async, scenario(), engine)


def test_revision_names_opas_bundle_revisions_and_refresh_reads_them(run_async: RunAsync[None]) -> None:
    clock = VirtualClock()
    with OpaTestServer(policies={"authz.rego": POLICY}, bundle_revisions={"authz": "r1", "facts": "f7"}) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock, refresh_seconds=5)

        async def scenario() -> None:
            await engine.decide({})
            assert engine.revision() == "bundles:authz=r1,facts=f7", "from the answer's provenance"
            revision = await engine.refresh()
            assert revision.startswith("bundles:authz=r1,facts=f7;policies:")
            # A data-only bundle: no module changes, only the revision OPA reports. Nothing is decided meanwhile.
            server.bundle_revisions["facts"] = "f8"
            clock.advance(4.9)
            assert await engine.refresh() == revision
            clock.advance(0.1)
            refreshed = await engine.refresh()
            assert refreshed.startswith("bundles:authz=r1,facts=f8;policies:")
            assert refreshed.split(";")[1] == revision.split(";")[1]

        closing(run_async, scenario(), engine)
    provenance_reads = [r for r in server.request_log() if r.method == "GET" and r.path.startswith("/v1/data/")]
    assert len(provenance_reads) == 2 and all(r.query.get("provenance") == "true" for r in provenance_reads)


def test_a_revision_opa_does_not_report_moves_on_at_every_refresh(run_async: RunAsync[None]) -> None:
    clock = VirtualClock()
    # The token may ask for decisions but OPA refuses it the list of modules (as an authz policy might).
    with OpaTestServer(policies={"authz.rego": POLICY}) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock, refresh_seconds=1)

        async def scenario() -> None:
            server.faults.status_code = 403
            assert await engine.refresh() == "unreported:1"
            clock.advance(1)
            assert await engine.refresh() == "unreported:2"
            server.faults.status_code = 500
            clock.advance(1)
            with pytest.raises(PolicyError, match="500"):
                await engine.refresh()

        closing(run_async, scenario(), engine)


def test_every_decision_carries_the_revision_of_the_answer_that_made_it(run_async: RunAsync[None]) -> None:
    clock = VirtualClock()
    with OpaTestServer(policies={"authz.rego": POLICY, "zoned.rego": ZONED}, bundle_revisions={"b": "r1"}) as server:
        engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock)
        zoned = RemoteOpaEngine(server.url + "/v1/data/zoned/allow", timeout_seconds=2.0, clock=clock)

        async def scenario() -> None:
            assert (await engine.decide(single(ALLOWED_POD, node("n1")))).revision == "bundles:b=r1"
            server.bundle_revisions["b"] = "r2"
            # Not what revision() said before the call: what this very answer reported.
            before = engine.revision()
            answered = await engine.decide(single(FORBIDDEN_POD, node("n1")))
            assert (before, answered.revision) == ("bundles:b=r1", "bundles:b=r2")
            decisions = await batch(zoned, ALLOWED_POD, [node("a", zone="a"), node("c")])
            assert decisions["a"].revision == decisions["c"].revision == "bundles:b=r2"
            assert decisions["c"].undefined  # absent from the answer: undefined, with the answer's revision
            server.bundle_revisions.clear()  # OPA stops reporting bundles
            plain = await engine.decide(single(ALLOWED_POD, node("n1")))
            assert plain.revision == engine.revision() == "unreported:0"
            server.faults.undefined = True
            undefined = await engine.decide({})
            assert undefined.undefined and undefined.revision == plain.revision

        closing(run_async, scenario(), engine, zoned)


# ------------------------------------------------------------------------------------ decision contract

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
)
# Weighted towards the values a careless policy produces: null, empty collections, true, "true".
EDGE_VALUES: st.SearchStrategy[object] = st.sampled_from([None, [], {}, True, False, "true", "", 0, 1, [""], ["no"]])
DECISION_KEYS = ("allow", "allowed", "deny", "reason", "reasons", "pending")
DECISION_OBJECTS = st.fixed_dictionaries({}, optional={key: EDGE_VALUES | JSON_VALUES for key in DECISION_KEYS})


def explicitly_allows(result: object) -> bool:
    """The contract: allowed only by ``true``, an ``allow`` (else ``allowed``) that is ``true``, or - with no
    allow/allowed at all - a ``deny`` that is an empty list and no other reason."""
    if result is True:
        return True
    if not isinstance(result, dict):
        return False
    if "allow" in result:
        return result["allow"] is True
    if "allowed" in result:
        return result["allowed"] is True
    return result.get("deny") == [] and result.get("reason") in (None, []) and result.get("reasons") in (None, [])


@given(JSON_VALUES | DECISION_OBJECTS)
@example({"allow": None, "deny": []})  # allow present but null: not a boolean, must not fall back to deny
@example({"allowed": None, "deny": []})
@example({"deny": None})  # a null deny is not an empty deny
@example({"deny": [""]})  # a blank deny still denies
@example({"deny": [], "reason": ""})
@example({"deny": {}})
@example({"allow": "true"})
@example({"allow": 1})
@example({"allow": False, "allowed": True})
def test_interpret_result_allows_only_on_an_explicit_allow(result: object) -> None:
    try:
        decision = interpret_result(result)
    except PolicyError:
        return
    assert decision.allowed == explicitly_allows(result), result


@given(JSON_VALUES | DECISION_OBJECTS)
def test_interpret_result_never_allows_an_undefined_result(result: object) -> None:
    assert interpret_result(result, defined=False) == undefined_decision()


def test_an_oversized_answer_is_refused_without_being_read_whole(
    server: OpaTestServer, run_async: RunAsync[None]
) -> None:
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=5.0, max_answer_bytes=1 << 20)

    async def scenario() -> None:
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed
        server.faults.oversized_bytes = 8 << 20
        with pytest.raises(PolicyError, match=r"answer is larger than 1048576 bytes \(max_answer_bytes\)"):
            await engine.decide(single(ALLOWED_POD, node("n1")))
        server.faults.oversized_bytes = 0
        assert (await engine.decide(single(ALLOWED_POD, node("n1")))).allowed  # the next call works again

    closing(run_async, scenario(), engine)
