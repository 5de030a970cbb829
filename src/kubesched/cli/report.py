"""Turn simulation records into the ``simulate`` outputs: the JSON document and the people's table.

The JSON keys are a documented contract (README): more may be added, none removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.status import CODE_NAMES
from kubesched.scheduler.results import AttemptRecord
from kubesched.terminal_text import safe


def record_to_json(record: AttemptRecord, preempted: Sequence[str] = ()) -> dict[str, Any]:
    """One pod's entry; ``preempted`` (the pods evicted for it, "namespace/name") is listed when not empty."""
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
    return entry


def report_json(records: list[AttemptRecord], preempted: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """``preempted``: preemptor uid -> the pods evicted for it (the simulated cluster's ``preempted``)."""
    evicted = preempted or {}
    return {"pods": [record_to_json(record, evicted.get(record.pod.uid, ())) for record in records]}


def report_table(records: list[AttemptRecord]) -> str:
    header = ("POD", "PROFILE", "RESULT", "NODE", "ATTEMPTS", "REASON")
    rows = [
        tuple(
            safe(cell)
            for cell in (
                record.pod.key,
                record.profile,
                record.result,
                record.node or "-",
                str(record.attempts),
                record.message,
            )
        )
        for record in records
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    scheduled = sum(1 for record in records if record.result == "Scheduled")
    lines.append("")
    lines.append(f"{scheduled}/{len(records)} pods scheduled")
    return "\n".join(lines)
