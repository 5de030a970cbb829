"""Loading manifest files: documents, lists, warnings, every error's file/line/object, priority resolution."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kubesched.api.manifests import LoadedManifests, load_manifest_text, load_manifests, resolve_priorities
from kubesched.errors import ManifestError
from kubesched.testing.builders import make_pod

CLUSTER = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Node
    metadata:
      name: n1
      creationTimestamp: 2024-01-01T00:00:00Z
    status:
      capacity: {cpu: "4", memory: 8Gi, pods: "110"}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: web-1, namespace: prod}
    spec:
      containers: [{name: app, resources: {requests: {cpu: 500m}}}]
    ---
    # only a comment: an empty document
    ---
    apiVersion: v1
    kind: Namespace
    metadata: {name: prod}
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000
    ---
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: prod}
    spec: {maxUnavailable: 1}
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: settings}
    """
)


def load_error(text: str, source: str = "cluster.yaml") -> str:
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, source)
    return str(info.value)


def pod_yaml(name: str = "web-1", spec: str = "containers: [{name: app}]") -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{{spec}}}\n"


def test_every_supported_kind_is_loaded() -> None:
    loaded = load_manifest_text(CLUSTER, "cluster.yaml")
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert loaded.nodes[0].metadata.creation_timestamp == 1704067200.0
    assert [p.key for p in loaded.pods] == ["prod/web-1"]
    assert loaded.pods[0].spec.containers[0].requests == {"cpu": 500}
    assert [n.metadata.name for n in loaded.namespaces] == ["prod"]
    assert [(c.metadata.name, c.value) for c in loaded.priority_classes] == [("high", 1000)]
    assert [(p.metadata.name, p.max_unavailable) for p in loaded.pdbs] == [("web", 1)]
    assert loaded.warnings == ['cluster.yaml: skipping unsupported kind "ConfigMap" (settings)']


def test_kubectl_list_and_typed_list_items() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
          metadata: {name: n1}
        - apiVersion: v1
          kind: Pod
          metadata: {name: a}
          spec: {containers: [{name: c}]}
        ---
        apiVersion: v1
        kind: PodList
        metadata: {resourceVersion: "7"}
        items:
        - metadata: {name: b, namespace: x}
          spec: {containers: [{name: c}]}
        """
    )
    loaded = load_manifest_text(text, "dump.yaml")
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert [p.key for p in loaded.pods] == ["default/a", "x/b"]
    assert loaded.pods[1].raw["kind"] == "Pod"


def test_empty_list_and_empty_text_load_nothing() -> None:
    assert load_manifest_text("apiVersion: v1\nkind: List\nitems: []\n").pods == []
    empty = load_manifest_text("---\n---\n", "empty.yaml")
    assert (empty.pods, empty.nodes, empty.warnings) == ([], [], [])


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        pytest.param(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
            'cluster.yaml: skipping unsupported kind "Deployment" (web)',
            id="deployment",
        ),
        pytest.param(
            "apiVersion: v1\nkind: ConfigMap\n", 'cluster.yaml: skipping unsupported kind "ConfigMap"', id="unnamed"
        ),
        pytest.param(
            "apiVersion: example.com/v1\nkind: Pod\nmetadata: {name: p}\n",
            'cluster.yaml: skipping unsupported kind "Pod" in apiVersion "example.com/v1" (p)',
            id="known-kind-foreign-group",
        ),
    ],
)
def test_unsupported_kinds_warn(text: str, warning: str) -> None:
    assert load_manifest_text(text, "cluster.yaml").warnings == [warning]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: [x\n",
            "cluster.yaml: line 6: could not parse YAML: ",
            id="malformed-yaml-names-line",
        ),
        pytest.param(
            "- 1\n- 2\n", "cluster.yaml: document 1 (line 1): expected a mapping, got list", id="document-not-a-mapping"
        ),
        pytest.param(
            pod_yaml("a") + "---\nhello\n",
            "cluster.yaml: document 2 (line 6): expected a mapping, got string",
            id="second-document-index",
        ),
        pytest.param(
            "apiVersion: v1\nmetadata: {name: a}\n",
            "cluster.yaml: document 1 (line 1): kind: Required value",
            id="missing-kind",
        ),
        pytest.param(
            "kind: Pod\nmetadata: {name: a}\n",
            "cluster.yaml: document 1 (line 1): apiVersion: Required value",
            id="missing-api-version",
        ),
        pytest.param(
            "apiVersion: v1\nkind: [Pod]\n",
            "cluster.yaml: document 1 (line 1): kind: expected a string, got list",
            id="kind-not-a-string",
        ),
        pytest.param(
            "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
            "cluster.yaml: document 1 (line 1): items: expected a list, got mapping",
            id="items-not-a-list",
        ),
        pytest.param(
            "apiVersion: v1\nkind: List\nitems: [3]\n",
            "cluster.yaml: document 1 (line 1) items[0]: expected a mapping, got integer",
            id="item-not-a-mapping",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: c}]}\n",
            "cluster.yaml: document 1 (line 1): Pod: metadata.name: Required value",
            id="unnamed-pod",
        ),
        pytest.param(
            pod_yaml("web-1", "containers: [{name: app, resources: {requests: {cpu: 12x}}}]"),
            "cluster.yaml: Pod default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity "
            '"12x": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="field-error-names-object",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: k}]}\n",
            "cluster.yaml: Node n1: spec.taints[0].effect: Required value",
            id="cluster-scoped-object-name",
        ),
        pytest.param(
            pod_yaml("a") + "---\n" + pod_yaml("a"),
            "cluster.yaml: Pod default/a: defined twice (first in cluster.yaml)",
            id="duplicate-object",
        ),
    ],
)
def test_load_errors(text: str, message: str) -> None:
    assert load_error(text).startswith(message)


def test_same_name_in_other_namespace_or_kind_is_no_duplicate() -> None:
    text = pod_yaml("a") + "---\n" + pod_yaml("a").replace("{name: a}", "{name: a, namespace: b}")
    text += "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
    loaded = load_manifest_text(text)
    assert ([p.key for p in loaded.pods], [n.name for n in loaded.nodes]) == (["default/a", "b/a"], ["a"])


def test_files_json_and_directories(tmp_path: Path) -> None:
    (tmp_path / "b-pods.yaml").write_text(pod_yaml("p1"))
    (tmp_path / "a-nodes.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": [{"metadata": {"name": "n1"}}]})
    )
    (tmp_path / "notes.txt").write_text("not a manifest")
    extra = tmp_path / "extra.yml"
    extra.write_text(pod_yaml("p2"))
    loaded = load_manifests([str(tmp_path), str(extra)])
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert [p.name for p in loaded.pods] == ["p1", "p2"]


def test_duplicate_across_files_names_both(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(pod_yaml("web"))
    second.write_text(pod_yaml("web"))
    with pytest.raises(ManifestError) as info:
        load_manifests([str(first), str(second)])
    assert str(info.value) == f"{second}: Pod default/web: defined twice (first in {first})"


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ManifestError) as info:
        load_manifests([str(missing)])
    assert str(info.value) == f"{missing}: no such file"


def test_malformed_json_names_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "kind": "Pod",\n  oops\n}')
    with pytest.raises(ManifestError) as info:
        load_manifests([str(bad)])
    assert str(info.value).startswith(f"{bad}: line 3: could not parse JSON: ")


def test_not_utf8_is_a_manifest_error(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"kind: \xff\n")
    with pytest.raises(ManifestError, match="could not read file"):
        load_manifests([str(bad)])


# ---------------------------------------------------------------- priorities

HIGH = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"


def priority_class(name: str, value: int, *, default: bool = False, policy: str = "") -> str:
    text = f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n"
    if default:
        text += "globalDefault: true\n"
    if policy:
        text += f"preemptionPolicy: {policy}\n"
    return text + "---\n"


@pytest.mark.parametrize(
    ("text", "priority", "class_name", "policy"),
    [
        pytest.param(pod_yaml(), 0, "", "PreemptLowerPriority", id="no-class-no-default-is-zero"),
        pytest.param(
            HIGH + "---\n" + pod_yaml(spec="priorityClassName: high, containers: [{name: c}]"),
            1000,
            "high",
            "PreemptLowerPriority",
            id="named-class",
        ),
        pytest.param(
            priority_class("dflt", 5, default=True) + pod_yaml(), 5, "dflt", "PreemptLowerPriority", id="global-default"
        ),
        pytest.param(
            priority_class("b", 7, default=True) + priority_class("a", 3, default=True) + pod_yaml(),
            3,
            "a",
            "PreemptLowerPriority",
            id="lowest-global-default-wins",
        ),
        pytest.param(
            pod_yaml(spec="priorityClassName: system-node-critical, containers: [{name: c}]"),
            2_000_001_000,
            "system-node-critical",
            "PreemptLowerPriority",
            id="built-in-system-class",
        ),
        pytest.param(
            priority_class("never", 9, policy="Never")
            + pod_yaml(spec="priorityClassName: never, containers: [{name: c}]"),
            9,
            "never",
            "Never",
            id="class-preemption-policy",
        ),
        pytest.param(
            pod_yaml(spec="priority: 42, containers: [{name: c}]"),
            42,
            "",
            "PreemptLowerPriority",
            id="explicit-priority-kept",
        ),
        pytest.param(
            priority_class("dflt", 5, default=True) + pod_yaml(spec="priority: 42, containers: [{name: c}]"),
            42,
            "dflt",
            "PreemptLowerPriority",
            id="explicit-priority-kept-over-default",
        ),
        pytest.param(
            HIGH + "---\n" + pod_yaml(spec="priority: 1000, priorityClassName: high, containers: [{name: c}]"),
            1000,
            "high",
            "PreemptLowerPriority",
            id="explicit-priority-equal-to-class",
        ),
    ],
)
def test_priority_resolution(text: str, priority: int, class_name: str, policy: str) -> None:
    pod = load_manifest_text(text).pods[0]
    assert (pod.spec.priority, pod.spec.priority_class_name, pod.spec.preemption_policy) == (
        priority,
        class_name,
        policy,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            pod_yaml(spec="priorityClassName: nope, containers: [{name: c}]"),
            'cluster.yaml: Pod default/web-1: spec.priorityClassName: Not found: "nope": no PriorityClass '
            "with this name was loaded",
            id="missing-class",
        ),
        pytest.param(
            HIGH + "---\n" + pod_yaml(spec="priority: 5, priorityClassName: high, containers: [{name: c}]"),
            "cluster.yaml: Pod default/web-1: spec.priority: the integer value of priority (5) must not be "
            "provided in pod spec; priority admission controller computed 1000 from the given "
            "PriorityClass name",
            id="explicit-priority-contradicts-class",
        ),
        pytest.param(
            priority_class("never", 9, policy="Never")
            + pod_yaml(
                spec="priorityClassName: never, preemptionPolicy: PreemptLowerPriority, containers: [{name: c}]"
            ),
            "cluster.yaml: Pod default/web-1: spec.preemptionPolicy: the string value of PreemptionPolicy "
            "(PreemptLowerPriority) must not be provided in pod spec; priority admission controller "
            "computed Never from the given PriorityClass name",
            id="explicit-policy-contradicts-class",
        ),
    ],
)
def test_priority_errors(text: str, message: str) -> None:
    assert load_error(text) == message


def test_resolve_priorities_on_hand_built_objects() -> None:
    loaded = LoadedManifests(pods=[make_pod().priority_class("system-cluster-critical").obj(), make_pod("b").obj()])
    resolve_priorities(loaded)
    assert [p.spec.priority for p in loaded.pods] == [2_000_000_000, 0]
    missing = LoadedManifests(pods=[make_pod("x").priority_class("gone").obj()])
    with pytest.raises(ManifestError, match=r'^Pod default/x: spec.priorityClassName: Not found: "gone"'):
        resolve_priorities(missing)
