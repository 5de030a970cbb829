"""deploy/ against a real kube-apiserver: every object is accepted, the RBAC is least privilege, the config loads.

* Every object of every manifest is created with ``dryRun=All`` in dependency order (the Namespace for real),
  and the pod templates are dry-run as Pods, so admission (PodSecurity ``restricted``, the Priority plugin's
  ``system-cluster-critical``) judges them as it would judge the Deployments' pods.
* The ClusterRole grants nothing the built-in scheduler roles (``system:kube-scheduler``, and
  ``system:volume-scheduler`` for storageclasses, both bound to the ``system:kube-scheduler`` user) do not
  (:data:`BEYOND_KUBE_SCHEDULER` is empty and stays so); the lease Role is kube-scheduler's
  leader-locking Role, in kubesched-system and narrowed to the one Lease. Read from the server, not copied.
* The ServiceAccount, with a TokenRequest token, is allowed each verb ``kubesched run`` uses (SelfSubject-
  AccessReviews, and the real writes: a binding, a status patch, an Event and its series patch, the Lease) and
  denied others (``delete nodes``, ``create pods``, ``get secrets``, ...).
* The ConfigMap's config loads with kubesched's loader, and with its policy files the example workload's pods
  are scheduled while an untrusted image is denied; the Dockerfile runs as the user the Deployment expects.

Tests that need no API server (the static checks) run without ``KUBEBUILDER_ASSETS``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.manifests import load_manifest_text
from kubesched.cli.main import build_parser, cmd_run
from kubesched.config.loader import load_config_file
from kubesched.harness.envtest import ControlPlane
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.results import SCHEDULED, UNSCHEDULABLE
from kubesched.simulation.run import simulate

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "kubesched-system"
SERVICE_ACCOUNT = "kubesched"
LEASE = "kubesched"
PROFILE = "security-aware-scheduler"
CONFIG_DIR = "/etc/kubesched"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
SCRATCH = "default"  # where the write test's pod lives

# Install order, as kubectl/kustomize/helm order kinds: what others refer to first. Kinds not listed go last.
KIND_ORDER = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "PodDisruptionBudget",
    "Deployment",
)

# (apiGroup, resource, verb, resourceName) that kubesched needs and no built-in scheduler role grants:
# Rules beyond the built-in roles: none (kubesched's informers skip PriorityClasses as kube-scheduler does; the
# Priority admission plugin has written spec.priority). Anything beyond them fails the test.
BEYOND_KUBE_SCHEDULER: set[tuple[str, str, str, str | None]] = set()

Object = dict[str, Any]
Rule = Mapping[str, Any]
Atom = tuple[str, str, str, str | None]  # apiGroup, resource (with "/subresource"), verb, resourceName or None


# ------------------------------------------------------------------------------------------ the manifests


def load_yaml_documents(path: Path) -> list[Object]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def manifest_files() -> list[Path]:
    """Every Kubernetes manifest in deploy/ (not kustomization.yaml, which is kustomize's)."""
    return sorted(path for path in DEPLOY.glob("*.yaml") if path.name != "kustomization.yaml")


def all_objects() -> list[tuple[str, Object]]:
    """(file name, object) of every manifest, in install order (then file and document order)."""
    found = [(path.name, obj) for path in manifest_files() for obj in load_yaml_documents(path)]

    def rank(entry: tuple[str, Object]) -> int:
        kind = entry[1]["kind"]
        return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)

    return sorted(found, key=rank)  # stable: file and document order within a kind


def find(kind: str, name: str, file: str | None = None) -> Object:
    matches = [
        obj
        for path in manifest_files()
        if file is None or path.name == file
        for obj in load_yaml_documents(path)
        if obj["kind"] == kind and obj["metadata"]["name"] == name
    ]
    assert len(matches) == 1, f"expected one {kind} {name} in deploy/, found {len(matches)}"
    return matches[0]


def scheduler_deployment() -> Object:
    return find("Deployment", "kubesched", "deployment.yaml")


def example_workload() -> Object:
    (workload,) = load_yaml_documents(DEPLOY / "example-workload.yaml")
    assert workload["kind"] == "Deployment"
    return workload


def config_map() -> Object:
    return find("ConfigMap", "kubesched", "configmap.yaml")


def scheduler_config() -> Object:
    config: Object = yaml.safe_load(config_map()["data"]["config.yaml"])
    return config


def pod_from_template(owner: Object, name: str) -> Object:
    """The Pod a workload's template makes (what admission judges when the ReplicaSet creates it)."""
    template = owner["spec"]["template"]
    metadata = {**template.get("metadata", {}), "name": name, "namespace": owner["metadata"]["namespace"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


# ------------------------------------------------------------------------------------------ RBAC coverage


def rule_atoms(rules: Iterable[Rule]) -> set[Atom]:
    """Each (apiGroup, resource, verb, resourceName) a list of rules names; None: not restricted by name."""
    atoms: set[Atom] = set()
    for rule in rules:
        names: Sequence[str | None] = rule.get("resourceNames") or [None]
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule["verbs"]:
                    atoms.update((group, resource, verb, name) for name in names)
    return atoms


def _resource_matches(patterns: Sequence[str], resource: str) -> bool:
    """RBAC's ResourceMatches: ``*``, the exact resource (``pods/binding``), or ``*/subresource``."""
    if "*" in patterns or resource in patterns:
        return True
    _, slash, subresource = resource.partition("/")
    return bool(slash) and f"*/{subresource}" in patterns


def covers(rule: Rule, atom: Atom) -> bool:
    """Whether ``rule`` allows ``atom``, as RBAC's rule matching decides (``*`` in groups, resources, verbs;
    a rule naming resourceNames allows only requests for those names)."""
    group, resource, verb, name = atom
    groups, verbs = rule.get("apiGroups", []), rule.get("verbs", [])
    if not ("*" in groups or group in groups) or not ("*" in verbs or verb in verbs):
        return False
    if not _resource_matches(rule.get("resources", []), resource):
        return False
    names = rule.get("resourceNames") or []
    return not names or (name is not None and name in names)


def uncovered(rules: Iterable[Rule], reference: Sequence[Rule]) -> set[Atom]:
    """What ``rules`` grant that no rule of ``reference`` grants."""
    return {atom for atom in rule_atoms(rules) if not any(covers(rule, atom) for rule in reference)}


def assert_no_wildcards(rules: Iterable[Rule]) -> None:
    for rule in rules:
        assert not rule.get("nonResourceURLs"), rule
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in value for value in rule.get(key, [])), f"a wildcard in {key}: {rule}"


# ------------------------------------------------------------------------------------------ API helpers


def discover(plane: ControlPlane, api_version: str, kind: str, cache: dict[str, Any]) -> tuple[str, bool]:
    """(resource, namespaced) of a kind, from the server's discovery document."""
    if api_version not in cache:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        status, document = plane.request("GET", path)
        assert status == 200, (path, document)
        cache[api_version] = document["resources"]
    for resource in cache[api_version]:
        if resource["kind"] == kind and "/" not in resource["name"]:
            return resource["name"], bool(resource["namespaced"])
    raise AssertionError(f"the API server serves no {kind} in {api_version}")


def collection_path(plane: ControlPlane, obj: Object, cache: dict[str, Any]) -> str:
    api_version = obj["apiVersion"]
    resource, namespaced = discover(plane, api_version, obj["kind"], cache)
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced:
        namespace = obj["metadata"].get("namespace")
        assert namespace, f"{obj['kind']} {obj['metadata']['name']} names no namespace"
        return f"{base}/namespaces/{namespace}/{resource}"
    return f"{base}/{resource}"


def apply(plane: ControlPlane, obj: Object, cache: dict[str, Any]) -> None:
    """Create ``obj`` for real, or replace it when it exists (the control plane is shared by the session)."""
    path = collection_path(plane, obj, cache)
    status, answer = plane.request("POST", path, obj)
    if status == 409:
        item = f"{path}/{obj['metadata']['name']}"
        status, current = plane.request("GET", item)
        assert status == 200, current
        replacement = {
            **obj,
            "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        status, answer = plane.request("PUT", item, replacement)
    assert status in (200, 201), (obj["kind"], obj["metadata"]["name"], answer)


def access(plane: ControlPlane, token: str, **attributes: str) -> bool:
    """A SelfSubjectAccessReview as the token's identity: is ``attributes`` (verb, group, resource,
    subresource, namespace, name) allowed?"""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    status, answer = plane.request(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, token=token
    )
    assert status == 201, answer
    return bool(answer["status"].get("allowed"))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane) -> str:
    status, answer = control_plane.request("POST", "/api/v1/namespaces", find("Namespace", NAMESPACE))
    assert status in (201, 409), answer
    return NAMESPACE


@pytest.fixture(scope="module")
def reference_roles(control_plane: ControlPlane) -> dict[str, Object]:
    """The built-in roles, as the server has them, and the bindings that give them to system:kube-scheduler."""
    roles: dict[str, Object] = {}
    for name in ("system:kube-scheduler", "system:volume-scheduler"):
        status, role = control_plane.request("GET", f"{RBAC}/clusterroles/{name}")
        assert status == 200, role
        status, binding = control_plane.request("GET", f"{RBAC}/clusterrolebindings/{name}")
        assert status == 200, binding
        assert binding["roleRef"]["name"] == name
        assert {"kind": "User", "name": "system:kube-scheduler"} in [
            {"kind": s["kind"], "name": s["name"]} for s in binding["subjects"]
        ], binding
        roles[name] = role
    path = f"{RBAC}/namespaces/kube-system/roles/system::leader-locking-kube-scheduler"
    status, role = control_plane.request("GET", path)
    assert status == 200, role
    roles["system::leader-locking-kube-scheduler"] = role
    return roles


@pytest.fixture(scope="module")
def service_account_token(control_plane: ControlPlane, namespace: str) -> str:
    """deploy/rbac.yaml created for real, and a TokenRequest token for the ServiceAccount."""
    cache: dict[str, Any] = {}
    for _, obj in all_objects():
        if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            apply(control_plane, obj, cache)
    return request_token(control_plane, namespace)


def request_token(plane: ControlPlane, namespace: str) -> str:
    """A TokenRequest token (10 minutes) for deploy's ServiceAccount in ``namespace``."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{SERVICE_ACCOUNT}/token"
    status, answer = plane.request("POST", path, request)
    assert status == 201, answer
    token: str = answer["status"]["token"]
    return token


# ------------------------------------------------------------------------------------------ the API server accepts it


def test_kustomization_installs_every_manifest_but_the_example() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    installed = set(kustomization["resources"])
    expected = {path.name for path in manifest_files()} - {"example-workload.yaml"}
    assert installed == expected


def test_every_object_is_accepted_by_the_api_server(control_plane: ControlPlane, namespace: str) -> None:
    # A Namespace cannot be dry-run created and then used (a dry-run object is not stored, so the objects in
    # it would answer 404 "namespaces kubesched-system not found"): the `namespace` fixture created it for
    # real; everything else is dry-run, as admin, in install order.
    cache: dict[str, Any] = {}
    objects = all_objects()
    assert objects[0][1]["kind"] == "Namespace"
    kinds = set()
    for file, obj in objects[1:]:
        kinds.add(obj["kind"])
        status, answer = control_plane.request(
            "POST", collection_path(control_plane, obj, cache), obj, query={"dryRun": "All"}
        )
        assert status in (200, 201), (file, obj["kind"], obj["metadata"]["name"], answer)
    assert {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
    } <= kinds


@pytest.mark.parametrize("workload", ["scheduler", "example"])
def test_pod_templates_pass_admission(control_plane: ControlPlane, namespace: str, workload: str) -> None:
    """A Deployment is admitted whatever its pods look like; its pods meet PodSecurity and Priority admission.

    kubesched-system enforces the restricted Pod Security Standard, and the real server admits
    system-cluster-critical outside kube-system (only an admission configuration limiting the class to
    namespaces with a matching ResourceQuota would refuse it)."""
    owner = scheduler_deployment() if workload == "scheduler" else example_workload()
    pod = pod_from_template(owner, unique(workload))
    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods"
    status, answer = control_plane.request("POST", path, pod, query={"dryRun": "All"})
    assert status == 201, answer
    if workload == "scheduler":
        assert answer["spec"]["priorityClassName"] == "system-cluster-critical"
        assert answer["spec"]["priority"] == 2000000000


# ------------------------------------------------------------------------------------------ least privilege


def test_coverage_checker() -> None:
    reference = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]},
        {"apiGroups": ["*"], "resources": ["jobs"], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["list"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["a"], "verbs": ["*"]},
    ]
    assert not uncovered([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}], reference)
    assert not uncovered(
        [{"apiGroups": [""], "resources": ["pods/status", "nodes/status"], "verbs": ["patch"]}], reference
    )
    assert not uncovered([{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]}], reference)
    assert not uncovered(
        [{"apiGroups": ["apps"], "resources": ["deployments", "replicasets"], "verbs": ["list"]}], reference
    )
    assert uncovered([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["watch"]}], reference) == {
        ("apps", "deployments", "watch", None)
    }
    lease = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"]}
    assert not uncovered([{**lease, "resourceNames": ["a"]}], reference)
    assert uncovered([{**lease, "resourceNames": ["a", "b"]}], reference) == {
        ("coordination.k8s.io", "leases", "update", "b")
    }
    assert uncovered([lease], reference) == {("coordination.k8s.io", "leases", "update", None)}  # any name
    assert uncovered([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}], reference) == {
        ("", "pods", "delete", None)
    }
    assert uncovered([{"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["list"]}], reference) == {
        ("", "pods/binding", "list", None)  # "pods" does not cover its subresources
    }


def test_cluster_role_is_a_subset_of_kube_schedulers(reference_roles: dict[str, Object]) -> None:
    ours = find("ClusterRole", "kubesched")["rules"]
    assert_no_wildcards(ours)
    reference = [
        *reference_roles["system:kube-scheduler"]["rules"],
        *reference_roles["system:volume-scheduler"]["rules"],
    ]
    assert uncovered(ours, reference) == BEYOND_KUBE_SCHEDULER, (
        "deploy/rbac.yaml's ClusterRole grants what kube-scheduler's own roles do not (or the documented"
        " exceptions changed)"
    )
    # storageclasses is the one thing system:volume-scheduler adds; everything else is system:kube-scheduler's.
    assert uncovered(ours, reference_roles["system:kube-scheduler"]["rules"]) == BEYOND_KUBE_SCHEDULER | {
        ("storage.k8s.io", "storageclasses", verb, None) for verb in ("list", "watch")
    }
    # Leases are the namespaced Role's business, never cluster-wide.
    assert not any(atom[1].startswith("leases") for atom in rule_atoms(ours))


def test_lease_role_is_kube_schedulers_in_our_namespace(reference_roles: dict[str, Object]) -> None:
    role = find("Role", "kubesched-leader-election")
    ours = role["rules"]
    assert_no_wildcards(ours)
    config = scheduler_config()["leaderElection"]
    assert role["metadata"]["namespace"] == config["resourceNamespace"] == NAMESPACE
    assert config["resourceName"] == LEASE and config["leaderElect"] is True
    # What leader election does (client-go's LeaseLock): create once, then get and update its one Lease.
    assert rule_atoms(ours) == {
        ("coordination.k8s.io", "leases", "create", None),
        ("coordination.k8s.io", "leases", "get", LEASE),
        ("coordination.k8s.io", "leases", "update", LEASE),
    }
    # kube-scheduler's Role in kube-system grants as much (and more: list, watch, any name) ...
    assert not uncovered(ours, reference_roles["system::leader-locking-kube-scheduler"]["rules"])
    # ... and so does its ClusterRole, with its Lease's name for ours.
    renamed = [
        {**rule, "resourceNames": ["kube-scheduler" if name == LEASE else name for name in rule["resourceNames"]]}
        if rule.get("resourceNames")
        else rule
        for rule in ours
    ]
    assert not uncovered(renamed, reference_roles["system:kube-scheduler"]["rules"])
    binding = find("RoleBinding", "kubesched-leader-election")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "kubesched-leader-election",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]


READS = [
    ("", "pods"),
    ("", "nodes"),
    ("", "namespaces"),
    ("policy", "poddisruptionbudgets"),
    ("", "services"),
    ("apps", "replicasets"),
    ("", "replicationcontrollers"),
    ("apps", "statefulsets"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "csinodes"),
]

ALLOWED: list[dict[str, str]] = [
    *({"verb": verb, "group": group, "resource": resource} for group, resource in READS for verb in ("list", "watch")),
    {"verb": "create", "resource": "pods", "subresource": "binding", "namespace": "default", "name": "p"},
    {"verb": "patch", "resource": "pods", "subresource": "status", "namespace": "default", "name": "p"},
    {"verb": "create", "group": "events.k8s.io", "resource": "events", "namespace": "default"},
    {"verb": "patch", "group": "events.k8s.io", "resource": "events", "namespace": "default", "name": "e"},
    {"verb": "create", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE},
    {"verb": "get", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE, "name": LEASE},
    {"verb": "update", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE, "name": LEASE},
]

DENIED: list[dict[str, str]] = [
    {"verb": "delete", "resource": "nodes", "name": "n"},
    {"verb": "patch", "resource": "nodes", "name": "n"},
    {"verb": "create", "resource": "pods", "namespace": "default"},
    {"verb": "delete", "resource": "pods", "namespace": "default", "name": "p"},
    {"verb": "get", "resource": "pods", "namespace": "default", "name": "p"},  # informers list and watch only
    {"verb": "update", "resource": "pods", "subresource": "status", "namespace": "default", "name": "p"},
    {"verb": "create", "resource": "bindings", "namespace": "default"},
    {"verb": "get", "resource": "secrets", "namespace": NAMESPACE, "name": "s"},
    {"verb": "list", "resource": "secrets"},
    {"verb": "get", "resource": "configmaps", "namespace": NAMESPACE, "name": "kubesched"},
    {"verb": "create", "resource": "events", "namespace": "default"},  # core events: we write events.k8s.io
    {"verb": "delete", "group": "events.k8s.io", "resource": "events", "namespace": "default", "name": "e"},
    {"verb": "list", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE},
    {"verb": "get", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE, "name": "other"},
    {"verb": "update", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE, "name": "other"},
    {"verb": "update", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system",
     "name": "kube-scheduler"},
    {"verb": "create", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system"},
    {"verb": "delete", "group": "coordination.k8s.io", "resource": "leases", "namespace": NAMESPACE, "name": LEASE},
    {"verb": "create", "group": "rbac.authorization.k8s.io", "resource": "clusterrolebindings"},
    {"verb": "impersonate", "resource": "users", "name": "admin"},
    {"verb": "create", "group": "apps", "resource": "deployments", "namespace": NAMESPACE},
]  # fmt: skip


def test_service_account_identity(control_plane: ControlPlane, service_account_token: str) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    status, answer = control_plane.request(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review, token=service_account_token
    )
    assert status == 201, answer
    assert answer["status"]["userInfo"]["username"] == f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


@pytest.mark.parametrize("attributes", ALLOWED, ids=lambda a: " ".join(a.values()))
def test_service_account_may(
    control_plane: ControlPlane, service_account_token: str, attributes: dict[str, str]
) -> None:
    assert access(control_plane, service_account_token, **attributes)


@pytest.mark.parametrize("attributes", DENIED, ids=lambda a: " ".join(a.values()))
def test_service_account_may_not(
    control_plane: ControlPlane, service_account_token: str, attributes: dict[str, str]
) -> None:
    assert not access(control_plane, service_account_token, **attributes)


@pytest.fixture
def scratch_pod(control_plane: ControlPlane) -> Iterator[tuple[str, str, str]]:
    """(node, pod, uid): a Node and a pending Pod in ``default``, removed afterwards (the control plane is the
    session's: other tests count its nodes). Not in kubesched-system, which admits only restricted pods."""
    node, pod = unique("deploy-node"), unique("deploy-pod")
    status, answer = control_plane.request("POST", "/api/v1/nodes", {"metadata": {"name": node}})
    assert status == 201, answer
    try:
        body = {
            "metadata": {"name": pod},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
        status, created = control_plane.request("POST", f"/api/v1/namespaces/{SCRATCH}/pods", body)
        assert status == 201, created
        try:
            yield node, pod, created["metadata"]["uid"]
        finally:
            path = f"/api/v1/namespaces/{SCRATCH}/pods/{pod}"  # no kubelet: delete at once
            status, answer = control_plane.request("DELETE", path, query={"gracePeriodSeconds": "0"})
            assert status in (200, 202), answer
    finally:
        status, answer = control_plane.request("DELETE", f"/api/v1/nodes/{node}")
        assert status == 200, answer


def test_service_account_makes_the_schedulers_writes(
    control_plane: ControlPlane, service_account_token: str, scratch_pod: tuple[str, str, str]
) -> None:
    """The requests kubesched's writers and leader election send, sent as the ServiceAccount."""
    token = service_account_token
    node, pod, uid = scratch_pod
    pods = f"/api/v1/namespaces/{SCRATCH}/pods"

    status, answer = control_plane.request("GET", "/api/v1/pods", token=token, query={"limit": "1"})
    assert status == 200, answer
    status, answer = control_plane.request("GET", f"{pods}/{pod}", token=token)
    assert status == 403, answer
    status, answer = control_plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets", token=token)
    assert status == 403, answer

    patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    status, answer = control_plane.request(
        "PATCH", f"{pods}/{pod}/status", patch, token=token, content_type="application/strategic-merge-patch+json"
    )
    assert status == 200, answer
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.1", "namespace": SCRATCH},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": PROFILE,
        "reportingInstance": f"{PROFILE}-test",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": SCRATCH, "name": pod, "uid": uid},
        "note": "0/1 nodes are available",
        "type": "Warning",
    }
    events = f"/apis/events.k8s.io/v1/namespaces/{SCRATCH}/events"
    status, answer = control_plane.request("POST", events, event, token=token)
    assert status == 201, answer
    series = {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}
    status, answer = control_plane.request(
        "PATCH", f"{events}/{pod}.1", series, token=token, content_type="application/merge-patch+json"
    )
    assert status == 200, answer
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": SCRATCH, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    status, answer = control_plane.request("POST", f"{pods}/{pod}/binding", binding, token=token)
    assert status == 201, answer

    leases = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
    lease = {"metadata": {"name": LEASE}, "spec": {"holderIdentity": "test", "leaseDurationSeconds": 15}}
    status, answer = control_plane.request("POST", leases, lease, token=token)
    if status == 409:  # a Lease left by an earlier run in this session
        status, answer = control_plane.request("GET", f"{leases}/{LEASE}", token=token)
        assert status == 200, answer
    else:
        assert status == 201, answer
    status, current = control_plane.request("GET", f"{leases}/{LEASE}", token=token)
    assert status == 200, current
    current["spec"]["holderIdentity"] = unique("holder")
    status, answer = control_plane.request("PUT", f"{leases}/{LEASE}", current, token=token)
    assert status == 200, answer
    status, answer = control_plane.request("GET", f"{leases}/kube-scheduler", token=token)
    assert status == 403, answer
    status, answer = control_plane.request("GET", leases, token=token)
    assert status == 403, answer


# ------------------------------------------------------------------------------------------ config and workload


def test_deployment_runs_kubesched_hardened() -> None:
    deployment = scheduler_deployment()
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert "schedulerName" not in pod, "kubesched's own pods must be scheduled by kube-scheduler"
    (container,) = pod["containers"]
    assert container["command"] == ["kubesched"]
    run = build_parser().parse_args(container["args"])
    assert (run.func, run.config) == (cmd_run, f"{CONFIG_DIR}/config.yaml")
    assert container["ports"] == [{"name": "metrics", "containerPort": 10259, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "metrics", "scheme": "HTTP"}
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    context = {**pod["securityContext"], **container["securityContext"]}
    assert context["runAsNonRoot"] is True and context["runAsUser"] == 65532
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert volumes[mounts[CONFIG_DIR]]["configMap"]["name"] == config_map()["metadata"]["name"]
    # The audit log goes to a writable volume of its own; its signing key comes from a Secret, readable by the
    # pod's group only (the files of a Secret volume belong to fsGroup).
    audit_dir, key_dir = str(Path(run.audit_log).parent), str(Path(run.audit_signing_key).parent)
    assert "emptyDir" in volumes[mounts[audit_dir]] and not next(
        m for m in container["volumeMounts"] if m["mountPath"] == audit_dir
    ).get("readOnly")
    secret = volumes[mounts[key_dir]]["secret"]
    assert secret["secretName"] == "kubesched-audit-signing-key"
    assert [item["path"] for item in secret["items"]] == [Path(run.audit_signing_key).name]
    assert secret["defaultMode"] & 0o007 == 0 and pod["securityContext"]["fsGroup"] == context["runAsGroup"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_configmap_config_loads_and_names_its_files(tmp_path: Path) -> None:
    data = config_map()["data"]
    path = tmp_path / "config.yaml"
    path.write_text(data["config.yaml"])
    config = load_config_file(str(path), in_tree_registry())
    assert [profile.scheduler_name for profile in config.profiles] == [PROFILE]
    election = config.leader_election
    assert (election.leader_elect, election.resource_name, election.resource_namespace) == (True, LEASE, NAMESPACE)
    assert election.resource_lock == "leases"
    assert config.client_connection.qps >= 50 and config.client_connection.burst >= config.client_connection.qps
    # Every file the config names is a key of the ConfigMap mounted at CONFIG_DIR.
    named = set(re.findall(re.escape(CONFIG_DIR) + r"/([\w.-]+)", data["config.yaml"]))
    assert named == {"placement.rego", "data.json", "compliance.json"}
    assert named <= set(data)
    # The policy is the example's, unchanged.
    assert data["placement.rego"] == (ROOT / "examples" / "policies" / "placement.rego").read_text()


def test_example_workload_is_allowed_by_the_policy(tmp_path: Path) -> None:
    """The ConfigMap's config, with its files, schedules the example's replicas on kind's nodes and keeps an
    untrusted image out: the example policy is really in force."""
    workload = example_workload()
    template = workload["spec"]["template"]
    assert template["spec"]["schedulerName"] == PROFILE
    data = config_map()["data"]
    for name, text in data.items():
        (tmp_path / name).write_text(text.replace(CONFIG_DIR, str(tmp_path)) if name == "config.yaml" else text)
    config = load_config_file(str(tmp_path / "config.yaml"), in_tree_registry())

    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for name in ("kind-worker", "kind-worker2")
    ]
    replicas = [pod_from_template(workload, f"secure-web-{i}") for i in range(workload["spec"]["replicas"])]
    miner = pod_from_template(workload, "miner")
    miner["spec"] = {
        **miner["spec"],
        "containers": [{**template["spec"]["containers"][0], "image": "evil.example.com/miner:1"}],
    }
    manifests = load_manifest_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, *replicas, miner]})
    )
    report = simulate(manifests, config, in_tree_registry(), max_attempts=1)
    results = {record.pod.name: (record.result, record.message) for record in report.records}
    for pod in replicas:
        assert results[pod["metadata"]["name"]][0] == SCHEDULED, results
    result, message = results["miner"]
    assert result == UNSCHEDULABLE
    assert "Denied by security policy: image evil.example.com/miner:1 is not from a trusted registry" in message


# ------------------------------------------------------------------------------------------ the image


def dockerfile_instructions() -> Iterator[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            instruction, _, rest = stripped.partition(" ")
            yield instruction.upper(), rest.strip()


def test_dockerfile_runs_kubesched_as_the_deployments_user() -> None:
    instructions = list(dockerfile_instructions())
    froms = [rest for instruction, rest in instructions if instruction == "FROM"]
    assert froms and froms[-1].split()[0] == "python:3.11-slim"
    users = [rest for instruction, rest in instructions if instruction == "USER"]
    pod = scheduler_deployment()["spec"]["template"]["spec"]
    assert users and users[-1].split(":")[0] == str(pod["securityContext"]["runAsUser"])
    (entrypoint,) = [rest for instruction, rest in instructions if instruction == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoint) == ["kubesched"]  # the exec form is a JSON array
    assert any(
        instruction == "RUN" and re.search(r"\bpip install \.(\s|$)", rest) for instruction, rest in instructions
    )
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert ".git" in ignored
    assert not {"src", "pyproject.toml", "README.md"} & ignored  # what `pip install .` reads
