"""The MemberCluster kind: what a good manifest loads as, every bad input refused naming file, object and field,
unknown fields found like the other kinds', and the CRD in deploy/ kept in step with the loader."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from kubesched.api.field_schema import ANY, KINDS, ListOf, Schema
from kubesched.api.manifests import LoadedManifests, load_manifest_text, load_manifests
from kubesched.api.multicluster import GROUP, KIND, VERSION
from kubesched.errors import ManifestError
from kubesched.testing.multicluster_builders import MemberClusterBuilder, make_member

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "deploy" / "crds" / "memberclusters.yaml"


def load(builder: MemberClusterBuilder) -> LoadedManifests:
    return load_manifest_text(yaml.safe_dump(builder.raw()), "clusters.yaml")


def load_error(builder: MemberClusterBuilder) -> str:
    with pytest.raises(ManifestError) as info:
        load(builder)
    return str(info.value)


def test_a_full_member_loads_with_canonical_quantities_decimal_prices_and_its_connection() -> None:
    builder = (
        make_member("us-east-a")
        .region("us-east")
        .zone("us-east-1a")
        .provider("aws")
        .taint("spot", "true", "PreferNoSchedule")
        .cost(cpu="0.031", memory=0.0042, **{"nvidia.com/gpu": "2.48"})
        .agent("https://agent.us-east-a:8443")
        .observed("2026-03-01T11:59:30Z")
        .allocatable(cpu="64", memory="256Gi", pods="330")
        .allocated(cpu="16", memory="64Gi", pods="40")
        .nodes(3, cpu="16", memory="64Gi", pods="96")
        .apis("v1", "Pod")
        .apis("ray.io/v1", "RayCluster")
    )
    loaded = load(builder)
    assert loaded.warnings == []
    (member,) = loaded.member_clusters
    assert member.name == "us-east-a" and member.metadata.namespace == ""
    assert member.labels["multicluster.kubesched.io/provider"] == "aws"
    assert [(t.key, t.value, t.effect) for t in member.taints] == [("spot", "true", "PreferNoSchedule")]
    assert member.cost is not None
    assert member.cost.cpu_per_core_hour == Decimal("0.031")
    assert member.cost.memory_per_gib_hour == Decimal("0.0042")  # a YAML float read through its text
    assert member.cost.extended_per_unit_hour == {"nvidia.com/gpu": Decimal("2.48")}
    assert member.connection is not None and member.connection.mode == "pull"
    assert member.connection.agent is not None and member.connection.agent.token_secret_ref.key == "token"
    status = member.status
    assert status.ready and status.observed_at == 1772366370.0
    assert status.allocatable == {"cpu": 64000, "memory": 256 * 2**30, "pods": 330}
    assert status.allocated == {"cpu": 16000, "memory": 64 * 2**30, "pods": 40}
    assert status.node_summary is not None and status.node_summary[0].count == 3
    assert status.node_summary[0].free == {"cpu": 16000, "memory": 64 * 2**30, "pods": 96}
    assert status.api_enablements is not None
    assert [(e.group_version, e.kinds) for e in status.api_enablements] == [
        ("v1", ("Pod",)),
        ("ray.io/v1", ("RayCluster",)),
    ]


@pytest.mark.parametrize(
    ("builder", "ready", "reason"),
    [
        pytest.param(make_member().ready(True), True, "", id="ready-shorthand-true"),
        pytest.param(make_member().ready(False), False, "", id="ready-shorthand-false"),
        pytest.param(make_member().condition("True", "ClusterReady"), True, "ClusterReady", id="ready-condition-true"),
        pytest.param(make_member().condition("Unknown", "LeaseLost"), False, "LeaseLost", id="ready-condition-unknown"),
        pytest.param(make_member().status(ready=None), False, "", id="neither-means-not-ready"),
    ],
)
def test_readiness_comes_from_the_shorthand_or_the_ready_condition(
    builder: MemberClusterBuilder, ready: bool, reason: str
) -> None:
    (member,) = load(builder).member_clusters
    assert (member.status.ready, member.status.ready_reason) == (ready, reason)


def test_push_mode_records_the_kubeconfig_secret_with_its_default_key() -> None:
    (member,) = load(make_member().push("east-kubeconfig")).member_clusters
    assert member.connection is not None and member.connection.mode == "push"
    ref = member.connection.kubeconfig_secret_ref
    assert ref is not None and (ref.namespace, ref.name, ref.key) == (
        "kubesched-system",
        "east-kubeconfig",
        "kubeconfig",
    )


W = "clusters.yaml: MemberCluster m"


def m() -> MemberClusterBuilder:
    return make_member("m")


@pytest.mark.parametrize(
    ("builder", "message"),
    [
        pytest.param(
            m().allocatable(cpu="lots"),
            'status.allocatable.cpu: invalid quantity "lots": '
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="bad-quantity",
        ),
        pytest.param(
            m().allocated(memory="-1Gi"),
            'status.allocated.memory: Invalid value: "-1Gi": must be greater than or equal to 0',
            id="negative-allocated",
        ),
        pytest.param(
            m().nodes(2, cpu="2Qi"),
            'status.nodeSummary[0].free.cpu: invalid quantity "2Qi": '
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="bad-node-summary-quantity",
        ),
        pytest.param(
            m().nodes(0, cpu="2"),
            "status.nodeSummary[0].count: Invalid value: 0: must be greater than 0",
            id="zero-node-count",
        ),
        pytest.param(
            m().status(nodeSummary=[{"free": {"cpu": "2"}}]),
            "status.nodeSummary[0].count: Required value",
            id="no-node-count",
        ),
        pytest.param(
            m().status(nodeSummary=[{"count": 1, "taints": [{"key": "spot", "effect": "PreferNoSchedule"}]}]),
            'status.nodeSummary[0].taints[0].effect: Invalid value: "PreferNoSchedule": must be "NoSchedule" or '
            '"NoExecute"',
            id="node-summary-taint-that-keeps-no-pod-off",
        ),
        pytest.param(
            m().taint("k", "v", "NoDeploy"),
            'spec.taints[0].effect: Unsupported value: "NoDeploy": supported values: "NoSchedule", "PreferNoSchedule", '
            '"NoExecute"',
            id="bad-taint-effect",
        ),
        pytest.param(
            m().taint("k", "a").taint("k", "b"),
            'spec.taints[1]: Invalid value: "k": taints must be unique by key and effect pair',
            id="duplicate-taint",
        ),
        pytest.param(
            m().cost(cpu="-0.01"),
            'spec.cost.cpuPerCoreHour: Invalid value: "-0.01": must be greater than or equal to 0',
            id="negative-cost",
        ),
        pytest.param(
            m().cost(memory="cheap"),
            'spec.cost.memoryPerGiBHour: Invalid value: "cheap": must be a decimal number, e.g. "0.031"',
            id="non-numeric-cost",
        ),
        pytest.param(
            m().cost(cpu="NaN"),
            'spec.cost.cpuPerCoreHour: Invalid value: "NaN": must be a finite decimal number',
            id="nan-cost",
        ),
        pytest.param(
            m().spec(cost={"cpuPerCoreHour": True}),
            "spec.cost.cpuPerCoreHour: expected a decimal number (string or number), got boolean",
            id="boolean-cost",
        ),
        pytest.param(
            m().cost(**{"nvidia.com/gpu": "-2"}),
            'spec.cost.extendedPerUnitHour.nvidia.com/gpu: Invalid value: "-2": must be greater than or equal to 0',
            id="negative-extended-cost",
        ),
        pytest.param(
            m().spec(cost={"extendedPerUnitHour": {"cpu": "2"}}),
            'spec.cost.extendedPerUnitHour.cpu: Invalid value: "cpu": cpu and memory have their own prices',
            id="cpu-priced-as-extended",
        ),
        pytest.param(m().spec(cost="free"), "spec.cost: expected a mapping, got string", id="cost-not-a-mapping"),
        pytest.param(
            m().spec(connection={}),
            'spec.connection: Invalid value: "": exactly one of kubeconfigSecretRef or agent must be set',
            id="no-connection-mode",
        ),
        pytest.param(
            m().spec(
                connection={
                    "kubeconfigSecretRef": {"namespace": "a", "name": "b"},
                    "agent": {"url": "https://x", "tokenSecretRef": {"namespace": "a", "name": "t"}},
                }
            ),
            'spec.connection: Invalid value: "": exactly one of kubeconfigSecretRef or agent must be set',
            id="both-connection-modes",
        ),
        pytest.param(
            m().agent("http://agent:8080"),
            'spec.connection.agent.url: Invalid value: "http://agent:8080": must be an https:// URL with a host '
            "(the agent serves HTTPS)",
            id="agent-not-https",
        ),
        pytest.param(
            m().spec(connection={"agent": {"url": "https://agent"}}),
            "spec.connection.agent.tokenSecretRef: Required value: the Secret holding the bearer token",
            id="agent-without-token",
        ),
        pytest.param(
            m().spec(connection={"kubeconfigSecretRef": {"namespace": "a"}}),
            "spec.connection.kubeconfigSecretRef.name: Required value",
            id="secret-ref-without-name",
        ),
        pytest.param(m().status(ready="yes"), "status.ready: expected a boolean, got string", id="ready-not-boolean"),
        pytest.param(
            m().condition("False").status(ready=True),
            "status.ready: Invalid value: true: disagrees with the Ready condition; give one or the other",
            id="ready-disagrees-with-condition",
        ),
        pytest.param(
            m().condition("Maybe"),
            'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
            id="bad-condition-status",
        ),
        pytest.param(
            m().observed("yesterday"),
            'status.observedAt: Invalid value: "yesterday": expected an RFC 3339 timestamp',
            id="bad-observed-at",
        ),
        pytest.param(
            m().status(apiEnablements=[{"groupVersion": "a/b/c", "resources": []}]),
            'status.apiEnablements[0].groupVersion: Invalid value: "a/b/c": must be "<version>" or "<group>/<version>"',
            id="bad-group-version",
        ),
        pytest.param(
            m().status(apiEnablements=[{"groupVersion": "v1", "resources": [{"name": "pods"}]}]),
            "status.apiEnablements[0].resources[0].kind: Required value",
            id="resource-without-kind",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_file_the_object_and_the_field(
    builder: MemberClusterBuilder, message: str
) -> None:
    assert load_error(builder) == f"{W}: {message}"


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        pytest.param(lambda raw: raw["spec"].update(costs={}), 'unknown field "spec.costs"', id="spec-typo"),
        pytest.param(
            lambda raw: raw["status"].update(nodeSummary=[{"count": 1, "fre": {}}]),
            'unknown field "status.nodeSummary[0].fre"',
            id="node-summary-typo",
        ),
        pytest.param(
            lambda raw: raw["spec"].update(
                connection={
                    "agent": {"url": "https://a", "token": "x", "tokenSecretRef": {"namespace": "a", "name": "b"}}
                }
            ),
            'unknown field "spec.connection.agent.token"',
            id="agent-typo",
        ),
        pytest.param(
            lambda raw: raw.update(apiVersion=f"{GROUP}/v1"),
            f'no matches for kind "{KIND}" in version "{GROUP}/v1"',
            id="unserved-version",
        ),
    ],
)
def test_unknown_fields_and_versions_are_findings_and_errors_under_strict(
    change: Callable[[dict[str, Any]], None], finding: str, tmp_path: Path
) -> None:
    raw = make_member("m").raw()
    change(raw)
    path = tmp_path / "clusters.yaml"
    path.write_text(yaml.safe_dump(raw))
    where = f"{path}: MemberCluster m"
    assert load_manifests([str(path)]).warnings == [f"{where}: {finding}"]
    with pytest.raises(ManifestError) as info:
        load_manifests([str(path)], strict=True)
    assert str(info.value) == f"{where}: {finding}"


def test_a_member_named_twice_is_refused() -> None:
    text = yaml.safe_dump_all([make_member("m").raw(), make_member("m").raw()])
    with pytest.raises(ManifestError, match=r"MemberCluster m: defined twice \(first in clusters.yaml\)"):
        load_manifest_text(text, "clusters.yaml")


# ---- the CRD ------------------------------------------------------------------------------------


def _crd_properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    return properties


def _schema_paths(schema: Schema, prefix: str) -> list[str]:
    paths = []
    for name, sub in schema.items():
        paths.append(prefix + name)
        item = sub.item if isinstance(sub, ListOf) else sub
        if item is not ANY:
            marker = "[]" if isinstance(sub, ListOf) else ""
            paths.extend(_schema_paths(cast(Schema, item), f"{prefix}{name}{marker}."))
    return paths


def _crd_has(schema: Mapping[str, Any], path: str) -> bool:
    node: Mapping[str, Any] = schema
    for part in path.split("."):
        is_list = part.endswith("[]")
        node = _crd_properties(node).get(part.removesuffix("[]"), {}) if node else {}
        if not node:
            return False
        if is_list:
            node = node.get("items", {})
    return True


def test_the_crd_serves_the_loaders_group_version_and_kind_and_declares_every_field_it_reads() -> None:
    crd = yaml.safe_load(CRD.read_text())
    assert crd["spec"]["group"] == GROUP and crd["spec"]["names"]["kind"] == KIND
    assert crd["spec"]["scope"] == "Cluster"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == VERSION and version["served"] and version["storage"]
    schema = version["schema"]["openAPIV3Schema"]
    missing = [
        path
        for path in _schema_paths(KINDS[KIND], "")
        if not path.startswith("metadata.")
        and path not in ("apiVersion", "kind", "metadata")
        and not _crd_has(schema, path)
    ]
    assert missing == []
    effects = _crd_properties(_crd_properties(schema)["spec"])["taints"]["items"]["properties"]["effect"]["enum"]
    assert effects == ["NoSchedule", "PreferNoSchedule", "NoExecute"]
