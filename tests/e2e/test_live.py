"""``kubesched run`` against a real kube-apiserver: informers, bindings, conditions, events, relists."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubesched.harness.envtest import ControlPlane
from kubesched.testing.live_cluster import RunningScheduler, scenario, wait_async, wait_for

pytestmark = pytest.mark.e2e


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)


def test_binds_what_fits_and_reports_what_does_not(control_plane: ControlPlane, tmp_path: Path) -> None:
    with scenario(control_plane, tmp_path) as corner:
        for i in range(3):
            corner.create(corner.node(f"n{i}", cpu="2"))
        for i in range(6):
            corner.create(corner.pod(f"p{i}"))
        corner.create(corner.pod("too-big", cpu="3"))
        corner.create(corner.pod("someone-elses", scheduler="default-scheduler"))

        async def scenario_run() -> None:
            async with RunningScheduler(corner):
                await wait_for(lambda: sum(bool(p["spec"].get("nodeName")) for p in corner.pods().values()) == 6, 30)
                await wait_for(lambda: _scheduled_condition(corner.pods()["too-big"]) is not None, 30)

        asyncio.run(scenario_run())
        pods = corner.pods()
        per_node: dict[str, int] = {}
        for i in range(6):
            node = pods[f"p{i}"]["spec"]["nodeName"]
            per_node[node] = per_node.get(node, 0) + 1
            assert _scheduled_condition(pods[f"p{i}"]) == {
                **(_scheduled_condition(pods[f"p{i}"]) or {}),
                "type": "PodScheduled",
                "status": "True",
            }
        assert sorted(per_node.values()) == [2, 2, 2]  # 2 CPUs each: never overcommitted
        failed = _scheduled_condition(pods["too-big"])
        assert failed is not None
        assert (failed["status"], failed["reason"]) == ("False", "Unschedulable")
        # Nodes of other tests share the cluster (and fail the node selector), so only our part of the message.
        assert failed["message"].startswith("0/") and "3 Insufficient cpu" in failed["message"]
        assert "nodeName" not in pods["someone-elses"]["spec"]
        assert _scheduled_condition(pods["someone-elses"]) is None

        events = corner.events()
        scheduled = {e["regarding"]["name"]: e for e in events if e["reason"] == "Scheduled"}
        assert set(scheduled) == {f"p{i}" for i in range(6)}
        for name, event in scheduled.items():
            node = pods[name]["spec"]["nodeName"]
            assert event["note"] == f"Successfully assigned {corner.namespace}/{name} to {node}"
            assert (event["type"], event["action"]) == ("Normal", "Binding")
            assert event["reportingController"] == corner.scheduler_name
            assert event["reportingInstance"] == f"{corner.scheduler_name}-e2e"
            assert event["regarding"]["uid"] == pods[name]["metadata"]["uid"]
        (failure,) = [e for e in events if e["reason"] == "FailedScheduling"]
        assert failure["regarding"]["name"] == "too-big"
        assert failure["note"] == failed["message"]
        assert (failure["type"], failure["action"]) == ("Warning", "Scheduling")


def test_a_new_node_makes_a_waiting_pod_schedulable(control_plane: ControlPlane, tmp_path: Path) -> None:
    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("small", cpu="1"))

        async def scenario_run() -> None:
            async with RunningScheduler(corner) as live:
                corner.create(corner.pod("waits", cpu="2"))
                await wait_for(lambda: _scheduled_condition(corner.pods()["waits"]) is not None, 30)
                assert live.scheduler.queue.counts().unschedulable == 1
                corner.create(corner.node("large", cpu="4"))
                await wait_for(lambda: bool(corner.pods()["waits"]["spec"].get("nodeName")), 30)

        asyncio.run(scenario_run())
        assert corner.pods()["waits"]["spec"]["nodeName"] == f"large-{corner.tag}"


def test_a_claim_created_later_requeues_the_pod_that_waited_for_it(control_plane: ControlPlane, tmp_path: Path) -> None:
    """The storage informers feed the queue's hints: a pod VolumeBinding rejected for a missing claim is tried again
    as soon as the claim appears, not after the unschedulable pool's five-minute flush."""

    def message() -> str:
        condition = _scheduled_condition(corner.pods()["wants-claim"])
        return "" if condition is None else str(condition.get("message", ""))

    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("n0"))
        pod = corner.pod("wants-claim")
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": corner.namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }

        async def scenario_run() -> None:
            async with RunningScheduler(corner):
                corner.create(pod)
                await wait_for(lambda: 'persistentvolumeclaim "data" not found' in message(), 30)
                status, answer = control_plane.request(
                    "POST", f"/api/v1/namespaces/{corner.namespace}/persistentvolumeclaims", claim
                )
                assert status == 201, answer
                # No StorageClass and no volume: now the claim is there but unbound, a different reason.
                await wait_for(lambda: "pod has unbound immediate PersistentVolumeClaims" in message(), 30)

        asyncio.run(scenario_run())


def test_repeated_failures_become_one_event_series(control_plane: ControlPlane, tmp_path: Path) -> None:
    from kubesched.api.objects import Pod

    with scenario(control_plane, tmp_path) as corner:
        created = corner.create(corner.pod("again", scheduler="another-scheduler"))
        pod = Pod.from_dict(created, "test pod")

        async def scenario_run() -> None:
            async with RunningScheduler(corner) as live:
                for _ in range(4):
                    live.backend.event(pod, "Warning", "FailedScheduling", "Scheduling", "x" * 2000)
                await live.backend.events.drain()

        asyncio.run(scenario_run())
        events = [e for e in corner.events() if e["regarding"]["name"] == "again" and e["note"].startswith("x")]
        assert len(events) == 1
        assert events[0]["series"]["count"] == 4
        assert len(events[0]["note"]) == 1024 and events[0]["note"].endswith(" ...")


def test_binding_a_pod_bound_behind_our_back_answers_409(control_plane: ControlPlane, tmp_path: Path) -> None:
    from kubesched.api.objects import Pod
    from kubesched.backends.kube.errors import KubeApiError

    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("n0"))
        created = corner.create(corner.pod("raced"))
        status, _ = control_plane.request(
            "POST",
            f"/api/v1/namespaces/{corner.namespace}/pods/raced/binding",
            {"metadata": {"name": "raced"}, "target": {"kind": "Node", "name": f"n0-{corner.tag}"}},
        )
        assert status == 201

        async def scenario_run() -> None:
            async with RunningScheduler(corner) as live:
                with pytest.raises(KubeApiError) as conflict:
                    await live.backend.bind(Pod.from_dict(created, "stale pod"), f"n0-{corner.tag}")
                assert conflict.value.status == 409
                assert "already assigned" in conflict.value.message
                await wait_async(lambda: live.scheduler.cache.pod_count() >= 1, 10)

        asyncio.run(scenario_run())


# On Python 3.11, asyncio can leave the socket of a TLS connection whose handshake the dying API server cut
# off for the garbage collector (fixed in 3.12's sslproto); that is the server's restart, not our client.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_cache_converges_after_the_api_server_restarts(control_plane: ControlPlane, tmp_path: Path) -> None:
    with scenario(control_plane, tmp_path) as corner:
        corner.create(corner.node("stays"))
        corner.create(corner.node("goes"))
        corner.create(corner.pod("before"))

        async def scenario_run() -> None:
            async with RunningScheduler(corner) as live:
                await wait_for(lambda: bool(corner.pods()["before"]["spec"].get("nodeName")), 30)
                lists_before = {id(r): r.lists for r in live.backend.informers.reflectors}  # type: ignore[union-attr]
                await asyncio.to_thread(control_plane.restart_apiserver)
                # A change the watches cannot have seen: it happens while the reflectors reconnect.
                control_plane.request("DELETE", f"/api/v1/nodes/goes-{corner.tag}")
                await wait_async(lambda: f"goes-{corner.tag}" not in set(live.scheduler.cache.node_order()), 60)
                assert f"stays-{corner.tag}" in set(live.scheduler.cache.node_order())
                corner.create(corner.pod("after"))
                await wait_for(lambda: bool(corner.pods()["after"]["spec"].get("nodeName")), 60)
                relisted = [r for r in live.backend.informers.reflectors if r.lists > lists_before[id(r)]]  # type: ignore[union-attr]
                assert relisted, "no reflector listed again after the restart"

        asyncio.run(scenario_run())
        assert corner.pods()["after"]["spec"]["nodeName"] == f"stays-{corner.tag}"
