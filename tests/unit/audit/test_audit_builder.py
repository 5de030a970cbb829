"""AuditObserver and FanOut over real scheduling attempts: what a record says for each kind of outcome."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from audittest_helpers import Attempts, fresh_metrics, make_record, schedule

from kubesched.audit.builder import AuditObserver, FanOut, build_record, seeded_ids
from kubesched.audit.records import AuditRecord
from kubesched.audit.sinks.events import EventsSink
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.audit.sinks.stdout import StdoutSink
from kubesched.audit.verify import verify_chain
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.framework.types import PodInfo
from kubesched.scheduler.results import AttemptRecord
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


def cluster_nodes() -> list[Any]:
    return [
        make_node("big").capacity(cpu="8", memory="16Gi", pods=10).label("restricted", "true").obj(),
        make_node("mid").capacity(cpu="4", memory="8Gi", pods=10).obj(),
        make_node("small").capacity(cpu="2", memory="4Gi", pods=10).obj(),
        make_node("tiny").capacity(cpu="1", memory="2Gi", pods=10).obj(),
    ]


def records_of(run_async: Runner, pod: Any, nodes: list[Any] | None = None) -> list[AuditRecord]:
    stream = io.StringIO()
    run_async(schedule(cluster_nodes() if nodes is None else nodes, [pod], StdoutSink(stream)))
    return [AuditRecord.from_json(json.loads(line)) for line in stream.getvalue().splitlines()]


ALLOW_MID = ("LabelPolicy", "mid", True)


@pytest.mark.parametrize(
    ("pod", "result", "target", "verdicts"),
    [
        pytest.param(
            make_pod("plain").req(cpu="500m").obj(),
            "Scheduled",
            "mid",
            [ALLOW_MID, ("ChangeWindow", "mid", True)],
            id="scheduled-record-carries-only-the-chosen-nodes-verdicts",
        ),
        pytest.param(
            make_pod("cleared").req(cpu="500m").label("clearance", "yes").obj(),
            "Scheduled",
            "big",
            [("LabelPolicy", "big", True), ("ChangeWindow", "big", True)],
            id="cleared-pod-lands-on-the-restricted-node",
        ),
        pytest.param(
            make_pod("shut").req(cpu="500m").label("window", "closed").obj(),
            "Unschedulable",
            "mid",
            [("ChangeWindow", "mid", False), ALLOW_MID],
            id="permit-denial-names-the-refused-node-as-target-denial-first",
        ),
        pytest.param(
            make_pod("huge").req(cpu="6").obj(),
            "Unschedulable",
            None,
            [("LabelPolicy", "big", False), ALLOW_MID, ("LabelPolicy", "small", True), ("LabelPolicy", "tiny", True)],
            id="filter-failure-records-the-verdict-about-every-rejected-node-denials-first",
        ),
    ],
)
def test_record_per_outcome(
    run_async: Runner, pod: Any, result: str, target: str | None, verdicts: list[tuple[str, str, bool]]
) -> None:
    (record,) = records_of(run_async, pod)
    assert record.result == result
    assert (record.target.name if record.target else None) == target
    assert [(v.plugin, v.target, v.allowed) for v in record.verdicts] == verdicts
    assert record.verdict == ("allow" if all(allowed for _, _, allowed in verdicts) else "deny")
    assert record.pod.key == f"default/{pod.metadata.name}"
    assert record.pod.uid == pod.metadata.uid
    assert record.attempts == 1


def test_scheduled_record_has_every_phase_top_three_scores_and_owner(run_async: Runner) -> None:
    (record,) = records_of(run_async, make_pod("web").req(cpu="500m").owner("ReplicaSet", "web-rs").obj())
    assert list(record.phases) == ["queued", "filtered", "reserved", "permitted", "bound"]
    assert record.pod.owner is not None and (record.pod.owner.kind, record.pod.owner.name) == ("ReplicaSet", "web-rs")
    # big is filtered out by the policy; the three others are scored, best first.
    assert [s.node for s in record.top_scores] == ["mid", "small", "tiny"]
    totals = [s.total for s in record.top_scores]
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[-1]
    assert "NodeResourcesFit" in record.top_scores[0].scores
    # Plugin scores are before weights; the default profile weighs TaintToleration 3, the others 1.
    best = record.top_scores[0]
    assert best.total == sum(best.scores.values()) + 2 * best.scores["TaintToleration"]
    (filter_verdict, permit_verdict) = sorted(record.verdicts, key=lambda v: v.stage)
    assert (filter_verdict.plugin, filter_verdict.decision_id, filter_verdict.revision) == (
        "LabelPolicy",
        "opa-mid",
        "rev-7",
    )
    assert (permit_verdict.plugin, permit_verdict.allowed) == ("ChangeWindow", True)


def test_only_three_of_many_scored_nodes_are_reported(run_async: Runner) -> None:
    nodes = [make_node(f"n{i}").capacity(cpu=str(2 + i), memory="8Gi", pods=10).obj() for i in range(6)]
    (record,) = records_of(run_async, make_pod("p").req(cpu="1").obj(), nodes)
    assert len(record.top_scores) == 3
    assert [s.node for s in record.top_scores] == ["n5", "n4", "n3"], "least allocated: the biggest nodes win"


@pytest.mark.parametrize("chosen", ["n0", "n3", "n7"])
def test_the_chosen_node_is_always_among_the_top_scores_even_in_a_wide_tie(run_async: Runner, chosen: str) -> None:
    # Eight equal nodes: host selection picks one at random; name order alone would list n0, n1, n2.
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(8)]
    (record,) = records_of(run_async, make_pod("p").req(cpu="1").obj(), nodes)
    assert record.target is not None
    attempt = AttemptRecord(
        pod=PodInfo(make_pod("p").obj()),
        profile="default-scheduler",
        result="Scheduled",
        attempts=1,
        chosen_node=chosen,
        node=chosen,
        scored_nodes=[f"n{i}" for i in range(8)],
        plugin_scores={"NodeResourcesFit": np.full(8, 90, dtype=np.int64)},
        totals=np.full(8, 90, dtype=np.int64),
    )
    top = build_record(attempt, decision_id="d").top_scores
    assert top[0].node == chosen and len(top) == 3
    assert record.top_scores[0].node == record.target.name, "in a real run too, the bound node is listed first"


def test_failure_verdicts_are_capped_with_the_rest_counted(run_async: Runner) -> None:
    nodes = [make_node(f"r{i:02d}").label("restricted", "true").obj() for i in range(20)]
    (record,) = records_of(run_async, make_pod("p").obj(), nodes)
    assert record.result == "Unschedulable"
    assert len(record.verdicts) == 16 and record.verdicts_omitted == 4
    assert all(not v.allowed for v in record.verdicts)


def test_observer_writes_every_attempt_chained_and_seeded_ids_repeat(run_async: Runner, tmp_path: Path) -> None:
    pods = [make_pod(f"p{i}").req(cpu="500m").obj() for i in range(3)] + [make_pod("x").label("window", "closed").obj()]

    def run(path: Path) -> list[dict[str, Any]]:
        with JsonlSink(path) as sink:
            observer = AuditObserver(sink, ids=seeded_ids(7, sink.opened_at_head), metrics=fresh_metrics())
            attempts, _, _ = run_async(schedule(cluster_nodes(), pods, observer=observer))
        assert observer.records == len(attempts) == 4
        return [json.loads(line) for line in path.read_text().splitlines()]

    first = run(tmp_path / "one.jsonl")
    second = run(tmp_path / "two.jsonl")
    assert verify_chain(tmp_path / "one.jsonl").ok
    assert first == second, "a seeded simulation writes the same log, decision ids included"
    assert len({line["decision_id"] for line in first}) == 4
    appended = run(tmp_path / "one.jsonl")[4:]
    assert len(appended) == 4
    assert {line["decision_id"] for line in appended}.isdisjoint({line["decision_id"] for line in first}), (
        "a run appended to the same log gets other ids"
    )
    assert verify_chain(tmp_path / "one.jsonl").records == 8


class Exploding:
    """An observer that fails on every record."""

    def on_attempt(self, record: AttemptRecord) -> None:
        raise RuntimeError("observer broke")


def test_fanout_reaches_every_observer_then_reraises() -> None:
    record = AttemptRecord(pod=PodInfo(make_pod("p").obj()), profile="default-scheduler", result="Error", attempts=1)
    before, after = Attempts(), Attempts()
    with pytest.raises(RuntimeError, match="observer broke"):
        FanOut(before, Exploding(), after).on_attempt(record)
    assert before.all == after.all == [record]


def test_sink_failure_is_counted_and_other_sinks_still_get_the_record(run_async: Runner, tmp_path: Path) -> None:
    broken = JsonlSink(tmp_path / "broken.jsonl")
    broken.close_sync()  # writing to a closed log raises, as a full disk would
    stream = io.StringIO()
    metrics = fresh_metrics()
    _, observer, _ = run_async(
        schedule(cluster_nodes(), [make_pod("p").obj()], broken, StdoutSink(stream), metrics=metrics)
    )
    assert observer is not None and observer.write_errors == 1
    assert metrics.dropped_total("jsonl", "write_error") == 1
    assert metrics.handed_total("stdout") == 1 and metrics.handed_total("jsonl") == 0
    assert len(stream.getvalue().splitlines()) == 1


@pytest.mark.parametrize(
    ("labels", "event_type", "fragment"),
    [
        pytest.param({}, "Normal", "Scheduled to node mid; policy allow: LabelPolicy on mid", id="allowed-is-normal"),
        pytest.param(
            {"window": "closed"},
            "Warning",
            "Unschedulable on node mid; policy deny: ChangeWindow on mid: the change window is closed",
            id="denied-is-a-warning-with-the-reason",
        ),
    ],
)
def test_events_sink_reports_each_decision_on_the_pod(
    run_async: Runner, labels: dict[str, str], event_type: str, fragment: str
) -> None:
    builder = make_pod("p").req(cpu="500m")
    for key, value in labels.items():
        builder = builder.label(key, value)
    recorder = SimulatedCluster(VirtualClock())  # a recorder of its own: its events are the audit's alone
    run_async(schedule(cluster_nodes(), [builder.obj()], EventsSink(recorder)))
    (event,) = recorder.events
    assert (event.namespace, event.name, event.type, event.reason, event.action) == (
        "default",
        "p",
        event_type,
        "PolicyAudit",
        "Audit",
    )
    assert fragment in event.message
    assert "decision " in event.message


def test_build_record_without_state_or_scores_is_minimal() -> None:
    attempt = AttemptRecord(
        pod=PodInfo(make_pod("p").obj()), profile="default-scheduler", result="Error", attempts=3, message="boom"
    )
    record = build_record(attempt, decision_id="d-1", labels={})
    assert (record.result, record.target, record.verdict, record.top_scores, record.phases) == (
        "Error",
        None,
        None,
        (),
        {},
    )
    assert record.timestamp == "1970-01-01T00:00:00.000000Z"
    assert AuditRecord.from_json(record.to_json()) == record


def test_observer_rejects_no_sinks_and_unknown_target_kind() -> None:
    with pytest.raises(ValueError, match="at least one sink"):
        AuditObserver()
    with pytest.raises(ValueError, match="target_kind"):
        AuditObserver(StdoutSink(io.StringIO()), target_kind="rack")
    assert make_record(1).verdict == "allow"


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        pytest.param(("p", 0, ""), ("p", 0, ""), True, id="same-seed-salt-and-pod-same-id"),
        pytest.param(("p", 0, ""), ("q", 0, ""), False, id="other-workload-other-id"),
        pytest.param(("p", 0, ""), ("p", 1, ""), False, id="other-seed-other-id"),
        pytest.param(("p", 0, ""), ("p", 0, "head"), False, id="other-log-head-other-id"),
    ],
)
def test_seeded_ids(first: tuple[str, int, str], second: tuple[str, int, str], same: bool) -> None:
    def first_id(name: str, seed: int, salt: str) -> str:
        attempt = AttemptRecord(pod=PodInfo(make_pod(name).obj()), profile="p", result="Scheduled", attempts=1)
        return seeded_ids(seed, salt)(attempt)

    assert (first_id(*first) == first_id(*second)) is same
