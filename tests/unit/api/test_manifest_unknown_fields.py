"""Unknown fields below metadata: a typo at any depth of a loaded kind is a finding named by its path, as the API
server's strict field validation names it (``unknown field "spec.containers[0].resource"``): a warning, or an
error with strict. Every field Kubernetes v1.35 has is accepted, free-form maps accept any key, and the bundled
manifests are clean."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from kubesched.api.field_schema import ANY, KINDS, ListOf, Schema
from kubesched.api.manifest_checks import unknown_fields
from kubesched.api.manifests import load_manifests
from kubesched.cli.main import main
from kubesched.errors import ManifestError

ROOT = Path(__file__).resolve().parents[3]
EVERY_FIELD = Path(__file__).parent / "testdata" / "every-field.yaml"

_POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
_NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"

# (manifest, the finding's prefix and path): one typo each, at the depths a user is likely to get wrong.
DEEP = {
    "container-resource": (
        _POD + "  containers: [{name: c, image: x, resource: {requests: {cpu: '1'}}}]\n",
        'Pod default/p: unknown field "spec.containers[0].resource"',
    ),
    "second-container-requests-typo": (
        _POD + "  containers:\n  - {name: a, image: x}\n  - {name: b, image: x, resources: {request: {cpu: '1'}}}\n",
        'Pod default/p: unknown field "spec.containers[1].resources.request"',
    ),
    "init-container-typo": (
        _POD + "  containers: [{name: c, image: x}]\n  initContainers: [{name: i, image: x, restartpolicy: Always}]\n",
        'Pod default/p: unknown field "spec.initContainers[0].restartpolicy"',
    ),
    "pod-spec-toleration": (
        _POD + "  containers: [{name: c, image: x}]\n  toleration: [{key: a, operator: Exists}]\n",
        'Pod default/p: unknown field "spec.toleration"',
    ),
    "toleration-effect-typo": (
        _POD + "  containers: [{name: c, image: x}]\n  tolerations: [{key: a, operator: Exists, efect: NoSchedule}]\n",
        'Pod default/p: unknown field "spec.tolerations[0].efect"',
    ),
    "node-affinity-term": (
        _POD
        + "  containers: [{name: c, image: x}]\n"
        + "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        + "        nodeSelectorTerm: [{matchExpressions: [{key: a, operator: Exists}]}]\n",
        'Pod default/p: unknown field "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution'
        '.nodeSelectorTerm"',
    ),
    "match-expression-typo": (
        _POD
        + "  containers: [{name: c, image: x}]\n"
        + "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        + "        nodeSelectorTerms: [{matchExpressions: [{key: a, operator: In, value: [b]}]}]\n",
        'unknown field "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution'
        '.nodeSelectorTerms[0].matchExpressions[0].value"',
    ),
    "pod-anti-affinity-label-selector": (
        _POD
        + "  containers: [{name: c, image: x}]\n"
        + "  affinity:\n    podAntiAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n"
        + "      - weight: 1\n        podAffinityTerm: {labelSelector: {matchLabel: {a: b}}, topologyKey: zone}\n",
        'unknown field "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]'
        '.podAffinityTerm.labelSelector.matchLabel"',
    ),
    "topology-spread-typo": (
        _POD
        + "  containers: [{name: c, image: x}]\n"
        + "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,"
        + " labelSelectors: {matchLabels: {a: b}}}]\n",
        'Pod default/p: unknown field "spec.topologySpreadConstraints[0].labelSelectors"',
    ),
    "volume-source-typo": (
        _POD + "  containers: [{name: c, image: x}]\n  volumes: [{name: v, persistentVolumeclaim: {claimName: d}}]\n",
        'Pod default/p: unknown field "spec.volumes[0].persistentVolumeclaim"',
    ),
    "volume-claim-name-typo": (
        _POD + "  containers: [{name: c, image: x}]\n  volumes: [{name: v, persistentVolumeClaim: {claimname: d}}]\n",
        'Pod default/p: unknown field "spec.volumes[0].persistentVolumeClaim.claimname"',
    ),
    "ephemeral-volume-typo": (
        _POD
        + "  containers: [{name: c, image: x}]\n"
        + "  volumes: [{name: v, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce],"
        + " storageClass: fast, resources: {requests: {storage: 1Gi}}}}}}]\n",
        'Pod default/p: unknown field "spec.volumes[0].ephemeral.volumeClaimTemplate.spec.storageClass"',
    ),
    "node-status-typo": (
        _NODE + "status: {allocatible: {cpu: '4'}}\n",
        'Node n: unknown field "status.allocatible"',
    ),
    "node-image-typo": (
        _NODE + "status: {images: [{name: [nginx], sizeBytes: 1}]}\n",
        'Node n: unknown field "status.images[0].name"',
    ),
    "node-taint-typo": (
        _NODE + "spec: {taints: [{key: a, effect: NoSchedule, timeadded: '2025-01-01T00:00:00Z'}]}\n",
        'Node n: unknown field "spec.taints[0].timeadded"',
    ),
    "replica-set-template": (
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\n"
        "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec: {containers: [{name: c, image: x, resource: {}}]}\n",
        'ReplicaSet default/rs: unknown field "spec.template.spec.containers[0].resource"',
    ),
    "replication-controller-template": (
        "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc}\n"
        "spec:\n  selector: {a: b}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec: {containers: [{name: c, image: x}], nodeselector: {a: b}}\n",
        'ReplicationController default/rc: unknown field "spec.template.spec.nodeselector"',
    ),
    "stateful-set-claim-template": (
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\n"
        "spec:\n  selector: {matchLabels: {a: b}}\n  serviceName: s\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec: {containers: [{name: c, image: x}]}\n"
        "  volumeClaimTemplates: [{metadata: {name: d}, spec: {accessMode: [ReadWriteOnce]}}]\n",
        'StatefulSet default/s: unknown field "spec.volumeClaimTemplates[0].spec.accessMode"',
    ),
    "pdb-spec-typo": (
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {minAvailable: 1, selectors: {matchLabels: {a: b}}}\n",
        'PodDisruptionBudget default/b: unknown field "spec.selectors"',
    ),
    "service-port-typo": (
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
        "spec: {selector: {a: b}, ports: [{port: 80, target: 8080}]}\n",
        'Service default/s: unknown field "spec.ports[0].target"',
    ),
    "persistent-volume-affinity": (
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\n"
        "spec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  local: {path: /mnt}\n"
        "  nodeAffinity:\n    required:\n      nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}]\n"
        "    preferred: []\n",
        'PersistentVolume pv: unknown field "spec.nodeAffinity.preferred"',
    ),
    "claim-spec-typo": (
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\n"
        "spec: {accessModes: [ReadWriteOnce], storageclassName: fast, resources: {requests: {storage: 1Gi}}}\n",
        'PersistentVolumeClaim default/c: unknown field "spec.storageclassName"',
    ),
    "storage-class-topology": (
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc}\nprovisioner: x\n"
        "allowedTopologies: [{matchLabelExpressions: [{key: zone, values: [a], operator: In}]}]\n",
        'StorageClass sc: unknown field "allowedTopologies[0].matchLabelExpressions[0].operator"',
    ),
    "csi-node-driver": (
        "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n}\n"
        "spec: {drivers: [{name: d, nodeID: n, topologyKeys: [], allocatible: {count: 1}}]}\n",
        'CSINode n: unknown field "spec.drivers[0].allocatible"',
    ),
    "namespace-spec-typo": (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\nspec: {finalizer: [kubernetes]}\n",
        'Namespace ns: unknown field "spec.finalizer"',
    ),
    "list-item": (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n"
        "  spec: {containers: [{name: c, image: x, resource: {}}]}\n",
        'Pod default/p: unknown field "spec.containers[0].resource"',
    ),
}


@pytest.mark.parametrize("case", sorted(DEEP))
def test_a_deep_unknown_field_is_a_warning_or_with_strict_an_error(case: str, tmp_path: Path) -> None:
    text, expected = DEEP[case]
    path = tmp_path / "m.yaml"
    path.write_text(text)
    loaded = load_manifests([str(path)])
    found = [w for w in loaded.warnings if "unknown field" in w]
    assert len(found) == 1, loaded.warnings
    assert found[0].startswith(f"{path}: ") and expected in found[0]
    with pytest.raises(ManifestError, match="^" + str(path).replace(".", r"\.")) as error:
        load_manifests([str(path)], strict=True)
    assert expected in str(error.value)


def test_free_form_maps_accept_any_key_and_unchecked_subtrees_anything(tmp_path: Path) -> None:
    """Labels, annotations, selectors' matchLabels, nodeSelector, resource lists, overhead, capacity/allocatable,
    StorageClass parameters and CSI volume attributes are data, not fields; probes, securityContext and a pod's
    status are not looked into. Only the one planted typo is reported."""
    path = tmp_path / "m.yaml"
    path.write_text(
        """
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {resource: x, example.com/toleration: y}
  annotations: {"anything goes/here": z, spec: "1"}
spec:
  nodeSelector: {nodeSelectorTerm: a, example.com/x: b}
  overhead: {example.com/anything: 1}
  resources: {limits: {example.com/gpu: "1"}, requests: {hugepages-2Mi: 2Mi}}
  securityContext: {notAPodSecurityField: 1, seLinuxOptions: {whatever: x}}
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {labelSelector: {matchLabels: {resources: x, matchExpressions: y}}, topologyKey: zone}
  containers:
  - name: c
    image: x
    resources: {requests: {example.com/dongle: "1", cpu: 100m}, limits: {requests: "1"}}
    livenessProbe: {httpGet: {port: 80, anything: 1}, bogus: 2}
    lifecycle: {preStop: {whatever: {}}}
    securityContext: {made: up}
  volumes:
  - {name: v, csi: {driver: d, volumeAttributes: {any: key}, notChecked: true}}
  - {name: w, hostPath: {path: /x, typo: inside-a-source-is-not-checked}}
  initContainers: [{name: i, image: x, resource: {}}]
status: {phase: Running, podIPs: [{ip: 10.0.0.1}], anythingAtAll: {deep: [1, 2]}}
---
apiVersion: v1
kind: Node
metadata: {name: n, labels: {status: x}}
status:
  capacity: {example.com/gpu: "8", cpu: "4", "weird key": "1"}
  allocatable: {example.com/gpu: "8", cpu: "4"}
  daemonEndpoints: {kubeletEndpoint: {Port: 10250}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: sc}
provisioner: x
parameters: {csi.storage.k8s.io/fstype: ext4, iopsPerGB: "10", provisioner: y}
"""
    )
    loaded = load_manifests([str(path)])
    found = [w for w in loaded.warnings if "unknown field" in w]
    assert found == [f'{path}: Pod default/p: unknown field "spec.initContainers[0].resource"']


def _loaded_objects(document: object) -> Iterator[Mapping[str, Any]]:
    """The objects a manifest document holds, List items included."""
    if isinstance(document, dict):
        if str(document.get("kind", "")).endswith("List") and isinstance(document.get("items"), list):
            for item in document["items"]:
                yield from _loaded_objects(item)
        elif document.get("kind") in KINDS:
            yield document


def _checked_mappings(schema: Schema, value: dict[str, Any], path: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every mapping of ``value`` the schema types (not free-form, not ANY), with its path prefix."""
    yield value, path
    for name, sub in schema.items():
        child = value.get(name)
        if sub is ANY or child is None:
            continue
        if isinstance(sub, ListOf):
            if sub.item is not ANY and isinstance(child, list):
                for i, element in enumerate(child):
                    if isinstance(element, dict):
                        yield from _checked_mappings(cast(Schema, sub.item), element, f"{path}{name}[{i}].")
        elif isinstance(child, dict):
            yield from _checked_mappings(cast(Schema, sub), child, f"{path}{name}.")


def _every_field_objects() -> list[Mapping[str, Any]]:
    with EVERY_FIELD.open() as stream:
        return [obj for document in yaml.safe_load_all(stream) for obj in _loaded_objects(document)]


def test_the_every_field_manifest_covers_every_field_the_schemas_list() -> None:
    """Keeps the test data in step with field_schema: a field added to a schema must be added to the file."""
    used: dict[int, set[str]] = {}
    tables: dict[int, tuple[Schema, str]] = {}

    def collect(schema: Schema, path: str) -> None:
        if id(schema) in tables:
            return
        tables[id(schema)] = (schema, path)
        for name, sub in schema.items():
            item = sub.item if isinstance(sub, ListOf) else sub
            if item is not ANY:
                collect(cast(Schema, item), f"{path}{name}.")

    for kind, schema in KINDS.items():
        collect(schema, f"{kind}: ")
    for obj in _every_field_objects():
        _mark_used(KINDS[obj["kind"]], cast(dict[str, Any], obj), used)
    missing = [
        f"{path}{name}" for key, (schema, path) in tables.items() for name in schema if name not in used.get(key, ())
    ]
    assert missing == []


def _mark_used(schema: Schema, value: dict[str, Any], used: dict[int, set[str]]) -> None:
    names = used.setdefault(id(schema), set())
    for name, child in value.items():
        sub = schema.get(name)
        if sub is None:
            continue
        names.add(name)
        if isinstance(sub, ListOf):
            if sub.item is not ANY and isinstance(child, list):
                for element in child:
                    if isinstance(element, dict):
                        _mark_used(cast(Schema, sub.item), element, used)
        elif sub is not ANY and isinstance(child, dict):
            _mark_used(cast(Schema, sub), child, used)


def test_every_known_field_is_accepted_and_a_typo_beside_them_is_found_at_every_level() -> None:
    """testdata/every-field.yaml uses every field of every schema at least once (the test above holds it so):
    it loads under strict. In every typed mapping of it, one planted unknown key is then the only finding, named
    by its full path (list indices included)."""
    loaded = load_manifests([str(EVERY_FIELD)], strict=True)
    assert not [w for w in loaded.warnings if "unknown field" in w]
    assert loaded.pods and loaded.nodes and loaded.stateful_sets and loaded.csi_nodes and loaded.storage_classes
    checked = 0
    for obj in _every_field_objects():
        kind = obj["kind"]
        for mapping, path in _checked_mappings(KINDS[kind], cast(dict[str, Any], obj), ""):
            mapping["zzUnknown"] = 1
            try:
                assert unknown_fields(kind, obj) == [f'unknown field "{path}zzUnknown"'], (kind, path)
            finally:
                del mapping["zzUnknown"]
            checked += 1
    assert checked > 200


def _bundled_manifests() -> list[Path]:
    candidates = [
        *sorted((ROOT / "examples").glob("*.yaml")),
        *sorted((ROOT / "tests").glob("**/testdata/*.yaml")),
        *sorted((ROOT / "tests" / "golden").glob("*/cluster.yaml")),
    ]
    found = []
    for path in candidates:
        with path.open() as stream:
            if any(True for document in yaml.safe_load_all(stream) for _ in _loaded_objects(document)):
                found.append(path)
    return found


def _with_container_typos(document: object) -> int:
    """Rename ``resources`` to ``resource`` in the first container of every pod and pod template; how many."""
    planted = 0
    for obj in _loaded_objects(document):
        spec = obj.get("spec")
        template = spec.get("template") if obj["kind"] != "Pod" and isinstance(spec, dict) else None
        pod_spec = template.get("spec") if isinstance(template, dict) else spec if obj["kind"] == "Pod" else None
        if isinstance(pod_spec, dict) and pod_spec.get("containers"):
            container = pod_spec["containers"][0]
            container["resource"] = container.pop("resources", {})
            planted += 1
    return planted


@pytest.mark.parametrize("path", _bundled_manifests(), ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_manifests_are_clean_and_a_container_typo_in_them_is_found(path: Path, tmp_path: Path) -> None:
    """examples/, tests/**/testdata and the golden clusters hold only real Kubernetes fields; the same files with
    ``resource:`` for ``resources:`` in each pod's first container report each one."""
    # Not strict: explain-cases.yaml carries an invalid pod name on purpose (a test of escaping).
    loaded = load_manifests([str(path)])
    assert not [w for w in loaded.warnings if "unknown field" in w]
    with path.open() as stream:
        documents = list(yaml.safe_load_all(stream))
    planted = sum(_with_container_typos(document) for document in documents)
    if not planted:
        pytest.skip("no pod or pod template to plant a typo in")
    typo = tmp_path / path.name
    typo.write_text(yaml.safe_dump_all(copy.deepcopy(documents)))
    found = [w for w in load_manifests([str(typo)]).warnings if "unknown field" in w]
    assert len(found) == planted
    assert all(w.endswith('containers[0].resource"') for w in found), found


def test_simulate_strict_exits_1_naming_the_file_object_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        _NODE
        + "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n---\n"
        + _POD
        + "  containers: [{name: c, image: x, resource: {requests: {cpu: '100'}}}]\n"
    )
    expected = f'{path}: Pod default/p: unknown field "spec.containers[0].resource"'
    assert main(["simulate", "-f", str(path), "--strict"]) == 1
    assert f"error: {expected}" in capsys.readouterr().err
    # Without --strict the pod loads (requesting nothing) and the finding is a warning.
    assert main(["simulate", "-f", str(path)]) == 0
    assert f"warning: {expected}" in capsys.readouterr().err
