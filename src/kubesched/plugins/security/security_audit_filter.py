"""SecurityAuditFilter: the policy gate at Filter — a pod may not go where policy says no.

Built by the framework in profiles that enable it; its engine client comes through the Handle. Before each Filter
batch the runtime awaits :meth:`SecurityAuditFilter.prefetch_filter`, which decides the batch's undecided nodes in
one engine call; Filter then only reads. Answers are cached in :class:`NodeDecisions` by policy revision, pod key,
time bucket and operation, and within an entry by node class, the keys made from what the policy reads; each
attempt's own state (exemption, engine failure, what was skipped) is its :class:`AttemptPolicy` in the CycleState,
sealed into plain verdicts when the cycle ends. A deny is UnschedulableAndUnresolvable ``Denied by security policy:
<reason>`` (evicting pods cannot change it); an engine failure is Error ``OPA evaluation failed: <error>`` unless
``failurePolicy: Ignore``. Before an attempt reads the cache it awaits the engine's ``refresh``
(docs/explanation/policy-freshness.md). How and why: docs/explanation/policy-decisions.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

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
from kubesched.framework.interface import DecisionCacheStats, Handle, PreFilterExtensions
from kubesched.framework.node_table import BatchFilterResult, BoolArray, ClassColumn, IntArray, NodeBatch, NodeTable
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import NODE_POLICY_FACTS
from kubesched.plugins.security.args import (
    ENFORCE_DENY,
    ENFORCE_WARN,
    FAILURE_IGNORE,
    MODE_PER_NODE,
    SecurityAuditFilterArgs,
)
from kubesched.plugins.security.decided_revisions import DecidedRevisions
from kubesched.plugins.security.decision_cache import CacheKey, DecisionCache
from kubesched.plugins.security.engines import engine_client, engine_spec, pod_exemption
from kubesched.plugins.security.policy_keys import Keying, NodeClasses
from kubesched.policyapi.contract import (
    OPERATION_SCHEDULE,
    UNDEFINED_REASON,
    Decision,
    InputPaths,
    PolicyError,
    decision_input,
    denial_reason,
    digest,
    pod_document,
    rounded_time,
    target_document,
)
from kubesched.policyapi.verdicts import PolicyVerdict, add_verdict

STATE_KEY = "PreFilter" + names.SECURITY_AUDIT_FILTER
_WARNED_KEY = "kubesched.io/security-audit-warned"
DENIED_PREFIX = "Denied by security policy: "
ENGINE_FAILED_PREFIX = "OPA evaluation failed: "
NOT_PREFETCHED = "the policy decision for this node was not fetched before Filter"
POLICY_CHANGING = "the policy revision kept changing during the evaluation"
# Re-keyings of one attempt after the policy changed under it before it gives up (a reload every call).
_MAX_REKEYS = 3
_NO_IDS: IntArray = np.zeros(0, dtype=np.int64)
_NO_IDS.flags.writeable = False
_NO_FLAGS: BoolArray = np.zeros(0, dtype=np.bool_)
_NO_FLAGS.flags.writeable = False


def denial_status(decision: Decision) -> Status:
    # Unresolvable: no eviction changes the pod or the node, which is all the policy is given.
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, DENIED_PREFIX + denial_reason(decision.reasons))


class NodeDecisions:
    """The policy's answers for one pod input under one revision, per node-facts class; append-only.

    ``status_by_class[c]`` is 0 when class ``c`` is allowed (or undecided: see ``decided``), else the
    1-based index of its denial status in ``statuses``. Replicas share one instance through the cache.
    """

    __slots__ = (
        "_by_slot",
        "_index",
        "_interned",
        "decided",
        "decided_count",
        "decisions",
        "revision",
        "status_by_class",
        "statuses",
    )

    def __init__(self, revision: str) -> None:
        self.revision = revision
        self.decisions: list[Decision] = []
        # Empty until the first record (an attempt that never evaluates makes none): _ensure replaces them.
        self._index: IntArray = _NO_IDS  # class id -> 1 + index in decisions; 0 = undecided
        self.decided: BoolArray = _NO_FLAGS
        self.status_by_class: IntArray = _NO_IDS
        self.statuses: list[Status] = []
        self._interned: dict[Decision, tuple[int, int]] = {}
        # How many classes are decided. Classes are decided once each, and only ids below the column's class count
        # exist, so ``decided_count == classes`` means every class is: the steady state, checked without an array.
        self.decided_count = 0
        # status_by_class per table slot, and what it was made from (see status_by_slot).
        self._by_slot: tuple[tuple[IntArray, int, IntArray | None, int] | None, IntArray] = (None, _NO_IDS)

    def _ensure(self, size: int) -> None:
        if self._index.shape[0] >= size:
            return
        grown = max(size, 2 * self._index.shape[0], 64)
        for name in ("_index", "decided", "status_by_class"):
            old = getattr(self, name)
            new = np.zeros(grown, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def all_decided(self, classes: int) -> bool:
        """Whether every class of a column that has ``classes`` classes so far is decided."""
        return self.decided_count >= classes

    def undecided(self, class_ids: IntArray, classes: int) -> BoolArray:
        """Which of ``class_ids`` (ids of a column that has ``classes`` classes so far) are not decided yet."""
        self._ensure(classes)
        mask: BoolArray = ~self.decided[class_ids]
        return mask

    def record(self, class_id: int, decision: Decision) -> None:
        """Add the decision about one class (a class is decided once: later answers are ignored)."""
        self._ensure(class_id + 1)
        if self.decided[class_id]:
            return
        interned = self._interned.get(decision)
        if interned is None:
            self.decisions.append(decision)
            status_id = 0
            if not decision.allowed:
                self.statuses.append(denial_status(decision))
                status_id = len(self.statuses)
            interned = self._interned[decision] = (len(self.decisions), status_id)
        self._index[class_id], self.status_by_class[class_id] = interned
        self.decided[class_id] = True
        self.decided_count += 1

    def status_by_slot(self, column: ClassColumn, groups: IntArray | None, classes: int) -> IntArray:
        """``status_by_class`` of every table slot's class (a column's, through ``groups`` when given), kept until the
        column's ids, the grouping or the decisions change: a Filter batch then gathers its codes by slot at once."""
        made_from, by_slot = self._by_slot
        if (
            made_from is None
            or made_from[0] is not column.ids
            or made_from[1] != column.version
            or made_from[2] is not groups
            or made_from[3] != self.decided_count
        ):
            self._ensure(classes)
            by_slot = self.status_by_class[column.ids if groups is None else groups[column.ids]]
            self._by_slot = ((column.ids, column.version, groups, self.decided_count), by_slot)
        return by_slot

    def decision(self, class_id: int) -> Decision | None:
        if class_id >= self._index.shape[0] or not self.decided[class_id]:
            return None
        return self.decisions[int(self._index[class_id]) - 1]


class AttemptPolicy:
    """One attempt's policy state: what it is evaluated with, the shared answers, and its own outcome.

    The attempt's verdict source: :meth:`verdicts_for` turns the decisions it used into immutable verdicts.
    """

    __slots__ = (
        "_batch",
        "_pod_digest",
        "_pod_doc",
        "class_count",
        "column_name",
        "enforcement",
        "engine",
        "entry",
        "error",
        "exempt",
        "facts",
        "facts_name",
        "groups",
        "note",
        "plugin",
        "pod",
        "refreshed",
        "rekeyed",
        "skipped",
        "snapshot",
        "time",
    )

    def __init__(self, plugin: str, engine: str, enforcement: str, snapshot: Snapshot, pod: PodInfo) -> None:
        self.plugin = plugin
        self.engine = engine
        self.enforcement = enforcement
        self.snapshot = snapshot
        self.pod = pod
        # The node classes the attempt's decisions are per (nodes the policy cannot tell apart; see _key): a class
        # column, or groups of its classes (NodeClasses). facts_name tells classings apart.
        self.facts_name = self.column_name = NODE_POLICY_FACTS.name
        self.facts: ClassColumn = snapshot.table.class_column(NODE_POLICY_FACTS.name, NODE_POLICY_FACTS.key_fn)
        self.groups: IntArray | None = None
        self.class_count = len(self.facts.values)
        self.rekeyed = 0  # times the policy revision changed under this attempt (see prefetch_filter)
        self.refreshed = False  # the engine's revision in force was asked for (once, before the first batch)
        self.note = ""  # for the audit record (a refused break-glass label)
        self._pod_digest: str | None = None
        self._pod_doc: dict[str, Any] | None = None
        self.time = ""
        self.entry = NodeDecisions("")
        self.exempt = ""
        self.error = ""  # this attempt's engine failure (never written to the shared entry)
        self.skipped = False
        # The last batch prefetched and its class ids: Filter on the same batch reuses them.
        self._batch: tuple[NodeBatch | None, IntArray] = (None, _NO_IDS)

    def clone(self) -> AttemptPolicy:
        # Filter only reads it; nominated-pod passes of the same attempt share it.
        return self

    @property
    def pod_doc(self) -> dict[str, Any]:
        """The pod as the policy sees it (:func:`~kubesched.policyapi.contract.pod_document`), made when first
        asked: only an evaluation (or the audit's digest) needs it; keying the attempt reads the manifest."""
        if self._pod_doc is None:
            self._pod_doc = pod_document(self.pod.pod)
        return self._pod_doc

    @property
    def pod_digest(self) -> str:
        """The digest of the attempt's whole input (pod, operation, time), as the audit record names it;
        computed when first asked (a key on the whole pod, or a verdict sealed for the audit), not per attempt."""
        if self._pod_digest is None:
            self._pod_digest = (
                digest({"pod": self.pod_doc, "operation": OPERATION_SCHEDULE, "time": self.time}) if self.time else ""
            )
        return self._pod_digest

    def fail(self, error: str, *, ignore: bool) -> None:
        if not self.error:
            self.error = error
            self.skipped = ignore

    def rejects(self) -> bool:
        return self.enforcement == ENFORCE_DENY and not self.exempt and not self.skipped

    def failure(self) -> Status | None:
        """The Error status of an engine failure this attempt must not pass (failurePolicy Fail)."""
        if self.error and not self.skipped:
            return Status(Code.ERROR, ENGINE_FAILED_PREFIX + self.error)
        return None

    def use_classes(self, classes: NodeClasses) -> None:
        self.facts_name, self.column_name, self.facts, self.groups, self.class_count = classes
        self._batch = (None, _NO_IDS)

    def class_ids(self, nodes: NodeBatch) -> IntArray:
        batch, ids = self._batch
        if batch is not nodes:
            ids = self.facts.ids[nodes.slots]
            if self.groups is not None:
                ids = self.groups[ids]
            self._batch = (nodes, ids)
        return ids

    def class_of(self, slot: int) -> int:
        class_id = int(self.facts.ids[slot])
        return class_id if self.groups is None else int(self.groups[class_id])

    def undecided(self, class_ids: IntArray) -> BoolArray:
        return self.entry.undecided(class_ids, self.class_count)

    def all_decided(self) -> bool:
        """Whether the entry has decided every class of the attempt's classing (then no batch has anything to ask)."""
        return self.entry.all_decided(self.class_count)

    def verdicts_for(self, targets: Sequence[str]) -> list[PolicyVerdict]:
        common: dict[str, Any] = {
            "plugin": self.plugin,
            "stage": "filter",
            "engine": self.engine,
            "input_digest": self.pod_digest,
            "enforcement": self.enforcement,
            "note": self.note,
        }
        found: list[PolicyVerdict] = []
        if self.exempt or self.error:
            found.append(
                PolicyVerdict(
                    target="",
                    allowed=bool(self.exempt or self.skipped),
                    skipped=self.skipped,
                    error=self.error,
                    exempt=self.exempt,
                    revision=self.entry.revision,
                    **common,
                )
            )
            if self.exempt:
                return found
        for target in targets:
            info = self.snapshot.get(target)
            if info is None:
                continue
            decision = self.entry.decision(self.class_of(info.slot))
            if decision is None:
                continue
            found.append(
                PolicyVerdict(
                    target=target,
                    allowed=decision.allowed,
                    reasons=decision.reasons,
                    decision_id=decision.decision_id,
                    revision=decision.revision or self.entry.revision,
                    **common,
                )
            )
        return found


class SecurityAuditFilter:
    """PreFilter/Filter: reject nodes the security policy denies for this pod (OPA or embedded Rego).

    This class answers per node only; :func:`new_security_audit_filter` builds the batched variant
    unless ``evaluationMode: per-node`` asks for one call per (pod, node).
    """

    def __init__(self, args: SecurityAuditFilterArgs | None, handle: Handle) -> None:
        args = validated(args, SecurityAuditFilterArgs)
        self.args = args
        self.handle = handle
        self.client = engine_client(args, handle)
        self.decided_revisions = DecidedRevisions(engine_spec(args))
        # In a cluster profile the nodes are member clusters: the policy sees input.cluster.
        self.target_kind = policy_target_kind(handle)
        self._document = target_document(self.target_kind)
        self.cache: DecisionCache[NodeDecisions] = DecisionCache(args.cache_size)
        # Node documents per (class column, class id) of one table (class ids are per table and column).
        self._docs: tuple[NodeTable | None, dict[tuple[str, int], dict[str, Any]]] = (None, {})
        self.calls = 0  # policy evaluations made (batch or per node), for benchmarks and tests
        # How the last revision seen keys its decisions (made once per revision: see policy_keys).
        self._keying: tuple[str, InputPaths | None, Keying] = ("", None, Keying(None, self.target_kind, self._document))

    @property
    def name(self) -> str:
        return names.SECURITY_AUDIT_FILTER

    def decision_cache_stats(self) -> DecisionCacheStats:
        return DecisionCacheStats(self.cache.hits, self.cache.misses)

    # ---- the attempt's state -------------------------------------------------------------------

    def _attempt(self, state: CycleState, pod: PodInfo) -> AttemptPolicy:
        attempt = state.get(STATE_KEY, AttemptPolicy)
        if attempt is None:
            # Also reached from Filter when the plugin is enabled only at filter (``examples/security-config.yaml``).
            attempt = self._begin(pod)
            state.write(STATE_KEY, attempt)
            add_verdict(state, attempt)
        return attempt

    def _begin(self, pod: PodInfo) -> AttemptPolicy:
        snapshot = self.handle.snapshot()
        attempt = AttemptPolicy(self.name, self.client.kind, self.args.enforcement_action, snapshot, pod)
        exemption = pod_exemption(self.args, self.handle, pod.pod)
        attempt.note = exemption.note
        if exemption.reason:
            attempt.exempt = exemption.reason
            return attempt
        attempt.time = rounded_time(self.handle.clock.now(), self.args.time_granularity_seconds)
        self._key(attempt, self.client.revision())
        return attempt

    def _key(self, attempt: AttemptPolicy, revision: str) -> None:
        """Find (or make) the attempt's shared decisions under ``revision``: keyed by what that revision's policy
        reads of the pod, per class of nodes it cannot tell apart (the whole pod and the node's policy facts
        when the client has no analysis of it: see :mod:`~kubesched.plugins.security.policy_keys`)."""
        if self.args.evaluation_mode == MODE_PER_NODE:
            attempt.entry = NodeDecisions(revision)  # one call per (pod, node): no cache
            return
        snapshot = attempt.snapshot
        if self._docs[0] is not snapshot.table:
            # Another table (tests build several): its class ids mean other nodes.
            self._docs = (snapshot.table, {})
            self.cache = DecisionCache(self.args.cache_size)
        keying = self._keying_for(revision)
        attempt.use_classes(keying.node_classes(snapshot.table))
        # The node classes are part of the key (entry_key): class ids of one column mean nothing in another.
        pod_part = keying.entry_key(attempt.pod.pod, lambda: attempt.pod_digest)
        bucket = attempt.time if keying.reads_time else ""  # see Keying.reads_time
        key = CacheKey(revision, pod_part, bucket, OPERATION_SCHEDULE)
        entry = self.cache.get(key)
        if entry is None:
            entry = NodeDecisions(revision)
            self.cache.put(key, entry)
        attempt.entry = entry

    # ---- fetching decisions (off the loop, between Filter batches) -----------------------------

    async def prefetch_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        attempt = self._attempt(state, pod)
        if attempt.exempt or attempt.error:
            return None
        if not attempt.refreshed:
            # Before the cache answers: the decisions it holds are for the revision the attempt was keyed under.
            attempt.refreshed = True
            try:
                revision = await self.client.refresh()
            except PolicyError as exc:
                attempt.fail(str(exc), ignore=self.args.failure_policy == FAILURE_IGNORE)
                return None
            if revision != attempt.entry.revision:
                self._key(attempt, revision)
            self.decided_revisions.record(pod.uid, revision)
        if attempt.all_decided():
            return None
        class_ids = attempt.class_ids(nodes)
        todo = attempt.undecided(class_ids)
        if not todo.any():
            return None
        # One representative node per undecided class: equal facts, equal decision.
        wanted, first = np.unique(class_ids[todo], return_index=True)
        slots = nodes.slots[todo][first]
        infos: list[NodeInfo] = NodeBatch(attempt.snapshot.table, slots).infos
        column_ids = attempt.facts.ids[slots].tolist()
        documents = self._node_documents(attempt.snapshot.table, attempt.column_name, column_ids, infos)
        try:
            if self.args.evaluation_mode == MODE_PER_NODE:
                answers = await self._decide_one_by_one(attempt, documents)
            else:
                self.calls += 1
                answers = await self.client.decide_batch(
                    attempt.pod_doc,
                    documents,
                    target_kind=self.target_kind,
                    operation=OPERATION_SCHEDULE,
                    time=attempt.time,
                )
        except PolicyError as exc:
            attempt.fail(str(exc), ignore=self.args.failure_policy == FAILURE_IGNORE)
            return None
        # By the documents' names: a class's document is the first node of it ever seen, not always this batch's.
        decisions = [answers[document["metadata"]["name"]] for document in documents]
        answered = next((d.revision for d in decisions if d.revision), attempt.entry.revision)
        if answered != attempt.entry.revision and self._classes_changed(attempt, answered):
            # The policy changed between keying this attempt and the answer, and the new one tells other nodes
            # apart than the old one did: a representative's answer must not be broadcast over the old class.
            # Key the attempt again under the revision that answered, and ask again. (With the same classes the
            # answers are kept, as before the analysis: each is right for this pod, and the entry they go into
            # is dropped by the next attempt, which sees the new revision.)
            if attempt.rekeyed >= _MAX_REKEYS:
                attempt.fail(POLICY_CHANGING, ignore=False)
                return None
            attempt.rekeyed += 1
            self._key(attempt, answered)
            self.decided_revisions.record(pod.uid, answered)
            return await self.prefetch_filter(state, pod, nodes)
        if self.args.failure_policy == FAILURE_IGNORE and any(d.undefined for d in decisions):
            # An undefined decision is a wrong path or a missing default: a failure of the policy set-up,
            # which Ignore lets through (Fail keeps it a deny).
            attempt.fail(UNDEFINED_REASON, ignore=True)
            return None
        for class_id, decision in zip(wanted.tolist(), decisions, strict=True):
            attempt.entry.record(class_id, decision)
        return None

    def _keying_for(self, revision: str) -> Keying:
        paths = self.client.input_paths(revision)
        known, known_paths, keying = self._keying
        if known != revision or known_paths != paths:
            keying = Keying(paths, self.target_kind, self._document)
            self._keying = (revision, paths, keying)
        return keying

    def _classes_changed(self, attempt: AttemptPolicy, revision: str) -> bool:
        if self.args.evaluation_mode == MODE_PER_NODE or attempt.facts_name == NODE_POLICY_FACTS.name:
            return False  # per node, or classes of whole policy facts: right for any policy
        return self._keying_for(revision).node_classes(attempt.snapshot.table).name != attempt.facts_name

    async def _decide_one_by_one(self, attempt: AttemptPolicy, documents: list[dict[str, Any]]) -> dict[str, Decision]:
        """Per-node mode: one engine call per (pod, node), in order."""
        answers: dict[str, Decision] = {}
        for document in documents:
            self.calls += 1
            answers[document["metadata"]["name"]] = await self.client.decide(
                decision_input(
                    attempt.pod_doc,
                    document,
                    target_kind=self.target_kind,
                    operation=OPERATION_SCHEDULE,
                    time=attempt.time,
                )
            )
        return answers

    def _node_documents(
        self, table: NodeTable, column: str, class_ids: list[int], infos: list[NodeInfo]
    ) -> list[dict[str, Any]]:
        """Node documents are built once per class of ``column``, then reused by every pod. (A class's document is its
        first node's: with read-path classes, other nodes of the class differ only where the policy does not look.)"""
        if self._docs[0] is not table:
            self._docs = (table, {})
        docs = self._docs[1]
        result = []
        for class_id, info in zip(class_ids, infos, strict=True):
            doc = docs.get((column, class_id))
            if doc is None:
                doc = docs[(column, class_id)] = self._document(info.node)
            result.append(doc)
        if len({doc["metadata"]["name"] for doc in result}) < len(result):
            # Answers come back by name: a class's first node may share its name with another class's node here
            # (deleted and added again with other facts), so these are asked about as they are now.
            return [self._document(info.node) for info in infos]
        return result

    # ---- extension points ----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        attempt = self._attempt(state, pod)
        # warn/dryrun still evaluate at Filter (for the audit trail); only exempt pods skip it.
        return Status(Code.SKIP) if attempt.exempt else None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        attempt = self._attempt(state, pod)
        if attempt.exempt:
            return None
        failure = attempt.failure()
        if failure is not None:
            return failure
        class_id = attempt.class_of(node_info.slot)
        decision = attempt.entry.decision(class_id)
        if decision is None:
            if attempt.skipped:
                return None
            return Status(Code.ERROR, ENGINE_FAILED_PREFIX + NOT_PREFETCHED)
        if not decision.allowed:
            self._warn(state, pod, attempt, np.asarray([class_id], dtype=np.int64))
        if not decision.allowed and attempt.rejects():
            return denial_status(decision)
        return None

    def _warn(self, state: CycleState, pod: PodInfo, attempt: AttemptPolicy, class_ids: IntArray) -> None:
        """enforcementAction warn: one Warning event per pod attempt that met a denial."""
        if attempt.enforcement != ENFORCE_WARN or attempt.exempt or state.get(_WARNED_KEY, bool) is not None:
            return
        status_ids = attempt.entry.status_by_class[class_ids]
        denied = np.flatnonzero(status_ids > 0)
        if len(denied) == 0:
            return
        state.write(_WARNED_KEY, True)
        first = attempt.entry.statuses[int(status_ids[denied[0]]) - 1]
        self.handle.event_recorder.event(
            pod.pod,
            "Warning",
            "PolicyViolation",
            "Scheduling",
            f"warn: security policy would deny {len(denied)} of {len(class_ids)} nodes examined: {first.message}",
        )

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # A denial can change when a node's facts change, the pod itself changes (labels, images; not its status), or
        # the policy or its data change (another revision).
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


class BatchedSecurityAuditFilter(SecurityAuditFilter):
    """The default: Filter over every candidate node is one gather from the attempt's decisions."""

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        attempt = self._attempt(state, pod)
        if attempt.exempt:
            return None
        failure = attempt.failure()
        if failure is not None:
            return BatchFilterResult(np.ones(len(nodes), dtype=np.int64), [failure])
        if attempt.skipped:
            return None
        entry = attempt.entry
        if not attempt.all_decided():
            class_ids = attempt.class_ids(nodes)
            if attempt.undecided(class_ids).any():
                error = Status(Code.ERROR, ENGINE_FAILED_PREFIX + NOT_PREFETCHED)
                return BatchFilterResult(np.ones(len(nodes), dtype=np.int64), [error])
        if attempt.enforcement == ENFORCE_WARN:
            self._warn(state, pod, attempt, attempt.class_ids(nodes))
        # No denial to give (allowed everywhere, or a mode that never rejects): the nodes' classes are not needed.
        if not attempt.rejects() or not entry.statuses:
            return None
        codes = entry.status_by_slot(attempt.facts, attempt.groups, attempt.class_count)[nodes.slots]
        return BatchFilterResult(codes, entry.statuses)


def new_security_audit_filter(args: SecurityAuditFilterArgs | None, handle: Handle) -> SecurityAuditFilter:
    """The registry's factory: without a batch method in per-node mode, so the framework asks node by node
    and stops once enough feasible nodes are found, exactly as kube-scheduler calls a per-node Filter plugin."""
    if args is not None and args.evaluation_mode == MODE_PER_NODE:
        return SecurityAuditFilter(args, handle)
    return BatchedSecurityAuditFilter(args, handle)


if TYPE_CHECKING:
    from kubesched.framework.interface import BatchFilterPlugin, FilterPrefetcher, PreFilterPlugin
    from kubesched.policyapi.verdicts import VerdictSource

    def _conforms(
        plugin: BatchedSecurityAuditFilter, attempt: AttemptPolicy
    ) -> tuple[PreFilterPlugin, BatchFilterPlugin, FilterPrefetcher, VerdictSource]:
        return plugin, plugin, plugin, attempt
