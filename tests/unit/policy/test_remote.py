"""RemoteOpaEngine against real HTTP: the OPA test server (regorus behind OPA's REST API) and raw sockets.

Every failure mode the remote engine must turn into a PolicyError or an UNDEFINED deny, the deadline, the
keep-alive pool (one connection for many calls, TCP_NODELAY on it, stale connections replaced), bearer
tokens that rotate, TLS with a CA bundle, one request per pod for a batch, and the revision. Nothing of
ours is mocked: the server is a real aiohttp server on 127.0.0.1 and the scripted servers are real sockets.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kubesched.clock import VirtualClock
from kubesched.framework.policy import Decision, PolicyError, undefined_decision
from kubesched.policy.contract import batch_module, interpret_result
from kubesched.policy.remote import (
    OpaHttpError,
    OpaTransportError,
    RemoteOpaEngine,
    batch_module_id,
)
from kubesched.testing.opa_server import OpaTestServer

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


def batch(engine: RemoteOpaEngine, pod: Mapping[str, Any], targets: list[dict[str, Any]]) -> dict[str, Decision]:
    return engine.decide_batch(pod, targets, target_kind="node", operation="schedule", time="2026-01-01T00:00:00Z")


@pytest.fixture
def server() -> Iterator[OpaTestServer]:
    with OpaTestServer(policies={"authz.rego": POLICY, "zoned.rego": ZONED}) as running:
        yield running


@pytest.fixture
def engine(server: OpaTestServer) -> Iterator[RemoteOpaEngine]:
    with RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0) as client:
        yield client


# --------------------------------------------------------------------------------------------- decisions


def test_decide_returns_the_policy_answer_with_reasons(engine: RemoteOpaEngine) -> None:
    assert engine.decide(single(ALLOWED_POD, node("n1"))) == Decision(True)
    denied = engine.decide(single(FORBIDDEN_POD, node("n1", compliant="false")))
    assert denied == Decision(False, ("namespace is forbidden", "node is not compliant"))


def test_every_query_asks_for_strict_builtin_errors_and_provenance(
    server: OpaTestServer, engine: RemoteOpaEngine
) -> None:
    engine.decide(single(ALLOWED_POD, node("n1")))
    batch(engine, ALLOWED_POD, [node("n1")])
    reads = [r for r in server.request_log() if r.method == "POST"]
    assert len(reads) == 2
    assert all(r.query == {"strict-builtin-errors": "true", "provenance": "true"} for r in reads)


@pytest.mark.parametrize("logging_on", [pytest.param(True, id="logging-on-keeps-id"), pytest.param(False, id="off")])
def test_decision_id_is_kept_when_opa_sends_one(logging_on: bool) -> None:
    with (
        OpaTestServer(policies={"authz.rego": POLICY}, decision_logging=logging_on) as server,
        RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0) as engine,
    ):
        decision = engine.decide(single(ALLOWED_POD, node("n1")))
        decisions = batch(engine, ALLOWED_POD, [node("n1"), node("n2")])
    assert decision.allowed
    if logging_on:
        assert decision.decision_id and len(decision.decision_id) == 36
        ids = {d.decision_id for d in decisions.values()}
        assert len(ids) == 1 and None not in ids and decision.decision_id not in ids
    else:
        assert decision.decision_id is None
        assert all(d.decision_id is None for d in decisions.values())


def test_a_document_that_does_not_exist_is_an_undefined_deny(server: OpaTestServer) -> None:
    with RemoteOpaEngine(server.url + "/v1/data/no/such/rule", timeout_seconds=2.0) as engine:
        decision = engine.decide(single(ALLOWED_POD, node("n1")))
    assert decision == undefined_decision()


def test_decision_path_can_be_given_apart_from_the_base_url(server: OpaTestServer) -> None:
    with RemoteOpaEngine(server.url, decision_path="kubernetes/authz", timeout_seconds=2.0) as engine:
        assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed
        assert engine.endpoint == server.url + DECISION
    with pytest.raises(PolicyError, match="another document"):
        RemoteOpaEngine(server.url + "/v1/data/other", decision_path="kubernetes/authz", timeout_seconds=1.0)


def test_an_evaluation_error_is_a_policy_error_with_opas_code(server: OpaTestServer) -> None:
    server.put_policy("broken.rego", "package broken\n\nimport rego.v1\n\nallow if to_number(input.n) > 1\n")
    with RemoteOpaEngine(server.url + "/v1/data/broken/allow", timeout_seconds=2.0) as engine:
        assert engine.decide({"n": "2"}).allowed
        with pytest.raises(OpaHttpError) as caught:
            engine.decide({"n": "two"})
    assert caught.value.status == 500
    assert caught.value.code == "internal_error"
    assert "internal_error" in str(caught.value)


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
    server: OpaTestServer, engine: RemoteOpaEngine, faults: dict[str, Any], error: str | None
) -> None:
    assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed  # the same call works without the fault
    for name, value in faults.items():
        setattr(server.faults, name, value)
    if error is None:
        assert engine.decide(single(ALLOWED_POD, node("n1"))) == undefined_decision()
    else:
        with pytest.raises(PolicyError, match=error):
            engine.decide(single(ALLOWED_POD, node("n1")))


@pytest.mark.parametrize(("faults", "error"), FAULTS)
def test_batch_faults(
    server: OpaTestServer, engine: RemoteOpaEngine, faults: dict[str, Any], error: str | None
) -> None:
    nodes = [node("n1"), node("n2")]
    assert all(d.allowed for d in batch(engine, ALLOWED_POD, nodes).values())
    for name, value in faults.items():
        setattr(server.faults, name, value)
    if error is None:
        undefined = batch(engine, ALLOWED_POD, nodes)
        assert undefined == {"n1": undefined_decision(), "n2": undefined_decision()}
    else:
        with pytest.raises(PolicyError, match="object keyed by node name" if error == "string" else error):
            batch(engine, ALLOWED_POD, nodes)


def test_http_error_keeps_status_code_and_message(server: OpaTestServer, engine: RemoteOpaEngine) -> None:
    server.faults.status_code = 500
    with pytest.raises(OpaHttpError) as caught:
        engine.decide({})
    error = caught.value
    assert (error.status, error.code, error.opa_message) == (500, "internal_error", "injected fault")


def test_library_exceptions_are_chained_not_leaked(server: OpaTestServer, engine: RemoteOpaEngine) -> None:
    server.faults.reset_connection = True
    with pytest.raises(OpaTransportError) as caught:
        engine.decide({})
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert not caught.value.timed_out


def test_connection_refused_is_a_policy_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        RemoteOpaEngine(f"http://127.0.0.1:{port}{DECISION}", timeout_seconds=1.0) as engine,
        pytest.raises(OpaTransportError, match="refused the connection"),
    ):
        engine.decide({})


@pytest.mark.parametrize(
    "payload",
    [pytest.param({"bad": {1, 2}}, id="a-set-is-not-json"), pytest.param({"bad": float("nan")}, id="nan-is-not-json")],
)
def test_input_that_is_not_json_is_a_policy_error(engine: RemoteOpaEngine, payload: dict[str, Any]) -> None:
    with pytest.raises(PolicyError, match="cannot be sent as JSON"):
        engine.decide(payload)


def test_a_closed_engine_refuses_calls(server: OpaTestServer) -> None:
    engine = RemoteOpaEngine(server.url + DECISION, timeout_seconds=1.0)
    engine.decide({})
    engine.close()
    with pytest.raises(PolicyError, match="closed"):
        engine.decide({})


@pytest.mark.parametrize(
    ("endpoint", "options", "error"),
    [
        pytest.param("ftp://opa/v1/data/x", {}, "http:// or https://", id="ftp-scheme"),
        pytest.param("http://opa:8181/v0/data/x", {}, "v1 Data API", id="v0-api"),
        pytest.param("http://opa:8181/v1/data/", {}, "v1 Data API", id="no-document"),
        pytest.param("http://opa:8181/v1/data/x", {"timeout_seconds": 0}, "positive", id="zero-timeout"),
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


def test_deadline_cuts_a_slow_answer_short(server: OpaTestServer) -> None:
    server.faults.delay_seconds = 2.0
    with RemoteOpaEngine(server.url + DECISION, timeout_seconds=0.2) as engine:
        answered_before = server.answered
        started = time.monotonic()
        with pytest.raises(OpaTransportError, match=r"timed out after 0\.2s while waiting for the answer") as caught:
            engine.decide(single(ALLOWED_POD, node("n1")))
        elapsed = time.monotonic() - started
        answered_at_return = server.answered
    assert caught.value.timed_out
    assert elapsed < 1.0
    assert server.requests >= 1 and answered_at_return == answered_before  # we left before the server answered


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


def test_deadline_bounds_the_whole_call_even_when_the_answer_trickles_in() -> None:
    answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"result": true}'
    stopped = threading.Event()

    def trickle(connection: socket.socket) -> None:
        read_request(connection)
        for byte in answer:  # one byte every 20 ms: every single read is quick, the whole answer is not
            if stopped.wait(0.02):
                return
            connection.sendall(bytes([byte]))

    with ScriptedServer(trickle) as scripted, RemoteOpaEngine(scripted.url + DECISION, timeout_seconds=0.3) as engine:
        started = time.monotonic()
        with pytest.raises(OpaTransportError, match="timed out"):
            engine.decide({})
        elapsed = time.monotonic() - started
        stopped.set()
    assert elapsed < 1.0  # the answer takes ~1.7 s to arrive; a per-read timeout alone would wait for all of it


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nnot json", "not JSON", id="body-not-json"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n[1]\n", "not an object", id="body-not-object"),
        pytest.param(b"SMTP ready\r\n\r\n", "malformed HTTP answer", id="not-http"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", "middle of the answer", id="cut-short"),
        pytest.param(b"", "closed the connection without answering", id="closed-without-answer"),
        pytest.param(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad", "502 Bad Gateway", id="http-502"),
    ],
)
def test_broken_answers_are_policy_errors(answer: bytes, error: str) -> None:
    def reply(connection: socket.socket) -> None:
        read_request(connection)
        connection.sendall(answer)

    with (
        ScriptedServer(reply) as scripted,
        RemoteOpaEngine(scripted.url + DECISION, timeout_seconds=2.0) as engine,
        pytest.raises(PolicyError, match=error),
    ):
        engine.decide({})


# ------------------------------------------------------------------------------------------ keep-alive


def test_many_calls_share_one_keep_alive_connection(server: OpaTestServer, engine: RemoteOpaEngine) -> None:
    for _ in range(50):
        assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed
    assert server.requests == 50
    assert server.connections == 1
    assert engine.connections_opened == 1
    assert {r.connection for r in server.request_log()} == {1}


def test_tcp_nodelay_is_set_on_the_client_socket(engine: RemoteOpaEngine) -> None:
    engine.decide({})
    sockets = engine.idle_sockets()
    assert len(sockets) == 1
    assert sockets[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_a_reused_connection_closed_by_the_server_is_retried_once(
    server: OpaTestServer, engine: RemoteOpaEngine
) -> None:
    engine.decide({})
    server.faults.reset_requests = 1  # the next request on the kept-alive connection is dropped unanswered
    assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed
    assert engine.stale_retries == 1
    assert server.requests == 3
    assert server.connections == 2


def test_a_reused_connection_is_retried_only_once(server: OpaTestServer, engine: RemoteOpaEngine) -> None:
    engine.decide({})
    server.faults.reset_connection = True
    with pytest.raises(OpaTransportError, match="reset"):
        engine.decide({})
    assert server.requests == 3  # the first call, the request, one retry: never a third send


def test_a_fresh_connection_that_fails_is_not_retried(server: OpaTestServer, engine: RemoteOpaEngine) -> None:
    server.faults.reset_requests = 1
    with pytest.raises(OpaTransportError, match="reset"):
        engine.decide({})
    assert server.requests == 1
    assert engine.stale_retries == 0


def test_connections_to_a_restarted_opa_are_replaced_without_a_failed_request() -> None:
    with OpaTestServer(policies={"authz.rego": POLICY}) as first:
        port = first.port
        engine = RemoteOpaEngine(first.url + DECISION, timeout_seconds=2.0)
        assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed
    with OpaTestServer(policies={"authz.rego": POLICY}, port=port) as second, engine:
        assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed
        assert second.requests == 1  # the dead connection was noticed before sending, not by a failed request
        assert engine.stale_retries == 0
        assert engine.connections_opened == 2


def test_concurrent_async_callers_get_separate_connections(
    server: OpaTestServer, engine: RemoteOpaEngine, run_async: RunAsync[list[Decision]]
) -> None:
    import asyncio

    async def many() -> list[Decision]:
        calls = [engine.decide_async(single(ALLOWED_POD if i % 2 else FORBIDDEN_POD, node("n"))) for i in range(16)]
        return list(await asyncio.gather(*calls))

    decisions = run_async(many())
    assert [d.allowed for d in decisions] == [bool(i % 2) for i in range(16)]
    assert server.requests == 16


def test_decide_batch_async(engine: RemoteOpaEngine, run_async: RunAsync[dict[str, Decision]]) -> None:
    decisions = run_async(
        engine.decide_batch_async(
            ALLOWED_POD, [node("a"), node("b", compliant="false")], target_kind="node", operation="schedule", time="t"
        )
    )
    assert decisions == {"a": Decision(True), "b": Decision(False, ("node is not compliant",))}


# ---------------------------------------------------------------------------------------------- tokens


def write_token(path: Path, token: str) -> None:
    """Replace the file the way the kubelet rotates a projected token: write aside, then rename over."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(token + "\n")
    os.replace(staged, path)


def test_token_is_sent_and_re_read_at_most_once_a_second_after_rotation(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "first")
    clock = VirtualClock()
    with (
        OpaTestServer(policies={"authz.rego": POLICY}) as server,
        RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file), clock=clock) as engine,
    ):
        engine.decide({})
        write_token(token_file, "second")
        engine.decide({})  # within the second: the file is not looked at again
        clock.advance(1.0)
        engine.decide({})
        clock.advance(5.0)
        engine.decide({})
        sent = [r.authorization for r in server.request_log()]
    assert sent == ["Bearer first", "Bearer first", "Bearer second", "Bearer second"]


def test_a_401_makes_the_next_call_re_read_the_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "old")
    clock = VirtualClock()
    with (
        OpaTestServer(policies={"authz.rego": POLICY}, token="new") as server,
        RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file), clock=clock) as engine,
    ):
        with pytest.raises(OpaHttpError, match=r"401.*unauthorized") as caught:
            engine.decide({})
        assert caught.value.status == 401
        write_token(token_file, "new")
        assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed  # no clock advance needed after a 401


@pytest.mark.parametrize(
    ("content", "error"),
    [
        pytest.param(None, "cannot read the OPA token file", id="missing-file"),
        pytest.param("  \n", "is empty", id="empty-file"),
        pytest.param("two tokens", "more than one token", id="whitespace-inside"),
    ],
)
def test_unusable_token_files_are_policy_errors(tmp_path: Path, content: str | None, error: str) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    with (
        OpaTestServer(policies={"authz.rego": POLICY}) as server,
        RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, token_file=str(token_file)) as engine,
        pytest.raises(PolicyError, match=error),
    ):
        engine.decide({})
    assert server.requests == 0


# ------------------------------------------------------------------------------------------------- TLS


def _certificates_with_cryptography(directory: Path) -> tuple[Path, Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubesched test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "opa")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "tls.crt", directory / "tls.key"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_file, cert_file, key_file


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
        _certificates_with_cryptography,
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
    tmp_path: Path, make_certificates: Callable[[Path], tuple[Path, Path, Path]]
) -> None:
    ca_file, cert_file, key_file = make_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    with OpaTestServer(policies={"authz.rego": POLICY}, ssl_context=context) as server:
        assert server.url.startswith("https://")
        with RemoteOpaEngine(server.url + DECISION, timeout_seconds=5.0, ca_file=str(ca_file)) as engine:
            for _ in range(3):
                assert engine.decide(single(ALLOWED_POD, node("n1"))).allowed
            assert server.connections == 1
            assert isinstance(engine.idle_sockets()[0], ssl.SSLSocket)
        with (
            RemoteOpaEngine(server.url + DECISION, timeout_seconds=5.0) as untrusting,
            pytest.raises(OpaTransportError, match="certificate verification failed"),
        ):
            untrusting.decide({})


# ----------------------------------------------------------------------------------------------- batch


def test_batch_installs_the_module_once_and_makes_one_request_per_pod(
    server: OpaTestServer, engine: RemoteOpaEngine
) -> None:
    nodes = [node(f"n{i}", compliant="false" if i % 3 == 0 else "true") for i in range(100)]
    for pod in (ALLOWED_POD, FORBIDDEN_POD, ALLOWED_POD):
        decisions = batch(engine, pod, nodes)
        assert list(decisions) == [n["metadata"]["name"] for n in nodes]
    assert [name for name, d in decisions.items() if not d.allowed] == [f"n{i}" for i in range(0, 100, 3)]
    assert decisions["n0"].reasons == ("node is not compliant",)
    log = [(r.method, r.path) for r in server.request_log()]
    assert log == [("PUT", "/v1/policies/kubesched-batch")] + [("POST", "/v1/data/kubesched/batch/node_decisions")] * 3


def test_batch_answers_are_those_of_single_decisions(server: OpaTestServer) -> None:
    nodes = [node("a", zone="a"), node("b", zone="b"), node("c")]
    with RemoteOpaEngine(server.url + "/v1/data/zoned/allow", timeout_seconds=2.0) as engine:
        decisions = batch(engine, ALLOWED_POD, nodes)
        singles = {n["metadata"]["name"]: engine.decide(single(ALLOWED_POD, n)) for n in nodes}
    assert decisions == singles
    assert decisions == {"a": Decision(True), "b": Decision(False), "c": undefined_decision()}


def test_batch_for_clusters_installs_its_own_module(server: OpaTestServer, engine: RemoteOpaEngine) -> None:
    clusters = [node("east"), node("west", compliant="false")]
    decisions = engine.decide_batch(ALLOWED_POD, clusters, target_kind="cluster", operation="schedule", time="t")
    assert set(decisions) == {"east", "west"}
    assert ("PUT", f"/v1/policies/{batch_module_id('cluster')}") in [(r.method, r.path) for r in server.request_log()]


def test_configured_batch_endpoint_is_used_without_installing(server: OpaTestServer) -> None:
    server.put_policy("mine.rego", batch_module("kubernetes/authz").replace("kubesched.batch", "team.batch"))
    with RemoteOpaEngine(
        server.url + DECISION,
        timeout_seconds=2.0,
        batch_endpoint=server.url + "/v1/data/team/batch/{target_kind}_decisions",
    ) as engine:
        decisions = batch(engine, ALLOWED_POD, [node("a"), node("b", compliant="false")])
    assert decisions == {"a": Decision(True), "b": Decision(False, ("node is not compliant",))}
    assert [(r.method, r.path) for r in server.request_log()] == [("POST", "/v1/data/team/batch/node_decisions")]


def test_a_refused_install_says_to_configure_batch_endpoint_and_is_not_repeated() -> None:
    clock = VirtualClock()
    with (
        OpaTestServer(policies={"authz.rego": POLICY}, owning_bundle="authz") as server,
        RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock) as engine,
    ):
        for _ in range(2):
            with pytest.raises(PolicyError, match="batchEndpoint") as caught:
                batch(engine, ALLOWED_POD, [node("a")])
        assert "owned by bundle" in str(caught.value)
        assert isinstance(caught.value.__cause__, OpaHttpError)
        assert server.requests == 1  # the refusal is remembered for a while
        clock.advance(60)
        with pytest.raises(PolicyError, match="batchEndpoint"):
            batch(engine, ALLOWED_POD, [node("a")])
        assert server.requests == 2


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


def test_a_batch_module_removed_behind_our_back_is_reinstalled(
    server: OpaTestServer, engine: RemoteOpaEngine
) -> None:
    import urllib.request

    assert batch(engine, ALLOWED_POD, [node("a")])["a"].allowed
    revision = engine.revision()
    request = urllib.request.Request(server.url + "/v1/policies/kubesched-batch", method="DELETE")
    urllib.request.urlopen(request, timeout=5).close()
    assert batch(engine, ALLOWED_POD, [node("a")]) == {"a": undefined_decision()}  # fail closed
    assert batch(engine, ALLOWED_POD, [node("a")])["a"].allowed  # and healed at the next call
    assert engine.revision() != revision
    puts = [r for r in server.request_log() if r.method == "PUT"]
    assert len(puts) == 2


def test_a_target_without_a_name_is_a_policy_error(engine: RemoteOpaEngine) -> None:
    with pytest.raises(PolicyError, match=r"no metadata\.name"):
        batch(engine, ALLOWED_POD, [{"metadata": {}}])


# -------------------------------------------------------------------------------------------- revision


def test_revision_without_bundles_moves_with_the_ttl_and_the_batch_module(server: OpaTestServer) -> None:
    clock = VirtualClock()
    with RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock, revision_ttl_seconds=10) as engine:
        prefix = f"remote:{server.url}{DECISION}:"
        assert engine.revision() == prefix + "0"
        clock.advance(9.9)
        engine.decide({})
        assert engine.revision() == prefix + "0"
        clock.advance(0.1)
        assert engine.revision() == prefix + "1"
        batch(engine, ALLOWED_POD, [node("a")])  # installs the batch module
        assert engine.revision() == prefix + "2"
        batch(engine, ALLOWED_POD, [node("a")])
        assert engine.revision() == prefix + "2"


def test_revision_comes_from_bundle_provenance_while_it_is_fresh() -> None:
    clock = VirtualClock()
    with (
        OpaTestServer(policies={"authz.rego": POLICY}, bundle_revisions={"authz": "r1", "facts": "f7"}) as server,
        RemoteOpaEngine(server.url + DECISION, timeout_seconds=2.0, clock=clock) as engine,
    ):
        assert engine.revision().startswith("remote:")  # nothing heard from OPA yet
        engine.decide({})
        assert engine.revision() == "bundles:authz=r1,facts=f7"
        server.bundle_revisions["authz"] = "r2"
        batch(engine, ALLOWED_POD, [node("a")])
        assert engine.revision() == "bundles:authz=r2,facts=f7"
        clock.advance(10)  # nothing has confirmed the bundles for a TTL: do not trust them
        assert engine.revision().startswith(f"remote:{server.url}{DECISION}:")
        engine.decide({})
        assert engine.revision() == "bundles:authz=r2,facts=f7"


# ------------------------------------------------------------------------------------ decision contract

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
)
# Weighted towards the values a careless policy produces: null, empty collections, true, "true".
EDGE_VALUES = st.sampled_from([None, [], {}, True, False, "true", "", 0, 1, [""], ["no"]])
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
