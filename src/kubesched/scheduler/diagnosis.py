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

from dataclasses import dataclass, field

from kubesched.framework.status import Status

NO_NODES_AVAILABLE = "no nodes available to schedule pods"
NO_CLUSTERS_AVAILABLE = "no clusters available to schedule pods"

TARGET_NODES = "nodes"
TARGET_CLUSTERS = "clusters"
TARGETS = (TARGET_NODES, TARGET_CLUSTERS)
_NODE_PREFIX = "node(s) "
_CLUSTER_PREFIX = "cluster(s) "


@dataclass(slots=True)
class Diagnosis:
    node_to_status: dict[str, Status] = field(default_factory=dict)
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
