"""ClusterBalance (PreScore, Score, NormalizeScore): prefer the cluster with the largest free share.

For each configured resource (default cpu and memory, weight 1) the free share of a cluster after the pod
lands there is (allocatable − requested − the pod's request) × 100 / allocatable, where requested is the
member's reported allocation plus the hub pods in flight to it (the super node's requested, see
:mod:`kubesched.federation.adapter`); a resource the cluster has none of is left out. The raw score is the
weighted mean of those shares (KubeAdmiral's and kube-scheduler's LeastAllocated); NormalizeScore then scales
the candidates so the freest scores 100 (kube-scheduler's DefaultNormalizeScore), so balance decides between
clusters however full they all are. The pod's cpu and memory count as kube-scheduler scoring counts them: 100m
and 200Mi when the pod names none.

PreScore computes what the pod asks for per configured resource, once; Score reads it. ``score_batch`` keeps each
recurring request's raw score per cluster and recomputes only the clusters whose row changed since (by the table's
per-slot versions): a few in plain Python, many at once from the table's allocatable and requested columns (the
super node's figures are the cluster's, see :mod:`kubesched.federation.adapter`); ``score`` is the reference, and a
property test holds the two equal. A weight on ``pods``, or figures so large that ``free × 100`` could leave int64,
take the per-cluster path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import IntArray, NodeBatch, NodeTable
from kubesched.framework.status import Status
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.normalize_score import default_normalize_score
from kubesched.plugins.multicluster.args import ClusterBalanceArgs
from kubesched.plugins.multicluster.slots import KeptPerRequest

if TYPE_CHECKING:
    from kubesched.framework.interface import BatchScorePlugin, Handle, PreScorePlugin, ScoreNormalizer

PRE_SCORE_STATE_KEY = "PreScore" + names.CLUSTER_BALANCE


@dataclass(frozen=True, slots=True)
class _Wanted:
    amounts: tuple[tuple[str, int, int], ...]
    """(resource, weight, what the pod asks for of it) per configured resource."""

    def clone(self) -> _Wanted:
        return self


# Beyond this a cluster's figure times 100 might not fit in int64: such batches take the per-cluster path.
_SAFE_CAPACITY = (2**63 - 1) // (MAX_NODE_SCORE * 4)


def wanted_amounts(pod: PodInfo, weights: Sequence[tuple[str, int]]) -> tuple[tuple[str, int, int], ...]:
    """(resource, weight, amount) per weighted resource: the pod's cpu and memory as scoring counts them (100m
    and 200Mi when it names none), anything else as requested."""
    out: list[tuple[str, int, int]] = []
    for name, weight in weights:
        if name == CPU:
            wanted = pod.non_zero_milli_cpu
        elif name == MEMORY:
            wanted = pod.non_zero_memory
        else:
            wanted = pod.request.get(name)
        out.append((name, weight, wanted))
    return tuple(out)


def free_share_score(node_info: NodeInfo, pod: PodInfo, weights: Sequence[tuple[str, int]]) -> int:
    """The weighted mean free share (0..100) of the cluster once ``pod`` is added."""
    return _free_share(node_info, wanted_amounts(pod, weights))


def _free_share(node_info: NodeInfo, wanted: Sequence[tuple[str, int, int]]) -> int:
    total = weight_sum = 0
    for name, weight, amount in wanted:
        capacity = node_info.allocatable.get(name)
        if capacity <= 0:
            continue
        free = capacity - node_info.requested.get(name) - amount
        total += max(free, 0) * MAX_NODE_SCORE // capacity * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0


def _columns(table: NodeTable, name: str) -> tuple[IntArray, IntArray] | None:
    """The (allocatable, requested) columns NodeInfo's ``allocatable.get(name)`` and ``requested.get(name)`` read;
    None for ``pods``, whose requested figure the table does not hold."""
    if name == CPU:
        return table.alloc_cpu, table.req_cpu
    if name == MEMORY:
        return table.alloc_memory, table.req_memory
    if name == EPHEMERAL_STORAGE:
        return table.alloc_ephemeral, table.req_ephemeral
    if name == PODS:
        return None
    return table.scalar(name)


FEW_SLOTS = 16
"""Changed clusters up to this many are scored in plain Python (a few us each); more from the table's columns,
whose numpy calls cost about as much whatever their length."""

MAX_KEPT_WANTS = 64
"""Distinct pod requests whose per-cluster scores are kept (workloads repeat a few pod templates)."""


class _KeptScores:
    """One request's raw score per slot, valid while the slot's table version is the one kept beside it."""

    __slots__ = ("scores", "versions")

    def __init__(self, capacity: int) -> None:
        self.scores: IntArray = np.zeros(capacity, dtype=np.int64)
        self.versions: IntArray = np.full(capacity, -1, dtype=np.int64)

    def ensure(self, capacity: int) -> None:
        grow = capacity - self.scores.shape[0]
        if grow > 0:
            self.scores = np.concatenate([self.scores, np.zeros(grow, dtype=np.int64)])
            self.versions = np.concatenate([self.versions, np.full(grow, -1, dtype=np.int64)])


class ClusterBalance:
    """Score: the least allocated clusters, relative to the freest candidate."""

    def __init__(self, args: ClusterBalanceArgs | None, handle: Handle) -> None:
        del handle
        self.args = validated(args, ClusterBalanceArgs)
        self._weights = tuple((r.name, r.weight) for r in self.args.resources)
        # A cluster's raw score depends on its row and the pod's wanted amounts alone: kept per request and
        # recomputed for the rows that changed since (a cycle changes a few clusters of a hundred).
        self._kept = KeptPerRequest(_KeptScores, MAX_KEPT_WANTS)
        self.few_slots = FEW_SLOTS
        """See :data:`FEW_SLOTS` (an attribute so a test can send every changed cluster through the columns)."""

    @property
    def name(self) -> str:
        return names.CLUSTER_BALANCE

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, _Wanted(wanted_amounts(pod, self._weights)))
        return None

    def _wanted(self, state: CycleState) -> _Wanted:
        wanted = state.get(PRE_SCORE_STATE_KEY, _Wanted)
        if wanted is None:
            raise RuntimeError(f"{PRE_SCORE_STATE_KEY} not found: the plugin's PreScore did not run")
        return wanted

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return _free_share(node_info, self._wanted(state).amounts)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        wanted = self._wanted(state).amounts
        table, slots = nodes.table, nodes.slots
        kept = self._kept.get(table, wanted)
        stale = slots[kept.versions[slots] != table.versions[slots]]
        if stale.shape[0]:
            if stale.shape[0] > self.few_slots:
                kept.scores[stale] = self._score_columns(wanted, table, stale)
            else:
                infos = table.infos
                for slot in stale.tolist():
                    info = infos[slot]
                    assert info is not None  # a batch holds live slots only
                    kept.scores[slot] = _free_share(info, wanted)
            kept.versions[stale] = table.versions[stale]
        return kept.scores[slots]

    def _score_columns(self, wanted: Sequence[tuple[str, int, int]], table: NodeTable, slots: IntArray) -> IntArray:
        """The scores of ``slots`` from the table's columns (the per-cluster method for a weight on ``pods`` or
        figures too large for int64 arithmetic)."""
        total = np.zeros(slots.shape[0], dtype=np.int64)
        weight_sum = np.zeros(slots.shape[0], dtype=np.int64)
        for name, weight, amount in wanted:
            columns = _columns(table, name)
            if columns is None:
                return self._score_each(wanted, table, slots)
            capacity, requested = columns[0][slots], columns[1][slots]
            if max(int(capacity.max()), -int(requested.min()), abs(amount)) > _SAFE_CAPACITY:
                return self._score_each(wanted, table, slots)
            counted = capacity > 0
            free = np.maximum(capacity - requested - amount, 0)
            # Both operands are non-negative where counted, so numpy's floor division is Python's.
            share = free * MAX_NODE_SCORE // np.where(counted, capacity, 1) * weight
            total += np.where(counted, share, 0)
            weight_sum += np.where(counted, weight, 0)
        return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)

    def _score_each(self, wanted: Sequence[tuple[str, int, int]], table: NodeTable, slots: IntArray) -> IntArray:
        scores = np.zeros(slots.shape[0], dtype=np.int64)
        for index, slot in enumerate(slots.tolist()):
            info = table.infos[slot]
            assert info is not None  # a batch holds live slots only
            scores[index] = _free_share(info, wanted)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None


if TYPE_CHECKING:

    def _conforms(plugin: ClusterBalance) -> tuple[PreScorePlugin, BatchScorePlugin, ScoreNormalizer]:
        return plugin, plugin, plugin
