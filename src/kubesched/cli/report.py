"""Turn simulation records into the ``simulate`` outputs: the JSON document and the people's table.

Called by ``kubesched simulate`` (:mod:`kubesched.cli.main`) and by tests that compare runs. The JSON keys are a
documented contract (docs/reference/simulate-output.md#json): more may be added, none removed. A pod of a cluster
profile (its nodes are member clusters) also has ``"cluster"``: the member it was placed on (its ``node``, the super
node, is the same name), or null; the table then has a CLUSTER column, and such a pod's NODE is "-".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

from kubesched.audit.records import rfc3339
from kubesched.framework.status import CODE_NAMES
from kubesched.scheduler.results import AttemptRecord
from kubesched.terminal_text import safe

if TYPE_CHECKING:
    from kubesched.backends.simulated.cluster import RecordedEvent


def record_to_json(
    record: AttemptRecord, preempted: Sequence[str] = (), cluster_profiles: Set[str] = frozenset()
) -> dict[str, Any]:
    """One pod's entry; ``preempted`` (the pods evicted for it, "namespace/name") is listed when not empty;
    a pod of one of ``cluster_profiles`` gets ``cluster``."""
    scores: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    if record.scored_nodes:
        per_plugin = {name: values.tolist() for name, values in record.plugin_scores.items()}
        total_values = record.totals.tolist() if record.totals is not None else []
        for index, node in enumerate(record.scored_nodes):
            scores[node] = {name: values[index] for name, values in per_plugin.items()}
            if total_values:
                totals[node] = total_values[index]
    entry: dict[str, Any] = {
        "namespace": record.pod.namespace,
        "name": record.pod.name,
        "profile": record.profile,
        "result": record.result,
        "node": record.node,
    }
    if record.profile in cluster_profiles:
        entry["cluster"] = record.node
    entry |= {
        "message": record.message,
        "attempts": record.attempts,
        "filter": {
            node: {"plugin": status.plugin, "code": CODE_NAMES[status.code], "reasons": list(status.reasons)}
            for node, status in record.node_to_status.items()
        },
        "scores": scores,
        "totals": totals,
    }
    if preempted:
        entry["preempted"] = list(preempted)
    status = record.pre_enqueue_status
    if status is not None:
        # What held a never-attempted pod back (for a gated pod, SchedulingGates and its gates): the message
        # above is then the pod's condition, which does not name them.
        entry["preEnqueue"] = {
            "plugin": status.plugin,
            "code": CODE_NAMES[status.code],
            "reasons": list(status.reasons),
        }
    return entry


def chosen_total(record: AttemptRecord) -> int | None:
    """The weighted sum of every score plugin for the node the pod was bound to (its entry in ``totals``);
    None when it was not scheduled, or was without scoring (one feasible node: kube-scheduler skips Score)."""
    if record.node is None or record.totals is None:
        return None
    try:
        index = list(record.scored_nodes).index(record.node)
    except ValueError:
        return None
    return int(record.totals[index])


def _event_key(event: RecordedEvent) -> tuple[str, ...]:
    return (
        event.uid,
        event.namespace,
        event.name,
        event.type,
        event.reason,
        event.action,
        event.message,
        event.reporting_controller,
    )


def events_to_json(events: Sequence[RecordedEvent]) -> list[dict[str, Any]]:
    """Every event in the order it was emitted, in events.k8s.io/v1's field names. A run of the same event
    repeated with nothing between (same pod, type, reason, action, controller and note: a retried pod that
    keeps failing alike) is one entry with ``count`` and ``lastObservedTime``, as the events API keeps a
    series; anything else in between starts a new entry, so the list still reads in emission order."""
    entries: list[dict[str, Any]] = []
    previous: tuple[str, ...] | None = None
    for event in events:
        key = _event_key(event)
        if key == previous:
            last = entries[-1]
            last["count"] = last.get("count", 1) + 1
            last["lastObservedTime"] = rfc3339(event.time)
            continue
        previous = key
        entries.append(
            {
                "eventTime": rfc3339(event.time),
                "type": event.type,
                "reason": event.reason,
                "action": event.action,
                "regarding": {"kind": event.kind, "namespace": event.namespace, "name": event.name},
                "note": event.message,
                "reportingController": event.reporting_controller,
            }
        )
    return entries


def report_json(
    records: list[AttemptRecord],
    preempted: Mapping[str, Sequence[str]] | None = None,
    events: Sequence[RecordedEvent] = (),
    cluster_profiles: Set[str] = frozenset(),
) -> dict[str, Any]:
    """``preempted``: preemptor uid -> the pods evicted for it (the simulated cluster's ``preempted``);
    ``events``: what the run emitted (the simulated cluster's ``events``), listed under ``events``;
    ``cluster_profiles``: the profiles whose pods are placed onto member clusters."""
    evicted = preempted or {}
    return {
        "pods": [record_to_json(record, evicted.get(record.pod.uid, ()), cluster_profiles) for record in records],
        "events": events_to_json(events),
    }


def report_table(records: list[AttemptRecord], cluster_profiles: Set[str] = frozenset()) -> str:
    """The people's table; a CLUSTER column joins it when some pod belongs to one of ``cluster_profiles``."""
    with_clusters = any(record.profile in cluster_profiles for record in records)
    header: tuple[str, ...] = ("POD", "PROFILE", "RESULT", "NODE", "SCORE", "ATTEMPTS", "REASON")
    if with_clusters:
        header = ("POD", "PROFILE", "RESULT", "NODE", "CLUSTER", "SCORE", "ATTEMPTS", "REASON")
    rows: list[tuple[str, ...]] = []
    for record in records:
        total = chosen_total(record)
        place = [record.node or "-"]
        if with_clusters:
            place = ["-", record.node or "-"] if record.profile in cluster_profiles else [record.node or "-", "-"]
        cells = (
            record.pod.key,
            record.profile,
            record.result,
            *place,
            "" if total is None else str(total),
            str(record.attempts),
            record.message,
        )
        rows.append(tuple(safe(cell) for cell in cells))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    lines = []
    for row in (header, *rows):
        padded = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    scheduled = sum(1 for record in records if record.result == "Scheduled")
    lines.append("")
    lines.append(f"{scheduled}/{len(records)} pods scheduled")
    return "\n".join(lines)
