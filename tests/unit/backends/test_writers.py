"""EventWriter and StatusWriter against the scripted API server, on a virtual clock.

Events: the exact POST body (name ``<pod>.<hex nanoseconds>``, reporting controller and instance, the note
cut to 1024 characters), client-go's series aggregation (the second event patches ``count: 2`` at once, later
ones are only counted until a refresh patches the total once), a new key starts a new event, a series that
expired on the server (404) is created again with its count, an old series starts afresh, the queue drops and
counts what does not fit. Status: the exact strategic-merge patch of PodScheduled=False, skipped when the pod
says so already, ``nominatedNodeName`` only when it changes, the latest wanted status wins, ``supersede``
drops a queued patch and waits for one in flight, and a pod that is gone (404) is not a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from aiohttp import web
from kubetest_apiserver import ApiServer, FakeTime, Seen, ok, pod, status, until

from kubesched.api.objects import Pod
from kubesched.backends.kube import writers as writers_module
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.writers import EventWriter, StatusWriter, _WantedStatus
from kubesched.clock import VirtualClock

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]

START = 1_700_000_000.0  # 2023-11-14T22:13:20Z
EVENTS = "/apis/events.k8s.io/v1/namespaces/apps/events"


def scheduled_pod(name: str = "web-1", *, conditions: list[dict[str, Any]] | None = None, nominated: str = "") -> Pod:
    raw = pod(name, "7", namespace="apps", schedulerName="kubesched")
    if conditions is not None:
        raw["status"]["conditions"] = conditions
    if nominated:
        raw["status"]["nominatedNodeName"] = nominated
    return Pod.from_dict(raw, f"pods apps/{name}")


@dataclass
class Answers:
    """Per-method answers: a status code to fail with, or 0 for success; and an optional gate for PATCHes."""

    post: list[int] = field(default_factory=list)
    patch: list[int] = field(default_factory=list)
    patch_gate: asyncio.Event | None = None

    async def handle(self, request: web.Request, seen: Seen) -> web.StreamResponse:
        if seen.method == "PATCH" and self.patch_gate is not None:
            await self.patch_gate.wait()
        codes = self.post if seen.method == "POST" else self.patch
        code = codes.pop(0) if codes else 0
        if code:
            return status(code, f"answered {code}", "NotFound" if code == 404 else "")
        return ok(seen.body if isinstance(seen.body, dict) else {}, code=201 if seen.method == "POST" else 200)


@asynccontextmanager
async def served(answers: Answers) -> AsyncIterator[tuple[ApiServer, KubeClient]]:
    async with ApiServer(answers.handle) as server:
        client = KubeClient(server.connection(), max_retries=0, sleep=FakeTime().sleep)
        try:
            yield server, client
        finally:
            await client.aclose()


def calls(server: ApiServer) -> list[tuple[str, str, Any]]:
    return [(s.method, s.path, s.body) for s in server.seen]


# ------------------------------------------------------------------------------------------------- events


def event_body(name: str, note: str, *, reason: str = "FailedScheduling", stamp: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "apps"},
        "eventTime": stamp,
        "reportingController": "kubesched",
        "reportingInstance": "kubesched-node-a",
        "action": "Scheduling",
        "reason": reason,
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "apps", "name": "web-1", "uid": "uid-web-1"},
        "note": note,
        "type": "Warning",
    }


def test_events_are_created_then_aggregated_into_a_series(run_async: RunAsync[Any]) -> None:
    clock = VirtualClock(START)

    async def scenario() -> tuple[list[list[tuple[str, str, Any]]], list[str], tuple[int, int, int]]:
        steps: list[list[tuple[str, str, Any]]] = []
        content_types: list[str] = []
        async with served(Answers()) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=clock)
            p = scheduled_pod()

            async def step(action: Callable[[], Coroutine[Any, Any, None]]) -> None:
                before = len(server.seen)
                await action()
                steps.append(calls(server)[before:])

            writer.record(p, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available")
            await step(writer.drain)  # drain: the queue, then a refresh (nothing to refresh yet)
            for _ in range(3):
                clock.advance(1.5)
                writer.record(p, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available: again")
                await step(lambda: writer._write(writer._queue.get_nowait()))
            await step(writer.refresh)
            await step(writer.refresh)  # nothing grew since
            writer.record(p, "Normal", "Scheduled", "Binding", "Successfully assigned apps/web-1 to n1")
            await step(writer.drain)
            content_types = [s.content_type for s in server.seen]
            counters = (writer.written, writer.failed, writer.dropped)
        return steps, content_types, counters

    steps, content_types, counters = run_async(scenario())
    first = event_body("web-1.17979cfe362a0000", "0/3 nodes are available", stamp="2023-11-14T22:13:20.000000Z")
    series = "/apis/events.k8s.io/v1/namespaces/apps/events/web-1.17979cfe362a0000"
    assert steps == [
        [("POST", EVENTS, first)],
        [("PATCH", series, {"series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:21.500000Z"}})],
        [],
        [],
        [("PATCH", series, {"series": {"count": 4, "lastObservedTime": "2023-11-14T22:13:24.500000Z"}})],
        [],
        [
            (
                "POST",
                EVENTS,
                {
                    **event_body(
                        "web-1.17979cff42628d00",
                        "Successfully assigned apps/web-1 to n1",
                        reason="Scheduled",
                        stamp="2023-11-14T22:13:24.500000Z",
                    ),
                    "action": "Binding",
                    "type": "Normal",
                },
            )
        ],
    ]
    assert content_types == [
        "application/json",
        "application/merge-patch+json",
        "application/merge-patch+json",
        "application/json",
    ]
    assert counters == (4, 0, 0)


def test_another_pod_or_reason_is_another_event_and_an_old_series_starts_afresh(run_async: RunAsync[Any]) -> None:
    clock = VirtualClock(START)

    async def scenario() -> list[tuple[str, str]]:
        async with served(Answers()) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=clock)
            a, b = scheduled_pod("web-1"), scheduled_pod("web-2")
            writer.record(a, "Warning", "FailedScheduling", "Scheduling", "m")
            writer.record(b, "Warning", "FailedScheduling", "Scheduling", "m")
            writer.record(a, "Warning", "FailedScheduling", "Preempting", "m")  # another action
            writer.record(a, "Warning", "FailedScheduling", "Scheduling", "another note, same key")
            await writer.drain()
            clock.advance(writers_module.SERIES_FINISH_SECONDS)
            writer.record(a, "Warning", "FailedScheduling", "Scheduling", "m")
            await writer.drain()
        return [(s.method, s.path.rsplit("/", 1)[-1]) for s in server.seen]

    assert run_async(scenario()) == [
        ("POST", "events"),
        ("POST", "events"),
        ("POST", "events"),
        ("PATCH", "web-1.17979cfe362a0000"),
        ("POST", "events"),
    ]


def test_the_note_is_cut_to_1024_characters(run_async: RunAsync[Any]) -> None:
    async def scenario() -> str:
        async with served(Answers()) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=VirtualClock(START))
            writer.record(scheduled_pod(), "Warning", "FailedScheduling", "Scheduling", "x" * 5000)
            await writer.drain()
            note = server.seen[0].body["note"]
            assert isinstance(note, str)
            return note

    note = run_async(scenario())
    assert len(note) == 1024
    assert note == "x" * 1020 + " ..."


def test_a_full_queue_drops_and_counts(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[int, list[tuple[str, Any]]]:
        async with served(Answers()) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=VirtualClock(START))
            for i in range(writers_module.EVENT_QUEUE_LIMIT + 7):
                writer.record(scheduled_pod(), "Warning", "FailedScheduling", "Scheduling", f"attempt {i}")
            dropped = writer.dropped
            await writer.drain()
            return dropped, [(s.method, (s.body or {}).get("series")) for s in server.seen]

    dropped, seen = run_async(scenario())
    assert dropped == 7
    stamp = "2023-11-14T22:13:20.000000Z"
    assert seen == [
        ("POST", None),
        ("PATCH", {"count": 2, "lastObservedTime": stamp}),
        ("PATCH", {"count": writers_module.EVENT_QUEUE_LIMIT, "lastObservedTime": stamp}),
    ]


def test_a_series_gone_from_the_server_is_created_again_with_its_count(run_async: RunAsync[Any]) -> None:
    clock = VirtualClock(START)

    async def scenario() -> tuple[list[tuple[str, str, Any]], tuple[int, int]]:
        async with served(Answers(patch=[404])) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=clock)
            p = scheduled_pod()
            writer.record(p, "Warning", "FailedScheduling", "Scheduling", "first")
            await writer.drain()
            clock.advance(2)
            writer.record(p, "Warning", "FailedScheduling", "Scheduling", "second")
            await writer.drain()  # PATCH → 404 → POST with the series; nothing left for the refresh
            clock.advance(2)
            writer.record(p, "Warning", "FailedScheduling", "Scheduling", "third")
            await writer.drain()
            return calls(server), (writer.written, writer.failed)

    seen, counters = run_async(scenario())
    name = "web-1.17979cfe362a0000"
    first = event_body(name, "first", stamp="2023-11-14T22:13:20.000000Z")
    two = {"count": 2, "lastObservedTime": "2023-11-14T22:13:22.000000Z"}
    three = {"count": 3, "lastObservedTime": "2023-11-14T22:13:24.000000Z"}
    assert seen == [
        ("POST", EVENTS, first),
        ("PATCH", f"{EVENTS}/{name}", {"series": two}),
        ("POST", EVENTS, {**first, "series": two}),
        ("PATCH", f"{EVENTS}/{name}", {"series": three}),
    ]
    assert counters == (3, 0)


def test_a_failed_create_is_counted_and_the_next_event_tries_again(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[str], tuple[int, int]]:
        async with served(Answers(post=[500], patch=[403])) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=VirtualClock(START))
            for _ in range(3):
                writer.record(scheduled_pod(), "Warning", "FailedScheduling", "Scheduling", "m")
                await writer.drain()
            return [s.method for s in server.seen], (writer.written, writer.failed)

    methods, (written, failed) = run_async(scenario())
    assert methods == ["POST", "POST", "PATCH", "PATCH"]  # 500; created; series 403; the refresh retries
    assert (written, failed) == (2, 2)


def test_run_writes_as_events_come_and_refreshes_series_periodically(
    monkeypatch: pytest.MonkeyPatch, run_async: RunAsync[Any]
) -> None:
    monkeypatch.setattr(writers_module, "SERIES_REFRESH_SECONDS", 0.2)

    async def scenario() -> list[tuple[str, Any]]:
        async with served(Answers()) as (server, client):
            writer = EventWriter(client, hostname="node-a", clock=VirtualClock(START))
            task = asyncio.create_task(writer.run())
            try:
                for _ in range(3):
                    writer.record(scheduled_pod(), "Warning", "FailedScheduling", "Scheduling", "m")
                await until(lambda: len(server.seen) == 2)
                await asyncio.sleep(0.05)
                assert len(server.seen) == 2  # the third is counted, not written
                await until(lambda: len(server.seen) == 3, timeout=2)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return [(s.method, (s.body or {}).get("series", {}).get("count")) for s in server.seen]

    assert run_async(scenario()) == [("POST", None), ("PATCH", 2), ("PATCH", 3)]


def test_events_of_different_pods_are_written_at_once_and_one_pods_in_order(run_async: RunAsync[Any]) -> None:
    """Writing one event at a time lost most Scheduled events at 170 pods/s; a POST must not wait for another."""
    gate = asyncio.Event()
    in_flight: list[str] = []

    async def handle(request: web.Request, seen: Seen) -> web.StreamResponse:
        body = seen.body if isinstance(seen.body, dict) else {}
        if seen.method == "POST":
            in_flight.append(body["regarding"]["name"])
            await gate.wait()  # every create waits until all pods' creates are in flight at once
        return ok(body, code=201 if seen.method == "POST" else 200)

    async def scenario() -> list[tuple[str, str]]:
        async with ApiServer(handle) as server:
            client = KubeClient(server.connection(), max_retries=0, qps=0, sleep=FakeTime().sleep)
            writer = EventWriter(client, hostname="node-a", clock=VirtualClock(START))
            task = asyncio.create_task(writer.run())
            try:
                pods = [scheduled_pod(f"web-{i}") for i in range(writers_module.EVENT_WRITERS)]
                for one in pods:
                    writer.record(one, "Normal", "Scheduled", "Binding", "bound")
                writer.record(pods[0], "Normal", "Scheduled", "Binding", "bound again")  # same key: after its create
                await until(lambda: len(in_flight) == writers_module.EVENT_WRITERS, timeout=5)
                assert not [s for s in server.seen if s.method == "PATCH"]  # the repeat waits for its create
                gate.set()
                await until(lambda: len(server.seen) == writers_module.EVENT_WRITERS + 1, timeout=5)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await client.aclose()
            return [(s.method, s.path.rsplit("/", 1)[-1]) for s in server.seen if s.method == "PATCH"]

    (patch,) = run_async(scenario())
    assert patch[0] == "PATCH" and patch[1].startswith("web-0.")


# ------------------------------------------------------------------------------------------------- status


def condition(
    reason: str, message: str, *, state: str = "False", since: str = "2023-11-14T20:00:00Z"
) -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": state,
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": since,
    }


NOW = "2023-11-14T22:13:20Z"


@pytest.mark.parametrize(
    ("current", "pod_nominated", "wanted_nominated", "patch"),
    [
        pytest.param(
            None,
            "",
            None,
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes", since=NOW)]}},
            id="no-condition-yet",
        ),
        pytest.param(condition("Unschedulable", "0/3 nodes"), "", None, None, id="already-says-so"),
        pytest.param(condition("Unschedulable", "0/3 nodes"), "n2", "n2", None, id="already-says-so-nominated-too"),
        pytest.param(
            condition("Unschedulable", "0/2 nodes"),
            "",
            None,
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes")]}},
            id="other-message-keeps-the-transition-time",
        ),
        pytest.param(
            condition("SchedulerError", "0/3 nodes"),
            "",
            None,
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes")]}},
            id="other-reason-keeps-the-transition-time",
        ),
        pytest.param(
            condition("", "", state="True"),
            "",
            None,
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes", since=NOW)]}},
            id="from-true-transitions-now",
        ),
        pytest.param(
            None,
            "",
            "n2",
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes", since=NOW)], "nominatedNodeName": "n2"}},
            id="nominated-new",
        ),
        pytest.param(
            condition("Unschedulable", "0/3 nodes"),
            "n1",
            "n2",
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes")], "nominatedNodeName": "n2"}},
            id="nominated-changes-with-the-condition-unchanged",
        ),
        pytest.param(
            condition("Unschedulable", "0/3 nodes"),
            "n1",
            "",
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes")], "nominatedNodeName": None}},
            id="nominated-cleared",
        ),
        pytest.param(
            condition("Unschedulable", "0/2 nodes"),
            "n1",
            None,
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes")]}},
            id="nominated-none-leaves-it",
        ),
        pytest.param(
            condition("Unschedulable", "0/2 nodes"),
            "n1",
            "n1",
            {"status": {"conditions": [condition("Unschedulable", "0/3 nodes")]}},
            id="nominated-unchanged-not-sent",
        ),
    ],
)
def test_the_status_patch(
    current: dict[str, Any] | None,
    pod_nominated: str,
    wanted_nominated: str | None,
    patch: dict[str, Any] | None,
    run_async: RunAsync[Any],
) -> None:
    async def scenario() -> dict[str, Any] | None:
        async with served(Answers()) as (_, client):
            writer = StatusWriter(client, clock=VirtualClock(START))
            target = scheduled_pod(conditions=[] if current is None else [current], nominated=pod_nominated)
            return writer.patch_for(_WantedStatus(target, "Unschedulable", "0/3 nodes", wanted_nominated))

    assert run_async(scenario()) == patch


def test_the_status_writer_sends_the_latest_wanted_status_and_skips_what_is_there(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[tuple[str, str, Any]], list[str], tuple[int, int, int]]:
        async with served(Answers()) as (server, client):
            writer = StatusWriter(client, clock=VirtualClock(START))
            fresh = scheduled_pod("web-1")
            settled = scheduled_pod("web-2", conditions=[condition("Unschedulable", "0/3 nodes")])
            writer.request(fresh, "Unschedulable", "0/2 nodes", None)
            writer.request(settled, "Unschedulable", "0/3 nodes", None)
            writer.request(fresh, "SchedulerError", "etcd timed out", "n4")  # replaces the first
            task = asyncio.create_task(writer.run())
            try:
                await until(lambda: writer.written + writer.skipped == 2)
                await asyncio.sleep(0.05)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return calls(server), [s.content_type for s in server.seen], (writer.written, writer.skipped, writer.failed)

    seen, content_types, counters = run_async(scenario())
    assert seen == [
        (
            "PATCH",
            "/api/v1/namespaces/apps/pods/web-1/status",
            {
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "SchedulerError",
                            "message": "etcd timed out",
                            "lastProbeTime": None,
                            "lastTransitionTime": NOW,
                        }
                    ],
                    "nominatedNodeName": "n4",
                }
            },
        )
    ]
    assert content_types == ["application/strategic-merge-patch+json"]
    assert counters == (1, 1, 0)


@pytest.mark.parametrize(
    ("code", "counters"),
    [
        pytest.param(404, (0, 0), id="404-pod-gone-not-a-failure"),
        pytest.param(500, (0, 1), id="500-failure"),
        pytest.param(422, (0, 1), id="422-failure"),
        pytest.param(0, (1, 0), id="ok"),
    ],
)
def test_status_write_outcomes(code: int, counters: tuple[int, int], run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[int, int, int]:
        async with served(Answers(patch=[code])) as (server, client):
            writer = StatusWriter(client, clock=VirtualClock(START))
            writer.request(scheduled_pod(), "Unschedulable", "0/3 nodes", None)
            await writer.drain()
            return writer.written, writer.failed, len(server.seen)

    written, failed, requests = run_async(scenario())
    assert (written, failed) == counters
    assert requests == 1


def test_supersede_drops_a_queued_status(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[int, int]:
        async with served(Answers()) as (server, client):
            writer = StatusWriter(client, clock=VirtualClock(START))
            writer.request(scheduled_pod("web-1"), "Unschedulable", "0/3 nodes", None)
            writer.request(scheduled_pod("web-2"), "Unschedulable", "0/3 nodes", None)
            await writer.supersede("uid-web-1")
            await writer.supersede("uid-never-seen")
            task = asyncio.create_task(writer.run())
            try:
                await until(lambda: writer.written == 1)
                await asyncio.sleep(0.05)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return len(server.seen), writer.written

    assert run_async(scenario()) == (1, 1)


def test_supersede_waits_for_a_status_in_flight(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[bool, list[str]]:
        gate = asyncio.Event()
        order: list[str] = []
        answers = Answers(patch_gate=gate)
        async with served(answers) as (server, client):
            writer = StatusWriter(client, clock=VirtualClock(START))
            task = asyncio.create_task(writer.run())
            try:
                writer.request(scheduled_pod("web-1"), "Unschedulable", "0/3 nodes", None)
                await until(lambda: len(server.seen) == 1)  # the PATCH is at the server, held

                async def bind() -> None:
                    await writer.supersede("uid-web-1")
                    order.append(f"superseded (written={writer.written})")

                binding = asyncio.create_task(bind())
                await asyncio.sleep(0.1)
                waited = not binding.done()
                order.append("released")
                gate.set()
                await binding
                await writer.supersede("uid-web-1")  # nothing in flight now: returns at once
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return waited, order

    waited, order = run_async(scenario())
    assert waited
    assert order == ["released", "superseded (written=1)"]
