"""ClusterLocality (PreScore, Score, NormalizeScore): stay where the workload already runs.

A pod's workload is its controller (kind and name) and its application label (``app.kubernetes.io/name``,
else ``app``), in its namespace (``matchBy`` picks which count; :func:`kubesched.clusterapi.contract.workload_keys`).
The raw score of a cluster is how many pods of the workload run there: those the member reports (its
``workloads``: in simulation, the pods bound to its own Nodes) plus the hub pods bound to it and not yet
reported; a pod matching by both owner and app counts once per source, by the larger count. NormalizeScore
scales so the cluster running the most scores 100 and one running none 0 (Karmada's ClusterLocality is the
0-or-100 special case). PreScore skips the Score for a pod with no workload key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.clusterapi.contract import WorkloadKey, take_cycle_snapshot, workload_keys
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import IntArray
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.normalize_score import default_normalize_score
from kubesched.plugins.multicluster.args import ClusterLocalityArgs
from kubesched.plugins.multicluster.common import in_flight

if TYPE_CHECKING:
    from kubesched.framework.interface import Handle, PreScorePlugin, ScoreNormalizer, ScorePlugin

PRE_SCORE_STATE_KEY = "PreScore" + names.CLUSTER_LOCALITY

_SKIP = Status(Code.SKIP)


@dataclass(frozen=True, slots=True)
class _Counts:
    by_cluster: Mapping[str, int]

    def clone(self) -> _Counts:
        return self


class ClusterLocality:
    """Score: clusters already running pods of the same workload, the more the better."""

    def __init__(self, args: ClusterLocalityArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterLocalityArgs)
        self._match = frozenset(self.args.match_by)
        self._handle = handle

    @property
    def name(self) -> str:
        return names.CLUSTER_LOCALITY

    def _keys(self, pod: PodInfo) -> frozenset[WorkloadKey]:
        return frozenset(key for key in workload_keys(pod.pod) if key[0] in self._match)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        keys = self._keys(pod)
        if not keys:
            return _SKIP
        snapshot = take_cycle_snapshot(state, self._handle)
        counts: dict[str, int] = {}
        for info in nodes:
            cluster = snapshot.get(info.name)
            if cluster is None:
                counts[info.name] = 0
                continue
            reported = max((cluster.workloads.get(key, 0) for key in keys), default=0)
            hub = sum(
                1 for other in in_flight(info, cluster) if other.uid != pod.uid and keys.intersection(self._keys(other))
            )
            counts[info.name] = reported + hub
        state.write(PRE_SCORE_STATE_KEY, _Counts(counts))
        return None

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        counts = state.get(PRE_SCORE_STATE_KEY, _Counts)
        if counts is None:
            raise RuntimeError(f"{PRE_SCORE_STATE_KEY} not found: the plugin's PreScore did not run")
        return counts.by_cluster.get(node_info.name, 0)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None


if TYPE_CHECKING:

    def _conforms(plugin: ClusterLocality) -> tuple[PreScorePlugin, ScorePlugin, ScoreNormalizer]:
        return plugin, plugin, plugin
