"""The test control plane against itself: a real kube-apiserver and etcd, and the answers tests rely on.

Binding answers 201 and then 409; the system:kube-scheduler identity gets the built-in scheduler role and no
more; service-account tokens are signed and verified; an older resourceVersion answers 410 once etcd is
compacted (without the watch cache) or kube-apiserver restarted (with it); a restart keeps the data; and a
start that fails says why and leaves no process behind.
"""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.harness.envtest import ControlPlane, ControlPlaneError

pytestmark = pytest.mark.e2e

NAMESPACE = "/api/v1/namespaces/default"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_node(plane: ControlPlane, name: str) -> dict[str, Any]:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    status, created = plane.request("POST", "/api/v1/nodes", node)
    assert status == 201, created
    return created  # type: ignore[no-any-return]


def create_pod(plane: ControlPlane, name: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }
    status, created = plane.request("POST", f"{NAMESPACE}/pods", pod)
    assert status == 201, created
    return created  # type: ignore[no-any-return]


def create_config_map(plane: ControlPlane, name: str) -> str:
    """Create a ConfigMap and return its resourceVersion."""
    status, created = plane.request("POST", f"{NAMESPACE}/configmaps", {"metadata": {"name": name}})
    assert status == 201, created
    return str(created["metadata"]["resourceVersion"])


def touch_config_map(plane: ControlPlane, name: str, times: int) -> None:
    for i in range(times):
        patch = {"data": {"n": str(i)}}
        status, patched = plane.request(
            "PATCH", f"{NAMESPACE}/configmaps/{name}", patch, content_type="application/merge-patch+json"
        )
        assert status == 200, patched


def watch_config_maps(plane: ControlPlane, resource_version: str) -> list[dict[str, Any]]:
    query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "1"}
    deadline = time.monotonic() + 10
    status, events = plane.request("GET", f"{NAMESPACE}/configmaps", query=query)
    while status == 429 and time.monotonic() < deadline:  # a watch cache still initialising after a restart
        time.sleep(0.2)
        status, events = plane.request("GET", f"{NAMESPACE}/configmaps", query=query)
    assert status == 200, events  # a watch that cannot start still answers 200: the error is an event
    assert isinstance(events, list)
    return events


def binding(pod: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}


def test_the_api_server_is_ready_over_verified_tls(control_plane: ControlPlane) -> None:
    assert control_plane.url.startswith("https://127.0.0.1:")
    assert control_plane.request("GET", "/readyz") == (200, "ok")
    status, version = control_plane.request("GET", "/version")
    assert status == 200 and version["major"] == "1", version


def test_a_new_node_has_no_taints_and_a_new_pod_needs_no_service_account(control_plane: ControlPlane) -> None:
    node = create_node(control_plane, unique("node"))
    assert "taints" not in node["spec"]  # TaintNodesByCondition is off: no not-ready taint
    pod = create_pod(control_plane, unique("pod"))
    assert pod["status"]["phase"] == "Pending" and "nodeName" not in pod["spec"]


def test_binding_answers_201_then_409_for_a_bound_pod(control_plane: ControlPlane) -> None:
    node, pod = unique("node"), unique("pod")
    create_node(control_plane, node)
    create_pod(control_plane, pod)

    path = f"{NAMESPACE}/pods/{pod}/binding"
    status, answer = control_plane.request("POST", path, binding(pod, node), user="scheduler")
    assert (status, answer["status"]) == (201, "Success")
    status, answer = control_plane.request("POST", path, binding(pod, node), user="scheduler")
    assert (status, answer["reason"]) == (409, "Conflict")
    assert f'pod {pod} is already assigned to node "{node}"' in answer["message"]

    status, bound = control_plane.request("GET", f"{NAMESPACE}/pods/{pod}")
    assert status == 200 and bound["spec"]["nodeName"] == node
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][0].items()


def test_the_scheduler_identity_has_the_built_in_scheduler_role_only(control_plane: ControlPlane) -> None:
    status, review = control_plane.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        user="scheduler",
    )
    assert status == 201
    assert review["status"]["userInfo"]["username"] == "system:kube-scheduler"
    assert review["status"]["userInfo"]["groups"] == ["system:authenticated"]

    assert control_plane.request("GET", "/api/v1/nodes", user="scheduler")[0] == 200
    assert control_plane.request("GET", "/api/v1/pods", user="scheduler")[0] == 200
    name = unique("node")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    status, answer = control_plane.request("POST", "/api/v1/nodes", node, user="scheduler")
    assert (status, answer["reason"]) == (403, "Forbidden")
    assert 'User "system:kube-scheduler" cannot create resource "nodes"' in answer["message"]
    status, answer = control_plane.request("GET", "/api/v1/secrets", user="scheduler")
    assert status == 403, answer
    assert control_plane.request("GET", f"/api/v1/nodes/{name}")[0] == 404  # the refused create left nothing


def test_an_unknown_token_is_unauthorized(control_plane: ControlPlane) -> None:
    status, answer = control_plane.request("GET", "/api/v1/nodes", token="not-a-token")
    assert (status, answer["reason"]) == (401, "Unauthorized")
    with pytest.raises(ValueError, match="unknown user"):
        control_plane.token("root")
    assert control_plane.token("admin") != control_plane.token("scheduler")


def test_service_account_tokens_are_signed_and_verified(control_plane: ControlPlane) -> None:
    account = unique("sa")
    assert control_plane.request("POST", f"{NAMESPACE}/serviceaccounts", {"metadata": {"name": account}})[0] == 201
    status, request = control_plane.request(
        "POST",
        f"{NAMESPACE}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert status == 201, request
    token = request["status"]["token"]
    status, review = control_plane.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        token=token,
    )
    assert status == 201
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:default:{account}"


def test_the_kubeconfig_names_the_server_its_ca_and_the_token(control_plane: ControlPlane, tmp_path: Path) -> None:
    path = control_plane.write_kubeconfig(tmp_path / "kube" / "config", user="scheduler", context_name="e2e")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "e2e"
    (context,) = config["contexts"]
    (cluster,) = config["clusters"]
    (user,) = config["users"]
    assert context == {"name": "e2e", "context": {"cluster": cluster["name"], "user": user["name"]}}
    assert cluster["cluster"]["server"] == control_plane.url
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == control_plane.ca_file.read_bytes()
    assert user == {"name": "system:kube-scheduler", "user": {"token": control_plane.token("scheduler")}}
    assert path.stat().st_mode & 0o077 == 0


def test_without_the_watch_cache_a_compacted_resource_version_is_gone(uncached_control_plane: ControlPlane) -> None:
    plane = uncached_control_plane
    name = unique("cm")
    resource_version = create_config_map(plane, name)
    touch_config_map(plane, name, 3)
    assert len(watch_config_maps(plane, resource_version)) == 3  # before compaction: the three updates

    revision = plane.compact_etcd()
    assert revision > int(resource_version)
    touch_config_map(plane, name, 3)

    (event,) = watch_config_maps(plane, resource_version)
    assert event["type"] == "ERROR"
    assert {"kind": "Status", "code": 410, "reason": "Expired"}.items() <= event["object"].items()
    status, answer = plane.request(
        "GET", f"{NAMESPACE}/configmaps", query={"resourceVersion": resource_version, "resourceVersionMatch": "Exact"}
    )
    assert (status, answer["reason"]) == (410, "Expired")  # a list answers with the HTTP status itself
    assert len(watch_config_maps(plane, str(revision))) == 3  # from the compaction on, the watch works


def test_the_watch_cache_keeps_serving_a_resource_version_etcd_compacted(control_plane: ControlPlane) -> None:
    """kube-apiserver answers watches from its own window of events: compacting etcd alone changes nothing."""
    name = unique("cm")
    resource_version = create_config_map(control_plane, name)
    touch_config_map(control_plane, name, 2)
    control_plane.compact_etcd()
    touch_config_map(control_plane, name, 2)
    events = watch_config_maps(control_plane, resource_version)
    assert [event["type"] for event in events] == ["MODIFIED"] * 4


def test_a_restart_keeps_the_data_and_expires_older_watches(control_plane: ControlPlane) -> None:
    url, token = control_plane.url, control_plane.token("scheduler")
    name, node = unique("cm"), unique("node")
    resource_version = create_config_map(control_plane, name)
    touch_config_map(control_plane, name, 1)  # the restarted watch cache starts after resource_version
    create_node(control_plane, node)

    control_plane.restart_apiserver()

    assert (control_plane.url, control_plane.token("scheduler")) == (url, token)
    status, config_map = control_plane.request("GET", f"{NAMESPACE}/configmaps/{name}")
    assert status == 200 and config_map["data"] == {"n": "0"}
    assert control_plane.request("GET", f"/api/v1/nodes/{node}", user="scheduler")[0] == 200
    (event,) = watch_config_maps(control_plane, resource_version)
    assert event["type"] == "ERROR"
    assert {"code": 410, "reason": "Expired"}.items() <= event["object"].items()
    assert "too old resource version" in event["object"]["message"]


class RecordingControlPlane(ControlPlane):
    def __init__(self, assets: Path, workdir: Path, **options: Any) -> None:
        super().__init__(assets, workdir, **options)
        self.launched: list[subprocess.Popen[bytes]] = []

    def _launch(self, name: str, arguments: list[str]) -> subprocess.Popen[bytes]:
        process = super()._launch(name, arguments)
        self.launched.append(process)
        return process


def test_a_failed_start_says_why_and_leaves_no_process_behind(assets: Path, tmp_path: Path) -> None:
    plane = RecordingControlPlane(assets, tmp_path, extra_apiserver_args=["--no-such-flag"])
    with pytest.raises(ControlPlaneError, match="kube-apiserver exited with status") as failure:
        plane.start()
    assert "unknown flag: --no-such-flag" in str(failure.value)
    assert str(tmp_path / "kube-apiserver.log") in str(failure.value)
    assert [Path(str(p.args[0])).name for p in plane.launched] == ["etcd", "kube-apiserver"]  # type: ignore[index]
    assert all(process.returncode is not None for process in plane.launched)
    plane.stop()  # stopping again is harmless
