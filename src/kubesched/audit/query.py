"""Answer "why did this pod land here (or nowhere)?" from an audit log.

Called by ``kubesched audit query FILE [--pod ns/name] [--node N] [--since T] [--verdict allow|deny|error|exempt]``.
Reads the records of a JSON-lines audit log (hash-chained or not; the command verifies the chain first, as
``kubesched audit verify`` does, and warns when it does not verify), keeps those matching every given filter,
and formats each as an explanation (result, target, phases, policy verdicts with reasons, top scores), a
one-line-per-record table, or JSON.

Filters:

* ``pod``: ``namespace/name`` (a bare name means namespace ``default``, as kubectl reads it);
* ``node``: the record's target is that node or cluster (it landed there, or was refused there at
  Reserve/Permit/Bind), or one of its policy verdicts is about it;
* ``since``: records at or after an RFC 3339 time, or a duration (Go syntax: ``10m``, ``1h30m``) before
  now; "now" comes from the caller's clock (a simulated log's times are virtual, from its own clock);
* ``verdict``: ``error`` = a policy engine could not decide (an outage, a timeout); ``deny`` = some policy
  verdict did not allow (enforced, warn or dryrun); ``allow`` = every policy verdict allowed. Records
  without a policy verdict match none.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubesched.audit.chain import AuditLogError
from kubesched.audit.lines import TOO_LONG, bounded_lines, max_line_bytes, too_long_detail
from kubesched.audit.records import AuditRecord, AuditRecordError, parse_rfc3339
from kubesched.durations import DurationError, parse_go_duration


class QueryError(AuditLogError):
    """A filter cannot be understood (a bad pod name, time or duration)."""


@dataclass(frozen=True, slots=True)
class Query:
    pod: tuple[str, str] | None = None  # (namespace, name)
    node: str | None = None
    since: datetime.datetime | None = None
    verdict: str | None = None

    def matches(self, record: AuditRecord) -> bool:
        if self.pod is not None and (record.pod.namespace, record.pod.name) != self.pod:
            return False
        if self.node is not None and not _involves(record, self.node):
            return False
        if self.since is not None and record.time < self.since:
            return False
        return self.verdict is None or record.verdict == self.verdict


def _involves(record: AuditRecord, node: str) -> bool:
    if record.target is not None and record.target.name == node:
        return True
    return any(verdict.target == node for verdict in record.verdicts)


def parse_pod(text: str) -> tuple[str, str]:
    namespace, _, name = text.rpartition("/")
    if not name or "/" in namespace:
        raise QueryError(f"--pod {text!r}: expected namespace/name")
    return namespace or "default", name


def parse_since(text: str, now: float) -> datetime.datetime:
    """An RFC 3339 time, or ``now`` minus a Go duration."""
    try:
        return parse_rfc3339(text)
    except ValueError as time_error:
        try:
            nanoseconds = parse_go_duration(text)
        except DurationError:
            raise QueryError(
                f"--since {text!r}: not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z) or a duration (e.g. 10m, 1h30m)"
                + (f": {time_error}" if "time zone" in str(time_error) else "")
            ) from None
        if nanoseconds < 0:
            raise QueryError(f"--since {text!r}: a duration before now cannot be negative") from None
        moment = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
        return moment - datetime.timedelta(microseconds=nanoseconds // 1000)


Skip = Callable[[int, str], None]


def read_records(path: str | Path, *, skip: Skip | None = None) -> Iterator[tuple[int, AuditRecord]]:
    """(line number, record) for every line; AuditLogError naming the line for one that is not a record,
    unless ``skip`` is given: then it is told (line number, why) and the line is passed over."""
    path = Path(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - a generator: closed by the with below
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot read the audit log: {exc.strerror or exc}") from None
    limit = max_line_bytes()
    with handle:
        for number, raw in bounded_lines(handle, limit):
            try:
                if raw == TOO_LONG:
                    raise AuditRecordError(too_long_detail(limit))
                record = AuditRecord.from_json(json.loads(raw))
            except (json.JSONDecodeError, UnicodeDecodeError, AuditRecordError) as exc:
                if skip is not None:
                    skip(number, str(exc) or type(exc).__name__)
                    continue
                raise AuditLogError(
                    f"{path}: line {number} is not an audit record ({exc}); `kubesched audit verify {path}` "
                    "tells what is wrong with the log"
                ) from None
            yield number, record


def run_query(path: str | Path, query: Query, *, skip: Skip | None = None) -> list[AuditRecord]:
    return [record for _, record in read_records(path, skip=skip) if query.matches(record)]


# ---- formatting ------------------------------------------------------------------------------


def explain(record: AuditRecord) -> str:
    """A few lines that say what was decided for the pod and why."""
    lines = [f"{record.pod.key}: {_outcome(record)}"]
    owner = f", owner {record.pod.owner.kind}/{record.pod.owner.name}" if record.pod.owner else ""
    lines.append(
        f"  decision {record.decision_id} at {record.timestamp}; profile {record.profile}; "
        f"attempt {record.attempts}; pod uid {record.pod.uid}{owner}"
    )
    if record.phases:
        lines.append(f"  phases: {_phases(record)}")
    if record.message:
        lines.append(f"  why: {record.message}")
    if record.verdict is None:
        lines.append("  policy: no verdict recorded")
    else:
        lines.append(f"  policy: {record.verdict}")
        for verdict in record.verdicts:
            about = f" on {verdict.target}" if verdict.target else ""
            if verdict.error:
                answer = "let through, the engine failed" if verdict.allowed else "not decided, the engine failed"
            else:
                answer = "allowed" if verdict.allowed else f"denied ({verdict.enforcement})"
            flags = []
            if verdict.skipped:
                flags.append("skipped: the engine failed and the failure policy let the pod through")
            if verdict.exempt:
                flags.append(f"exempt: {verdict.exempt}")
            if verdict.error:
                flags.append(f"error: {verdict.error}")
            reasons = f": {'; '.join(verdict.reasons)}" if verdict.reasons else ""
            lines.append(f"    {verdict.plugin} ({verdict.stage}){about}: {answer}{reasons}")
            facts = [
                f"{name} {value}"
                for name, value in (
                    ("engine", verdict.engine),
                    ("revision", verdict.revision),
                    ("decision_id", verdict.decision_id),
                    ("input", verdict.input_digest),
                )
                if value
            ]
            if facts or flags:
                lines.append(f"      {', '.join(facts + flags)}")
        if record.verdicts_omitted:
            lines.append(f"    ({record.verdicts_omitted} more verdicts not recorded)")
    if record.top_scores:
        best = "; ".join(
            f"{scored.node} {scored.total} ({', '.join(f'{name} {score}' for name, score in scored.scores.items())})"
            for scored in record.top_scores
        )
        lines.append(f"  top scores: {best}")
    return "\n".join(lines)


def _outcome(record: AuditRecord) -> str:
    if record.target is None:
        return record.result
    preposition = "to" if record.result == "Scheduled" else "on"
    return f"{record.result} {preposition} {record.target.kind} {record.target.name}"


def _phases(record: AuditRecord) -> str:
    items = list(record.phases.items())
    start = parse_rfc3339(items[0][1])
    parts = [f"{items[0][0]} {items[0][1]}"]
    for name, stamp in items[1:]:
        delta = (parse_rfc3339(stamp) - start).total_seconds()
        parts.append(f"{name} +{delta:.6f}s")
    return ", ".join(parts)


def table(records: Sequence[AuditRecord]) -> str:
    header = ("TIME", "POD", "RESULT", "TARGET", "VERDICT", "REASON")
    rows = [
        (
            record.timestamp,
            record.pod.key,
            record.result,
            record.target.name if record.target else "-",
            record.verdict or "-",
            _reason(record),
        )
        for record in records
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def _reason(record: AuditRecord) -> str:
    for verdict in record.verdicts:
        if not verdict.allowed and verdict.reasons:
            return "; ".join(verdict.reasons)
    return record.message
