"""PodTopologySpread's counting over the whole snapshot, as arrays: matching pods per domain in a few numpy passes.

PreFilter and PreScore count, for every node of the cluster, the pods matching each constraint's selector and
add them to the node's domain. Walking 5000 NodeInfos and their pods per incoming pod made that loop ~90 % of a
spreading workload's cycle. Here the per-node numbers come from a :class:`SlotValueCache` (matching pods per
(namespace, selector); whether the pod's node affinity or tolerations admit the node), recomputed only for the
nodes that changed since the last cycle, and a domain's sum is one ``bincount`` over the topology key's class
column. Domains come out in the order the per-node loop meets them, so the resulting state, critical paths
included, is the reference's exactly.

Who calls it: :class:`~kubesched.plugins.podtopologyspread.plugin.PodTopologySpread`, when the nodes it is
asked to count are the snapshot's own list; its per-node loop stays the reference, held equal by property
tests (``tests/unit/plugins/test_podtopologyspread_counting.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from kubesched.framework.node_table import BatchInfos, BoolArray, IntArray, NodeTable
from kubesched.framework.slot_values import SlotValueCache
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo
from kubesched.plugins.helper.taints import find_untolerated_do_not_schedule_taint
from kubesched.plugins.podtopologyspread.args import LABEL_HOSTNAME
from kubesched.plugins.podtopologyspread.common import (
    HONOR,
    Constraint,
    NodeInclusion,
    SpreadSelector,
    count_matching_pods,
    topology_column,
)


class SpreadCounter:
    """Per-domain matching-pod counts over a snapshot; one per plugin instance, kept across cycles."""

    __slots__ = ("_present", "_values")

    def __init__(self) -> None:
        self._values = SlotValueCache()
        # topology key -> (classes seen, whether each class has the key): class ids are append-only
        self._present: dict[str, tuple[int, BoolArray]] = {}

    # ---- per-slot inputs -------------------------------------------------------------------------------

    def matching_pods(self, table: NodeTable, selector: SpreadSelector, namespace: str) -> IntArray:
        """Pods of ``namespace`` matching ``selector`` on each slot (``count_matching_pods``)."""

        def count(info: NodeInfo) -> int:
            return count_matching_pods(info.pods, selector, namespace)

        return self._values.read(table, ("matching-pods", namespace, selector), count)

    def _inclusion_mask(
        self, table: NodeTable, slots: IntArray, inclusion: NodeInclusion, constraint: Constraint
    ) -> BoolArray | None:
        """Which of ``slots`` the constraint's node-inclusion policies admit; None when all are."""
        mask: BoolArray | None = None
        affinity = inclusion.affinity
        if constraint.node_affinity_policy == HONOR and (affinity.node_selector or affinity.affinity is not None):

            def admits(info: NodeInfo) -> int:
                return int(affinity.matches(info.labels, info.name))

            mask = self._values.read(table, ("affinity", affinity), admits)[slots] != 0
        tolerations = inclusion.tolerations
        if constraint.node_taints_policy == HONOR:

            def tolerated(info: NodeInfo) -> int:
                return int(find_untolerated_do_not_schedule_taint(info.taints, tolerations) is None)

            taints_ok = self._values.read(table, ("tolerated", tolerations), tolerated)[slots] != 0
            mask = taints_ok if mask is None else mask & taints_ok
        return mask

    def _domain_ids(self, table: NodeTable, slots: IntArray, key: str) -> tuple[IntArray, list[str | None], BoolArray]:
        """(each slot's class id for label ``key``, the class values, whether each slot has the key)."""
        spec = topology_column(key)
        column = table.class_column(spec.name, spec.key_fn)
        values = cast(list[str | None], column.values)
        seen = self._present.get(key)
        if seen is None or seen[0] != len(values):
            present = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
            self._present[key] = (len(values), present)
        else:
            present = seen[1]
        ids = column.ids[slots]
        has = present[ids] if len(values) else np.zeros(len(slots), dtype=np.bool_)
        return ids, values, has

    # ---- PreFilter -------------------------------------------------------------------------------------

    def hard_counts(
        self, snapshot: Snapshot, constraints: Sequence[Constraint], namespace: str, inclusion: NodeInclusion
    ) -> list[dict[str, int]]:
        """Per constraint, matching pods per domain over every node that has all topology keys and that the
        constraint's policies admit (PreFilter's ``tp_value_to_match_num``), domains in node order."""
        table, slots = snapshot.table, snapshot.slots
        domains = [self._domain_ids(table, slots, c.topology_key) for c in constraints]
        all_keys = np.ones(len(slots), dtype=np.bool_)
        for _, _, has in domains:
            all_keys &= has
        result: list[dict[str, int]] = []
        for constraint, (ids, values, _) in zip(constraints, domains, strict=True):
            mask = self._inclusion_mask(table, slots, inclusion, constraint)
            mask = all_keys if mask is None else all_keys & mask
            counted_ids = ids[mask]
            if constraint.selector.counts_pods:
                counted = self.matching_pods(table, constraint.selector, namespace)[slots][mask]
                sums = _sum_by_class(counted_ids, counted, len(values))
            else:
                sums = np.zeros(len(values), dtype=np.int64)
            result.append({_str(values[k]): int(sums[k]) for k in _first_seen(counted_ids)})
        return result

    # ---- PreScore --------------------------------------------------------------------------------------

    def open_domains(
        self, table: NodeTable, slots: IntArray, constraints: Sequence[Constraint], require_all: bool
    ) -> tuple[list[dict[str, int]], BoolArray]:
        """PreScore's first pass over the filtered nodes ``slots``: per constraint the domains they open (count
        0, "" for a node lacking the key, none for hostname constraints, which Score counts per node), and which
        of them are ignored for lacking a topology key (only with ``require_all``)."""
        domains = [self._domain_ids(table, slots, c.topology_key) for c in constraints]
        keep = np.ones(len(slots), dtype=np.bool_)
        if require_all:
            for _, _, has in domains:
                keep &= has
        opened: list[dict[str, int]] = []
        for constraint, (ids, values, _) in zip(constraints, domains, strict=True):
            if constraint.topology_key == LABEL_HOSTNAME:
                opened.append({})
            else:
                opened.append({_str(values[k]): 0 for k in _first_seen(ids[keep])})
        return opened, ~keep

    def soft_counts(
        self,
        snapshot: Snapshot,
        constraint: Constraint,
        domains: dict[str, int],
        namespace: str,
        inclusion: NodeInclusion,
        required_keys: Sequence[str],
    ) -> None:
        """Add to ``domains`` (the filtered nodes' domains, value "" for nodes lacking the key) the matching
        pods of every node whose domain is among them, that has ``required_keys`` and that the constraint's
        policies admit."""
        if not domains or not constraint.selector.counts_pods:
            return
        table, slots = snapshot.table, snapshot.slots
        ids, values, _ = self._domain_ids(table, slots, constraint.topology_key)
        mask = self._inclusion_mask(table, slots, inclusion, constraint)
        for key in required_keys:
            has = self._domain_ids(table, slots, key)[2]
            mask = has if mask is None else mask & has
        wanted = np.fromiter((_str(v) in domains for v in values), dtype=np.bool_, count=len(values))
        if not len(values):
            return
        keep = wanted[ids] if mask is None else wanted[ids] & mask
        counted = self.matching_pods(table, constraint.selector, namespace)[slots][keep]
        sums = _sum_by_class(ids[keep], counted, len(values))
        for k in np.flatnonzero(sums).tolist():
            domains[_str(values[k])] += int(sums[k])


def snapshot_slots(table: NodeTable, infos: Sequence[NodeInfo]) -> IntArray | None:
    """The table slots of ``infos`` when every one is the table's own NodeInfo for its slot; else None."""
    if isinstance(infos, BatchInfos) and infos.batch.table is table:
        return infos.batch.slots  # a batch of the table is made of its own NodeInfos
    slots = np.fromiter((info.slot for info in infos), dtype=np.int64, count=len(infos))
    if slots.shape[0] and int(slots.max()) >= table.capacity:
        return None
    held = table.info_column[slots].tolist()
    if any(mine is not theirs for mine, theirs in zip(held, infos, strict=True)):
        return None
    return slots


def _str(value: str | None) -> str:
    return "" if value is None else value


def _sum_by_class(ids: IntArray, counts: IntArray, size: int) -> IntArray:
    # Float sums of pod counts are exact far beyond any cluster's size.
    return np.bincount(ids, weights=counts, minlength=size).astype(np.int64)


def _first_seen(ids: IntArray) -> list[int]:
    """The distinct class ids in order of first occurrence."""
    if not ids.shape[0]:
        return []
    distinct, first = np.unique(ids, return_index=True)
    order: npt.NDArray[np.intp] = np.argsort(first, kind="stable")
    return cast(list[int], distinct[order].tolist())
