"""The cluster agent against a real kube-apiserver (one envtest control plane as the member), on loopback HTTPS:
authentication, state, reservations held in the member (idempotent, refused when they do not fit, surviving an
agent restart, expiring by themselves), and bind (one pod per reservation, on the reserved node)."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.clock import VirtualClock
from kubesched.federation.wire import BIND_PATH, RESERVATIONS_PATH, STATE_PATH
from kubesched.harness.certificates import write_server_certificates
from kubesched.harness.envtest import ControlPlane
from kubesched.testing.agents import RunningAgent, make_node

pytestmark = pytest.mark.e2e


@pytest.fixture
def namespace(agent_namespace: str) -> str:
    return agent_namespace


def hub_pod(name: str, namespace: str, cpu: str = "1", uid: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"hub-{name}",
            "labels": {"app": "web"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": True}
            ],
        },
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
            # about the hub's choice of cluster: the agent must drop these, or the member refuses the pod
            "nodeSelector": {"topology.kubernetes.io/region": "eu"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "priority": 0,
            "schedulerName": "multicluster-scheduler",
        },
    }


def reserve_body(rid: str, cpu: str | int = "1", ttl: float = 60, pod_uid: str = "") -> dict[str, Any]:
    return {"id": rid, "requests": {"cpu": cpu}, "ttlSeconds": ttl, "podUID": pod_uid}


def configmaps(plane: ControlPlane, namespace: str) -> list[str]:
    status, listed = plane.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert status == 200
    names = (item["metadata"]["name"] for item in listed["items"])
    return sorted(name for name in names if name != "kube-root-ca.crt")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("GET", STATE_PATH, None, id="state"),
        pytest.param("POST", RESERVATIONS_PATH, reserve_body("r1"), id="reserve"),
        pytest.param("DELETE", f"{RESERVATIONS_PATH}/r1", None, id="release"),
        pytest.param("POST", BIND_PATH, {"reservationId": "r1", "pod": {}}, id="bind"),
    ],
)
@pytest.mark.parametrize(
    "present",
    [
        pytest.param(lambda token: "", id="no-token"),
        pytest.param(lambda token: "wrong", id="wrong-token"),
        pytest.param(lambda token: token + "x", id="token-with-a-suffix"),
        pytest.param(lambda token: token[:-1], id="token-prefix"),
    ],
)
def test_every_endpoint_refuses_a_request_without_the_token(
    member: ControlPlane,
    namespace: str,
    tmp_path: Path,
    method: str,
    path: str,
    body: Any,
    present: Callable[[str], str],
) -> None:
    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=namespace) as agent:
            status, answer = await agent.call(method, path, body, token=present(agent.token))
            assert (status, answer["reason"]) == (401, "Unauthorized")
            assert configmaps(member, namespace) == []  # nothing reserved behind the refusal

    asyncio.run(run())


def test_state_reports_capacity_per_node_workloads_and_served_apis(
    member: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="4", memory="8Gi")
    make_node(member, "n2", cpu="2", memory="4Gi")
    running, pending = hub_pod("already-there", namespace, cpu="1"), hub_pod("pending", namespace)
    for pod in (running, pending):
        for hub_only in ("nodeSelector", "affinity", "priority"):
            del pod["spec"][hub_only]
    running["spec"]["nodeName"] = "n1"
    for pod in (running, pending):  # the pending one has no node: it holds nothing
        assert member.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)[0] == 201

    clock = VirtualClock(1_800_000_000.0)

    async def run() -> dict[str, Any]:
        async with RunningAgent(member, tmp_path, clock=clock, namespace=namespace, cluster_name="eu-1") as agent:
            status, state = await agent.call("GET", STATE_PATH)
            assert status == 200
            return dict(state)

    state = asyncio.run(run())
    gib = 2**30
    assert (state["name"], state["ready"]) == ("eu-1", True)
    # As of the view's last list or open watch: the moment before the watch opens after the first list is behind.
    assert 1_800_000_000.0 - 1 < state["observedAt"] <= 1_800_000_000.0
    assert state["allocatable"] == {"cpu": 6000, "memory": 12 * gib, "pods": 20}
    assert state["allocated"] == {"cpu": 1000, "pods": 1}  # the pending pod holds nothing
    assert sorted(state["nodes"], key=lambda b: b["free"]["cpu"]) == [
        {"count": 1, "free": {"cpu": 2000, "memory": 4 * gib, "pods": 10}},
        {"count": 1, "free": {"cpu": 3000, "memory": 8 * gib, "pods": 9}},
    ]
    assert {"v1/Pod", "apps/v1/Deployment", "batch/v1/Job"} <= set(state["apis"])
    assert {"key": ["app", namespace, "web"], "count": 1} in state["workloads"]
    assert {"key": ["owner", namespace, "ReplicaSet", "web"], "count": 1} in state["workloads"]
    assert state["reservations"] == []


def test_a_reservation_holds_capacity_is_idempotent_and_is_refused_when_it_does_not_fit(
    member: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="2")

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=namespace) as agent:
            status, first = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "1500m", pod_uid="p1"))
            assert status == 201
            assert (first["reservation"]["node"], first["reservation"]["requests"]) == ("n1", {"cpu": 1500})
            status, again = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", 1500, pod_uid="p1"))
            assert (status, again) == (200, first)  # the same reservation, not a second one
            _, state = await agent.call("GET", STATE_PATH)
            assert state["allocated"] == {"cpu": 1500, "pods": 1}
            assert state["nodes"][0]["free"]["cpu"] == 500
            assert state["accountedPods"] == ["p1"]

            status, unfit = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r2", "1"))
            assert (status, unfit["reason"]) == (409, "Unfit")
            status, other = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "1"))
            assert (status, other["reason"]) == (409, "Conflict")

            assert await agent.call("DELETE", f"{RESERVATIONS_PATH}/r1") == (200, {"released": True, "pod": None})
            assert await agent.call("DELETE", f"{RESERVATIONS_PATH}/r1") == (200, {"released": False, "pod": None})
            status, _ = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r2", "1"))
            assert status == 201  # the released capacity is free again
            assert configmaps(member, namespace) == ["kubesched-reservation-r2"]

    asyncio.run(run())


def test_a_tainted_node_is_reserved_and_bound_only_for_a_pod_that_tolerates_its_taints(
    member: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="1")
    gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    status, answer = member.request(
        "PATCH", "/api/v1/nodes/n1", {"spec": {"taints": [gpu_taint]}}, content_type="application/merge-patch+json"
    )
    assert status == 200, answer
    make_node(member, "n2", cpu="1")
    toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=namespace) as agent:
            _, state = await agent.call("GET", STATE_PATH)
            assert sorted((bucket.get("taints") or []) == [gpu_taint] for bucket in state["nodes"]) == [False, True]
            _, plain = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "1"))
            assert plain["reservation"]["node"] == "n2"  # n1 comes first by name, but its taint is not tolerated
            status, unfit = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r2", "1"))
            assert (status, unfit["reason"]) == (409, "Unfit")
            tolerating = {**reserve_body("r2", "1", pod_uid="hub-gpu"), "tolerations": [toleration]}
            status, held = await agent.call("POST", RESERVATIONS_PATH, tolerating)
            assert (status, held["reservation"]["node"]) == (201, "n1")
            pod = hub_pod("gpu", namespace)
            pod["spec"]["tolerations"] = [toleration]
            status, _ = await agent.call("POST", BIND_PATH, {"reservationId": "r2", "pod": pod})
            assert status == 201

    asyncio.run(run())
    status, pod = member.request("GET", f"/api/v1/namespaces/{namespace}/pods/gpu")
    assert status == 200, pod
    assert pod["spec"]["nodeName"] == "n1"
    assert toleration in pod["spec"]["tolerations"]  # the member's own taint checks would let it stay


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({"id": "Bad_Id", "requests": {}, "ttlSeconds": 5}, "id: must be a DNS label", id="bad-id"),
        pytest.param({"id": "r", "requests": {}, "ttlSeconds": 0}, "ttlSeconds: must be", id="zero-ttl"),
        pytest.param({"id": "r", "requests": {}, "ttlSeconds": 7200}, "ttlSeconds: must be", id="ttl-too-long"),
        pytest.param({"id": "r", "requests": {"cpu": "lots"}, "ttlSeconds": 5}, "requests.cpu:", id="bad-quantity"),
        pytest.param({"id": "r", "requests": {"cpu": -1}, "ttlSeconds": 5}, "must not be negative", id="negative"),
        pytest.param([], "the body must be a JSON object", id="not-an-object"),
    ],
)
def test_a_malformed_reservation_is_400_naming_the_field(
    member: ControlPlane, namespace: str, tmp_path: Path, body: Any, message: str
) -> None:
    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=namespace) as agent:
            status, answer = await agent.call("POST", RESERVATIONS_PATH, body)
            assert (status, answer["reason"]) == (400, "Invalid")
            assert message in answer["message"]

    asyncio.run(run())


def test_bind_creates_one_pod_on_the_reserved_node_and_consumes_the_reservation(
    member: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="1")
    make_node(member, "n2", cpu="4")

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=namespace) as agent:
            _, held = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "2", pod_uid="hub-web-1"))
            assert held["reservation"]["node"] == "n2"  # n1 has 1 CPU: first node, by name, with room
            status, too_big = await agent.call(
                "POST", BIND_PATH, {"reservationId": "r1", "pod": hub_pod("web-1", namespace, cpu="3")}
            )
            assert (status, too_big["reason"]) == (409, "Conflict")

            bind = {"reservationId": "r1", "pod": hub_pod("web-1", namespace, cpu="2")}
            status, bound = await agent.call("POST", BIND_PATH, bind)
            assert status == 201
            assert (bound["pod"]["name"], bound["pod"]["node"]) == ("web-1", "n2")
            status, again = await agent.call("POST", BIND_PATH, bind)
            assert (status, again) == (200, bound)  # the same pod, not a second one

            _, state = await agent.call("GET", STATE_PATH)
            assert state["reservations"] == []
            assert state["allocated"] == {"cpu": 2000, "pods": 1}  # counted once: as a pod now
            assert state["accountedPods"] == ["hub-web-1"]
            # The member pod is the commit record: the same hub pod under any reservation gets the pod it has...
            status, same = await agent.call("POST", BIND_PATH, {"reservationId": "nope", "pod": bind["pod"]})
            assert (status, same) == (200, bound)
            # ... and another hub pod under a reservation that does not exist gets nothing.
            other = hub_pod("web-2", namespace, cpu="2")
            status, missing = await agent.call("POST", BIND_PATH, {"reservationId": "nope", "pod": other})
            assert (status, missing["reason"]) == (404, "NotFound")

    asyncio.run(run())
    _, pods = member.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert [p["metadata"]["name"] for p in pods["items"]] == ["web-1"]
    pod = pods["items"][0]
    assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubesched"
    assert pod["metadata"]["annotations"]["multicluster.kubesched.io/reservation-id"] == "r1"
    assert pod["metadata"]["annotations"]["multicluster.kubesched.io/hub-pod-uid"] == "hub-web-1"
    assert "ownerReferences" not in pod["metadata"]  # the hub's owners do not exist in the member
    assert ("nodeSelector" in pod["spec"], "affinity" in pod["spec"]) == (False, False)  # cluster-level constraints
    assert configmaps(member, namespace) == []


def test_an_unconfirmed_reservation_expires_by_itself(member: ControlPlane, namespace: str, tmp_path: Path) -> None:
    make_node(member, "n1", cpu="1")
    clock = VirtualClock()

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=clock, namespace=namespace, sweep_interval=5) as agent:
            assert (await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "1", ttl=30)))[0] == 201
            _, unfit = await agent.call("POST", RESERVATIONS_PATH, reserve_body("r2", "1", ttl=30))
            assert unfit["reason"] == "Unfit"
            clock.advance(29)
            await asyncio.sleep(0.2)
            assert configmaps(member, namespace) == ["kubesched-reservation-r1"]  # not yet

            clock.advance(6)  # past the TTL, and the next sweep (5 s after the last) deletes it
            for _ in range(100):
                if configmaps(member, namespace) == []:
                    break
                await asyncio.sleep(0.05)
            assert configmaps(member, namespace) == []
            _, state = await agent.call("GET", STATE_PATH)
            assert (state["reservations"], state["allocated"]) == ([], {"pods": 0})
            status, late = await agent.call(
                "POST", BIND_PATH, {"reservationId": "r1", "pod": hub_pod("late", namespace)}
            )
            assert (status, late["reason"]) == (404, "NotFound")  # a hub that confirms too late places nothing

    asyncio.run(run())
    assert member.request("GET", f"/api/v1/namespaces/{namespace}/pods")[1]["items"] == []


def test_an_expired_but_unswept_reservation_holds_nothing_and_cannot_be_bound(
    member: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    make_node(member, "n1", cpu="1")
    clock = VirtualClock()

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=clock, namespace=namespace, sweep_interval=3600) as agent:
            assert (await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "1", ttl=30)))[0] == 201
            clock.advance(31)  # no sweep runs within the hour
            _, state = await agent.call("GET", STATE_PATH)
            assert state["nodes"][0]["free"]["cpu"] == 1000
            status, late = await agent.call("POST", BIND_PATH, {"reservationId": "r1", "pod": hub_pod("p", namespace)})
            assert (status, late["reason"]) == (410, "Expired")
            assert configmaps(member, namespace) == []

    asyncio.run(run())


def test_an_agent_restart_keeps_its_reservations(member: ControlPlane, namespace: str, tmp_path: Path) -> None:
    make_node(member, "n1", cpu="1")

    clock = VirtualClock()

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=clock, namespace=namespace) as agent:
            assert (await agent.call("POST", RESERVATIONS_PATH, reserve_body("r1", "1", pod_uid="hub-p")))[0] == 201
            await agent.stop()
            await agent.start()  # a new process would do the same: everything is read back from the member
            _, state = await agent.call("GET", STATE_PATH)
            assert [r["id"] for r in state["reservations"]] == ["r1"]
            assert state["nodes"][0]["free"]["cpu"] == 0
            assert (await agent.call("POST", RESERVATIONS_PATH, reserve_body("r2", "1")))[1]["reason"] == "Unfit"
            bind = {"reservationId": "r1", "pod": hub_pod("p", namespace, uid="hub-p")}
            # Its predecessor may have sent a create under r1 that has not landed yet: no second one until it can't.
            status, settling = await agent.call("POST", BIND_PATH, bind)
            assert (status, settling["reason"]) == (503, "Settling")
            clock.advance(20)  # past the agent's in-flight window (its request timeout, 10 s, + 5 s); r1 lives 60 s
            status, bound = await agent.call("POST", BIND_PATH, bind)
            assert (status, bound["pod"]["node"]) == (201, "n1")

    asyncio.run(run())


def test_the_agent_command_serves_until_sigterm(member: ControlPlane, namespace: str, tmp_path: Path) -> None:
    make_node(member, "n1", cpu="2")
    ca, cert, key = write_server_certificates(tmp_path / "pki")
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    kubeconfig = member.write_kubeconfig(tmp_path / "member.kubeconfig")
    command = [sys.executable, "-m", "kubesched.cli.main", "agent", "--kubeconfig", str(kubeconfig)]
    command += ["--listen", "127.0.0.1:0", "--token-file", str(token_file), "--tls-cert", str(cert)]
    command += ["--tls-key", str(key), "--namespace", namespace, "--cluster-name", "eu-1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("serving on https://127.0.0.1:"):
            process.kill()
            pytest.fail(f"the agent did not start: {line}{process.stderr.read() if process.stderr else ''}")
        url = line.split()[-1]
        context = ssl.create_default_context(cafile=str(ca))
        request = urllib.request.Request(url + STATE_PATH, headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            state = json.loads(answer.read())
        assert (state["name"], state["allocatable"]["cpu"]) == ("eu-1", 2000)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()


def test_releasing_a_malformed_id_is_400(member: ControlPlane, namespace: str, tmp_path: Path) -> None:
    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=VirtualClock(), namespace=namespace) as agent:
            status, answer = await agent.call("DELETE", f"{RESERVATIONS_PATH}/Not_A_Label")
            assert (status, answer["reason"]) == (400, "Invalid")

    asyncio.run(run())
