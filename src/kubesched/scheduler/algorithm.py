"""The scheduling algorithm of one cycle: PreFilter, the node search, scoring and host selection.

Called by the scheduling cycle (:mod:`kubesched.scheduler.schedule_one`) for each popped pod, with the
cycle's snapshot. The node search follows kube-scheduler: evaluate the nominated node first, then walk
nodes round-robin from the scheduler's start index until ``num_feasible_nodes_to_find`` nodes pass every
Filter. Filters run in batches (numpy) over chunks of candidates; nothing a Filter does has side effects,
so evaluating a little past the point where enough nodes were found gives exactly the sequential answer.
Before each chunk (and before the nominated node) the framework's prefetchers are awaited, so a policy
engine decides the nodes the search is about to visit off the event loop, and Filter only reads.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.instrumentation import FILTER
from kubesched.framework.runtime.outcomes import PreFilterOutcome
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import CODE_NAMES, Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.scheduler.diagnosis import NO_NODES_AVAILABLE, Diagnosis

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
_NO_SLOTS: IntArray = np.empty(0, dtype=np.int64)
# Called once or twice per cycle on a few hundred entries: the ufunc reduction and np.count_nonzero skip the
# Python-level wrappers of ndarray.max and ndarray.any, a cost per call as large as the work itself.
_highest = np.maximum.reduce
_count_nonzero = np.count_nonzero


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes to look for (kube-scheduler's adaptive percentageOfNodesToScore)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = 50 - num_all_nodes // 125
        if percentage < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            percentage = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num_nodes = num_all_nodes * percentage // 100
    return max(num_nodes, MIN_FEASIBLE_NODES_TO_FIND)


def narrowed_slots(snapshot: Snapshot, names: frozenset[str]) -> IntArray:
    """The slots of the snapshot's nodes named in a PreFilterResult, in search order.

    O(len(names)), not O(nodes): a DaemonSet pod names one node among 15000, and walking every node to find
    it would be most of its cycle. Looked up by name, then put in the order the node list has them (the
    candidates' order decides the round-robin walk and which tied node wins), so the answer is the one a
    walk over ``snapshot.node_infos`` keeping the named nodes gives (:func:`narrowed_slots_reference`).
    """
    infos = snapshot.node_infos
    position_of_slot = snapshot.position_of_slot
    by_name = snapshot.by_name
    found: list[tuple[int, int]] = []
    for name in names:
        info = by_name.get(name)
        if info is None or info.slot >= len(position_of_slot):
            continue
        position = int(position_of_slot[info.slot])
        # by_name and the ordered list hold the same NodeInfos; checking costs nothing and keeps the answer
        # that of the walk even if they ever disagreed.
        if position < len(infos) and infos[position] is info:
            found.append((position, info.slot))
    found.sort()
    return np.fromiter((slot for _, slot in found), dtype=np.int64, count=len(found))


def wrapped_slice(slots: IntArray, first: int, count: int) -> IntArray:
    """``count`` (at most ``len(slots)``) slots from position ``first`` on, wrapping round to the start: the
    round-robin walk's next stretch, as ``slots[(first + np.arange(count)) % len(slots)]`` would give it, taken
    as one or two copied slices instead of four array operations."""
    n = len(slots)
    first %= n
    end = first + count
    if end <= n:
        return slots[first:end].copy()
    return np.concatenate((slots[first:], slots[: end - n]))


def _walked(slots: IntArray, start: int, count: int, slot: int) -> bool:
    """Whether ``slot`` is among the ``count`` slots a round-robin walk of ``slots`` from ``start`` visits."""
    where = np.flatnonzero(slots == slot)
    return bool(len(where)) and (int(where[0]) - start) % len(slots) < count


def narrowed_slots_reference(snapshot: Snapshot, names: frozenset[str]) -> IntArray:
    """The reference for :func:`narrowed_slots`: walk the node list, keep the named nodes."""
    kept = [info.slot for info in snapshot.node_infos if info.name in names]
    return np.asarray(kept, dtype=np.int64)


class SchedulingError(Exception):
    """The cycle failed with an Error status (not a fit problem)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class FitError(Exception):
    """No node fits; carries the diagnosis for the FailedScheduling message and requeueing."""

    def __init__(self, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__("no feasible node")
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis


@dataclass(slots=True)
class ScheduleResult:
    node: str
    evaluated_nodes: int
    feasible_nodes: int
    scored_nodes: Sequence[str] = ()
    plugin_scores: dict[str, IntArray] = field(default_factory=dict)
    totals: IntArray | None = None
    node_to_status: Mapping[str, Status] = field(default_factory=dict)
    raw_scores: dict[str, IntArray] = field(default_factory=dict)


TieBreaker = Callable[[PodInfo, Sequence[str]], str | None]
"""Chooses the node for a pod among the nodes sharing the highest total (in the order they were scored); None,
or a name not among them, leaves the choice to the random source. The differential tests
(``tests/differential``) replay kube-scheduler's own random choices with it."""


class ScheduleAlgorithm:
    """Stateful across cycles only through the round-robin start index and the random source."""

    def __init__(self, global_percentage: int, rng: random.Random, tie_breaker: TieBreaker | None = None) -> None:
        self.global_percentage = global_percentage
        self.rng = rng
        self.tie_breaker = tie_breaker
        self.next_start_node_index = 0

    async def schedule_pod(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominated_nodes: frozenset[str],
    ) -> ScheduleResult:
        """``nominated_nodes``: nodes with nominated pods, filtered two-pass
        (:meth:`Framework.run_filter_plugins_with_nominated_pods`)."""
        if len(snapshot) == 0:
            diagnosis = Diagnosis(pre_filter_msg=NO_NODES_AVAILABLE)
            raise FitError(0, diagnosis)
        feasible, diagnosis, evaluated = await self._find_nodes_that_fit(fwk, state, pod, snapshot, nominated_nodes)
        if not len(feasible):
            raise FitError(len(snapshot), diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible.info(0).name, evaluated, 1, node_to_status=diagnosis.node_to_status)
        status = fwk.run_pre_score(state, pod, feasible.lazy_infos())
        if status is not None:
            raise SchedulingError(status)
        outcome = fwk.run_score(state, pod, feasible)
        if isinstance(outcome, Status):
            raise SchedulingError(outcome)
        totals = outcome.totals
        if not fwk.score_plugins:
            totals = np.ones(len(feasible), dtype=np.int64)
        chosen = self._select_host(totals, pod, feasible)
        return ScheduleResult(
            node=feasible.info(chosen).name,
            evaluated_nodes=evaluated,
            feasible_nodes=len(feasible),
            scored_nodes=feasible.lazy_names(),
            plugin_scores=outcome.per_plugin,
            totals=totals,
            node_to_status=diagnosis.node_to_status,
            raw_scores=outcome.raw,
        )

    def _select_host(self, totals: IntArray, pod: PodInfo, feasible: NodeBatch) -> int:
        """Index of a highest total; ties broken uniformly at random (kube-scheduler's reservoir), or by the
        tie breaker when there is one."""
        # The ufunc reduction and ndarray.nonzero directly: ndarray.max and np.flatnonzero wrap them in Python.
        best = _highest(totals)
        tied = (totals == best).nonzero()[0]
        if len(tied) == 1:
            return int(tied[0])
        if self.tie_breaker is not None:
            names = [feasible.info(int(index)).name for index in tied]
            choice = self.tie_breaker(pod, names)
            if choice in names:
                return int(tied[names.index(choice)])
        return int(tied[self.rng.randrange(len(tied))])

    async def _find_nodes_that_fit(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominated_nodes: frozenset[str],
    ) -> tuple[NodeBatch, Diagnosis, int]:
        all_nodes = snapshot.node_infos
        diagnosis = Diagnosis()
        pre = fwk.run_pre_filter(state, pod, all_nodes)
        # As upstream, the plugins that narrowed the nodes count among the pod's rejectors: only their
        # events can bring back a node they left out.
        diagnosis.unschedulable_plugins |= pre.rejected_by | set(pre.narrowed_by)
        if pre.status is not None:
            if not pre.status.is_rejected():
                raise SchedulingError(pre.status)
            diagnosis.pre_filter_msg = pre.status.message
            diagnosis.pre_filter_status = pre.status
            if pre.status.code is Code.PENDING:
                diagnosis.pending_plugins.add(pre.status.plugin)
            for info in all_nodes:
                diagnosis.node_to_status[info.name] = pre.status
            return NodeBatch(snapshot.table, _NO_SLOTS), diagnosis, 0
        metrics = fwk.metrics
        if metrics is None:
            return await self._find_nodes_that_pass_filters(fwk, state, pod, snapshot, nominated_nodes, pre, diagnosis)
        # scheduler_framework_extension_point_duration_seconds{extension_point="Filter"}: once per cycle, the
        # whole node search (prefetches included), Success unless it ends in an Error (as upstream).
        started = time.perf_counter()
        status = CODE_NAMES[Code.ERROR]
        try:
            found = await self._find_nodes_that_pass_filters(fwk, state, pod, snapshot, nominated_nodes, pre, diagnosis)
            status = CODE_NAMES[Code.SUCCESS]
            return found
        finally:
            metrics.observe_extension_point(FILTER, status, fwk.profile_name, time.perf_counter() - started)

    async def _find_nodes_that_pass_filters(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominated_nodes: frozenset[str],
        pre: PreFilterOutcome,
        diagnosis: Diagnosis,
    ) -> tuple[NodeBatch, Diagnosis, int]:
        all_nodes = snapshot.node_infos
        nominated = pod.pod.status.nominated_node_name
        # The nominated node when it failed: evaluated first whatever the PreFilter result says, and its status
        # kept in the diagnosis even where the search below does not reach it (upstream's evaluateNominatedNode).
        nominated_rejected: NodeInfo | None = None
        if nominated:
            nominated_info = snapshot.get(nominated)
            if nominated_info is not None:
                status = await self._filter_one(fwk, state, pod, snapshot, nominated_info, nominated_nodes)
                if status is None:
                    return NodeBatch(snapshot.table, np.asarray([nominated_info.slot], dtype=np.int64)), diagnosis, 1
                if status.code is Code.ERROR:
                    raise SchedulingError(status)
                diagnosis.node_to_status[nominated] = status
                if status.code is Code.PENDING:
                    diagnosis.pending_plugins.add(status.plugin)
                else:
                    diagnosis.unschedulable_plugins.add(status.plugin)
                nominated_rejected = nominated_info

        if pre.result is not None and pre.result.node_names is not None:
            candidate_slots = narrowed_slots(snapshot, pre.result.node_names)
            # Upstream names the set its diagnosis shares with the PreFilter result: the narrowing plugins and,
            # by then, whichever plugin rejected the nominated node.
            named = set(pre.narrowed_by)
            if nominated_rejected is not None:
                named.add(diagnosis.node_to_status[nominated_rejected.name].plugin)
            diagnosis.absent_nodes_status = Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(named))}]",
            )
            # A nominated node left out has its own status: it is not absent from the diagnosis.
            outside = nominated_rejected is not None and nominated_rejected.name not in pre.result.node_names
            diagnosis.absent_node_count = len(all_nodes) - len(candidate_slots) - int(outside)
        else:
            candidate_slots = snapshot.slots
        n = len(candidate_slots)
        if n == 0:
            return NodeBatch(snapshot.table, _NO_SLOTS), diagnosis, 0
        to_find = num_feasible_nodes_to_find(
            fwk.percentage_of_nodes_to_score
            if fwk.percentage_of_nodes_to_score is not None
            else self.global_percentage,
            n,
        )
        if not fwk.score_plugins:
            to_find = 1
        start = self.next_start_node_index % n
        table = snapshot.table

        if not fwk.filter_plugins:
            feasible_slots = wrapped_slice(candidate_slots, start, min(to_find, n))
            self.next_start_node_index = (start + len(feasible_slots)) % len(all_nodes)
            return NodeBatch(table, feasible_slots), diagnosis, len(feasible_slots)

        nominated_slots: IntArray | None = None
        if nominated_nodes:
            found = (snapshot.get(name) for name in nominated_nodes)
            nominated_slots = np.fromiter((info.slot for info in found if info is not None), dtype=np.int64)
        feasible: list[IntArray] = []  # the passing slots of each chunk, in search order
        feasible_count = 0
        processed = 0
        position = 0
        chunk_size = 0
        while position < n and feasible_count < to_find:
            # All-batch filters cost about the same for 5000 nodes as for 500: take everything at once.
            # A little more than is still needed (most nodes usually pass), doubling when many fail: few
            # chunks, and filters that call out (a policy engine) are asked about few nodes past the cut.
            needed = to_find - feasible_count
            chunk_size = max(needed + needed // 4 + 32, 2 * chunk_size)
            chunk = min(n - position, chunk_size)
            chunk_slots = wrapped_slice(candidate_slots, start + position, chunk)
            batch = NodeBatch(table, chunk_slots)
            if fwk.prefetchers:
                failure = await fwk.run_prefetch(state, pod, batch)
                if failure is not None:
                    raise SchedulingError(failure)
            outcome = fwk.run_filter_batch(state, pod, batch)
            if outcome.error is not None:
                raise SchedulingError(outcome.error)
            status_ids = outcome.status_ids
            if nominated_slots is not None:
                status_ids = self._recheck_nominated(
                    fwk, state, pod, batch, outcome.statuses, status_ids, nominated_slots
                )
            needed = to_find - feasible_count
            if not _count_nonzero(status_ids):  # the usual chunk: every node passed
                cut = min(needed, chunk)
                feasible.append(chunk_slots[:cut])
                feasible_count += cut
                processed += cut
                position += chunk
                continue
            # A chunk with rejections (a policy that denies some nodes has one every cycle): ndarray.nonzero
            # directly (np.flatnonzero is a Python wrapper around it), the failing positions without a comparison.
            passing = (status_ids == 0).nonzero()[0]
            if len(passing) >= needed:
                cut = int(passing[needed - 1]) + 1
                passing = passing[:needed]
            else:
                cut = chunk
            feasible.append(chunk_slots[passing])
            feasible_count += len(passing)
            failing = status_ids[:cut].nonzero()[0]
            if len(failing):
                statuses = outcome.statuses
                failing_ids = status_ids[failing]
                diagnosis.node_to_status.add_rejected(table.name_column[chunk_slots[failing]], failing_ids, statuses)
                # The distinct status ids present; with one status (one plugin's one reason) that is the only one.
                present = [1] if len(statuses) == 1 else np.bincount(failing_ids).nonzero()[0].tolist()
                for status_id in present:
                    status = statuses[status_id - 1]
                    if status.code is Code.PENDING:
                        diagnosis.pending_plugins.add(status.plugin)
                    else:
                        diagnosis.unschedulable_plugins.add(status.plugin)
            processed += cut
            position += chunk
        if nominated_rejected is not None and not _walked(candidate_slots, start, processed, nominated_rejected.slot):
            # Upstream moves the start on by every node with a status, the nominated one included.
            processed_with_nominated = processed + 1
        else:
            processed_with_nominated = processed
        self.next_start_node_index = (start + processed_with_nominated) % len(all_nodes)
        feasible_slots = feasible[0] if len(feasible) == 1 else np.concatenate(feasible) if feasible else _NO_SLOTS
        return NodeBatch(table, feasible_slots), diagnosis, processed

    async def _filter_one(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        info: NodeInfo,
        nominated_nodes: frozenset[str],
    ) -> Status | None:
        if fwk.prefetchers:
            one = NodeBatch(snapshot.table, np.asarray([info.slot], dtype=np.int64))
            failure = await fwk.run_prefetch(state, pod, one)
            if failure is not None:
                return failure
        if info.name in nominated_nodes:
            return fwk.run_filter_plugins_with_nominated_pods(state, pod, info)
        return fwk.run_filter(state, pod, info)

    def _recheck_nominated(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        batch: NodeBatch,
        statuses: list[Status],
        status_ids: IntArray,
        nominated_slots: IntArray,
    ) -> IntArray:
        """Nodes with nominated pods to add are filtered again with those pods added: the first pass of the
        two-pass filter, whose rejection is the node's status whatever the second pass (as the node is, what
        the batch did) says. Nodes that passed the batch go in columns when the plugins allow it, else node by
        node; nodes it rejected go node by node through both passes (a nominated pod can add reasons, or make an
        earlier plugin reject the node)."""
        rows = np.flatnonzero(np.isin(batch.slots, nominated_slots))
        if not len(rows):
            return status_ids
        infos = batch.table.infos
        checked: list[int] = []
        added: list[list[PodInfo]] = []
        rejected: list[int] = []
        for row, slot in zip(rows.tolist(), batch.slots[rows].tolist(), strict=True):
            info = infos[slot]
            others = fwk.nominated_pods_to_add(pod, info.name) if info is not None else []
            if not others:
                continue
            if status_ids[row]:
                rejected.append(row)
            else:
                checked.append(row)
                added.append(others)
        if not checked and not rejected:
            return status_ids
        verdicts: list[Status | None] | None = []
        if checked:
            checked_slots = batch.slots[checked]
            verdicts = fwk.run_filter_batch_with_added_pods(state, pod, NodeBatch(batch.table, checked_slots), added)
            if verdicts is None:
                verdicts = [
                    fwk.run_filter_plugins_with_nominated_pods(
                        state, pod, cast(NodeInfo, infos[slot]), passes_as_is=True
                    )
                    for slot in checked_slots.tolist()
                ]
        rows_checked = checked + rejected
        verdicts = [
            *(verdicts or []),
            *(
                fwk.run_filter_plugins_with_nominated_pods(state, pod, cast(NodeInfo, infos[slot]))
                for slot in batch.slots[rejected].tolist()
            ),
        ]
        status_ids = status_ids.copy()
        for row, status in zip(rows_checked, verdicts, strict=True):
            if status is None:
                continue
            if status.code is Code.ERROR:
                raise SchedulingError(status)
            statuses.append(status)
            status_ids[row] = len(statuses)
        return status_ids
