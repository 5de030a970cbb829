"""Why a pod did not fit: per-node statuses, the rejecting plugins, and kube-scheduler's message.

``fit_error_message`` assembles the FailedScheduling text exactly like kube-scheduler's FitError:
``0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}.``, then
PostFilter's message as it is (``preemption: 0/5 nodes are available: 5 No preemption victims found for
incoming pod.``).
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
    message = f"0/{num_all_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        message += f" {diagnosis.pre_filter_msg}."
    else:
        message += f" {reasons_histogram(diagnosis)}."
    if diagnosis.post_filter_msg:
        # Appended as it is: PostFilter messages carry their own punctuation (DefaultPreemption's ends with
        # its own FitError's period), so kube-scheduler adds no period of its own here.
        message += f" {diagnosis.post_filter_msg}"
    return message
