"""Query filters over a real log, their parsing, and the explanations and table they print."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from audittest_helpers import make_record

from kubesched.audit.chain import AuditLogError
from kubesched.audit.query import (
    Query,
    QueryError,
    explain,
    parse_pod,
    parse_since,
    read_records,
    run_query,
    table,
)
from kubesched.audit.records import AuditRecord, PodRef, Target, parse_rfc3339
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.policyapi.verdicts import PolicyVerdict

UTC = datetime.UTC


def denied_at(node: str) -> PolicyVerdict:
    return PolicyVerdict(
        plugin="SecurityAuditFilter",
        stage="filter",
        target=node,
        allowed=False,
        reasons=("privileged containers are not allowed", "image registry not trusted"),
        engine="opa",
        revision="bundle-42",
        decision_id="opa-dec-1",
        input_digest="sha256:feed",
    )


def records() -> list[AuditRecord]:
    """Five decisions, one a minute from 12:00:00."""
    return [
        make_record(0, timestamp="2024-05-01T12:00:00.000000Z"),  # default/web-0 -> node-0, allow
        make_record(1, timestamp="2024-05-01T12:01:00.000000Z"),  # default/web-1 -> node-1, allow
        make_record(
            2,
            timestamp="2024-05-01T12:02:00.000000Z",
            pod=PodRef("prod", "db-0", "uid-db", None),
            result="Unschedulable",
            target=None,
            message="0/3 nodes are available: 3 denied by policy.",
            verdicts=(denied_at("node-1"), denied_at("node-2")),
            top_scores=(),
            phases={"queued": "2024-05-01T12:01:59.500000Z"},
        ),
        make_record(3, timestamp="2024-05-01T12:03:00.000000Z", verdicts=()),  # default/web-3 -> node-0, no verdict
        make_record(
            4,
            timestamp="2024-05-01T12:04:00.000000Z",
            pod=PodRef("prod", "db-0", "uid-db", None),
            attempts=2,
            target=Target("node", "node-0"),
        ),
    ]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    with JsonlSink(path, durability="never") as sink:
        for record in records():
            sink.write(record)
    return path


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param(Query(), ["web-0", "web-1", "db-0", "web-3", "db-0"], id="no-filter-everything-in-order"),
        pytest.param(Query(pod=("prod", "db-0")), ["db-0", "db-0"], id="pod-every-attempt"),
        pytest.param(Query(pod=("default", "db-0")), [], id="pod-namespace-matters"),
        pytest.param(Query(node="node-0"), ["web-0", "web-3", "db-0"], id="node-as-target"),
        pytest.param(Query(node="node-2"), ["db-0"], id="node-named-by-a-verdict"),
        pytest.param(Query(node="node-1"), ["web-1", "db-0", "db-0"], id="node-target-or-verdict"),
        pytest.param(
            Query(since=datetime.datetime(2024, 5, 1, 12, 2, tzinfo=UTC)), ["db-0", "web-3", "db-0"], id="since"
        ),
        pytest.param(Query(verdict="deny"), ["db-0"], id="verdict-deny"),
        pytest.param(Query(verdict="allow"), ["web-0", "web-1", "db-0"], id="verdict-allow-skips-no-verdict"),
        pytest.param(Query(pod=("prod", "db-0"), verdict="allow"), ["db-0"], id="filters-combine"),
    ],
)
def test_filters(log: Path, query: Query, expected: list[str]) -> None:
    assert [record.pod.name for record in run_query(log, query)] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("prod/db-0", ("prod", "db-0"), id="namespace-and-name"),
        pytest.param("db-0", ("default", "db-0"), id="bare-name-is-default-namespace"),
    ],
)
def test_parse_pod(text: str, expected: tuple[str, str]) -> None:
    assert parse_pod(text) == expected


@pytest.mark.parametrize("text", [pytest.param("a/b/c", id="two-slashes"), pytest.param("prod/", id="no-name")])
def test_parse_pod_rejects(text: str) -> None:
    with pytest.raises(QueryError, match="expected namespace/name"):
        parse_pod(text)


NOW = parse_rfc3339("2024-05-01T12:04:30Z").timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2024-05-01T12:02:00Z", "2024-05-01T12:02:00+00:00", id="rfc3339"),
        pytest.param("2024-05-01T14:02:00+02:00", "2024-05-01T14:02:00+02:00", id="rfc3339-offset"),
        pytest.param("10m", "2024-05-01T11:54:30+00:00", id="minutes-before-now"),
        pytest.param("1h30m", "2024-05-01T10:34:30+00:00", id="go-duration"),
        pytest.param("1.5s", "2024-05-01T12:04:28.500000+00:00", id="fractional"),
    ],
)
def test_parse_since(text: str, expected: str) -> None:
    assert parse_since(text, NOW) == datetime.datetime.fromisoformat(expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("yesterday", "not an RFC 3339 time .* or a duration", id="neither"),
        pytest.param("-5m", "cannot be negative", id="negative-duration"),
        pytest.param("2024-05-01T12:00:00", "has no time zone", id="time-without-zone"),
    ],
)
def test_parse_since_rejects(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse_since(text, NOW)


def test_since_duration_relative_to_now_filters(log: Path) -> None:
    since = parse_since("2m", NOW)  # 12:02:30
    assert [r.timestamp[11:19] for r in run_query(log, Query(since=since))] == ["12:03:00", "12:04:00"]


def test_explain_denial() -> None:
    text = explain(records()[2])
    assert text.splitlines() == [
        "prod/db-0: Unschedulable",
        f"  decision {records()[2].decision_id} at 2024-05-01T12:02:00.000000Z; profile default-scheduler; "
        "attempt 1; pod uid uid-db",
        "  phases: queued 2024-05-01T12:01:59.500000Z",
        "  why: 0/3 nodes are available: 3 denied by policy.",
        "  policy: deny",
        "    SecurityAuditFilter (filter) on node-1: denied (deny): privileged containers are not allowed; "
        "image registry not trusted",
        "      engine opa, revision bundle-42, decision_id opa-dec-1, input sha256:feed",
        "    SecurityAuditFilter (filter) on node-2: denied (deny): privileged containers are not allowed; "
        "image registry not trusted",
        "      engine opa, revision bundle-42, decision_id opa-dec-1, input sha256:feed",
    ]


def test_explain_scheduled() -> None:
    text = explain(records()[1])
    assert text.splitlines() == [
        "default/web-1: Scheduled to node node-1",
        f"  decision {records()[1].decision_id} at 2024-05-01T12:01:00.000000Z; profile default-scheduler; "
        "attempt 1; pod uid uid-1, owner ReplicaSet/web",
        "  phases: queued 2024-05-01T11:59:59.000000Z, bound +1.000000s",
        "  policy: allow",
        "    SecurityAuditFilter (filter) on node-1: allowed",
        "      engine regorus, revision rev-1, decision_id opa-1, input sha256:abc",
        "  top scores: node-1 300 (NodeResourcesFit 100, TaintToleration 100)",
    ]


def test_explain_marks_skipped_exempt_and_omitted() -> None:
    verdict = PolicyVerdict("P", "permit", "", True, skipped=True, exempt="namespace kube-system", error="timeout")
    text = explain(make_record(0, verdicts=(verdict,), verdicts_omitted=3, top_scores=()))
    assert "    P (permit): let through, the engine failed" in text
    assert (
        "      skipped: the engine failed and the failure policy let the pod through, "
        "exempt: namespace kube-system, error: timeout"
    ) in text
    assert "    (3 more verdicts not recorded)" in text


def test_table(log: Path) -> None:
    lines = table(run_query(log, Query(pod=("prod", "db-0")))).splitlines()
    assert lines[0].split() == ["TIME", "POD", "RESULT", "TARGET", "VERDICT", "REASON"]
    assert lines[1].split()[:5] == ["2024-05-01T12:02:00.000000Z", "prod/db-0", "Unschedulable", "-", "deny"]
    assert lines[1].endswith("privileged containers are not allowed; image registry not trusted")
    assert lines[2].split() == ["2024-05-01T12:04:00.000000Z", "prod/db-0", "Scheduled", "node-0", "allow"]


def test_unreadable_line_is_named(tmp_path: Path, log: Path) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"schema": "kubesched.io/audit/v1"}\n'
    log.write_bytes(b"".join(lines))
    with pytest.raises(AuditLogError, match=r"audit.jsonl: line 4 is not an audit record \(pod: required"):
        list(read_records(log))
    with pytest.raises(AuditLogError, match="cannot read the audit log"):
        list(read_records(tmp_path / "missing.jsonl"))
