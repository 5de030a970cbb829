"""ClusterReservation (Filter, Reserve, Permit): the first phase of the two-phase commit to a member cluster.

Built by the framework in cluster profiles; the scheduler's committer
(:class:`~kubesched.framework.clusters.ClusterCommitter`) is reached through the Handle. Permit returns Wait and,
in the background, reserves the pod's requests in the chosen cluster under an id derived from the pod's uid and
the attempt (:func:`reservation_id`), awaits approval (``Automatic`` or the pod's annotation), then allows or
rejects; the decision is a policy verdict in the attempt's audit record. Unreserve releases the reservation.
Filter avoids suspect clusters (repeated commit failures in the committer's
:class:`~kubesched.framework.clusters.CommitLedger`); ``filter_batch`` asks the ledger first and is done when no
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
from kubesched.framework.clusters import ClusterCommitter, CommitError, NoClusterCommitter, cluster_committer
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_PERMIT_TIMEOUT_SECONDS
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.framework.verdict import PolicyVerdict, add_verdict
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import APPROVAL_ANNOTATION, ClusterReservationArgs
from kubesched.plugins.multicluster.common import request_items

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BindingLimiter,
        Handle,
        PermitPlugin,
        ReservePlugin,
    )

log = logging.getLogger(__name__)

RESERVATION_STATE_KEY = "multicluster/ClusterReservation"
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

_SUSPECT = Status(Code.UNSCHEDULABLE, ERR_REASON_SUSPECT)
VERDICT_ENGINE = "cluster-agent"
MAX_REMEMBERED_PODS = 65536


def _stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="milliseconds")


def reservation_id(pod_uid: str, attempt: int) -> str:
    """A DNS label naming the reservation of ``pod_uid``'s ``attempt`` (same inputs, same id)."""
    return f"r-{hashlib.sha256(pod_uid.encode()).hexdigest()[:32]}-{attempt}"


@dataclass(slots=True)
class HeldReservation:
    """This attempt's reservation, in CycleState for ClusterBind and Unreserve (written at Permit)."""

    cluster: str
    reservation_id: str
    node: str = ""
    reserved: bool = False
    released: bool = False
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

    # ----------------------------------------------------------------------------------------------- filter

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
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
        if held is None or held.released:
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
        attempt = self._attempts.pop(pod.uid, 0) + 1
        self._attempts[pod.uid] = attempt
        if len(self._attempts) > MAX_REMEMBERED_PODS:
            self._attempts.popitem(last=False)
        # at the framework's cap, the approval deadline moves ahead of it so that it still fires first
        timeout = min(self.args.permit_timeout_seconds, MAX_PERMIT_TIMEOUT_SECONDS - PERMIT_BACKSTOP_SECONDS)
        held = HeldReservation(node_name, reservation_id(pod.uid, attempt), deadline=self.handle.clock.now() + timeout)
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
    ) -> tuple[BatchFilterPlugin, ReservePlugin, PermitPlugin, BindingLimiter]:
        return plugin, plugin, plugin, plugin
