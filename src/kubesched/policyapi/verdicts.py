"""Policy verdicts plugins leave in the CycleState for the audit trail.

A policy plugin (SecurityAuditFilter, SecurityAuditPermit, a multi-cluster policy) records what it
decided under :data:`POLICY_VERDICTS_KEY`: either a concrete, immutable :class:`PolicyVerdict`, or a
:class:`VerdictSource` that can produce verdicts for the targets it evaluated (a Filter plugin evaluates
many nodes, but only the chosen or the rejected ones matter to the audit record). When the scheduling
cycle ends, the scheduler *seals* the state (:func:`seal_verdicts`): every source is asked once, while
the cycle's snapshot is still the one it decided on, for the verdicts about the targets that matter, and
is replaced by those values. From then on the attempt's verdicts are plain values that nothing else can
change; the binding cycle appends concrete verdicts (Permit's). Plugins see only this module, not the
audit package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kubesched.framework.cycle_state import CycleState

POLICY_VERDICTS_KEY = "kubesched.io/policy-verdicts"

VERDICT_ALLOW = "allow"
VERDICT_DENY = "deny"
VERDICT_ERROR = "error"
VERDICT_EXEMPT = "exempt"  # not evaluated: an exempt namespace or pod, or an allowed break-glass


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    plugin: str
    stage: str  # "filter" | "permit" | "postbind"
    target: str  # node or cluster the verdict is about ("" when it covers the pod as a whole)
    allowed: bool
    reasons: tuple[str, ...] = ()
    engine: str = ""
    revision: str = ""  # the policy revision that answered
    decision_id: str | None = None
    input_digest: str = ""
    enforcement: str = "deny"  # deny | warn | dryrun
    skipped: bool = False  # the engine failed and failurePolicy Ignore let the pod through
    error: str = ""  # the engine could not decide
    exempt: str = ""  # why the pod was exempt, when it was
    note: str = ""  # what else the audit should know (a break-glass label refused in this namespace)

    @property
    def outcome(self) -> str:
        """``error`` when the engine could not decide (even if Ignore let the pod through), ``exempt`` when the pod
        was not evaluated, else allow/deny."""
        if self.error:
            return VERDICT_ERROR
        if self.exempt:
            return VERDICT_EXEMPT
        return VERDICT_ALLOW if self.allowed else VERDICT_DENY


@runtime_checkable
class VerdictSource(Protocol):
    def verdicts_for(self, targets: Sequence[str]) -> list[PolicyVerdict]:
        """Immutable verdicts about ``targets`` (node or cluster names) as this attempt decided them; a
        verdict about the pod as a whole (exempt, engine failure) has target ""."""
        ...


@dataclass(slots=True)
class _Verdicts:
    items: list[PolicyVerdict | VerdictSource] = field(default_factory=list)

    def clone(self) -> _Verdicts:
        return _Verdicts(list(self.items))


def add_verdict(state: CycleState, verdict: PolicyVerdict | VerdictSource) -> None:
    verdicts = state.get(POLICY_VERDICTS_KEY, _Verdicts)
    if verdicts is None:
        verdicts = _Verdicts()
        state.write(POLICY_VERDICTS_KEY, verdicts)
    verdicts.items.append(verdict)


def seal_verdicts(state: CycleState, targets: Sequence[str]) -> None:
    """Replace every source by its verdicts about ``targets``; called once when the scheduling cycle ends."""
    verdicts = state.get(POLICY_VERDICTS_KEY, _Verdicts)
    if verdicts is None:
        return
    sealed: list[PolicyVerdict | VerdictSource] = []
    for item in verdicts.items:
        if isinstance(item, PolicyVerdict):
            sealed.append(item)
        else:
            sealed.extend(item.verdicts_for(targets))
    verdicts.items = sealed


def verdicts_of(state: CycleState | None) -> tuple[PolicyVerdict, ...]:
    """The concrete verdicts recorded this attempt (sources not sealed yet are left out), without repeats."""
    if state is None:
        return ()
    verdicts = state.get(POLICY_VERDICTS_KEY, _Verdicts)
    if verdicts is None:
        return ()
    return tuple(dict.fromkeys(item for item in verdicts.items if isinstance(item, PolicyVerdict)))
