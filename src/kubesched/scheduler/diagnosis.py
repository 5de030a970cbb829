"""Why a pod did not fit: per-node statuses, the rejecting plugins, and kube-scheduler's message.

Used by the scheduling cycle (:mod:`kubesched.scheduler.schedule_one`) when no node fits.
``fit_error_message`` assembles the FailedScheduling text exactly like kube-scheduler v1.35's FitError:
``0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint(s). no new claims to
deallocate, preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.`` -- the
summary ends with a full stop, the PostFilter plugins' reasons follow it as they are.

A scheduler whose nodes are member clusters (the cluster plane, :mod:`kubesched.federation`) says
``clusters`` instead: ``0/5 clusters are available: 1 cluster(s) had untolerated taint(s), 1 cluster(s) were
not ready.`` -- the upstream plugins' ``node(s) ...`` reasons then read ``cluster(s) ...`` in the message (the
per-node statuses keep the plugins' own strings), as Karmada words its FitError.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

from kubesched.framework.node_table import IntArray, ObjectArray
from kubesched.framework.status import Status

NO_NODES_AVAILABLE = "no nodes available to schedule pods"
NO_CLUSTERS_AVAILABLE = "no clusters available to schedule pods"

TARGET_NODES = "nodes"
TARGET_CLUSTERS = "clusters"
TARGETS = (TARGET_NODES, TARGET_CLUSTERS)
_NODE_PREFIX = "node(s) "
_CLUSTER_PREFIX = "cluster(s) "


class RejectedNodes(MutableMapping[str, Status]):
    """Per rejected node, the status that rejected it (kube-scheduler's NodeToStatus), as a dict reads it, in
    the order the node search rejected them.

    The node search adds each chunk's rejections as it has them, as arrays (the nodes' names, their status ids
    into the chunk's statuses): most attempts find a node, and then nobody reads the rejections. So they become
    entries only when the map is first read or written."""

    __slots__ = ("_entries", "_pending")

    def __init__(self, entries: Mapping[str, Status] | None = None) -> None:
        self._entries: dict[str, Status] = dict(entries) if entries is not None else {}
        self._pending: list[tuple[ObjectArray, IntArray, Sequence[Status]]] = []

    def add_rejected(self, names: ObjectArray, status_ids: IntArray, statuses: Sequence[Status]) -> None:
        """Node ``names[i]`` was rejected with ``statuses[status_ids[i] - 1]`` (the arrays are the caller's
        copies, kept as they are)."""
        self._pending.append((names, status_ids, statuses))

    def _settled(self) -> dict[str, Status]:
        if self._pending:
            pending, self._pending = self._pending, []
            for names, status_ids, statuses in pending:
                self._entries.update(zip(names.tolist(), [statuses[i] for i in (status_ids - 1).tolist()], strict=True))
        return self._entries

    def __getitem__(self, name: str) -> Status:
        return self._settled()[name]

    def __setitem__(self, name: str, status: Status) -> None:
        self._settled()[name] = status

    def __delitem__(self, name: str) -> None:
        del self._settled()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settled())

    def __len__(self) -> int:
        return len(self._settled())

    def __repr__(self) -> str:
        return f"RejectedNodes({self._settled()!r})"


@dataclass(slots=True)
class Diagnosis:
    node_to_status: RejectedNodes = field(default_factory=RejectedNodes)
    absent_nodes_status: Status | None = None
    absent_node_count: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    pre_filter_status: Status | None = None  # the PreFilter rejection, with its plugin
    post_filter_msg: str = ""


def _as_cluster_reason(reason: str) -> str:
    return _CLUSTER_PREFIX + reason.removeprefix(_NODE_PREFIX) if reason.startswith(_NODE_PREFIX) else reason


def reasons_histogram(diagnosis: Diagnosis, targets: str = TARGET_NODES) -> str:
    counts: dict[str, int] = {}
    for status in diagnosis.node_to_status.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if diagnosis.absent_nodes_status is not None and diagnosis.absent_node_count:
        for reason in diagnosis.absent_nodes_status.reasons:
            counts[reason] = counts.get(reason, 0) + diagnosis.absent_node_count
    if targets == TARGET_CLUSTERS:
        relabelled: dict[str, int] = {}
        for reason, count in counts.items():
            key = _as_cluster_reason(reason)
            relabelled[key] = relabelled.get(key, 0) + count
        counts = relabelled
    # Sorted as strings, as kube-scheduler does ("10 Insufficient cpu" before "2 Insufficient cpu").
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis, targets: str = TARGET_NODES) -> str:
    """``targets``: :data:`TARGET_NODES`, or :data:`TARGET_CLUSTERS` for a scheduler placing onto clusters."""
    if num_all_nodes == 0:
        # kube-scheduler does not build a FitError for an empty cluster: the error itself is the message.
        return NO_CLUSTERS_AVAILABLE if targets == TARGET_CLUSTERS else NO_NODES_AVAILABLE
    message = f"0/{num_all_nodes} {targets} are available:"
    if diagnosis.pre_filter_msg:
        message += f" {diagnosis.pre_filter_msg}."
    else:
        histogram = reasons_histogram(diagnosis, targets)
        if histogram:
            message += f" {histogram}."
    if diagnosis.post_filter_msg:
        # No full stop of its own: DefaultPreemption's text ends with one, DynamicResources' does not.
        message += f" {diagnosis.post_filter_msg}"
    return message
