"""KubeClient against a scripted API server (real HTTP on 127.0.0.1, in the test's loop).

What is checked, with exact request sequences and the delays the client asked its injected ``sleep`` for:
retries on 429 (after ``Retry-After`` in seconds or as a date, capped) and 5xx (jittered exponential backoff), the
error raised when they run out, statuses that are never retried, dropped connections, deadlines, ``retry=False``; the
token bucket (paced by an injected clock, and measured); credentials: bearer token, basic auth, a token file that is
re-read when it changes and after a 401, an exec plugin whose credential is cached until it expires; TLS
material; and watch streams (``stream_lines``): lines, a silent stream, a cut stream, a 410 on the request,
a line bigger than aiohttp's default buffer.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from kubetest_apiserver import ApiServer, FakeTime, FixedJitter, Seen, drop, ok, status, stream

from kubesched.backends.kube import client as client_module
from kubesched.backends.kube.client import KubeClient, TokenBucket
from kubesched.backends.kube.errors import KubeApiError, KubeConfigError, KubeTransportError
from kubesched.backends.kube.kubeconfig import ClusterConnection, ExecCredentialPlugin
from kubesched.clock import VirtualClock

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]
Answer = Callable[[web.Request, Seen], Awaitable[web.StreamResponse]]

PODS = "/api/v1/pods"
POD_LIST = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": []}


@asynccontextmanager
async def kube_client(connection: ClusterConnection, **options: Any) -> AsyncIterator[KubeClient]:
    client = KubeClient(connection, **options)
    try:
        yield client
    finally:
        await client.aclose()


def scripted(*answers: Answer) -> Answer:
    """Answer the n-th request with the n-th answer; the last one answers every later request."""
    remaining = list(answers)

    async def handler(request: web.Request, seen: Seen) -> web.StreamResponse:
        answer = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        return await answer(request, seen)

    return handler


def answer_status(code: int, message: str = "", reason: str = "", **headers: str) -> Answer:
    async def answer(request: web.Request, seen: Seen) -> web.StreamResponse:
        return status(code, message, reason, headers={k.replace("_", "-"): v for k, v in headers.items()})

    return answer


def answer_ok(obj: Any = POD_LIST) -> Answer:
    async def answer(request: web.Request, seen: Seen) -> web.StreamResponse:
        return ok(obj)

    return answer


async def answer_drop(request: web.Request, seen: Seen) -> web.StreamResponse:
    drop(request)


# ------------------------------------------------------------------------------------------------- retries


@pytest.mark.parametrize(
    ("failures", "sleeps"),
    [
        pytest.param(
            [answer_status(429, "slow down", "TooManyRequests", Retry_After="2")], [2.0], id="429-retry-after"
        ),
        pytest.param([answer_status(503), answer_status(503)], [0.2, 0.4], id="503-twice-then-200"),
        pytest.param([answer_status(500, Retry_After="0")], [0.0], id="500-retry-after-zero"),
        pytest.param([answer_status(429, Retry_After="120")], [30.0], id="retry-after-capped-at-30"),
        pytest.param(
            [answer_status(503, Retry_After="Wed, 21 Oct 2015 07:28:00 GMT")], [0.0], id="retry-after-date-past"
        ),
        pytest.param([answer_status(503, Retry_After="soon")], [0.2], id="retry-after-unreadable-backs-off"),
        pytest.param([answer_status(504), answer_status(502), answer_status(500)], [0.2, 0.4, 0.8], id="5xx-mix"),
    ],
)
def test_throttling_and_server_errors_are_retried(
    failures: list[Answer], sleeps: list[float], run_async: RunAsync[Any]
) -> None:
    async def scenario() -> tuple[Any, list[Seen], FakeTime, int]:
        fake = FakeTime()
        async with (
            ApiServer(scripted(*failures, answer_ok())) as server,
            kube_client(server.connection(), sleep=fake.sleep, rng=FixedJitter()) as client,
        ):
            answer = await client.request("GET", PODS, query={"limit": "5"})
            return answer, server.seen, fake, client.retries

    answer, seen, fake, retries = run_async(scenario())
    assert answer == POD_LIST
    assert [(s.method, s.path, s.query) for s in seen] == [("GET", PODS, {"limit": "5"})] * (len(failures) + 1)
    assert fake.sleeps == pytest.approx(sleeps)
    assert retries == len(failures)


def test_a_retry_after_date_is_waited_for_as_the_clock_reads_it(run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[float]:
        fake = FakeTime()
        clock = VirtualClock(start=1_445_412_480.0)  # Wed, 21 Oct 2015 07:28:00 GMT
        answers = scripted(answer_status(429, Retry_After="Wed, 21 Oct 2015 07:28:07 GMT"), answer_ok())
        async with (
            ApiServer(answers) as server,
            kube_client(server.connection(), sleep=fake.sleep, rng=FixedJitter(), clock=clock) as client,
        ):
            await client.request("GET", PODS)
        return fake.sleeps

    assert run_async(scenario()) == pytest.approx([7.0])


def test_server_errors_beyond_max_retries_raise_the_status(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[KubeApiError, int, FakeTime]:
        fake = FakeTime()
        async with (
            ApiServer(scripted(answer_status(500, "etcdserver: request timed out", "InternalError"))) as server,
            kube_client(server.connection(), max_retries=3, sleep=fake.sleep, rng=FixedJitter()) as client,
        ):
            with pytest.raises(KubeApiError) as caught:
                await client.request("GET", PODS)
            return caught.value, len(server.seen), fake

    error, requests, fake = run_async(scenario())
    assert (error.status, error.reason, error.message) == (500, "InternalError", "etcdserver: request timed out")
    assert error.retryable
    assert requests == 4  # the first attempt and three retries
    assert fake.sleeps == pytest.approx([0.2, 0.4, 0.8])


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        pytest.param(400, "BadRequest", id="400"),
        pytest.param(401, "Unauthorized", id="401"),
        pytest.param(403, "Forbidden", id="403"),
        pytest.param(404, "NotFound", id="404"),
        pytest.param(409, "AlreadyExists", id="409"),
        pytest.param(422, "Invalid", id="422"),
        pytest.param(501, "NotImplemented", id="501"),
    ],
)
def test_client_errors_are_not_retried(code: int, reason: str, run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[KubeApiError, int, FakeTime]:
        fake = FakeTime()
        async with (
            ApiServer(scripted(answer_status(code, f"the {reason} message", reason))) as server,
            kube_client(server.connection(), sleep=fake.sleep) as client,
        ):
            with pytest.raises(KubeApiError) as caught:
                await client.request("POST", PODS, body={"kind": "Pod"})
            return caught.value, len(server.seen), fake

    error, requests, fake = run_async(scenario())
    assert (error.status, error.reason, error.message) == (code, reason, f"the {reason} message")
    assert not error.retryable
    assert requests == 1
    assert fake.sleeps == []


def test_a_non_status_error_body_becomes_the_message(run_async: RunAsync[Any]) -> None:
    async def html(request: web.Request, seen: Seen) -> web.StreamResponse:
        return web.Response(status=502, text="<html>bad gateway</html>", content_type="text/html")

    async def scenario() -> KubeApiError:
        async with ApiServer(html) as server, kube_client(server.connection()) as client:
            with pytest.raises(KubeApiError) as caught:
                await client.request("GET", PODS, retry=False)
            return caught.value

    error = run_async(scenario())
    assert (error.status, error.reason, error.message) == (502, "", "<html>bad gateway</html>")


def test_a_dropped_connection_is_retried_then_raised(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[KubeTransportError, list[Seen], FakeTime, int]:
        fake = FakeTime()
        async with (
            ApiServer(answer_drop) as server,
            kube_client(server.connection(), max_retries=2, sleep=fake.sleep, rng=FixedJitter()) as client,
        ):
            with pytest.raises(KubeTransportError) as caught:
                # POST: aiohttp itself retries an idempotent request once on a dropped connection.
                await client.request("POST", PODS, body={"kind": "Pod"})
            return caught.value, server.seen, fake, client.requests_sent

    error, seen, fake, sent = run_async(scenario())
    assert [(s.method, s.body) for s in seen] == [("POST", {"kind": "Pod"})] * 3
    assert sent == 3
    assert fake.sleeps == pytest.approx([0.2, 0.4])
    assert str(error).startswith(f"POST {PODS}: ")


def test_a_dropped_connection_then_an_answer_succeeds(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[Any, int, FakeTime]:
        fake = FakeTime()
        async with (
            ApiServer(scripted(answer_drop, answer_ok({"kind": "Pod"}))) as server,
            kube_client(server.connection(), sleep=fake.sleep, rng=FixedJitter()) as client,
        ):
            answer = await client.request("POST", PODS, body={"kind": "Pod"})
            return answer, len(server.seen), fake

    answer, requests, fake = run_async(scenario())
    assert answer == {"kind": "Pod"}
    assert requests == 2
    assert fake.sleeps == pytest.approx([0.2])


def test_an_answer_slower_than_the_deadline_is_a_transport_error(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[str], int]:
        server: ApiServer

        async def slow(request: web.Request, seen: Seen) -> web.StreamResponse:
            await server.closing.wait()
            return ok({})

        messages: list[str] = []
        async with ApiServer(slow) as server, kube_client(server.connection(), timeout=0.2, max_retries=0) as client:
            for override in (None, 0.1):
                with pytest.raises(KubeTransportError) as caught:
                    await client.request("GET", PODS, timeout=override)
                messages.append(str(caught.value))
            return messages, len(server.seen)

    # The server never answers: the deadline alone ended each call, the client's own, then the override.
    messages, requests = run_async(scenario())
    assert messages == [
        f"GET {PODS}: no answer within the deadline (0.2 s)",
        f"GET {PODS}: no answer within the deadline (0.1 s)",
    ]
    assert requests == 2


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(answer_status(503, "unavailable"), id="503"),
        pytest.param(answer_status(429, Retry_After="1"), id="429"),
        pytest.param(answer_drop, id="dropped-connection"),
    ],
)
def test_retry_false_makes_one_attempt(failure: Answer, run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[type[Exception], int, FakeTime]:
        fake = FakeTime()
        async with ApiServer(failure) as server, kube_client(server.connection(), sleep=fake.sleep) as client:
            with pytest.raises((KubeApiError, KubeTransportError)) as caught:
                # POST: aiohttp itself retries an idempotent request once on a dropped connection.
                await client.request("POST", PODS, body={}, retry=False)
            return type(caught.value), len(server.seen), fake

    _, requests, fake = run_async(scenario())
    assert requests == 1
    assert fake.sleeps == []


def test_the_request_carries_the_body_and_content_type(run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[Seen]:
        async with ApiServer(answer_ok({})) as server, kube_client(server.connection(), user_agent="ua/1") as client:
            await client.request(
                "PATCH",
                "/api/v1/namespaces/d/pods/p/status",
                body={"status": {"x": None}},
                content_type=client_module.STRATEGIC_MERGE_PATCH,
            )
            await client.request("GET", PODS)
            return server.seen

    patch, get = run_async(scenario())
    assert (patch.method, patch.body, patch.content_type) == (
        "PATCH",
        {"status": {"x": None}},
        "application/strategic-merge-patch+json",
    )
    assert patch.headers["User-Agent"] == "ua/1"
    assert patch.headers["Accept"] == "application/json"
    assert get.body is None
    assert "Content-Type" not in get.headers


# ---------------------------------------------------------------------------------------------- rate limit


def test_the_token_bucket_paces_requests_beyond_the_burst(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[float], list[float], int]:
        fake = FakeTime()
        async with (
            ApiServer(answer_ok({})) as server,
            kube_client(server.connection(), qps=10, burst=2, sleep=fake.sleep) as client,
        ):
            client.limiter = TokenBucket(10, 2, monotonic=fake.monotonic)
            for _ in range(6):
                await client.request("GET", PODS)
            sequential = list(fake.sleeps)
            fake.sleeps.clear()
            fake.now += 0.5  # five tokens' worth, but the bucket holds two
            await asyncio.gather(*(client.request("GET", PODS) for _ in range(3)))
            return sequential, fake.sleeps, len(server.seen)

    sequential, after_pause, requests = run_async(scenario())
    assert sequential == pytest.approx([0.1, 0.1, 0.1, 0.1])  # requests 3..6 wait one token each
    assert after_pause == pytest.approx([0.1])  # two saved tokens, then one wait
    assert requests == 9


def test_a_negative_qps_disables_the_limiter(run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[float]:
        fake = FakeTime()
        async with (
            ApiServer(answer_ok({})) as server,
            kube_client(server.connection(), qps=-1, burst=1, sleep=fake.sleep) as client,
        ):
            client.limiter = TokenBucket(-1, 1, monotonic=fake.monotonic)
            for _ in range(10):
                await client.request("GET", PODS)
        return fake.sleeps

    assert run_async(scenario()) == []


def test_a_watch_takes_no_token(run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[float]:
        fake = FakeTime()
        server: ApiServer

        async def watch(request: web.Request, seen: Seen) -> web.StreamResponse:
            return await stream(request, server, [{"type": "BOOKMARK"}], end="close")

        async with (
            ApiServer(watch) as server,
            kube_client(server.connection(), qps=1, burst=1, sleep=fake.sleep) as client,
        ):
            client.limiter = TokenBucket(1, 1, monotonic=fake.monotonic)
            for _ in range(4):
                async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=5) as lines:
                    assert [line async for line in lines] == [b'{"type": "BOOKMARK"}\n']
        return fake.sleeps

    assert run_async(scenario()) == []


# ------------------------------------------------------------------------------------------- credentials


@pytest.mark.parametrize(
    ("fields", "authorization"),
    [
        pytest.param({"token": "abc.def"}, "Bearer abc.def", id="bearer-token"),
        pytest.param(
            {"username": "admin", "password": "s3cr:et"},
            "Basic " + base64.b64encode(b"admin:s3cr:et").decode(),
            id="basic-auth",
        ),
        pytest.param({"token": "t", "username": "admin", "password": "p"}, "Bearer t", id="token-before-basic"),
        pytest.param({}, None, id="anonymous"),
    ],
)
def test_the_authorization_header(fields: dict[str, str], authorization: str | None, run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[str | None]:
        server: ApiServer

        async def handler(request: web.Request, seen: Seen) -> web.StreamResponse:
            if seen.query.get("watch"):
                return await stream(request, server, [], end="close")
            return ok({})

        async with ApiServer(handler) as server, kube_client(server.connection(**fields)) as client:
            await client.request("GET", PODS)
            async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=5) as lines:
                assert [line async for line in lines] == []
            return [s.authorization for s in server.seen]

    assert run_async(scenario()) == [authorization, authorization]


def write_token(path: Path, token: str, mtime: float) -> None:
    path.write_text(token + "\n")
    os.utime(path, (mtime, mtime))


def test_a_token_file_is_reread_when_it_changes_after_the_recheck_interval(
    tmp_path: Path, run_async: RunAsync[Any]
) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "first", 1_000_000)
    clock = VirtualClock()

    async def scenario() -> list[str | None]:
        async with (
            ApiServer(answer_ok({})) as server,
            kube_client(server.connection(token_file=str(token_file)), clock=clock) as client,
        ):
            await client.request("GET", PODS)
            write_token(token_file, "second", 1_000_100)
            clock.advance(client_module.TOKEN_FILE_RECHECK_SECONDS - 1)
            await client.request("GET", PODS)  # within the interval: the file is not looked at
            clock.advance(1)
            await client.request("GET", PODS)
            clock.advance(client_module.TOKEN_FILE_RECHECK_SECONDS)
            await client.request("GET", PODS)  # rechecked, unchanged
            return [s.authorization for s in server.seen]

    assert run_async(scenario()) == ["Bearer first", "Bearer first", "Bearer second", "Bearer second"]


def test_a_token_file_that_cannot_be_read_fails_the_request_naming_the_file(
    tmp_path: Path, run_async: RunAsync[Any]
) -> None:
    token_file = tmp_path / "token"

    async def scenario() -> tuple[str, int]:
        async with (
            ApiServer(answer_ok({})) as server,
            kube_client(server.connection(token_file=str(token_file))) as client,
        ):
            with pytest.raises(KubeTransportError) as caught:
                await client.request("GET", PODS, retry=False)
            return str(caught.value), len(server.seen)

    message, requests = run_async(scenario())
    assert message == f"GET {PODS}: cannot read the token file {token_file}: No such file or directory"
    assert requests == 0  # never sent without the credential the kubeconfig names


def test_a_401_makes_the_next_request_reread_the_token_file(tmp_path: Path, run_async: RunAsync[Any]) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, "old", 1_000_000)
    rejected: set[str] = set()

    async def handler(request: web.Request, seen: Seen) -> web.StreamResponse:
        if seen.authorization in rejected:
            return status(401, "Unauthorized", "Unauthorized")
        return ok({})

    async def scenario() -> tuple[list[str | None], int]:
        async with ApiServer(handler) as server, kube_client(server.connection(token_file=str(token_file))) as client:
            await client.request("GET", PODS)
            write_token(token_file, "new", 1_000_100)  # rotated; the 60 s recheck is far away
            rejected.add("Bearer old")
            with pytest.raises(KubeApiError) as caught:
                await client.request("GET", PODS)
            assert caught.value.status == 401
            await client.request("GET", PODS)
            return [s.authorization for s in server.seen], client.retries

    authorizations, retries = run_async(scenario())
    assert authorizations == ["Bearer old", "Bearer old", "Bearer new"]
    assert retries == 0


EXEC_PLUGIN = """\
import json, os, pathlib, sys
counter = pathlib.Path(sys.argv[1])
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
pathlib.Path(sys.argv[1] + ".env").write_text(json.dumps(
    {"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]), "extra": os.environ.get("EXTRA")}
))
if os.environ.get("FAIL"):
    sys.stderr.write("no credentials for you")
    sys.exit(3)
status = {"token": f"exec-{runs}"}
if os.environ.get("EXPIRES"):
    status["expirationTimestamp"] = os.environ["EXPIRES"]
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
"""


def exec_plugin(tmp_path: Path, **env: str) -> tuple[ExecCredentialPlugin, Path]:
    script = tmp_path / "credential.py"
    script.write_text(EXEC_PLUGIN)
    counter = tmp_path / "runs"
    plugin = ExecCredentialPlugin(command=sys.executable, args=(str(script), str(counter)), env=env)
    return plugin, counter


def stamp(seconds_from_now: float) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("expires", "tokens"),
    [
        pytest.param(3600.0, ["exec-1"] * 3, id="valid-for-an-hour-cached"),
        pytest.param(None, ["exec-1"] * 3, id="no-expiry-cached"),
        pytest.param(5.0, ["exec-1", "exec-2", "exec-3"], id="expiring-within-10s-rerun"),
        pytest.param(-60.0, ["exec-1", "exec-2", "exec-3"], id="expired-rerun"),
    ],
)
def test_an_exec_plugin_credential_is_cached_until_it_expires(
    expires: float | None, tokens: list[str], tmp_path: Path, run_async: RunAsync[Any]
) -> None:
    env = {"EXTRA": "yes"} if expires is None else {"EXTRA": "yes", "EXPIRES": stamp(expires)}
    plugin, counter = exec_plugin(tmp_path, **env)

    async def scenario() -> list[str | None]:
        async with ApiServer(answer_ok({})) as server, kube_client(server.connection(exec_plugin=plugin)) as client:
            for _ in range(3):
                await client.request("GET", PODS)
            return [s.authorization for s in server.seen]

    assert run_async(scenario()) == [f"Bearer {t}" for t in tokens]
    assert counter.read_text() == str(len(set(tokens)))
    environment = json.loads(Path(str(counter) + ".env").read_text())
    assert environment == {
        "info": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        },
        "extra": "yes",
    }


def test_an_exec_plugin_runs_once_for_concurrent_requests_and_again_after_a_401(
    tmp_path: Path, run_async: RunAsync[Any]
) -> None:
    plugin, counter = exec_plugin(tmp_path, EXPIRES=stamp(3600))

    async def handler(request: web.Request, seen: Seen) -> web.StreamResponse:
        if seen.authorization == "Bearer exec-1" and len(seen.query) > 0:
            return status(401, "Unauthorized", "Unauthorized")
        return ok({})

    async def scenario() -> list[str | None]:
        async with ApiServer(handler) as server, kube_client(server.connection(exec_plugin=plugin)) as client:
            await asyncio.gather(*(client.request("GET", PODS) for _ in range(5)))
            with pytest.raises(KubeApiError):
                await client.request("GET", PODS, query={"reject": "1"})
            await client.request("GET", PODS, query={"reject": "1"})
            return [s.authorization for s in server.seen]

    assert run_async(scenario()) == ["Bearer exec-1"] * 6 + ["Bearer exec-2"]
    assert counter.read_text() == "2"


def test_a_failing_exec_plugin_is_a_transport_error(tmp_path: Path, run_async: RunAsync[Any]) -> None:
    plugin, _ = exec_plugin(tmp_path, FAIL="1")

    async def scenario() -> tuple[str, int]:
        async with ApiServer(answer_ok({})) as server, kube_client(server.connection(exec_plugin=plugin)) as client:
            with pytest.raises(KubeTransportError) as caught:
                await client.request("GET", PODS, retry=False)
            return str(caught.value), len(server.seen)

    message, requests = run_async(scenario())
    assert message == f"exec credential plugin {sys.executable} exited with 3: no credentials for you"
    assert requests == 0


def test_tls_with_the_kubeconfig_ca(tmp_path: Path, run_async: RunAsync[Any]) -> None:
    import ssl

    from kubesched.harness.certificates import write_server_certificates

    ca, cert, key = write_server_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def scenario() -> tuple[Any, str]:
        async with ApiServer(answer_ok({"kind": "PodList"}), ssl_context=context) as server:
            assert server.url.startswith("https://127.0.0.1:")
            trusted = server.connection(ca_data=ca.read_bytes(), token="t")
            async with kube_client(trusted) as client:
                answer = await client.request("GET", PODS)
            async with kube_client(server.connection()) as client:
                with pytest.raises(KubeTransportError) as caught:
                    await client.request("GET", PODS, retry=False)
            return answer, str(caught.value)

    answer, untrusted = run_async(scenario())
    assert answer == {"kind": "PodList"}
    assert "certificate" in untrusted.lower()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            {"ca_data": b"not a certificate"}, "mock: certificate-authority: not a PEM certificate", id="bad-ca"
        ),
        pytest.param(
            {"client_certificate_data": b"x"},
            "mock: client-certificate and client-key must be given together",
            id="certificate-without-key",
        ),
        pytest.param(
            {"client_certificate_data": b"x", "client_key_data": b"y"},
            "mock: client-certificate / client-key: not a PEM certificate and its private key (",
            id="unreadable-pair",
        ),
    ],
)
def test_unusable_tls_material_is_a_config_error(
    fields: dict[str, Any], message: str, run_async: RunAsync[Any]
) -> None:
    async def scenario() -> str:
        with pytest.raises(KubeConfigError) as caught:
            KubeClient(ClusterConnection(server="https://127.0.0.1:1", source="mock", **fields))
        return str(caught.value)

    assert run_async(scenario()).startswith(message)


# --------------------------------------------------------------------------------------------------- watches


def test_stream_lines_delivers_the_lines(run_async: RunAsync[Any]) -> None:
    events: list[dict[str, Any] | bytes] = [
        {"type": "ADDED", "object": {"n": 1}},
        b"\n",
        b"  \n",
        {"type": "BOOKMARK", "object": {"n": 2}},
    ]

    async def scenario() -> tuple[list[bytes], list[Seen]]:
        server: ApiServer

        async def watch(request: web.Request, seen: Seen) -> web.StreamResponse:
            return await stream(request, server, events, end="close")

        async with ApiServer(watch) as server, kube_client(server.connection(token="t")) as client:
            query = {"watch": "true", "resourceVersion": "5"}
            async with client.stream_lines(PODS, query, read_timeout=5) as lines:
                got = [line async for line in lines]
            return got, server.seen

    got, seen = run_async(scenario())
    assert got == [b'{"type": "ADDED", "object": {"n": 1}}\n', b'{"type": "BOOKMARK", "object": {"n": 2}}\n']
    assert [(s.method, s.path, s.query, s.authorization) for s in seen] == [
        ("GET", PODS, {"watch": "true", "resourceVersion": "5"}, "Bearer t")
    ]


def test_a_silent_stream_ends_after_the_read_timeout(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[bytes], str]:
        server: ApiServer

        async def watch(request: web.Request, seen: Seen) -> web.StreamResponse:
            return await stream(request, server, [{"type": "ADDED"}], end="hold")

        got: list[bytes] = []
        async with ApiServer(watch) as server, kube_client(server.connection()) as client:
            with pytest.raises(KubeTransportError) as caught:
                async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=0.25) as lines:
                    async for line in lines:
                        got.append(line)
            return got, str(caught.value)

    # The server holds the stream open without a word after the first event: the read timeout ended it.
    got, message = run_async(scenario())
    assert got == [b'{"type": "ADDED"}\n']
    assert message == f"GET {PODS} (watch): silent for 0.25 s"


def test_a_stream_cut_midway_is_a_transport_error(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[bytes], str]:
        server: ApiServer

        async def watch(request: web.Request, seen: Seen) -> web.StreamResponse:
            return await stream(request, server, [{"type": "ADDED"}, b'{"type": "MOD'], end="cut")

        got: list[bytes] = []
        async with ApiServer(watch) as server, kube_client(server.connection()) as client:
            with pytest.raises(KubeTransportError) as caught:
                async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=5) as lines:
                    async for line in lines:
                        got.append(line)
            return got, str(caught.value)

    got, message = run_async(scenario())
    assert got == [b'{"type": "ADDED"}\n']
    assert message.startswith(f"GET {PODS} (watch): ")


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        pytest.param(410, "Expired", "too old resource version: 5 (90)", id="410-gone"),
        pytest.param(500, "InternalError", "boom", id="500"),
        pytest.param(403, "Forbidden", "pods is forbidden", id="403"),
    ],
)
def test_an_error_answer_to_the_watch_request_is_an_api_error(
    code: int, reason: str, message: str, run_async: RunAsync[Any]
) -> None:
    async def scenario() -> tuple[KubeApiError, int]:
        async with (
            ApiServer(answer_status(code, message, reason)) as server,
            kube_client(server.connection()) as client,
        ):
            with pytest.raises(KubeApiError) as caught:
                async with client.stream_lines(PODS, {"watch": "true", "resourceVersion": "5"}, read_timeout=5):
                    raise AssertionError("no stream expected")
            return caught.value, len(server.seen)

    error, requests = run_async(scenario())
    assert (error.status, error.reason, error.message) == (code, reason, message)
    assert requests == 1  # a watch is never retried by the client: the reflector decides


def test_a_watch_request_without_an_answer_hits_the_deadline(run_async: RunAsync[Any]) -> None:
    async def scenario() -> str:
        server: ApiServer

        async def slow(request: web.Request, seen: Seen) -> web.StreamResponse:
            await server.closing.wait()
            return ok({})

        async with ApiServer(slow) as server, kube_client(server.connection(), timeout=0.2) as client:
            with pytest.raises(KubeTransportError) as caught:
                async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=5):
                    raise AssertionError("no stream expected")
            return str(caught.value)

    assert run_async(scenario()) == f"GET {PODS} (watch): no answer within the deadline"


def test_a_watch_event_bigger_than_aiohttps_default_line_limit_is_delivered(run_async: RunAsync[Any]) -> None:
    # aiohttp's readline() refuses lines longer than twice its read buffer (2 × 256 KiB by default); an object
    # can be bigger (etcd allows 1.5 MiB, and its JSON is larger still).
    big = {"type": "ADDED", "object": {"metadata": {"annotations": {"a": "x" * 1_500_000}}}}

    async def scenario() -> list[int]:
        server: ApiServer

        async def watch(request: web.Request, seen: Seen) -> web.StreamResponse:
            return await stream(request, server, [big, {"type": "BOOKMARK"}], end="close")

        async with (
            ApiServer(watch) as server,
            kube_client(server.connection()) as client,
            client.stream_lines(PODS, {"watch": "true"}, read_timeout=5) as lines,
        ):
            return [len(line) async for line in lines]

    assert run_async(scenario()) == [len(json.dumps(big)) + 1, len('{"type": "BOOKMARK"}') + 1]


def test_a_watch_event_beyond_the_line_limit_is_a_transport_error(run_async: RunAsync[Any]) -> None:
    huge = b'{"type": "ADDED", "object": "' + b"x" * (2 * client_module.WATCH_READ_BUFSIZE) + b'"}\n'

    async def scenario() -> str:
        server: ApiServer

        async def watch(request: web.Request, seen: Seen) -> web.StreamResponse:
            return await stream(request, server, [huge], end="hold")

        async with ApiServer(watch) as server, kube_client(server.connection()) as client:
            with pytest.raises(KubeTransportError) as caught:
                async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=5) as lines:
                    async for _ in lines:
                        raise AssertionError("no line expected")
            return str(caught.value)

    assert run_async(scenario()).startswith(f"GET {PODS} (watch): LineTooLong: ")



class _MuteTlsServer:
    """A TLS server on 127.0.0.1 that answers a watch request with one line and a ``?slow`` request not at
    all, then never reads again: it does not answer a TLS goodbye, as a loaded API server may not in time."""

    def __init__(self, context: Any) -> None:
        import socket
        import threading

        self._context = context
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._connections: list[Any] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> _MuteTlsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)
        for connection in self._connections:
            connection.close()

    def _serve(self) -> None:
        self._listener.settimeout(0.05)
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                continue
            raw.settimeout(5)
            connection = self._context.wrap_socket(raw, server_side=True)
            self._connections.append(connection)
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(4096)
            if b"slow" not in request.split(b"\r\n", 1)[0]:
                line = b'{"type": "ADDED"}\n'
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + f"{len(line):x}\r\n".encode() + line + b"\r\n"
                )


def test_requests_and_watches_given_up_midway_over_tls_leave_no_socket_open(
    tmp_path: Path, run_async: RunAsync[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled request and an abandoned watch are closed by aiohttp before the session is; their sockets
    must be gone when ``aclose`` returns even if the server never answers the TLS goodbye, or the collector
    finds them after the loop has closed."""
    import gc
    import ssl
    import warnings

    from kubesched.harness.certificates import write_server_certificates

    ca, cert, key = write_server_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    monkeypatch.setattr(client_module, "CLOSE_GRACE_SECONDS", 0.1)

    async def scenario(port: int) -> None:
        connection = ClusterConnection(server=f"https://127.0.0.1:{port}", source="mock", ca_data=ca.read_bytes())
        client = KubeClient(connection)
        try:
            with pytest.raises(KubeTransportError):
                await client.request("GET", PODS, query={"slow": "1"}, timeout=0.2, retry=False)
            for _ in range(3):
                async with client.stream_lines(PODS, {"watch": "true"}, read_timeout=5) as lines:
                    assert await anext(lines) == b'{"type": "ADDED"}\n'
        finally:
            await client.aclose()

    with warnings.catch_warnings(record=True) as caught, _MuteTlsServer(context) as server:
        warnings.simplefilter("always", ResourceWarning)
        run_async(scenario(server.port))
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
