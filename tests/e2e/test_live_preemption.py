"""DefaultPreemption against a real kube-apiserver: the victim gets the DisruptionTarget condition and is
deleted (graceful: with no kubelet it stays terminating until the test deletes it for good), a ``Preempted``
event is written on it, the preemptor is nominated, waits while its victim terminates, and then binds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubesched.harness.envtest import ControlPlane
from kubesched.testing.live_cluster import RunningScheduler, scenario, wait_for

pytestmark = pytest.mark.e2e


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def test_preemption_evicts_the_victim_and_the_preemptor_binds_once_it_is_gone(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    with scenario(control_plane, tmp_path) as corner:
        low, high = f"low-{corner.tag}", f"high-{corner.tag}"
        for name, value in ((low, 100), (high, 1000)):
            status, answer = control_plane.request(
                "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", _priority_class(name, value)
            )
            assert status == 201, answer
        try:
            node = corner.create(corner.node("n0", cpu="2"))["metadata"]["name"]
            victim = corner.pod("victim", cpu="1500m")
            victim["spec"] |= {"nodeName": node, "priorityClassName": low}
            corner.create(victim)
            preemptor = corner.pod("urgent", cpu="1")
            preemptor["spec"]["priorityClassName"] = high
            created = corner.create(preemptor)

            async def scenario_run() -> None:
                async with RunningScheduler(corner):
                    # With no kubelet the graceful delete leaves the victim terminating.
                    await wait_for(lambda: "deletionTimestamp" in corner.pods()["victim"]["metadata"], 30)
                    await wait_for(lambda: corner.pods()["urgent"]["status"].get("nominatedNodeName") == node, 30)
                    victim_now = corner.pods()["victim"]
                    assert "nodeName" not in corner.pods()["urgent"]["spec"], "must wait for the victim to go"
                    disruption = next(c for c in victim_now["status"]["conditions"] if c["type"] == "DisruptionTarget")
                    assert (disruption["status"], disruption["reason"], disruption["message"]) == (
                        "True",
                        "PreemptionByScheduler",
                        f"{corner.scheduler_name}: preempting to accommodate a higher priority pod",
                    )
                    # The kubelet's part: the pod is gone for good. Then the preemptor fits on its node.
                    status, answer = control_plane.request(
                        "DELETE",
                        f"/api/v1/namespaces/{corner.namespace}/pods/victim",
                        {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                    )
                    assert status == 200, answer
                    await wait_for(lambda: corner.pods()["urgent"]["spec"].get("nodeName") == node, 30)

            asyncio.run(scenario_run())
            assert "victim" not in corner.pods()
            events = corner.events()
            preempted = [e for e in events if e["reason"] == "Preempted"]
            assert [(e["regarding"]["name"], e["type"], e["action"]) for e in preempted] == [
                ("victim", "Normal", "Preempting")
            ]
            assert preempted[0]["note"] == f"Preempted by pod {created['metadata']['uid']} on node {node}"
            failures = [e for e in events if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "urgent"]
            assert failures, "the preempting attempt itself fails"
            # Other tests' nodes share the cluster, so only the part about ours is checked.
            assert "Insufficient cpu" in failures[0]["note"]
        finally:
            for name in (low, high):
                control_plane.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
