"""``simulate --output html``: one self-contained page (inline CSS and JS, nothing fetched) of a whole run.

Called by ``kubesched simulate``. The page has a table of every pod (where it went, or why not), then per
pod its last attempt as a node x plugin table: each Filter plugin's verdict, each Score plugin's weighted
score (raw and normalized in the cell's title) and the total, built by :mod:`kubesched.explain.model`
from the same records as the other outputs. Clicking a column header sorts its table (numbers as numbers).
Every string from the manifests or the plugins is escaped (:func:`html.escape`).

For tests, ``#sort=TABLE-ID:COLUMN`` in the page's URL clicks that header once the page has loaded, so
a headless browser's ``--dump-dom`` shows the sorted table.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence, Set

from kubesched.config.types import SchedulerConfiguration
from kubesched.explain.model import NOT_RUN, PASSED, REJECTED, SKIPPED, AttemptExplanation, explain_attempt
from kubesched.framework.preemption_report import PreemptionReport
from kubesched.scheduler.results import AttemptRecord

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #c8ccd0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#e8eef5;cursor:pointer;user-select:none}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td:first-child,td:nth-child(2){white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.passed{background:#dff3e0}.rejected{background:#f9d6d5}.skipped{background:#fbf0c8}.not-run{color:#8a9096}
tr.chosen td:first-child{font-weight:bold;background:#b9e4bc}
.Scheduled{color:#176c2a;font-weight:bold}.Unschedulable,.Error{color:#a1261d;font-weight:bold}
.SchedulingGated{color:#8a5a00;font-weight:bold}
p.note{color:#4a5058}
"""

_JS = """
(function(){
  function key(cell){var v=cell.getAttribute('data-sort');if(v===null)v=cell.textContent;
    var n=parseFloat(v);return isNaN(n)||!/^-?[0-9.]+$/.test(v.trim())?{s:v.toLowerCase()}:{n:n};}
  function cmp(a,b){if(a.n!==undefined&&b.n!==undefined)return a.n-b.n;
    if(a.n!==undefined)return -1;if(b.n!==undefined)return 1;return a.s<b.s?-1:a.s>b.s?1:0;}
  function sortBy(th){var table=th.closest('table');var body=table.tBodies[0];
    var col=Array.prototype.indexOf.call(th.parentNode.children,th);
    var asc=!th.classList.contains('asc');
    Array.prototype.forEach.call(th.parentNode.children,function(h){h.classList.remove('asc','desc');});
    th.classList.add(asc?'asc':'desc');
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(r1,r2){var c=cmp(key(r1.cells[col]),key(r2.cells[col]));return asc?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});}
  document.querySelectorAll('table.sortable th').forEach(function(th){
    th.addEventListener('click',function(){sortBy(th);});});
  var m=/#sort=([^:]+):([0-9]+)/.exec(location.hash);
  if(m){var t=document.getElementById(decodeURIComponent(m[1]));
    if(t){var h=t.tHead.rows[0].cells[parseInt(m[2],10)];if(h)h.click();}}
})();
"""

_CELL_TEXT = {PASSED: "passed", REJECTED: "rejected", NOT_RUN: "-", SKIPPED: "skipped"}


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(table_id: str, header: Sequence[str], rows: Sequence[str]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    return (
        f'<table class="sortable" id="{_e(table_id)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _pod_section(
    index: int,
    record: AttemptRecord,
    attempt: AttemptExplanation,
    filters: Sequence[str],
    scores: Sequence[tuple[str, int]],
    preempted: Sequence[str],
) -> str:
    parts = [
        f'<h2 id="pod-{index}">{_e(record.pod.key)} <span class="{_e(record.result)}">{_e(record.result)}</span>'
        + (f" on {_e(record.node)}" if record.node else "")
        + "</h2>"
    ]
    if record.message:
        parts.append(f'<p class="note">{_e(record.message)}</p>')
    if attempt.pre_enqueue is not None:
        parts.append(
            f"<p>Held at PreEnqueue by {_e(attempt.pre_enqueue.plugin)}: "
            f"{_e(attempt.pre_enqueue.message)}. No Filter or Score plugin ran.</p>"
        )
        return "".join(parts)
    if attempt.pre_filter is not None:
        parts.append(
            f"<p>Rejected at PreFilter by {_e(attempt.pre_filter.plugin)} ({_e(attempt.pre_filter.code)}): "
            f"{_e(attempt.pre_filter.message)}. No Filter plugin ran on any node.</p>"
        )
        return "".join(parts)
    parts.append(
        f'<p class="note">{_e(attempt.selection.explanation)}. Filter plugins run in column order; a node '
        "stops at its first rejection (\u201c-\u201d: did not run). Score cells are weighted scores.</p>"
    )
    header = ["Node", "Outcome", *filters, *(f"{name} (\u00d7{weight})" for name, weight in scores), "Total", "Reason"]
    rows = []
    for node in attempt.nodes:
        cells = [f"<td>{_e(node.name)}</td>", f"<td>{_e(node.outcome)}</td>"]
        for verdict in node.filters:
            title = f' title="{_e(verdict.code + ": " + ", ".join(verdict.reasons))}"' if verdict.reasons else ""
            cells.append(f'<td class="{verdict.verdict}"{title}>{_CELL_TEXT[verdict.verdict]}</td>')
        by_plugin = {entry.plugin: entry for entry in node.scores}
        for name, _ in scores:
            entry = by_plugin.get(name)
            if entry is None or entry.weighted is None:
                cells.append('<td class="num" data-sort="-1">-</td>')
            else:
                title = f"raw {entry.raw}, normalized {entry.normalized}, weight {entry.weight}"
                cells.append(f'<td class="num" title="{_e(title)}">{entry.weighted}</td>')
        total = "-" if node.total is None else str(node.total)
        cells.append(f'<td class="num" data-sort="{-1 if node.total is None else node.total}">{total}</td>')
        cells.append(f"<td>{_e(node.reason)}</td>")
        chosen = ' class="chosen"' if node.name == attempt.chosen_node else ""
        rows.append(f"<tr{chosen}>{''.join(cells)}</tr>")
    parts.append(_table(f"nodes-{index}", header, rows))
    if attempt.preemption is not None:
        parts.append(_preemption_html(attempt.preemption, attempt.attempt))
    if preempted:
        parts.append(f"<p>Preempted for it: {_e(', '.join(preempted))}</p>")
    return "".join(parts)


def _preemption_html(report: PreemptionReport, attempt: int) -> str:
    items = "".join(
        f"<li>{_e(c.node)}{' (chosen)' if c.node == report.chosen else ''}: victims "
        f"{_e(', '.join(c.victims))}; PDB violations {c.num_pdb_violations}</li>"
        for c in report.candidates
    )
    found = f"candidates</p><ul>{items}</ul>" if items else "no candidate node.</p>"
    return f'<p class="preemption">Attempt {attempt}, PostFilter {_e(report.plugin)}: {found}'


def report_html(
    records: Sequence[AttemptRecord],
    config: SchedulerConfiguration,
    node_names: Sequence[str],
    preempted: Mapping[str, Sequence[str]] | None = None,
    attempts: Mapping[str, Sequence[AttemptRecord]] | None = None,
    cluster_names: Sequence[str] = (),
    cluster_profiles: Set[str] = frozenset(),
) -> str:
    """The whole page for a simulation's records (each pod's last attempt); ``attempts`` (every attempt by
    pod uid) adds what DefaultPreemption found in earlier attempts. The pods of ``cluster_profiles`` are shown
    against ``cluster_names`` (their nodes are the member clusters) instead of ``node_names``."""
    evicted = preempted or {}
    profiles = {profile.scheduler_name: profile for profile in config.profiles}
    summary = []
    sections = []
    for index, record in enumerate(records):
        profile = profiles[record.profile]
        targets = cluster_names if record.profile in cluster_profiles else node_names
        attempt = explain_attempt(record, profile, targets)
        filters = [ref.name for ref in profile.plugins.get("filter", ())]
        scores = [(ref.name, ref.weight or 1) for ref in profile.plugins.get("score", ())]
        rejected = [n for n in attempt.nodes if n.outcome == "rejected"]
        stopped = attempt.pre_enqueue is not None or attempt.pre_filter is not None
        # Stopped before any node: one reason for all of them (the message says it).
        why_not = "" if stopped else "; ".join(f"{n.name}: {n.reason}" for n in rejected)
        summary.append(
            f'<tr><td><a href="#pod-{index}">{_e(record.pod.key)}</a></td><td>{_e(record.profile)}</td>'
            f'<td class="{_e(record.result)}">{_e(record.result)}</td><td>{_e(record.node or "-")}</td>'
            f'<td class="num">{record.attempts}</td><td>{_e(why_not or record.message)}</td></tr>'
        )
        section = _pod_section(index, record, attempt, filters, scores, evicted.get(record.pod.uid, ()))
        earlier = (attempts or {}).get(record.pod.uid, [])[:-1]
        sections.append(section + "".join(_preemption_html(r.preemption, r.attempts) for r in earlier if r.preemption))
    scheduled = sum(1 for record in records if record.result == "Scheduled")
    pods_table = _table("pods", ["Pod", "Profile", "Result", "Node", "Attempts", "Why not elsewhere"], summary)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>kubesched simulation</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>kubesched simulation: {scheduled}/{len(records)} pods scheduled</h1>"
        f"{pods_table}{''.join(sections)}"
        f"<script>{_JS}</script></body></html>\n"
    )
