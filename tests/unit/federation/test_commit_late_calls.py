"""Calls the hub gave up on that reach the member's agent later (an agent queued behind a slow member API, a
stalled process): once a release has settled a commit, none of them may make a pod
(docs/explanation/cross-cluster-commit.md#the-agent-tells-the-truth). The hub's committer and a push-mode endpoint
over an in-memory member; the calls to delay are held back and delivered when the test says."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubesched.agent.core import Agent
from kubesched.agent.memory import InMemoryMember
from kubesched.agent.push import PushEndpoint
from kubesched.agent.server import AgentServer, server_ssl_context
from kubesched.api.objects import Pod
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import CommitError, ReleaseOutcome
from kubesched.federation.agent_client import (
    AgentClient,
    AgentError,
    AgentRefused,
    AgentUnreachable,
    BoundPod,
    HeldReservation,
)
from kubesched.federation.commit import AgentCommitter
from kubesched.federation.wire import ReservationRequest
from kubesched.harness.certificates import write_server_certificates

NS = "kubesched-system"


class _Late(PushEndpoint):
    """A push endpoint whose reserve and bind calls named in ``held_back`` get no answer and reach the agent only
    when :meth:`deliver` is called, with what they carried when they were sent."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent)
        self.held_back: set[str] = set()
        self.late: list[Callable[[], Awaitable[Any]]] = []

    async def reserve(
        self, request: ReservationRequest, *, token: int = 0, timeout: float | None = None
    ) -> HeldReservation:
        if "reserve" in self.held_back:
            self.late.append(lambda: super(_Late, self).reserve(request, token=token, timeout=timeout))
            raise AgentUnreachable(self.where, "no answer within the deadline")
        return await super().reserve(request, token=token, timeout=timeout)

    async def bind(self, reservation_id: str, pod: Mapping[str, Any], **kwargs: Any) -> BoundPod:
        if "bind" in self.held_back:
            self.late.append(lambda: super(_Late, self).bind(reservation_id, pod, **kwargs))
            raise AgentUnreachable(self.where, "no answer within the deadline")
        return await super().bind(reservation_id, pod, **kwargs)

    async def deliver(self) -> None:
        for call in self.late:
            with contextlib.suppress(AgentError):  # nobody waits for the answer
                await call()
        self.late.clear()


def test_a_bind_that_arrives_after_the_release_makes_no_pod_even_if_its_reserve_arrives_late_too() -> None:
    clock = VirtualClock()
    member = InMemoryMember("m1")
    member.add_node({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4", "memory": "4Gi", "pods": "10"}}})
    member.add_namespace("apps")
    pod = Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "apps", "uid": "hub-web"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
        },
        "the hub pod",
    )

    async def scenario() -> None:
        agent = Agent(member, clock=clock, namespace=NS, cluster_name="m1")
        await agent.ensure_namespace()
        endpoint = _Late(agent)
        committer = AgentCommitter({"m1": endpoint})
        endpoint.held_back = {"reserve"}
        with pytest.raises(CommitError):  # the first reserve gets no answer: it is still on its way
            await committer.reserve("m1", "r1", pod, {"cpu": 1000}, 30, timeout=2)
        endpoint.held_back = set()
        await committer.reserve("m1", "r1", pod, {"cpu": 1000}, 30, timeout=2)  # the retry is answered
        endpoint.held_back = {"bind"}
        with pytest.raises(CommitError):  # no answer to the bind either
            await committer.bind("m1", "r1", pod, timeout=2)
        # ClusterBind settles: the member released r1 and made no pod -- the hub may place the pod elsewhere now.
        assert await committer.release("m1", "r1", timeout=2, pod=pod) == ReleaseOutcome(True, "")
        clock.advance(1)
        await endpoint.deliver()  # the first reserve arrives (r1 again), then the bind
        assert member.pods() == []
        await agent.aclose()

    asyncio.run(scenario())


def test_over_https_a_bind_names_the_reservation_it_consumes(tmp_path: Path) -> None:
    """The same through the agent's HTTPS endpoint and the hub's client: ``reservationExpiresAt`` on the wire."""
    clock = VirtualClock()
    member = InMemoryMember("m1")
    member.add_node({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4", "memory": "4Gi", "pods": "10"}}})
    member.add_namespace("apps")
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "apps", "uid": "hub-web"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
    }
    ca, cert, key = write_server_certificates(tmp_path)

    async def scenario() -> None:
        agent = Agent(member, clock=clock, namespace=NS, cluster_name="m1")
        await agent.ensure_namespace()
        server = AgentServer(agent, token="t", ssl_context=server_ssl_context(cert, key))
        await server.start()
        client = AgentClient(f"https://127.0.0.1:{server.port}", "t", ssl_context=ssl.create_default_context(cafile=ca))
        try:
            held = await client.reserve(ReservationRequest("r1", {"cpu": 1000}, 30, "hub-web"))
            with pytest.raises(AgentRefused) as other:
                await client.bind("r1", manifest, expires_at=held.expires_at - 1)
            assert (other.value.status, other.value.reason) == (404, "NotFound")
            with pytest.raises(AgentRefused) as invalid:
                await client.bind("r1", manifest, expires_at="soon")  # type: ignore[arg-type]
            assert (invalid.value.status, invalid.value.reason) == (400, "Invalid")
            made = await client.bind("r1", manifest, expires_at=held.expires_at)
            assert made.created and made.node == "n1"
        finally:
            await client.aclose()
            await server.close()
            await agent.aclose()

    asyncio.run(scenario())
