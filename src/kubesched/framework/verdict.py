"""Policy verdicts plugins leave in the CycleState for the audit trail.

A policy plugin (SecurityAuditFilter, SecurityAuditPermit, a multi-cluster policy) records what it
decided under :data:`POLICY_VERDICTS_KEY`: either a concrete :class:`PolicyVerdict`, or a
:class:`VerdictSource` that can produce the verdict for any target it evaluated (a Filter plugin
evaluates every node but only the chosen one matters to the audit record). The scheduler hands the
cycle state to its observers with the attempt record, and the audit observer asks for the verdicts
about the chosen node (or the rejected ones). Plugins see only this module, not the audit package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class VerdictSource(Protocol):
    def verdict_for(self, target: str) -> PolicyVerdict | None:
        """The verdict about ``target`` (a node or cluster name), if this source decided it."""
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


def verdicts_of(state: CycleState | None, target: str | None = None) -> list[PolicyVerdict]:
    """Concrete verdicts recorded this cycle, plus, with ``target``, each source's verdict about it."""
    if state is None:
        return []
    verdicts = state.get(POLICY_VERDICTS_KEY, _Verdicts)
    if verdicts is None:
        return []
    found: list[PolicyVerdict] = []
    for item in verdicts.items:
        if isinstance(item, PolicyVerdict):
            if target is None or item.target in ("", target):
                found.append(item)
        elif target is not None:
            verdict = item.verdict_for(target)
            if verdict is not None:
                found.append(verdict)
    return found
