"""ClusterBind (Bind): the second phase of the two-phase commit -- the member creates the pod, then the hub records it.

The framework calls it once ClusterReservation allowed the pod at Permit. In order
(docs/explanation/cross-cluster-commit.md#the-states-of-a-commit):

1. it records the commit on the hub pod (:mod:`~kubesched.plugins.multicluster.intent`, compare-and-set on the
   record it last saw): a hub that restarts, or another that takes over, finds where to ask before it places the
   pod anywhere. A record that changed under it (another hub commits the pod), or an open one it has not seen
   settled, stops the bind: the pod is requeued and ClusterReservation settles the record first;
2. asks the scheduler's :class:`~kubesched.clusterapi.contract.ClusterCommitter` to bind under this attempt's
   reservation id: the member creates the pod with our labels and the reservation id -- or answers with the pod it
   already runs for this hub pod (an adopted pod, or an earlier bind whose answer was lost);
3. binds the hub pod to the cluster's super node through the Handle's client, so the hub shows where it went.

A bind that got no answer within ``bindTimeoutSeconds`` is sent again under the same reservation id, up to
``bindAttempts`` times. When none was answered, the member may still act on one later, so the commit is settled
before the pod goes anywhere else: a release of the reservation, which the member answers with the pod it made
(the commit happened), or with the certainty that none was or ever will be made. Binds that never reached the
member (the connection refused) need none of this. A member that does not answer by the time its reservation
expired (plus a margin for clock skew) leaves the outcome unknown: the bind fails, the record stays open, and
ClusterReservation keeps asking in the background while the pod waits.

A failure is counted against the cluster in the committer's ledger and returned as an Error: the framework runs
Unreserve (ClusterReservation releases the reservation) and requeues the pod with backoff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.clusterapi.contract import ClusterCommitter, CommitError, NoClusterCommitter, cluster_committer
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import ClusterBindArgs
from kubesched.plugins.multicluster.intent import COMMIT_ANNOTATION, CommitIntent, read_intent
from kubesched.plugins.multicluster.reservation import RESERVATION_STATE_KEY, HeldReservation, settling_message

if TYPE_CHECKING:
    from kubesched.framework.interface import BindPlugin, Handle

NOT_RESERVED = "ClusterBind found no reservation for this attempt: enable ClusterReservation at permit"
BIND_FAILED_PREFIX = "binding in the cluster failed: "
RECORD_FAILED_PREFIX = "recording the commit on the hub pod failed: "
RECORD_CHANGED = "the hub pod's commit record changed while this hub committed it (another hub commits it)"
OUTCOME_UNKNOWN = "the member did not say whether it made the pod; it is asked again before the pod goes anywhere"
SETTLE_RETRY_SECONDS = 2.0
SETTLE_SKEW_SECONDS = 5.0  # the member's clock may run behind the hub's by this much
SETTLE_IN_BIND_SECONDS = 60.0  # longer, and the background settle takes over (the binding cycle ends)


class ClusterBind:
    """Bind: the commit is recorded on the hub pod, the member creates the pod, then the hub pod is bound."""

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
        ledger = committer.ledger
        refused = await self._record(pod, held, committer)
        if refused is not None:
            return refused
        failure = await self._bind_in_member(committer, node_name, held.reservation_id, pod)
        if failure is not None and failure.may_have_acted:
            made = await self._settle(committer, held, pod)
            if made is None:
                ledger.failed(node_name, self.handle.clock.now())
                return Status.error(f"{BIND_FAILED_PREFIX}{failure}; {OUTCOME_UNKNOWN}")
            failure = None if made else failure
        if failure is not None:
            ledger.settled_empty(pod.uid, held.reservation_id)
            ledger.failed(node_name, self.handle.clock.now())
            return Status.error(BIND_FAILED_PREFIX + str(failure))
        ledger.succeeded(node_name)
        ledger.settled_made(pod.uid, node_name)  # should the hub's own binding fail, the next attempt adopts it
        try:
            await self.handle.client.bind(pod.pod, node_name)
        except Exception as exc:  # the member runs it: the next attempt adopts it there
            return Status.error(exc)
        ledger.forget(pod.uid)
        return None

    async def _record(self, pod: PodInfo, held: HeldReservation, committer: ClusterCommitter) -> Status | None:
        """Write this commit onto the hub pod before the member acts (module doc); None when recorded."""
        latest = self.handle.get_pod(pod.uid) or pod.pod
        current = latest.metadata.annotations.get(COMMIT_ANNOTATION)
        intent = CommitIntent(held.cluster, held.reservation_id, held.attempt)
        text = intent.text()
        if current == text:
            return None
        recorded = read_intent(latest)
        ledger = committer.ledger
        if (
            recorded is not None
            and not ledger.is_settled_empty(pod.uid, recorded.reservation)
            and ledger.made_in(pod.uid) != recorded.cluster
        ):
            return Status.error(settling_message(recorded))  # ClusterReservation settles it at the next attempt
        try:
            swapped = await self.handle.client.compare_and_set_annotation(latest, COMMIT_ANNOTATION, current, text)
        except Exception as exc:  # the API server's errors, whatever the backend: nothing was sent to the member
            return Status.error(RECORD_FAILED_PREFIX + str(exc))
        return None if swapped else Status.error(RECORD_CHANGED)

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

    async def _settle(self, committer: ClusterCommitter, held: HeldReservation, pod: PodInfo) -> bool | None:
        """After binds the member never answered: whether it made the pod (True) or never will (False); None when
        it gave no answer before its reservation expired."""
        clock = self.handle.clock
        timeout = self.args.bind_timeout_seconds
        give_up = min(held.member_expiry + SETTLE_SKEW_SECONDS, clock.now() + SETTLE_IN_BIND_SECONDS)
        while True:
            try:
                outcome = await committer.release(held.cluster, held.reservation_id, timeout=timeout, pod=pod.pod)
                return bool(outcome.made)
            except CommitError:
                if clock.now() >= give_up:
                    return None
            await self.handle.sleep(SETTLE_RETRY_SECONDS)


if TYPE_CHECKING:

    def _conforms(plugin: ClusterBind) -> BindPlugin:
        return plugin
