"""ClusterBalance (PreScore, Score, NormalizeScore): prefer the cluster with the largest free share.

For each configured resource (default cpu and memory, weight 1) the free share of a cluster after the pod
lands there is (allocatable − requested − the pod's request) × 100 / allocatable, where requested is the
member's reported allocation plus the hub pods in flight to it (the super node's requested, see
:mod:`kubesched.federation.adapter`); a resource the cluster has none of is left out. The raw score is the
weighted mean of those shares (KubeAdmiral's and kube-scheduler's LeastAllocated); NormalizeScore then scales
the candidates so the freest scores 100 (kube-scheduler's DefaultNormalizeScore), so balance decides between
clusters however full they all are. The pod's cpu and memory count as kube-scheduler scoring counts them: 100m
and 200Mi when the pod names none.

Everything is computed once at PreScore over the feasible clusters; Score reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import IntArray
from kubesched.framework.status import Status
from kubesched.framework.types import CPU, MEMORY, NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.normalize_score import default_normalize_score
from kubesched.plugins.multicluster.args import ClusterBalanceArgs

if TYPE_CHECKING:
    from kubesched.framework.interface import Handle, PreScorePlugin, ScoreNormalizer, ScorePlugin

PRE_SCORE_STATE_KEY = "PreScore" + names.CLUSTER_BALANCE


@dataclass(frozen=True, slots=True)
class _Scores:
    by_cluster: Mapping[str, int]

    def clone(self) -> _Scores:
        return self


def free_share_score(node_info: NodeInfo, pod: PodInfo, weights: Sequence[tuple[str, int]]) -> int:
    """The weighted mean free share (0..100) of the cluster once ``pod`` is added."""
    total = weight_sum = 0
    for name, weight in weights:
        if name == CPU:
            wanted = pod.non_zero_milli_cpu
        elif name == MEMORY:
            wanted = pod.non_zero_memory
        else:
            wanted = pod.request.get(name)
        capacity = node_info.allocatable.get(name)
        if capacity <= 0:
            continue
        free = capacity - node_info.requested.get(name) - wanted
        total += max(free, 0) * MAX_NODE_SCORE // capacity * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0


class ClusterBalance:
    """Score: the least allocated clusters, relative to the freest candidate."""

    def __init__(self, args: ClusterBalanceArgs | None, handle: Handle) -> None:
        del handle
        self.args = validated(args, ClusterBalanceArgs)
        self._weights = tuple((r.name, r.weight) for r in self.args.resources)

    @property
    def name(self) -> str:
        return names.CLUSTER_BALANCE

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(
            PRE_SCORE_STATE_KEY, _Scores({info.name: free_share_score(info, pod, self._weights) for info in nodes})
        )
        return None

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        scores = state.get(PRE_SCORE_STATE_KEY, _Scores)
        if scores is None:
            raise RuntimeError(f"{PRE_SCORE_STATE_KEY} not found: the plugin's PreScore did not run")
        return scores.by_cluster.get(node_info.name, free_share_score(node_info, pod, self._weights))

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None


if TYPE_CHECKING:

    def _conforms(plugin: ClusterBalance) -> tuple[PreScorePlugin, ScorePlugin, ScoreNormalizer]:
        return plugin, plugin, plugin
