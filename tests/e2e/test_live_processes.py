"""``kubesched run`` as a separate process against a real kube-apiserver: killed mid-run, and two replicas.

The reliability rules of live mode: a scheduler killed with SIGKILL and started again binds every pod exactly
once (none lost, none bound twice, no node overcommitted); of two replicas with leader election exactly one
schedules, and when it is killed the other takes over within leaseDuration + retryPeriod and finishes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.harness.envtest import ControlPlane
from kubesched.testing.live_cluster import Scenario, scenario

pytestmark = pytest.mark.e2e


def _config(corner: Scenario, path: Path, *, qps: int, leader_elect: bool = False) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": qps, "burst": qps},
        "leaderElection": {
            "leaderElect": leader_elect,
            "leaseDuration": "3s",
            "renewDeadline": "2s",
            "retryPeriod": "500ms",
            "resourceName": "kubesched-e2e",
            "resourceNamespace": corner.namespace,
        },
        "profiles": [{"schedulerName": corner.scheduler_name}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


class Process:
    """``kubesched run`` in a child process, its output in a log file."""

    def __init__(self, config: Path, kubeconfig: Path, log: Path, hostname: str) -> None:
        self.log = log
        self.port = _free_port()
        self.handle = log.open("ab")
        command = [sys.executable, "-m", "kubesched.cli.main", "run", "--config", str(config)]
        command += ["--kubeconfig", str(kubeconfig), "--hostname", hostname]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), "--bind-address", "127.0.0.1"],
            stdout=self.handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.handle.close()

    def terminate(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.handle.close()
        return self.process.returncode

    def get(self, path: str) -> tuple[int, str]:
        """GET one of the process's health or metrics endpoints."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.read().decode()
        except OSError as error:
            return 0, str(error)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.terminate()


def _wait(check: Callable[[], bool], timeout: float, what: str, processes: list[Process]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.log.name}:\n{p.output()}" for p in processes)
            raise AssertionError(f"{what}: not within {timeout} s\n{logs}")
        time.sleep(0.2)


def _bound(corner: Scenario) -> dict[str, str]:
    return {name: pod["spec"]["nodeName"] for name, pod in corner.pods().items() if pod["spec"].get("nodeName")}


def _scheduled_events(corner: Scenario) -> list[dict[str, Any]]:
    return [e for e in corner.events() if e["reason"] == "Scheduled"]


def test_killed_mid_run_and_restarted_every_pod_is_bound_once(
    control_plane: ControlPlane, tmp_path: Path, processes: list[Process]
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        for i in range(10):
            corner.create(corner.node(f"n{i}", cpu="5"))
        pods = 400
        for i in range(pods):
            corner.create(corner.pod(f"p{i}", cpu="100m"))
        config = _config(corner, tmp_path / "config.yaml", qps=60)  # ~30 pods/s: the kill lands mid-run
        kubeconfig = corner.kubeconfig("admin")

        first = Process(config, kubeconfig, tmp_path / "first.log", "first")
        processes.append(first)
        _wait(lambda: len(_bound(corner)) >= 60, 60, "the first process binds pods", processes)
        first.kill()
        bound_at_kill = _bound(corner)
        assert len(bound_at_kill) < pods, "everything was bound before the kill: the test proves nothing"

        second = Process(config, kubeconfig, tmp_path / "second.log", "second")
        processes.append(second)
        _wait(lambda: len(_bound(corner)) == pods, 120, "every pod is bound after the restart", processes)
        assert second.terminate() == 0, second.output()

        bound = _bound(corner)
        assert all(bound[name] == node for name, node in bound_at_kill.items())  # nobody moved
        per_node = Counter(bound.values())
        assert max(per_node.values()) <= 50  # 5 CPUs of 100m pods: never overcommitted
        scheduled = Counter(e["regarding"]["name"] for e in _scheduled_events(corner))
        assert max(scheduled.values()) == 1, [name for name, count in scheduled.items() if count > 1]
        # The second process bound what the first had not; it saw the first's bindings as assigned pods.
        events = _scheduled_events(corner)
        by_second = {e["regarding"]["name"] for e in events if e["reportingInstance"].endswith("-second")}
        assert by_second and not by_second & set(bound_at_kill)


def _lease_holder(plane: ControlPlane, corner: Scenario) -> str:
    status, lease = plane.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{corner.namespace}/leases/kubesched-e2e"
    )
    return str(lease["spec"].get("holderIdentity") or "") if status == 200 else ""


def test_of_two_replicas_one_schedules_and_the_other_takes_over(
    control_plane: ControlPlane, tmp_path: Path, processes: list[Process]
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        for i in range(3):
            corner.create(corner.node(f"n{i}", cpu="10"))
        config = _config(corner, tmp_path / "config.yaml", qps=500, leader_elect=True)
        kubeconfig = corner.kubeconfig("admin")
        replicas = {name: Process(config, kubeconfig, tmp_path / f"{name}.log", name) for name in ("a", "b")}
        processes.extend(replicas.values())
        _wait(lambda: bool(_lease_holder(control_plane, corner)), 30, "a replica holds the Lease", processes)
        leader = _lease_holder(control_plane, corner).split("_")[0]
        standby = "b" if leader == "a" else "a"
        # Both are ready (synced; one leads, one stands by) and alive.
        _wait(lambda: all(r.get("/readyz")[0] == 200 for r in replicas.values()), 30, "both ready", processes)
        assert all(r.get("/healthz") == (200, "ok") for r in replicas.values())

        for i in range(30):
            corner.create(corner.pod(f"first-{i}", cpu="100m"))
        _wait(lambda: len(_bound(corner)) == 30, 60, "the leader binds the first pods", processes)
        _wait(lambda: len(_scheduled_events(corner)) == 30, 30, "every binding is reported", processes)
        instances = {e["reportingInstance"] for e in _scheduled_events(corner)}
        assert instances == {f"{corner.scheduler_name}-{leader}"}
        attempts = f'scheduler_schedule_attempts_total{{profile="{corner.scheduler_name}",result="scheduled"}} 30.0'
        assert attempts in replicas[leader].get("/metrics")[1]
        assert "scheduler_schedule_attempts_total{" not in replicas[standby].get("/metrics")[1]

        replicas[leader].kill()
        for i in range(30):
            corner.create(corner.pod(f"second-{i}", cpu="100m"))
        # Once the killed leader's Lease expires (how soon is test_leader_election's, on clocks it moves).
        _wait(
            lambda: _lease_holder(control_plane, corner).startswith(f"{standby}_"), 30, "the standby leads", processes
        )
        _wait(lambda: len(_bound(corner)) == 60, 60, "the new leader binds the rest", processes)

        def reported() -> dict[str, str]:  # events are written after the binding, by the writer task
            return {e["regarding"]["name"]: e["reportingInstance"] for e in _scheduled_events(corner)}

        _wait(lambda: len(reported()) == 60, 30, "every binding is reported", processes)
        second = reported()
        assert {second[f"second-{i}"] for i in range(30)} == {f"{corner.scheduler_name}-{standby}"}
        assert replicas[standby].terminate() == 0, replicas[standby].output()
        assert _lease_holder(control_plane, corner) == ""  # released on graceful shutdown
