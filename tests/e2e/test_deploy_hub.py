"""deploy/hub/ against a real kube-apiserver: the hub's grants are exactly the calls the live hub makes.

The ServiceAccount of deploy/, with deploy/rbac.yaml and deploy/hub/rbac.yaml installed and a TokenRequest token,
is allowed each call ``kubesched run`` makes as a hub (the MemberCluster watch, the status patches, the connection
Secrets in kubesched-system, reading, annotating and deleting a hub pod) and denied what it never does (writing a
MemberCluster's spec, Secrets elsewhere or listed, creating pods). The kustomization installs deploy/ itself, the
CRD and the hub's grants. The static check runs without ``KUBEBUILDER_ASSETS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubesched.harness.envtest import ControlPlane

from .test_deploy_manifests import (
    DEPLOY,
    NAMESPACE,
    SERVICE_ACCOUNT,
    access,
    apply,
    collection_path,
    load_yaml_documents,
    request_token,
)

pytestmark = pytest.mark.e2e

HUB = DEPLOY / "hub"
GROUP = "multicluster.kubesched.io"


def test_the_hub_kustomization_installs_deploy_the_crd_and_the_hub_grants() -> None:
    kustomization = yaml.safe_load((HUB / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../", "../crds/memberclusters.yaml", "rbac.yaml"]
    for resource in kustomization["resources"]:
        assert (HUB / resource).exists(), resource


@pytest.fixture(scope="module")
def hub_token(control_plane: ControlPlane) -> Iterator[str]:
    """deploy/rbac.yaml and deploy/hub/rbac.yaml created for real, and a token for the ServiceAccount; removed
    afterwards (the control plane is the session's, and test_deploy_manifests needs the ServiceAccount absent)."""
    cache: dict[str, Any] = {}
    status, answer = control_plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    assert status in (201, 409), answer
    documents = [*load_yaml_documents(DEPLOY / "rbac.yaml"), *load_yaml_documents(HUB / "rbac.yaml")]
    created = [
        obj
        for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
        for obj in documents
        if obj["kind"] == kind
    ]
    for obj in created:
        apply(control_plane, obj, cache)
    yield request_token(control_plane, NAMESPACE)
    for obj in reversed(created):
        path = f"{collection_path(control_plane, obj, cache)}/{obj['metadata']['name']}"
        status, answer = control_plane.request("DELETE", path)
        assert status in (200, 202), answer


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"verb": "list", "group": GROUP, "resource": "memberclusters"}, id="list-memberclusters"),
        pytest.param({"verb": "watch", "group": GROUP, "resource": "memberclusters"}, id="watch-memberclusters"),
        pytest.param(
            {"verb": "patch", "group": GROUP, "resource": "memberclusters", "subresource": "status", "name": "east"},
            id="patch-a-membercluster-status",
        ),
        pytest.param(
            {"verb": "get", "resource": "secrets", "namespace": NAMESPACE, "name": "east-token"},
            id="get-a-connection-secret",
        ),
        pytest.param({"verb": "get", "resource": "pods", "namespace": "apps", "name": "web"}, id="get-a-hub-pod"),
        pytest.param({"verb": "delete", "resource": "pods", "namespace": "apps", "name": "web"}, id="delete-a-hub-pod"),
        pytest.param(
            {"verb": "patch", "resource": "pods", "namespace": "apps", "name": "web"}, id="record-a-commit-on-a-hub-pod"
        ),
        pytest.param(
            {"verb": "create", "resource": "pods", "subresource": "binding", "namespace": "apps", "name": "web"},
            id="bind-a-hub-pod-to-its-cluster",
        ),
        pytest.param(
            {"verb": "patch", "resource": "pods", "subresource": "status", "namespace": "apps", "name": "web"},
            id="mirror-a-member-pods-phase",
        ),
    ],
)
def test_the_hub_may_make_every_call_it_makes(
    control_plane: ControlPlane, hub_token: str, attributes: dict[str, str]
) -> None:
    assert access(control_plane, hub_token, **attributes)


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"verb": "create", "group": GROUP, "resource": "memberclusters"}, id="no-membercluster-creation"),
        pytest.param(
            {"verb": "update", "group": GROUP, "resource": "memberclusters", "name": "east"}, id="no-spec-writes"
        ),
        pytest.param({"verb": "list", "resource": "secrets", "namespace": NAMESPACE}, id="no-secret-listing"),
        pytest.param({"verb": "get", "resource": "secrets", "namespace": "default"}, id="secrets-only-at-home"),
        pytest.param({"verb": "create", "resource": "pods", "namespace": "apps"}, id="no-pod-creation"),
        pytest.param({"verb": "update", "resource": "pods", "namespace": "apps"}, id="no-pod-updates"),
    ],
)
def test_the_hub_is_denied_what_it_never_does(
    control_plane: ControlPlane, hub_token: str, attributes: dict[str, str]
) -> None:
    assert not access(control_plane, hub_token, **attributes)


def test_the_hub_grants_name_the_deploy_service_account() -> None:
    for obj in load_yaml_documents(HUB / "rbac.yaml"):
        if obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert obj["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
