"""Loading the kinds plugins read through listers (workloads, storage): documents, List dumps, typed lists,
API groups, duplicates and errors naming file, object and field."""

from __future__ import annotations

import textwrap

import pytest

from kubesched.api.manifests import load_manifest_text
from kubesched.errors import ManifestError

DOCUMENTS = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: prod}
    spec: {selector: {app: web}, ports: [{port: 80}]}
    ---
    apiVersion: v1
    kind: ReplicationController
    metadata: {name: legacy}
    spec: {template: {metadata: {labels: {app: legacy}}}}
    ---
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {name: web-5d8f, namespace: prod}
    spec: {selector: {matchLabels: {app: web}}}
    ---
    apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: db, namespace: prod}
    spec: {selector: {matchLabels: {app: db}}, serviceName: db}
    ---
    apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-1}
    spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: local}
    status: {phase: Available}
    ---
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {name: data-db-0, namespace: prod}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: local}
    ---
    apiVersion: storage.k8s.io/v1
    kind: StorageClass
    metadata: {name: local}
    provisioner: kubernetes.io/no-provisioner
    volumeBindingMode: WaitForFirstConsumer
    ---
    apiVersion: storage.k8s.io/v1
    kind: CSINode
    metadata: {name: n1}
    spec: {drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}]}
    """
)


def test_every_lister_kind_is_loaded() -> None:
    loaded = load_manifest_text(DOCUMENTS, "cluster.yaml")
    assert loaded.warnings == []
    assert [(s.metadata.namespace, s.metadata.name, s.selector) for s in loaded.services] == [
        ("prod", "web", {"app": "web"})
    ]
    assert [(rc.metadata.namespace, rc.selector) for rc in loaded.replication_controllers] == [
        ("default", {"app": "legacy"})
    ]
    assert [rs.selector.match_labels for rs in loaded.replica_sets] == [{"app": "web"}]
    assert [ss.metadata.name for ss in loaded.stateful_sets] == ["db"]
    assert [(pv.name, pv.phase, pv.class_name) for pv in loaded.persistent_volumes] == [("pv-1", "Available", "local")]
    assert [(c.key, c.class_name) for c in loaded.persistent_volume_claims] == [("prod/data-db-0", "local")]
    assert [(c.name, c.wait_for_first_consumer) for c in loaded.storage_classes] == [("local", True)]
    assert [(n.name, n.drivers[0].allocatable_count) for n in loaded.csi_nodes] == [("n1", 25)]
    assert loaded.origins[("PersistentVolumeClaim", "prod", "data-db-0")] == (
        "cluster.yaml: PersistentVolumeClaim prod/data-db-0"
    )
    assert loaded.origins[("StorageClass", "", "local")] == "cluster.yaml: StorageClass local"


KUBECTL_LIST = textwrap.dedent(
    """\
    apiVersion: v1
    kind: List
    metadata: {resourceVersion: ""}
    items:
    - apiVersion: v1
      kind: Service
      metadata: {name: web, namespace: prod, uid: 0b4c}
      spec: {selector: {app: web}, clusterIP: 10.0.0.1}
    - apiVersion: apps/v1
      kind: StatefulSet
      metadata: {name: db, namespace: prod}
      spec: {selector: {matchExpressions: [{key: app, operator: In, values: [db]}]}}
    - apiVersion: v1
      kind: PersistentVolumeClaim
      metadata:
        name: data-db-0
        namespace: prod
        annotations: {volume.kubernetes.io/selected-node: n1, pv.kubernetes.io/bind-completed: "yes"}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 10Gi}}
        storageClassName: gp3
        volumeMode: Filesystem
        volumeName: pvc-7f3a
      status: {phase: Bound, capacity: {storage: 10Gi}}
    - apiVersion: v1
      kind: PersistentVolume
      metadata: {name: pvc-7f3a, labels: {topology.kubernetes.io/zone: us-east-1a}}
      spec:
        capacity: {storage: 10Gi}
        accessModes: [ReadWriteOnce]
        storageClassName: gp3
        claimRef: {kind: PersistentVolumeClaim, namespace: prod, name: data-db-0, uid: 9e1d}
        csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0123}
        nodeAffinity:
          required:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      status: {phase: Bound}
    """
)


def test_kubectl_list_dump() -> None:
    loaded = load_manifest_text(KUBECTL_LIST, "dump.yaml")
    assert loaded.warnings == []
    assert loaded.services[0].metadata.uid == "0b4c"
    assert loaded.stateful_sets[0].selector.match_expressions[0].values == ("db",)
    pvc = loaded.persistent_volume_claims[0]
    assert (pvc.volume_name, pvc.phase, pvc.selected_node, pvc.storage_request) == (
        "pvc-7f3a",
        "Bound",
        "n1",
        10 * 2**30,
    )
    pv = loaded.persistent_volumes[0]
    assert pv.claim_ref is not None and (pv.claim_ref.namespace, pv.claim_ref.name) == ("prod", "data-db-0")
    assert pv.csi is not None and pv.csi.volume_handle == "vol-0123"
    assert pv.metadata.labels == {"topology.kubernetes.io/zone": "us-east-1a"}


TYPED_LISTS = textwrap.dedent(
    """\
    apiVersion: storage.k8s.io/v1
    kind: StorageClassList
    metadata: {resourceVersion: "12"}
    items:
    - metadata: {name: gp3}
      provisioner: ebs.csi.aws.com
    - metadata: {name: standard}
      provisioner: kubernetes.io/gce-pd
      volumeBindingMode: Immediate
    ---
    apiVersion: storage.k8s.io/v1
    kind: CSINodeList
    items:
    - metadata: {name: n1}
      spec: {drivers: []}
    ---
    apiVersion: apps/v1
    kind: ReplicaSetList
    items:
    - metadata: {name: web-1, namespace: prod}
      spec: {selector: {matchLabels: {app: web}}}
    ---
    apiVersion: v1
    kind: PersistentVolumeClaimList
    items:
    - metadata: {name: c, namespace: prod}
      spec: {accessModes: [ReadWriteOncePod], resources: {requests: {storage: 1Mi}}}
    ---
    apiVersion: v1
    kind: ServiceList
    items: []
    """
)


def test_typed_lists_get_kind_and_group_from_the_list() -> None:
    loaded = load_manifest_text(TYPED_LISTS, "dump.yaml")
    assert loaded.warnings == []
    assert [(c.name, c.volume_binding_mode) for c in loaded.storage_classes] == [
        ("gp3", "Immediate"),
        ("standard", "Immediate"),
    ]
    assert loaded.storage_classes[0].raw["apiVersion"] == "storage.k8s.io/v1"
    assert loaded.storage_classes[0].raw["kind"] == "StorageClass"
    assert [n.name for n in loaded.csi_nodes] == ["n1"]
    assert [rs.metadata.name for rs in loaded.replica_sets] == ["web-1"]
    assert [c.access_modes for c in loaded.persistent_volume_claims] == [("ReadWriteOncePod",)]
    assert loaded.services == []


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        pytest.param(
            "apiVersion: extensions/v1beta1\nkind: ReplicaSet\nmetadata: {name: old}\n",
            'cluster.yaml: skipping unsupported kind "ReplicaSet" in apiVersion "extensions/v1beta1" (old)',
            id="replica-set-in-old-group",
        ),
        pytest.param(
            "apiVersion: v1\nkind: StorageClass\nmetadata: {name: sc}\nprovisioner: p\n",
            'cluster.yaml: skipping unsupported kind "StorageClass" in apiVersion "v1" (sc)',
            id="storage-class-in-core-group",
        ),
        pytest.param(
            "apiVersion: apps/v1\nkind: Service\nmetadata: {name: s}\n",
            'cluster.yaml: skipping unsupported kind "Service" in apiVersion "apps/v1" (s)',
            id="service-in-apps-group",
        ),
        pytest.param(
            "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: ebs.csi.aws.com}\n",
            'cluster.yaml: skipping unsupported kind "CSIDriver" (ebs.csi.aws.com)',
            id="csi-driver-still-unknown",
        ),
        pytest.param(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\n",
            'cluster.yaml: skipping unsupported kind "DaemonSet" (agent)',
            id="daemon-set-still-unknown",
        ),
    ],
)
def test_groups_and_unknown_kinds_warn(text: str, warning: str) -> None:
    assert load_manifest_text(text, "cluster.yaml").warnings == [warning]


SC = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\nprovisioner: p\n"
PVC = (
    "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: prod}\n"
    "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            PVC.replace("storage: 1Gi", "storage: 1Gx"),
            'cluster.yaml: PersistentVolumeClaim prod/data: spec.resources.requests.storage: invalid quantity "1Gx"',
            id="claim-field-error-names-file-object-field",
        ),
        pytest.param(
            SC.replace("provisioner: p\n", "volumeBindingMode: Lazy\nprovisioner: p\n"),
            'cluster.yaml: StorageClass fast: volumeBindingMode: Unsupported value: "Lazy"',
            id="cluster-scoped-object-name",
        ),
        pytest.param(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {}\n",
            "cluster.yaml: StatefulSet default/db: spec.selector: Required value",
            id="namespace-defaults-in-name",
        ),
        pytest.param(
            "apiVersion: v1\nkind: ServiceList\nitems:\n- metadata: {namespace: prod}\n",
            "cluster.yaml: document 1 (line 1) items[0]: Service: metadata.name: Required value",
            id="unnamed-typed-list-item",
        ),
        pytest.param(
            SC + "---\n" + SC,
            "cluster.yaml: StorageClass fast: defined twice (first in cluster.yaml)",
            id="duplicate-cluster-scoped",
        ),
        pytest.param(
            PVC + "---\n" + PVC,
            "cluster.yaml: PersistentVolumeClaim prod/data: defined twice (first in cluster.yaml)",
            id="duplicate-namespaced",
        ),
    ],
)
def test_load_errors(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, "cluster.yaml")
    assert str(info.value).startswith(message)


def test_same_name_in_other_namespace_or_kind_is_no_duplicate() -> None:
    text = PVC + "---\n" + PVC.replace("namespace: prod", "namespace: dev")
    text += "---\napiVersion: v1\nkind: Service\nmetadata: {name: data, namespace: prod}\n"
    text += "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: data}\n"
    text += "spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce]}\n"
    loaded = load_manifest_text(text)
    assert [c.key for c in loaded.persistent_volume_claims] == ["prod/data", "dev/data"]
    assert [(len(loaded.services), len(loaded.persistent_volumes))] == [(1, 1)]
