"""AuditRecord: JSON round trip, errors that name the field, the verdict summary, RFC 3339 times."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest
from audittest_helpers import make_record

from kubesched.audit.records import SCHEMA, AuditRecord, AuditRecordError, parse_rfc3339, rfc3339
from kubesched.policyapi.verdicts import PolicyVerdict


def deny(enforcement: str = "deny") -> PolicyVerdict:
    return PolicyVerdict("SecurityAuditFilter", "filter", "n1", False, ("privileged",), enforcement=enforcement)


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(make_record(3), id="scheduled-with-verdict-and-scores"),
        pytest.param(
            make_record(4, result="Unschedulable", target=None, top_scores=(), verdicts=(deny(),), message="0/3"),
            id="denied-without-target",
        ),
        pytest.param(
            make_record(5, pod=replace(make_record(5).pod, owner=None), verdicts=(), phases={}, labels={}),
            id="no-owner-no-verdicts-no-phases",
        ),
        pytest.param(make_record(6, message="策略拒绝: 特权容器"), id="non-ascii-message"),
    ],
)
def test_json_round_trip(record: AuditRecord) -> None:
    document = record.to_json()
    assert document["schema"] == SCHEMA
    assert AuditRecord.from_json(document) == record


def _exempt() -> PolicyVerdict:
    return PolicyVerdict("SecurityAuditFilter", "filter", "", True, exempt="namespace kube-system is exempt")


@pytest.mark.parametrize(
    ("verdicts", "summary"),
    [
        pytest.param((), None, id="no-verdict-no-summary"),
        pytest.param(make_record(0).verdicts, "allow", id="all-allowed"),
        pytest.param((*make_record(0).verdicts, deny()), "deny", id="one-enforced-denial"),
        pytest.param((deny("dryrun"),), "deny", id="dryrun-denial-is-still-a-violation"),
        pytest.param((_exempt(),), "exempt", id="exempt-is-its-own-verdict"),
        pytest.param((_exempt(), deny()), "deny", id="a-denial-outweighs-an-exemption"),
    ],
)
def test_verdict_summary(verdicts: tuple[PolicyVerdict, ...], summary: str | None) -> None:
    record = make_record(0, verdicts=verdicts)
    assert record.verdict == summary
    assert record.to_json()["verdict"] == summary


def broken(**changes: Any) -> dict[str, Any]:
    document = make_record(1).to_json()
    for path, value in changes.items():
        node: Any = document
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        if value is KeyError:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param([], "record: expected an object, got an array", id="not-an-object"),
        pytest.param(broken(schema="v0"), "schema: unsupported value 'v0'", id="unknown-schema"),
        pytest.param(broken(decision_id=KeyError), "decision_id: required field is missing", id="missing-field"),
        pytest.param(broken(attempts="1"), "attempts: expected an integer, got a string", id="attempts-string"),
        pytest.param(broken(attempts=True), "attempts: expected an integer, got a boolean", id="attempts-bool"),
        pytest.param(broken(timestamp="yesterday"), "timestamp: 'yesterday' is not an RFC 3339", id="bad-time"),
        pytest.param(
            broken(timestamp="2024-05-01T12:00:00"),
            "timestamp: '2024-05-01T12:00:00' has no time zone",
            id="time-without-zone",
        ),
        pytest.param(broken(pod__owner__kind=3), "pod.owner.kind: expected a string, got a number", id="owner-kind"),
        pytest.param(broken(target__kind="rack"), "target.kind: unsupported value 'rack'", id="target-kind"),
        pytest.param(broken(phases__bound=5), "phases.bound: expected a string, got a number", id="phase-not-time"),
        pytest.param(
            broken(verdicts__0__reasons=[1]),
            "verdicts[0].reasons[0]: expected a string, got a number",
            id="verdict-reason-not-string",
        ),
        pytest.param(
            broken(verdicts__0__allowed=KeyError),
            "verdicts[0].allowed: required field is missing",
            id="verdict-without-allowed",
        ),
        pytest.param(
            broken(verdicts__0__engine=[]),
            "verdicts[0].engine: expected a string, boolean or integer",
            id="verdict-engine-list",
        ),
        pytest.param(
            broken(top_scores__0__scores={"Fit": 1.5}),
            "top_scores[0].scores.Fit: expected an integer",
            id="score-not-integer",
        ),
        pytest.param(broken(labels={"a.b/c": 1}), "labels['a.b/c']: expected a string", id="label-key-quoted"),
    ],
)
def test_from_json_names_the_bad_field(document: object, message: str) -> None:
    with pytest.raises(AuditRecordError) as raised:
        AuditRecord.from_json(document)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00.000000Z", id="epoch"),
        pytest.param(1_700_000_000.0, "2023-11-14T22:13:20.000000Z", id="simulation-start"),
        pytest.param(1_700_000_000.25, "2023-11-14T22:13:20.250000Z", id="sub-second"),
    ],
)
def test_rfc3339(seconds: float, text: str) -> None:
    assert rfc3339(seconds) == text
    assert parse_rfc3339(text).timestamp() == seconds


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2024-05-01T12:00:00Z", datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC), id="zulu"),
        pytest.param("2024-05-01T14:00:00+02:00", datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC), id="offset"),
    ],
)
def test_parse_rfc3339_zones(text: str, expected: datetime.datetime) -> None:
    assert parse_rfc3339(text) == expected
