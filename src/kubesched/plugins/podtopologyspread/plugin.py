"""PodTopologySpread (PreFilter + AddPod/RemovePod, Filter, PreScore, Score, NormalizeScore), kube-scheduler v1.35.

Built by the framework from the registry in every profile that enables it (the default profile does, weight 2),
with the pieces of upstream's ``filtering.go``, ``scoring.go`` and ``plugin.go``: PreFilter counts matching pods
per domain for the DoNotSchedule constraints (or the profile's defaults) and keeps each constraint's two smallest
domains; Filter applies ``maxSkew`` (and ``minDomains``) with upstream's reasons and codes; PreScore and Score weigh
the ScheduleAnyway constraints by ``ln(domains + 2)``; NormalizeScore gives fewer matching pods a higher score. The
batch forms read each topology key's value from a NodeTable class column, so a constraint's rule runs once per
domain. A constraint that cannot be read gives kube-scheduler's Error status, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState, no_writes
from kubesched.framework.events import (
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import BatchFilterResult, IntArray, NodeBatch
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import per_class, uniform_result
from kubesched.plugins.helper.gomath import go_round, go_round_array, trunc_div_array
from kubesched.plugins.helper.hints import as_nodes, as_pods
from kubesched.plugins.podtopologyspread.args import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULTING,
    PodTopologySpreadArgs,
)
from kubesched.plugins.podtopologyspread.common import (
    HONOR,
    Constraint,
    ConstraintError,
    NodeInclusion,
    SpreadSelector,
    count_matching_pods,
    is_hostname,
    node_has_all_keys,
    parse_constraints,
    parse_default_constraints,
    pod_labels_match,
    topology_column,
    with_default_selector,
)
from kubesched.plugins.podtopologyspread.counting import SpreadCounter, snapshot_slots

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BatchScorePlugin,
        EnqueueExtensions,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
        ScoreNormalizer,
        SkipWrites,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.POD_TOPOLOGY_SPREAD
PRE_SCORE_STATE_KEY = "PreScore" + names.POD_TOPOLOGY_SPREAD
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

_CONSTRAINTS_NOT_MATCH = Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH)
_NODE_LABEL_NOT_MATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH)
# Batch codes: 1 → statuses[0], 2 → statuses[1].
_BATCH_STATUSES = (_NODE_LABEL_NOT_MATCH, _CONSTRAINTS_NOT_MATCH)
_CODE_MISSING_LABEL = 1
_CODE_SKEW = 2

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
INVALID_SCORE = -1
IGNORED_SCORE = -(2**62)
"""Score's answer for an ignored node (upstream keeps a name set and gives 0); NormalizeScore recognises it
without having to know which node each score belongs to, and turns it into 0."""


# ---- PreFilter state --------------------------------------------------------------------------------


class CriticalPaths:
    """The two domains with the fewest matching pods, as upstream keeps them: ``paths[0]`` always holds the
    minimum; ``paths[1]`` is at least as large but not necessarily the second smallest after updates."""

    __slots__ = ("paths",)

    def __init__(self) -> None:
        self.paths: list[list[str | int]] = [["", MAX_INT32], ["", MAX_INT32]]

    @property
    def min_match_num(self) -> int:
        return int(self.paths[0][1])

    def update(self, value: str, num: int) -> None:
        paths = self.paths
        index = 0 if value == paths[0][0] else 1 if value == paths[1][0] else -1
        if index >= 0:
            paths[index][1] = num
            if int(paths[0][1]) > int(paths[1][1]):
                paths[0], paths[1] = paths[1], paths[0]
        elif num < int(paths[0][1]):
            paths[1] = paths[0]
            paths[0] = [value, num]
        elif num < int(paths[1][1]):
            paths[1] = [value, num]

    def as_tuple(self) -> tuple[tuple[str, int], tuple[str, int]]:
        (v0, n0), (v1, n1) = self.paths
        return (str(v0), int(n0)), (str(v1), int(n1))

    def clone(self) -> CriticalPaths:
        copy = CriticalPaths()
        copy.paths = [list(self.paths[0]), list(self.paths[1])]
        return copy


class PreFilterState:
    """Per hard constraint: matching pods per domain and the critical paths; AddPod/RemovePod mutate it,
    so ``clone`` copies the counts (constraints and the pod-derived parts are shared)."""

    __slots__ = ("constraints", "critical_paths", "inclusion", "self_match", "tp_value_to_match_num")

    def __init__(
        self,
        constraints: Sequence[Constraint],
        tp_value_to_match_num: list[dict[str, int]],
        critical_paths: list[CriticalPaths],
        self_match: tuple[int, ...],
        inclusion: NodeInclusion,
    ) -> None:
        self.constraints = tuple(constraints)
        self.tp_value_to_match_num = tp_value_to_match_num
        self.critical_paths = critical_paths
        self.self_match = self_match
        self.inclusion = inclusion

    def min_match_num(self, index: int, min_domains: int) -> int:
        """The global minimum for the skew: 0 while the constraint has fewer eligible domains than minDomains."""
        if len(self.tp_value_to_match_num[index]) < min_domains:
            return 0
        return self.critical_paths[index].min_match_num

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints,
            [dict(counts) for counts in self.tp_value_to_match_num],
            [paths.clone() for paths in self.critical_paths],
            self.self_match,
            self.inclusion,
        )


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """Per soft constraint: matching pods per domain among the filtered nodes' domains and the weight;
    the filtered nodes that lack a topology key. Read-only after PreScore."""

    constraints: tuple[Constraint, ...]
    ignored_nodes: frozenset[str]
    topology_value_to_pod_counts: tuple[dict[str, int], ...]
    topology_normalizing_weight: tuple[float, ...]

    def clone(self) -> PreScoreState:
        return self


def topology_normalizing_weight(size: int) -> float:
    """``ln(size + 2)``: counts in a topology with few domains weigh less than in one with many."""
    return math.log(size + 2)


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    """A domain's contribution; ``maxSkew − 1`` waters down differences between domains."""
    return count * weight + (max_skew - 1)


def _count_per_selector(
    info: NodeInfo, selector: SpreadSelector, namespace: str, memo: dict[SpreadSelector, int]
) -> int:
    # Constraints of one pod usually share their selector (zone and hostname spreading of one app).
    count = memo.get(selector)
    if count is None:
        count = memo[selector] = count_matching_pods(info.pods, selector, namespace)
    return count


class PodTopologySpread:
    """Spreads pods across topology domains: hard constraints filter, soft constraints score."""

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Handle) -> None:
        args = validated(args, PodTopologySpreadArgs)
        self.args = args
        self.handle = handle
        self.default_constraints = args.effective_constraints
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        self.counter = SpreadCounter()
        # The default constraints parsed once per action (their selectors are the pod's, set per pod).
        self._parsed_defaults: dict[str, list[Constraint]] = {}

    @property
    def name(self) -> str:
        return names.POD_TOPOLOGY_SPREAD

    # ---- constraints ---------------------------------------------------------------------------

    def constraints(self, pod: Pod, action: str) -> list[Constraint]:
        """The pod's constraints of ``action``, or the default ones when it has none; raises ConstraintError."""
        kind = "hard" if action == DO_NOT_SCHEDULE else "soft"
        if pod.spec.topology_spread_constraints:
            try:
                return parse_constraints(pod, pod.spec.topology_spread_constraints, action)
            except ConstraintError as exc:
                raise ConstraintError(f"obtaining pod's {kind} topology spread constraints: {exc}") from exc
        if not self.default_constraints:
            return []
        try:
            parsed = self._parsed_defaults.get(action)
            if parsed is None:
                parsed = parse_default_constraints(pod, self.default_constraints, action)
                self._parsed_defaults[action] = parsed
            return with_default_selector(pod, parsed, self.handle.listers)
        except ConstraintError as exc:
            raise ConstraintError(f"setting default {kind} topology spread constraints: {exc}") from exc

    # ---- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        try:
            constraints = self.constraints(pod.pod, DO_NOT_SCHEDULE)
        except ConstraintError as exc:
            return Status(Code.ERROR, f"get constraints from pod: {exc}")
        if not constraints:
            return Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, self.pre_filter_state(pod, constraints, nodes))
        return None

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # A pod without constraints of its own gets the defaults: with no DoNotSchedule one among them it has no
        # hard constraint whatever Services and controllers select it, so Skip, nothing written. (The defaults
        # are typed and validated args, so parsing them cannot fail.)
        if shape & PodShape.SPREAD_CONSTRAINTS or any(
            c.when_unsatisfiable == DO_NOT_SCHEDULE for c in self.default_constraints
        ):
            return None
        return no_writes

    def pre_filter_state(
        self, pod: PodInfo, constraints: Sequence[Constraint], nodes: Sequence[NodeInfo]
    ) -> PreFilterState:
        """Count the matching pods per domain over ``nodes`` (every node of the snapshot)."""
        namespace = pod.namespace
        inclusion = NodeInclusion(pod.pod)
        snapshot = self._countable_snapshot(nodes, inclusion)
        if snapshot is not None:
            counts = self.counter.hard_counts(snapshot, constraints, namespace, inclusion)
        else:
            counts = self.reference_hard_counts(nodes, constraints, namespace, inclusion)
        critical_paths = []
        for domain in counts:
            paths = CriticalPaths()
            for value, num in domain.items():
                paths.update(value, num)
            critical_paths.append(paths)
        pod_labels = pod.pod.metadata.labels
        self_match = tuple(1 if c.selector.matches(pod_labels) else 0 for c in constraints)
        return PreFilterState(constraints, counts, critical_paths, self_match, inclusion)

    def _countable_snapshot(self, nodes: Sequence[NodeInfo], inclusion: NodeInclusion) -> Snapshot | None:
        """The snapshot when ``nodes`` is its node list and the pod's policies can key a cache; else None."""
        snapshot = self.handle.snapshot()
        if nodes is not snapshot.node_infos:
            return None
        try:
            hash((inclusion.affinity, inclusion.tolerations))
        except TypeError:
            return None
        return snapshot

    @staticmethod
    def reference_hard_counts(
        nodes: Sequence[NodeInfo], constraints: Sequence[Constraint], namespace: str, inclusion: NodeInclusion
    ) -> list[dict[str, int]]:
        """PreFilter's counting node by node: the reference :class:`SpreadCounter` is held equal to."""
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for info in nodes:
            labels = info.labels
            if not node_has_all_keys(labels, constraints):
                continue
            included = inclusion.node_filter(info)
            memo: dict[SpreadSelector, int] = {}
            for i, constraint in enumerate(constraints):
                if not included(constraint):
                    continue
                value = labels[constraint.topology_key]
                domain = counts[i]
                domain[value] = domain.get(value, 0) + _count_per_selector(info, constraint.selector, namespace, memo)
        return counts

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod, pod_to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod, pod_to_remove, node_info, -1)

    def _update_with_pod(
        self, state: CycleState, pod: PodInfo, updated: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY, PreFilterState)
        if s is None:
            return _missing_state(PRE_FILTER_STATE_KEY)
        if updated.namespace != pod.namespace:
            return None
        labels = node_info.labels
        if not node_has_all_keys(labels, s.constraints):
            return None
        updated_labels = updated.pod.metadata.labels
        included = s.inclusion.node_filter(node_info)
        for i, constraint in enumerate(s.constraints):
            if not constraint.selector.matches(updated_labels) or not included(constraint):
                continue
            value = labels[constraint.topology_key]
            num = s.tp_value_to_match_num[i].get(value, 0) + delta
            s.tp_value_to_match_num[i][value] = num
            s.critical_paths[i].update(value, num)
        return None

    # ---- Filter --------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY, PreFilterState)
        if s is None:
            return _missing_state(PRE_FILTER_STATE_KEY)
        labels = node_info.labels
        for i, constraint in enumerate(s.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return _NODE_LABEL_NOT_MATCH
            skew = (
                s.tp_value_to_match_num[i].get(value, 0) + s.self_match[i] - s.min_match_num(i, constraint.min_domains)
            )
            if skew > constraint.max_skew:
                return _CONSTRAINTS_NOT_MATCH
        return None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        s = state.get(PRE_FILTER_STATE_KEY, PreFilterState)
        if s is None:
            return uniform_result(len(nodes), _missing_state(PRE_FILTER_STATE_KEY))
        if not s.constraints or len(nodes) == 0:
            return None
        codes = np.zeros(len(nodes), dtype=np.int64)
        for i in range(len(s.constraints)):
            # The first constraint a node fails decides its status, as in the per-node loop.
            constraint_codes = self._filter_codes(s, i, nodes)
            codes = np.where(codes == 0, constraint_codes, codes)
        if not codes.any():
            return None
        return BatchFilterResult(codes, _BATCH_STATUSES)

    def _filter_codes(self, s: PreFilterState, index: int, nodes: NodeBatch) -> IntArray:
        constraint = s.constraints[index]
        counts = s.tp_value_to_match_num[index]
        threshold = constraint.max_skew + s.min_match_num(index, constraint.min_domains) - s.self_match[index]

        def evaluate(value: str | None) -> int:
            if value is None:
                return _CODE_MISSING_LABEL
            return _CODE_SKEW if counts.get(value, 0) > threshold else 0

        results, index_of = per_class(nodes, topology_column(constraint.topology_key), evaluate)
        return np.asarray(results, dtype=np.int64)[index_of]

    # ---- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        all_nodes = self.handle.snapshot().node_infos
        if not all_nodes:
            return Status(Code.SKIP)
        # Only explicit constraints and List defaults require every topology key on a node; the system
        # defaults still spread by hostname on nodes without a zone label.
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self.system_defaulted
        try:
            constraints = self.constraints(pod.pod, SCHEDULE_ANYWAY)
        except ConstraintError as exc:
            return Status(Code.ERROR, f"calculating preScoreState: {exc}")
        if not constraints:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, self.pre_score_state(pod, constraints, nodes, all_nodes, require_all))
        return None

    def pre_score_state(
        self,
        pod: PodInfo,
        constraints: Sequence[Constraint],
        filtered: Sequence[NodeInfo],
        all_nodes: Sequence[NodeInfo],
        require_all: bool,
    ) -> PreScoreState:
        namespace = pod.namespace
        inclusion = NodeInclusion(pod.pod)
        snapshot = self._countable_snapshot(all_nodes, inclusion)
        filtered_slots = None if snapshot is None else snapshot_slots(snapshot.table, filtered)
        if snapshot is None or filtered_slots is None:
            counts, ignored = self.reference_open_domains(filtered, constraints, require_all)
        else:
            counts, ignored_mask = self.counter.open_domains(snapshot.table, filtered_slots, constraints, require_all)
            ignored = set(snapshot.table.name_column[filtered_slots[ignored_mask]].tolist())
        weights = tuple(
            topology_normalizing_weight(len(filtered) - len(ignored) if is_hostname(c) else len(counts[i]))
            for i, c in enumerate(constraints)
        )
        if snapshot is None:
            self.reference_soft_counts(all_nodes, constraints, counts, namespace, inclusion, require_all)
        else:
            required_keys = [c.topology_key for c in constraints] if require_all else []
            for i, constraint in enumerate(constraints):
                if not is_hostname(constraint):
                    self.counter.soft_counts(snapshot, constraint, counts[i], namespace, inclusion, required_keys)
        return PreScoreState(tuple(constraints), frozenset(ignored), tuple(counts), weights)

    @staticmethod
    def reference_open_domains(
        filtered: Sequence[NodeInfo], constraints: Sequence[Constraint], require_all: bool
    ) -> tuple[list[dict[str, int]], set[str]]:
        """PreScore's first pass node by node: the reference of :meth:`SpreadCounter.open_domains`."""
        counts: list[dict[str, int]] = [{} for _ in constraints]
        ignored: set[str] = set()
        for info in filtered:
            labels = info.labels
            if require_all and not node_has_all_keys(labels, constraints):
                ignored.add(info.name)
                continue
            for i, constraint in enumerate(constraints):
                if is_hostname(constraint):
                    continue  # counted per node in Score
                # Without require_all a node lacking the key still opens the "" domain, as upstream.
                counts[i].setdefault(labels.get(constraint.topology_key, ""), 0)
        return counts, ignored

    @staticmethod
    def reference_soft_counts(
        all_nodes: Sequence[NodeInfo],
        constraints: Sequence[Constraint],
        counts: list[dict[str, int]],
        namespace: str,
        inclusion: NodeInclusion,
        require_all: bool,
    ) -> None:
        """PreScore's counting node by node into the filtered nodes' domains ``counts``: the reference
        :class:`SpreadCounter` is held equal to."""
        for info in all_nodes:
            labels = info.labels
            if require_all and not node_has_all_keys(labels, constraints):
                continue
            included = inclusion.node_filter(info)
            memo: dict[SpreadSelector, int] = {}
            for i, constraint in enumerate(constraints):
                domain = counts[i]
                value = labels.get(constraint.topology_key, "")
                # Only domains of filtered nodes are of interest; hostname domains are never registered.
                if value not in domain or not included(constraint):
                    continue
                domain[value] += _count_per_selector(info, constraint.selector, namespace, memo)

    def _pre_score_state(self, state: CycleState) -> PreScoreState:
        found = state.get(PRE_SCORE_STATE_KEY, PreScoreState)
        if found is None:
            raise LookupError(f'error reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found')
        return found

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        s = self._pre_score_state(state)
        if node_info.name in s.ignored_nodes:
            return IGNORED_SCORE
        labels = node_info.labels
        total = 0.0
        for i, constraint in enumerate(s.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                continue
            if is_hostname(constraint):
                count = count_matching_pods(node_info.pods, constraint.selector, pod.namespace)
            else:
                count = s.topology_value_to_pod_counts[i].get(value, 0)
            total += score_for_count(count, constraint.max_skew, s.topology_normalizing_weight[i])
        return go_round(total)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        s = self._pre_score_state(state)
        size = len(nodes)
        total = np.zeros(size, dtype=np.float64)
        for i, constraint in enumerate(s.constraints):
            has_label, count = self._score_counts(s, i, pod, nodes)
            contribution = count.astype(np.float64) * s.topology_normalizing_weight[i] + float(constraint.max_skew - 1)
            total = np.where(has_label, total + contribution, total)
        scores = go_round_array(total)
        if s.ignored_nodes and size:
            ignored = np.fromiter((info.name in s.ignored_nodes for info in nodes.infos), dtype=np.bool_, count=size)
            scores[ignored] = IGNORED_SCORE
        return scores

    def _score_counts(
        self, s: PreScoreState, index: int, pod: PodInfo, nodes: NodeBatch
    ) -> tuple[np.ndarray, IntArray]:
        """(node has the topology key, matching pods in its domain) for every node of the batch."""
        constraint = s.constraints[index]
        spec = topology_column(constraint.topology_key)
        if is_hostname(constraint):
            column = nodes.table.class_column(spec.name, spec.key_fn)
            has_class = np.fromiter((v is not None for v in column.values), dtype=np.bool_, count=len(column.values))
            has_label = has_class[column.ids[nodes.slots]] if len(column.values) else np.zeros(len(nodes), np.bool_)
            if not constraint.selector.counts_pods:
                return has_label, np.zeros(len(nodes), dtype=np.int64)
            count = self.counter.matching_pods(nodes.table, constraint.selector, pod.namespace)[nodes.slots]
            return has_label, np.where(has_label, count, 0)
        counts = s.topology_value_to_pod_counts[index]

        def evaluate(value: str | None) -> int:
            return -1 if value is None else counts.get(value, 0)

        results, index_of = per_class(nodes, spec, evaluate)
        per_node = np.asarray(results, dtype=np.int64)[index_of]
        return per_node >= 0, np.maximum(per_node, 0)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        if state.get(PRE_SCORE_STATE_KEY, PreScoreState) is None:
            return _missing_state(PRE_SCORE_STATE_KEY)
        if scores.shape[0] == 0:
            return None
        ignored = scores == IGNORED_SCORE
        valid = scores[~ignored]
        min_score = min(int(valid.min()), MAX_INT64) if valid.shape[0] else MAX_INT64
        max_score = max(int(valid.max()), 0) if valid.shape[0] else 0
        # Upstream marks ignored nodes with -1 before the second pass, which then zeroes every -1.
        zeroed = ignored | (scores == INVALID_SCORE)
        if max_score == 0:
            normalized = np.full(scores.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        else:
            kept = np.where(zeroed, 0, scores)
            normalized = trunc_div_array(MAX_NODE_SCORE * (max_score + min_score - kept), max_score)
        normalized[zeroed] = 0
        scores[:] = normalized
        return None

    # ---- Queueing hints ------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        pod_actions = (
            ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATIONS | ActionType.DELETE
        )
        node_actions = ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, pod_actions, "PodAdd|PodLabelChange|PodTolerationChange|PodDelete"),
                self.is_schedulable_after_pod_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, node_actions, "NodeAdd|NodeDelete|NodeLabelChange|NodeTaintChange"),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue for an assigned pod of the namespace that starts or stops counting for a hard constraint, or
        for the pod's own new tolerations when a constraint honours taints."""
        try:
            original, modified = as_pods(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if (modified is not None and not _involved(modified, pod)) or (
            original is not None and not _involved(original, pod)
        ):
            return QueueingHint.SKIP
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except ConstraintError:
            return QueueingHint.QUEUE
        if modified is not None and original is not None:
            if (
                modified.metadata.uid == pod.metadata.uid
                and modified.spec.tolerations != original.spec.tolerations
                and any(c.node_taints_policy == HONOR for c in constraints)
            ):
                return QueueingHint.QUEUE
            old_labels, new_labels = original.metadata.labels, modified.metadata.labels
            if old_labels == new_labels:
                return QueueingHint.SKIP
            for constraint in constraints:
                if constraint.selector.matches(old_labels) != constraint.selector.matches(new_labels):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        changed = modified if modified is not None else original
        if changed is None:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if pod_labels_match(constraints, changed.metadata.labels) else QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue when a node carrying every topology key appears or disappears, gains or loses a key, changes
        a key's value, or (still carrying them all) changes its taints."""
        try:
            original, modified = as_nodes(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except ConstraintError:
            return QueueingHint.QUEUE
        was_matching = original is not None and node_has_all_keys(original.metadata.labels, constraints)
        is_matching = modified is not None and node_has_all_keys(modified.metadata.labels, constraints)
        if original is not None and modified is not None:
            if was_matching != is_matching:
                return QueueingHint.QUEUE
            old_labels, new_labels = original.metadata.labels, modified.metadata.labels
            keys_changed = any(old_labels.get(c.topology_key) != new_labels.get(c.topology_key) for c in constraints)
            if is_matching and (keys_changed or original.taints != modified.taints):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if is_matching else QueueingHint.SKIP
        return QueueingHint.QUEUE if was_matching else QueueingHint.SKIP


def _involved(incoming: Pod, pod: Pod) -> bool:
    """The pod itself, or an assigned pod of its namespace (only those are counted)."""
    return incoming.metadata.uid == pod.metadata.uid or (
        incoming.spec.node_name != "" and incoming.metadata.namespace == pod.metadata.namespace
    )


def _missing_state(key: str) -> Status:
    return Status(Code.ERROR, f'reading "{key}" from cycleState: not found')


if TYPE_CHECKING:

    def _conforms(
        plugin: PodTopologySpread,
    ) -> tuple[
        PreFilterPlugin,
        PreFilterExtensions,
        BatchFilterPlugin,
        PreScorePlugin,
        BatchScorePlugin,
        ScoreNormalizer,
        EnqueueExtensions,
    ]:
        return plugin, plugin, plugin, plugin, plugin, plugin, plugin
