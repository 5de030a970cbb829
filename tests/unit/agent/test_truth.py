"""The member pod is the commit record: what an agent answers after a bind it (or a killed predecessor) left half
done, while a create may still land, and to hubs with older fencing tokens -- on the in-memory member.

The crashes are made the way they happen: the first agent's writes are done against the member (or not), its
object is dropped, and a new Agent over the same member is asked, as a restarted process would be."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.agent.core import Agent, HubPodRef, Refused
from kubesched.agent.memory import InMemoryMember
from kubesched.backends.kube.errors import KubeTransportError
from kubesched.clock import VirtualClock
from kubesched.federation.wire import ReservationRequest

NS = "kubesched-system"


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"capacity": {"cpu": cpu, "memory": "4Gi", "pods": "10"}}}


def hub_pod(name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": f"hub-{name}"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
    }


class _LosesCreates:
    """The member, except that pod creates fail as a lost connection: after reaching the member (``landed``) or
    before."""

    def __init__(self, member: InMemoryMember, *, landed: bool) -> None:
        self.member = member
        self.landed = landed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.member, name)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "POST" and path.endswith("/pods"):
            if self.landed:
                await self.member.request(method, path, **kwargs)
            raise KubeTransportError("connection reset by peer")
        return await self.member.request(method, path, **kwargs)


def start(member: InMemoryMember, clock: VirtualClock, **options: Any) -> Agent:
    agent = Agent(member, clock=clock, namespace=NS, cluster_name="m1", **options)
    asyncio.run(agent.ensure_namespace())
    return agent


def fresh() -> tuple[InMemoryMember, VirtualClock]:
    member = InMemoryMember("m1")
    member.add_node(node("n1"))
    member.add_namespace("apps")
    return member, VirtualClock()


def killed_after_create(member: InMemoryMember, clock: VirtualClock) -> None:
    """An agent that created the member pod and died before it deleted the reservation."""
    first = start(member, clock)

    async def bind_without_cleanup() -> None:
        await first.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
        body = first._member_pod(hub_pod("web"), (await first.reservations())[0])
        await member.request("POST", "/api/v1/namespaces/apps/pods", body=body)
        await first.aclose()

    asyncio.run(bind_without_cleanup())


def test_a_release_after_a_bind_killed_before_its_cleanup_reports_the_pod_not_a_release() -> None:
    member, clock = fresh()
    killed_after_create(member, clock)
    clock.advance(1)
    restarted = start(member, clock, in_flight_seconds=15)

    async def scenario() -> None:
        state, _ = await restarted.state()
        assert state.allocated == {"cpu": 1000, "pods": 1}  # the pod, and not its reservation a second time
        assert (state.pod_phases, state.pod_names) == ({"hub-web": "Pending"}, {"hub-web": "apps/web"})
        released, made = await restarted.release("r1", hub_pod=HubPodRef("hub-web", "apps", "web"))
        assert (released, made is not None and made["name"]) == (False, "web")
        # Asked again (its answer lost), the member still says the same: never "released".
        assert await restarted.release("r1", hub_pod=HubPodRef("hub-web", "apps", "web")) == (False, made)
        # A bind for the same hub pod under any reservation answers with that pod.
        assert await restarted.bind("r9", hub_pod("web")) == (made, False)

    asyncio.run(scenario())
    assert member.configmaps(NS) == []
    assert len(member.pods()) == 1


def test_the_sweep_of_an_expired_reservation_with_a_pod_under_it_reports_it_bound() -> None:
    member, clock = fresh()
    killed_after_create(member, clock)
    clock.advance(60)  # past the TTL and past the restart window
    restarted = start(member, clock, in_flight_seconds=15)

    async def scenario() -> list[str]:
        await restarted.state()
        return await restarted.sweep_expired()

    assert asyncio.run(scenario()) == []  # not among the released: its pod was made
    assert member.configmaps(NS) == []
    assert len(member.pods()) == 1


@pytest.mark.parametrize("landed", [pytest.param(True, id="create-landed"), pytest.param(False, id="create-lost")])
def test_while_a_create_with_no_answer_may_land_a_release_says_settling_then_the_truth(landed: bool) -> None:
    member, clock = fresh()
    agent = start(_LosesCreates(member, landed=landed), clock, in_flight_seconds=15)  # type: ignore[arg-type]
    ref = HubPodRef("hub-web", "apps", "web")

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
        with pytest.raises(KubeTransportError):
            await agent.bind("r1", hub_pod("web"))
        if landed:  # the pod is there: the answer is certain at once
            released, made = await agent.release("r1", hub_pod=ref)
            assert (released, made is not None) == (False, True)
            return
        with pytest.raises(Refused) as settling:
            await agent.release("r1", hub_pod=ref)
        assert (settling.value.status, settling.value.reason) == (503, "Settling")
        assert settling.value.retry_after == pytest.approx(15)
        clock.advance(10)
        await agent.sweep_expired()
        assert [r.id for r in await agent.reservations()] == ["r1"]  # not swept: it may still be bound
        clock.advance(6)
        assert await agent.release("r1", hub_pod=ref) == (True, None)

    asyncio.run(scenario())


def test_a_restarted_agent_waits_out_its_predecessors_creates_before_saying_released() -> None:
    member, clock = fresh()
    first = start(member, clock)
    asyncio.run(first.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web")))
    clock.advance(1)
    restarted = start(member, clock, in_flight_seconds=15)  # its predecessor may have sent a create for r1
    ref = HubPodRef("hub-web", "apps", "web")

    async def scenario() -> None:
        with pytest.raises(Refused) as settling:
            await restarted.release("r1", hub_pod=ref)
        assert settling.value.reason == "Settling"
        # A reservation made by this process cannot have a create of a predecessor in flight.
        await restarted.reserve(ReservationRequest("r2", {"cpu": 1000}, 30, "hub-api"))
        assert await restarted.release("r2", hub_pod=HubPodRef("hub-api", "apps", "api")) == (True, None)
        clock.advance(15)
        assert await restarted.release("r1", hub_pod=ref) == (True, None)

    asyncio.run(scenario())


def test_a_hub_with_an_older_fencing_token_is_refused_also_after_the_agent_restarts() -> None:
    member, clock = fresh()
    agent = start(member, clock)

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-a"), token=5)
        with pytest.raises(Refused) as fenced:
            await agent.bind("r1", hub_pod("a"), token=4)
        assert (fenced.value.status, fenced.value.reason) == (409, "Fenced")
        await agent.aclose()
        restarted = Agent(member, clock=clock, namespace=NS, cluster_name="m1")
        with pytest.raises(Refused):
            await restarted.reserve(ReservationRequest("r2", {"cpu": 1000}, 30, "hub-b"), token=4)
        made, created = await restarted.bind("r1", hub_pod("a"), token=5)
        assert created and made["name"] == "a"
        await restarted.release("r9", token=7)  # a newer hub raises the fence; the older record goes
        with pytest.raises(Refused):
            await restarted.delete_pod("apps", "a", "hub-a", token=5)

    asyncio.run(scenario())
    assert sorted(c["metadata"]["name"] for c in member.configmaps(NS)) == ["kubesched-fence-7"]


def test_find_answers_the_copy_made_for_a_hub_pod() -> None:
    member, clock = fresh()
    agent = start(member, clock)

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
        made, _ = await agent.bind("r1", hub_pod("web"))
        assert await agent.find(HubPodRef("hub-web", "apps", "web")) == made
        assert await agent.find(HubPodRef("hub-other", "apps", "other")) is None

    asyncio.run(scenario())
