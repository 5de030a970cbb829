"""The in-memory member's watches, and the agent's member view that follows them: the view counts what the member
does without the agent (a pod its own scheduler placed), what the agent itself wrote at once, and refuses to pass
off a view it could not list as current."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pytest

from kubesched.agent import memory, view
from kubesched.agent.core import Agent, Refused
from kubesched.agent.memory import InMemoryMember
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.clock import VirtualClock
from kubesched.federation.wire import ReservationRequest

NS = "kubesched-system"
CM = f"/api/v1/namespaces/{NS}/configmaps"
T = TypeVar("T")


def node(name: str, cpu: str = "2") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {}, "status": {"capacity": {"cpu": cpu, "memory": "4Gi", "pods": "10"}}}


def member_pod(name: str, node_name: str, cpu: str) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {"metadata": {"name": name}, "spec": {"nodeName": node_name, "containers": [container]}}


async def watch(member: InMemoryMember, path: str, query: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (type, name) of every event a watch delivers until its timeoutSeconds."""
    seen = []
    async with member.stream_lines(path, query, read_timeout=5) as lines:
        async for line in lines:
            event = json.loads(line)
            seen.append((event["type"], event["object"]["metadata"]["name"]))
    return seen


async def settled() -> None:
    """Let the watches deliver what has been written (every in-memory write wakes them at once)."""
    for _ in range(20):
        await asyncio.sleep(0)


# -------------------------------------------------------------------------------------------- the watches


def test_a_watch_from_a_version_delivers_the_later_matching_events_and_deletions() -> None:
    member = InMemoryMember()
    member.add_namespace(NS)

    async def scenario() -> list[tuple[str, str]]:
        await member.request("POST", CM, body={"metadata": {"name": "before", "labels": {"k": "v"}}})
        since = member.resource_version
        await member.request("POST", CM, body={"metadata": {"name": "kept", "labels": {"k": "v"}}})
        await member.request("POST", CM, body={"metadata": {"name": "unlabelled"}})
        await member.request("DELETE", f"{CM}/before")
        query = {"resourceVersion": str(since), "labelSelector": "k=v", "timeoutSeconds": "0.05"}
        return await watch(member, CM, query)

    assert asyncio.run(scenario()) == [("ADDED", "kept"), ("DELETED", "before")]


def test_a_watch_without_a_version_starts_with_the_current_objects_then_follows_writes() -> None:
    member = InMemoryMember()
    member.add_namespace(NS)

    async def scenario() -> list[tuple[str, str]]:
        await member.request("POST", CM, body={"metadata": {"name": "old"}})
        watching = asyncio.create_task(watch(member, CM, {"timeoutSeconds": "0.2"}))
        await settled()
        await member.request("POST", CM, body={"metadata": {"name": "new"}})
        return await watching

    assert asyncio.run(scenario()) == [("ADDED", "old"), ("ADDED", "new")]


def test_a_version_older_than_the_kept_history_is_410_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "WATCH_HISTORY", 3)
    member = InMemoryMember()
    member.add_namespace(NS)

    async def scenario() -> None:
        since = member.resource_version
        for name in "abcd":
            await member.request("POST", CM, body={"metadata": {"name": name}})
        await watch(member, CM, {"resourceVersion": str(since), "timeoutSeconds": "0.05"})

    with pytest.raises(KubeApiError) as gone:
        asyncio.run(scenario())
    assert gone.value.status == 410


def test_a_watcher_cancelled_as_a_write_wakes_it_ends() -> None:
    """The cancellation must not be lost to the wakeup that came with it (asyncio.wait_for on 3.11 loses it)."""
    member = InMemoryMember()
    member.add_namespace(NS)

    async def scenario() -> bool:
        watching = asyncio.create_task(watch(member, CM, {"timeoutSeconds": "60"}))
        await settled()
        await member.request("POST", CM, body={"metadata": {"name": "a"}})
        watching.cancel()
        done, _ = await asyncio.wait([watching], timeout=2)
        return bool(done) and watching.cancelled()

    assert asyncio.run(scenario())


# ------------------------------------------------------------------------------------------- the view


def agent_on(member: InMemoryMember, clock: VirtualClock | None = None) -> Agent:
    member.add_namespace("apps")
    agent = Agent(member, clock=clock or VirtualClock(), namespace=NS, cluster_name="m1", request_timeout=0.5)
    asyncio.run(agent.ensure_namespace())
    return agent


def test_a_pod_the_member_placed_itself_is_counted_once_its_watch_brings_it() -> None:
    member = InMemoryMember("m1")
    member.add_node(node("n1", cpu="2"))
    agent = agent_on(member)

    async def scenario() -> None:
        state, _ = await agent.state()
        assert state.allocated.get("cpu", 0) == 0
        await member.request("POST", "/api/v1/namespaces/apps/pods", body=member_pod("local", "n1", "1500m"))
        await settled()
        state, _ = await agent.state()
        assert state.allocated["cpu"] == 1500
        with pytest.raises(Refused) as unfit:  # 500m left on the one node
            await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 60))
        assert unfit.value.reason == "Unfit"
        await member.request("DELETE", "/api/v1/namespaces/apps/pods/local")
        await settled()
        held, _ = await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 60))
        assert held.node == "n1"
        await agent.aclose()

    asyncio.run(scenario())


class LaggingWatches(InMemoryMember):
    """A member whose watch events are held back while ``lagging`` (a real watch delivers a moment after the
    write), then delivered in order."""

    lagging = False

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.held: list[tuple[str, str, str, Mapping[str, Any]]] = []

    def _happened(self, resource: str, namespace: str, kind: str, obj: Mapping[str, Any]) -> None:
        if self.lagging:
            self.held.append((resource, namespace, kind, obj))
        else:
            super()._happened(resource, namespace, kind, obj)

    def catch_up(self) -> None:
        self.lagging = False
        for event in self.held:
            super()._happened(*event)
        self.held.clear()


def test_the_agents_own_writes_count_before_their_events_arrive() -> None:
    """The second reservation must already see the first, and the bound pod must be counted once (as a pod, no
    longer as a reservation), while no watch event has arrived; and again once they have."""
    member = LaggingWatches("m1")
    member.add_node(node("n1", cpu="2"))
    agent = agent_on(member)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs", "controller": True}
    hub_pod = {
        "metadata": {
            "name": "web",
            "namespace": "apps",
            "uid": "hub-web",
            "labels": {"app": "web"},
            "ownerReferences": [owner],  # the hub's: dropped in the member
        },
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1500m"}}}]},
    }
    made = {"cpu": 1500, "pods": 1}, {("app", "apps", "web"): 1}, frozenset({"hub-web"})

    async def scenario() -> None:
        await agent.state()
        member.lagging = True
        await agent.reserve(ReservationRequest("r1", {"cpu": 1500}, 60, "hub-web"))
        with pytest.raises(Refused):
            await agent.reserve(ReservationRequest("r2", {"cpu": 1000}, 60))
        await agent.bind("r1", hub_pod)
        await settled()
        assert len(member.held) == 3  # the reservation made and deleted, the pod: none delivered yet
        state, live = await agent.state()
        assert live == []
        assert (state.allocated, state.workloads, state.accounted_pods) == made
        member.catch_up()
        await settled()
        state, live = await agent.state()
        assert live == []
        assert (state.allocated, state.workloads, state.accounted_pods) == made
        await agent.aclose()

    asyncio.run(scenario())


class DefaultingRequests(LaggingWatches):
    """A member whose admission gives a container without a cpu request one (as a LimitRange's default does)."""

    def _create(self, resource: str, namespace: str, body: Any) -> dict[str, Any]:
        if resource == "pods":
            body = json.loads(json.dumps(body))
            for container in body["spec"]["containers"]:
                container.setdefault("resources", {}).setdefault("requests", {}).setdefault("cpu", "500m")
        return super()._create(resource, namespace, body)


def test_a_pod_the_member_changed_counts_as_the_member_made_it_before_its_event_arrives() -> None:
    """The hub pod asks no cpu, the member's pod 500m: the bound pod counts 500m at once, not what was sent."""
    member = DefaultingRequests("m1")
    member.add_node(node("n1", cpu="2"))
    agent = agent_on(member)
    hub_pod = {
        "metadata": {"name": "web", "namespace": "apps", "uid": "hub-web"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"memory": "1Gi"}}}]},
    }

    async def scenario() -> None:
        await agent.state()
        member.lagging = True
        await agent.reserve(ReservationRequest("r1", {"memory": 2**30}, 60, "hub-web"))
        await agent.bind("r1", hub_pod)
        state, _ = await agent.state()
        assert state.allocated == {"cpu": 500, "memory": 2**30, "pods": 1}
        member.catch_up()
        await settled()
        state, _ = await agent.state()
        assert state.allocated == {"cpu": 500, "memory": 2**30, "pods": 1}
        await agent.aclose()

    asyncio.run(scenario())


def test_an_unchanged_node_keeps_its_parse_and_a_changed_one_is_read_again() -> None:
    member = InMemoryMember("m1")
    member.add_node(node("n1", cpu="1"))
    agent = agent_on(member)

    async def scenario() -> None:
        await agent.state()
        first = agent._view.nodes()[0]
        await agent.state()
        assert agent._view.nodes()[0] is first
        await member.request("DELETE", "/api/v1/nodes/n1")
        member.add_node(node("n1", cpu="3"))
        await settled()
        state, _ = await agent.state()
        assert state.allocatable["cpu"] == 3000
        await agent.aclose()

    asyncio.run(scenario())


class FinishingPods(InMemoryMember):
    """A member whose kubelet can report a pod Succeeded (a MODIFIED event under a new resourceVersion)."""

    def finish(self, namespace: str, name: str) -> None:
        obj = self._store["pods"][(namespace, name)]
        obj["status"] = {**obj["status"], "phase": "Succeeded"}
        obj["metadata"]["resourceVersion"] = self._next_revision()
        self._happened("pods", namespace, "MODIFIED", obj)


def test_an_own_writes_event_reuses_its_record_and_a_later_version_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch event of what the agent itself wrote (same uid and resourceVersion as the member's answer) is
    the object already read: not parsed again. A later version of it (the pod finished) is."""
    member = FinishingPods("m1")
    member.add_node(node("n1", cpu="2"))
    agent = agent_on(member)
    parsed: list[str] = []
    reader = agent._view.reader
    read_pod, read_reservation = reader.member_pod, view._decode_reservation

    def counted(read: Callable[[Mapping[str, Any], str], T]) -> Callable[[Mapping[str, Any], str], T]:
        def reading(raw: Mapping[str, Any], where: str) -> T:
            parsed.append(raw["metadata"]["name"])
            return read(raw, where)

        return reading

    monkeypatch.setattr(reader, "member_pod", counted(read_pod))
    monkeypatch.setattr(view, "_decode_reservation", counted(read_reservation))
    hub_pod = {
        "metadata": {"name": "web", "namespace": "apps", "uid": "hub-web"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1500m"}}}]},
    }

    async def scenario() -> None:
        await agent.state()
        await agent.reserve(ReservationRequest("r1", {"cpu": 1500}, 60, "hub-web"))
        await agent.bind("r1", hub_pod)
        await settled()
        assert parsed == []
        assert agent._view._records == {}  # each record used by its event
        state, _ = await agent.state()
        assert state.allocated == {"cpu": 1500, "pods": 1}
        assert state.pod_phases == {"hub-web": "Pending"}
        member.finish("apps", "web")
        await settled()
        assert parsed == ["web"]
        state, _ = await agent.state()
        assert state.allocated.get("cpu", 0) == 0
        assert state.pod_phases == {"hub-web": "Succeeded"}  # reported, though it holds nothing
        await agent.aclose()

    asyncio.run(scenario())


class PodsUnlistable(InMemoryMember):
    """A member whose pod list always fails, as a member whose API server is overloaded would."""

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "GET" and path == "/api/v1/pods":
            raise KubeTransportError("GET /api/v1/pods: timed out")
        return await super().request(method, path, **kwargs)


def test_a_view_that_cannot_list_is_an_unavailable_member_not_an_empty_one() -> None:
    member = PodsUnlistable("m1")
    member.add_node(node("n1"))
    agent = agent_on(member)

    async def scenario() -> None:
        with pytest.raises(KubeTransportError, match="pods could not be listed: GET /api/v1/pods: timed out"):
            await agent.state()
        with pytest.raises(KubeTransportError, match="pods"):
            await agent.reserve(ReservationRequest("r1", {"cpu": 100}, 60))
        await agent.aclose()

    asyncio.run(scenario())
    assert member.configmaps(NS) == []
