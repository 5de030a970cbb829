"""Where kube-oracle stops being kube-scheduler: the pod status updates its fake clientset never delivers.

Used by :mod:`.runner`. kube-oracle runs kube-scheduler's code against client-go's fake clientset, whose object
tracker keeps an updated object's resourceVersion. kube-scheduler skips a pending pod's update whose
resourceVersion did not change, so in kube-oracle its queue never sees the pod status updates kube-scheduler
itself writes (a real API server bumps the resourceVersion and they arrive):

- a nomination a pod's PostFilter set, moved or cleared: kube-scheduler reads the pod's next attempt from the
  informer's copy taken at its failure, before that attempt's own status patch, and the update that would refresh
  it is skipped; the attempt after a change evaluates the nomination from the attempt before (or none) first;
- the nominations of lower-priority pods a preemption clears on its node: they stay in the nominator.

This module finds, from kubesched's own attempts, the first scheduling cycle from which either can have
changed kube-oracle's answers (:func:`first_artifact`); the runner then reports the differences of pods
attempted from that cycle on apart from the mismatches (docs/reference/compatibility.md, "Where kube-oracle is
not kube-scheduler").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubesched.scheduler.results import SCHEDULED, AttemptRecord

NOMINATION_MOVED = "a pod's nomination changed between its attempts (kube-oracle's next attempt reads the older one)"
NOMINATIONS_CLEARED = "a preemption cleared lower-priority pods' nominations (kube-oracle keeps them)"


@dataclass
class AttemptLog:
    """Every attempt of a simulation, in order (an :class:`~kubesched.scheduler.results.AttemptObserver`)."""

    records: list[AttemptRecord] = field(default_factory=list)

    def on_attempt(self, record: AttemptRecord) -> None:
        self.records.append(record)


@dataclass(frozen=True)
class Artifact:
    cycle: int
    reason: str
    pod: str


def first_artifact(records: Sequence[AttemptRecord], initial: Mapping[str, str]) -> Artifact | None:
    """The earliest cycle from which kube-oracle may answer otherwise than kube-scheduler (module doc), or None.
    ``initial``: the nominations pods carry in the manifests ("namespace/name" -> node); a pod never attempted
    (held at PreEnqueue) is in no nominator."""
    priority = {record.pod.key: record.pod.priority for record in records}
    attempted = {record.pod.key for record in records if record.attempts}
    nominated = {key: node for key, node in initial.items() if node and key in attempted}
    changed_at: dict[str, int] = {}  # pod -> cycle of its attempt that changed its nomination
    found: Artifact | None = None

    def note(cycle: int, reason: str, pod: str) -> None:
        nonlocal found
        if found is None or cycle < found.cycle:
            found = Artifact(cycle, reason, pod)

    for record in sorted(records, key=lambda r: r.cycle):
        key = record.pod.key
        if record.attempts == 0:
            continue
        if key in changed_at:
            note(record.cycle, NOMINATION_MOVED, key)
            del changed_at[key]
        if record.result == SCHEDULED:
            nominated.pop(key, None)
            continue
        report = record.preemption
        if report is None:
            continue  # no PostFilter verdict on the nomination: it stays as it was
        before = nominated.get(key)
        if report.chosen:
            for other, node in nominated.items():
                if other != key and node == report.chosen and priority.get(other, 0) < record.pod.priority:
                    note(record.cycle + 1, NOMINATIONS_CLEARED, other)
            nominated[key] = report.chosen
        else:
            nominated.pop(key, None)
        if nominated.get(key) != before:
            changed_at[key] = record.cycle
    return found
