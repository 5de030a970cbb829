"""EmbeddedPolicyClient with real worker processes and real policy files: what it decides, its time limit,
the event loop while it evaluates, restarts, reloads and shutdown. Nothing of ours is mocked: a worker is
killed with a real signal, files are rewritten in ``tmp_path``, time limits are measured on the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kubesched.api.manifests import load_manifests
from kubesched.api.objects import Node
from kubesched.clock import VirtualClock
from kubesched.policy import worker as worker_module
from kubesched.policy.embedded import EmbeddedRegoEngine
from kubesched.policy.worker import EmbeddedPolicyClient
from kubesched.policyapi.contract import (
    Decision,
    PolicyError,
    decision_input,
    node_document,
    pod_document,
)

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]
MakeClient = Callable[..., EmbeddedPolicyClient]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
POLICIES = EXAMPLES / "policies"
TIME = "2026-11-30T16:00:00Z"

# input.n below 3 is decided at once; otherwise the second rule takes ~n² evaluation steps (n=4000: ~16M
# steps, 10-30 s). The smoke evaluation at start-up has no input.n, so it stays fast.
SLOW = """package slow

import rego.v1

default allow := false

allow if input.n < 3

allow if {
\tcount([1 | some i in numbers.range(1, input.n); some j in numbers.range(1, input.n)]) > 0
}
"""

SLOW_BODY = "count([1 | some i in numbers.range(1, 4000); some j in numbers.range(1, 4000)]) > 0"

SIMPLE = """package simple

import rego.v1

default allow := false

allow if data.allowed[input.node.metadata.name]
"""


@pytest.fixture
def make_client() -> Iterator[MakeClient]:
    clients: list[EmbeddedPolicyClient] = []

    def make(policies: list[str], data: list[str] = [], **options: Any) -> EmbeddedPolicyClient:  # noqa: B006
        options.setdefault("clock", VirtualClock())
        options.setdefault("timeout_seconds", 10.0)
        options.setdefault("decision_path", "kubernetes/authz")
        client = EmbeddedPolicyClient(policies, data, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def workers() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "kubesched-policy-worker"]


def client_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kubesched-policy-client"]


def in_process_error(call: Callable[[], object]) -> str:
    """The message of the PolicyError that ``call`` raises.

    Not ``pytest.raises``: its traceback would keep the engine's frames, and with them a regorus engine, alive
    in a reference cycle until a garbage collection on some other thread (a client thread), where dropping
    the unsendable engine fails.
    """
    try:
        call()
    except PolicyError as exc:
        return str(exc)
    raise AssertionError("no PolicyError")


def slow_client(make_client: MakeClient, tmp_path: Path, **options: Any) -> EmbeddedPolicyClient:
    (tmp_path / "slow.rego").write_text(SLOW)
    return make_client([str(tmp_path / "slow.rego")], decision_path="slow", **options)


def example_documents() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pods = [pod_document(pod) for pod in load_manifests([str(EXAMPLES / "secure-workloads.yaml")]).pods]
    nodes = []
    for node in load_manifests([str(EXAMPLES / "cluster.yaml")]).nodes:
        raw = json.loads(json.dumps(node.raw))
        if raw["metadata"]["name"] == "node-c":  # a restricted pool, so that the clearance rule is exercised too
            raw["metadata"]["labels"]["security.example.com/pool"] = "restricted-gpu"
        nodes.append(node_document(Node.from_dict(raw, "test")))
    nodes.append(node_document(Node.from_dict({"metadata": {"name": "node-unknown"}}, "test")))
    return pods, nodes


def in_process(policies: list[str], data: list[str], calls: Callable[[EmbeddedRegoEngine], T], **options: Any) -> T:
    """What the in-process engine answers. Made and dropped here, on the main thread, before any client
    thread exists: a regorus engine left in a reference cycle (a ``pytest.raises`` traceback holding a frame
    that sees it) may be collected on a client thread, and an unsendable engine cannot be dropped there."""
    return calls(EmbeddedRegoEngine(policies, data, **options))


def test_decisions_equal_the_in_process_engine(run_async: RunAsync[Any], make_client: MakeClient) -> None:
    paths, data = [str(POLICIES)], [str(POLICIES / "data.json")]
    pods, nodes = example_documents()
    cleared = json.loads(json.dumps(pods[-1]))
    cleared["metadata"].setdefault("labels", {})["security.example.com/clearance"] = "restricted-gpu"
    pods.append(cleared)
    operations = ("schedule", "permit")

    def answers(engine: EmbeddedRegoEngine) -> tuple[str, list[dict[str, Decision]], list[Decision]]:
        batches = [
            engine.decide_batch(pod, nodes, target_kind="node", operation=operation, time=TIME)
            for pod in pods
            for operation in operations
        ]
        singles = [
            engine.decide(decision_input(pod, node, target_kind="node", operation="schedule", time=TIME))
            for pod in pods
            for node in nodes
        ]
        return engine.revision(), batches, singles

    revision, batches, singles = in_process(paths, data, answers)
    assert {d.allowed for batch in batches for d in batch.values()} == {True, False}, "allows and denies"
    assert {d.revision for batch in batches for d in batch.values()} == {revision}
    client = make_client(paths, data)

    async def scenario() -> tuple[list[dict[str, Decision]], list[Decision]]:
        got_batches = [
            await client.decide_batch(pod, nodes, target_kind="node", operation=operation, time=TIME)
            for pod in pods
            for operation in operations
        ]
        got_singles = [
            await client.decide(decision_input(pod, node, target_kind="node", operation="schedule", time=TIME))
            for pod in pods
            for node in nodes
        ]
        return got_batches, got_singles

    assert client.kind == "embedded" and client.revision() == revision
    assert run_async(scenario()) == (batches, singles)


def test_undefined_and_error_results_match_the_in_process_engine(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "odd.rego").write_text(
        "package odd\n\nimport rego.v1\n\n"
        'decision := {"allow": "yes"} if input.node.metadata.name == "bad"\n\n'
        'decision := true if input.node.metadata.name == "good"\n'
    )
    targets = [{"metadata": {"name": "good"}}, {"metadata": {"name": "other"}}]
    bad = {"node": {"metadata": {"name": "bad"}}}

    def answers(engine: EmbeddedRegoEngine) -> tuple[dict[str, Decision], str]:
        batch = engine.decide_batch({}, targets, target_kind="node", operation="schedule", time=TIME)
        return batch, in_process_error(lambda: engine.decide(bad))

    expected, error = in_process([str(tmp_path)], [], answers, decision_path="odd/decision")
    assert expected["good"].allowed and expected["other"].undefined and expected["other"].revision
    assert error == "policy result allow is a string, not a boolean"
    client = make_client([str(tmp_path)], decision_path="odd/decision")

    async def scenario() -> None:
        assert await client.decide_batch({}, targets, target_kind="node", operation="schedule", time=TIME) == expected
        with pytest.raises(PolicyError) as in_worker:
            await client.decide(bad)
        assert str(in_worker.value) == error
        with pytest.raises(PolicyError, match="cannot be encoded as JSON"):
            await client.decide({"n": float("nan")})
        assert (await client.decide({"node": {"metadata": {"name": "good"}}})).allowed

    run_async(scenario())


@pytest.mark.parametrize(
    ("text", "missing"),
    [("package broken\n\nimport rego.v1\n\nallow if {\n\tinput.x ==\n}\n", False), ("", True)],
    ids=["does-not-compile", "missing-file"],
)
def test_construction_fails_like_the_in_process_engine(
    make_client: MakeClient, tmp_path: Path, text: str, missing: bool
) -> None:
    path = tmp_path / "policy.rego"
    if not missing:
        path.write_text(text)
    in_process = in_process_error(lambda: EmbeddedRegoEngine([str(path)]))
    with pytest.raises(PolicyError) as in_worker:
        make_client([str(path)])
    assert str(in_worker.value) == in_process
    expected = f"{path}: no such file or directory" if missing else f"policy does not compile: {path}:"
    assert str(in_worker.value).startswith(expected)
    assert workers() == []


def test_relative_paths_mean_what_they_meant_to_the_caller(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p.rego").write_text("package p\n\nimport rego.v1\n\nallow if {\n\tinput.x ==\n}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PolicyError, match=r"^policy does not compile: p\.rego:"):
        make_client(["p.rego"])


def test_an_evaluation_is_stopped_at_the_time_limit(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    client = slow_client(make_client, tmp_path, timeout_seconds=1.0)
    first_worker = client.worker_pid

    async def scenario() -> None:
        with pytest.raises(PolicyError, match=r"did not finish within 1s") as caught:
            await client.decide({"n": 4000})
        assert "restarted" in str(caught.value)
        decision = await client.decide({"n": 2})
        assert decision.allowed and decision.revision == client.revision()
        assert client.worker_pid not in (None, first_worker)

    run_async(scenario())
    assert len(workers()) == 1, "the stopped worker was reaped"


def test_calls_queue_and_one_that_waited_out_its_time_is_not_sent(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    client = slow_client(make_client, tmp_path, timeout_seconds=1.0)

    async def scenario() -> None:
        slow, queued = await asyncio.gather(client.decide({"n": 4000}), client.decide({"n": 2}), return_exceptions=True)
        assert isinstance(slow, PolicyError) and "did not finish within 1s" in str(slow)
        assert isinstance(queued, PolicyError) and "did not start within 1s" in str(queued)
        answers = await asyncio.gather(*(client.decide({"n": n}) for n in (1, 2, 300)))
        assert [a.allowed for a in answers] == [True, True, True]

    run_async(scenario())


def test_the_event_loop_runs_while_an_evaluation_is_pending(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    client = slow_client(make_client, tmp_path, timeout_seconds=60.0)

    async def scenario() -> int:
        deciding = asyncio.ensure_future(client.decide({"n": 2500}))  # seconds of evaluation in the worker
        ticks = 0
        # Each pass is one turn of the loop while the decision is pending: a call that blocked the loop until
        # its answer would leave none.
        while not deciding.done():
            ticks += 1
            await asyncio.sleep(0)
        assert (await deciding).allowed
        return ticks

    assert run_async(scenario()) >= 3, "the event loop did not turn while the evaluation was pending"


def test_a_killed_worker_is_restarted(run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path) -> None:
    client = slow_client(make_client, tmp_path)

    async def scenario() -> None:
        idle = client.worker_pid
        assert idle is not None
        os.kill(idle, signal.SIGKILL)
        await asyncio.sleep(0.1)
        assert (await client.decide({"n": 1})).allowed, "a worker found dead while idle is replaced quietly"
        busy = client.worker_pid
        assert busy is not None and busy != idle

        pending = asyncio.ensure_future(client.decide({"n": 4000}))
        await asyncio.sleep(0.3)
        os.kill(busy, signal.SIGKILL)
        with pytest.raises(PolicyError, match=r"exited during the evaluation \(exit code -9\)"):
            await pending
        assert (await client.decide({"n": 2})).allowed
        assert client.worker_pid not in (None, idle, busy)

    run_async(scenario())


def test_changed_files_are_reloaded_and_a_broken_change_keeps_the_last_good_policy(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    policy, data = tmp_path / "simple.rego", tmp_path / "data.json"
    policy.write_text(SIMPLE)
    data.write_text(json.dumps({"allowed": {"node-a": True}}))
    clock = VirtualClock()
    client = make_client([str(policy)], [str(data)], decision_path="simple/allow", clock=clock)
    node_b = {"node": {"metadata": {"name": "node-b"}}}

    def rewrite(path: Path, text: str) -> None:
        path.write_text(text)
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # coarse file-system clocks

    async def scenario() -> None:
        first = client.revision()
        assert not (await client.decide(node_b)).allowed
        rewrite(data, json.dumps({"allowed": {"node-a": True, "node-b": True}}))
        assert client.revision() == first, "not checked before the interval has passed"
        clock.advance(5.0)
        assert client.revision() == first, "the check runs in the background"
        decision = await client.decide(node_b)  # queued behind the check
        second = decision.revision
        assert decision.allowed and second != first and client.revision() == second
        assert client.last_reload_error == ""

        rewrite(policy, SIMPLE + "\nbroken if {\n")
        clock.advance(5.0)
        client.revision()
        decision = await client.decide(node_b)
        assert decision.allowed and decision.revision == second and client.revision() == second
        assert client.last_reload_error.startswith(f"policy does not compile: {policy}:")

        # The last good policy survives a restart too.
        os.kill(client.worker_pid or 0, signal.SIGKILL)
        await asyncio.sleep(0.1)
        assert (await client.decide(node_b)).revision == second

        rewrite(policy, SIMPLE.replace("default allow := false", "default allow := true"))
        assert await client.reload() not in (first, second)
        assert client.last_reload_error == ""
        assert (await client.decide({"node": {"metadata": {"name": "node-z"}}})).allowed

    run_async(scenario())


def test_a_reload_that_never_finishes_is_stopped_and_not_retried(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    policy = tmp_path / "simple.rego"
    policy.write_text(SIMPLE)
    clock = VirtualClock()
    client = make_client(
        [str(policy)], decision_path="simple/allow", clock=clock, timeout_seconds=1.0, startup_timeout_seconds=1.0
    )
    good = client.revision()
    node = {"node": {"metadata": {"name": "x"}}}

    async def scenario() -> None:
        # A decision that takes ~16M steps whatever the input: the reload's smoke evaluation never ends.
        policy.write_text(SIMPLE.replace("data.allowed[input.node.metadata.name]", SLOW_BODY))
        assert await client.reload() == good
        assert "did not finish within 1s" in client.last_reload_error
        assert (await client.decide(node)).revision == good
        restarted = client.worker_pid
        clock.advance(5.0)
        client.revision()
        assert (await client.decide(node)).revision == good
        assert client.worker_pid == restarted, "the same state of the files is not tried again"
        assert "did not finish within 1s" in client.last_reload_error

    run_async(scenario())


def test_close_leaves_no_process_or_thread_behind(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed: list[int | None] = []
    kill = worker_module._Worker.kill

    def recorded_kill(worker: worker_module._Worker) -> None:
        killed.append(worker.process.pid)
        kill(worker)

    monkeypatch.setattr(worker_module._Worker, "kill", recorded_kill)
    assert workers() == [] and client_threads() == []
    idle = make_client([str(POLICIES)], [str(POLICIES / "data.json")])
    busy = slow_client(make_client, tmp_path)
    assert len(workers()) == 2 and len(client_threads()) == 2

    def busy_workers() -> bool:
        return busy._worker is not None and busy._worker.busy

    async def scenario() -> None:
        await idle.aclose()
        pending = asyncio.ensure_future(busy.decide({"n": 4000}))
        while not busy_workers():  # the evaluation has started
            await asyncio.sleep(0.01)
        await busy.aclose()
        # Closing did not wait for the evaluation: it killed the worker in the middle of it, and the call got
        # no decision but the closed client's error.
        assert killed, "the busy worker was killed"
        with pytest.raises(PolicyError, match="closed"):
            await pending
        with pytest.raises(PolicyError, match="closed"):
            await idle.decide({})

    run_async(scenario())
    assert workers() == [] and client_threads() == []
    idle.close()  # idempotent
    busy.close()


def test_the_read_paths_are_those_of_the_revision_in_force(
    run_async: RunAsync[Any], make_client: MakeClient, tmp_path: Path
) -> None:
    policy = tmp_path / "simple.rego"
    policy.write_text(SIMPLE)
    client = make_client([str(policy)], decision_path="simple/allow")

    async def scenario() -> None:
        first = client.revision()
        paths = client.input_paths(first)
        assert paths is not None and paths.paths == (("node", "metadata", "name"),)
        assert client.input_paths("another revision") is None, "never the paths of another policy"
        policy.write_text(SIMPLE.replace("input.node.metadata.name", 'input.pod.metadata.labels["team"]'))
        second = await client.reload()
        assert second != first and client.input_paths(first) is None
        paths = client.input_paths(second)
        assert paths is not None and paths.paths == (("pod", "metadata", "labels", "team"),)
        os.kill(client.worker_pid or 0, signal.SIGKILL)  # a restarted worker analyses the same sources
        await asyncio.sleep(0.1)
        await client.decide({"pod": {}})
        assert client.input_paths(second) == paths

    run_async(scenario())
