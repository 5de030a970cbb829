"""ClusterBind (Bind): the second phase of the two-phase commit -- the member creates the pod, then the hub records it.

The framework calls it once ClusterReservation allowed the pod at Permit. It asks the scheduler's
:class:`~kubesched.framework.clusters.ClusterCommitter` to bind under this attempt's reservation id (the member
creates the pod with our labels and the reservation id, idempotently, and consumes the reservation), then binds
the hub pod to the cluster's super node through the Handle's client, so the hub shows where it went.

A bind that got no answer within ``bindTimeoutSeconds`` is sent again under the same reservation id, up to
``bindAttempts`` times (the agent makes one pod of it however often it comes: a lost answer must not turn into
a placement in a second cluster). When none was answered, the member may still act on one later, so the pod is
not given up before that is settled: the reservation is released -- once the member has answered a release, no
bind under that id can make a pod -- and if it was no longer held (a bind consumed it, or it expired), the bind
is sent once more: the member answers with the pod it made, or refuses (binds that never reached the member --
the connection refused -- need none of this). A member that answers neither is asked
again every few seconds until its reservation has expired (the hub's ``member_expiry`` plus a margin for clock
skew), after which it refuses any late bind. Only then does the pod go elsewhere.

A failure (the member refused -- say the reservation expired -- or the outcome was settled as "no pod") is
counted against the cluster in the committer's ledger and returned as an Error: the framework runs Unreserve
(ClusterReservation releases the reservation) and requeues the pod with backoff; the next attempt has a new
reservation id. The member pod is named like the hub pod and carries its uid: if the retry lands on the
member that did act on a bind, that member answers with the pod it made (no second one); any other pod of that
name is refused there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.framework.clusters import ClusterCommitter, CommitError, NoClusterCommitter, cluster_committer
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import ClusterBindArgs
from kubesched.plugins.multicluster.reservation import RESERVATION_STATE_KEY, HeldReservation

if TYPE_CHECKING:
    from kubesched.framework.interface import BindPlugin, Handle

NOT_RESERVED = "ClusterBind found no reservation for this attempt: enable ClusterReservation at permit"
BIND_FAILED_PREFIX = "binding in the cluster failed: "
SETTLE_RETRY_SECONDS = 2.0
SETTLE_SKEW_SECONDS = 5.0  # the member's clock may run behind the hub's by this much


class ClusterBind:
    """Bind: the member creates the pod under the reservation; then the hub pod is bound to the cluster."""

    def __init__(self, args: ClusterBindArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterBindArgs)
        self.handle = handle
        self._committer: ClusterCommitter | None = None

    @property
    def name(self) -> str:
        return names.CLUSTER_BIND

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        held = state.get(RESERVATION_STATE_KEY, HeldReservation)
        if held is None or not held.reserved or held.cluster != node_name:
            return Status.error(NOT_RESERVED)
        try:
            if self._committer is None:
                self._committer = cluster_committer(self.handle)
            committer = self._committer
        except NoClusterCommitter as error:
            return Status.error(error)
        failure = await self._bind_in_member(committer, node_name, held.reservation_id, pod)
        if failure is not None and failure.may_have_acted and await self._made_after_all(committer, held, pod):
            failure = None
        if failure is not None:
            committer.ledger.failed(node_name, self.handle.clock.now())
            return Status.error(BIND_FAILED_PREFIX + str(failure))
        committer.ledger.succeeded(node_name)
        try:
            await self.handle.client.bind(pod.pod, node_name)
        except Exception as exc:  # recorded in the member already; a retry's new pod of that name is refused there
            return Status.error(exc)
        return None

    async def _bind_in_member(
        self, committer: ClusterCommitter, cluster: str, reservation: str, pod: PodInfo
    ) -> CommitError | None:
        """None once the member bound it; else a failure, one whose ``may_have_acted`` is set if any attempt
        may have reached the member. Only a bind with no answer is sent again: the member may have acted on it,
        and the same reservation id again makes no second pod."""
        failure: CommitError | None = None
        reached = False
        for _ in range(self.args.bind_attempts):
            try:
                await committer.bind(cluster, reservation, pod.pod, timeout=self.args.bind_timeout_seconds)
                return None
            except CommitError as error:
                failure = error
                reached = reached or error.may_have_acted
                if error.refused:
                    break
        if failure is not None and reached != failure.may_have_acted:
            failure = CommitError(failure.cluster, failure.reason, str(failure), refused=False, may_have_acted=True)
        return failure

    async def _made_after_all(self, committer: ClusterCommitter, held: HeldReservation, pod: PodInfo) -> bool:
        """After binds the member never answered: whether it made the pod (True), or never will (False)."""
        clock = self.handle.clock
        timeout = self.args.bind_timeout_seconds
        while True:
            try:
                if await committer.release(held.cluster, held.reservation_id, timeout=timeout):
                    return False  # released before any bind used it
                await committer.bind(held.cluster, held.reservation_id, pod.pod, timeout=timeout)
                return True  # the earlier bind's pod, which the member answers with
            except CommitError as error:
                if error.refused or clock.now() >= held.member_expiry + SETTLE_SKEW_SECONDS:
                    return False  # no pod under this reservation, or none can be made any more
            await self.handle.sleep(SETTLE_RETRY_SECONDS)


if TYPE_CHECKING:

    def _conforms(plugin: ClusterBind) -> BindPlugin:
        return plugin
