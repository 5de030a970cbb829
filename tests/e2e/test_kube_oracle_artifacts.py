"""Where kube-oracle is not kube-scheduler: a preemptor's second attempt, on envtest's real kube-apiserver and
kube-scheduler, beside kubesched and kube-oracle (docs/reference/compatibility.md).

``preemptor`` (high priority) fits neither node: node-a is full (``victim``, low priority) and node-b's zone
has no ``app: x`` pod for its required pod affinity. It preempts ``victim`` and is nominated to node-a.
``later-x`` (``app: x``) is then bound to node-b, and pods that fit nowhere keep the scheduler busy while the
eviction completes. At its second attempt kube-scheduler reads the nomination from the pod's status update and
evaluates node-a alone: the preemptor lands there. kube-oracle's fake clientset delivers that update with the
resourceVersion unchanged, kube-scheduler skips it, and its second attempt searches both nodes and takes the
emptier node-b. kubesched answers as kube-scheduler, and the differential runner sets the preemptor's
difference from kube-oracle aside (tests/differential/oracle_artifacts.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from differential.generator import Manifest, write_files
from differential.live import run_live
from differential.oracle_artifacts import NOMINATION_MOVED
from differential.runner import find_oracle, run_kubesched

pytestmark = pytest.mark.e2e

CONFIG: Manifest = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "percentageOfNodesToScore": 100,
    "profiles": [{"schedulerName": "default-scheduler"}],
}
# Enough attempts to outlast the eviction on a loaded machine (each takes a few milliseconds).
BUSY_PODS = 300
PREEMPTOR = "default/preemptor"


def _node(name: str, zone: str, cpu: str) -> Manifest:
    resources = {"cpu": cpu, "memory": "16Gi", "pods": "400"}
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _pod(name: str, app: str, priority: str, cpu: str, **spec: Any) -> Manifest:
    container = {"name": "c", "image": "registry.example/app:1", "resources": {"requests": {"cpu": cpu}}}
    pod: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"priorityClassName": priority, "containers": [container], **spec},
    }
    if "nodeName" in spec:
        pod["status"] = {"phase": "Running"}
    return pod


def scenario() -> list[Manifest]:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "topology.kubernetes.io/zone"}
            ]
        }
    }
    classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in (("low", 100), ("high", 1000))
    ]
    return [
        *classes,
        _node("node-a", "z1", "2"),
        _node("node-b", "z2", "8"),
        _pod("anchor", "x", "high", "500m", nodeName="node-a"),
        _pod("victim", "v", "low", "1500m", nodeName="node-a"),
        _pod("preemptor", "p", "high", "1", affinity=affinity),
        _pod("later-x", "x", "low", "100m", nodeSelector={"topology.kubernetes.io/zone": "z2"}),
        # Named after the others: kube-scheduler's informer lists pods by name, and they must come last.
        *(
            _pod(f"zz-busy-{i:03d}", "busy", "low", "10m", nodeSelector={"topology.kubernetes.io/zone": "none"})
            for i in range(BUSY_PODS)
        ),
    ]


def _nodes(pods: list[dict[str, Any]]) -> dict[str, str | None]:
    return {f"{pod['namespace']}/{pod['name']}": pod["node"] for pod in pods if pod["name"] in ("preemptor", "later-x")}


def test_kube_scheduler_places_a_renominated_preemptor_as_kubesched_does(assets: Path, tmp_path: Path) -> None:
    if not (assets / "kube-scheduler").is_file():
        pytest.skip(f"no kube-scheduler in {assets} (setup-envtest's 1.34.x directory has it)")
    objects = scenario()
    cluster, config = write_files(tmp_path / "case", objects, CONFIG)

    ours = run_kubesched(cluster, config)
    assert _nodes(ours.entries) == {PREEMPTOR: "node-a", "default/later-x": "node-b"}
    assert ours.artifact is not None and (ours.artifact.pod, ours.artifact.reason) == (PREEMPTOR, NOMINATION_MOVED)

    live = run_live(objects, CONFIG, assets, tmp_path / "live")
    log = (tmp_path / "live" / "kube-scheduler.log").read_text()
    assert _nodes(live) == {PREEMPTOR: "node-a", "default/later-x": "node-b"}, log[-3000:]

    oracle = find_oracle()
    if oracle is not None:
        command = [str(oracle), "simulate", "-f", str(cluster), "--config", str(config), "-timeout", "20s"]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
        # What the runner sets aside: kube-oracle's second attempt never read the nomination.
        assert _nodes(json.loads(done.stdout)["pods"]) == {PREEMPTOR: "node-b", "default/later-x": "node-b"}

