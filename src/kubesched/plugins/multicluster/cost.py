"""ClusterCost (PreScore, Score, NormalizeScore): cheaper clusters score higher.

The pod's hourly price on a cluster is cores × ``cpuPerCoreHour`` + GiB × ``memoryPerGiBHour`` + units ×
``extendedPerUnitHour`` of each extended resource it requests (``MemberCluster.spec.cost``), with cpu and
memory counted as scoring counts them (100m and 200Mi when the pod names none). The raw score is that price in
millionths of the currency per hour (so ``explain`` shows what the pod costs where); NormalizeScore maps the
candidates linearly so the cheapest scores 100 and the dearest 0 (all equal: all 100), as OCM's resource
prioritizers spread min..max. A cluster that publishes no prices gets ``missingCostScore`` (default 0).

Prices are read from the cycle's cluster snapshot; PreScore computes every candidate's price once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from kubesched.clusterapi.contract import PriceList, take_cycle_snapshot
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import IntArray
from kubesched.framework.status import Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import ClusterCostArgs

if TYPE_CHECKING:
    from kubesched.framework.interface import Handle, PreScorePlugin, ScoreNormalizer, ScorePlugin

PRE_SCORE_STATE_KEY = "PreScore" + names.CLUSTER_COST

NO_PRICE = -1
"""The raw score of a cluster without prices (real prices are never negative)."""

_MICRO = Decimal(1_000_000)
_MILLI = Decimal(1000)
_GIB = Decimal(2**30)


def hourly_price(pod: PodInfo, prices: PriceList) -> Decimal:
    """What ``pod`` costs per hour at ``prices`` (module doc)."""
    price = Decimal(pod.non_zero_milli_cpu) / _MILLI * prices.cpu_per_core_hour
    price += Decimal(pod.non_zero_memory) / _GIB * prices.memory_per_gib_hour
    for name, per_unit in prices.extended_per_unit_hour.items():
        amount = pod.request.scalar.get(name, 0)
        if amount:
            price += Decimal(amount) * per_unit
    return price


def raw_cost(pod: PodInfo, prices: PriceList | None) -> int:
    if prices is None:
        return NO_PRICE
    return int((hourly_price(pod, prices) * _MICRO).to_integral_value(rounding=ROUND_HALF_UP))


@dataclass(frozen=True, slots=True)
class _Costs:
    by_cluster: Mapping[str, int]

    def clone(self) -> _Costs:
        return self


class ClusterCost:
    """Score: the pod's hourly price on each cluster, cheapest first."""

    def __init__(self, args: ClusterCostArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterCostArgs)
        self._handle = handle

    @property
    def name(self) -> str:
        return names.CLUSTER_COST

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        snapshot = take_cycle_snapshot(state, self._handle)
        costs: dict[str, int] = {}
        for info in nodes:
            cluster = snapshot.get(info.name)
            costs[info.name] = raw_cost(pod, cluster.prices if cluster is not None else None)
        state.write(PRE_SCORE_STATE_KEY, _Costs(costs))
        return None

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        costs = state.get(PRE_SCORE_STATE_KEY, _Costs)
        if costs is None:
            raise RuntimeError(f"{PRE_SCORE_STATE_KEY} not found: the plugin's PreScore did not run")
        return costs.by_cluster.get(node_info.name, NO_PRICE)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        priced = scores >= 0
        missing = ~priced
        if priced.any():
            cheapest, dearest = int(scores[priced].min()), int(scores[priced].max())
            if dearest == cheapest:
                scores[priced] = MAX_NODE_SCORE
            else:
                span = dearest - cheapest
                scores[priced] = (dearest - scores[priced]) * MAX_NODE_SCORE // span
        scores[missing] = self.args.missing_cost_score
        return None


if TYPE_CHECKING:

    def _conforms(plugin: ClusterCost) -> tuple[PreScorePlugin, ScorePlugin, ScoreNormalizer]:
        return plugin, plugin, plugin
