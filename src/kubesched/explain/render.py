"""A :class:`~kubesched.explain.model.PodExplanation` as JSON (a stable, documented shape) and as text.

Called by ``kubesched explain``. The JSON document (``schema: kubesched.io/explain/v1``; keys may be added, none
removed or renamed) is documented in docs/reference/simulate-output.md#explain. The text form prints the same facts
as aligned tables, with colour only on a terminal (and never when ``NO_COLOR`` is set).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.explain.model import (
    CHOSEN,
    NODE_REJECTED,
    NOT_RUN,
    PASSED,
    REJECTED,
    SKIPPED,
    AttemptExplanation,
    NodeExplanation,
    PodExplanation,
    StatusView,
)
from kubesched.framework.preemption_report import PreemptionReport

SCHEMA = "kubesched.io/explain/v1"


def _status(view: StatusView | None) -> dict[str, Any] | None:
    if view is None:
        return None
    return {"plugin": view.plugin, "code": view.code, "reasons": list(view.reasons)}


def _preemption(report: PreemptionReport | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "plugin": report.plugin,
        "chosen": report.chosen,
        "candidates": [
            {"node": c.node, "victims": list(c.victims), "pdbViolations": c.num_pdb_violations}
            for c in report.candidates
        ],
        "notCandidates": dict(sorted(report.not_candidates.items())),
    }


def _node_json(node: NodeExplanation) -> dict[str, Any]:
    return {
        "name": node.name,
        "outcome": node.outcome,
        "reason": node.reason,
        "filter": [
            {"plugin": v.plugin, "verdict": v.verdict, "code": v.code, "reasons": list(v.reasons)} for v in node.filters
        ],
        "laterRejection": _status(node.later_rejection),
        "scores": [
            {"plugin": s.plugin, "raw": s.raw, "normalized": s.normalized, "weight": s.weight, "weighted": s.weighted}
            for s in node.scores
        ],
        "total": node.total,
    }


def _attempt_json(attempt: AttemptExplanation) -> dict[str, Any]:
    selection = attempt.selection
    return {
        "attempt": attempt.attempt,
        "result": attempt.result,
        "message": attempt.message,
        "chosenNode": attempt.chosen_node,
        "node": attempt.node,
        "preEnqueue": _status(attempt.pre_enqueue),
        "preFilter": _status(attempt.pre_filter),
        "skipped": {"filter": list(attempt.skipped_filter), "score": list(attempt.skipped_score)},
        "evaluatedNodes": attempt.evaluated_nodes,
        "feasibleNodes": attempt.feasible_nodes,
        "nodes": [_node_json(node) for node in attempt.nodes],
        "selection": {
            "rule": selection.rule,
            "chosen": selection.chosen,
            "highestTotal": selection.highest_total,
            "tied": list(selection.tied),
            "explanation": selection.explanation,
        },
        "preemption": _preemption(attempt.preemption),
    }


def explanation_json(explanation: PodExplanation) -> dict[str, Any]:
    last = explanation.last
    return {
        "schema": SCHEMA,
        "pod": {"namespace": explanation.namespace, "name": explanation.name, "uid": explanation.uid},
        "profile": explanation.profile,
        "result": last.result if last is not None else ("Bound" if explanation.bound_in_manifests else None),
        "node": last.node if last is not None else explanation.bound_in_manifests,
        "message": last.message if last is not None else "",
        "boundInManifests": explanation.bound_in_manifests,
        "preempted": list(explanation.preempted),
        "filterPlugins": list(explanation.filter_plugins),
        "scorePlugins": [{"name": name, "weight": weight} for name, weight in explanation.score_plugins],
        "attempts": [_attempt_json(attempt) for attempt in explanation.attempts],
    } | _target_json(explanation)


def _target_json(explanation: PodExplanation) -> dict[str, Any]:
    if explanation.target != "cluster":
        return {"target": explanation.target}
    last = explanation.last
    return {"target": explanation.target, "cluster": last.node if last is not None else explanation.bound_in_manifests}


# ---- text ---------------------------------------------------------------------------------------

_COLOURS = {PASSED: "32", REJECTED: "31", SKIPPED: "33", CHOSEN: "1;32", NODE_REJECTED: "31"}
_CELL = {PASSED: "passed", REJECTED: "REJECTED", NOT_RUN: "-", SKIPPED: "skipped"}


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, colour: bool = False, indent: str = "  ") -> str:
    """Columns padded to their widest cell, two spaces apart; the last column is not padded. With
    ``colour``, a cell whose text is a verdict is coloured after padding, so alignment holds."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = []
        for i, cell in enumerate(row):
            padded = cell if i == len(row) - 1 else cell.ljust(widths[i])
            code = _COLOURS.get(_verdict_of(cell)) if colour and row is not header else None
            cells.append(f"\x1b[{code}m{padded}\x1b[0m" if code else padded)
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)


def _verdict_of(cell: str) -> str:
    for verdict, text in _CELL.items():
        if cell == text:
            return verdict
    return cell


def explanation_text(explanation: PodExplanation, *, colour: bool = False) -> str:
    out: list[str] = []
    last = explanation.last
    if explanation.bound_in_manifests is not None:
        out.append(
            f"Pod {explanation.key}: already bound to {explanation.bound_in_manifests} in the manifests "
            "(spec.nodeName); the simulation did not schedule it."
        )
        return "\n".join(out)
    assert last is not None
    outcome = f"{last.result} on {last.node}" if last.node else last.result
    plural = "s" if len(explanation.attempts) != 1 else ""
    out.append(
        f"Pod {explanation.key} (profile {explanation.profile}): {outcome}, "
        f"{len(explanation.attempts)} attempt{plural} shown"
    )
    if explanation.preempted:
        out.append(f"Preempted for it: {', '.join(explanation.preempted)}")
    for attempt in explanation.attempts:
        out.append("")
        out.extend(_attempt_text(explanation, attempt, colour))
    return "\n".join(out)


def _attempt_text(explanation: PodExplanation, attempt: AttemptExplanation, colour: bool) -> list[str]:
    out: list[str] = []
    head = f"Attempt {attempt.attempt}: {attempt.result}" if attempt.attempt else "Never attempted"
    if attempt.node:
        head += f" on {attempt.node}"
    out.append(head)
    if attempt.message:
        out.append(f"  Message: {attempt.message}")
    if attempt.pre_enqueue is not None:
        out.append(f"  PreEnqueue: {attempt.pre_enqueue.plugin} holds the pod back: {attempt.pre_enqueue.message}")
        out.append("  No PreFilter, Filter or Score plugin ran.")
        return out
    if attempt.pre_filter is not None:
        out.append(
            f"  PreFilter: {attempt.pre_filter.plugin} rejected the pod ({attempt.pre_filter.code}): "
            f"{attempt.pre_filter.message}"
        )
        out.append("  No Filter plugin ran on any node.")
        if attempt.preemption is not None:
            out.extend(_preemption_text(attempt.preemption))
        return out
    skipped = ", ".join(attempt.skipped_filter) or "none"
    out.append(f"  PreFilter: passed (Filter plugins skipped for this pod: {skipped})")
    out.append("")
    target = explanation.target
    out.append(f"  Filter (in order; a {target} stops at its first rejection, '-' = did not run):")
    header = [target.upper(), *explanation.filter_plugins, "RESULT"]
    rows = []
    for node in attempt.nodes:
        cells = [_CELL[v.verdict] for v in node.filters]
        result = node.outcome if not node.reason else f"{node.outcome}: {node.reason}"
        rows.append([node.name, *cells, result])
    out.append(table(header, rows, colour=colour))
    scored = [node for node in attempt.nodes if node.scores]
    if scored:
        out.append("")
        skipped_score = ", ".join(attempt.skipped_score) or "none"
        out.append(f"  Score (weighted = normalized x weight; skipped by PreScore: {skipped_score}):")
        score_rows = []
        for node in sorted(scored, key=lambda n: (-(n.total or 0), n.name)):
            for entry in node.scores:
                raw = "skipped" if entry.raw is None else str(entry.raw)
                score_rows.append(
                    [node.name, entry.plugin, raw, _num(entry.normalized), str(entry.weight), _num(entry.weighted)]
                )
            marker = " <- chosen" if node.outcome == CHOSEN else ""
            score_rows.append([node.name, "TOTAL", "", "", "", f"{_num(node.total)}{marker}"])
        out.append(table([target.upper(), "PLUGIN", "RAW", "NORMALIZED", "WEIGHT", "WEIGHTED"], score_rows))
    out.append("")
    out.append(f"  Selection: {attempt.selection.explanation}")
    for node in attempt.nodes:
        if node.later_rejection is not None:
            out.append(f"  After Filter: {node.name} was refused by {node.reason}")
    if attempt.preemption is not None:
        out.extend(_preemption_text(attempt.preemption))
    return out


def _preemption_text(report: PreemptionReport) -> list[str]:
    out = ["", f"  PostFilter: {report.plugin} ran"]
    if report.candidates:
        rows = [
            [c.node, str(c.num_pdb_violations), ", ".join(c.victims), "chosen" if c.node == report.chosen else ""]
            for c in report.candidates
        ]
        out.append(table(["CANDIDATE", "PDB-VIOLATIONS", "VICTIMS", ""], rows, indent="    "))
    elif report.not_candidates:
        out.append("    no candidate node")
    else:
        out.append("    no candidate node: evicting pods would help on no node (every rejection is unresolvable)")
    if report.chosen:
        out.append(f"    nominated node: {report.chosen} (its victims are evicted; the pod binds on a later attempt)")
    if report.not_candidates:
        rows = [[node, message] for node, message in sorted(report.not_candidates.items())]
        out.append(table(["NOT A CANDIDATE", "WHY"], rows, indent="    "))
    return out


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
