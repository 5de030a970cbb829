"""SecurityAuditPermit: asynchronous approval at Permit — hold the chosen node, decide later.

Permit returns Wait, which keeps the node reserved (the pod is assumed in the cache) while the decision
is made in background work spawned through the Handle, so other pods keep being scheduled. The policy
is evaluated with ``operation: "permit"`` for the chosen node (its document is taken from the cycle's
snapshot when Permit runs); it may answer allow, deny, or ``pending`` (e.g. a change ticket in a pod
annotation not approved yet), in which case the check is repeated every ``recheckIntervalSeconds`` with
the latest version of the pod, until allowed, denied or the Permit timeout (≤ 15 minutes) rejects the pod.
A rejection goes through the framework: Unreserve, requeue with backoff, and a FailedScheduling event
carrying the reason. The engine is the scheduler's shared client for these args (the same one as
SecurityAuditFilter's when both are configured alike); every call is a coroutine bounded by
``timeoutSeconds``, so nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kubesched.clusterapi.contract import policy_target_kind
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import (
    NODE_ADD,
    POLICY_REVISION_CHANGE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.interface import Handle
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.security.args import ENFORCE_DENY, FAILURE_IGNORE, SecurityAuditPermitArgs
from kubesched.plugins.security.decided_revisions import DecidedRevisions
from kubesched.plugins.security.engines import engine_client, engine_spec, pod_exemption
from kubesched.plugins.security.security_audit_filter import DENIED_PREFIX, ENGINE_FAILED_PREFIX
from kubesched.policyapi.contract import (
    OPERATION_PERMIT,
    UNDEFINED_REASON,
    Decision,
    PolicyError,
    decision_input,
    denial_reason,
    digest,
    pod_document,
    rounded_time,
    target_document,
)
from kubesched.policyapi.verdicts import PolicyVerdict, add_verdict

WAITING_MESSAGE = "waiting for security approval"


class SecurityAuditPermit:
    """Permit: Wait, evaluate policy (or wait for an approval) in the background, then Allow or Reject."""

    def __init__(self, args: SecurityAuditPermitArgs | None, handle: Handle) -> None:
        args = validated(args, SecurityAuditPermitArgs)
        self.args = args
        self.handle = handle
        self.client = engine_client(args, handle)
        self.decided_revisions = DecidedRevisions(engine_spec(args))
        self.target_kind = policy_target_kind(handle)
        self._document = target_document(self.target_kind)
        self.calls = 0

    @property
    def name(self) -> str:
        return names.SECURITY_AUDIT_PERMIT

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        exemption = pod_exemption(self.args, self.handle, pod.pod)
        if exemption.reason:
            add_verdict(state, self._verdict(node_name, True, exempt=exemption.reason))
            return None, 0.0
        node_info = self.handle.snapshot().get(node_name)
        if node_info is None:
            return Status(Code.UNSCHEDULABLE, f"node {node_name} is gone"), 0.0
        self.handle.spawn(self._decide(state, pod, node_name, self._document(node_info.node), exemption.note))
        return Status(Code.WAIT, WAITING_MESSAGE), self.args.permit_timeout_seconds

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # As SecurityAuditFilter's: the node's facts, the pod itself, or another policy revision.
        return [
            ClusterEventWithHint(POLICY_REVISION_CHANGE, self.decided_revisions.hint),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT | ActionType.UPDATE_NODE_ANNOTATION,
                    "NodeUpdate",
                )
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE, "UnscheduledPodUpdate")
            ),
        ]

    async def _decide(
        self, state: CycleState, pod: PodInfo, node_name: str, node_doc: dict[str, Any], note: str = ""
    ) -> None:
        # Let the binding cycle register the waiting pod first (it is added at the end of Permit).
        await asyncio.sleep(0)
        while True:
            waiting = self.handle.get_waiting_pod(pod.uid)
            if waiting is None:
                return  # allowed by someone else, rejected, timed out or deleted
            if self.handle.snapshot().get(node_name) is None:
                waiting.reject(self.name, f"node {node_name} is gone")
                return
            latest = self.handle.get_pod(pod.uid) or pod.pod
            document = decision_input(
                pod_document(latest),
                node_doc,
                target_kind=self.target_kind,
                operation=OPERATION_PERMIT,
                time=rounded_time(self.handle.clock.now(), self.args.time_granularity_seconds),
            )
            try:
                self.calls += 1
                decision = await self.client.decide(document)
                if decision.undefined and self.args.failure_policy == FAILURE_IGNORE:
                    raise PolicyError(UNDEFINED_REASON)  # a set-up failure: Ignore lets it through
            except PolicyError as exc:
                skipped = self.args.failure_policy == FAILURE_IGNORE
                add_verdict(state, self._verdict(node_name, skipped, skipped=skipped, error=str(exc), note=note))
                if skipped:
                    waiting.allow(self.name)
                else:
                    waiting.reject(self.name, ENGINE_FAILED_PREFIX + str(exc))
                return
            self.decided_revisions.record(pod.uid, decision.revision)
            if decision.pending:
                await self.handle.sleep(self.args.recheck_interval_seconds)
                continue
            add_verdict(
                state,
                self._verdict(node_name, decision.allowed, decision=decision, input_digest=digest(document), note=note),
            )
            if decision.allowed or self.args.enforcement_action != ENFORCE_DENY:
                waiting.allow(self.name)
            else:
                waiting.reject(self.name, DENIED_PREFIX + denial_reason(decision.reasons))
            return

    def _verdict(
        self,
        node_name: str,
        allowed: bool,
        *,
        decision: Decision | None = None,
        exempt: str = "",
        skipped: bool = False,
        error: str = "",
        input_digest: str = "",
        note: str = "",
    ) -> PolicyVerdict:
        return PolicyVerdict(
            plugin=self.name,
            stage="permit",
            target=node_name,
            allowed=allowed,
            reasons=decision.reasons if decision else (),
            engine=self.client.kind,
            revision=decision.revision if decision else "",
            decision_id=decision.decision_id if decision else None,
            input_digest=input_digest,
            enforcement=self.args.enforcement_action,
            skipped=skipped,
            error=error,
            exempt=exempt,
            note=note,
        )


if TYPE_CHECKING:
    from kubesched.framework.interface import PermitPlugin

    def _conforms(plugin: SecurityAuditPermit) -> PermitPlugin:
        return plugin
