"""PodStreams: the unassigned-pod and assigned-pod watches merged into one pod informer's events.

The handler is the scheduler's view (:class:`SchedulerView`): it checks every call the way an informer's
consumer may rely on it (an add for a pod it does not have, an update or a delete for one it has, with the
version it has) and that a pod, once seen assigned, never goes back to a pending version and leaves only
when the assigned watch says so. Checked: every interleaving of one pod's events on both watches while it is
bound; deletes of pending and of assigned pods; random interleavings of several pods' lives (hypothesis);
and the Informers end to end against the scripted API server (selectors, sync, a binding in both orders).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from kubetest_apiserver import ApiServer, Seen, ok, pod, stream, until

from kubesched.api.objects import Node, Pod
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.informers import ASSIGNED_PODS, Informers, PodStreams, unassigned_pods_of
from kubesched.backends.kube.reflector import Reflector
from kubesched.framework.events import ActionType, EventResource
from kubesched.framework.listers import ListerStores

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]


def decoded(name: str, rv: str, *, node: str = "", uid: str | None = None, phase: str = "Pending") -> Pod:
    raw = pod(name, rv, node=node, uid=uid)
    raw["status"]["phase"] = phase
    return Pod.from_dict(raw, f"pods default/{name}")


def label(p: Pod) -> str:
    return f"{p.metadata.name}@{p.metadata.resource_version}{'>' + p.spec.node_name if p.spec.node_name else ''}"


class SchedulerView:
    """A ClusterEventHandler that keeps the pods as the scheduler would and notes every inconsistency."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self.calls: list[tuple[str, ...]] = []
        self.problems: list[str] = []
        self.seen_assigned: set[str] = set()
        self.assigned_deleted: set[str] = set()  # uids whose deletion the assigned watch delivered

    def _arrives(self, new: Pod) -> None:
        if new.spec.node_name:
            self.seen_assigned.add(new.uid)
        elif new.uid in self.seen_assigned:
            self.problems.append(f"{label(new)}: a pending version after an assigned one")

    def on_pod_add(self, pod: Pod) -> None:
        self.calls.append(("add", label(pod)))
        if pod.uid in self.pods:
            self.problems.append(f"add of {label(pod)}, which the view has")
        self._arrives(pod)
        self.pods[pod.uid] = pod

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.calls.append(("update", label(old), label(new)))
        if self.pods.get(old.uid) is not old:
            self.problems.append(f"update of {label(old)}, which is not the version the view has")
        self._arrives(new)
        self.pods[new.uid] = new

    def on_pod_delete(self, pod: Pod) -> None:
        self.calls.append(("delete", label(pod)))
        if pod.uid not in self.pods:
            self.problems.append(f"delete of {label(pod)}, which the view does not have")
        if pod.uid in self.seen_assigned and pod.uid not in self.assigned_deleted:
            self.problems.append(f"{label(pod)} deleted after it was assigned")
        self.pods.pop(pod.uid, None)

    def on_node_add(self, node: Node) -> None:
        self.calls.append(("node-add", node.metadata.name))

    def on_object_event(self, resource: EventResource, action: ActionType, old: object, new: object) -> None:
        self.calls.append(("object", resource.value))

    def on_node_update(self, old: Node, new: Node) -> None:
        self.calls.append(("node-update", new.metadata.name))

    def on_node_delete(self, node: Node) -> None:
        self.calls.append(("node-delete", node.metadata.name))


def invalid_sink(kind: str, raw: Mapping[str, Any], error: Exception) -> None:
    raise AssertionError(f"unexpected invalid {kind}: {error}")


class Step:
    """One watch event: ``stream`` is "unassigned" or "assigned"; ``kind`` add / update / delete."""

    __slots__ = ("kind", "pod", "stream")

    def __init__(self, stream: str, kind: str, pod: Pod) -> None:
        self.stream = stream
        self.kind = kind
        self.pod = pod

    def __repr__(self) -> str:  # short, for hypothesis' falsifying examples
        return f"{self.stream}:{self.kind}:{label(self.pod)}"

    @property
    def short(self) -> str:
        return f"{self.stream[0]}{self.kind}"


def deliver(streams: PodStreams, view: SchedulerView, step: Step) -> None:
    target = streams.assigned if step.stream == "assigned" else streams.unassigned
    if step.kind == "delete":
        if step.stream == "assigned":
            view.assigned_deleted.add(step.pod.uid)
        target.on_delete(step.pod)
    else:
        target.on_add(step.pod)  # a reflector's update goes the same way as an add (_PodStream.on_update)


def interleavings(first: list[Step], second: list[Step]) -> list[list[Step]]:
    """Every merge of the two sequences that keeps each one's order."""
    total = len(first) + len(second)
    merged = []
    for positions in itertools.combinations(range(total), len(second)):
        a, b = iter(first), iter(second)
        merged.append([next(b) if i in positions else next(a) for i in range(total)])
    return merged


PENDING = decoded("p", "1")
PATCHED = decoded("p", "2")  # our PodScheduled=False patch, on the unassigned watch
BOUND = decoded("p", "3", node="n1")
# What each watch sees while p is bound: the unassigned watch's DELETED carries the previous object.
UNASSIGNED = [
    Step("unassigned", "add", PENDING),
    Step("unassigned", "update", PATCHED),
    Step("unassigned", "delete", PATCHED),
]
ASSIGNED = [Step("assigned", "add", BOUND)]
BINDINGS = interleavings(UNASSIGNED, ASSIGNED)


@pytest.mark.parametrize("steps", [pytest.param(steps, id="-".join(s.short for s in steps)) for steps in BINDINGS])
def test_a_pod_getting_bound_ends_assigned_whatever_the_order(steps: list[Step]) -> None:
    view = SchedulerView()
    streams = PodStreams(view, invalid_sink)
    for step in steps:
        deliver(streams, view, step)
    assert view.problems == []
    assert {uid: label(p) for uid, p in view.pods.items()} == {"uid-p": "p@3>n1"}
    assert streams.known == {"uid-p": BOUND}


@pytest.mark.parametrize(
    ("steps", "calls"),
    [
        pytest.param(
            UNASSIGNED[:1] + ASSIGNED + UNASSIGNED[2:],
            [("add", "p@1"), ("update", "p@1", "p@3>n1")],
            id="assigned-first-one-update",
        ),
        pytest.param(
            UNASSIGNED[:1] + UNASSIGNED[2:] + ASSIGNED,
            [("add", "p@1"), ("delete", "p@1"), ("add", "p@3>n1")],  # the version the view has
            id="deleted-first-leaves-the-queue-then-arrives-assigned",
        ),
    ],
)
def test_the_calls_for_each_order(steps: list[Step], calls: list[tuple[str, ...]]) -> None:
    view = SchedulerView()
    streams = PodStreams(view, invalid_sink)
    for step in steps:
        deliver(streams, view, step)
    assert view.calls == calls


def test_a_real_delete_of_a_pending_pod_is_a_delete() -> None:
    view = SchedulerView()
    streams = PodStreams(view, invalid_sink)
    for step in [Step("unassigned", "add", PENDING), Step("unassigned", "update", PATCHED)]:
        deliver(streams, view, step)
    deliver(streams, view, Step("unassigned", "delete", decoded("p", "4")))
    assert view.calls == [("add", "p@1"), ("update", "p@1", "p@2"), ("delete", "p@2")]
    assert view.pods == {}
    assert streams.known == {}
    assert view.problems == []


@pytest.mark.parametrize(
    "final",
    [
        pytest.param(decoded("p", "5", node="n1", phase="Succeeded"), id="succeeded"),
        pytest.param(decoded("p", "5", node="n1", phase="Failed"), id="failed"),
        pytest.param(decoded("p", "5", node="n1", phase="Running"), id="deleted-while-running"),
    ],
)
def test_an_assigned_pod_leaving_the_assigned_watch_is_a_delete(final: Pod) -> None:
    view = SchedulerView()
    streams = PodStreams(view, invalid_sink)
    running = decoded("p", "4", node="n1", phase="Running")
    for step in [*ASSIGNED, Step("assigned", "update", running), Step("assigned", "delete", final)]:
        deliver(streams, view, step)
    assert view.calls == [("add", "p@3>n1"), ("update", "p@3>n1", "p@4>n1"), ("delete", "p@4>n1")]
    assert view.pods == {}
    assert streams.known == {}
    assert view.problems == []


def test_a_lagging_unassigned_watch_after_the_pod_was_bound_and_deleted_changes_nothing() -> None:
    # The assigned watch saw p bound and deleted; the unassigned watch (reconnecting, say) then replays our
    # status patch and p leaving its selector. The view saw p go once, and p does not come back as pending.
    view = SchedulerView()
    streams = PodStreams(view, invalid_sink)
    steps = [
        Step("unassigned", "add", PENDING),
        *ASSIGNED,
        Step("assigned", "delete", decoded("p", "4", node="n1")),
        Step("unassigned", "update", PATCHED),
        Step("unassigned", "delete", PATCHED),
    ]
    for step in steps:
        deliver(streams, view, step)
    assert view.calls == [("add", "p@1"), ("update", "p@1", "p@3>n1"), ("delete", "p@3>n1")]
    assert view.problems == []
    assert (streams.known, streams.pending, streams.gone) == ({}, set(), set())


def test_invalid_pods_are_reported_with_the_kind() -> None:
    reported: list[tuple[str, str]] = []
    streams = PodStreams(SchedulerView(), lambda kind, raw, error: reported.append((kind, str(error))))
    streams.unassigned.on_invalid({"metadata": {"name": "x"}}, ValueError("bad"))
    streams.assigned.on_invalid({"metadata": {"name": "y"}}, ValueError("worse"))
    assert reported == [("pods", "bad"), ("pods", "worse")]


# ------------------------------------------------------------------------------- several pods, interleaved


@st.composite
def pod_lives(draw: st.DrawFn, index: int) -> tuple[str, list[Step], list[Step]]:
    """One pod's events on each watch, by what happens to it."""
    name = f"p{index}"
    fate = draw(st.sampled_from(["bound", "bound-then-deleted", "deleted-pending", "created-bound"]))
    rv = itertools.count(1)
    unassigned: list[Step] = []
    assigned: list[Step] = []
    if fate != "created-bound":
        pending = decoded(name, str(next(rv)))
        unassigned.append(Step("unassigned", "add", pending))
        for _ in range(draw(st.integers(0, 2))):
            pending = decoded(name, str(next(rv)))
            unassigned.append(Step("unassigned", "update", pending))
        if fate == "deleted-pending":
            unassigned.append(Step("unassigned", "delete", decoded(name, str(next(rv)))))
            return fate, unassigned, assigned
        unassigned.append(Step("unassigned", "delete", pending))  # left the selector: the previous object
    bound = decoded(name, str(next(rv)), node="n1")
    assigned.append(Step("assigned", "add", bound))
    for _ in range(draw(st.integers(0, 2))):
        assigned.append(Step("assigned", "update", decoded(name, str(next(rv)), node="n1", phase="Running")))
    if fate in ("bound-then-deleted", "created-bound") and draw(st.booleans()):
        assigned.append(Step("assigned", "delete", decoded(name, str(next(rv)), node="n1", phase="Succeeded")))
    return fate, unassigned, assigned


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[str, list[Step], list[Step]]], list[Step]]:
    """Several pods' lives, their watch events interleaved in any order that keeps each watch's own order.

    One limit: the unassigned watch delivers a pod's creation before the assigned watch delivers its deletion.
    (A watch lagging behind a pod's whole life shows the handler a pending pod that is gone already, until
    that watch's DELETED follows a moment later; PodStreams cannot tell without remembering every pod.)
    """
    lives = [draw(pod_lives(i)) for i in range(draw(st.integers(1, 4)))]
    queues = {(i, name): list(q) for i, (_, u, a) in enumerate(lives) for name, q in (("u", u), ("a", a)) if q}
    created = {i for i, (_, unassigned, _) in enumerate(lives) if not unassigned}
    order: list[Step] = []
    while queues:
        ready = [
            key
            for key, queue in queues.items()
            if not (key[1] == "a" and queue[0].kind == "delete" and key[0] not in created)
        ]
        key = ready[draw(st.integers(0, len(ready) - 1))]
        order.append(queues[key].pop(0))
        if key[1] == "u":
            created.add(key[0])
        if not queues[key]:
            del queues[key]
    return lives, order


@settings(max_examples=400, deadline=None)
@given(histories())
def test_any_interleaving_of_several_pods_keeps_the_view_consistent(
    history: tuple[list[tuple[str, list[Step], list[Step]]], list[Step]],
) -> None:
    lives, order = history
    view = SchedulerView()
    streams = PodStreams(view, invalid_sink)
    for step in order:
        deliver(streams, view, step)
    assert view.problems == []
    expected: dict[str, str] = {}
    for _, _, assigned in lives:
        if assigned and assigned[-1].kind != "delete":
            expected[assigned[-1].pod.uid] = label(assigned[-1].pod)
    assert {uid: label(p) for uid, p in view.pods.items()} == expected
    assert set(streams.known) == set(expected)  # nothing is kept for pods that are gone
    assert streams.pending == set()
    assert streams.gone == set()


# ------------------------------------------------------------------------------- Informers, end to end


class PodWatches:
    """The API server for the Informers: pods per selector, scripted; every other kind empty and quiet."""

    def __init__(self) -> None:
        self.server: ApiServer | None = None
        self.unassigned_list: list[dict[str, Any]] = [pod("p", "5")]
        self.assigned_list: list[dict[str, Any]] = [pod("q", "4", node="n2")]
        self.unassigned_lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.assigned_lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def handle(self, request: web.Request, seen: Seen) -> web.StreamResponse:
        assert self.server is not None
        selector = seen.query.get("fieldSelector", "")
        watching = seen.query.get("watch") == "true"
        if seen.path == "/api/v1/pods" and selector:
            assigned = selector == ASSIGNED_PODS
            if not watching:
                items = self.assigned_list if assigned else self.unassigned_list
                return ok({"kind": "PodList", "metadata": {"resourceVersion": "10"}, "items": items})
            return await self._feed(request, self.assigned_lines if assigned else self.unassigned_lines)
        if watching:
            return await stream(request, self.server, [], end="hold")
        return ok({"kind": "List", "metadata": {"resourceVersion": "10"}, "items": []})

    async def _feed(self, request: web.Request, lines: asyncio.Queue[dict[str, Any] | None]) -> web.StreamResponse:
        assert self.server is not None
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        closing = asyncio.ensure_future(self.server.closing.wait())
        try:
            while True:
                getting = asyncio.ensure_future(lines.get())
                await asyncio.wait({getting, closing}, return_when=asyncio.FIRST_COMPLETED)
                if not getting.done():
                    getting.cancel()
                    break
                item = getting.result()
                if item is None:
                    break
                await response.write(json.dumps(item).encode() + b"\n")
        finally:
            closing.cancel()
        return response


@pytest.mark.parametrize(
    "assigned_first", [pytest.param(True, id="assigned-first"), pytest.param(False, id="deleted-first")]
)
def test_informers_deliver_a_binding_from_both_watches(assigned_first: bool, run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[tuple[str, ...]], list[str], list[Seen], list[str]]:
        script = PodWatches()
        view = SchedulerView()
        async with ApiServer(script.handle) as server:
            script.server = server
            client = KubeClient(server.connection(), max_retries=0)
            informers = Informers(client, ["kubesched"], ListerStores(), view, invalid_sink)
            try:
                informers.start()
                await informers.wait_synced()
                assert informers.synced and informers.unsynced() == []
                by_selector = {r.field_selector: r for r in informers.reflectors if r.kind.name == "pods"}
                events = [
                    (ASSIGNED_PODS, script.assigned_lines, {"type": "ADDED", "object": pod("p", "11", node="n1")}),
                    # leaving the selector: the previous object, with the version of the change
                    (
                        unassigned_pods_of("kubesched"),
                        script.unassigned_lines,
                        {"type": "DELETED", "object": pod("p", "11")},
                    ),
                ]
                for selector, queue, item in events if assigned_first else events[::-1]:
                    await queue.put(item)
                    reflector = by_selector[selector]

                    def arrived(reflector: Reflector[Pod] = reflector) -> bool:
                        return reflector.resource_version == "11"

                    await until(arrived, what="the event")
                await asyncio.sleep(0.05)  # nothing more should come
            finally:
                await informers.aclose()
                await client.aclose()
            return view.calls, view.problems, server.seen, [label(p) for p in view.pods.values()]

    calls, problems, seen, pods = run_async(scenario())
    assert problems == []
    pod_calls = [c for c in calls if not c[0].startswith("node")]
    initial = sorted([("add", "p@5"), ("add", "q@4>n2")])
    assert sorted(pod_calls[:2]) == initial
    if assigned_first:
        assert pod_calls[2:] == [("update", "p@5", "p@11>n1")]
    else:
        assert pod_calls[2:] == [("delete", "p@5"), ("add", "p@11>n1")]
    assert sorted(pods) == ["p@11>n1", "q@4>n2"]
    pod_selectors = {s.query.get("fieldSelector") for s in seen if s.path == "/api/v1/pods"}
    assert pod_selectors == {ASSIGNED_PODS, unassigned_pods_of("kubesched")}
    assert unassigned_pods_of("kubesched") == (
        "spec.schedulerName=kubesched,spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
    )
    assert ASSIGNED_PODS == "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    listed = {s.path for s in seen if not s.query.get("watch")}
    assert listed == {
        "/api/v1/pods",
        "/api/v1/nodes",
        "/api/v1/namespaces",
        "/apis/policy/v1/poddisruptionbudgets",
        "/api/v1/services",
        "/apis/apps/v1/replicasets",
        "/api/v1/replicationcontrollers",
        "/apis/apps/v1/statefulsets",
        "/api/v1/persistentvolumes",
        "/api/v1/persistentvolumeclaims",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/storage.k8s.io/v1/csinodes",
    }
