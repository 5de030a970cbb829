"""Reflector against a scripted API server: list pages and watch connections answered in a set order.

Checked with the exact requests the server saw and the exact handler calls: paginated lists; the watch query (the
list's version, bookmarks, a ``timeoutSeconds`` drawn in range); bookmarks move the version without a handler call;
410 Gone, in the stream or as the watch's status, relists at once and diffs (delete / update / add / nothing); any
other failure reconnects from the last version after the backoff (the delays the reflector asks its injected sleep
for; the jitter is pinned to 1.0), which doubles and is reset by a watch that delivered; a watch closed at once
with nothing in it backs off too; malformed objects go to ``on_invalid`` and leave the cache; ``synced`` is set by
the first list only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from aiohttp import web
from kubetest_apiserver import ApiServer, FakeTime, FixedJitter, Seen, ok, pod, status, stream

from kubesched.api.objects import Pod
from kubesched.backends.kube import reflector as reflector_module
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.informers import PODS
from kubesched.backends.kube.reflector import Reflector, object_key

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]
Line = Mapping[str, Any] | bytes

BACKOFF = 0.3  # INITIAL_BACKOFF in these tests; FixedJitter makes every delay exactly the nominal one
FIELDS = "spec.nodeName="


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reflector_module, "INITIAL_BACKOFF", BACKOFF)


# ---------------------------------------------------------------------------------------------- the script


def page(items: list[dict[str, Any]], rv: str, continue_token: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if continue_token:
        meta["continue"] = continue_token
    return {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}


def event(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(rv: str) -> dict[str, Any]:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}})


def error_event(code: int, reason: str, message: str) -> dict[str, Any]:
    status_object = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    return event("ERROR", {**status_object, "message": message, "metadata": {}})


@dataclass
class Watch:
    """One watch connection: ``lines``, then ``end`` (hold / close / cut); or ``code``: answer with that status."""

    lines: list[Line] = field(default_factory=list)
    end: str = "hold"
    code: int = 0


@dataclass
class Script:
    """The answers for one collection, in order. An exhausted list repeats its last page; watches then hold."""

    pages: list[dict[str, Any] | int]
    watches: list[Watch] = field(default_factory=list)
    list_gate: asyncio.Event | None = None  # when given, the list request numbered hold_list waits for it
    hold_list: int = 0
    server: ApiServer | None = None

    async def handle(self, request: web.Request, seen: Seen) -> web.StreamResponse:
        assert self.server is not None
        if seen.query.get("watch") == "true":
            plan = self.watches.pop(0) if self.watches else Watch()
            if plan.code:
                return status(plan.code, f"watch answered {plan.code}", "Expired" if plan.code == 410 else "")
            return await stream(request, self.server, plan.lines, end=plan.end)
        lists = [s for s in self.server.seen if not s.query.get("watch")]
        if self.list_gate is not None and len(lists) - 1 == self.hold_list:
            await self.list_gate.wait()
        answer = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        if isinstance(answer, int):
            return status(answer, f"list answered {answer}")
        return ok(answer)


class Recorder:
    """The handler: every call as a tuple; objects are named ``name@resourceVersion``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.uids: list[tuple[str, str]] = []
        self.cache: Callable[[], list[str]] = list
        self.cached_at_invalid: list[list[str]] = []  # what the reflector held when on_invalid was called

    @staticmethod
    def label(obj: Pod) -> str:
        return f"{obj.metadata.name}@{obj.metadata.resource_version}"

    def on_add(self, obj: Pod) -> None:
        self.calls.append(("add", self.label(obj)))
        self.uids.append(("add", obj.uid))

    def on_update(self, old: Pod, new: Pod) -> None:
        self.calls.append(("update", self.label(old), self.label(new)))

    def on_delete(self, obj: Pod) -> None:
        self.calls.append(("delete", self.label(obj)))
        self.uids.append(("delete", obj.uid))

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        self.calls.append(("invalid", object_key(raw), str(error)))
        self.cached_at_invalid.append(self.cache())


class Backoffs:
    """The reflector's sleep: every backoff it asks for is recorded, with whether it was synced then, and taken at
    once (a yield to the loop)."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.synced: list[bool] = []
        self.reflector: Reflector[Pod] | None = None

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.synced.append(self.reflector is not None and self.reflector.synced.is_set())
        await asyncio.sleep(0)


@dataclass
class Run:
    reflector: Reflector[Pod]
    recorder: Recorder
    server: ApiServer
    task: asyncio.Task[None]
    backoffs: Backoffs

    def requests(self) -> list[tuple[str, ...]]:
        """("list", continue) and ("watch", resourceVersion), in order."""
        return [
            ("watch", s.query["resourceVersion"]) if s.query.get("watch") else ("list", s.query.get("continue", ""))
            for s in self.server.seen
        ]

    def watches(self) -> list[Seen]:
        return [s for s in self.server.seen if s.query.get("watch")]


@asynccontextmanager
async def reflecting(script: Script, **options: Any) -> AsyncIterator[Run]:
    """Run a Reflector over pods against ``script`` until the block ends; re-raise if it died."""
    async with ApiServer(script.handle) as server:
        script.server = server
        fake = FakeTime()  # the client's own retries are off: every failure reaches the reflector
        client = KubeClient(server.connection(), max_retries=0, sleep=fake.sleep)
        recorder = Recorder()
        backoffs = Backoffs()
        reflector: Reflector[Pod] = Reflector(
            client, PODS, recorder, rng=FixedJitter(), sleep=backoffs.sleep, **options
        )
        backoffs.reflector = reflector
        recorder.cache = lambda: sorted(p.metadata.name for p in reflector.items())
        task = asyncio.create_task(reflector.run())
        run = Run(reflector, recorder, server, task, backoffs)
        try:
            yield run
            assert not task.done(), f"the reflector stopped: {task}"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.aclose()


async def wait_for(run: Run, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if run.task.done():
            raise AssertionError(f"the reflector stopped: {run.task.exception()!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; requests {run.requests()}, calls {run.recorder.calls}")
        await asyncio.sleep(0.005)


def watch_count(run: Run, count: int) -> Callable[[], bool]:
    return lambda: len(run.watches()) >= count


# --------------------------------------------------------------------------------------------------- lists


def test_a_paginated_list_delivers_every_page_then_watches_from_its_version(run_async: RunAsync[Any]) -> None:
    script = Script(
        pages=[
            page([pod("a", "3")], "10", "token-1"),
            page([pod("b", "4"), pod("c", "5")], "10", "token-2"),
            page([pod("d", "6")], "10"),
        ]
    )

    async def scenario() -> tuple[list[Seen], list[tuple[str, ...]], int, int, str]:
        async with reflecting(script, field_selector=FIELDS, label_selector="app=web") as run:
            await wait_for(run, watch_count(run, 1))
            reflector = run.reflector
            return run.server.seen, run.recorder.calls, len(reflector), reflector.lists, reflector.resource_version

    seen, calls, cached, lists, version = run_async(scenario())
    selectors = {"fieldSelector": FIELDS, "labelSelector": "app=web"}
    assert [(s.method, s.path) for s in seen] == [("GET", "/api/v1/pods")] * 4
    assert [s.query for s in seen[:3]] == [
        {**selectors, "limit": "500"},
        {**selectors, "limit": "500", "continue": "token-1"},
        {**selectors, "limit": "500", "continue": "token-2"},
    ]
    watch = seen[3].query
    assert 300 <= int(watch.pop("timeoutSeconds")) <= 600
    assert watch == {**selectors, "watch": "true", "allowWatchBookmarks": "true", "resourceVersion": "10"}
    assert calls == [("add", "a@3"), ("add", "b@4"), ("add", "c@5"), ("add", "d@6")]
    assert (cached, lists, version) == (4, 1, "10")


def test_synced_is_set_by_the_first_list_only(run_async: RunAsync[Any]) -> None:
    gate = asyncio.Event()
    script = Script(
        pages=[500, page([pod("a", "1")], "10"), page([], "20")],
        watches=[Watch([error_event(410, "Expired", "too old")])],
        list_gate=gate,
        hold_list=1,  # the second list (after the failed first one) waits
    )

    async def scenario() -> tuple[list[bool], list[tuple[str, ...]], list[tuple[str, ...]]]:
        async with reflecting(script) as run:
            synced = run.reflector.synced
            states = [synced.is_set()]
            await wait_for(run, lambda: len(run.server.seen) >= 2)  # the failed list, then the held one
            await asyncio.sleep(0.05)
            states.append(synced.is_set())
            gate.set()
            await synced.wait()
            await wait_for(run, watch_count(run, 2))  # the 410 relisted an empty list: still synced
            states.append(synced.is_set())
            return states, run.requests(), run.recorder.calls

    states, requests, calls = run_async(scenario())
    assert states == [False, False, True]
    assert requests == [("list", ""), ("list", ""), ("watch", "10"), ("list", ""), ("watch", "20")]
    assert calls == [("add", "a@1"), ("delete", "a@1")]


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(500, id="http-500"),
        pytest.param({"kind": "Status", "items": "none"}, id="not-a-list"),
    ],
)
def test_a_failed_list_is_retried_after_the_backoff_and_not_synced_meanwhile(
    failure: dict[str, Any] | int, run_async: RunAsync[Any]
) -> None:
    script = Script(pages=[failure, page([pod("a", "1")], "10")])

    async def scenario() -> tuple[list[float], list[bool], list[tuple[str, ...]]]:
        async with reflecting(script) as run:
            await wait_for(run, watch_count(run, 1))
            return run.backoffs.sleeps, run.backoffs.synced, run.requests()

    backoffs, synced_while_backing_off, requests = run_async(scenario())
    assert requests == [("list", ""), ("list", ""), ("watch", "10")]
    assert backoffs == [BACKOFF]
    assert synced_while_backing_off == [False]


# -------------------------------------------------------------------------------------------------- watches


def test_each_watch_draws_its_timeout_and_bookmarks_move_the_version(run_async: RunAsync[Any]) -> None:
    script = Script(
        pages=[page([pod("a", "1")], "10")],
        watches=[
            Watch([bookmark("11")], end="close"),
            Watch([bookmark("12"), event("WEIRD", {"metadata": {"resourceVersion": "99"}})], end="close"),
            Watch([bookmark("13")], end="close"),
            Watch([bookmark("14")], end="close"),
            Watch([bookmark("15")], end="close"),
        ],
    )

    async def scenario() -> tuple[list[Seen], list[tuple[str, ...]], list[tuple[str, ...]], str, int]:
        async with reflecting(script, watch_timeout=(5, 9)) as run:
            await wait_for(run, watch_count(run, 6))
            calls = run.recorder.calls
            return run.watches(), run.requests(), calls, run.reflector.resource_version, run.reflector.watches

    watches, requests, calls, version, count = run_async(scenario())
    assert requests == [("list", ""), *(("watch", rv) for rv in ("10", "11", "12", "13", "14", "15"))]
    assert all(5 <= int(w.query["timeoutSeconds"]) <= 9 for w in watches)
    assert len({w.query["timeoutSeconds"] for w in watches}) > 1  # drawn for each connection
    assert calls == [("add", "a@1")]  # bookmarks (and unknown event types) never reach the handler
    assert (version, count) == ("15", 6)


def test_watch_events_reach_the_handler_and_move_the_version(run_async: RunAsync[Any]) -> None:
    script = Script(
        pages=[page([pod("a", "1"), pod("b", "2")], "10")],
        watches=[
            Watch(
                [
                    event("MODIFIED", pod("a", "11")),
                    event("ADDED", pod("c", "12")),
                    event("DELETED", pod("b", "13")),
                    event("DELETED", pod("never-seen", "14")),
                    event("MODIFIED", pod("c", "12")),  # a repeat: nothing new
                    event("ADDED", pod("a", "15", uid="uid-a-2")),  # deleted and created while we looked away
                ],
                end="close",
            ),
        ],
    )

    async def scenario() -> tuple[list[tuple[str, ...]], list[tuple[str, str]], list[tuple[str, ...]], int]:
        async with reflecting(script) as run:
            await wait_for(run, watch_count(run, 2))
            return run.recorder.calls, run.recorder.uids, run.requests(), len(run.reflector)

    calls, uids, requests, cached = run_async(scenario())
    assert calls == [
        ("add", "a@1"),
        ("add", "b@2"),
        ("update", "a@1", "a@11"),
        ("add", "c@12"),
        ("delete", "b@2"),
        ("delete", "a@11"),
        ("add", "a@15"),
    ]
    assert uids[-2:] == [("delete", "uid-a"), ("add", "uid-a-2")]
    assert requests == [("list", ""), ("watch", "10"), ("watch", "15")]  # a normal close: at once, from the last
    assert cached == 2


@pytest.mark.parametrize(
    ("gone", "before"),
    [
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11")), error_event(410, "Expired", "too old resource version")]),
            [("update", "a@1", "a@11")],
            id="error-event-after-an-event",
        ),
        pytest.param(Watch([error_event(410, "Gone", "gone")]), [], id="error-event-reason-gone"),
        pytest.param(Watch(code=410), [], id="http-410"),
    ],
)
def test_410_relists_at_once_and_diffs_against_the_cache(
    gone: Watch, before: list[tuple[str, ...]], run_async: RunAsync[Any]
) -> None:
    a_now = "11" if before else "1"
    script = Script(
        pages=[
            page([pod("a", "1"), pod("b", "2"), pod("c", "3"), pod("e", "4")], "10"),
            page([pod("a", a_now), pod("b", "21"), pod("d", "22"), pod("e", "23", uid="uid-e-2")], "30"),
        ],
        watches=[gone],
    )

    async def scenario() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], list[float], int, int]:
        async with reflecting(script) as run:
            await wait_for(run, watch_count(run, 2))
            return run.recorder.calls, run.requests(), run.backoffs.sleeps, run.reflector.lists, len(run.reflector)

    calls, requests, backoffs, lists, cached = run_async(scenario())
    assert calls == [
        ("add", "a@1"),
        ("add", "b@2"),
        ("add", "c@3"),
        ("add", "e@4"),
        *before,
        # the relist: a unchanged (nothing), b changed, d new, e a new object under the old name, c vanished
        ("update", "b@2", "b@21"),
        ("add", "d@22"),
        ("delete", "e@4"),
        ("add", "e@23"),
        ("delete", "c@3"),
    ]
    assert requests == [("list", ""), ("watch", "10"), ("list", ""), ("watch", "30")]
    assert backoffs == []  # no backoff before the relist
    assert (lists, cached) == (2, 4)


@pytest.mark.parametrize(
    ("failure", "resume_from", "calls"),
    [
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11")), error_event(500, "InternalError", "etcd hiccup")]),
            "11",
            [("update", "a@1", "a@11")],
            id="error-event-500",
        ),
        pytest.param(
            Watch([error_event(429, "TooManyRequests", "slow down")]), "10", [], id="error-event-429-before-events"
        ),
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11")), event("ERROR", {"message": "no code"})]),
            "11",
            [("update", "a@1", "a@11")],
            id="error-event-without-code",
        ),
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11")), b"<html>proxy error</html>\n"]),
            "11",
            [("update", "a@1", "a@11")],
            id="non-json-line",
        ),
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11")), b'{"type": "ADDED"}\n']),
            "11",
            [("update", "a@1", "a@11")],
            id="event-without-object",
        ),
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11")), b'{"type": "ADDED", "object": 5}\n']),
            "11",
            [("update", "a@1", "a@11")],
            id="object-not-a-mapping",
        ),
        pytest.param(
            Watch([event("MODIFIED", pod("a", "11"))], end="cut"), "11", [("update", "a@1", "a@11")], id="cut"
        ),
        pytest.param(Watch(code=500), "10", [], id="http-500"),
        pytest.param(Watch(code=403), "10", [], id="http-403"),
    ],
)
def test_other_failures_reconnect_from_the_last_version_after_the_backoff(
    failure: Watch, resume_from: str, calls: list[tuple[str, ...]], run_async: RunAsync[Any]
) -> None:
    script = Script(pages=[page([pod("a", "1")], "10")], watches=[failure])

    async def scenario() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], list[float], int, str]:
        async with reflecting(script) as run:
            await wait_for(run, watch_count(run, 2))
            return (
                run.recorder.calls,
                run.requests(),
                run.backoffs.sleeps,
                run.reflector.lists,
                run.reflector.last_error,
            )

    got, requests, backoffs, lists, last_error = run_async(scenario())
    assert got == [("add", "a@1"), *calls]
    assert requests == [("list", ""), ("watch", "10"), ("watch", resume_from)]  # no relist
    assert lists == 1
    assert backoffs == [BACKOFF]
    assert last_error


def test_the_backoff_doubles_and_a_watch_that_delivered_resets_it(run_async: RunAsync[Any]) -> None:
    script = Script(
        pages=[page([pod("a", "1")], "10")],
        watches=[
            Watch(code=500),
            Watch(code=500),
            Watch([event("MODIFIED", pod("a", "11"))], end="cut"),  # it worked, then broke
            Watch(code=500),
            Watch([bookmark("12")], end="cut"),  # a bookmark is a working stream too
        ],
    )

    async def scenario() -> tuple[list[float], list[tuple[str, ...]]]:
        async with reflecting(script) as run:
            await wait_for(run, watch_count(run, 6), timeout=10)
            return run.backoffs.sleeps, run.requests()

    backoffs, requests = run_async(scenario())
    assert requests == [("list", ""), *(("watch", rv) for rv in ("10", "10", "10", "11", "11", "12"))]
    assert backoffs == pytest.approx([BACKOFF, 2 * BACKOFF, BACKOFF, 2 * BACKOFF, BACKOFF])


def test_a_watch_closed_at_once_with_nothing_in_it_backs_off(run_async: RunAsync[Any]) -> None:
    # A proxy that ends every watch at once must not make the reflector reconnect in a tight loop.
    script = Script(pages=[page([pod("a", "1")], "10")], watches=[Watch(end="close")] * 3)

    async def scenario() -> tuple[list[float], list[tuple[str, ...]]]:
        async with reflecting(script) as run:
            await wait_for(run, watch_count(run, 4), timeout=10)
            return run.backoffs.sleeps, run.requests()

    backoffs, requests = run_async(scenario())
    assert requests == [("list", ""), *(("watch", "10"),) * 4]
    assert backoffs == pytest.approx([BACKOFF, 2 * BACKOFF, 4 * BACKOFF])


# ------------------------------------------------------------------------------------------ malformed objects


def broken(name: str, rv: str, **changes: Any) -> dict[str, Any]:
    raw = pod(name, rv)
    for section, values in changes.items():
        raw[section] = {**raw[section], **values}
    return raw


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        pytest.param(
            broken("a", "11", spec={"containers": "nginx"}),
            "pods default/a: spec.containers: expected a list, got string",
            id="containers-a-string",
        ),
        pytest.param(
            broken("a", "11", spec={"containers": []}),
            "pods default/a: spec.containers: Required value",
            id="no-containers",
        ),
        pytest.param(
            broken("a", "11", status={"phase": "Exploded"}),
            'pods default/a: status.phase: Unsupported value: "Exploded"',
            id="unknown-phase",
        ),
        pytest.param(
            broken("a", "11", metadata={"labels": ["x"]}),
            "pods default/a: metadata.labels: expected a mapping, got list",
            id="labels-a-list",
        ),
    ],
)
def test_a_malformed_object_goes_to_on_invalid_and_leaves_the_cache(
    bad: dict[str, Any], problem: str, run_async: RunAsync[Any]
) -> None:
    script = Script(
        pages=[page([pod("a", "1"), pod("b", "2")], "10")],
        watches=[Watch([event("MODIFIED", bad), event("MODIFIED", pod("b", "12")), event("MODIFIED", pod("a", "13"))])],
    )

    async def scenario() -> tuple[list[tuple[str, ...]], list[list[str]], list[str], str]:
        async with reflecting(script) as run:
            await wait_for(run, lambda: len(run.recorder.calls) >= 6)
            recorder = run.recorder
            return recorder.calls, recorder.cached_at_invalid, recorder.cache(), run.reflector.resource_version

    calls, at_invalid, cached, version = run_async(scenario())
    assert calls[:3] == [("add", "a@1"), ("add", "b@2"), ("delete", "a@1")]
    invalid = calls[3]
    assert invalid[:2] == ("invalid", "default/a")
    assert invalid[2].startswith(problem)
    assert calls[4:] == [("update", "b@2", "b@12"), ("add", "a@13")]  # the reflector went on; a is new again
    assert at_invalid == [["b"]]
    assert cached == ["a", "b"]
    assert version == "13"


def test_a_malformed_object_in_the_list_is_reported_and_not_cached(run_async: RunAsync[Any]) -> None:
    bad = broken("a", "1", spec={"containers": "nginx"})
    script = Script(
        pages=[page([bad, pod("b", "2")], "10")],
        watches=[Watch([event("MODIFIED", broken("a", "11", spec={"containers": "x"})), event("DELETED", bad)])],
    )

    async def scenario() -> tuple[list[tuple[str, ...]], bool, int]:
        async with reflecting(script) as run:
            await run.reflector.synced.wait()
            await wait_for(run, lambda: len(run.recorder.calls) >= 3)
            await wait_for(run, lambda: run.reflector.resource_version == "1")
            return run.recorder.calls, run.reflector.synced.is_set(), len(run.reflector)

    calls, synced, cached = run_async(scenario())
    assert [c[:2] for c in calls] == [("invalid", "default/a"), ("add", "b@2"), ("invalid", "default/a")]
    assert synced
    assert cached == 1  # and the DELETED of an object never cached calls nothing


def test_an_object_whose_metadata_is_not_a_mapping_is_reported(run_async: RunAsync[Any]) -> None:
    mangled = {"kind": "Pod", "apiVersion": "v1", "metadata": ["not", "a", "mapping"], "spec": {}}
    script = Script(
        pages=[page([pod("a", "1")], "10")],
        watches=[Watch([event("ADDED", mangled), event("MODIFIED", pod("a", "11"))])],
    )

    async def scenario() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
        async with reflecting(script) as run:
            await wait_for(run, lambda: len(run.recorder.calls) >= 3)
            return run.recorder.calls, run.requests()

    calls, requests = run_async(scenario())
    assert [calls[0], calls[1][:2], calls[2]] == [("add", "a@1"), ("invalid", ""), ("update", "a@1", "a@11")]
    assert calls[1][2] == "pods : metadata: expected a mapping, got list"
    assert requests == [("list", ""), ("watch", "10")]
