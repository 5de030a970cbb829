"""Turn the scheduler's attempt records into audit records and hand them to the sinks.

The scheduler calls its observer at the end of every attempt (a failed scheduling cycle, or the end of
a binding cycle). :class:`AuditObserver` is such an observer: it builds one :class:`AuditRecord` per
attempt (scheduled, unschedulable, error: every denial is recorded) and writes it to each of its sinks.
:class:`FanOut` lets several observers watch one scheduler (``kubesched simulate`` keeps its report
collector and adds the audit observer).

Decision ids: :func:`random_ids` (uuid4, the default, as OPA's decision ids are) for live scheduling;
:func:`seeded_ids` for simulations, where a seeded run is otherwise reproducible to the byte (virtual
time, seeded tie-breaking): ids are uuid5 values of (salt, seed, sequence number, pod uid).
``kubesched simulate`` salts them with the head hash of the log it appends to, so runs appended to one
log never share ids; the pod uid keeps the ids of different workloads apart.

A sink whose ``write`` raises (it is closed) costs that sink's record, counted as dropped with reason
``write_error`` and logged; it never stops scheduling: by the time the record is written the decision
has been made and, for a scheduled pod, the binding done. Sinks persist in writers of their own and count
what those lose (a full disk) themselves, on the observer's metrics, which it shares with them.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence

from kubesched import __version__
from kubesched.audit.metrics import REASON_WRITE_ERROR, AuditMetrics, default_metrics
from kubesched.audit.records import (
    TARGET_KINDS,
    TARGET_NODE,
    AuditRecord,
    ClusterObservation,
    OwnerRef,
    PodRef,
    ScoredNode,
    Target,
    rfc3339,
)
from kubesched.audit.sinks.base import AuditSink, SharesMetrics
from kubesched.policyapi.verdicts import PolicyVerdict
from kubesched.scheduler.results import PHASE_ORDER, AttemptObserver, AttemptRecord

log = logging.getLogger(__name__)

# kube-scheduler logs the best three nodes of each decision (numberOfHighestScoredNodesToReport).
TOP_SCORES = 3
# A pod rejected everywhere can have one verdict per node; a record keeps this many (denials first).
MAX_VERDICTS = 16

# Gives the decision id of an attempt's record.
DecisionIds = Callable[[AttemptRecord], str]

_SEEDED_NAMESPACE = uuid.UUID("0c3f4a8e-5b7d-5e0a-9a51-6b7562657363")


def random_ids() -> DecisionIds:
    return lambda attempt: str(uuid.uuid4())


def seeded_ids(seed: int, salt: str = "") -> DecisionIds:
    counter = itertools.count(1)
    return lambda attempt: str(uuid.uuid5(_SEEDED_NAMESPACE, f"{salt}/{seed}/{next(counter)}/{attempt.pod.uid}"))


def default_labels() -> dict[str, str]:
    """OPA's decision logs label the instance that decided; ours names the scheduler's version."""
    return {"version": __version__}


def build_record(
    attempt: AttemptRecord,
    *,
    decision_id: str,
    target_kind: str = TARGET_NODE,
    labels: Mapping[str, str] | None = None,
    top: int = TOP_SCORES,
    max_verdicts: int = MAX_VERDICTS,
) -> AuditRecord:
    """The audit record of one attempt."""
    target_name = chosen_target(attempt)
    verdicts, omitted = _verdicts(attempt, target_name, max_verdicts)
    return AuditRecord(
        decision_id=decision_id,
        timestamp=rfc3339(attempt.finished_at),
        pod=_pod_ref(attempt),
        profile=attempt.profile,
        result=attempt.result,
        attempts=attempt.attempts,
        target=Target(target_kind, target_name) if target_name is not None else None,
        message=attempt.message,
        phases=_phases(attempt),
        verdicts=verdicts,
        verdicts_omitted=omitted,
        top_scores=top_scores(attempt, top),
        labels=dict(labels) if labels is not None else default_labels(),
        clusters=cluster_observations(attempt),
    )


def cluster_observations(attempt: AttemptRecord) -> tuple[ClusterObservation, ...]:
    """Every member in the cycle's cluster snapshot (by name), with its state's age and its Filter verdict;
    empty for an attempt without one (a node profile's)."""
    snapshot = attempt.cluster_snapshot
    if snapshot is None:
        return ()
    observations = []
    for name in sorted(snapshot.clusters):
        state = snapshot.clusters[name]
        age = snapshot.age(name) or 0.0
        status = attempt.node_to_status.get(name)
        observations.append(
            ClusterObservation(
                name=name,
                observed_at=rfc3339(state.observed_at) if state.observed_at is not None else None,
                age_ms=round(age * 1000),
                rejected_by=status.plugin if status is not None else "",
                reasons=tuple(status.reasons) if status is not None else (),
            )
        )
    return tuple(observations)


def chosen_target(attempt: AttemptRecord) -> str | None:
    """The node (or cluster) the attempt chose: the bound node, or the one Reserve/Permit/Bind refused."""
    return attempt.node or attempt.chosen_node


def top_scores(attempt: AttemptRecord, top: int = TOP_SCORES) -> tuple[ScoredNode, ...]:
    """The ``top`` best totals with each plugin's score. The chosen node comes first among equal totals
    (host selection breaks ties at random, so it is always listed), then name order, so records are
    reproducible."""
    if attempt.totals is None or not attempt.scored_nodes:
        return ()
    totals = [int(value) for value in attempt.totals.tolist()]
    per_plugin = {name: values.tolist() for name, values in attempt.plugin_scores.items()}
    chosen = attempt.chosen_node
    names = attempt.scored_nodes
    order = sorted(range(len(totals)), key=lambda i: (-totals[i], names[i] != chosen, names[i]))[:top]
    return tuple(
        ScoredNode(
            node=attempt.scored_nodes[i],
            total=totals[i],
            scores={name: int(values[i]) for name, values in sorted(per_plugin.items())},
        )
        for i in order
    )


def _pod_ref(attempt: AttemptRecord) -> PodRef:
    metadata = attempt.pod.pod.metadata
    owner = metadata.controller_ref() or (metadata.owner_references[0] if metadata.owner_references else None)
    return PodRef(
        namespace=metadata.namespace,
        name=metadata.name,
        uid=metadata.uid,
        owner=OwnerRef(owner.kind, owner.name) if owner is not None else None,
    )


def _phases(attempt: AttemptRecord) -> dict[str, str]:
    return {str(phase): rfc3339(attempt.phases[phase]) for phase in PHASE_ORDER if phase in attempt.phases}


def _verdicts(attempt: AttemptRecord, target: str | None, limit: int) -> tuple[tuple[PolicyVerdict, ...], int]:
    """The attempt's sealed verdicts: about the chosen target (and the pod as a whole) when there is one,
    else about each rejected node, so the record can answer "why not there"; denials first."""
    if target is not None:
        found = [verdict for verdict in attempt.verdicts if verdict.target in ("", target)]
    else:
        found = list(attempt.verdicts)
    unique = list(dict.fromkeys(found))
    # Errors and denials first: they are what a failure's record is read for.
    unique.sort(key=lambda verdict: (not verdict.error, verdict.allowed))
    return tuple(unique[:limit]), max(len(unique) - limit, 0)


class AuditObserver:
    """An AttemptObserver that writes an audit record for every attempt to each of its sinks."""

    def __init__(
        self,
        *sinks: AuditSink,
        target_kind: str | None = None,
        ids: DecisionIds | None = None,
        labels: Mapping[str, str] | None = None,
        metrics: AuditMetrics | None = None,
    ) -> None:
        if not sinks:
            raise ValueError("an audit observer needs at least one sink")
        if target_kind is not None and target_kind not in TARGET_KINDS:
            raise ValueError(f"target_kind must be one of {', '.join(TARGET_KINDS)}, not {target_kind!r}")
        self.sinks = sinks
        self.target_kind = target_kind
        self.ids = ids if ids is not None else random_ids()
        self.labels = dict(labels) if labels is not None else default_labels()
        self.metrics = metrics if metrics is not None else default_metrics()
        for sink in sinks:
            # Drops a sink's writer counts after write returned belong with the observer's own counts.
            if isinstance(sink, SharesMetrics):
                sink.share_metrics(self.metrics)
        self.records = 0
        self.write_errors = 0

    def on_attempt(self, record: AttemptRecord) -> None:
        # Without a kind of its own the observer names the record's: node, or cluster in the cluster plane.
        kind = self.target_kind if self.target_kind is not None else record.target_kind
        audit = build_record(record, decision_id=self.ids(record), target_kind=kind, labels=self.labels)
        self.records += 1
        for sink in self.sinks:
            try:
                sink.write(audit)
            except Exception:
                self.write_errors += 1
                self.metrics.drop(sink.name, REASON_WRITE_ERROR)
                log.exception("audit sink %s could not write the record of %s", sink.name, audit.pod.key)
                continue
            self.metrics.handed(sink.name)

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()

    async def close(self) -> None:
        for sink in self.sinks:
            await sink.close()


class FanOut:
    """Hands every attempt record to each observer in turn; one observer's exception does not starve
    the others (the first one is re-raised once all have seen the record)."""

    def __init__(self, *observers: AttemptObserver) -> None:
        self.observers: Sequence[AttemptObserver] = observers

    def on_attempt(self, record: AttemptRecord) -> None:
        failure: Exception | None = None
        for observer in self.observers:
            try:
                observer.on_attempt(record)
            except Exception as exc:
                if failure is None:
                    failure = exc
        if failure is not None:
            raise failure
