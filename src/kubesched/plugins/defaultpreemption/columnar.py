"""DefaultPreemption's dry run in columns, for the cycles where only NodeResourcesFit can change its answer.

Who calls it: :meth:`~kubesched.plugins.defaultpreemption.default_preemption.DefaultPreemption.dry_run_preemption`,
which hands :func:`columnar_evaluator`'s node evaluation to the search every dry run shares
(:func:`~kubesched.plugins.defaultpreemption.candidates.search_candidates`). The per-node path (a copy of the
node and of the cycle state per node, the pods removed and put back through the framework) stays the
reference; a property test holds the two equal on random clusters.

Why it is exact. The dry run asks, of a node with some lower-priority pods removed, "does the pod pass every
Filter, with the nominated pods and without?". This path is used only when every Filter plugin the cycle runs
is NodeResourcesFit or one whose answer reads the node alone, never its pods (a
:class:`~kubesched.framework.interface.NodeOnlyFilter` that says so),
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
from operator import attrgetter

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle, NodeOnlyFilter, PodNominator
from kubesched.framework.node_table import IntArray, NodeTable
from kubesched.framework.slot_values import SlotFunction, SlotValueCache
from kubesched.framework.status import Status
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, NodeInfo, PodInfo, Resource
from kubesched.plugins import names
from kubesched.plugins.defaultpreemption.candidates import EvaluateNode, importance_key
from kubesched.plugins.noderesources.fit import PRE_FILTER_STATE_KEY, Fit, FitRequest, fit_columns, resource_columns

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
        if fit_seen or not (isinstance(plugin, NodeOnlyFilter) and plugin.filter_ignores_node_pods()):
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
    nominated_cache: NominatedRequests,
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
    resources = tuple(resource for resource, _ in checked)
    getters = [_amount_getter(resource) for resource in resources]
    extra = _nominated_requests(handle, pod, slots, resources, getters, nominated_cache)
    if extra:
        at = np.fromiter(extra, dtype=np.int64, count=len(extra))
        pod_count[at] += np.fromiter((len(uids) for uids, _ in extra.values()), dtype=np.int64, count=len(extra))
        for k, column in enumerate(used):
            column[at] += np.fromiter((amounts[k] for _, amounts in extra.values()), dtype=np.int64, count=len(extra))

    # NodeResourcesFit's verdict on every potential node with all its lower-priority pods gone.
    checks = [
        (amount, alloc[slots], column, reason)
        for (_, amount, alloc, _, reason), column in zip(columns, used, strict=True)
    ]
    verdict = fit_columns(pod_count, table.alloc_pods[slots], checks)
    codes: list[int] = verdict.codes.tolist() if verdict is not None else [0] * len(nodes)
    fit_statuses = [status.with_plugin(fit_name) for status in verdict.statuses] if verdict is not None else []
    lower_counts: list[int] = lower_count.tolist()
    no_extra: tuple[tuple[str, ...], Sequence[int]] = ((), [0] * len(checked))
    room = [(amount, getter) for (_, amount), getter in zip(checked, getters, strict=True)]

    def evaluate(index: int) -> tuple[list[PodInfo], int, Status | None]:
        info = nodes[index]
        if node_to_status[info.name].plugin != fit_name:
            return reference(index)
        nominated = extra.get(index, no_extra)
        if nominated[0] and any(uid in info.pods for uid in nominated[0]):
            # Adding a pod already on the node adds its requests but not a pod: left to the reference.
            return reference(index)
        if lower_counts[index] == 0:
            return [], 0, no_victims
        code = codes[index]
        if code:
            return [], 0, fit_statuses[code - 1]
        return _reprieve(info, priority, room, nominated, split_by_pdb)

    return evaluate


AmountGetter = Callable[[Resource], int]


def _amount_getter(resource: str) -> AmountGetter:
    """``Resource.get(resource)`` without its name tests, for the loops that read one amount of many pods."""
    if resource == CPU:
        return attrgetter("milli_cpu")
    if resource == MEMORY:
        return attrgetter("memory")
    if resource == EPHEMERAL_STORAGE:
        return attrgetter("ephemeral_storage")

    def scalar(amounts: Resource) -> int:
        return amounts.scalar.get(resource, 0)

    return scalar


NominatedEntry = tuple[tuple[str, ...], list[int]]
"""The uids of a node's nominated pods that count, and their summed requests per resource read."""


class NominatedRequests:
    """Per node with nominated pods, those of priority at least a given one and what they request, kept across
    cycles and recomputed for a node only when its nominated pods change (the nominator's node stamps)."""

    __slots__ = ("_entries", "_key")

    def __init__(self) -> None:
        self._key: tuple[int, tuple[str, ...]] | None = None
        self._entries: dict[str, tuple[int, NominatedEntry]] = {}

    def read(
        self, nominator: PodNominator, priority: int, resources: tuple[str, ...], getters: Sequence[AmountGetter]
    ) -> dict[str, NominatedEntry]:
        """Node name -> its entry, for the nodes with at least one nominated pod of priority ≥ ``priority``;
        ``getters`` read ``resources``."""
        key = (priority, resources)
        if key != self._key:
            self._key = key
            self._entries = {}
        entries = self._entries
        generations = nominator.node_generations()
        found: dict[str, NominatedEntry] = {}
        for name, generation in generations.items():
            cached = entries.get(name)
            if cached is None or cached[0] != generation:
                cached = entries[name] = (generation, _nominated_entry(nominator, name, priority, "", getters))
            if cached[1][0]:
                found[name] = cached[1]
        if len(entries) > len(generations):
            self._entries = {name: entry for name, entry in entries.items() if name in generations}
        return found


def _nominated_entry(
    nominator: PodNominator, name: str, priority: int, exclude: str, getters: Sequence[AmountGetter]
) -> NominatedEntry:
    pods = [
        other
        for other in nominator.nominated_pods_for_node(name)
        if other.uid != exclude and other.priority >= priority
    ]
    return tuple(other.uid for other in pods), [sum(getter(other.request) for other in pods) for getter in getters]


def _nominated_requests(
    handle: Handle,
    pod: PodInfo,
    slots: IntArray,
    resources: tuple[str, ...],
    getters: Sequence[AmountGetter],
    cache: NominatedRequests,
) -> dict[int, NominatedEntry]:
    """Index among the nodes of ``slots`` -> the entry of the pods nominated there that the reference's first
    filter pass adds for ``pod`` (priority at least its own, not itself)."""
    nominator = handle.nominator
    entries = cache.read(nominator, pod.priority, resources, getters)
    if not entries:
        return {}
    snapshot = handle.snapshot()
    position = np.full(snapshot.table.capacity, -1, dtype=np.int64)
    position[slots] = np.arange(slots.shape[0], dtype=np.int64)
    positions: list[int] = position.tolist()
    by_name = snapshot.by_name
    uid = pod.uid
    found: dict[int, NominatedEntry] = {}
    for name, entry in entries.items():
        info = by_name.get(name)
        if info is None:
            continue
        index = positions[info.slot]
        if index < 0:
            continue
        if uid in entry[0]:
            # The pod itself is nominated here (an earlier preemption of its own): it does not count.
            entry = _nominated_entry(nominator, name, pod.priority, uid, getters)
            if not entry[0]:
                continue
        found[index] = entry
    return found


def _reprieve(
    info: NodeInfo,
    priority: int,
    checked: Sequence[tuple[int, AmountGetter]],
    nominated: tuple[tuple[str, ...], Sequence[int]],
    split_by_pdb: SplitByPDB,
) -> tuple[list[PodInfo], int, Status | None]:
    """The reference's reprieve on a node the pod fits once every lower-priority pod is gone: put the pods back
    most important first, PDB-violating ones first, keeping each one the pod still fits beside (NodeResourcesFit
    alone decides here, module doc). ``checked``: the pod's request of each resource Filter compares, and how
    to read that resource; ``nominated``: the uids and summed requests of the nominated pods that count here."""
    potential = [other for other in info.pods.values() if other.priority < priority]
    potential.sort(key=importance_key)
    violating, non_violating = split_by_pdb(potential)
    allocatable = info.allocatable
    requested = info.requested
    nominated_uids, nominated_amounts = nominated
    # The pod fits while, for each resource it asks for, what the node's pods (and the nominated ones) request
    # stays within allocatable minus the pod's request (Filter's "request > allocatable - requested", turned
    # around) ...
    room = [get(allocatable) - amount - more for (amount, get), more in zip(checked, nominated_amounts, strict=True)]
    used = [get(requested) - sum(get(other.request) for other in potential) for _, get in checked]
    # ... and Filter's "Too many pods" (pods on the node + 1 > allowed) does not hold.
    max_pods = allocatable.allowed_pod_number - 1 - len(nominated_uids)
    pods = len(info.pods) - len(potential)
    victims: list[PodInfo] = []
    violations = 0
    for group, violates in ((violating, 1), (non_violating, 0)):
        for candidate in group:
            request = candidate.request
            amounts = [get(request) for _, get in checked]
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
