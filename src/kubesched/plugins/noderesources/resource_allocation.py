"""The resource-allocation scorers behind NodeResourcesFit's Score and NodeResourcesBalancedAllocation.

Who calls it: :mod:`.fit` and :mod:`.balanced_allocation`. For every configured resource the scorer reads
the node's allocatable amount and its requested amount plus the pod's request, then a strategy turns the
vectors into a score (kube-scheduler's ``resourceAllocationScorer``):

- NodeResourcesFit counts cpu and memory of existing pods with the non-zero defaults (NonZeroRequested)
  and the incoming pod's non-zero cpu/memory; BalancedAllocation uses the real requests (``use_requested``).
- The incoming pod's pod-level requests (``spec.resources``) count for BalancedAllocation only: kube-scheduler
  v1.35 builds NodeResourcesFit's scorer without the PodLevelResources feature, so its score reads the
  containers' aggregate (``pod_level_resources``; the existing pods' NonZeroRequested includes pod-level values
  for both, and NodeResourcesFit's Filter reads them too).
- A scalar resource the pod does not request, a resource the node lacks and any resource whose allocatable
  is 0 are left out of the score (both amounts become 0 and strategies skip them).

Each strategy exists twice, per node (Python ints and floats, the reference) and per batch (numpy over
``k × n`` arrays), written with the same integer and float operations in the same order so the two give
bit-identical scores; a property test holds them equal. A batch score depends on nothing but the pod's
request vector and the nodes' columns, so the scorer keeps each recurring vector's scores per node across
cycles (:class:`~kubesched.framework.slot_values.ColumnCache`) and recomputes only the nodes that changed.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubesched.api.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, pod_requests
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.slot_values import ColumnCache
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo
from kubesched.plugins.helper.gomath import go_round, go_round_array, trunc_div, trunc_div_array
from kubesched.plugins.helper.resources import is_scalar_resource_name
from kubesched.plugins.noderesources.args import MAX_CUSTOM_PRIORITY_SCORE, ResourceSpec, UtilizationShapePoint

Matrix = npt.NDArray[np.int64]

MAX_UTILIZATION = 100


class ResourceKind(enum.Enum):
    CPU = "cpu"
    MEMORY = "memory"
    EPHEMERAL_STORAGE = "ephemeral-storage"
    SCALAR = "scalar"
    UNSUPPORTED = "unsupported"
    """e.g. "pods" or "storage": never part of a node's scalar resources upstream, so always skipped."""


def resource_kind(name: str) -> ResourceKind:
    if name == CPU:
        return ResourceKind.CPU
    if name == MEMORY:
        return ResourceKind.MEMORY
    if name == EPHEMERAL_STORAGE:
        return ResourceKind.EPHEMERAL_STORAGE
    if is_scalar_resource_name(name):
        return ResourceKind.SCALAR
    return ResourceKind.UNSUPPORTED


@dataclass(frozen=True, slots=True)
class ScoredResource:
    name: str
    kind: ResourceKind
    weight: int


class Strategy:
    """Turns requested/allocatable vectors into a score; subclasses implement both forms."""

    def score_vectors(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        raise NotImplementedError

    def score_matrix(self, requested: Matrix, allocatable: Matrix) -> IntArray:
        raise NotImplementedError


class _WeightedStrategy(Strategy):
    """Weighted integer mean of per-resource scores over resources with allocatable > 0."""

    def __init__(self, weights: Sequence[int]) -> None:
        self.weights = tuple(weights)
        self._weight_column: Matrix = np.asarray(self.weights, dtype=np.int64).reshape(-1, 1)

    def resource_score(self, requested: int, capacity: int) -> int:
        raise NotImplementedError

    def resource_score_matrix(self, requested: Matrix, capacity: Matrix) -> Matrix:
        """Per-resource scores; entries with capacity 0 are ignored by the caller."""
        raise NotImplementedError

    def score_vectors(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            if alloc == 0:
                continue
            node_score += self.resource_score(req, alloc) * weight
            weight_sum += weight
        return 0 if weight_sum == 0 else trunc_div(node_score, weight_sum)

    def score_matrix(self, requested: Matrix, allocatable: Matrix) -> IntArray:
        valid = allocatable != 0
        scores = np.where(valid, self.resource_score_matrix(requested, allocatable), 0)
        weights = np.where(valid, self._weight_column, 0)
        node_score = (scores * weights).sum(axis=0)
        weight_sum = weights.sum(axis=0)
        return np.where(weight_sum == 0, 0, trunc_div_array(node_score, weight_sum)).astype(np.int64)


class LeastAllocated(_WeightedStrategy):
    """Favors nodes with more free capacity: (capacity − requested) × 100 / capacity, 0 when over-requested."""

    def resource_score(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return 0
        return trunc_div((capacity - requested) * MAX_NODE_SCORE, capacity)

    def resource_score_matrix(self, requested: Matrix, capacity: Matrix) -> Matrix:
        safe = np.where(capacity == 0, 1, capacity)
        raw = trunc_div_array((safe - requested) * MAX_NODE_SCORE, safe)
        return np.where((capacity == 0) | (requested > capacity), 0, raw)


class MostAllocated(_WeightedStrategy):
    """Favors fuller nodes: min(requested, capacity) × 100 / capacity."""

    def resource_score(self, requested: int, capacity: int) -> int:
        if capacity == 0:
            return 0
        # Requested may exceed capacity because pods without requests count with the non-zero defaults.
        return trunc_div(min(requested, capacity) * MAX_NODE_SCORE, capacity)

    def resource_score_matrix(self, requested: Matrix, capacity: Matrix) -> Matrix:
        safe = np.where(capacity == 0, 1, capacity)
        raw = trunc_div_array(np.minimum(requested, safe) * MAX_NODE_SCORE, safe)
        return np.where(capacity == 0, 0, raw)


class RequestedToCapacityRatio(Strategy):
    """A piecewise-linear function of utilization (shape scores × 10); only resources scoring > 0 count,
    and the weighted mean is rounded half away from zero."""

    def __init__(self, weights: Sequence[int], shape: Sequence[UtilizationShapePoint]) -> None:
        self.weights = tuple(weights)
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self.points: tuple[tuple[int, int], ...] = tuple((p.utilization, p.score * scale) for p in shape)
        self._weight_column: Matrix = np.asarray(self.weights, dtype=np.int64).reshape(-1, 1)

    def broken_linear(self, p: int) -> int:
        points = self.points
        for i, (utilization, score) in enumerate(points):
            if p <= utilization:
                if i == 0:
                    return score
                prev_u, prev_s = points[i - 1]
                return prev_s + trunc_div((score - prev_s) * (p - prev_u), utilization - prev_u)
        return points[-1][1]

    def broken_linear_matrix(self, p: Matrix) -> Matrix:
        points = self.points
        result = np.full(p.shape, points[-1][1], dtype=np.int64)
        # Walk the points backwards so the first point with p <= utilization wins, as in the Go loop.
        for i in range(len(points) - 1, -1, -1):
            utilization, score = points[i]
            if i == 0:
                value = np.full(p.shape, score, dtype=np.int64)
            else:
                prev_u, prev_s = points[i - 1]
                value = prev_s + trunc_div_array((score - prev_s) * (p - prev_u), utilization - prev_u)
            result = np.where(p <= utilization, value, result)
        return result

    def resource_score(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return self.broken_linear(MAX_UTILIZATION)
        return self.broken_linear(trunc_div(requested * MAX_UTILIZATION, capacity))

    def score_vectors(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            if alloc == 0:
                continue
            resource_score = self.resource_score(req, alloc)
            if resource_score > 0:
                node_score += resource_score * weight
                weight_sum += weight
        if weight_sum == 0:
            return 0
        return go_round(float(node_score) / float(weight_sum))

    def score_matrix(self, requested: Matrix, allocatable: Matrix) -> IntArray:
        valid = allocatable != 0
        safe = np.where(valid, allocatable, 1)
        utilization = np.where(requested > safe, MAX_UTILIZATION, trunc_div_array(requested * MAX_UTILIZATION, safe))
        scores = self.broken_linear_matrix(utilization)
        counted = valid & (scores > 0)
        weights = np.where(counted, self._weight_column, 0)
        node_score = (np.where(counted, scores, 0) * weights).sum(axis=0)
        weight_sum = weights.sum(axis=0)
        ratio = node_score.astype(np.float64) / np.where(weight_sum == 0, 1, weight_sum).astype(np.float64)
        return np.where(weight_sum == 0, 0, go_round_array(ratio)).astype(np.int64)


class Balanced(Strategy):
    """NodeResourcesBalancedAllocation: (1 − std of the usage fractions) × 100, truncated.

    Fractions are requested/allocatable capped at 1, over resources with allocatable > 0; two fractions
    give std = |f1 − f2| / 2, more give the population standard deviation, fewer give 0.
    """

    def score_vectors(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        fractions: list[float] = []
        total = 0.0
        for req, alloc in zip(requested, allocatable, strict=True):
            if alloc == 0:
                continue
            fraction = float(req) / float(alloc)
            if fraction > 1:
                fraction = 1.0
            total = total + fraction
            fractions.append(fraction)
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            count = float(len(fractions))
            mean = total / count
            squares = 0.0
            for fraction in fractions:
                squares = squares + (fraction - mean) * (fraction - mean)
            std = math.sqrt(squares / count)
        return int((1 - std) * float(MAX_NODE_SCORE))

    def score_matrix(self, requested: Matrix, allocatable: Matrix) -> IntArray:
        valid = allocatable != 0
        n = requested.shape[1]
        safe = np.where(valid, allocatable, 1).astype(np.float64)
        fractions = requested.astype(np.float64) / safe
        fractions = np.where(fractions > 1, 1.0, fractions)
        if requested.shape[0] == 2:
            # The default (cpu, memory): a deviation only where both count, half their difference; the same
            # float operations as the general case below, in far fewer array passes.
            both = valid[0] & valid[1]
            std = np.where(both, np.abs((fractions[0] - fractions[1]) / 2), 0.0)
            return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
        count = valid.sum(axis=0)
        seen = np.cumsum(valid, axis=0)
        total = np.zeros(n, dtype=np.float64)
        first = np.zeros(n, dtype=np.float64)
        second = np.zeros(n, dtype=np.float64)
        for i in range(requested.shape[0]):
            # Adding 0.0 for skipped resources leaves the running sum bit-identical to the Go loop's.
            total = total + np.where(valid[i], fractions[i], 0.0)
            first = np.where(valid[i] & (seen[i] == 1), fractions[i], first)
            second = np.where(valid[i] & (seen[i] == 2), fractions[i], second)
        counts = np.where(count == 0, 1, count).astype(np.float64)
        mean = total / counts
        squares = np.zeros(n, dtype=np.float64)
        for i in range(requested.shape[0]):
            deviation = fractions[i] - mean
            squares = squares + np.where(valid[i], deviation * deviation, 0.0)
        std_two = np.abs((first - second) / 2)
        std_many = np.sqrt(squares / counts)
        std = np.where(count == 2, std_two, np.where(count > 2, std_many, 0.0))
        return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


_VECTOR_SCORES_KEPT = 4096


class ResourceAllocationScorer:
    """Reads per-resource (allocatable, requested) for a pod and node(s) and applies a strategy."""

    def __init__(
        self,
        resources: Sequence[ResourceSpec],
        strategy: Strategy,
        *,
        use_requested: bool,
        pod_level_resources: bool = True,
    ) -> None:
        self.resources = tuple(ScoredResource(r.name, resource_kind(r.name), r.weight) for r in resources)
        self.strategy = strategy
        self.use_requested = use_requested
        self.pod_level_resources = pod_level_resources
        self._scores = ColumnCache()
        # A score depends on the node's (requested, allocatable) vectors alone, and a cluster has few distinct
        # ones (nodes of a few machine types holding a few pod sizes): the per-slot path looks them up.
        self._by_vectors: dict[tuple[int, ...], int] = {}
        # The default resources of both scorers: node_vectors reads them without its per-resource dispatch.
        self._cpu_then_memory = tuple(r.kind for r in self.resources) == (ResourceKind.CPU, ResourceKind.MEMORY)

    def pod_requests(self, pod: PodInfo) -> tuple[int, ...]:
        """The pod's request per configured resource (non-zero cpu/memory unless ``use_requested``)."""
        if not self.pod_level_resources and pod.pod.spec.pod_level_requests:
            return self._container_requests(pod)
        if self._cpu_then_memory:  # the loop below for the default resources, unrolled (PreScore, every pod)
            if self.use_requested:
                return (pod.request.milli_cpu, pod.request.memory)
            return (pod.non_zero_milli_cpu, pod.non_zero_memory)
        requests: list[int] = []
        for resource in self.resources:
            if resource.kind is ResourceKind.CPU and not self.use_requested:
                requests.append(pod.non_zero_milli_cpu)
            elif resource.kind is ResourceKind.MEMORY and not self.use_requested:
                requests.append(pod.non_zero_memory)
            else:
                requests.append(pod.request.get(resource.name))
        return tuple(requests)

    def _container_requests(self, pod: PodInfo) -> tuple[int, ...]:
        """:meth:`pod_requests` of a pod with pod-level requests, from its containers alone (module doc)."""
        non_zero = not self.use_requested
        aggregate = pod_requests(pod.pod, non_zero=non_zero, pod_level=False)
        requests: list[int] = []
        for resource in self.resources:
            if non_zero and resource.kind is ResourceKind.CPU:
                requests.append(aggregate.get(resource.name, DEFAULT_MILLI_CPU_REQUEST))
            elif non_zero and resource.kind is ResourceKind.MEMORY:
                requests.append(aggregate.get(resource.name, DEFAULT_MEMORY_REQUEST))
            else:
                requests.append(aggregate.get(resource.name, 0))
        return tuple(requests)

    def node_vectors(self, info: NodeInfo, pod_requests: Sequence[int]) -> tuple[list[int], list[int]]:
        requested_by_pods = info.requested if self.use_requested else info.non_zero_requested
        allocatable = info.allocatable
        if self._cpu_then_memory:
            # The loop below for exactly (cpu, memory), unrolled: the few nodes a cycle changed are rescored
            # through here every cycle (ColumnCache's per-slot path), by both resource scorers.
            cpu, memory = allocatable.milli_cpu, allocatable.memory
            return (
                [requested_by_pods.milli_cpu + pod_requests[0] if cpu else 0,
                 requested_by_pods.memory + pod_requests[1] if memory else 0],
                [cpu, memory],
            )  # fmt: skip
        allocs: list[int] = []
        requests: list[int] = []
        for resource, pod_request in zip(self.resources, pod_requests, strict=True):
            kind = resource.kind
            if kind is ResourceKind.CPU:
                alloc, req = allocatable.milli_cpu, requested_by_pods.milli_cpu + pod_request
            elif kind is ResourceKind.MEMORY:
                alloc, req = allocatable.memory, requested_by_pods.memory + pod_request
            elif kind is ResourceKind.EPHEMERAL_STORAGE:
                alloc, req = allocatable.ephemeral_storage, info.requested.ephemeral_storage + pod_request
            elif kind is ResourceKind.SCALAR and pod_request != 0 and resource.name in allocatable.scalar:
                alloc = allocatable.scalar[resource.name]
                req = info.requested.scalar.get(resource.name, 0) + pod_request
            else:
                alloc, req = 0, 0
            if alloc == 0:
                alloc, req = 0, 0
            allocs.append(alloc)
            requests.append(req)
        return requests, allocs

    def node_matrices(self, batch: NodeBatch, pod_requests: Sequence[int]) -> tuple[Matrix, Matrix]:
        table = batch.table
        slots = batch.slots
        n = len(batch)
        requests = np.zeros((len(self.resources), n), dtype=np.int64)
        allocs = np.zeros((len(self.resources), n), dtype=np.int64)
        for i, (resource, pod_request) in enumerate(zip(self.resources, pod_requests, strict=True)):
            kind = resource.kind
            if kind is ResourceKind.CPU:
                alloc = table.alloc_cpu[slots]
                req = (table.req_cpu if self.use_requested else table.nonzero_cpu)[slots] + pod_request
            elif kind is ResourceKind.MEMORY:
                alloc = table.alloc_memory[slots]
                req = (table.req_memory if self.use_requested else table.nonzero_memory)[slots] + pod_request
            elif kind is ResourceKind.EPHEMERAL_STORAGE:
                alloc = table.alloc_ephemeral[slots]
                req = table.req_ephemeral[slots] + pod_request
            elif kind is ResourceKind.SCALAR and pod_request != 0:
                alloc_column, req_column = table.scalar(resource.name)
                alloc = alloc_column[slots]
                req = req_column[slots] + pod_request
            else:
                continue
            present = alloc != 0
            allocs[i] = alloc
            requests[i] = np.where(present, req, 0)
        return requests, allocs

    def score_node(self, info: NodeInfo, pod_requests: Sequence[int]) -> int:
        requested, allocatable = self.node_vectors(info, pod_requests)
        return self.strategy.score_vectors(requested, allocatable)

    def score_batch(self, batch: NodeBatch, pod_requests: Sequence[int]) -> IntArray:
        if len(batch) == 0:
            return np.zeros(0, dtype=np.int64)

        infos = batch.table.infos

        def compute(nodes: NodeBatch) -> IntArray:
            requested, allocatable = self.node_matrices(nodes, pod_requests)
            return self.strategy.score_matrix(requested, allocatable)

        by_vectors = self._by_vectors

        def score_slot(slot: int) -> int:
            info = infos[slot]
            if info is None:
                return 0
            requested, allocatable = self.node_vectors(info, pod_requests)
            key = (*requested, *allocatable)
            score = by_vectors.get(key)
            if score is None:
                if len(by_vectors) >= _VECTOR_SCORES_KEPT:
                    by_vectors.clear()
                score = by_vectors[key] = self.strategy.score_vectors(requested, allocatable)
            return score

        return self._scores.read(batch, tuple(pod_requests), compute, score_slot)


__all__ = [
    "Balanced",
    "LeastAllocated",
    "MostAllocated",
    "RequestedToCapacityRatio",
    "ResourceAllocationScorer",
    "ResourceKind",
    "Strategy",
    "resource_kind",
]
