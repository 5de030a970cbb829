"""The hub's :class:`~kubesched.clusterapi.contract.ClusterCommitter` over the members' endpoints.

Who calls it: a multi-cluster scheduler registers an :class:`AgentCommitter` as the Handle service
:data:`~kubesched.clusterapi.contract.CLUSTER_COMMIT_SERVICE`; the ClusterReservation and ClusterBind plugins
call it from background work and binding cycles. It maps a cluster name to that member's
:class:`~kubesched.federation.agent_client.MemberEndpoint` (its agent's client in pull mode, the push-mode
endpoint otherwise) and translates their errors into the framework's
:class:`~kubesched.clusterapi.contract.CommitError` (plugins never see an agent error): an answer of the member
is ``refused`` with its reason, no answer is ``Unreachable``. The pod sent to bind is the hub pod's manifest as
the hub holds it; the member keeps its spec, labels and annotations and places it on the reserved node. A bind
names the reservation as its reserve was answered (its ``expiresAt``, remembered from the reserve to the bind or
the release), so a reservation of the same id that a late reserve made after a release is not consumed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from kubesched.api.objects import Pod
from kubesched.clusterapi.contract import CommitError, CommitLedger, ReleaseOutcome
from kubesched.federation.agent_client import AgentError, AgentRefused, AgentUnreachable, MemberEndpoint
from kubesched.federation.wire import ReservationRequest

__all__ = ["UNKNOWN_CLUSTER_REASON", "UNREACHABLE_REASON", "AgentCommitter"]

MAX_HELD = 65536  # reservations remembered between their reserve and their bind (the oldest forgotten first)
UNREACHABLE_REASON = "Unreachable"
UNKNOWN_CLUSTER_REASON = "UnknownCluster"


class AgentCommitter:
    """Reserve / release / bind through each member's endpoint; the endpoints are the caller's (it closes them).
    A cluster without an endpoint is refused as ``UnknownCluster``."""

    def __init__(self, clients: Mapping[str, MemberEndpoint]) -> None:
        self._clients = dict(clients)
        self._ledger = CommitLedger()
        # (cluster, reservation id) -> its expiresAt as the reserve was answered: the bind names that reservation.
        self._held: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.fencing_token = 0
        """Sent with every call (the live hub sets it from its Lease while it leads)."""

    @property
    def ledger(self) -> CommitLedger:
        return self._ledger

    def set_endpoint(self, cluster: str, endpoint: MemberEndpoint) -> None:
        """Reach ``cluster`` through ``endpoint`` from now on (the live hub, as MemberClusters come and go)."""
        self._clients[cluster] = endpoint

    def remove_endpoint(self, cluster: str) -> None:
        self._clients.pop(cluster, None)

    def _client(self, cluster: str) -> MemberEndpoint:
        client = self._clients.get(cluster)
        if client is None:
            raise CommitError(cluster, UNKNOWN_CLUSTER_REASON, "no agent is known for it", refused=True)
        return client

    @staticmethod
    def _translated(cluster: str, error: AgentError) -> CommitError:
        if isinstance(error, AgentRefused):
            reason = error.reason or str(error.status)
            return CommitError(cluster, reason, str(error), refused=error.definite)
        delivered = not isinstance(error, AgentUnreachable) or error.delivered
        return CommitError(cluster, UNREACHABLE_REASON, str(error), refused=False, may_have_acted=delivered)

    async def reserve(
        self,
        cluster: str,
        reservation_id: str,
        pod: Pod,
        requests: Mapping[str, int],
        ttl_seconds: float,
        *,
        timeout: float,
    ) -> str:
        request = ReservationRequest(
            reservation_id, dict(requests), ttl_seconds, pod.metadata.uid, tuple(pod.spec.tolerations)
        )
        try:
            held = await self._client(cluster).reserve(request, token=self.fencing_token, timeout=timeout)
        except AgentError as error:
            raise self._translated(cluster, error) from error
        self._held.pop((cluster, reservation_id), None)
        self._held[(cluster, reservation_id)] = held.expires_at
        if len(self._held) > MAX_HELD:
            self._held.popitem(last=False)
        return held.node

    async def release(
        self, cluster: str, reservation_id: str, *, timeout: float, pod: Pod | None = None
    ) -> ReleaseOutcome:
        hub_pod = None if pod is None else (pod.metadata.uid, pod.metadata.namespace, pod.metadata.name)
        self._held.pop((cluster, reservation_id), None)
        try:
            answer = await self._client(cluster).release(
                reservation_id, hub_pod=hub_pod, token=self.fencing_token, timeout=timeout
            )
        except AgentError as error:
            raise self._translated(cluster, error) from error
        made = "" if answer.made is None else f"{answer.made.namespace}/{answer.made.name}"
        return ReleaseOutcome(answer.released, made)

    async def bind(self, cluster: str, reservation_id: str, pod: Pod, *, timeout: float) -> None:
        held = self._held.get((cluster, reservation_id))
        try:
            await self._client(cluster).bind(
                reservation_id, pod.raw, token=self.fencing_token, timeout=timeout, expires_at=held
            )
        except AgentError as error:
            raise self._translated(cluster, error) from error
        self._held.pop((cluster, reservation_id), None)
