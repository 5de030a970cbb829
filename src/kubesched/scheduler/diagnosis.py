"""Why a pod did not fit: per-node statuses, the rejecting plugins, and kube-scheduler's message.

Used by the scheduling cycle (:mod:`kubesched.scheduler.schedule_one`) when no node fits.
``fit_error_message`` assembles the FailedScheduling text exactly like kube-scheduler v1.35's FitError:
``0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint(s). no new claims to
deallocate, preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.`` -- the
summary ends with a full stop, the PostFilter plugins' reasons follow it as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesched.framework.status import Status

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


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


def reasons_histogram(diagnosis: Diagnosis) -> str:
    counts: dict[str, int] = {}
    for status in diagnosis.node_to_status.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if diagnosis.absent_nodes_status is not None and diagnosis.absent_node_count:
        for reason in diagnosis.absent_nodes_status.reasons:
            counts[reason] = counts.get(reason, 0) + diagnosis.absent_node_count
    # Sorted as strings, as kube-scheduler does ("10 Insufficient cpu" before "2 Insufficient cpu").
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    if num_all_nodes == 0:
        # kube-scheduler does not build a FitError for an empty cluster: the error itself is the message.
        return NO_NODES_AVAILABLE
    message = f"0/{num_all_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        message += f" {diagnosis.pre_filter_msg}."
    else:
        histogram = reasons_histogram(diagnosis)
        if histogram:
            message += f" {histogram}."
    if diagnosis.post_filter_msg:
        # No full stop of its own: DefaultPreemption's text ends with one, DynamicResources' does not.
        message += f" {diagnosis.post_filter_msg}"
    return message
