"""The two-phase commit end to end: a hub scheduler (clusters as its nodes, in memory) places pods onto two real
members (two envtest kube-apiservers, each behind its own agent on loopback HTTPS) through ClusterReservation
(Permit: reserve, approve) and ClusterBind (Bind: the member creates the pod). Covered: a placement, a denied
approval releasing the capacity, and an agent lost between reserve and bind -- the reservation expires, the pod
lands on the other member, never on both."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesched.harness.envtest import ControlPlane
from kubesched.plugins.multicluster.reservation import APPROVAL_ANNOTATION_KEY, reservation_id
from kubesched.testing.agents import make_node
from kubesched.testing.builders import make_pod
from kubesched.testing.hubs import HUB, hub_config, hub_pod, member_pods, reservations, running_hub

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def second_member(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(assets, tmp_path_factory.mktemp("second-member")) as plane:
        yield plane


@pytest.fixture
def members(member: ControlPlane, second_member: ControlPlane, agent_namespace: str) -> Iterator[str]:
    """Both members with the test's namespace; the second one's Nodes and pods are removed afterwards too."""
    assert second_member.request("POST", "/api/v1/namespaces", {"metadata": {"name": agent_namespace}})[0] == 201
    yield agent_namespace
    second_member.request("DELETE", f"/api/v1/namespaces/{agent_namespace}/pods", query={"gracePeriodSeconds": "0"})
    second_member.request("DELETE", "/api/v1/nodes")


@pytest.mark.parametrize(
    ("approval", "annotation"),
    [
        pytest.param("Automatic", "", id="automatic-approval"),
        pytest.param("Annotation", "approved", id="approved-by-annotation"),
    ],
)
def test_a_pod_is_placed_by_reserve_approve_and_bind(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path, approval: str, annotation: str
) -> None:
    make_node(member, "east-1", cpu="4")
    make_node(second_member, "west-1", cpu="4")
    pod = hub_pod("web", members, cpu="2", approval=annotation, region="east")

    async def run() -> None:
        planes = {"east": member, "west": second_member}
        async with running_hub(planes, tmp_path, members, [pod], hub_config(approval)) as hub:
            await hub.scheduler.run_until_idle(hub.clock)
            assert hub.placed(pod) == "east"  # the pod's nodeSelector names east's region
            [verdict] = hub.verdicts(pod)  # the audit record's entry for the commit
            assert (verdict.plugin, verdict.target, verdict.allowed) == ("ClusterReservation", "east", True)
            assert verdict.decision_id == reservation_id(pod.metadata.uid, 1)
            assert verdict.reasons[0].startswith("reserved on node east-1 at ")
            assert verdict.reasons[1].startswith(f"approved ({approval}) at ")

    asyncio.run(run())
    [created] = member_pods(member, members)
    assert created["metadata"]["name"] == pod.metadata.name
    assert created["spec"]["nodeName"] == "east-1"
    assert "nodeSelector" not in created["spec"]  # it chose the cluster; in the member it would refuse the node
    annotations = created["metadata"]["annotations"]
    assert annotations["multicluster.kubesched.io/reservation-id"] == reservation_id(pod.metadata.uid, 1)
    assert annotations["multicluster.kubesched.io/hub-pod-uid"] == pod.metadata.uid
    assert reservations(member, members) == []  # consumed by the bind
    assert member_pods(second_member, members) == []


def test_a_denied_approval_releases_the_reservation(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path
) -> None:
    make_node(member, "east-1", cpu="4")
    make_node(second_member, "west-1", cpu="1")
    pod = hub_pod("web", members, cpu="2", approval="denied")

    async def run() -> None:
        planes = {"east": member, "west": second_member}
        async with running_hub(planes, tmp_path, members, [pod], hub_config("Annotation")) as hub:
            await hub.scheduler.run_until_idle(hub.clock)
            assert hub.placed(pod) == ""
            assert any("approval denied" in message for message in hub.messages(pod))
            [verdict] = hub.verdicts(pod)  # the audit record says why, and which reservation was released
            assert (verdict.target, verdict.allowed, verdict.decision_id) == (
                "east",
                False,
                reservation_id(pod.metadata.uid, 1),
            )
            assert verdict.reasons[1].startswith("approval denied (Annotation) at ")

    asyncio.run(run())
    assert reservations(member, members) == []  # each attempt's reservation released at Unreserve
    assert member_pods(member, members) == []


def test_an_approval_that_never_comes_times_out_and_releases_the_reservation(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path
) -> None:
    make_node(member, "east-1", cpu="4")
    make_node(second_member, "west-1", cpu="1")
    pod = hub_pod("web", members, cpu="2")  # Annotation approval, and nobody annotates it

    async def run() -> None:
        planes = {"east": member, "west": second_member}
        config = hub_config("Annotation", permit_timeout=3)
        async with running_hub(planes, tmp_path, members, [pod], config) as hub:
            await hub.scheduler.run_until_idle(hub.clock)
            assert hub.placed(pod) == ""
            assert any("approval timed out after 3s" in message for message in hub.messages(pod))
            [verdict] = hub.verdicts(pod)  # the audit record says why (rejected at Permit: it waits for an event)
            assert (verdict.target, verdict.allowed, verdict.decision_id) == (
                "east",
                False,
                reservation_id(pod.metadata.uid, 1),
            )
            assert verdict.reasons[0].startswith("reserved on node east-1 at ")
            assert verdict.reasons[1].startswith(
                "approval timed out after 3s at plugin ClusterReservation (Annotation) at "
            )

    asyncio.run(run())
    assert reservations(member, members) == []  # released at Unreserve
    assert member_pods(member, members) == []


def test_an_agent_lost_between_reserve_and_bind_lets_the_reservation_expire_and_the_pod_land_elsewhere(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path
) -> None:
    make_node(member, "east-1", cpu="8")  # the freest: ClusterBalance prefers it
    make_node(second_member, "west-1", cpu="4")
    pod = hub_pod("web", members, cpu="2")  # not approved yet: it waits at Permit, reserved in east

    async def run() -> None:
        planes = {"east": member, "west": second_member}
        config = hub_config("Annotation", suspect_after=1)
        async with running_hub(planes, tmp_path, members, [pod], config) as hub:
            assert await hub.scheduler.schedule_next()
            await hub.scheduler.settle()
            assert reservations(member, members) == [f"kubesched-reservation-{reservation_id(pod.metadata.uid, 1)}"]

            east = hub.agents["east"]
            await east.stop()  # lost between reserve and bind
            approved = make_pod(pod.metadata.name).namespace(members).scheduler(HUB).req(cpu="2")
            hub.cluster.update_pod(approved.annotation(APPROVAL_ANNOTATION_KEY, "approved").obj())
            await hub.scheduler.run_until_idle(hub.clock)
            assert hub.placed(pod) == "west"  # east failed its bind: suspect, so the retry went west
            assert any("binding in the cluster failed" in message for message in hub.messages(pod))

            hub.agent_clock.advance(31)  # east's reservation outlives no TTL: back up, its sweep removes it
            await east.start()
            deadline = asyncio.get_running_loop().time() + 10
            while reservations(member, members) and asyncio.get_running_loop().time() < deadline:
                hub.agent_clock.advance(5)  # the agent's next sweep
                await asyncio.sleep(0.05)

    asyncio.run(run())
    assert reservations(member, members) == []
    assert member_pods(member, members) == []  # never twice
    [created] = member_pods(second_member, members)
    assert (created["metadata"]["name"], created["spec"]["nodeName"]) == (pod.metadata.name, "west-1")
    assert reservations(second_member, members) == []


def test_a_hub_restart_between_reserve_and_bind_leaves_no_reservation_past_its_ttl_and_one_pod(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path
) -> None:
    make_node(member, "east-1", cpu="8")
    make_node(second_member, "west-1", cpu="4")
    waiting = hub_pod("web", members, cpu="2")
    approved = make_pod(waiting.metadata.name).namespace(members).scheduler(HUB).req(cpu="2")
    approved = approved.annotation(APPROVAL_ANNOTATION_KEY, "approved")
    planes = {"east": member, "west": second_member}
    held = f"kubesched-reservation-{reservation_id(waiting.metadata.uid, 1)}"

    async def first_hub() -> None:
        async with running_hub(planes, tmp_path / "1", members, [waiting], hub_config("Annotation")) as hub:
            assert await hub.scheduler.schedule_next()
            await hub.scheduler.settle()
            assert reservations(member, members) == [held]
        # closing cancels the waiting pod without Unreserve: the hub is gone, its reservation is not

    async def second_hub() -> None:
        async with running_hub(planes, tmp_path / "2", members, [approved.obj()], hub_config("Annotation")) as hub:
            assert reservations(member, members) == [held]
            deadline = asyncio.get_running_loop().time() + 10
            hub.agent_clock.advance(31)  # past the TTL: the agent's sweep removes what nobody confirmed
            while reservations(member, members) and asyncio.get_running_loop().time() < deadline:
                hub.agent_clock.advance(5)
                await asyncio.sleep(0.05)
            assert reservations(member, members) == []
            await hub.scheduler.run_until_idle(hub.clock)
            # The state it started from still counted east's old reservation: west was the freer then.
            placed.append(hub.placed(waiting))

    placed: list[str] = []
    asyncio.run(first_hub())
    asyncio.run(second_hub())
    plane = {"east": member, "west": second_member}[placed[0]]
    assert [p["metadata"]["name"] for p in member_pods(plane, members)] == [waiting.metadata.name]
    assert len(member_pods(member, members)) + len(member_pods(second_member, members)) == 1  # never twice
    assert reservations(member, members) == reservations(second_member, members) == []


def test_a_burst_never_overcommits_a_member(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path
) -> None:
    make_node(member, "east-1", cpu="4")
    make_node(second_member, "west-1", cpu="3")
    pods = [hub_pod(f"burst{i}", members, cpu="1") for i in range(10)]

    async def run() -> None:
        planes = {"east": member, "west": second_member}
        async with running_hub(planes, tmp_path, members, pods, hub_config()) as hub:
            await hub.scheduler.run_until_idle(hub.clock)
            placed = [hub.placed(pod) for pod in pods]
            assert (placed.count("east"), placed.count("west"), placed.count("")) == (4, 3, 3)

    asyncio.run(run())
    assert len(member_pods(member, members)) == 4  # 4 CPUs, 1 CPU each: what the hub placed, no more
    assert len(member_pods(second_member, members)) == 3
    assert reservations(member, members) == reservations(second_member, members) == []


def test_a_push_mode_member_commits_behind_the_same_interface(
    member: ControlPlane, second_member: ControlPlane, members: str, tmp_path: Path
) -> None:
    make_node(member, "east-1", cpu="2")
    make_node(second_member, "west-1", cpu="2")
    pods = [hub_pod(f"mixed{i}", members, cpu="1") for i in range(5)]

    async def run() -> None:
        planes = {"east": member, "west": second_member}
        async with running_hub(planes, tmp_path, members, pods, hub_config(), push=frozenset({"east"})) as hub:
            await hub.scheduler.run_until_idle(hub.clock)
            placed = [hub.placed(pod) for pod in pods]
            assert (placed.count("east"), placed.count("west"), placed.count("")) == (2, 2, 1)

    asyncio.run(run())
    east = member_pods(member, members)
    assert len(east) == 2 and all(p["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubesched" for p in east)
    assert len(member_pods(second_member, members)) == 2
    assert reservations(member, members) == reservations(second_member, members) == []
