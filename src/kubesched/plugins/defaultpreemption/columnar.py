"""DefaultPreemption's dry run in columns, for the cycles where only NodeResourcesFit can change its answer.

Who calls it: :meth:`~kubesched.plugins.defaultpreemption.default_preemption.DefaultPreemption.dry_run_preemption`,
which hands :func:`columnar_evaluator`'s node evaluation to the search every dry run shares
(:func:`~kubesched.plugins.defaultpreemption.candidates.search_candidates`). The per-node path (a copy of the
node and of the cycle state per node, the pods removed and put back through the framework) stays the
reference; a property test holds the two equal on random clusters.

Why it is exact. The dry run asks, of a node with some lower-priority pods removed, "does the pod pass every
Filter, with the nominated pods and without?". This path is used only when every Filter plugin the cycle runs
is NodeResourcesFit or one whose answer reads the node alone, never its pods (:data:`NODE_ONLY_FILTERS`),
those all ordered before NodeResourcesFit, and no PreFilter extension (AddPod/RemovePod) would run. Then, on a
node whose Filter status this cycle came from NodeResourcesFit, every plugin before it passed (and passes
whatever pods are removed), so the answer is NodeResourcesFit's on the node's requests minus those of the
removed pods, plus those of the nominated pods that count for this pod (the reference's first pass decides:
with more pods and more requested, NodeResourcesFit cannot pass it and fail the second). That is a subtraction
of columns for all nodes at once (:func:`~kubesched.plugins.noderesources.fit.fit_columns`, the plugin's own
batch verdict), and integer compares while victims are reprieved. Other nodes (rejected first by another
plugin, or with a nominated pod that is also on the node) go to the reference.

What the pods below a priority request on each node is kept across cycles in :class:`LowerPriorityRequests`,
recomputed only for the nodes whose table stamp moved (:mod:`kubesched.framework.slot_values`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.node_table import IntArray, NodeTable
from kubesched.framework.slot_values import SlotFunction, SlotValueCache
from kubesched.framework.status import Status
from kubesched.framework.types import PODS, NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.defaultpreemption.candidates import EvaluateNode, importance_key
from kubesched.plugins.nodeaffinity.node_affinity import NodeAffinity
from kubesched.plugins.nodename.node_name import NodeName
from kubesched.plugins.noderesources.fit import PRE_FILTER_STATE_KEY, Fit, FitRequest, fit_columns, resource_columns
from kubesched.plugins.nodeunschedulable.node_unschedulable import NodeUnschedulable
from kubesched.plugins.tainttoleration.taint_toleration import TaintToleration

NODE_ONLY_FILTERS: Mapping[str, type] = {
    names.NODE_UNSCHEDULABLE: NodeUnschedulable,
    names.NODE_NAME: NodeName,
    names.TAINT_TOLERATION: TaintToleration,
    names.NODE_AFFINITY: NodeAffinity,
}
"""In-tree Filter plugins whose answer reads the node object (and the pod, and PreFilter's state) but never the
pods on the node, so removing or adding pods cannot change it. Checked by type too: another plugin registered
under one of these names is not known to be so."""

SplitByPDB = Callable[[Sequence[PodInfo]], tuple[list[PodInfo], list[PodInfo]]]
"""Pods (order kept) -> (those whose eviction violates a PDB, the others)."""


def fit_request_if_exact(handle: Handle, state: CycleState) -> FitRequest | None:
    """The pod's NodeResourcesFit request when the columnar dry run is exact for this cycle (module doc), else
    None: the reference path must run."""
    if handle.runs_pre_filter_extensions(state):
        return None
    fit_seen = False
    for name, plugin in handle.filter_plugins_to_run(state):
        if name == names.NODE_RESOURCES_FIT and type(plugin) is Fit:
            fit_seen = True
            continue
        # A node-only plugin after Fit has not been asked about the nodes Fit rejected: it would have to be run.
        if fit_seen or type(plugin) is not NODE_ONLY_FILTERS.get(name):
            return None
    if not fit_seen:
        return None
    request = state.get(PRE_FILTER_STATE_KEY, FitRequest)
    if request is None or any(amount <= 0 for _, amount in request.scalars):
        # Without PreFilter's state Filter fails with an Error the reference reports; a request of a scalar
        # below zero is compared by the per-node Filter only, not by the columns.
        return None
    return request


class LowerPriorityRequests:
    """Per NodeTable slot, what the pods of priority below a given one request (and how many they are), kept
    across cycles; a read recomputes only the slots whose stamp moved."""

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache = SlotValueCache(limit=32)

    def column(self, table: NodeTable, priority: int, resource: str) -> IntArray:
        """The sum of ``resource`` (``"pods"``: the number of pods) over each slot's pods below ``priority``."""
        return self._cache.read(table, (priority, resource), _lower_sum(priority, resource))


def _lower_sum(priority: int, resource: str) -> SlotFunction:
    if resource == PODS:

        def count(info: NodeInfo) -> int:
            return sum(1 for other in info.pods.values() if other.priority < priority)

        return count

    def total(info: NodeInfo) -> int:
        return sum(other.request.get(resource) for other in info.pods.values() if other.priority < priority)

    return total


def columnar_evaluator(
    handle: Handle,
    state: CycleState,
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    node_to_status: Mapping[str, Status],
    lower: LowerPriorityRequests,
    split_by_pdb: SplitByPDB,
    reference: EvaluateNode,
    no_victims: Status,
) -> EvaluateNode | None:
    """The dry run's node evaluation over ``nodes`` (the potential nodes, whose statuses ``node_to_status``
    holds from this cycle's Filter), equal to ``reference``'s; None when this cycle needs the reference for
    every node. ``no_victims`` is the status of a node without lower-priority pods."""
    request = fit_request_if_exact(handle, state)
    if request is None or not nodes:
        return None
    table = handle.snapshot().table
    priority = pod.priority
    fit_name = names.NODE_RESOURCES_FIT

    slots = np.fromiter((info.slot for info in nodes), dtype=np.int64, count=len(nodes))
    columns = resource_columns(request, table)
    checked = [(resource, amount) for resource, amount, _, _, _ in columns]
    lower_count = lower.column(table, priority, PODS)[slots]
    pod_count = table.pod_count[slots] - lower_count
    used = [used[slots] - lower.column(table, priority, resource)[slots] for resource, _, _, used, _ in columns]

    # The nominated pods that count for this pod (priority at least its own): the reference filters such a
    # node once with them added and once without; NodeResourcesFit cannot pass the first and fail the second
    # (more pods, more requested), so the first decides, and they are added to the node's columns here.
    nominated = _nominated_requests(handle, pod, nodes, slots, checked)
    reference_only: set[int] = set()
    extra: dict[int, tuple[int, list[int]]] = {}
    for index, (uids, count, amounts) in nominated.items():
        if any(uid in nodes[index].pods for uid in uids):
            # Adding a pod already on the node adds its requests but not a pod: left to the reference.
            reference_only.add(index)
            continue
        extra[index] = (count, amounts)
        pod_count[index] += count
        for column, amount in zip(used, amounts, strict=True):
            column[index] += amount

    # NodeResourcesFit's verdict on every potential node with all its lower-priority pods gone.
    checks = [
        (amount, alloc[slots], column, reason)
        for (_, amount, alloc, _, reason), column in zip(columns, used, strict=True)
    ]
    verdict = fit_columns(pod_count, table.alloc_pods[slots], checks)
    codes: list[int] = verdict.codes.tolist() if verdict is not None else [0] * len(nodes)
    fit_statuses = [status.with_plugin(fit_name) for status in verdict.statuses] if verdict is not None else []
    lower_counts: list[int] = lower_count.tolist()
    none_extra = (0, [0] * len(checked))

    def evaluate(index: int) -> tuple[list[PodInfo], int, Status | None]:
        info = nodes[index]
        if node_to_status[info.name].plugin != fit_name or index in reference_only:
            return reference(index)
        if lower_counts[index] == 0:
            return [], 0, no_victims
        code = codes[index]
        if code:
            return [], 0, fit_statuses[code - 1]
        return _reprieve(info, priority, checked, extra.get(index, none_extra), split_by_pdb)

    return evaluate


def _nominated_requests(
    handle: Handle, pod: PodInfo, nodes: Sequence[NodeInfo], slots: IntArray, checked: Sequence[tuple[str, int]]
) -> dict[int, tuple[list[str], int, list[int]]]:
    """Index among ``nodes`` -> (uids, number, summed requests of the checked resources) of the pods nominated
    there that the reference's first filter pass adds for ``pod``."""
    nominator = handle.nominator
    names = nominator.nominated_node_names()
    if not names:
        return {}
    snapshot = handle.snapshot()
    position = np.full(snapshot.table.capacity, -1, dtype=np.int64)
    position[slots] = np.arange(len(nodes), dtype=np.int64)
    found: dict[int, tuple[list[str], int, list[int]]] = {}
    for name in names:
        info = snapshot.get(name)
        if info is None:
            continue
        index = int(position[info.slot])
        if index < 0:
            continue
        pods = [
            other
            for other in nominator.nominated_pods_for_node(name)
            if other.uid != pod.uid and other.priority >= pod.priority
        ]
        if pods:
            amounts = [sum(other.request.get(resource) for other in pods) for resource, _ in checked]
            found[index] = ([other.uid for other in pods], len(pods), amounts)
    return found


def _reprieve(
    info: NodeInfo,
    priority: int,
    checked: Sequence[tuple[str, int]],
    nominated: tuple[int, Sequence[int]],
    split_by_pdb: SplitByPDB,
) -> tuple[list[PodInfo], int, Status | None]:
    """The reference's reprieve on a node the pod fits once every lower-priority pod is gone: put the pods back
    most important first, PDB-violating ones first, keeping each one the pod still fits beside (NodeResourcesFit
    alone decides here, module doc). ``nominated``: the number and summed requests of the nominated pods that
    count on this node."""
    potential = [other for other in info.pods.values() if other.priority < priority]
    potential.sort(key=importance_key)
    violating, non_violating = split_by_pdb(potential)
    allocatable = info.allocatable
    requested = info.requested
    nominated_pods, nominated_amounts = nominated
    # The pod fits while, for each resource it asks for, what the node's pods (and the nominated ones) request
    # stays within allocatable minus the pod's request (Filter's "request > allocatable - requested", turned
    # around) ...
    room = [
        allocatable.get(resource) - amount - more
        for (resource, amount), more in zip(checked, nominated_amounts, strict=True)
    ]
    used = [
        requested.get(resource) - sum(other.request.get(resource) for other in potential) for resource, _ in checked
    ]
    # ... and Filter's "Too many pods" (pods on the node + 1 > allowed) does not hold.
    max_pods = allocatable.allowed_pod_number - 1 - nominated_pods
    pods = len(info.pods) - len(potential)
    victims: list[PodInfo] = []
    violations = 0
    for group, violates in ((violating, 1), (non_violating, 0)):
        for candidate in group:
            amounts = [candidate.request.get(resource) for resource, _ in checked]
            pods += 1
            used = [have + more for have, more in zip(used, amounts, strict=True)]
            if pods > max_pods or any(have > limit for have, limit in zip(used, room, strict=True)):
                pods -= 1
                used = [have - more for have, more in zip(used, amounts, strict=True)]
                victims.append(candidate)
                violations += violates
    if violating and non_violating:
        # Reprieving went group by group; victims are reported most important first.
        victims.sort(key=importance_key)
    return victims, violations, None
