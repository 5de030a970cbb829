"""``kubesched run`` as a live cross-cluster hub, end to end: one envtest hub API server with the MemberCluster
CRD, two envtest members -- one behind a real agent on loopback HTTPS (pull mode, its token in a Secret on the
hub), one reached through its kubeconfig in a Secret (push mode) -- and a third MemberCluster whose token
Secret does not exist. The LiveScheduler runs in-process with a node profile and a cluster profile: a hub pod of
the cluster profile is bound to a cluster and the member has its pod (with the hub pod's uid); a pod of the node
profile lands on a hub Node; the MemberClusters' status is written; hub pods take their member pods' phase; the
broken one reads Ready=False with a reason naming the field, and turns to MemberUnreachable once its Secret
exists (its URL leads nowhere)."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.clock import RealClock
from kubesched.config.loader import load_config_dict
from kubesched.federation.wire import HUB_POD_UID_ANNOTATION
from kubesched.harness.envtest import ControlPlane
from kubesched.live.hub import HubOptions
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.agents import RunningAgent, make_node
from kubesched.testing.hubs import HUB_PLUGINS
from kubesched.testing.live_cluster import RunningScheduler, Scenario, scenario, wait_for

pytestmark = pytest.mark.e2e

CRD = Path(__file__).parents[2] / "deploy" / "crds" / "memberclusters.yaml"
MC = "/apis/multicluster.kubesched.io/v1alpha1/memberclusters"
REGION = "topology.kubernetes.io/region"


def apply_crd(plane: ControlPlane) -> None:
    crd = yaml.safe_load(CRD.read_text())
    status, answer = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status in (201, 409), answer
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, _ = plane.request("GET", MC)
        if status == 200:
            return
        time.sleep(0.1)
    raise AssertionError("the MemberCluster CRD was not served within 30 s")


@pytest.fixture(scope="module")
def push_member(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(assets, tmp_path_factory.mktemp("push-member")) as plane:
        yield plane


@pytest.fixture
def hub(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Scenario]:
    apply_crd(control_plane)
    with scenario(control_plane, tmp_path) as corner:
        yield corner
        control_plane.request("DELETE", MC, query={"labelSelector": f"e2e={corner.tag}"})


def _create(plane: ControlPlane, obj: dict[str, Any]) -> None:
    path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/secrets" if obj["kind"] == "Secret" else MC
    status, answer = plane.request("POST", path, obj)
    assert status == 201, answer


def _secret(namespace: str, name: str, key: str, value: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key: base64.b64encode(value).decode()},
    }


def _member_cluster(name: str, tag: str, region: str, connection: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.kubesched.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "labels": {"e2e": tag, REGION: region}},
        "spec": {"connection": connection},
    }


def _hub_config(corner: Scenario, hub_name: str) -> Any:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "profiles": [
            {"schedulerName": corner.scheduler_name},
            {"schedulerName": hub_name, "plugins": HUB_PLUGINS},
        ],
    }
    return load_config_dict(document, "e2e hub config", in_tree_registry())


def _hub_pod(corner: Scenario, name: str, scheduler: str, region: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": corner.namespace},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {REGION: region},
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def _ready(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    """The MemberCluster's Ready condition as written, or None."""
    status, answer = plane.request("GET", f"{MC}/{name}")
    assert status == 200, answer
    for condition in (answer.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return dict(condition)
    return None


def _terminating(plane: ControlPlane, namespace: str, name: str) -> bool:
    """A member pod being deleted (envtest has no kubelet to finish it)."""
    status, pod = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return status == 200 and bool(pod["metadata"].get("deletionTimestamp"))


def _set_phase(plane: ControlPlane, namespace: str, name: str, phase: str) -> None:
    """What the member's kubelet would report (envtest has none)."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    status, answer = plane.request(
        "PATCH", path, {"status": {"phase": phase}}, content_type="application/merge-patch+json"
    )
    assert status == 200, answer


def test_the_hub_places_pods_onto_members_and_writes_their_status(
    hub: Scenario, member: ControlPlane, push_member: ControlPlane, tmp_path: Path
) -> None:
    plane, tag, namespace = hub.plane, hub.tag, hub.namespace
    hub_name = f"hub-{tag}"
    east, west, broken = f"east-{tag}", f"west-{tag}", f"broken-{tag}"
    for each in (member, push_member):
        assert each.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})[0] == 201
    make_node(member, f"east-node-{tag}", cpu="4")
    make_node(push_member, f"west-node-{tag}", cpu="4")
    hub.create(hub.node("hub-node"))

    async def run() -> None:
        async with RunningAgent(member, tmp_path / "agent", clock=RealClock(), cluster_name=east) as agent:
            ca = base64.b64encode(agent.ca_file.read_bytes()).decode()
            kubeconfig = push_member.write_kubeconfig(tmp_path / "west.kubeconfig").read_bytes()
            _create(plane, _secret(namespace, "east-token", "token", agent.token.encode()))
            _create(plane, _secret(namespace, "west-kubeconfig", "kubeconfig", kubeconfig))
            pull = {"url": agent.url, "caBundle": ca, "tokenSecretRef": {"namespace": namespace, "name": "east-token"}}
            missing = {"namespace": namespace, "name": f"missing-{uuid.uuid4().hex[:6]}"}
            _create(plane, _member_cluster(east, tag, "east", {"agent": pull}))
            _create(
                plane,
                _member_cluster(
                    west, tag, "west", {"kubeconfigSecretRef": {"namespace": namespace, "name": "west-kubeconfig"}}
                ),
            )
            _create(
                plane,
                _member_cluster(
                    broken, tag, "east", {"agent": {"url": "https://127.0.0.1:1", "tokenSecretRef": missing}}
                ),
            )
            options = HubOptions(
                refresh_interval=0.5, refresh_deadline=2.0, status_min_interval=0.2, status_resync_interval=2.0
            )
            config = _hub_config(hub, hub_name)
            async with RunningScheduler(hub, config, user="admin", hub=options) as live:
                hub_plane = live.hub
                assert hub_plane is not None
                hub.create(_hub_pod(hub, "web-east", hub_name, "east"))
                hub.create(_hub_pod(hub, "web-west", hub_name, "west"))
                hub.create(hub.pod("local"))

                def bound(name: str, where: str) -> bool:
                    return bool(hub.pods().get(name, {}).get("spec", {}).get("nodeName") == where)

                await wait_for(lambda: bound("web-east", east), 30)
                await wait_for(lambda: bound("web-west", west), 30)
                await wait_for(lambda: bound("local", f"hub-node-{tag}"), 30)

                hub_uid = hub.pods()["web-east"]["metadata"]["uid"]
                status, in_member = member.request("GET", f"/api/v1/namespaces/{namespace}/pods/web-east")
                assert status == 200, in_member
                assert in_member["metadata"]["annotations"][HUB_POD_UID_ANNOTATION] == hub_uid
                assert in_member["spec"]["nodeName"] == f"east-node-{tag}"
                status, in_push = push_member.request("GET", f"/api/v1/namespaces/{namespace}/pods/web-west")
                assert status == 200, in_push
                assert (
                    in_push["metadata"]["annotations"][HUB_POD_UID_ANNOTATION]
                    == hub.pods()["web-west"]["metadata"]["uid"]
                )

                # Status from the cache: the member counts the pod it runs (cpu 1 of 4).
                def east_status() -> dict[str, Any]:
                    return dict(plane.request("GET", f"{MC}/{east}")[1].get("status") or {})

                await wait_for(lambda: east_status().get("allocated", {}).get("cpu") == "1", 20)
                written = east_status()
                assert written["ready"] is True
                assert written["allocatable"]["cpu"] == "4"
                assert written["observedAt"]
                assert written["nodeSummary"] == [{"count": 1, "free": {"cpu": "3", "memory": "4Gi", "pods": "9"}}]
                assert any(api["groupVersion"] == "v1" for api in written["apiEnablements"])
                condition = _ready(plane, east)
                assert condition is not None
                assert (condition["status"], condition["reason"]) == ("True", "MemberReady")

                # Each hub pod takes its member pod's phase (the agent reports it; push mode too). A finished
                # member pod finishes its hub pod, which then leaves the hub's assigned pods: nothing to delete.
                hub.create(_hub_pod(hub, "job-east", hub_name, "east"))
                await wait_for(lambda: bound("job-east", east), 30)
                wanted = {"web-east": "Running", "web-west": "Running", "job-east": "Succeeded"}
                for each, name in ((member, "web-east"), (push_member, "web-west"), (member, "job-east")):
                    _set_phase(each, namespace, name, wanted[name])

                def phases() -> dict[str, Any]:
                    pods = hub.pods()
                    return {name: pods.get(name, {}).get("status", {}).get("phase") for name in wanted}

                await wait_for(lambda: phases() == wanted, 20)
                # The API server shows a PATCH before the mirror's coroutine resumes to count it.
                await wait_for(lambda: hub_plane.phases.written == 3, 5)
                await asyncio.sleep(1.5)  # refreshes every 0.5 s: a phase reached is not written again
                assert (hub_plane.phases.written, hub_plane.phases.failed) == (3, 0)

                # The broken member: Ready=False, the reason names the field; never a crash, never a placement.
                await wait_for(lambda: (_ready(plane, broken) or {}).get("reason") == "SecretNotFound", 20)
                condition = _ready(plane, broken)
                assert condition is not None and condition["status"] == "False"
                assert condition["message"].startswith("spec.connection.agent.tokenSecretRef: Secret ")
                # Its Secret created later is read at the next refresh; the URL still leads nowhere.
                _create(plane, _secret(namespace, missing["name"], "token", b"some-token"))
                await wait_for(lambda: (_ready(plane, broken) or {}).get("reason") == "MemberUnreachable", 20)

                # A MemberCluster deleted leaves the hub's nodes.
                plane.request("DELETE", f"{MC}/{broken}")
                await wait_for(lambda: broken not in hub_plane.super_nodes.nodes, 10)
                assert set(hub_plane.super_nodes.nodes) == {east, west}

                # Rate-limited: with nothing changing, each status is written again only every resync (2 s),
                # although the members are refreshed every 0.5 s.
                writes = hub_plane.statuses.written
                await asyncio.sleep(3)
                assert hub_plane.statuses.written - writes <= 2 * 2

                # Deleting a hub pod deletes its member pod: gracefully (the hub pod waits, terminating, for the
                # hub to act as its kubelet and remove it) and at once (grace period 0).
                def gone(each: ControlPlane, name: str) -> bool:
                    return each.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")[0] == 404

                plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/web-east")
                plane.request(
                    "DELETE", f"/api/v1/namespaces/{namespace}/pods/web-west", query={"gracePeriodSeconds": "0"}
                )
                await wait_for(lambda: gone(member, "web-east") or _terminating(member, namespace, "web-east"), 20)
                await wait_for(lambda: gone(plane, "web-east"), 20)
                await wait_for(
                    lambda: gone(push_member, "web-west") or _terminating(push_member, namespace, "web-west"), 20
                )
                assert sorted(hub_plane.reaped) == [
                    (east, f"{namespace}/web-east", True),
                    (west, f"{namespace}/web-west", True),
                ]

    asyncio.run(run())
    for each in (member, push_member):
        each.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", query={"gracePeriodSeconds": "0"})
        each.request("DELETE", "/api/v1/nodes")


def test_the_agent_deletes_only_the_member_pod_of_the_hub_pod_named(
    member: ControlPlane, agent_namespace: str, tmp_path: Path
) -> None:
    make_node(member, "delete-node")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": agent_namespace, "annotations": {HUB_POD_UID_ANNOTATION: "uid-a"}},
        "spec": {"nodeName": "delete-node", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    assert member.request("POST", f"/api/v1/namespaces/{agent_namespace}/pods", pod)[0] == 201
    path = f"/v1/pods/{agent_namespace}/web"

    async def run() -> list[tuple[int, Any]]:
        async with RunningAgent(member, tmp_path / "agent", clock=RealClock()) as agent:
            return [
                await agent.call("DELETE", f"{path}?hubPodUID=uid-b"),
                await agent.call("DELETE", path),
                await agent.call("DELETE", f"{path}?hubPodUID=uid-a"),
                await agent.call("DELETE", f"{path}?hubPodUID=uid-a"),
                await agent.call("DELETE", "/v1/pods/nowhere/none?hubPodUID=uid-a"),
            ]

    other, without, mine, again, none = asyncio.run(run())
    assert (other[0], other[1]["reason"]) == (409, "Conflict")
    assert (without[0], without[1]["reason"]) == (400, "Invalid")
    assert mine == (200, {"deleted": True})
    assert again == (200, {"deleted": False})  # being deleted already (no kubelet finishes it): not deleted twice
    assert none == (200, {"deleted": False})


def test_with_only_a_cluster_profile_a_pod_waits_for_a_member_that_is_not_ready(hub: Scenario) -> None:
    """Only the hub plane runs; the one member's token Secret is missing: the pod is told why it waits."""
    plane, tag, namespace = hub.plane, hub.tag, hub.namespace
    hub_name, lonely = f"hub-{tag}", f"lonely-{tag}"
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": hub_name,
                "plugins": {
                    "multiPoint": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "PrioritySort"}, {"name": "ClusterReadiness"}, {"name": "ClusterBind"}],
                    }
                },
            }
        ],
    }
    config = load_config_dict(document, "e2e hub-only config", in_tree_registry())
    missing = {"namespace": namespace, "name": "nowhere"}
    _create(
        plane,
        _member_cluster(lonely, tag, "east", {"agent": {"url": "https://127.0.0.1:1", "tokenSecretRef": missing}}),
    )

    async def run() -> None:
        options = HubOptions(refresh_interval=0.5, status_min_interval=0.2)
        async with RunningScheduler(hub, config, user="admin", hub=options) as live:
            assert live.hub is not None and live.scheduler is live.hub.scheduler
            hub.create(_hub_pod(hub, "waits", hub_name, "east"))

            def told() -> bool:
                notes = [e.get("note", "") for e in hub.events() if e.get("reason") == "FailedScheduling"]
                return any("0/1 clusters are available" in note and "not ready" in note for note in notes)

            try:
                await wait_for(told, 20)
            except AssertionError:
                raise AssertionError(f"events: {[(e.get('reason'), e.get('note')) for e in hub.events()]}") from None
            await wait_for(lambda: (_ready(plane, lonely) or {}).get("reason") == "SecretNotFound", 20)
            assert not hub.pods()["waits"]["spec"].get("nodeName")

    asyncio.run(run())
