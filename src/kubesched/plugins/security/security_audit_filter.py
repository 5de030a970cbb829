"""SecurityAuditFilter: the seed's policy gate at Filter — a pod may not go where policy says no.

Never one policy call per node: the pod is decided for every node of the snapshot in one batch
evaluation, in PreFilter (or, when the plugin is enabled only at ``filter`` as in the seed's
configuration, at the first Filter call of the cycle), and the result is cached by (policy revision,
pod input digest, node-facts version, time bucket). Filter then only reads. ``evaluationMode:
per-node`` reproduces the seed's one-call-per-node pattern, as an option and as the benchmark baseline.

Statuses, as in the seed: a deny is Unschedulable ``Denied by security policy: <reason>``; an engine
failure is Error ``OPA evaluation failed: <error>`` (retried with backoff) unless ``failurePolicy:
Ignore``, which lets the pod through and records that the policy was skipped. ``enforcementAction``
``warn`` and ``dryrun`` evaluate and record but never reject (Gatekeeper's modes). Every decision is
left in the cycle state for the audit trail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import NODE_ADD, ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from kubesched.framework.interface import Handle, PreFilterExtensions
from kubesched.framework.node_table import BatchFilterResult, BoolArray, IntArray, NodeBatch
from kubesched.framework.policy import (
    OPERATION_SCHEDULE,
    UNDEFINED_REASON,
    Decision,
    PolicyError,
    decision_input,
    digest,
    node_document,
    pod_document,
    rounded_time,
)
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.framework.verdict import PolicyVerdict, add_verdict
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.security.args import (
    ENFORCE_DENY,
    ENFORCE_WARN,
    FAILURE_IGNORE,
    MODE_PER_NODE,
    SecurityAuditFilterArgs,
)
from kubesched.plugins.security.engines import build_engine, exemption
from kubesched.policy.cache import CacheKey, DecisionCache

STATE_KEY = "PreFilter" + names.SECURITY_AUDIT_FILTER
_WARNED_KEY = "kubesched.io/security-audit-warned"
DENIED_PREFIX = "Denied by security policy: "
ENGINE_FAILED_PREFIX = "OPA evaluation failed: "


def denial_status(decision: Decision) -> Status:
    reason = "; ".join(decision.reasons) if decision.reasons else "not allowed"
    return Status(Code.UNSCHEDULABLE, DENIED_PREFIX + reason)


@dataclass(slots=True)
class PodEvaluation:
    """The policy's answers for one pod input under one policy revision and node-facts version.

    Filled incrementally: nodes are decided (in one engine call per batch of undecided nodes) when the
    node search first reaches them, so a pod costs one call over the ~10 % of nodes kube-scheduler
    examines, and replicas sharing this evaluation from the cache pay only for nodes not yet decided.
    Also the VerdictSource the audit trail reads.
    """

    plugin: str
    engine: str
    revision: str
    pod_digest: str
    enforcement: str
    pod_doc: dict[str, Any] = field(default_factory=dict)
    time: str = ""
    decisions: dict[str, Decision] = field(default_factory=dict)
    statuses: list[Status] = field(default_factory=list)
    status_by_slot: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    decided_by_slot: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    interned: dict[tuple[str, ...], int] = field(default_factory=dict)
    exempt: str = ""
    error: str = ""
    skipped: bool = False

    def record(self, infos: Sequence[NodeInfo], decisions: dict[str, Decision]) -> None:
        for info in infos:
            decision = decisions[info.name]
            self.decisions[info.name] = decision
            self.decided_by_slot[info.slot] = True
            if decision.allowed:
                continue
            status_id = self.interned.get(decision.reasons)
            if status_id is None:
                self.statuses.append(denial_status(decision))
                status_id = self.interned[decision.reasons] = len(self.statuses)
            self.status_by_slot[info.slot] = status_id

    def clone(self) -> PodEvaluation:
        return self

    def rejects(self) -> bool:
        return self.enforcement == ENFORCE_DENY and not self.exempt and not self.skipped

    def status_for(self, node_name: str) -> Status | None:
        if not self.rejects():
            return None
        decision = self.decisions.get(node_name)
        if decision is None or decision.allowed:
            return None
        return denial_status(decision)

    def verdict_for(self, target: str) -> PolicyVerdict | None:
        decision = self.decisions.get(target)
        common = {
            "plugin": self.plugin,
            "stage": "filter",
            "target": target,
            "engine": self.engine,
            "revision": self.revision,
            "input_digest": self.pod_digest,
            "enforcement": self.enforcement,
        }
        if self.exempt or self.skipped or self.error:
            return PolicyVerdict(
                allowed=bool(self.exempt or self.skipped),
                skipped=self.skipped,
                error=self.error,
                exempt=self.exempt,
                **common,  # type: ignore[arg-type]
            )
        if decision is None:
            return None
        return PolicyVerdict(
            allowed=decision.allowed,
            reasons=decision.reasons,
            decision_id=decision.decision_id,
            **common,  # type: ignore[arg-type]
        )


class SecurityAuditFilter:
    """PreFilter/Filter: reject nodes the security policy denies for this pod (OPA or embedded Rego).

    This class answers per node only; :func:`new_security_audit_filter` builds the batched variant
    unless ``evaluationMode: per-node`` asks for the seed's call pattern.
    """

    def __init__(self, args: SecurityAuditFilterArgs | None, handle: Handle) -> None:
        args = validated(args, SecurityAuditFilterArgs)
        self.args = args
        self.handle = handle
        self.engine = build_engine(args, handle.clock)
        self.cache: DecisionCache[PodEvaluation] = DecisionCache(args.cache_size)
        self._node_docs: tuple[int, dict[int, dict[str, Any]]] = (-1, {})
        self.calls = 0  # policy evaluations made (batch or per node), for benchmarks and tests

    @property
    def name(self) -> str:
        return names.SECURITY_AUDIT_FILTER

    # ---- evaluation ----------------------------------------------------------------------------

    def _time(self) -> str:
        return rounded_time(self.handle.clock.now(), self.args.time_granularity_seconds)

    def _base(self, pod_digest: str) -> PodEvaluation:
        return PodEvaluation(
            plugin=self.name,
            engine=self.engine.kind,
            revision="",
            pod_digest=pod_digest,
            enforcement=self.args.enforcement_action,
        )

    def evaluation(self, pod: PodInfo) -> PodEvaluation:
        """This pod's evaluation for the current policy revision and node facts (cached; nothing decided
        yet when new)."""
        pod_doc = pod_document(pod.pod)
        time = self._time()
        pod_digest = digest({"pod": pod_doc, "operation": OPERATION_SCHEDULE, "time": time})
        evaluation = self._base(pod_digest)
        reason = exemption(self.args, pod.pod)
        if reason:
            evaluation.exempt = reason
            return evaluation
        snapshot = self.handle.snapshot()
        try:
            revision = self.engine.revision()
        except PolicyError as exc:
            return self._failed(evaluation, exc)
        key = CacheKey(revision, pod_digest, snapshot.nodes_version, time, OPERATION_SCHEDULE)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        capacity = snapshot.table.capacity
        evaluation.revision = revision
        evaluation.pod_doc = pod_doc
        evaluation.time = time
        evaluation.status_by_slot = np.zeros(capacity, dtype=np.int64)
        evaluation.decided_by_slot = np.zeros(capacity, dtype=np.bool_)
        self.cache.put(key, evaluation)
        return evaluation

    def decide(self, evaluation: PodEvaluation, slots: IntArray) -> None:
        """Decide, in one engine call, every node of ``slots`` the evaluation has not decided yet."""
        if evaluation.exempt or evaluation.error:
            return
        undecided = slots[~evaluation.decided_by_slot[slots]]
        if len(undecided) == 0:
            return
        snapshot = self.handle.snapshot()
        infos: list[NodeInfo] = [snapshot.table.infos[slot] for slot in undecided.tolist()]
        try:
            self.calls += 1
            decisions = self.engine.decide_batch(
                evaluation.pod_doc,
                self._node_documents(snapshot.nodes_version, infos),
                target_kind="node",
                operation=OPERATION_SCHEDULE,
                time=evaluation.time,
            )
        except PolicyError as exc:
            self._failed(evaluation, exc)
            # A failed evaluation must not answer later pods: the next cycle asks the engine again.
            self.cache.discard(evaluation.revision)
            return
        if self.args.failure_policy == FAILURE_IGNORE and any(d.undefined for d in decisions.values()):
            # An undefined decision is a wrong path or a missing default: a failure of the policy set-up,
            # which Ignore lets through (Fail keeps it a deny).
            self._failed(evaluation, PolicyError(UNDEFINED_REASON))
            self.cache.discard(evaluation.revision)
            return
        evaluation.record(infos, decisions)

    def _failed(self, evaluation: PodEvaluation, exc: PolicyError) -> PodEvaluation:
        evaluation.error = str(exc)
        evaluation.skipped = self.args.failure_policy == FAILURE_IGNORE
        return evaluation

    def _node_documents(self, version: int, infos: Sequence[NodeInfo]) -> list[dict[str, Any]]:
        """Node documents are built once per node-facts version, then reused by every pod."""
        if self._node_docs[0] != version:
            self._node_docs = (version, {})
        docs = self._node_docs[1]
        result = []
        for info in infos:
            doc = docs.get(info.slot)
            if doc is None:
                doc = docs[info.slot] = node_document(info.node)
            result.append(doc)
        return result

    def _warn(self, state: CycleState, pod: PodInfo, evaluation: PodEvaluation, slots: IntArray) -> None:
        """enforcementAction warn: one Warning event per pod attempt that met a denial."""
        if evaluation.enforcement != ENFORCE_WARN or state.get(_WARNED_KEY, bool) is not None:
            return
        denied = slots[evaluation.status_by_slot[slots] > 0]
        if len(denied) == 0:
            return
        state.write(_WARNED_KEY, True)
        first = evaluation.statuses[int(evaluation.status_by_slot[denied[0]]) - 1]
        self.handle.event_recorder.event(
            pod.pod,
            "Warning",
            "PolicyViolation",
            "Scheduling",
            f"warn: security policy would deny {len(denied)} of {len(slots)} nodes examined: {first.message}",
        )

    def _state(self, state: CycleState, pod: PodInfo) -> PodEvaluation:
        evaluation = state.get(STATE_KEY, PodEvaluation)
        if evaluation is None:
            # Also reached from Filter when the plugin is enabled only at filter (the seed's config).
            evaluation = self.evaluation(pod)
            state.write(STATE_KEY, evaluation)
            add_verdict(state, evaluation)
        return evaluation

    @staticmethod
    def _engine_failure(evaluation: PodEvaluation) -> Status | None:
        if evaluation.error and not evaluation.skipped:
            return Status(Code.ERROR, ENGINE_FAILED_PREFIX + evaluation.error)
        return None

    # ---- extension points ----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        if self.args.evaluation_mode == MODE_PER_NODE:
            return None
        evaluation = self._state(state, pod)
        failure = self._engine_failure(evaluation)
        if failure is not None:
            return failure
        # warn/dryrun still evaluate at Filter (for the audit trail); only exempt pods skip it.
        return Status(Code.SKIP) if evaluation.exempt else None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if self.args.evaluation_mode == MODE_PER_NODE:
            return self._filter_one_call(state, pod, node_info)
        evaluation = self._state(state, pod)
        if not evaluation.exempt and node_info.name not in evaluation.decisions:
            # The per-node path decides the whole snapshot at once rather than call once per node.
            self.decide(evaluation, self.handle.snapshot().slots)
        failure = self._engine_failure(evaluation)
        if failure is not None:
            return failure
        status = evaluation.status_for(node_info.name)
        if status is not None or evaluation.enforcement == ENFORCE_WARN:
            self._warn(state, pod, evaluation, np.asarray([node_info.slot], dtype=np.int64))
        return status

    def _filter_one_call(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        """The seed's pattern: one engine call per (pod, node), no batching, no cache."""
        reason = exemption(self.args, pod.pod)
        if reason:
            return None
        document = decision_input(
            pod_document(pod.pod),
            node_document(node_info.node),
            target_kind="node",
            operation=OPERATION_SCHEDULE,
            time=self._time(),
        )
        try:
            self.calls += 1
            decision = self.engine.decide(document)
        except PolicyError as exc:
            if self.args.failure_policy == FAILURE_IGNORE:
                return None
            return Status(Code.ERROR, ENGINE_FAILED_PREFIX + str(exc))
        if decision.allowed or self.args.enforcement_action != ENFORCE_DENY:
            return None
        return denial_status(decision)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # A denial can change when a node's facts change or the pod itself changes (labels, images).
        # Policy and data reloads are not cluster events; the unschedulable-pool flush retries those pods.
        return [
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

    def close(self) -> None:
        self.engine.close()


class BatchedSecurityAuditFilter(SecurityAuditFilter):
    """The default: Filter over every candidate node is one gather from the pod's evaluation."""

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        evaluation = self._state(state, pod)
        self.decide(evaluation, nodes.slots)
        self._warn(state, pod, evaluation, nodes.slots)
        failure = self._engine_failure(evaluation)
        if failure is not None:
            return BatchFilterResult(np.ones(len(nodes), dtype=np.int64), [failure])
        if not evaluation.rejects() or not evaluation.statuses:
            return None
        return BatchFilterResult(evaluation.status_by_slot[nodes.slots], evaluation.statuses)


def new_security_audit_filter(args: SecurityAuditFilterArgs | None, handle: Handle) -> SecurityAuditFilter:
    """The registry's factory: without a batch method in per-node mode, so the framework asks node by node
    and stops once enough feasible nodes are found, exactly as kube-scheduler calls the seed's plugin."""
    if args is not None and args.evaluation_mode == MODE_PER_NODE:
        return SecurityAuditFilter(args, handle)
    return BatchedSecurityAuditFilter(args, handle)


if TYPE_CHECKING:
    from kubesched.framework.interface import BatchFilterPlugin, PreFilterPlugin
    from kubesched.framework.verdict import VerdictSource

    def _conforms(
        plugin: BatchedSecurityAuditFilter, evaluation: PodEvaluation
    ) -> tuple[PreFilterPlugin, BatchFilterPlugin, VerdictSource]:
        return plugin, plugin, evaluation
