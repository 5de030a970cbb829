"""The hub's side of the agent, against real agents over loopback HTTPS (a real kube-apiserver behind them): the
agent client's calls and its error tree, and the cluster state cache refreshed in the background on a virtual
clock -- concurrent, bounded by per-member deadlines, keeping a failed member's last state with its old stamp."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubesched.agent.core import Agent
from kubesched.agent.push import PushEndpoint
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.kubeconfig import load_connection
from kubesched.clock import VirtualClock
from kubesched.federation.agent_client import (
    AgentClient,
    AgentError,
    AgentRefused,
    AgentUnreachable,
    BoundPod,
    Released,
)
from kubesched.federation.cache import ClusterStateCache, MemberRefresh
from kubesched.federation.state import placeholder_uid
from kubesched.federation.wire import ReservationRequest
from kubesched.harness.envtest import ControlPlane
from kubesched.testing.agents import RunningAgent, make_node

pytestmark = pytest.mark.e2e


class SilentServer:
    """Accepts connections and never says a word (not even the TLS handshake): a hung agent."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def __aenter__(self) -> SilentServer:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._writers.append(writer)

        self._server = await asyncio.start_server(hold, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def pod(name: str, namespace: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"hub-{name}"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
    }


def test_the_client_speaks_every_endpoint(member: ControlPlane, agent_namespace: str, tmp_path: Path) -> None:
    make_node(member, "n1", cpu="2")

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=agent_namespace) as agent:
            client = AgentClient(agent.url, agent.token, ssl_context=agent.client_ssl_context())
            try:
                state = await client.state("eu-1", generation=7)
                assert (state.name, state.ready, state.generation) == ("eu-1", True, 7)
                assert state.allocatable["cpu"] == 2000
                wanted = ReservationRequest("r1", {"cpu": 1000}, 30, pod_uid="hub-p1")
                held = await client.reserve(wanted)
                assert (held.id, held.node, held.created) == ("r1", "n1", True)
                assert (await client.reserve(wanted)).created is False
                assert "hub-p1" in (await client.state("eu-1")).accounted_pods
                bound = await client.bind("r1", pod("p1", agent_namespace))
                assert (bound.name, bound.node, bound.created) == ("p1", "n1", True)
                assert (await client.bind("r1", pod("p1", agent_namespace))).created is False
                assert await client.release("r1") == Released(False)  # consumed by the bind
                # Named, the hub pod's commit is found: the member made its pod, nothing is released.
                settled = await client.release("r1", hub_pod=("hub-p1", agent_namespace, "p1"))
                assert settled == Released(False, BoundPod(agent_namespace, "p1", bound.uid, "n1", False))
                assert (client.requests_sent, client.connections_opened) == (8, 1)  # one keep-alive connection
            finally:
                await client.aclose()

    asyncio.run(run())


async def _wrong_token(agent: RunningAgent, silent: SilentServer) -> Awaitable[Any]:
    return AgentClient(agent.url, "not-the-token", ssl_context=agent.client_ssl_context()).state("m")


async def _unfit(agent: RunningAgent, silent: SilentServer) -> Awaitable[Any]:
    client = AgentClient(agent.url, agent.token, ssl_context=agent.client_ssl_context())
    return client.reserve(ReservationRequest("big", {"cpu": 64_000}, 30))


async def _closed_port(agent: RunningAgent, silent: SilentServer) -> Awaitable[Any]:
    port = agent.port
    await agent.stop()
    return AgentClient(f"https://127.0.0.1:{port}", agent.token, ssl_context=agent.client_ssl_context()).state("m")


async def _hung(agent: RunningAgent, silent: SilentServer) -> Awaitable[Any]:
    client = AgentClient(f"https://127.0.0.1:{silent.port}", "t", ssl_context=agent.client_ssl_context())
    return client.state("m", timeout=0.3)


async def _untrusted(agent: RunningAgent, silent: SilentServer) -> Awaitable[Any]:
    return AgentClient(agent.url, agent.token).state("m")  # the system's trust store: not our test CA


Scenario = Callable[[RunningAgent, SilentServer], Awaitable[Awaitable[Any]]]


@pytest.mark.parametrize(
    ("scenario", "error", "status", "words"),
    [
        pytest.param(_wrong_token, AgentRefused, 401, "Unauthorized", id="wrong-token-is-refused"),
        pytest.param(_unfit, AgentRefused, 409, "Unfit", id="no-room-is-refused-with-its-reason"),
        pytest.param(_closed_port, AgentUnreachable, None, "ConnectionRefusedError", id="agent-down-is-unreachable"),
        pytest.param(_hung, AgentUnreachable, None, "within the deadline", id="hung-agent-hits-the-deadline"),
        pytest.param(_untrusted, AgentUnreachable, None, "SSL", id="untrusted-certificate-is-unreachable"),
    ],
)
def test_every_failure_is_one_of_our_errors(
    member: ControlPlane,
    agent_namespace: str,
    tmp_path: Path,
    scenario: Scenario,
    error: type[AgentError],
    status: int | None,
    words: str,
) -> None:
    make_node(member, "n1", cpu="2")

    async def run() -> None:
        async with (
            RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=agent_namespace) as agent,
            SilentServer() as silent,
        ):
            call = await scenario(agent, silent)
            with pytest.raises(error) as raised:
                await call
            assert words in str(raised.value)
            if status is not None:
                assert isinstance(raised.value, AgentRefused)
                assert raised.value.status == status

    asyncio.run(run())


async def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_the_cache_refreshes_in_the_background_and_a_failed_member_keeps_its_last_state(
    member: ControlPlane, agent_namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="4")
    clock = VirtualClock()
    start = clock.now()

    async def run() -> None:
        async with (
            RunningAgent(member, tmp_path / "a", clock=clock, namespace=agent_namespace) as east,
            RunningAgent(member, tmp_path / "b", clock=clock, namespace=agent_namespace) as west,
        ):
            clients = {
                name: AgentClient(agent.url, agent.token, ssl_context=agent.client_ssl_context())
                for name, agent in (("east", east), ("west", west))
            }
            members = [MemberRefresh(name, client, interval=10, deadline=2) for name, client in clients.items()]
            try:
                async with ClusterStateCache(members, clock=clock) as cache:
                    await _eventually(lambda: all(cache.health(n).refreshes == 1 for n in clients))
                    first = cache.snapshot(clock.now())
                    for name in clients:
                        state = first.clusters[name]
                        assert (state.ready, state.observed_at, state.allocatable["cpu"]) == (True, start, 4000)
                        assert placeholder_uid(name) in state.accounted_pods

                    await west.stop()
                    clock.advance(10)  # the next round: east answers, west does not
                    await _eventually(
                        lambda: cache.health("west").failures == 1 and cache.health("east").refreshes == 2
                    )
                    later = cache.snapshot(clock.now())
                    assert later.clusters["east"].observed_at == start + 10
                    assert later.clusters["west"] == first.clusters["west"]  # its last state, as it was
                    assert later.age("west") == 10  # so ClusterReadiness' staleness rule applies to it
                    health = cache.health("west")
                    assert (health.consecutive_failures, health.last_success_at) == (1, start)
                    assert "unreachable" in health.last_error or "ConnectionRefusedError" in health.last_error

                    await west.start()  # back on the same port
                    clock.advance(10)
                    await _eventually(lambda: cache.health("west").refreshes == 2)
                    assert cache.health("west").consecutive_failures == 0
                    assert cache.health("west").failures == 1
                    assert cache.snapshot(clock.now()).age("west") == 0
            finally:
                for client in clients.values():
                    await client.aclose()

    asyncio.run(run())


def test_a_hung_member_delays_no_one_and_a_new_member_is_not_ready(
    member: ControlPlane, agent_namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="4")
    clock = VirtualClock()

    async def run() -> None:
        async with (
            RunningAgent(member, tmp_path, clock=clock, namespace=agent_namespace) as agent,
            SilentServer() as silent,
        ):
            fast = AgentClient(agent.url, agent.token, ssl_context=agent.client_ssl_context())
            hung = AgentClient(f"https://127.0.0.1:{silent.port}", "t", ssl_context=agent.client_ssl_context())
            cache = ClusterStateCache(
                [MemberRefresh("fast", fast, deadline=5.0), MemberRefresh("hung", hung, deadline=1.0)], clock=clock
            )
            try:
                never = cache.snapshot(clock.now()).clusters["hung"]
                assert (never.ready, never.ready_reason) == (False, "not yet observed")
                refreshing = asyncio.ensure_future(cache.refresh_all())
                await _eventually(lambda: cache.health("fast").refreshes == 1)
                # The rounds run side by side: the fast member answered while the hung one was still waited for.
                assert cache.health("hung").failures == 0 and not refreshing.done()
                assert await refreshing == {"fast": True, "hung": False}  # the hung one cut at its deadline
                assert cache.snapshot(clock.now()).clusters["hung"].ready is False
                assert cache.health("hung").last_error.endswith("no answer within the deadline")
            finally:
                await fast.aclose()
                await hung.aclose()

    asyncio.run(run())


def test_a_push_endpoint_answers_like_an_agent_and_its_refresh_sweeps(
    member: ControlPlane, agent_namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="1")
    clock = VirtualClock()
    kubeconfig = member.write_kubeconfig(tmp_path / "member.kubeconfig")

    async def run() -> None:
        client = KubeClient(load_connection(str(kubeconfig)))
        down = KubeClient(replace(load_connection(str(kubeconfig)), server="https://127.0.0.1:1"), max_retries=0)
        try:
            agent = Agent(client, clock=clock, namespace=agent_namespace, cluster_name="ignored")
            await agent.ensure_namespace()
            endpoint = PushEndpoint(agent)
            held = await endpoint.reserve(ReservationRequest("r1", {"cpu": 1000}, 30))
            assert (held.node, held.created) == ("n1", True)
            with pytest.raises(AgentRefused) as unfit:
                await endpoint.reserve(ReservationRequest("r2", {"cpu": 1000}, 30))
            assert (unfit.value.status, unfit.value.reason) == (409, "Unfit")
            state = await endpoint.state("east", generation=3)
            assert (state.name, state.generation) == ("east", 3)
            assert state.nodes is not None and state.nodes[0].free["cpu"] == 0

            clock.advance(31)  # no agent process sweeps in push mode: the next refresh does
            state = await endpoint.state("east")
            assert state.nodes is not None and state.nodes[0].free["cpu"] == 1000
            assert await agent.reservations() == []

            unreachable = PushEndpoint(Agent(down, clock=clock, namespace=agent_namespace))
            with pytest.raises(AgentUnreachable, match="did not answer"):
                await unreachable.state("east")
            await unreachable.aclose()
            await endpoint.aclose()
        finally:
            await client.aclose()
            await down.aclose()

    asyncio.run(run())
