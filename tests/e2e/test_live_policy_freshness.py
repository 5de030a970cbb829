"""The policy gate against a real kube-apiserver decides with the policy in force, with both engines.

A tightened policy denies the very next identical pod (embedded: the file change is found before the decision
cache is read) or the first one after ``policyRefreshSeconds`` (remote OPA: the revision OPA reports is asked again
then, and names the decision in the audit record); the denied nodes read ``Preemption is not helpful for
scheduling``; a denied pod with nothing else changing is attempted once (the scheduler's own PodScheduled patch
is no pod update), with one FailedScheduling event and one audit record; and a relaxed policy binds it within
seconds (the new revision is a cluster event that requeues it), not at the 5-minute flush. The last test runs
``kubesched run`` itself, as a separate process with an audit log.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.audit.query import read_records
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.harness.envtest import ControlPlane
from kubesched.harness.opa_server import OpaTestServer
from kubesched.scheduler.results import AttemptRecord
from kubesched.testing.live_cluster import RunningScheduler, Scenario, scenario, wait_for

pytestmark = pytest.mark.e2e

POLICIES = Path(__file__).resolve().parents[2] / "examples" / "policies"
REFRESH_SECONDS = 1.0
NOT_HELPFUL = "Preemption is not helpful for scheduling"
RETIRED = "nginx is retired"
# A module of its own, as an administrator would PUT it into OPA or drop it beside the example policy.
NO_NGINX = f"""package kubernetes.authz

import rego.v1

deny contains "{RETIRED}" if {{
\tsome container in input.pod.spec.containers
\tstartswith(container.image, "nginx:")
}}
"""


class Attempts:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def of(self, name: str) -> list[AttemptRecord]:
        return [record for record in self.all if record.pod.name == name]


class Engine:
    """One engine's way of holding the example policy, and of tightening and relaxing it."""

    def __init__(self, kind: str, workdir: Path, data: dict[str, Any]) -> None:
        self.kind = kind
        self.directory = workdir / "policies"
        self.server: OpaTestServer | None = None
        policies = {"placement.rego": (POLICIES / "placement.rego").read_text()}
        if kind == "embedded":
            self.directory.mkdir()
            shutil.copy(POLICIES / "placement.rego", self.directory / "placement.rego")
            (self.directory / "data.json").write_text(json.dumps(data))
        else:
            self.server = OpaTestServer(policies, data).start()

    def args(self) -> dict[str, Any]:
        common = {"policyRefreshSeconds": REFRESH_SECONDS, "timeoutSeconds": 5}
        if self.server is not None:
            return {"opaEndpoint": f"{self.server.url}/v1/data/kubernetes/authz", **common}
        return {"policies": [str(self.directory)], "data": [str(self.directory / "data.json")], **common}

    def tighten(self) -> None:
        if self.server is not None:
            self.server.put_policy("no-nginx.rego", NO_NGINX)
        else:
            (self.directory / "no-nginx.rego").write_text(NO_NGINX)

    def relax(self) -> None:
        if self.server is not None:
            self.server.put_policy("no-nginx.rego", "package kubernetes.retired\n")
        else:
            (self.directory / "no-nginx.rego").unlink()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@contextmanager
def engine(kind: str, workdir: Path, corner: Scenario, nodes: list[str]) -> Iterator[Engine]:
    data = json.loads((POLICIES / "data.json").read_text())
    data["compliance"]["nodes"] = {name: {"level": "standard", "scanned": "2026-11-29T09:00:00Z"} for name in nodes}
    made = Engine(kind, workdir, data)
    try:
        yield made
    finally:
        made.stop()


def nginx_pod(corner: Scenario, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = corner.pod(name, cpu="100m")
    pod["spec"]["containers"][0]["image"] = "nginx:1.27"
    return pod


def failed_scheduling(corner: Scenario, name: str) -> list[dict[str, Any]]:
    return [e for e in corner.events() if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == name]


@pytest.mark.parametrize("kind", ["embedded", "remote"])
def test_the_policy_in_force_decides_each_pod_once_and_a_relaxed_policy_binds_at_once(
    control_plane: ControlPlane, tmp_path: Path, kind: str
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        for i in range(2):
            corner.create(corner.node(f"n{i}"))
        nodes = [f"n{i}-{corner.tag}" for i in range(2)]
        with engine(kind, tmp_path, corner, nodes) as policy:
            config = corner.config(
                profiles=[
                    {
                        "schedulerName": corner.scheduler_name,
                        "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                        "pluginConfig": [{"name": "SecurityAuditFilter", "args": policy.args()}],
                    }
                ]
            )
            attempts = Attempts()
            audit_log = tmp_path / "audit.jsonl"
            sink = JsonlSink(str(audit_log))

            def bound(name: str) -> Callable[[], bool]:
                return lambda: bool(corner.pods()[name]["spec"].get("nodeName"))

            async def run() -> float:
                async with RunningScheduler(corner, config, observers=[attempts], audit_sinks=[sink]):
                    corner.create(nginx_pod(corner, "before"))
                    await wait_for(bound("before"), 30)
                    policy.tighten()
                    if kind == "remote":
                        # What OPA reported is trusted for the bound; the first decision after it asks again.
                        await asyncio.sleep(REFRESH_SECONDS)
                    corner.create(nginx_pod(corner, "after"))
                    await wait_for(lambda: bool(failed_scheduling(corner, "after")), 30)
                    # Nothing else changes: the scheduler's own status patch, the policy checks every second and
                    # the event writer's series must add no attempt, event occurrence or audit record.
                    await asyncio.sleep(4 * REFRESH_SECONDS)
                    assert [r.result for r in attempts.of("after")] == ["Unschedulable"]
                    policy.relax()
                    relaxed = time.monotonic()
                    await wait_for(bound("after"), 30)
                    return time.monotonic() - relaxed

            waited = asyncio.run(run())

        [before] = attempts.of("before")
        denied, admitted = attempts.of("after")
        assert (denied.result, admitted.result) == ("Unschedulable", "Scheduled")
        # Denied with the policy in force, and the denial says preemption cannot help on any of our nodes.
        assert RETIRED in denied.message
        [event] = failed_scheduling(corner, "after")
        assert RETIRED in event["note"] and NOT_HELPFUL in event["note"], event["note"]
        assert "No preemption victims found" not in event["note"]
        assert event.get("series") is None, "one FailedScheduling occurrence"
        # One audit record per attempt; the denial names the revision that decided it, another than before's.
        records = [record for _, record in read_records(audit_log) if record.pod.name in ("before", "after")]
        assert [(r.pod.name, r.result) for r in records] == [
            ("before", "Scheduled"),
            ("after", "Unschedulable"),
            ("after", "Scheduled"),
        ]
        before_revisions = {v.revision for v in records[0].verdicts}
        denied_revisions = {v.revision for v in records[1].verdicts if not v.allowed}
        assert len(before_revisions) == len(denied_revisions) == 1 and before_revisions != denied_revisions
        if kind == "remote":
            [revision] = denied_revisions
            assert revision.startswith("policies:"), "the revision OPA reported, not a counter of the scheduler's"
        assert before.result == "Scheduled"
        # Freed by the revision change (checked every policyRefreshSeconds), not the 5-minute unschedulable flush:
        # a bound of a few checks and the pod's backoff, far below the flush.
        assert waited < 15, waited


def test_kubesched_run_attempts_a_denied_pod_once_and_binds_it_when_the_policy_is_relaxed(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        for i in range(2):
            corner.create(corner.node(f"n{i}"))
        nodes = [f"n{i}-{corner.tag}" for i in range(2)]
        with engine("embedded", tmp_path, corner, nodes) as policy:
            policy.tighten()
            config = tmp_path / "config.yaml"
            profile = {
                "schedulerName": corner.scheduler_name,
                "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                "pluginConfig": [{"name": "SecurityAuditFilter", "args": policy.args()}],
            }
            document = {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [profile],
            }
            config.write_text(yaml.safe_dump(document))
            audit_log = tmp_path / "audit.jsonl"
            output = tmp_path / "kubesched.log"
            command = [sys.executable, "-m", "kubesched.cli.main", "run", "--config", str(config)]
            command += ["--kubeconfig", str(corner.kubeconfig()), "--audit-log", str(audit_log), "--port", "0"]
            with output.open("wb") as log:
                process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
                )
                try:
                    corner.create(nginx_pod(corner, "denied"))
                    deadline = time.monotonic() + 60
                    while not failed_scheduling(corner, "denied"):
                        assert process.poll() is None and time.monotonic() < deadline, output.read_text()[-3000:]
                        time.sleep(0.2)
                    time.sleep(4 * REFRESH_SECONDS)  # nothing else changes meanwhile
                    [event] = failed_scheduling(corner, "denied")
                    assert event.get("series") is None, "one FailedScheduling occurrence"
                    assert NOT_HELPFUL in event["note"] and RETIRED in event["note"], event["note"]
                    policy.relax()
                    deadline = time.monotonic() + 30
                    while not corner.pods()["denied"]["spec"].get("nodeName"):
                        assert process.poll() is None and time.monotonic() < deadline, output.read_text()[-3000:]
                        time.sleep(0.2)
                finally:
                    process.terminate()
                    process.wait(20)
        records = [record for _, record in read_records(audit_log) if record.pod.name == "denied"]
        assert [r.result for r in records] == ["Unschedulable", "Scheduled"], "one attempt per real event"
