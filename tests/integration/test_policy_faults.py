"""Faults of a remote OPA, end to end: with failurePolicy Fail the pod is not bound; with Ignore it is bound
and its audit record says the policy was skipped. Nothing is lost, nothing crashes.

Real HTTP to the project's OPA-compatible server on loopback, with its fault injection.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.api.manifests import LoadedManifests
from kubesched.api.objects import Pod
from kubesched.audit.builder import AuditObserver
from kubesched.audit.query import read_records
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.config.loader import load_config_dict
from kubesched.harness.opa_server import Faults, OpaTestServer
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate
from kubesched.testing.builders import make_node, make_pod

POLICIES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def set_fault(name: str) -> Callable[[Faults], None]:
    def apply(faults: Faults) -> None:
        if name == "slow":
            faults.delay_seconds = 1.0  # the deadline is 0.2 s
        elif name == "error-500":
            faults.status_code = 500
        elif name == "reset":
            faults.reset_connection = True
        else:
            setattr(faults, name.replace("-", "_"), True)

    return apply


FAULTS = ["slow", "error-500", "reset", "undefined", "non-boolean", "usage-warning"]


def cluster() -> LoadedManifests:
    loaded = LoadedManifests()
    loaded.nodes = [make_node(name).capacity(cpu="4", memory="8Gi", pods=10).obj() for name in ("node-a", "node-b")]
    loaded.pods = [make_pod("web").req(cpu="100m").obj()]
    return loaded


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
@pytest.mark.parametrize("fault", FAULTS)
def test_engine_fault_follows_failure_policy(fault: str, failure_policy: str, tmp_path: Path) -> None:
    data = json.loads((POLICIES / "data.json").read_text())
    policies = {"placement.rego": (POLICIES / "placement.rego").read_text()}
    registry = in_tree_registry()
    with OpaTestServer(policies, data) as server:
        set_fault(fault)(server.faults)
        args = {
            "opaEndpoint": f"{server.url}/v1/data/kubernetes/authz",
            "timeoutSeconds": 0.2,
            "failurePolicy": failure_policy,
        }
        document: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                    "pluginConfig": [{"name": "SecurityAuditFilter", "args": args}],
                }
            ],
        }
        log = tmp_path / "audit.jsonl"
        with JsonlSink(str(log)) as sink:
            report = simulate(
                cluster(),
                load_config_dict(document, "t", registry),
                registry,
                max_attempts=2,
                observers=[AuditObserver(sink)],
            )
    audit_records = [audit for _, audit in read_records(log)]
    [record] = report.records
    assert report.cluster is not None
    bound = report.cluster.pods[record.pod.uid].spec.node_name
    if failure_policy == "Fail":
        assert record.result in {"Error", "Unschedulable"} and not bound
        if fault == "undefined":
            # The generated batch rule is always defined: an undefined answer means OPA lost kubesched's module, a
            # failure (retried, never cached as the policy's deny).
            assert "OPA evaluation failed" in record.message and "no longer serves" in record.message
        else:
            assert "OPA evaluation failed" in record.message
            assert record.attempts == 2, "an engine failure is retried with backoff"
        assert audit_records and audit_records[-1].result == record.result
    else:
        assert record.result == "Scheduled" and bound == record.node
        [audit] = [r for r in audit_records if r.result == "Scheduled"]
        [verdict] = audit.verdicts
        assert verdict.skipped and verdict.allowed and verdict.error


APPROVAL = """package kubernetes.approval

import rego.v1

default decision := {"allow": false, "reason": "no approved change ticket"}

decision := {"allow": true} if {
    ticket := input.pod.metadata.annotations["example.com/change-ticket"]
    data.tickets[ticket] == "approved"
}
"""


@pytest.mark.parametrize(
    ("ticket", "slow", "result", "message"),
    [
        pytest.param("CHG-1", False, "Scheduled", "", id="approved-over-http"),
        pytest.param(
            "CHG-2",
            False,
            "Unschedulable",
            "Denied by security policy: no approved change ticket",
            id="denied-over-http",
        ),
        pytest.param("CHG-1", True, "Unschedulable", "OPA evaluation failed", id="deadline-passed-fail-closed"),
    ],
)
def test_permit_decides_over_remote_opa(ticket: str, slow: bool, result: str, message: str) -> None:
    registry = in_tree_registry()
    with OpaTestServer({"approval.rego": APPROVAL}, {"tickets": {"CHG-1": "approved"}}) as server:
        if slow:
            server.faults.delay_seconds = 1.0
        args = {"opaEndpoint": f"{server.url}/v1/data/kubernetes/approval/decision", "timeoutSeconds": 0.2}
        document: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditPermit"}]}},
                    "pluginConfig": [{"name": "SecurityAuditPermit", "args": args}],
                }
            ],
        }
        loaded = cluster()
        raw = make_pod("deploy").req(cpu="100m").raw()
        raw["metadata"]["annotations"] = {"example.com/change-ticket": ticket}
        loaded.pods = [Pod.from_dict(raw, "test")]
        report = simulate(loaded, load_config_dict(document, "t", registry), registry, max_attempts=1)
    [record] = report.records
    assert record.result == result
    assert message in record.message


@pytest.mark.parametrize("decision_logging", [pytest.param(True, id="logging-on"), pytest.param(False, id="off")])
@pytest.mark.parametrize(("plugin", "point"), [("SecurityAuditFilter", "filter"), ("SecurityAuditPermit", "permit")])
def test_an_undefined_decision_under_ignore_is_judged_on_the_decision_alone(
    plugin: str, point: str, decision_logging: bool
) -> None:
    """OPA's answer carries a decision_id when decision logging is on; whether the decision was undefined must
    not depend on it, at Filter as at Permit."""
    registry = in_tree_registry()
    policies = {"placement.rego": (POLICIES / "placement.rego").read_text()}
    with OpaTestServer(policies, {}, decision_logging=decision_logging) as server:
        server.faults.undefined = True
        args = {"opaEndpoint": f"{server.url}/v1/data/kubernetes/authz", "failurePolicy": "Ignore"}
        document: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {point: {"enabled": [{"name": plugin}]}},
                    "pluginConfig": [{"name": plugin, "args": args}],
                }
            ],
        }
        report = simulate(cluster(), load_config_dict(document, "t", registry), registry, max_attempts=2)
        answered = server.requests
    [record] = report.records
    assert answered >= 1, "the policy was asked"
    assert (record.result, record.message) == ("Scheduled", "")
