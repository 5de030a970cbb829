"""kubesched simulate against kube-scheduler v1.35's own answers on the scenarios under tests/golden.

Each scenario directory holds ``cluster.yaml``, optionally ``config.yaml``, and ``oracle.json`` (the
committed output of ``kube-oracle simulate``; refresh with ``tests/golden/regenerate.py``). This test
never runs the oracle. For every pod the oracle reports, kubesched must report the same result and the
same message, character for character, and no pod the oracle does not; where the oracle needed at most
one attempt, the same number of attempts.

Nodes are compared where the oracle's choice is unambiguous. kube-scheduler breaks equal scores at
random, so a choice is ambiguous when the oracle chose different nodes over several runs (the optional
``oracle-nodes.json`` that regenerate.py writes) or when kubesched's own totals tie among nodes that
include the oracle's. Where the two then choose differently, the clusters they go on to schedule differ,
so nodes of later pods are not compared (results and messages still are). Where kube-scheduler itself gave a
pod different outcomes over the runs (``oracle-outcomes.json``, written by ``regenerate.py --accept-varying``),
any of them is accepted. The rules live in
``tests/differential/compare.py``, shared with the differential runner, which writes the scenarios it
minimizes here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from differential.compare import Comparison, compare_pods
from kubesched.api.manifests import load_manifests
from kubesched.cli.report import record_to_json
from kubesched.config.loader import default_config, load_config_file
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NODES_FILE = "oracle-nodes.json"
OUTCOMES_FILE = "oracle-outcomes.json"


def scenarios() -> list[Path]:
    return sorted(p for p in GOLDEN.iterdir() if (p / "cluster.yaml").is_file() and (p / "oracle.json").is_file())


def run_kubesched(scenario: Path) -> list[dict[str, Any]]:
    registry = in_tree_registry()
    config_path = scenario / "config.yaml"
    config = load_config_file(str(config_path), registry) if config_path.is_file() else default_config(registry)
    report = simulate(load_manifests([str(scenario / "cluster.yaml")]), config, registry, seed=0)
    return [record_to_json(record) for record in report.records]


def compare(scenario: Path, ours: list[dict[str, Any]]) -> Comparison:
    """The scenario's committed oracle output (and ``oracle-nodes.json``, ``oracle-outcomes.json``, when there)
    against ``ours``."""
    oracle_pods = json.loads((scenario / "oracle.json").read_text())["pods"]
    nodes_path = scenario / NODES_FILE
    seen: dict[str, list[str]] | None = json.loads(nodes_path.read_text())["nodes"] if nodes_path.is_file() else None
    outcomes_path = scenario / OUTCOMES_FILE
    alternatives = json.loads(outcomes_path.read_text())["pods"] if outcomes_path.is_file() else None
    return compare_pods(oracle_pods, ours, seen, alternatives)


@pytest.mark.parametrize("scenario", scenarios(), ids=lambda path: path.name)
def test_kubesched_agrees_with_kube_scheduler(scenario: Path) -> None:
    found = compare(scenario, run_kubesched(scenario))
    assert not found.problems, f"{scenario.name}: " + "\n".join(found.texts)
    assert found.pods > 0


def test_there_are_scenarios() -> None:
    names = {path.name for path in scenarios()}
    assert len(names) >= 8, names


def test_harness_flags_differences_and_accepts_ties(tmp_path: Path) -> None:
    """The comparison itself: a wrong message or node is reported, a tie is not, later nodes after a
    differing tie are not compared, and the harness works without oracle-nodes.json."""
    oracle = {
        "pods": [
            {"namespace": "d", "name": "a", "result": "Scheduled", "node": "n1", "message": "", "attempts": 1},
            {"namespace": "d", "name": "b", "result": "Scheduled", "node": "n1", "message": "", "attempts": 1},
            {"namespace": "d", "name": "c", "result": "Unschedulable", "node": None, "message": "m", "attempts": 1},
        ]
    }
    (tmp_path / "oracle.json").write_text(json.dumps(oracle))

    def pod(name: str, node: str | None, totals: dict[str, int], message: str = "") -> dict[str, Any]:
        result = "Scheduled" if node else "Unschedulable"
        fields = {"result": result, "node": node, "message": message, "attempts": 1, "totals": totals}
        return {"namespace": "d", "name": name, **fields}

    agree = [pod("a", "n1", {"n1": 9, "n2": 3}), pod("b", "n1", {}), pod("c", None, {}, "m")]
    assert compare(tmp_path, agree).texts == []
    assert compare(tmp_path, agree).nodes_exact == 2

    wrong = [pod("a", "n2", {"n1": 3, "n2": 9}), pod("b", "n1", {}), pod("c", None, {}, "other")]
    problems = compare(tmp_path, wrong).texts
    assert len(problems) == 2 and "node 'n2'" in problems[0] and "message" in problems[1]

    retried = [pod("a", "n1", {"n1": 9, "n2": 3}), pod("b", "n1", {}), pod("c", None, {}, "m") | {"attempts": 3}]
    assert compare(tmp_path, retried).texts == ["d/c: 3 attempts, oracle 1"]

    tie_then_other = [pod("a", "n2", {"n1": 9, "n2": 9}), pod("b", "n3", {}), pod("c", None, {}, "m")]
    found = compare(tmp_path, tie_then_other)
    assert found.texts == [] and found.nodes_tied == 1 and found.nodes_unchecked == 1

    (tmp_path / NODES_FILE).write_text(json.dumps({"runs": 2, "nodes": {"d/a": ["n1", "n3"], "d/b": ["n1"]}}))
    seen_by_oracle = [pod("a", "n3", {"n1": 9, "n3": 8}), pod("b", "n1", {}), pod("c", None, {}, "m")]
    assert compare(tmp_path, seen_by_oracle).texts == []
    # c's outcome varied over the oracle's runs: either message is accepted, a third one is not.
    (tmp_path / OUTCOMES_FILE).write_text(
        json.dumps(
            {
                "runs": 2,
                "pods": {
                    "d/c": [
                        {"result": "Unschedulable", "message": "m", "attempts": 1, "runs": 1},
                        {"result": "Unschedulable", "message": "m2", "attempts": 2, "runs": 1},
                    ]
                },
            }
        )
    )
    varied = [pod("a", "n1", {"n1": 9, "n3": 8}), pod("b", "n1", {}), pod("c", None, {}, "m2") | {"attempts": 2}]
    assert compare(tmp_path, varied).texts == []
    other = [pod("a", "n1", {"n1": 9, "n3": 8}), pod("b", "n1", {}), pod("c", None, {}, "m3")]
    assert [problem.kind for problem in compare(tmp_path, other).problems] == ["message"]
