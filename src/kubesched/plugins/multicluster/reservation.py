"""ClusterReservation (PreFilter, Filter, Reserve, Permit): the first phase of the two-phase commit to a member.

PreFilter first makes sure the pod is not already committed somewhere
(docs/explanation/cross-cluster-commit.md#a-hub-that-resumes): a hub pod whose commit record
(:mod:`~kubesched.plugins.multicluster.intent`) names a commit this scheduler has not seen settled waits --
``UnschedulableAndUnresolvable``, moved back once settled -- while background work asks that member (a release
of that reservation, which the member answers with the pod it made, or with the certainty that none was or will
be made). A pod some member runs (settled so, or reported in that member's state) is *adopted*: the search is
restricted to that cluster, ClusterCapacity and the suspect check stand aside, Permit reserves nothing, and
ClusterBind has the member answer with its pod. Attempt numbers continue from the record's.

Built by the framework in cluster profiles; the scheduler's committer
(:class:`~kubesched.clusterapi.contract.ClusterCommitter`) is reached through the Handle. Permit returns Wait and,
in the background, reserves the pod's requests in the chosen cluster under an id derived from the pod's uid and
the attempt (:func:`reservation_id`), awaits approval (``Automatic`` or the pod's annotation), then allows or
rejects; the decision is a policy verdict in the attempt's audit record. Unreserve releases the reservation.
Filter avoids suspect clusters (repeated commit failures in the committer's
:class:`~kubesched.clusterapi.contract.CommitLedger`); ``filter_batch`` asks the ledger first and is done when no
cluster is suspect. The protocol and why: docs/explanation/two-phase-commit.md.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api.objects import Pod
from kubesched.clusterapi.contract import (
    ClusterCommitter,
    CommitError,
    NoClusterCommitter,
    NoClusterStateSource,
    cluster_committer,
    take_cycle_snapshot,
)
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_PERMIT_TIMEOUT_SECONDS
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import APPROVAL_ANNOTATION, ClusterReservationArgs
from kubesched.plugins.multicluster.common import request_items, running_in
from kubesched.plugins.multicluster.intent import CommitIntent, read_intent
from kubesched.policyapi.verdicts import PolicyVerdict, add_verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BindingLimiter,
        Handle,
        PermitPlugin,
        PreFilterExtensions,
        PreFilterPlugin,
        ReservePlugin,
    )

log = logging.getLogger(__name__)

RESERVATION_STATE_KEY = "multicluster/ClusterReservation"
ADOPTION_STATE_KEY = "multicluster/ClusterReservation/adoption"
APPROVAL_ANNOTATION_KEY = "multicluster.kubesched.io/approval"
APPROVED = "approved"
DENIED = "denied"

ERR_REASON_SUSPECT = "cluster(s) were suspect after repeated commit failures"
WAITING_MESSAGE = "waiting for the cluster's reservation and approval"
RESERVE_FAILED_PREFIX = "reserving in the cluster failed: "
APPROVAL_DENIED = "approval denied"
APPROVAL_TIMED_OUT = "approval timed out"
# The plugin rejects a pod whose approval timed out itself, so that the audit record says so; the framework's own
# Permit timer is this much later, a backstop for a reserve call still hanging at the deadline.
PERMIT_BACKSTOP_SECONDS = 1.0
NO_COMMITTER = "no cluster committer: "
SETTLING_PREFIX = "waiting for cluster "
SETTLE_FIRST_SECONDS = 1.0
SETTLE_MAX_SECONDS = 30.0

_SUSPECT = Status(Code.UNSCHEDULABLE, ERR_REASON_SUSPECT)
VERDICT_ENGINE = "cluster-agent"
MAX_REMEMBERED_PODS = 65536


def _stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="milliseconds")


def settling_message(intent: CommitIntent) -> str:
    return f"{SETTLING_PREFIX}{intent.cluster} to settle an earlier commit (reservation {intent.reservation})"


def reservation_id(pod_uid: str, attempt: int) -> str:
    """A DNS label naming the reservation of ``pod_uid``'s ``attempt`` (same inputs, same id)."""
    return f"r-{hashlib.sha256(pod_uid.encode()).hexdigest()[:32]}-{attempt}"


@dataclass(frozen=True, slots=True)
class Adoption:
    """The cluster that already runs the cycle's pod (in CycleState from PreFilter on): it is bound there, as is."""

    cluster: str

    def clone(self) -> Adoption:
        return self


def adoption(state: CycleState) -> Adoption | None:
    """The cycle's adoption, if its pod already runs in a member (for the cluster plugins that stand aside)."""
    return state.get(ADOPTION_STATE_KEY, Adoption)


@dataclass(slots=True)
class HeldReservation:
    """This attempt's reservation, in CycleState for ClusterBind and Unreserve (written at Permit); ``adopted``: no
    reservation was made, the member already runs the pod."""

    cluster: str
    reservation_id: str
    node: str = ""
    reserved: bool = False
    released: bool = False
    attempt: int = 0
    adopted: bool = False
    deadline: float = float("inf")  # when the approval times out (the hub's clock)
    # When the member holds it no more at the latest, on the hub's clock: the answer's arrival plus the TTL (the
    # member's own expiry, counted from before it answered, is earlier). Past it a late bind is refused there.
    member_expiry: float = float("inf")

    def clone(self) -> HeldReservation:
        return self  # one reservation per attempt, shared by the cycle's plugins on purpose


class ClusterReservation:
    """Filter (suspect clusters), Reserve (Unreserve releases), Permit (reserve and approve in the background)."""

    def __init__(self, args: ClusterReservationArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterReservationArgs)
        self.handle = handle
        self._committer: ClusterCommitter | None = None
        # Attempt numbers per pod uid, the oldest forgotten past MAX_REMEMBERED_PODS: a forgotten pod starts at 1
        # again, which at worst meets its own earlier reservation (the same pod: reused, or refused as Conflict).
        self._attempts: OrderedDict[str, int] = OrderedDict()

    @property
    def name(self) -> str:
        return names.CLUSTER_RESERVATION

    def committer(self) -> ClusterCommitter:
        if self._committer is None:
            self._committer = cluster_committer(self.handle)
        return self._committer

    # -------------------------------------------------------------------------------------------- prefilter

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        try:
            committer = self.committer()
        except NoClusterCommitter:
            return None  # Permit says why
        ledger = committer.ledger
        intent = read_intent(pod.pod)
        made = ledger.made_in(pod.uid)
        if made is None and intent is not None and not ledger.is_settled_empty(pod.uid, intent.reservation):
            if ledger.begin_settle(pod.uid):
                self.handle.spawn(self._settle(pod, intent, committer))
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, settling_message(intent))
        if made is None:
            try:
                made = running_in(take_cycle_snapshot(state, self.handle), pod.uid)
            except NoClusterStateSource:  # no member reports what it runs: only settled commits adopt
                return None
        if made is None:
            return None
        state.write(ADOPTION_STATE_KEY, Adoption(made))
        return PreFilterResult(frozenset((made,)))

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    async def _settle(self, pod: PodInfo, intent: CommitIntent, committer: ClusterCommitter) -> None:
        """Ask ``intent``'s member until it answers whether it made the pod (docs/explanation/cross-cluster-commit.md);
        then the pod goes back to the queue."""
        ledger, delay = committer.ledger, SETTLE_FIRST_SECONDS
        try:
            while self.handle.get_pod(pod.uid) is not None:
                try:
                    outcome = await committer.release(
                        intent.cluster, intent.reservation, timeout=self.args.reserve_timeout_seconds, pod=pod.pod
                    )
                except CommitError as error:  # only an answer settles: unknown, unreachable and refused alike wait
                    log.info(
                        "settling %s's commit %s: %s (asking again in %gs)", pod.key, intent.reservation, error, delay
                    )
                    await self.handle.sleep(delay)
                    delay = min(delay * 2, SETTLE_MAX_SECONDS)
                    continue
                if outcome.made:
                    ledger.settled_made(pod.uid, intent.cluster)
                    log.info(
                        "pod %s already runs in cluster %s (%s): adopting it", pod.key, intent.cluster, outcome.made
                    )
                else:
                    ledger.settled_empty(pod.uid, intent.reservation)
                break
        finally:
            ledger.end_settle(pod.uid)
        latest = self.handle.get_pod(pod.uid)
        if latest is not None:
            self.handle.activate([latest])

    # ----------------------------------------------------------------------------------------------- filter

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if adoption(state) is not None:
            return None  # it runs there already: a suspect member still holds it
        try:
            ledger = self.committer().ledger
        except NoClusterCommitter:
            return None  # Permit says why; nothing is suspect without commits
        failures, last = ledger.consecutive(node_info.name)
        recent = last is not None and self.handle.clock.now() - last < self.args.suspect_seconds
        if failures >= self.args.suspect_after_failures and recent:
            return _SUSPECT
        return None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        if adoption(state) is not None:
            return None
        try:
            ledger = self.committer().ledger
        except NoClusterCommitter:
            return None
        now, after, window = self.handle.clock.now(), self.args.suspect_after_failures, self.args.suspect_seconds
        # Usually no cluster is suspect at all: the candidates are looked at only when one is.
        if not any(failures >= after and now - last < window for failures, last in ledger.failing().values()):
            return None
        suspect = [
            failures >= after and last is not None and now - last < window
            for failures, last in map(ledger.consecutive, nodes.names())
        ]
        if not any(suspect):
            return None
        return BatchFilterResult(np.asarray(suspect, dtype=np.int64), (_SUSPECT,))

    def max_bindings_in_flight(self) -> int | None:
        """``maxCommitsInFlight`` as the framework's bound on this profile's binding cycles (0: none)."""
        return self.args.max_commits_in_flight or None

    # ---------------------------------------------------------------------------------------------- reserve

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None  # the member is asked at Permit, in the background: the cycle does no I/O

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        held = state.get(RESERVATION_STATE_KEY, HeldReservation)
        if held is None or held.released or held.adopted:
            return
        held.released = True
        self.handle.spawn(self._release(held))

    async def _release(self, held: HeldReservation) -> None:
        try:
            await self.committer().release(held.cluster, held.reservation_id, timeout=self.args.reserve_timeout_seconds)
        except CommitError as error:  # the member's TTL releases it anyway
            log.warning("releasing reservation %s failed (it expires by its TTL): %s", held.reservation_id, error)

    # ----------------------------------------------------------------------------------------------- permit

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        try:
            committer = self.committer()
        except NoClusterCommitter as error:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_COMMITTER + str(error)), 0.0
        intent = read_intent(pod.pod)
        attempt = max(self._attempts.pop(pod.uid, 0), intent.attempt if intent is not None else 0) + 1
        self._attempts[pod.uid] = attempt
        if len(self._attempts) > MAX_REMEMBERED_PODS:
            self._attempts.popitem(last=False)
        adopted = adoption(state)
        if adopted is not None and adopted.cluster == node_name:
            # An open record naming this cluster keeps its reservation id; anything else gets this attempt's.
            rid = intent.reservation if intent is not None and intent.cluster == node_name else None
            held = HeldReservation(
                node_name, rid or reservation_id(pod.uid, attempt), reserved=True, attempt=attempt, adopted=True
            )
            state.write(RESERVATION_STATE_KEY, held)
            reasons = (f"adopted: cluster {node_name} already runs a pod for this hub pod",)
            add_verdict(state, self._verdict(held, True, reasons))
            return None, 0.0
        # at the framework's cap, the approval deadline moves ahead of it so that it still fires first
        timeout = min(self.args.permit_timeout_seconds, MAX_PERMIT_TIMEOUT_SECONDS - PERMIT_BACKSTOP_SECONDS)
        held = HeldReservation(
            node_name, reservation_id(pod.uid, attempt), deadline=self.handle.clock.now() + timeout, attempt=attempt
        )
        state.write(RESERVATION_STATE_KEY, held)
        self.handle.spawn(self._phase_one(state, pod, held, committer))
        return Status(Code.WAIT, WAITING_MESSAGE), timeout + PERMIT_BACKSTOP_SECONDS

    async def _reserve(self, pod: PodInfo, held: HeldReservation, committer: ClusterCommitter) -> CommitError | None:
        requests = request_items(pod.request)
        failure: CommitError | None = None
        for _ in range(self.args.reserve_attempts):
            if self.handle.get_waiting_pod(pod.uid) is None:
                return None
            try:
                held.node = await committer.reserve(
                    held.cluster,
                    held.reservation_id,
                    pod.pod,
                    requests,
                    self.args.ttl_seconds,
                    timeout=self.args.reserve_timeout_seconds,
                )
            except CommitError as error:
                failure = error
                if error.refused:
                    break  # the member said no: asking again gives the same answer
                continue
            held.reserved = True
            held.member_expiry = self.handle.clock.now() + self.args.ttl_seconds
            committer.ledger.succeeded(held.cluster)
            return None
        if failure is not None:
            committer.ledger.failed(held.cluster, self.handle.clock.now())
        return failure

    async def _phase_one(
        self, state: CycleState, pod: PodInfo, held: HeldReservation, committer: ClusterCommitter
    ) -> None:
        await asyncio.sleep(0)  # the binding cycle registers the waiting pod at the end of Permit
        failure = await self._reserve(pod, held, committer)
        if failure is not None:
            waiting = self.handle.get_waiting_pod(pod.uid)
            if waiting is not None:
                message = RESERVE_FAILED_PREFIX + str(failure)
                error = "" if failure.refused else str(failure)
                add_verdict(state, self._verdict(held, False, (message,), error=error))
                waiting.reject(self.name, message)
            return
        reserved = f"reserved on node {held.node} at {_stamp(self.handle.clock.now())}"
        while True:
            waiting = self.handle.get_waiting_pod(pod.uid)
            if waiting is None:
                if held.reserved:
                    await self._release(held)  # it stopped waiting while the member was reserving
                return
            verdict = self._approval(self.handle.get_pod(pod.uid) or pod.pod)
            now = self.handle.clock.now()
            if verdict is None and now >= held.deadline:
                message = f"{APPROVAL_TIMED_OUT} after {self.args.permit_timeout_seconds:g}s at plugin {self.name}"
                reasons = (reserved, f"{message} ({self.args.approval}) at {_stamp(now)}")
                add_verdict(state, self._verdict(held, False, reasons))
                waiting.reject(self.name, message)
                return
            if verdict is not None:
                decided = f"{APPROVAL_DENIED if verdict is False else 'approved'} ({self.args.approval}) at "
                reasons = (reserved, decided + _stamp(now))
                add_verdict(state, self._verdict(held, verdict, reasons))
                if verdict:
                    waiting.allow(self.name)
                else:
                    waiting.reject(self.name, APPROVAL_DENIED)
                return
            await self.handle.sleep(min(self.args.recheck_interval_seconds, held.deadline - now))

    def _verdict(
        self, held: HeldReservation, allowed: bool, reasons: tuple[str, ...], *, error: str = ""
    ) -> PolicyVerdict:
        """The audit trail's entry: the cluster, the reservation id (as the decision id), what happened when."""
        return PolicyVerdict(
            plugin=self.name,
            stage="permit",
            target=held.cluster,
            allowed=allowed,
            reasons=reasons,
            engine=VERDICT_ENGINE,
            decision_id=held.reservation_id,
            error=error,
        )

    def _approval(self, latest: Pod) -> bool | None:
        """True approved, False denied, None not decided yet."""
        if self.args.approval != APPROVAL_ANNOTATION:
            return True
        value = latest.metadata.annotations.get(APPROVAL_ANNOTATION_KEY, "")
        if value == APPROVED:
            return True
        if value == DENIED:
            return False
        return None


if TYPE_CHECKING:

    def _conforms(
        plugin: ClusterReservation,
    ) -> tuple[PreFilterPlugin, BatchFilterPlugin, ReservePlugin, PermitPlugin, BindingLimiter]:
        return plugin, plugin, plugin, plugin, plugin
