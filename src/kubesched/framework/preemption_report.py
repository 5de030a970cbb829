"""What a preemption plugin found, left in the CycleState so that the attempt record can show it.

DefaultPreemption (PostFilter) writes one :class:`PreemptionReport` under :data:`PREEMPTION_REPORT_KEY`
after its dry run: every candidate node with its victims, the node it chose, and the status of each
node that was not a candidate. The scheduling cycle copies it into the
:class:`~kubesched.scheduler.results.AttemptRecord` (``kubesched explain`` and the HTML report read it
there). Plugins see only this module, never the scheduler. Values only: names, never live objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubesched.framework.cycle_state import CycleState

PREEMPTION_REPORT_KEY = "kubesched.io/preemption-report"


@dataclass(frozen=True, slots=True)
class PreemptionCandidate:
    node: str
    victims: tuple[str, ...]  # "namespace/name", most important first
    num_pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class PreemptionReport:
    plugin: str
    candidates: tuple[PreemptionCandidate, ...] = ()
    chosen: str | None = None  # the nominated node; None when no candidate was chosen
    # Why each node the dry run looked at (or skipped) is not a candidate: node -> message.
    not_candidates: Mapping[str, str] = field(default_factory=dict)

    def clone(self) -> PreemptionReport:
        return self


def record_preemption(state: CycleState, report: PreemptionReport) -> None:
    state.write(PREEMPTION_REPORT_KEY, report)


def preemption_report_of(state: CycleState | None) -> PreemptionReport | None:
    if state is None:
        return None
    return state.get(PREEMPTION_REPORT_KEY, PreemptionReport)
