"""What one scheduling attempt decided, for observers (the simulate report, audit, benchmarks).

The scheduler hands an :class:`AttemptRecord` to its observer at the end of every attempt: when a
scheduling cycle fails, and when a binding cycle ends. A record holds only values: the policy verdicts
are the immutable ones the attempt's plugins gave, resolved for the nodes that matter (the chosen node,
or the rejected ones) when the scheduling cycle ended, so nothing a later attempt does can change what
this record says. Arrays are passed as they are; an observer that needs JSON converts them itself.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kubesched.clusterapi.contract import ClusterSnapshot
from kubesched.framework.node_table import IntArray
from kubesched.framework.preemption_report import PreemptionReport
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.policyapi.verdicts import PolicyVerdict

SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
ERROR = "Error"
# A pod whose spec.schedulingGates are not empty, held at PreEnqueue and never attempted. The API server, not
# kube-scheduler, gives such a pod this condition when it is created (pkg/registry/core/pod/strategy.go,
# applySchedulingGatedCondition; the reason is k8s.io/api's PodReasonSchedulingGated), and it is what
# ``kubectl get pod`` shows as the pod's STATUS until the gates are removed and the pod is scheduled.
SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


class Phase(enum.StrEnum):
    """The phases of an attempt, in the order they happen; a record holds the time each one ended."""

    QUEUED = "queued"  # the pod entered the queue for this attempt
    FILTERED = "filtered"  # Filter (and Score) chose a node
    RESERVED = "reserved"  # Reserve plugins passed
    PERMITTED = "permitted"  # Permit allowed (after waiting, if a plugin asked to)
    BOUND = "bound"  # Bind succeeded


PHASE_ORDER: tuple[Phase, ...] = tuple(Phase)


@dataclass(slots=True)
class AttemptRecord:
    pod: PodInfo
    profile: str
    result: str
    attempts: int
    cycle: int = 0
    # The node the scheduling cycle chose (also when Reserve, Permit or binding then failed on it).
    chosen_node: str | None = None
    # The node the pod is bound to: chosen_node when result is Scheduled, else None.
    node: str | None = None
    message: str = ""
    node_to_status: Mapping[str, Status] = field(default_factory=dict)
    # What the nodes are: "node", or "cluster" for a scheduler whose nodes are member clusters.
    target_kind: str = "node"
    scored_nodes: Sequence[str] = ()
    plugin_scores: Mapping[str, IntArray] = field(default_factory=dict)
    totals: IntArray | None = None
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    queued_at: float | None = None
    # When this attempt's scheduling cycle began (the pod was popped); None for records made outside one.
    started_at: float | None = None
    finished_at: float = 0.0
    phases: Mapping[Phase, float] = field(default_factory=dict)
    verdicts: tuple[PolicyVerdict, ...] = ()
    # For ``kubesched explain``: each score plugin's scores before NormalizeScore (aligned with scored_nodes),
    # the plugins PreFilter/PreScore told to skip, the status that rejected the pod before any node was
    # looked at (PreEnqueue: never attempted; PreFilter), and what a preemption plugin found.
    raw_scores: Mapping[str, IntArray] = field(default_factory=dict)
    skipped_filter_plugins: frozenset[str] = frozenset()
    skipped_score_plugins: frozenset[str] = frozenset()
    pre_enqueue_status: Status | None = None
    pre_filter_status: Status | None = None
    preemption: PreemptionReport | None = None
    # The member clusters' state as the cycle saw it (a cluster profile's attempts only).
    cluster_snapshot: ClusterSnapshot | None = None


class AttemptObserver(Protocol):
    def on_attempt(self, record: AttemptRecord) -> None: ...
