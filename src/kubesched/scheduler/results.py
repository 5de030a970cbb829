"""What one scheduling attempt decided, for observers (the simulate report, audit, benchmarks).

The scheduler hands an :class:`AttemptRecord` to its observer at the end of every attempt: when a
scheduling cycle fails, and when a binding cycle ends. Arrays are passed as they are; an observer that
needs JSON converts them itself, so an observer that ignores details costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import IntArray
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo

SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
ERROR = "Error"


@dataclass(slots=True)
class AttemptRecord:
    pod: PodInfo
    profile: str
    result: str
    attempts: int
    cycle: int = 0
    node: str | None = None
    message: str = ""
    node_to_status: dict[str, Status] = field(default_factory=dict)
    scored_nodes: Sequence[str] = ()
    plugin_scores: dict[str, IntArray] = field(default_factory=dict)
    totals: IntArray | None = None
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    queued_at: float | None = None
    finished_at: float = 0.0
    # When each phase of the attempt ended (clock time): filtered, scored, reserved, permitted, bound.
    phases: dict[str, float] = field(default_factory=dict)
    # The attempt's cycle state, for observers that read what plugins recorded (policy verdicts).
    state: CycleState | None = None


class AttemptObserver(Protocol):
    def on_attempt(self, record: AttemptRecord) -> None: ...
