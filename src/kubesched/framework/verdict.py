"""Policy verdicts plugins leave in the CycleState for the audit trail.

A policy plugin (SecurityAuditFilter, SecurityAuditPermit, a multi-cluster policy) appends one
:class:`PolicyVerdict` per decision it made about the chosen target under :data:`POLICY_VERDICTS_KEY`;
the scheduler hands the cycle state to its observers with the attempt record, and the audit observer
copies the verdicts into the decision record. Plugins see only this module, not the audit package.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesched.framework.cycle_state import CycleState

POLICY_VERDICTS_KEY = "kubesched.io/policy-verdicts"


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    plugin: str
    stage: str  # "filter" | "permit" | "postbind"
    target: str  # node or cluster the verdict is about ("" when it covers the pod as a whole)
    allowed: bool
    reasons: tuple[str, ...] = ()
    engine: str = ""
    revision: str = ""
    decision_id: str | None = None
    input_digest: str = ""
    enforcement: str = "deny"  # deny | warn | dryrun
    skipped: bool = False  # the engine failed and failurePolicy Ignore let the pod through
    error: str = ""
    exempt: str = ""  # why the pod was exempt, when it was


@dataclass(slots=True)
class _Verdicts:
    items: list[PolicyVerdict] = field(default_factory=list)

    def clone(self) -> _Verdicts:
        return _Verdicts(list(self.items))


def add_verdict(state: CycleState, verdict: PolicyVerdict) -> None:
    verdicts = state.get(POLICY_VERDICTS_KEY, _Verdicts)
    if verdicts is None:
        verdicts = _Verdicts()
        state.write(POLICY_VERDICTS_KEY, verdicts)
    verdicts.items.append(verdict)


def verdicts_of(state: CycleState | None) -> list[PolicyVerdict]:
    if state is None:
        return []
    verdicts = state.get(POLICY_VERDICTS_KEY, _Verdicts)
    return list(verdicts.items) if verdicts is not None else []
