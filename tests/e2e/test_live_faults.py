"""``kubesched run`` through a fault-injecting proxy (kubesched.testing.fault_proxy) to a real kube-apiserver.

The scheduler runs in the test's loop, connected to the proxy; the test itself reads and writes the API server
directly. Each test proves the scheduler rides out one family of faults a real cluster produces: 5xx and 429
answers, connections dropped without an answer, slow answers, watch streams cut or ended with ``ERROR`` 410,
and objects that do not decode.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from kubesched.backends.kube.reflector import Reflector
from kubesched.harness.envtest import ControlPlane
from kubesched.live.run import LiveScheduler
from kubesched.testing.fault_proxy import FaultProxy, LoggedRequest
from kubesched.testing.live_cluster import RunningScheduler, Scenario, scenario, wait_async, wait_for

pytestmark = [
    pytest.mark.e2e,
    # Cancelling connects in flight (reflectors retrying through the proxy when the scheduler stops) can leave a
    # socket to the collector on Python 3.11's asyncio under load (seen once in CI, not alone): not our sessions,
    # which are closed; tests/e2e/conftest.py collects after each test so any other leak still fails its test.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

BINDING = re.compile(r"/pods/(?P<name>[^/]+)/binding$")


@asynccontextmanager
async def _scheduling(corner: Scenario, proxy: FaultProxy) -> AsyncIterator[LiveScheduler]:
    """The scheduler through the proxy; it must still be running (never crashed) when the test is done."""
    running = RunningScheduler(corner, connection=proxy.connection())
    async with running as live:
        yield live
        assert running.task is not None and not running.task.done(), "the scheduler stopped on its own"
    # __aexit__ awaited the task: it ended without an exception.


def _pending_selector(corner: Scenario) -> str:
    return re.escape(f"spec.schedulerName={corner.scheduler_name}")


def _pending_requests(proxy: FaultProxy, corner: Scenario) -> list[LoggedRequest]:
    """Requests of the reflector of our unassigned pods, in arrival order."""
    name = f"spec.schedulerName={corner.scheduler_name},"
    return [e for e in proxy.requests("GET", r"^/api/v1/pods$") if name in e.query.get("fieldSelector", "")]


def _reflector(live: LiveScheduler, kind: str, selector: str = "") -> Reflector[Any]:
    assert live.backend.informers is not None
    (reflector,) = [
        r for r in live.backend.informers.reflectors if r.kind.name == kind and selector in r.field_selector
    ]
    return reflector


def _pending_reflector(live: LiveScheduler, corner: Scenario) -> Reflector[Any]:
    return _reflector(live, "pods", f"spec.schedulerName={corner.scheduler_name},")


def _bound(corner: Scenario, names: list[str]) -> bool:
    pods = corner.pods()
    return all(pods[name]["spec"].get("nodeName") for name in names)


def _scheduled_events(corner: Scenario) -> list[dict[str, Any]]:
    return [e for e in corner.events() if e["reason"] == "Scheduled"]


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)


def test_thirty_pods_bind_exactly_once_through_errors_throttling_drops_and_delays(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        for i in range(3):
            corner.create(corner.node(f"n{i}", cpu="10"))
        names = [f"p{i:02d}" for i in range(30)]
        uids = {name: corner.create(corner.pod(name))["metadata"]["uid"] for name in names}
        corner.create(corner.pod("too-big", cpu="20"))  # never fits: its condition is a pods/status patch
        ns, pending = corner.namespace, _pending_selector(corner)

        async def scenario_run() -> None:
            async with FaultProxy(control_plane) as proxy:
                binding = rf"^/api/v1/namespaces/{ns}/pods/[^/]+/binding$"
                every_pod = proxy.fail("POST", binding, 500, times=3, per_path=True)
                # With the 3 above, all 6 attempts of p00's first binding (the client's 5 retries) fail: the
                # binding cycle fails and the pod goes round the scheduler again.
                p00 = proxy.fail("POST", r"/pods/p00/binding$", 500, times=3)
                # The server binds p01 but the answer is lost; the client's retry gets 409 (already assigned).
                p01 = proxy.drop("POST", r"/pods/p01/binding$", times=1, after_upstream=True)
                slow_bindings = proxy.delay("POST", r"/pods/p0[23]/binding$", 2.0, times=2)
                throttled = {"Retry-After": "1"}
                statuses = proxy.fail(
                    "PATCH", rf"^/api/v1/namespaces/{ns}/pods/[^/]+/status$", 429, 2, headers=throttled
                )
                events = proxy.fail(
                    "POST", rf"^/apis/events.k8s.io/v1/namespaces/{ns}/events$", 429, 3, headers=throttled
                )
                # Twice: aiohttp itself sends an idempotent request again, once, when the connection closes
                # without an answer; the second drop reaches kubesched's client (lists) or reflector (watch).
                node_list = proxy.drop("GET", r"^/api/v1/nodes$", times=2, watch=False)
                pod_list = proxy.drop("GET", r"^/api/v1/pods$", times=2, watch=False, query=pending)
                node_watch = proxy.drop("GET", r"^/api/v1/nodes$", times=2, watch=True)
                pod_watch = proxy.drop("GET", r"^/api/v1/pods$", times=1, after_events=5, query=pending)
                slow_list = proxy.delay("GET", r"^/api/v1/namespaces$", 2.0, times=1, watch=False)
                slow_watch = proxy.delay("GET", r"^/api/v1/pods$", 2.0, times=1, watch=True, query="spec.nodeName!=,")

                async with _scheduling(corner, proxy) as live:
                    await wait_for(lambda: _bound(corner, names), 45)
                    await wait_for(lambda: _scheduled_condition(corner.pods()["too-big"]) is not None, 20)
                    await wait_for(lambda: len(_scheduled_events(corner)) >= len(names) - 1, 30)  # all but p01
                    # 500s (but the last of p00's first binding), p01's lost answer, 429s, the dropped lists.
                    assert live.client.retries >= (90 + 3 - 1) + 1 + (2 + 3) + 2
                    assert _reflector(live, "nodes").watches >= 2  # the dropped watch reached it: it watched again

                # Every rule fired as often as it was told to.
                assert (every_pod.hits, p00.hits, p01.hits, slow_bindings.hits) == (90, 3, 1, 2)
                assert (statuses.hits, events.hits) == (2, 3)
                assert (node_list.hits, pod_list.hits, node_watch.hits, pod_watch.hits) == (2, 2, 2, 1)
                assert (slow_list.hits, slow_watch.hits) == (1, 1)

                # The log shows the retries: per pod, its 500s, then exactly one binding the server accepted.
                per_pod: dict[str, list[int | None]] = {}
                for entry in proxy.requests("POST", binding):
                    match = BINDING.search(entry.path)
                    assert match is not None
                    per_pod.setdefault(match["name"], []).append(entry.status)
                assert set(per_pod) == set(names)
                for name, answers in per_pod.items():
                    accepted = answers.count(201) + (answers.count(None) if name == "p01" else 0)
                    assert accepted == 1, (name, answers)
                    assert answers[:3] == [500, 500, 500], (name, answers)
                assert per_pod["p00"][:7] == [500] * 6 + [201]
                assert per_pod["p01"][:5] == [500, 500, 500, None, 409]  # 409: the server refused a second binding
                assert all(409 not in answers for name, answers in per_pod.items() if name != "p01")

                status_answers = [e.status for e in proxy.requests("PATCH", r"/status$")]
                assert status_answers[:2] == [429, 429] and 200 in status_answers[2:]
                event_answers = [e.status for e in proxy.requests("POST", r"/events$")]
                assert event_answers[:3] == [429, 429, 429] and event_answers.count(201) >= len(names) - 1
                for path, query in ((r"^/api/v1/nodes$", ""), (r"^/api/v1/pods$", pending)):
                    lists = [e for e in proxy.requests("GET", path, watch=False) if re.search(query, str(e.query))]
                    assert [(e.status, e.fault) for e in lists[:3]] == [(None, "drop"), (None, "drop"), (200, "")]
                node_watches = proxy.requests("GET", r"^/api/v1/nodes$", watch=True)
                assert [(e.status, e.fault) for e in node_watches[:3]] == [(None, "drop"), (None, "drop"), (200, "")]
                pod_watches = [e for e in _pending_requests(proxy, corner) if e.watch]
                assert (pod_watches[0].fault, pod_watches[0].events) == ("cut", 5) and len(pod_watches) >= 2
                assert sum(e.fault.startswith("delay") for e in proxy.log) == 4

        asyncio.run(scenario_run())
        pods = corner.pods()
        per_node = Counter(pods[name]["spec"]["nodeName"] for name in names)
        assert sorted(per_node.values()) == [10, 10, 10]  # 10 CPUs each, 30 pods of 1 CPU: none overcommitted
        assert set(per_node) == {f"n{i}-{corner.tag}" for i in range(3)}
        assert "nodeName" not in pods["too-big"]["spec"]
        too_big = _scheduled_condition(pods["too-big"])
        assert too_big is not None and (too_big["status"], too_big["reason"]) == ("False", "Unschedulable")

        scheduled_events = Counter(e["regarding"]["name"] for e in corner.events() if e["reason"] == "Scheduled")
        assert all(count == 1 for count in scheduled_events.values()), scheduled_events
        assert set(scheduled_events) == set(names) - {"p01"}  # p01's binding answer never reached us
        for event in corner.events():
            if event["reason"] == "Scheduled":
                assert "series" not in event or event["series"] is None
                assert event["regarding"]["uid"] == uids[event["regarding"]["name"]]


def test_not_ready_while_every_list_fails_and_ready_once_they_answer(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("n0"))
        corner.create(corner.pod("waits-for-sync"))

        async def scenario_run() -> None:
            async with FaultProxy(control_plane) as proxy:
                unavailable = proxy.fail("GET", r"^/api", 503, watch=False)
                running = RunningScheduler(corner, connection=proxy.connection())
                live = running.live
                task = asyncio.create_task(live.run(running.stop))
                try:
                    reflectors = len(live.backend.informers.reflectors) if live.backend.informers else 0
                    assert reflectors > 10
                    await wait_async(lambda: unavailable.hits >= 2 * reflectors, 10)  # each retried at least once
                    assert not live.ready
                    reason = live.not_ready_reason()
                    assert reason.startswith("informers not synced: "), reason
                    for informer in ("nodes", "namespaces", "pods spec.nodeName!=", corner.scheduler_name):
                        assert informer in reason, (informer, reason)
                    assert not live.scheduling.is_set() and not task.done()
                    assert proxy.requests(watch=True) == []  # no watch without a list
                    assert 200 not in {e.status for e in proxy.requests("GET")}  # (None: one just arriving)

                    proxy.remove(unavailable)
                    await wait_async(lambda: live.ready, 15)
                    assert live.not_ready_reason() == ""
                    await wait_for(lambda: _bound(corner, ["waits-for-sync"]), 15)
                    assert not task.done()
                finally:
                    running.stop.set()
                    await asyncio.wait_for(task, 30)

        asyncio.run(scenario_run())


def test_malformed_pods_get_an_event_and_a_malformed_node_is_ignored(
    control_plane: ControlPlane, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        bad_node = f"bad-{corner.tag}"
        corner.create(corner.node("good", cpu="4"))
        corner.create({**corner.node("bad", cpu="64"), "metadata": {"name": bad_node, "labels": {"e2e": corner.tag}}})
        uids = {name: corner.create(corner.pod(name))["metadata"]["uid"] for name in ("ok-0", "ok-1", "bad-cpu")}

        def spoil(obj: dict[str, Any]) -> None:
            """What the real server would refuse; it only exists in the proxy's answers."""
            meta = obj.get("metadata") or {}
            if meta.get("namespace") != corner.namespace:
                return
            if meta.get("name") == "bad-cpu":
                obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
            elif meta.get("name") == "bad-containers":
                obj["spec"]["containers"] = "a string"

        def spoil_node(obj: dict[str, Any]) -> None:
            if (obj.get("metadata") or {}).get("name") == bad_node:
                obj["status"]["allocatable"]["cpu"] = "lots"

        async def scenario_run() -> None:
            async with FaultProxy(control_plane) as proxy:
                proxy.mutate(r"^/api/v1/pods$", spoil)
                proxy.mutate(r"^/api/v1/nodes$", spoil_node)
                with caplog.at_level(logging.WARNING, logger="kubesched.backends.kube.backend"):
                    async with _scheduling(corner, proxy) as live:
                        # bad-cpu came in the list answer; bad-containers comes in a watch event.
                        uids["bad-containers"] = corner.create(corner.pod("bad-containers"))["metadata"]["uid"]
                        for name in ("ok-2", "ok-3"):
                            corner.create(corner.pod(name))
                        await wait_for(lambda: _bound(corner, ["ok-0", "ok-1", "ok-2", "ok-3"]), 20)

                        def failed() -> dict[str, dict[str, Any]]:
                            found = [e for e in corner.events() if e["reason"] == "FailedScheduling"]
                            return {e["regarding"]["name"]: e for e in found}

                        await wait_for(lambda: {"bad-cpu", "bad-containers"} <= set(failed()), 20)
                        events = failed()
                        assert set(events) == {"bad-cpu", "bad-containers"}
                        assert bad_node not in live.scheduler.cache.node_order()
                        assert f"good-{corner.tag}" in live.scheduler.cache.node_order()
                        assert live.backend.invalid_objects >= 3
                        pending_names = {p.metadata.name for p in live.scheduler.pending_pods().values()}
                        assert not pending_names & {"bad-cpu", "bad-containers"}
                        assert proxy.requests("GET", r"^/api/v1/pods$", watch=True)  # the watch carried one

                cpu = events["bad-cpu"]
                assert (cpu["type"], cpu["action"], cpu["reportingController"]) == (
                    "Warning",
                    "Scheduling",
                    corner.scheduler_name,
                )
                assert "spec.containers[0].resources.requests.cpu" in cpu["note"] and '"lots"' in cpu["note"]
                containers = events["bad-containers"]
                assert "spec.containers: expected a list" in containers["note"], containers["note"]
                for name, event in events.items():
                    assert event["regarding"]["uid"] == uids[name]

        asyncio.run(scenario_run())
        pods = corner.pods()
        assert {pods[f"ok-{i}"]["spec"]["nodeName"] for i in range(4)} == {f"good-{corner.tag}"}
        assert "nodeName" not in pods["bad-cpu"]["spec"] and "nodeName" not in pods["bad-containers"]["spec"]
        node_logs = [r.getMessage() for r in caplog.records if bad_node in r.getMessage()]
        assert node_logs and "status.allocatable.cpu" in node_logs[0] and "ignored" in node_logs[0]
        # The server itself never saw a malformed object.
        status, node = control_plane.request("GET", f"/api/v1/nodes/{bad_node}")
        assert status == 200 and node["status"]["allocatable"]["cpu"] == "64"


def test_a_cut_watch_resumes_from_its_last_resource_version(control_plane: ControlPlane, tmp_path: Path) -> None:
    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("n0", cpu="8"))

        async def scenario_run() -> None:
            async with FaultProxy(control_plane) as proxy:
                cut = proxy.drop("GET", r"^/api/v1/pods$", times=1, after_events=3, query=_pending_selector(corner))
                async with _scheduling(corner, proxy) as live:
                    await wait_async(lambda: any(e.watch and e.status for e in _pending_requests(proxy, corner)), 10)
                    # The reconnection waits 2 s at the proxy: the pods created then are seen only after it.
                    slow = proxy.delay(
                        "GET", r"^/api/v1/pods$", 2.0, times=1, watch=True, query=_pending_selector(corner)
                    )
                    for i in range(3):
                        corner.create(corner.pod(f"a{i}"))
                    await wait_async(lambda: any(e.fault == "cut" for e in _pending_requests(proxy, corner)), 20)
                    assert cut.hits == 1
                    meanwhile = [corner.create(corner.pod(f"b{i}")) for i in range(3)]
                    await wait_for(lambda: _bound(corner, [*(f"a{i}" for i in range(3)), "b0", "b1", "b2"]), 30)
                    assert _pending_reflector(live, corner).lists == 1

                requests = _pending_requests(proxy, corner)
                lists = [e for e in requests if not e.watch]
                watches = [e for e in requests if e.watch]
                assert len(lists) == 1 and lists[0].started < watches[0].started  # no relist
                first, second = watches[0], watches[1]
                assert (first.fault, first.status, first.events) == ("cut", 200, 3)
                assert slow.hits == 1 and second.fault == "delay"
                assert first.last_resource_version, "the cut watch delivered events with versions"
                # Resumed exactly where the cut stream stopped: the version of its last event, not an older one.
                assert second.query["resourceVersion"] == first.last_resource_version
                assert int(second.query["resourceVersion"]) > int(first.query["resourceVersion"])
                # The pods created meanwhile are newer than that: only the resumed watch can have delivered them.
                assert all(
                    int(pod["metadata"]["resourceVersion"]) > int(first.last_resource_version) for pod in meanwhile
                )
                assert second.events >= 3

        asyncio.run(scenario_run())


def test_an_error_410_in_a_watch_stream_means_a_relist(control_plane: ControlPlane, tmp_path: Path) -> None:
    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("n0", cpu="2"))

        async def scenario_run() -> None:
            async with FaultProxy(control_plane) as proxy:
                pending = _pending_selector(corner)
                gone = proxy.watch_error(r"^/api/v1/pods$", 410, after_events=1, times=1, query=pending)
                async with _scheduling(corner, proxy) as live:
                    # The relist waits 2 s at the proxy: what changes then only the new list can show.
                    slow_list = proxy.delay("GET", r"^/api/v1/pods$", 2.0, times=1, watch=False, query=pending)
                    # Its ADDED is forwarded, then the proxy ends the stream with ERROR 410.
                    corner.create(corner.pod("deleted-meanwhile", cpu="3"))
                    await wait_async(
                        lambda: any(e.fault == "watch_error" for e in _pending_requests(proxy, corner)), 20
                    )
                    assert gone.hits == 1
                    await wait_async(lambda: slow_list.hits == 1, 10)
                    status, _ = control_plane.request(
                        "DELETE", f"/api/v1/namespaces/{corner.namespace}/pods/deleted-meanwhile"
                    )
                    assert status == 200
                    corner.create(corner.pod("created-meanwhile", cpu="1"))
                    await wait_for(lambda: _bound(corner, ["created-meanwhile"]), 20)
                    reflector = _pending_reflector(live, corner)
                    await wait_async(lambda: reflector.lists == 2 and len(reflector) == 0, 10)
                    await wait_async(lambda: not live.scheduler.pending_pods(), 10)
                    counts = live.scheduler.queue.counts()
                    assert (counts.active, counts.backoff, counts.unschedulable) == (0, 0, 0)

                requests = _pending_requests(proxy, corner)
                (errored,) = [i for i, e in enumerate(requests) if e.fault == "watch_error"]
                assert requests[errored].watch and requests[errored].events == 1
                relist, rewatch = requests[errored + 1], requests[errored + 2]
                assert not relist.watch and "resourceVersion" not in relist.query and relist.status == 200
                assert relist.fault == "delay"
                assert rewatch.watch and rewatch.query["resourceVersion"] != requests[errored].query["resourceVersion"]
                assert int(rewatch.query["resourceVersion"]) > int(requests[errored].last_resource_version)

        asyncio.run(scenario_run())


def test_an_event_whose_answer_was_lost_is_written_once_and_its_repeats_are_a_series(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    from kubesched.api.objects import Pod

    with scenario(control_plane, tmp_path) as corner:
        created = corner.create(corner.pod("observed", scheduler="another-scheduler"))  # never ours to schedule
        pod = Pod.from_dict(created, "test pod")

        async def scenario_run() -> None:
            async with FaultProxy(control_plane) as proxy:
                events = rf"^/apis/events.k8s.io/v1/namespaces/{corner.namespace}/events$"
                # The server creates the event, the answer is lost; the client sends it again: 409 AlreadyExists.
                lost = proxy.drop("POST", events, times=1, after_upstream=True)
                async with _scheduling(corner, proxy) as live:
                    for _ in range(3):
                        live.backend.event(pod, "Warning", "FailedScheduling", "Scheduling", "lost answer")
                    await live.backend.events.drain()
                    # Created (the 409 is our own), made a series of 2, its count brought to 3 by drain().
                    assert (live.backend.events.written, live.backend.events.failed) == (3, 0)
                assert lost.hits == 1
                assert [e.status for e in proxy.requests("POST", events)] == [None, 409]

        asyncio.run(scenario_run())
        (event,) = [e for e in corner.events() if e["regarding"]["name"] == "observed"]
        assert event["series"]["count"] == 3
