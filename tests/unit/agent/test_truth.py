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
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
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


class _TimesOutCreates:
    """The member, except that it answers pod creates ``504 Timeout`` and writes the pod only when told
    (``land``): its own timeout passed while its storage was slow."""

    def __init__(self, member: InMemoryMember) -> None:
        self.member = member
        self.held: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.member, name)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "POST" and path.endswith("/pods"):
            self.held.append((method, path, kwargs))
            raise KubeApiError(504, "Timeout", "the server was unable to return a response in the time allotted")
        return await self.member.request(method, path, **kwargs)

    async def land(self) -> None:
        for method, path, kwargs in self.held:
            await self.member.request(method, path, **kwargs)


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


def test_a_create_answered_504_is_one_that_may_land_not_one_refused() -> None:
    """kube-apiserver answers 504 when its own timeout passes, "but may still be processing the request": a release
    answering released then would let the hub place the pod elsewhere while this write lands."""
    member, clock = fresh()
    slow = _TimesOutCreates(member)
    agent = start(slow, clock, in_flight_seconds=15)  # type: ignore[arg-type]
    ref = HubPodRef("hub-web", "apps", "web")

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
        with pytest.raises(KubeApiError):  # the server answers 502 MemberUnavailable: not a definite no
            await agent.bind("r1", hub_pod("web"))
        with pytest.raises(Refused) as settling:
            await agent.release("r1", hub_pod=ref)
        assert settling.value.reason == "Settling"
        clock.advance(5)
        await slow.land()  # the slow write is done
        released, made = await agent.release("r1", hub_pod=ref)
        assert (released, made is not None and made["name"]) == (False, "web")

    asyncio.run(scenario())
    assert len(member.pods()) == 1


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
        clock.advance(restarted.in_flight_seconds)  # no create of its predecessor's under r1 can land any more
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


class _SlowCreates:
    """The member, except that pod creates get no answer: the member carries them out later, when the test says."""

    def __init__(self, member: InMemoryMember) -> None:
        self.member = member
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.member, name)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "POST" and path.endswith("/pods"):
            self.sent.append((path, kwargs))
            raise KubeTransportError("timed out (the member may still carry it out)")
        return await self.member.request(method, path, **kwargs)

    async def land(self) -> None:
        for path, kwargs in self.sent:
            await self.member.request("POST", path, **kwargs)
        self.sent.clear()


@pytest.mark.parametrize("restarted", [pytest.param(False, id="same-agent"), pytest.param(True, id="after-a-restart")])
@pytest.mark.parametrize("landed", [pytest.param(True, id="create-landed"), pytest.param(False, id="create-lost")])
def test_an_expired_reservation_whose_create_may_land_keeps_its_capacity(restarted: bool, landed: bool) -> None:
    member, clock = fresh()
    slow = _SlowCreates(member)
    agent = start(slow, clock, in_flight_seconds=15)  # type: ignore[arg-type]

    async def scenario() -> None:
        nonlocal agent
        await agent.reserve(ReservationRequest("r1", {"cpu": 4000}, 30, "hub-web"))
        clock.advance(29)
        with pytest.raises(KubeTransportError):
            await agent.bind("r1", hub_pod("web", cpu="4"))
        if restarted:
            await agent.aclose()
            agent = Agent(member, clock=clock, namespace=NS, cluster_name="m1", in_flight_seconds=15)
        clock.advance(2)  # r1 has expired, but the pod created under it may still appear
        with pytest.raises(Refused) as unfit:
            await agent.reserve(ReservationRequest("r2", {"cpu": 4000}, 30, "hub-api"))
        assert unfit.value.reason == "Unfit"
        if landed:
            await slow.land()
            for _ in range(5):  # the agent's watch brings the pod
                await asyncio.sleep(0)
        clock.advance(15)  # past the window: the pod holds the node, or nothing does
        if landed:
            with pytest.raises(Refused):
                await agent.reserve(ReservationRequest("r2", {"cpu": 4000}, 30, "hub-api"))
        else:
            await agent.reserve(ReservationRequest("r2", {"cpu": 4000}, 30, "hub-api"))
        await agent.aclose()

    asyncio.run(scenario())


def test_a_restart_at_the_same_instant_still_waits_for_the_predecessors_create() -> None:
    """The agent's clock may read the same when it restarts as when its predecessor reserved: a reservation this
    process did not make may have a create of its predecessor in flight, however the timestamps compare."""
    member, clock = fresh()
    slow = _SlowCreates(member)
    first = start(slow, clock, in_flight_seconds=15)  # type: ignore[arg-type]
    ref = HubPodRef("hub-web", "apps", "web")

    async def scenario() -> None:
        await first.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
        with pytest.raises(KubeTransportError):
            await first.bind("r1", hub_pod("web"))
        await first.aclose()  # killed; no time has passed on the agent's clock
        restarted = Agent(member, clock=clock, namespace=NS, cluster_name="m1", in_flight_seconds=15)
        with pytest.raises(Refused) as settling:
            await restarted.release("r1", hub_pod=ref)
        assert settling.value.reason == "Settling"
        await slow.land()
        for _ in range(5):
            await asyncio.sleep(0)
        released, made = await restarted.release("r1", hub_pod=ref)
        assert (released, made is not None) == (False, True)
        await restarted.aclose()

    asyncio.run(scenario())


def test_an_expired_reservation_is_not_made_again_while_a_create_under_it_may_land() -> None:
    member, clock = fresh()
    slow = _SlowCreates(member)
    agent = start(slow, clock, in_flight_seconds=15)  # type: ignore[arg-type]
    ref = HubPodRef("hub-web", "apps", "web")

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 5, "hub-web"))
        clock.advance(4)
        with pytest.raises(KubeTransportError):
            await agent.bind("r1", hub_pod("web"))
        clock.advance(2)  # r1 expired; the create under it may still land
        with pytest.raises(Refused) as settling:
            await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 5, "hub-web"))
        assert settling.value.reason == "Settling"
        with pytest.raises(Refused):
            await agent.release("r1", hub_pod=ref)
        await agent.aclose()

    asyncio.run(scenario())


def test_a_bind_repeated_while_its_first_create_may_land_sends_no_second_create() -> None:
    """A second create of the same pod would succeed while the first is in flight; once that pod is deleted (its
    hub pod was), the first would land and bring it back -- on capacity already given to another pod."""
    member, clock = fresh()
    slow = _SlowCreates(member)
    agent = start(slow, clock, in_flight_seconds=15)  # type: ignore[arg-type]

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
        with pytest.raises(KubeTransportError):
            await agent.bind("r1", hub_pod("web"))
        with pytest.raises(Refused) as settling:  # the hub repeats the bind it got no answer to
            await agent.bind("r1", hub_pod("web"))
        assert (settling.value.status, settling.value.reason) == (503, "Settling")
        assert slow.sent and member.pods() == []  # one create in flight, none sent again
        await slow.land()
        for _ in range(5):
            await asyncio.sleep(0)
        made, created = await agent.bind("r1", hub_pod("web"))
        assert (made["name"], created) == ("web", False)
        await agent.aclose()

    asyncio.run(scenario())


def test_a_newer_hub_waits_out_the_creates_an_older_hubs_agent_may_still_have_in_flight() -> None:
    """Push mode: each hub replica runs its own agent over the member. The deposed leader's agent sent a create just
    before the new leader's agent raised the fencing token; until it can no longer land, no release may say no pod
    was made (the new leader would place the pod in another member)."""
    member, clock = fresh()
    slow = _SlowCreates(member)
    deposed = start(slow, clock, in_flight_seconds=15)  # type: ignore[arg-type]
    leader = Agent(member, clock=clock, namespace=NS, cluster_name="m1", in_flight_seconds=15)
    ref = HubPodRef("hub-web", "apps", "web")

    async def scenario() -> None:
        await leader.state()
        clock.advance(60)  # long after either started
        await deposed.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"), token=0)
        with pytest.raises(KubeTransportError):
            await deposed.bind("r1", hub_pod("web"), token=0)
        with pytest.raises(Refused) as settling:  # the new leader settles the deposed one's commit
            await leader.release("r1", token=1, hub_pod=ref)
        assert settling.value.reason == "Settling"
        await slow.land()
        for _ in range(5):
            await asyncio.sleep(0)
        released, made = await leader.release("r1", token=1, hub_pod=ref)
        assert (released, made is not None) == (False, True)
        await deposed.aclose()
        await leader.aclose()

    asyncio.run(scenario())
