"""ClusterReadiness (PreFilter, Filter, PreScore, Score): only clusters that are ready and recently heard from.

PreFilter takes the cycle's :class:`~kubesched.framework.clusters.ClusterSnapshot` (the first cluster plugin
of a cycle does; the rest read the same one). Filter rejects, as UnschedulableAndUnresolvable (evicting hub pods
would not make a cluster ready):

- a cluster that is not ready: ``cluster(s) were not ready``;
- with ``stalePolicy: Reject`` (the default), a cluster whose state is older than ``maxStalenessSeconds``:
  ``cluster(s) had stale state``;
- a super node the source does not know: ``cluster(s) had no reported state``.

With ``stalePolicy: Penalize`` a stale cluster stays feasible and Score gives it 0 and every fresh cluster
100 (PreScore skips the Score under ``Reject``). Age is the snapshot's time minus the state's ``observedAt``.
A rejected pod is requeued on any cluster event (no queueing hints yet: a member turning ready arrives as an
update of its super node, which requeues everything).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubesched.framework.clusters import take_cycle_snapshot
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import STALE_REJECT, ClusterReadinessArgs
from kubesched.plugins.multicluster.common import UNKNOWN_CLUSTER, read_snapshot

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        FilterPlugin,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
    )

ERR_REASON_NOT_READY = "cluster(s) were not ready"
ERR_REASON_STALE = "cluster(s) had stale state"

_NOT_READY = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NOT_READY)
_STALE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_STALE)
_SKIP = Status(Code.SKIP)


class ClusterReadiness:
    """Filter: clusters that are not ready or whose state is stale; Score (Penalize): fresh over stale."""

    def __init__(self, args: ClusterReadinessArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterReadinessArgs)
        self._handle = handle

    @property
    def name(self) -> str:
        return names.CLUSTER_READINESS

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        take_cycle_snapshot(state, self._handle)
        return None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _stale(self, age: float | None) -> bool:
        return age is not None and age > self.args.max_staleness_seconds

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        snapshot = read_snapshot(state)
        cluster = snapshot.get(node_info.name)
        if cluster is None:
            return UNKNOWN_CLUSTER
        if not cluster.ready:
            return _NOT_READY
        if self.args.stale_policy == STALE_REJECT and self._stale(snapshot.age(node_info.name)):
            return _STALE
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        if self.args.stale_policy == STALE_REJECT:
            return _SKIP
        take_cycle_snapshot(state, self._handle)
        return None

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        snapshot = read_snapshot(state)
        return MIN_NODE_SCORE if self._stale(snapshot.age(node_info.name)) else MAX_NODE_SCORE


if TYPE_CHECKING:

    def _conforms(plugin: ClusterReadiness) -> tuple[PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin]:
        return plugin, plugin, plugin, plugin
