"""A later attempt can never change what an earlier attempt's audit record says (issue: falsified records).

The scenario: 200 nodes, 30 of them labelled so that the policy fails at run time (``to_number("oops")``),
two replica pods (equal policy input, so they share cached decisions), the embedded engine. The first pod's
search decides only nodes that evaluate cleanly and it is bound; the second pod's search reaches the broken
nodes and the engine fails. The first pod's record must still say its node was allowed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.cli.main import main
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.plugins.security.security_audit_filter import AttemptPolicy, NodeDecisions
from kubesched.policyapi.verdicts import PolicyVerdict
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]

POLICY = """package kubernetes.authz

import rego.v1

default decision := {"allow": true}

decision := {"allow": false, "reason": "tier below zero"} if {
    to_number(object.get(input.node.metadata.labels, "tier", "1")) < 0
}
"""


def nodes() -> list[Any]:
    # No zones: the search walks them in this order. The first pod's first batch covers node-000..156.
    return [
        make_node(f"node-{i:03d}")
        .capacity(cpu="4", memory="8Gi", pods=20)
        .label("tier", "oops" if i >= 170 else "1")
        .obj()
        for i in range(200)
    ]


def replica(name: str) -> Any:
    return make_pod(name).label("app", "web").owner("ReplicaSet", "web-7d9f").req(cpu="100m").obj()


class Hold:
    """Permit: holds every pod until the test allows it, so a record is written after later cycles ran."""

    name = "Hold"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), 60.0


def registry() -> Registry:
    return merge(in_tree_registry(), {"Hold": PluginRegistration.of("Hold", Hold)})


def config(policy: Path) -> Any:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}, {"name": "Hold"}]}},
                "pluginConfig": [
                    {
                        "name": "SecurityAuditFilter",
                        "args": {"policies": [str(policy)], "decisionPath": "kubernetes/authz/decision"},
                    }
                ],
            }
        ],
    }
    return load_config_dict(document, "test", registry())


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)


def test_a_later_replicas_engine_failure_never_reaches_an_earlier_record(run_async: Runner, tmp_path: Path) -> None:
    policy = tmp_path / "tier.rego"
    policy.write_text(POLICY)

    async def scenario() -> None:
        clock = VirtualClock()
        cluster = SimulatedCluster(clock, nodes(), [replica("web-1"), replica("web-2")])
        records = Records()
        scheduler = Scheduler(config(policy), registry(), cluster, clock=clock, seed=0, observer=records)
        cluster.subscribe(scheduler.event_handlers)
        try:
            assert await scheduler.schedule_next()  # web-1: decided on clean nodes, held at Permit
            assert await scheduler.schedule_next()  # web-2: reaches the broken nodes, the engine fails
            await scheduler.settle()
            [failed] = [r for r in records.all if r.pod.name == "web-2"]
            assert failed.result == "Error" and "OPA evaluation failed" in failed.message
            assert [v.outcome for v in failed.verdicts] == ["error"]
            # Only now does web-1 finish binding and get its record.
            [waiting] = list(scheduler.waiting_pods)
            assert waiting.pod.name == "web-1"
            waiting.allow("Hold")
            await scheduler.settle()
            [bound] = [r for r in records.all if r.pod.name == "web-1"]
            assert bound.result == "Scheduled" and bound.node is not None
            assert bound.node < "node-170", "the first pod only ever saw nodes that evaluate cleanly"
            assert [(v.target, v.outcome) for v in bound.verdicts] == [(bound.node, "allow")]
            # What crosses into a record are immutable values, never the policy cache's objects.
            for verdict in (*bound.verdicts, *failed.verdicts):
                assert type(verdict) is PolicyVerdict
                assert not isinstance(verdict, AttemptPolicy | NodeDecisions)
        finally:
            await scheduler.close()

    run_async(scenario())


def test_the_audit_log_says_the_bound_pod_was_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "tier.rego"
    policy.write_text(POLICY)
    manifest = tmp_path / "cluster.yaml"
    objects = [node.raw for node in nodes()] + [replica("web-1").raw, replica("web-2").raw]
    manifest.write_text("\n---\n".join(json.dumps(obj) for obj in objects))
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                        "pluginConfig": [
                            {
                                "name": "SecurityAuditFilter",
                                "args": {"policies": [str(policy)], "decisionPath": "kubernetes/authz/decision"},
                            }
                        ],
                    }
                ],
            }
        )
    )
    log = tmp_path / "audit.jsonl"
    assert main(["simulate", "-f", str(manifest), "--config", str(config_file), "--audit-log", str(log)]) == 0
    capsys.readouterr()
    assert main(["audit", "query", str(log), "--pod", "default/web-1"]) == 0
    out = capsys.readouterr().out
    assert "Scheduled to node node-" in out and "policy: allow" in out and "deny" not in out
    assert main(["audit", "query", str(log), "--pod", "default/web-2", "--verdict", "error"]) == 0
    assert "OPA evaluation failed" in capsys.readouterr().out
    assert main(["audit", "verify", str(log)]) == 0
