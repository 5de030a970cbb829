"""Push mode: the agent's logic run inside the hub on the member's kubeconfig, behind the same endpoint interface.

Who calls it: a hub whose MemberCluster says ``connection.kubeconfigSecretRef`` (push mode) builds a
:class:`PushEndpoint` over an :class:`~kubesched.agent.core.Agent` for that member, and hands it to the state
cache and the committer exactly where a pull-mode member gets its
:class:`~kubesched.federation.agent_client.AgentClient`; tests and the in-process benchmark use it too. The calls,
results and errors are the agent client's (:class:`~kubesched.federation.agent_client.MemberEndpoint`):

* the agent's refusals become :class:`~kubesched.federation.agent_client.AgentRefused` with the status and reason
  the HTTPS endpoint would have answered; the member's API failing is ``502``/``503`` ``MemberUnavailable`` as
  there, except that no answer at all (or the deadline) is
  :class:`~kubesched.federation.agent_client.AgentUnreachable`;
* every call has a deadline, like the client's;
* there is no agent process to sweep expired reservations, so every state refresh sweeps them first (the cache
  refreshes each member every few seconds: an unconfirmed reservation is gone one refresh after its TTL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from kubesched.agent.core import Agent, HubPodRef, Refused
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.clusterapi.contract import ClusterState
from kubesched.federation.agent_client import (
    DEFAULT_TIMEOUT,
    AgentRefused,
    AgentUnreachable,
    BoundPod,
    HeldReservation,
    Released,
)
from kubesched.federation.wire import ReservationRequest

__all__ = ["PushEndpoint"]

T = TypeVar("T")


class PushEndpoint:
    """One member reached directly through its API server (module doc). The agent's client is the caller's."""

    def __init__(self, agent: Agent, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.agent = agent
        self.timeout = timeout
        self.where = f"push:{agent.client.server}"

    async def _call(self, work: Awaitable[T], timeout: float | None) -> T:
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                return await work
        except TimeoutError as error:
            raise AgentUnreachable(self.where, "no answer within the deadline") from error
        except Refused as refusal:
            raise AgentRefused(self.where, refusal.status, refusal.reason, refusal.message) from refusal
        except KubeApiError as error:
            raise AgentRefused(self.where, 502, "MemberUnavailable", f"the member's API answered {error}") from error
        except KubeTransportError as error:
            raise AgentUnreachable(self.where, f"the member's API did not answer: {error}") from error

    async def _swept_state(self) -> ClusterState:
        await self.agent.sweep_expired()
        state, _ = await self.agent.state()
        return state

    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState:
        state = await self._call(self._swept_state(), timeout)
        return replace(state, name=name, generation=generation)

    async def reserve(
        self, request: ReservationRequest, *, token: int = 0, timeout: float | None = None
    ) -> HeldReservation:
        reservation, created = await self._call(self.agent.reserve(request, token), timeout)
        return HeldReservation(reservation.id, reservation.node, reservation.expires_at, created)

    async def release(
        self,
        reservation_id: str,
        *,
        hub_pod: tuple[str, str, str] | None = None,
        token: int = 0,
        timeout: float | None = None,
    ) -> Released:
        ref = None if hub_pod is None else HubPodRef(*hub_pod)
        released, made = await self._call(self.agent.release(reservation_id, token, ref), timeout)
        return Released(released, None if made is None else BoundPod.from_summary(made, False))

    async def bind(
        self,
        reservation_id: str,
        pod: Mapping[str, Any],
        *,
        token: int = 0,
        timeout: float | None = None,
        expires_at: float | None = None,
    ) -> BoundPod:
        member_pod, created = await self._call(self.agent.bind(reservation_id, pod, token, expires_at), timeout)
        return BoundPod.from_summary(member_pod, created)

    async def delete_pod(
        self, namespace: str, name: str, hub_uid: str, *, token: int = 0, timeout: float | None = None
    ) -> bool:
        return await self._call(self.agent.delete_pod(namespace, name, hub_uid, token), timeout)

    async def find_pod(self, hub_pod: tuple[str, str, str], *, timeout: float | None = None) -> BoundPod | None:
        found = await self._call(self.agent.find(HubPodRef(*hub_pod)), timeout)
        return None if found is None else BoundPod.from_summary(found, False)

    async def aclose(self) -> None:
        """Stop the agent's watches of the member; the member's client belongs to the caller."""
        await self.agent.aclose()
