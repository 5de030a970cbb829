"""Service, ReplicaSet, ReplicationController, StatefulSet from manifest dicts: selectors, defaults, errors."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.selectors import LabelSelector, LabelSelectorRequirement
from kubesched.api.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from kubesched.errors import ManifestError

WHERE = "cluster.yaml: {kind} default/web"


def manifest(kind: str, spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": kind, "metadata": {"name": "web", **metadata}}
    if spec is not None:
        obj["spec"] = spec
    return obj


def error(cls: Any, obj: Any) -> str:
    with pytest.raises(ManifestError) as info:
        cls.from_dict(obj, WHERE.format(kind=cls.__name__))
    return str(info.value)


# ---------------------------------------------------------------- Service


@pytest.mark.parametrize(
    ("spec", "selector"),
    [
        pytest.param({"selector": {"app": "web"}}, {"app": "web"}, id="selector"),
        pytest.param({"type": "ExternalName", "externalName": "x.example.com"}, None, id="no-selector-is-none"),
        pytest.param({"selector": {}}, None, id="empty-selector-is-none"),
        pytest.param({"selector": None}, None, id="null-selector-is-none"),
        pytest.param(None, None, id="no-spec"),
    ],
)
def test_service_selector(spec: dict[str, Any] | None, selector: dict[str, str] | None) -> None:
    service = Service.from_dict(manifest("Service", spec, namespace="prod"), "s.yaml: Service prod/web")
    assert service.selector == selector
    assert service.metadata.namespace == "prod"
    assert service.raw["kind"] == "Service"


def test_service_namespace_defaults_and_uid_is_stable() -> None:
    first = Service.from_dict(manifest("Service", {"selector": {"a": "b"}}), "x")
    second = Service.from_dict(manifest("Service", {"selector": {"a": "b"}}), "x")
    assert first.metadata.namespace == "default"
    assert first.metadata.uid == second.metadata.uid != ""


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(
            manifest("Service", {"selector": {"app": 1}}),
            "cluster.yaml: Service default/web: spec.selector.app: expected a string, got integer",
            id="selector-value-not-a-string",
        ),
        pytest.param(
            manifest("Service", {"selector": ["app"]}),
            "cluster.yaml: Service default/web: spec.selector: expected a mapping, got list",
            id="selector-not-a-mapping",
        ),
        pytest.param(
            {"kind": "Service", "metadata": {}},
            "cluster.yaml: Service default/web: metadata.name: Required value",
            id="no-name",
        ),
        pytest.param(["x"], "cluster.yaml: Service default/web: expected a mapping, got list", id="not-a-mapping"),
    ],
)
def test_service_errors(obj: Any, message: str) -> None:
    assert error(Service, obj) == message


# ---------------------------------------------------------------- ReplicationController


@pytest.mark.parametrize(
    ("spec", "labels", "selector", "object_labels"),
    [
        pytest.param({"selector": {"app": "web"}}, {}, {"app": "web"}, {}, id="explicit-selector"),
        pytest.param(
            {"template": {"metadata": {"labels": {"app": "web", "tier": "fe"}}}},
            {},
            {"app": "web", "tier": "fe"},
            {"app": "web", "tier": "fe"},
            id="selector-and-labels-from-template",
        ),
        pytest.param(
            {"selector": {"app": "web"}, "template": {"metadata": {"labels": {"app": "web", "v": "2"}}}},
            {"own": "yes"},
            {"app": "web"},
            {"own": "yes"},
            id="explicit-selector-and-labels-kept",
        ),
    ],
)
def test_replication_controller_selector_defaulting(
    spec: dict[str, Any], labels: dict[str, str], selector: dict[str, str], object_labels: dict[str, str]
) -> None:
    rc = ReplicationController.from_dict(manifest("ReplicationController", spec, labels=labels), "x")
    assert rc.selector == selector
    assert rc.metadata.labels == object_labels


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"template": {"metadata": {}}},
            "cluster.yaml: ReplicationController default/web: spec.selector: Required value",
            id="no-selector-no-template-labels",
        ),
        pytest.param(
            {"template": {"metadata": {"labels": {"app": True}}}},
            "cluster.yaml: ReplicationController default/web: spec.template.metadata.labels.app: expected a string, "
            "got boolean",
            id="template-label-not-a-string",
        ),
        pytest.param(
            {"template": []},
            "cluster.yaml: ReplicationController default/web: spec.template: expected a mapping, got list",
            id="template-not-a-mapping",
        ),
    ],
)
def test_replication_controller_errors(spec: dict[str, Any], message: str) -> None:
    assert error(ReplicationController, manifest("ReplicationController", spec)) == message


# ---------------------------------------------------------------- ReplicaSet and StatefulSet


@pytest.mark.parametrize(
    "cls", [pytest.param(ReplicaSet, id="replica-set"), pytest.param(StatefulSet, id="stateful-set")]
)
def test_controller_label_selector(cls: Any) -> None:
    raw_selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    obj = cls.from_dict(manifest(cls.__name__, {"replicas": 3, "selector": raw_selector}), "x")
    assert obj.selector == LabelSelector(
        match_labels={"app": "web"},
        match_expressions=(
            LabelSelectorRequirement("tier", "In", ("fe", "be")),
            LabelSelectorRequirement("canary", "DoesNotExist"),
        ),
    )
    assert obj.selector.raw is raw_selector
    assert not obj.selector.is_empty


@pytest.mark.parametrize(
    ("cls", "spec", "message"),
    [
        pytest.param(
            ReplicaSet, {}, "cluster.yaml: ReplicaSet default/web: spec.selector: Required value", id="rs-no-selector"
        ),
        pytest.param(
            ReplicaSet,
            {"selector": {}},
            "cluster.yaml: ReplicaSet default/web: spec.selector: Invalid value: {}: empty selector is invalid for "
            "deployment",
            id="rs-empty-selector",
        ),
        pytest.param(
            StatefulSet,
            {"selector": {"matchLabels": {}}},
            'cluster.yaml: StatefulSet default/web: spec.selector: Invalid value: {"matchLabels": {}}: empty '
            "selector is invalid for statefulset",
            id="sts-empty-selector",
        ),
        pytest.param(
            StatefulSet,
            {"selector": "app=web"},
            "cluster.yaml: StatefulSet default/web: spec.selector: expected a mapping, got string",
            id="sts-selector-not-a-mapping",
        ),
        pytest.param(
            ReplicaSet,
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}},
            'cluster.yaml: ReplicaSet default/web: spec.selector.matchExpressions[0].operator: Invalid value: "Gt": '
            "not a valid selector operator",
            id="rs-node-only-operator",
        ),
    ],
)
def test_controller_errors(cls: Any, spec: dict[str, Any], message: str) -> None:
    assert error(cls, manifest(cls.__name__, spec)) == message
