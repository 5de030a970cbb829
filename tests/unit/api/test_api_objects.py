"""Typed objects from manifest dicts: defaulting, toleration matching, and every error path's message."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kubesched.api.objects import (
    Container,
    Namespace,
    Node,
    ObjectMeta,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Taint,
    Toleration,
    object_uid,
)
from kubesched.errors import ManifestError

WHERE = "cluster.yaml: Pod default/web-1"


def pod_dict(spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    meta = {"name": "web-1", **metadata}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec if spec is not None else {"containers": [{"name": "app"}]},
    }


def one_container(**container: Any) -> dict[str, Any]:
    return {"containers": [{"name": "app", **container}]}


def pod_error(obj: Any) -> str:
    with pytest.raises(ManifestError) as info:
        Pod.from_dict(obj, WHERE)
    return str(info.value)


# ---------------------------------------------------------------- tolerations


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        pytest.param(
            Toleration("k", "Equal", "v", "NoSchedule"),
            Taint("k", "v", "NoSchedule"),
            True,
            id="equal-key-value-effect",
        ),
        pytest.param(
            Toleration("k", "Equal", "v", "NoSchedule"),
            Taint("k", "other", "NoSchedule"),
            False,
            id="equal-value-differs",
        ),
        pytest.param(
            Toleration("k", "Equal", "", ""), Taint("k", "", "NoExecute"), True, id="equal-empty-values-match"
        ),
        pytest.param(
            Toleration("k", "Equal", "v", ""),
            Taint("k", "v", "PreferNoSchedule"),
            True,
            id="empty-effect-matches-every-effect",
        ),
        pytest.param(
            Toleration("k", "Equal", "v", "NoExecute"), Taint("k", "v", "NoSchedule"), False, id="effect-differs"
        ),
        pytest.param(
            Toleration("k", "Exists", "", "NoSchedule"),
            Taint("k", "anything", "NoSchedule"),
            True,
            id="exists-ignores-value",
        ),
        pytest.param(
            Toleration("k", "Exists", "", ""), Taint("other", "v", "NoSchedule"), False, id="exists-key-differs"
        ),
        pytest.param(
            Toleration("", "Exists", "", ""), Taint("any", "v", "NoExecute"), True, id="empty-key-exists-matches-all"
        ),
        pytest.param(
            Toleration("", "Exists", "", "NoSchedule"),
            Taint("any", "v", "NoExecute"),
            False,
            id="empty-key-exists-still-checks-effect",
        ),
        pytest.param(
            Toleration("k", "Lt", "v", ""),
            Taint("k", "v", "NoSchedule"),
            False,
            id="unknown-operator-tolerates-nothing",
        ),
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_toleration_operator_defaults_to_equal() -> None:
    tol = Toleration.from_dict({"key": "k", "value": "v"}, WHERE)
    assert tol == Toleration("k", "Equal", "v", "", None)


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        pytest.param(
            {"key": "k", "operator": "In"},
            'spec.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists"',
            id="unknown-operator",
        ),
        pytest.param(
            {"operator": "Equal", "value": "v"},
            'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is '
            'empty, which means "match all values and all keys"',
            id="empty-key-needs-exists",
        ),
        pytest.param(
            {"key": "k", "operator": "Exists", "value": "v"},
            "spec.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
            id="exists-with-value",
        ),
        pytest.param(
            {"key": "k", "effect": "NoRun"},
            'spec.tolerations[0].effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
            '"PreferNoSchedule", "NoExecute"',
            id="unknown-effect",
        ),
        pytest.param(
            {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30},
            "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
            "`tolerationSeconds` is set",
            id="seconds-need-no-execute",
        ),
        pytest.param(
            {"key": "k", "tolerationSeconds": "30"},
            "spec.tolerations[0].tolerationSeconds: expected an integer, got string",
            id="seconds-wrong-type",
        ),
        pytest.param("k=v", "spec.tolerations[0]: expected a mapping, got string", id="not-a-mapping"),
    ],
)
def test_toleration_errors(toleration: Any, message: str) -> None:
    spec = {**one_container(), "tolerations": [toleration]}
    assert pod_error(pod_dict(spec)) == f"{WHERE}: {message}"


# ---------------------------------------------------------------- metadata


def test_namespace_defaults_and_uid_is_deterministic() -> None:
    first = Pod.from_dict(pod_dict(), WHERE)
    second = Pod.from_dict(pod_dict(), WHERE)
    assert first.namespace == "default"
    assert first.key == "default/web-1"
    assert first.uid == second.uid == object_uid("Pod", "default", "web-1")
    assert first.uid != object_uid("Pod", "other", "web-1")


def test_explicit_uid_and_fields_are_kept() -> None:
    pod = Pod.from_dict(
        pod_dict(
            namespace="prod",
            uid="abc",
            labels={"app": "web"},
            annotations={"a": "b"},
            resourceVersion="42",
            generation=3,
            ownerReferences=[
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d", "uid": "u1", "controller": True}
            ],
        ),
        WHERE,
    )
    meta = pod.metadata
    assert (meta.namespace, meta.uid, meta.labels, meta.annotations) == ("prod", "abc", {"app": "web"}, {"a": "b"})
    assert (meta.resource_version, meta.generation) == ("42", 3)
    ref = meta.controller_ref()
    assert ref is not None and (ref.kind, ref.name, ref.uid, ref.controller) == ("ReplicaSet", "web-7d", "u1", True)


def test_controller_ref_absent_without_controller_owner() -> None:
    meta = ObjectMeta.from_dict({"name": "x", "ownerReferences": [{"kind": "ConfigMap", "name": "c"}]}, WHERE)
    assert meta.controller_ref() is None


def test_cluster_scoped_objects_have_no_namespace() -> None:
    node = Node.from_dict({"metadata": {"name": "n1", "namespace": "ignored"}}, "f: Node n1")
    assert node.metadata.namespace == ""
    assert node.metadata.uid == object_uid("Node", "", "n1")


@pytest.mark.parametrize(
    ("stamp", "epoch"),
    [
        pytest.param("2024-01-01T00:00:00Z", 1704067200.0, id="rfc3339-utc-string"),
        pytest.param("2024-01-01T01:00:00+01:00", 1704067200.0, id="rfc3339-offset-string"),
        pytest.param("2024-01-01T00:00:00.5Z", 1704067200.5, id="fractional-seconds"),
        pytest.param(dt.datetime(2024, 1, 1, tzinfo=dt.UTC), 1704067200.0, id="yaml-datetime"),
        pytest.param(dt.datetime(2024, 1, 1), 1704067200.0, id="naive-datetime-is-utc"),
    ],
)
def test_timestamps(stamp: Any, epoch: float) -> None:
    pod = Pod.from_dict(pod_dict(creationTimestamp=stamp, deletionTimestamp=stamp), WHERE)
    assert pod.metadata.creation_timestamp == epoch
    assert pod.metadata.deletion_timestamp == epoch


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        pytest.param({}, "metadata.name: Required value", id="name-missing"),
        pytest.param({"name": ""}, "metadata.name: Required value", id="name-empty"),
        pytest.param({"name": 7}, "metadata.name: expected a string, got integer", id="name-wrong-type"),
        pytest.param({"name": "p", "labels": ["a"]}, "metadata.labels: expected a mapping, got list", id="labels-list"),
        pytest.param(
            {"name": "p", "labels": {"on": True}},
            "metadata.labels.on: expected a string, got boolean",
            id="label-value-boolean",
        ),
        pytest.param(
            {"name": "p", "creationTimestamp": "yesterday"},
            'metadata.creationTimestamp: Invalid value: "yesterday": expected an RFC 3339 timestamp',
            id="timestamp-garbage",
        ),
        pytest.param(
            {"name": "p", "creationTimestamp": dt.date(2024, 1, 1)},
            "metadata.creationTimestamp: expected an RFC 3339 timestamp, got date",
            id="timestamp-date-only",
        ),
        pytest.param(
            {"name": "p", "ownerReferences": [{"kind": "ReplicaSet"}]},
            "metadata.ownerReferences[0].name: Required value",
            id="owner-without-name",
        ),
        pytest.param(
            {"name": "p", "generation": "1"},
            "metadata.generation: expected an integer, got string",
            id="generation-wrong-type",
        ),
    ],
)
def test_metadata_errors(metadata: dict[str, Any], message: str) -> None:
    obj = {"metadata": metadata, "spec": one_container()}
    assert pod_error(obj) == f"{WHERE}: {message}"


# ---------------------------------------------------------------- containers


def test_requests_keep_only_named_resources_and_explicit_zero() -> None:
    pod = Pod.from_dict(pod_dict(one_container(resources={"requests": {"cpu": "0", "memory": "1Gi"}})), WHERE)
    assert pod.spec.containers[0].requests == {"cpu": 0, "memory": 2**30}


def test_limits_default_missing_requests() -> None:
    resources = {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "512Mi", "nvidia.com/gpu": 1}}
    container = Pod.from_dict(pod_dict(one_container(resources=resources)), WHERE).spec.containers[0]
    assert container.requests == {"cpu": 250, "memory": 512 * 2**20, "nvidia.com/gpu": 1}
    assert container.limits == {"cpu": 1000, "memory": 512 * 2**20, "nvidia.com/gpu": 1}


def test_init_container_limits_default_requests_too() -> None:
    spec = {**one_container(), "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "2"}}}]}
    assert Pod.from_dict(pod_dict(spec), WHERE).spec.init_containers[0].requests == {"cpu": 2000}


def test_ports_and_host_network_defaulting() -> None:
    ports = [{"containerPort": 80}, {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "10.0.0.1"}]
    plain = Pod.from_dict(pod_dict(one_container(ports=ports)), WHERE).spec.containers[0]
    host = Pod.from_dict(pod_dict({**one_container(ports=ports), "hostNetwork": True}), WHERE).spec.containers[0]
    assert [(p.container_port, p.host_port, p.protocol, p.host_ip) for p in plain.ports] == [
        (80, 0, "TCP", ""),
        (53, 5353, "UDP", "10.0.0.1"),
    ]
    assert [p.host_port for p in host.ports] == [80, 5353]


def test_sidecar_flag() -> None:
    assert Container("s", "", {}, {}, (), "Always").is_sidecar
    assert not Container("s", "", {}, {}, (), None).is_sidecar


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            one_container(resources={"requests": {"cpu": "12x"}}),
            'spec.containers[0].resources.requests.cpu: invalid quantity "12x": quantities must match the '
            "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="invalid-quantity",
        ),
        pytest.param(
            one_container(resources={"limits": {"memory": "1kk"}}),
            'spec.containers[0].resources.limits.memory: invalid quantity "1kk": unable to parse quantity\'s suffix',
            id="invalid-suffix",
        ),
        pytest.param(
            one_container(resources={"requests": {"cpu": "-1"}}),
            'spec.containers[0].resources.requests.cpu: Invalid value: "-1": must be greater than or equal to 0',
            id="negative-request",
        ),
        pytest.param(
            one_container(resources={"requests": {"cpu": ["1"]}}),
            "spec.containers[0].resources.requests.cpu: expected a quantity (string or number), got list",
            id="quantity-wrong-type",
        ),
        pytest.param(
            one_container(resources={"requests": {"cpu": None}}),
            "spec.containers[0].resources.requests.cpu: expected a quantity (string or number), got null",
            id="quantity-null",
        ),
        pytest.param(
            one_container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
            'spec.containers[0].resources.requests.cpu: Invalid value: "2": must be less than or equal to cpu '
            "limit of 1",
            id="request-above-limit",
        ),
        pytest.param(
            one_container(resources=["cpu"]),
            "spec.containers[0].resources: expected a mapping, got list",
            id="resources-list",
        ),
        pytest.param({"containers": []}, "spec.containers: Required value", id="no-containers"),
        pytest.param({}, "spec.containers: Required value", id="containers-missing"),
        pytest.param(
            {"containers": {"name": "a"}}, "spec.containers: expected a list, got mapping", id="containers-mapping"
        ),
        pytest.param(
            {"containers": ["nginx"]}, "spec.containers[0]: expected a mapping, got string", id="container-string"
        ),
        pytest.param(
            {"containers": [{"image": "nginx"}]}, "spec.containers[0].name: Required value", id="container-name-missing"
        ),
        pytest.param(
            {"containers": [{"name": "a"}], "initContainers": [{"name": "a"}]},
            'spec.containers[0].name: Duplicate value: "a"',
            id="duplicate-container-name",
        ),
        pytest.param(
            one_container(ports=[{"hostPort": 80}]),
            "spec.containers[0].ports[0].containerPort: Required value",
            id="port-without-container-port",
        ),
        pytest.param(
            one_container(ports=[{"containerPort": 70000}]),
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            id="port-out-of-range",
        ),
        pytest.param(
            one_container(ports=[{"containerPort": 80, "protocol": "HTTP"}]),
            'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "TCP", "UDP", "SCTP"',
            id="port-protocol",
        ),
        pytest.param(
            one_container(ports=[{"containerPort": "80"}]),
            "spec.containers[0].ports[0].containerPort: expected an integer, got string",
            id="port-wrong-type",
        ),
    ],
)
def test_container_errors(spec: dict[str, Any], message: str) -> None:
    assert pod_error(pod_dict(spec)) == f"{WHERE}: {message}"


# ---------------------------------------------------------------- pod spec and status


def test_pod_spec_fields_and_defaults() -> None:
    spec = {
        **one_container(),
        "nodeSelector": {"disk": "ssd"},
        "overhead": {"cpu": "250m"},
        "schedulingGates": [{"name": "a"}, {"name": "b"}],
        "affinity": {"nodeAffinity": {}},
        "topologySpreadConstraints": [{"maxSkew": 1}],
        "priorityClassName": "high",
    }
    pod = Pod.from_dict(pod_dict(spec), WHERE)
    s = pod.spec
    assert (s.node_name, s.scheduler_name, s.priority, s.preemption_policy) == (
        "",
        "default-scheduler",
        None,
        "PreemptLowerPriority",
    )
    assert (s.node_selector, s.overhead, s.scheduling_gates) == ({"disk": "ssd"}, {"cpu": 250}, ("a", "b"))
    assert s.affinity == {"nodeAffinity": {}}
    assert s.topology_spread_constraints == ({"maxSkew": 1},)
    assert s.priority_class_name == "high"
    assert (pod.status.phase, pod.status.nominated_node_name, pod.status.conditions) == ("Pending", "", [])
    assert pod.raw["spec"] == spec  # the manifest, packed and read back


def test_pod_status_fields() -> None:
    obj = pod_dict()
    obj["status"] = {"phase": "Running", "nominatedNodeName": "n1", "conditions": [{"type": "Ready"}]}
    status = Pod.from_dict(obj, WHERE).status
    assert (status.phase, status.nominated_node_name, status.conditions) == ("Running", "n1", [{"type": "Ready"}])


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param([], "expected a mapping, got list", id="object-is-a-list"),
        pytest.param(
            {"metadata": {"name": "p"}, "spec": ["x"]}, "spec: expected a mapping, got list", id="spec-is-a-list"
        ),
        pytest.param(
            pod_dict({**one_container(), "priority": "10"}),
            "spec.priority: expected an integer, got string",
            id="priority-string",
        ),
        pytest.param(
            pod_dict({**one_container(), "priority": True}),
            "spec.priority: expected an integer, got boolean",
            id="priority-boolean",
        ),
        pytest.param(
            pod_dict({**one_container(), "hostNetwork": "yes"}),
            "spec.hostNetwork: expected a boolean, got string",
            id="host-network-string",
        ),
        pytest.param(
            pod_dict({**one_container(), "nodeSelector": {"zone": 1}}),
            "spec.nodeSelector.zone: expected a string, got integer",
            id="node-selector-value",
        ),
        pytest.param(
            pod_dict({**one_container(), "preemptionPolicy": "Always"}),
            'spec.preemptionPolicy: Unsupported value: "Always": supported values: "PreemptLowerPriority", "Never"',
            id="preemption-policy",
        ),
        pytest.param(
            pod_dict({**one_container(), "schedulingGates": [{}]}),
            "spec.schedulingGates[0].name: Required value",
            id="gate-without-name",
        ),
        pytest.param(
            pod_dict({**one_container(), "affinity": "x"}),
            "spec.affinity: expected a mapping, got string",
            id="affinity-string",
        ),
        pytest.param(
            pod_dict({**one_container(), "topologySpreadConstraints": [1]}),
            "spec.topologySpreadConstraints[0]: expected a mapping, got integer",
            id="spread-item",
        ),
        pytest.param(
            pod_dict({**one_container(), "overhead": {"cpu": "x"}}),
            'spec.overhead.cpu: invalid quantity "x": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="overhead-quantity",
        ),
        pytest.param(
            {**pod_dict(), "status": {"phase": "Done"}},
            'status.phase: Unsupported value: "Done": supported values: "Pending", "Running", '
            '"Succeeded", "Failed", "Unknown"',
            id="unknown-phase",
        ),
        pytest.param(
            {**pod_dict(), "status": {"conditions": "Ready"}},
            "status.conditions: expected a list, got string",
            id="conditions-string",
        ),
    ],
)
def test_pod_errors(obj: Any, message: str) -> None:
    assert pod_error(obj) == f"{WHERE}: {message}"


# ---------------------------------------------------------------- nodes


def node(status: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> Node:
    return Node.from_dict({"metadata": {"name": "n1"}, "spec": spec or {}, "status": status or {}}, "f: Node n1")


def test_node_allocatable_falls_back_to_capacity() -> None:
    n = node({"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}})
    assert n.allocatable == n.capacity == {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}
    assert n.allocatable is not n.capacity


def test_node_allocatable_wins_and_missing_pods_means_zero() -> None:
    n = node({"capacity": {"cpu": "4", "pods": "110"}, "allocatable": {"cpu": "3500m"}})
    assert n.allocatable == {"cpu": 3500}
    assert n.allocatable.get("pods", 0) == 0


def test_node_spec_and_images() -> None:
    n = node(
        {"images": [{"names": ["nginx@sha256:1", "nginx:1.2"], "sizeBytes": 1000}, {"sizeBytes": 5}]},
        {
            "unschedulable": True,
            "taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoExecute"}],
        },
    )
    assert n.name == "n1"
    assert n.spec_unschedulable
    assert n.taints == (Taint("k", "", "NoSchedule"), Taint("k", "v", "NoExecute"))
    assert [(i.names, i.size_bytes) for i in n.images] == [(("nginx@sha256:1", "nginx:1.2"), 1000), ((), 5)]


@pytest.mark.parametrize(
    ("status", "spec", "message"),
    [
        pytest.param(
            {}, {"taints": [{"effect": "NoSchedule"}]}, "spec.taints[0].key: Required value", id="taint-without-key"
        ),
        pytest.param(
            {}, {"taints": [{"key": "k"}]}, "spec.taints[0].effect: Required value", id="taint-without-effect"
        ),
        pytest.param(
            {},
            {"taints": [{"key": "k", "effect": "NoRun"}]},
            'spec.taints[0].effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
            '"PreferNoSchedule", "NoExecute"',
            id="taint-bad-effect",
        ),
        pytest.param(
            {},
            {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "x", "effect": "NoSchedule"}]},
            'spec.taints[1]: Invalid value: "k": taints must be unique by key and effect pair',
            id="duplicate-taint",
        ),
        pytest.param(
            {},
            {"unschedulable": "true"},
            "spec.unschedulable: expected a boolean, got string",
            id="unschedulable-string",
        ),
        pytest.param(
            {"capacity": {"cpu": "four"}},
            {},
            'status.capacity.cpu: invalid quantity "four": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="capacity-quantity",
        ),
        pytest.param(
            {"allocatable": {"memory": "-1Gi"}},
            {},
            'status.allocatable.memory: Invalid value: "-1Gi": must be greater than or equal to 0',
            id="negative-allocatable",
        ),
        pytest.param(
            {"images": [{"names": [1]}]},
            {},
            "status.images[0].names[0]: expected a string, got integer",
            id="image-name-not-string",
        ),
    ],
)
def test_node_errors(status: dict[str, Any], spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        node(status, spec)
    assert str(info.value) == f"f: Node n1: {message}"


# ---------------------------------------------------------------- other kinds


def test_namespace() -> None:
    ns = Namespace.from_dict({"metadata": {"name": "prod", "labels": {"team": "a"}}}, "f: Namespace prod")
    assert (ns.metadata.name, ns.metadata.namespace, ns.metadata.labels) == ("prod", "", {"team": "a"})


def test_priority_class() -> None:
    pc = PriorityClass.from_dict(
        {"metadata": {"name": "high"}, "value": 1000, "globalDefault": True, "preemptionPolicy": "Never"}, "f"
    )
    assert (pc.value, pc.global_default, pc.preemption_policy) == (1000, True, "Never")
    plain = PriorityClass.from_dict({"metadata": {"name": "low"}, "value": -5}, "f")
    assert (plain.global_default, plain.preemption_policy) == (False, "PreemptLowerPriority")
    system = PriorityClass.from_dict({"metadata": {"name": "system-x"}, "value": 2_000_000_000}, "f")
    assert system.value == 2_000_000_000


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param({"metadata": {"name": "p"}}, "value: Required value", id="value-missing"),
        pytest.param(
            {"metadata": {"name": "p"}, "value": "high"}, "value: expected an integer, got string", id="value-string"
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "value": 1_000_000_001},
            "value: Invalid value: 1000000001: maximum allowed value of a user defined priority is 1000000000",
            id="value-above-user-maximum",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "value": 1, "preemptionPolicy": "Sometimes"},
            'preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
            id="bad-policy",
        ),
    ],
)
def test_priority_class_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        PriorityClass.from_dict(obj, "f: PriorityClass p")
    assert str(info.value) == f"f: PriorityClass p: {message}"


def test_pdb() -> None:
    pdb = PodDisruptionBudget.from_dict(
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": "50%"},
            "status": {"disruptionsAllowed": 2},
        },
        "f",
    )
    assert pdb.metadata.namespace == "default"
    assert (pdb.selector, pdb.min_available, pdb.max_unavailable, pdb.disruptions_allowed) == (
        {"matchLabels": {"app": "web"}},
        "50%",
        None,
        2,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"minAvailable": 1, "maxUnavailable": 1},
            'spec: Invalid value: "": minAvailable and maxUnavailable cannot be both set',
            id="both-set",
        ),
        pytest.param(
            {"minAvailable": "half"},
            'spec.minAvailable: Invalid value: "half": a valid percent string must be a numeric string '
            "followed by an ending '%'",
            id="not-a-percent",
        ),
        pytest.param(
            {"maxUnavailable": "150%"},
            'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
            id="percent-above-100",
        ),
        pytest.param(
            {"maxUnavailable": -1},
            "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
            id="negative",
        ),
        pytest.param(
            {"minAvailable": 1.5}, "spec.minAvailable: expected an integer or a string, got number", id="float"
        ),
        pytest.param({"selector": "app=web"}, "spec.selector: expected a mapping, got string", id="selector-string"),
    ],
)
def test_pdb_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        PodDisruptionBudget.from_dict({"metadata": {"name": "web"}, "spec": spec}, "f: PodDisruptionBudget x")
    assert str(info.value) == f"f: PodDisruptionBudget x: {message}"
