"""What the framework's runners return to the scheduler: Filter's statuses over a batch, PreFilter's merged
result, Score's per-plugin and total scores.

Who uses it: :mod:`kubesched.framework.runtime.framework` (which makes them) and the scheduler's node search
(:mod:`kubesched.scheduler.algorithm`) and ``kubesched explain`` (which read them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesched.framework.node_table import IntArray
from kubesched.framework.status import Status
from kubesched.framework.types import PreFilterResult


@dataclass(slots=True)
class FilterOutcome:
    """Batch filter result over candidates: ``status_ids[i] == 0`` passes, else ``statuses[id-1]``."""

    status_ids: IntArray
    statuses: list[Status]
    error: Status | None = None

    def status_of(self, index: int) -> Status | None:
        status_id = int(self.status_ids[index])
        return None if status_id == 0 else self.statuses[status_id - 1]


@dataclass(slots=True)
class PreFilterOutcome:
    """Merged node subset (None = all), the cycle's PreFilter status, who rejected, who narrowed."""

    result: PreFilterResult | None = None
    status: Status | None = None
    rejected_by: set[str] = field(default_factory=set)
    narrowed_by: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ScoreOutcome:
    """Normalized (pre-weight) scores per plugin and the weighted totals, aligned with the feasible nodes;
    ``raw`` holds each plugin's scores before NormalizeScore (the same array as ``per_plugin`` for a plugin
    without one), for ``kubesched explain``."""

    per_plugin: dict[str, IntArray]
    totals: IntArray
    raw: dict[str, IntArray] = field(default_factory=dict)
