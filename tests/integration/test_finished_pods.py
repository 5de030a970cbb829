"""Finished pods (phase Succeeded or Failed) hold no capacity, as in kube-scheduler, whose pod informer never
lists them: a ``kubectl get pods -A -o yaml`` dump with completed Jobs on a node leaves the node free, and a pod
that finishes during a run frees its node as a delete would."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.cli.main import main
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, None]], None]


def _pod(name: str, cpu: str, *, node: str = "", phase: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}
    pod["spec"] = spec
    if phase:
        pod["status"] = {"phase": phase}
    return pod


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_dumps_finished_pods_leave_their_node_free(
    phase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"}},
    }
    items = [node, _pod("done", "900m", node="n1", phase=phase), _pod("running", "300m", node="n1", phase="Running")]
    items.append(_pod("new", "600m"))
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["simulate", "-f", str(dump), "-o", "json"]) == 0
    pods = {p["name"]: p for p in json.loads(capsys.readouterr().out)["pods"]}
    assert (pods["new"]["result"], pods["new"]["node"]) == ("Scheduled", "n1")
    # The running pod still counts: 300m + 600m fit in 1 CPU, another 200m would not.
    items.append(_pod("one-more", "200m"))
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["simulate", "-f", str(dump), "-o", "json"]) == 0
    pods = {p["name"]: p for p in json.loads(capsys.readouterr().out)["pods"]}
    placed = sorted(name for name in ("new", "one-more") if pods[name]["result"] == "Scheduled")
    assert len(placed) == 1, pods


def test_a_pod_finishing_mid_run_frees_its_node_and_requeues_the_waiting_pod(run_async: Runner) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        worker = make_pod("worker").uid("worker").node_name("n1").req(cpu="900m").phase("Running").obj()
        waiting = make_pod("waiting").uid("waiting").req(cpu="500m").obj()
        cluster = SimulatedCluster(clock, [make_node("n1").capacity(cpu="1", memory="4Gi", pods=10).obj()], [worker])
        registry = in_tree_registry()
        scheduler = Scheduler(default_config(registry), registry, cluster, clock=clock, seed=0)
        cluster.subscribe(scheduler.event_handlers)
        cluster.add_pod(waiting)
        await scheduler.run_until_idle(clock)
        assert cluster.pods["waiting"].spec.node_name == ""
        finished = make_pod("worker").uid("worker").node_name("n1").req(cpu="900m").phase("Succeeded").obj()
        cluster.update_pod(finished)
        await scheduler.run_until_idle(clock)
        bound: Pod = cluster.pods["waiting"]
        assert bound.spec.node_name == "n1"
        # A finished pod's later updates change nothing: it is gone for the scheduler.
        cluster.update_pod(make_pod("worker").uid("worker").node_name("n1").req(cpu="900m").phase("Failed").obj())
        assert scheduler.cache.pod_count() == 1

    run_async(scenario())
