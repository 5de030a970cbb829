"""NodeResourcesBalancedAllocation (PreScore, Score), kube-scheduler v1.35 behaviour.

Favors nodes whose usage fractions (real requests, existing pods plus this one, over allocatable) are
close to each other: score = int((1 − std) × 100). Since v1.33 PreScore returns Skip for best-effort pods
(nothing requested for any configured resource, PR #130260), so the plugin then adds nothing; a Score
call without PreScore state scores such a pod 0 on every node.

The float arithmetic of the per-node and batch forms is the same sequence of IEEE operations (see
:class:`~kubesched.plugins.noderesources.resource_allocation.Balanced`), so both give identical scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from kubesched.plugins.noderesources.resource_allocation import Balanced, ResourceAllocationScorer

if TYPE_CHECKING:
    from kubesched.framework.interface import BatchScorePlugin, Handle, PreScorePlugin

PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_RESOURCES_BALANCED_ALLOCATION


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


class BalancedAllocation:
    """Score: prefer nodes where the pod leaves cpu, memory (and configured) usage balanced."""

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> None:
        del handle
        args = validated(args, NodeResourcesBalancedAllocationArgs)
        self.args = args
        self.scorer = ResourceAllocationScorer(args.resources, Balanced(), use_requested=True)

    @property
    def name(self) -> str:
        return names.NODE_RESOURCES_BALANCED_ALLOCATION

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        requests = self.scorer.pod_requests(pod)
        if not any(requests):
            # Scoring best-effort pods by balance piles them onto the same nodes (kubernetes#129138).
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(requests))
        return None

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> tuple[int, ...] | None:
        """The pod's requests, or None for a best-effort pod scored without PreScore."""
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        if found is not None:
            return found.pod_requests
        requests = self.scorer.pod_requests(pod)
        return requests if any(requests) else None

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        requests = self._pod_requests(state, pod)
        return 0 if requests is None else self.scorer.score_node(node_info, requests)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        requests = self._pod_requests(state, pod)
        if requests is None:
            return np.zeros(len(nodes), dtype=np.int64)
        return self.scorer.score_batch(nodes, requests)


if TYPE_CHECKING:

    def _conforms(plugin: BalancedAllocation) -> tuple[PreScorePlugin, BatchScorePlugin]:
        return plugin, plugin
