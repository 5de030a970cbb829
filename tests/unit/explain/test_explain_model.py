"""The explanation of one pod, built from real simulations: per node and plugin, the choice, preemption."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubesched.api.manifests import load_manifests
from kubesched.cli.common import load_config, plugin_registry
from kubesched.explain.model import (
    CHOSEN,
    FEASIBLE,
    NODE_REJECTED,
    NOT_EVALUATED,
    NOT_RUN,
    PASSED,
    REJECTED,
    SKIPPED,
    PodExplanation,
)
from kubesched.explain.run import ExplainError, explain

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
CASES = ROOT / "tests" / "integration" / "testdata" / "explain-cases.yaml"


def explained(path: Path, pod: str, config: Path | None = None, **options: bool) -> PodExplanation:
    registry = plugin_registry()
    return explain(
        load_manifests([str(path)]), load_config(str(config) if config else None, registry), registry, pod, **options
    )


def test_scheduled_pod_every_node_every_plugin() -> None:
    result = explained(EXAMPLES / "cluster.yaml", "default/web-1", EXAMPLES / "config.yaml")
    attempt = result.attempts[-1]
    nodes = {node.name: node for node in attempt.nodes}
    assert attempt.result == "Scheduled" and attempt.node == "node-a"
    assert nodes["node-a"].outcome == CHOSEN
    assert {nodes[n].outcome for n in ("node-c", "node-e")} == {FEASIBLE}
    # node-d stops at its first filter: the rest did not run (or were skipped by PreFilter for every node).
    d = {v.plugin: v.verdict for v in nodes["node-d"].filters}
    assert d["NodeUnschedulable"] == REJECTED
    assert d["NodeName"] == NOT_RUN and d["NodeResourcesFit"] == NOT_RUN
    assert d["NodeAffinity"] == SKIPPED
    b = {v.plugin: v for v in nodes["node-b"].filters}
    assert b["NodeUnschedulable"].verdict == PASSED and b["TaintToleration"].verdict == REJECTED
    assert b["TaintToleration"].reasons == ("node(s) had untolerated taint(s)",)
    assert nodes["node-b"].outcome == NODE_REJECTED and not nodes["node-b"].scores
    # Scores: raw before NormalizeScore, normalized, weight, and their weighted sum is the total.
    e = {s.plugin: s for s in nodes["node-e"].scores}
    assert (e["TaintToleration"].raw, e["TaintToleration"].normalized, e["TaintToleration"].weight) == (1, 0, 3)
    for node in (nodes["node-a"], nodes["node-c"], nodes["node-e"]):
        assert node.total == sum(s.weighted or 0 for s in node.scores)
        for entry in node.scores:
            assert entry.weighted is None or entry.weighted == entry.normalized * entry.weight  # type: ignore[operator]
    assert attempt.selection.rule == "highest-total"
    assert attempt.selection.tied == ("node-a",)
    assert attempt.selection.highest_total == nodes["node-a"].total


def test_unschedulable_pod_has_every_nodes_reason_and_preemption_ran() -> None:
    attempt = explained(EXAMPLES / "cluster.yaml", "batch-huge", EXAMPLES / "config.yaml").attempts[-1]
    assert attempt.result == "Unschedulable"
    assert all(node.outcome == NODE_REJECTED and node.reason for node in attempt.nodes)
    assert attempt.selection.rule == "none"
    assert attempt.preemption is not None and attempt.preemption.candidates == ()


def test_preempting_pod_shows_candidates_victims_and_the_later_binding() -> None:
    result = explained(CASES, "default/urgent")
    first, last = result.attempts[0], result.attempts[-1]
    assert first.result == "Unschedulable" and first.preemption is not None
    candidates = {c.node: c.victims for c in first.preemption.candidates}
    assert candidates == {"n1": ("batch/low-1",), "n2": ("batch/low-2",)}
    chosen = first.preemption.chosen
    assert chosen is not None
    assert result.preempted == candidates[chosen]
    assert last.result == "Scheduled" and last.node == chosen
    others = [node for node in last.nodes if node.name != chosen]
    assert [node.outcome for node in others] == [NOT_EVALUATED]
    assert "nominated node" in others[0].reason
    assert last.selection.rule == "single-feasible-node"


def test_prefilter_rejection_runs_no_filter() -> None:
    attempt = explained(CASES, "conflict").attempts[-1]
    assert attempt.pre_filter is not None and attempt.pre_filter.plugin == "NodeAffinity"
    assert attempt.pre_filter.reasons == ("pod affinity terms conflict",)
    assert all(v.verdict == NOT_RUN for node in attempt.nodes for v in node.filters)


def test_gated_pod_was_never_attempted() -> None:
    result = explained(CASES, "gated")
    assert len(result.attempts) == 1
    attempt = result.attempts[0]
    assert attempt.attempt == 0 and attempt.pre_enqueue is not None
    assert attempt.pre_enqueue.plugin == "SchedulingGates"


def test_ties_are_listed(tmp_path: Path) -> None:
    manifests = tmp_path / "tie.yaml"
    node = "- {apiVersion: v1, kind: Node, metadata: {name: NAME}, status: {allocatable: {cpu: '4', pods: '110'}}}\n"
    pod = "- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: x}]}}\n"
    manifests.write_text(
        "apiVersion: v1\nkind: List\nitems:\n" + node.replace("NAME", "t1") + node.replace("NAME", "t2") + pod
    )
    attempt = explained(manifests, "p").attempts[-1]
    assert attempt.selection.tied == ("t1", "t2")
    assert attempt.selection.chosen in ("t1", "t2")
    assert "tied with" in attempt.selection.explanation


def test_batch_and_reference_paths_explain_alike() -> None:
    batch = explained(EXAMPLES / "cluster.yaml", "default/web-2", EXAMPLES / "config.yaml")
    reference = explained(EXAMPLES / "cluster.yaml", "default/web-2", EXAMPLES / "config.yaml", use_batch=False)
    assert batch == reference


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param("default/web-9", "did you mean: default/web-2, default/web-1?", id="near-matches-are-listed"),
        pytest.param("zzz", "not found (10 pods in the manifests)", id="nothing-near"),
    ],
)
def test_unknown_pod_is_a_clear_error(query: str, message: str) -> None:
    with pytest.raises(ExplainError, match="not found") as caught:
        explained(EXAMPLES / "cluster.yaml", query, EXAMPLES / "config.yaml")
    assert message in str(caught.value)


def test_pod_bound_in_the_manifests_is_said_so() -> None:
    result = explained(EXAMPLES / "cluster.yaml", "prod/db-0")
    assert result.bound_in_manifests == "node-a" and result.attempts == []


def test_pod_of_no_profile_is_an_error() -> None:
    with pytest.raises(ExplainError, match='schedulerName "bin-packing-scheduler"'):
        explained(EXAMPLES / "cluster.yaml", "packed-1")


def test_colour_on_a_terminal_keeps_the_columns_aligned() -> None:
    from kubesched.explain.render import explanation_text

    result = explained(EXAMPLES / "cluster.yaml", "default/web-1", EXAMPLES / "config.yaml")
    plain = explanation_text(result)
    coloured = explanation_text(result, colour=True)
    assert "\x1b[31m" in coloured and "\x1b[" not in plain
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
