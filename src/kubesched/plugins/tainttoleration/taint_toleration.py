"""TaintToleration (Filter, PreScore, Score, NormalizeScore), kube-scheduler v1.35 behaviour.

Built by the framework from the registry; the scheduling cycle calls it for every pod.

- Filter: a NoSchedule/NoExecute taint of the node that the pod does not tolerate rejects the node,
  UnschedulableAndUnresolvable, ``node(s) had untolerated taint(s)``. (Up to v1.34.0 the reason named the
  first such taint, ``node(s) had untolerated taint {key: value}``; v1.35 no longer puts a node's taints
  in a message every pod's event carries.)
- PreScore keeps the pod's tolerations with effect PreferNoSchedule or empty; Score counts the node's
  PreferNoSchedule taints none of them tolerates; NormalizeScore is DefaultNormalizeScore reversed, so the
  node with the fewest untolerated taints scores 100.

The batch forms key a class column by the node's taints: the rule runs once per distinct taint list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod, Taint, Toleration
from kubesched.framework.cycle_state import CycleState
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
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.classes import NODE_TAINTS, class_filter_result, per_class_scores
from kubesched.plugins.helper.hints import as_nodes, as_pods
from kubesched.plugins.helper.normalize_score import default_normalize_score
from kubesched.plugins.helper.taints import (
    EFFECT_PREFER_NO_SCHEDULE,
    find_untolerated_do_not_schedule_taint,
    tolerations_tolerate_taint,
)

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BatchScorePlugin,
        EnqueueExtensions,
        Handle,
        NodeOnlyFilter,
        PreScorePlugin,
        ScoreNormalizer,
    )

PRE_SCORE_STATE_KEY = "PreScore" + names.TAINT_TOLERATION


ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"
UNTOLERATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NOT_MATCH)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    """The pod's tolerations that can tolerate a PreferNoSchedule taint."""

    tolerations_prefer_no_schedule: tuple[Toleration, ...]

    def clone(self) -> _PreScoreState:
        return self


def _count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    return sum(
        1
        for taint in taints
        if taint.effect == EFFECT_PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, taint)
    )


class TaintToleration:
    """Filter on NoSchedule/NoExecute taints; score by untolerated PreferNoSchedule taints."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    @property
    def name(self) -> str:
        return names.TAINT_TOLERATION

    # ---- Filter --------------------------------------------------------------------------------

    def _filter_taints(self, taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Status | None:
        return None if find_untolerated_do_not_schedule_taint(taints, tolerations) is None else UNTOLERATED

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._filter_taints(node_info.taints, pod.tolerations)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        tolerations = pod.tolerations

        def evaluate(taints: tuple[Taint, ...]) -> Status | None:
            return self._filter_taints(taints, tolerations)

        return class_filter_result(nodes, NODE_TAINTS, evaluate)

    # ---- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        kept: tuple[Toleration, ...] = ()
        if pod.tolerations:  # most pods tolerate nothing: no generator to walk for them
            kept = tuple(t for t in pod.tolerations if not t.effect or t.effect == EFFECT_PREFER_NO_SCHEDULE)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(kept))
        return None

    def _state(self, state: CycleState) -> _PreScoreState:
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        if found is None:
            # Upstream fails the cycle rather than recomputing here.
            raise LookupError(f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found')
        return found

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        tolerations = self._state(state).tolerations_prefer_no_schedule
        return _count_intolerable_prefer_no_schedule(node_info.taints, tolerations)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        tolerations = self._state(state).tolerations_prefer_no_schedule

        def evaluate(taints: tuple[Taint, ...]) -> int:
            return _count_intolerable_prefer_no_schedule(taints, tolerations)

        return per_class_scores(nodes, NODE_TAINTS, evaluate)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    # ---- Queueing hints ------------------------------------------------------------------------

    def filter_ignores_node_pods(self) -> bool:
        return True

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT, "NodeAdd|NodeTaintChange"
                ),
                self.is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS, "PodTolerationChange"),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue when the node goes from having an untolerated taint (or not existing) to having none."""
        try:
            original, modified = as_nodes(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        tolerations = pod.spec.tolerations
        was_untolerated = (
            original is None or find_untolerated_do_not_schedule_taint(original.taints, tolerations) is not None
        )
        is_untolerated = find_untolerated_do_not_schedule_taint(modified.taints, tolerations) is not None
        return QueueingHint.QUEUE if was_untolerated and not is_untolerated else QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue when the rejected pod's own tolerations changed."""
        try:
            _, modified = as_pods(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is not None and modified.metadata.uid == pod.metadata.uid:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


if TYPE_CHECKING:

    def _conforms(
        plugin: TaintToleration,
    ) -> tuple[BatchFilterPlugin, NodeOnlyFilter, PreScorePlugin, BatchScorePlugin, ScoreNormalizer, EnqueueExtensions]:
        return plugin, plugin, plugin, plugin, plugin, plugin
