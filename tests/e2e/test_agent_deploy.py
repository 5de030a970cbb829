"""deploy/agent/ against a real kube-apiserver (the member): every object is accepted (the pod template under the
namespace's "restricted" Pod Security), and the agent does its whole job -- state, reserve, bind, release,
expiry -- with exactly the ServiceAccount's grants, which deny what it never does."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.clock import VirtualClock
from kubesched.federation.wire import BIND_PATH, RESERVATIONS_PATH, STATE_PATH
from kubesched.harness.envtest import ControlPlane
from kubesched.testing.agents import RunningAgent, make_node

pytestmark = pytest.mark.e2e

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "agent"
NAMESPACE = "kubesched-system"
WORKLOADS = "agent-deploy-workloads"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
    "ClusterRole": f"{RBAC}/clusterroles",
    "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
    "Role": f"{RBAC}/namespaces/{NAMESPACE}/roles",
    "RoleBinding": f"{RBAC}/namespaces/{NAMESPACE}/rolebindings",
    "Deployment": f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
    "Service": f"/api/v1/namespaces/{NAMESPACE}/services",
}


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def test_the_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.fixture(scope="module")
def installed(member: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """namespace.yaml and rbac.yaml created for real; a kubeconfig with a TokenRequest token of the ServiceAccount."""
    for name in ("namespace.yaml", "rbac.yaml"):
        for doc in documents(name):
            status, answer = member.request("POST", PATHS[doc["kind"]], doc)
            assert status == 201, answer
    assert member.request("POST", "/api/v1/namespaces", {"metadata": {"name": WORKLOADS}})[0] == 201
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}
    status, answer = member.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/kubesched-agent/token", request
    )
    assert status == 201, answer
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "member",
                "cluster": {
                    "server": member.url,
                    "certificate-authority-data": base64.b64encode(member.ca_file.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": "agent", "user": {"token": answer["status"]["token"]}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "agent"}}],
        "current-context": "member",
    }
    path = tmp_path_factory.mktemp("agent-sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield path
    member.request("DELETE", f"/api/v1/namespaces/{WORKLOADS}/pods", query={"gracePeriodSeconds": "0"})
    member.request("DELETE", "/api/v1/nodes")


def test_the_deployment_and_its_pod_are_accepted(member: ControlPlane, installed: Path) -> None:
    for doc in documents("deployment.yaml"):
        status, answer = member.request("POST", PATHS[doc["kind"]], doc, query={"dryRun": "All"})
        assert status == 201, answer
        if doc["kind"] == "Deployment":
            template = doc["spec"]["template"]
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent-template"}, **template}
            pod["metadata"] = {**template["metadata"], "name": "agent-template"}
            status, answer = member.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod, query={"dryRun": "All"}
            )
            assert status == 201, answer  # Pod Security "restricted" admits it


def allowed(plane: ControlPlane, kubeconfig: Path, **attributes: str) -> bool:
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    status, answer = plane.request("POST", path, review, token=token)
    assert status == 201, answer
    return bool(answer["status"]["allowed"])


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"verb": "get", "resource": "secrets", "namespace": NAMESPACE}, id="no-secrets"),
        pytest.param({"verb": "delete", "resource": "pods", "namespace": WORKLOADS}, id="no-pod-deletion"),
        pytest.param({"verb": "update", "resource": "nodes"}, id="no-node-writes"),
        pytest.param(
            {"verb": "create", "resource": "configmaps", "namespace": "default"}, id="configmaps-only-at-home"
        ),
        pytest.param({"verb": "update", "resource": "configmaps", "namespace": NAMESPACE}, id="no-configmap-updates"),
        pytest.param({"verb": "create", "resource": "namespaces"}, id="no-namespace-creation"),
    ],
)
def test_the_agent_is_denied_what_it_never_does(
    member: ControlPlane, installed: Path, attributes: dict[str, str]
) -> None:
    assert not allowed(member, installed, **attributes)


def test_the_agent_does_its_whole_job_with_its_grants(member: ControlPlane, installed: Path, tmp_path: Path) -> None:
    make_node(member, "n1", cpu="2")
    clock = VirtualClock()
    pod: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": WORKLOADS, "uid": "hub-web"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
    }

    async def run() -> None:
        async with RunningAgent(member, tmp_path, clock=clock, namespace=NAMESPACE, kubeconfig=installed) as agent:
            assert (await agent.call("GET", STATE_PATH))[1]["apis"]  # discovery answered too
            reserve = {"id": "r1", "requests": {"cpu": "1"}, "ttlSeconds": 30}
            assert (await agent.call("POST", RESERVATIONS_PATH, reserve))[0] == 201
            assert (await agent.call("POST", BIND_PATH, {"reservationId": "r1", "pod": pod}))[0] == 201
            assert (await agent.call("POST", BIND_PATH, {"reservationId": "r1", "pod": pod}))[0] == 200
            assert (await agent.call("POST", RESERVATIONS_PATH, {**reserve, "id": "r2"}))[0] == 201
            assert await agent.call("DELETE", f"{RESERVATIONS_PATH}/r2") == (200, {"released": True, "pod": None})
            assert (await agent.call("POST", RESERVATIONS_PATH, {**reserve, "id": "r3"}))[0] == 201
            clock.advance(31)
            assert await agent.agent.sweep_expired() == ["r3"]
            # The agent follows its member by watch: a pod the member placed itself shows in the next state.
            local = {**pod, "metadata": {"name": "local", "namespace": WORKLOADS}}
            local["spec"] = {**pod["spec"], "nodeName": "n1"}
            assert member.request("POST", f"/api/v1/namespaces/{WORKLOADS}/pods", local)[0] == 201
            for _ in range(50):
                state = (await agent.call("GET", STATE_PATH))[1]
                if state["allocated"]["cpu"] == 2000:
                    break
                await asyncio.sleep(0.1)
            assert state["allocated"]["cpu"] == 2000, "the watch never brought the member's own pod"

    asyncio.run(run())
    _, pods = member.request("GET", f"/api/v1/namespaces/{WORKLOADS}/pods")
    placed = sorted((p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods["items"])
    assert placed == [("local", "n1"), ("web", "n1")]
