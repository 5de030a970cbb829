"""PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode from manifest dicts: fields, defaults, errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesched.api.selectors import LabelSelector, NodeSelectorRequirement, NodeSelectorTerm
from kubesched.api.storage import (
    ClaimReference,
    CSINode,
    CSINodeDriver,
    CSIPersistentVolumeSource,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from kubesched.errors import ManifestError

GI = 1024**3


def with_spec(base: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    for key, value in spec.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = value
    return obj


def error(cls: Any, obj: Any, where: str) -> str:
    with pytest.raises(ManifestError) as info:
        cls.from_dict(obj, where)
    return str(info.value)


# ---------------------------------------------------------------- PersistentVolume

PV_WHERE = "pv.yaml: PersistentVolume pv-1"
PV: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv-1", "namespace": "ignored", "labels": {"topology.kubernetes.io/zone": "a"}},
    "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]},
}


def test_persistent_volume_minimal_gets_api_defaults() -> None:
    pv = PersistentVolume.from_dict(PV, PV_WHERE)
    assert (pv.name, pv.metadata.namespace, pv.metadata.labels) == ("pv-1", "", {"topology.kubernetes.io/zone": "a"})
    assert (pv.capacity, pv.access_modes, pv.storage_class_name, pv.class_name) == (10 * GI, ("ReadWriteOnce",), "", "")
    assert (pv.volume_mode, pv.phase) == ("Filesystem", "Pending")
    assert (pv.node_affinity, pv.claim_ref, pv.csi) == (None, None, None)
    assert pv.raw is PV


def test_persistent_volume_full() -> None:
    obj = with_spec(
        PV,
        storageClassName="fast",
        volumeMode="Block",
        accessModes=["ReadWriteOncePod"],
        claimRef={"kind": "PersistentVolumeClaim", "namespace": "prod", "name": "data", "uid": "u-1"},
        csi={"driver": "pd.csi.storage.gke.io", "volumeHandle": "projects/p/disks/d", "fsType": "ext4"},
        nodeAffinity={
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        },
    )
    obj["status"] = {"phase": "Bound"}
    pv = PersistentVolume.from_dict(obj, PV_WHERE)
    assert (pv.storage_class_name, pv.volume_mode, pv.access_modes, pv.phase) == (
        "fast",
        "Block",
        ("ReadWriteOncePod",),
        "Bound",
    )
    assert pv.claim_ref == ClaimReference("prod", "data", "u-1")
    assert pv.csi == CSIPersistentVolumeSource("pd.csi.storage.gke.io", "projects/p/disks/d")
    assert pv.node_affinity is not None
    assert pv.node_affinity.terms == (
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("a",)),)),
    )


def test_persistent_volume_beta_class_annotation_wins() -> None:
    obj = with_spec(PV, storageClassName="spec-class")
    obj["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "beta-class"}
    pv = PersistentVolume.from_dict(obj, PV_WHERE)
    assert (pv.storage_class_name, pv.class_name) == ("spec-class", "beta-class")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(with_spec(PV, capacity=None), "spec.capacity.storage: Required value", id="no-capacity"),
        pytest.param(
            with_spec(PV, capacity={"storage": "10x"}),
            'spec.capacity.storage: invalid quantity "10x": quantities must match the regular expression',
            id="bad-quantity",
        ),
        pytest.param(
            with_spec(PV, capacity={"storage": "0"}),
            'spec.capacity.storage: Invalid value: "0": must be greater than zero',
            id="zero-capacity",
        ),
        pytest.param(
            with_spec(PV, capacity={"storage": "1Gi", "cpu": "1"}),
            'spec.capacity.cpu: Unsupported value: "cpu": supported values: "storage"',
            id="capacity-other-resource",
        ),
        pytest.param(with_spec(PV, accessModes=None), "spec.accessModes: Required value", id="no-access-modes"),
        pytest.param(
            with_spec(PV, accessModes=["ReadWriteOnce", "ReadWriteEverywhere"]),
            'spec.accessModes[1]: Unsupported value: "ReadWriteEverywhere": supported values: "ReadOnlyMany", '
            '"ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"',
            id="unknown-access-mode",
        ),
        pytest.param(
            with_spec(PV, accessModes=["ReadWriteOncePod", "ReadOnlyMany"]),
            "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
            id="read-write-once-pod-not-alone",
        ),
        pytest.param(
            with_spec(PV, volumeMode="Raw"),
            'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"',
            id="unknown-volume-mode",
        ),
        pytest.param(
            with_spec(PV, nodeAffinity={}),
            "spec.nodeAffinity.required: Required value: must specify required node constraints",
            id="node-affinity-without-required",
        ),
        pytest.param(
            with_spec(PV, nodeAffinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k"}]}]}}),
            'spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "": not a '
            "valid selector operator",
            id="node-affinity-bad-requirement",
        ),
        pytest.param(
            with_spec(PV, claimRef={"namespace": "prod"}), "spec.claimRef.name: Required value", id="claim-ref-no-name"
        ),
        pytest.param(
            with_spec(PV, csi={"driver": "d"}), "spec.csi.volumeHandle: Required value", id="csi-no-volume-handle"
        ),
        pytest.param(
            {**PV, "status": {"phase": "Lost"}},
            'status.phase: Unsupported value: "Lost": supported values: "Pending", "Available", "Bound", '
            '"Released", "Failed"',
            id="unknown-phase",
        ),
    ],
)
def test_persistent_volume_errors(obj: dict[str, Any], message: str) -> None:
    assert error(PersistentVolume, obj, PV_WHERE).startswith(f"{PV_WHERE}: {message}")


# ---------------------------------------------------------------- PersistentVolumeClaim

PVC_WHERE = "pvc.yaml: PersistentVolumeClaim prod/data"
PVC: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data", "namespace": "prod"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
}


def test_persistent_volume_claim_minimal_gets_api_defaults() -> None:
    pvc = PersistentVolumeClaim.from_dict(PVC, PVC_WHERE)
    assert (pvc.key, pvc.volume_name, pvc.storage_class_name, pvc.class_name) == ("prod/data", "", None, "")
    assert (pvc.access_modes, pvc.storage_request, pvc.volume_mode) == (("ReadWriteOnce",), 5 * GI, "Filesystem")
    assert (pvc.selector, pvc.phase, pvc.selected_node) == (None, "Pending", None)


def test_persistent_volume_claim_full() -> None:
    obj = with_spec(
        PVC,
        volumeName="pv-1",
        storageClassName="fast",
        volumeMode="Block",
        accessModes=["ReadOnlyMany", "ReadWriteMany"],
        selector={"matchLabels": {"tier": "gold"}},
    )
    obj["metadata"]["annotations"] = {
        "volume.kubernetes.io/selected-node": "n1",
        "pv.kubernetes.io/bind-completed": "yes",
    }
    obj["status"] = {"phase": "Bound"}
    pvc = PersistentVolumeClaim.from_dict(obj, PVC_WHERE)
    assert (pvc.volume_name, pvc.storage_class_name, pvc.class_name, pvc.volume_mode) == (
        "pv-1",
        "fast",
        "fast",
        "Block",
    )
    assert pvc.access_modes == ("ReadOnlyMany", "ReadWriteMany")
    assert pvc.selector == LabelSelector(match_labels={"tier": "gold"})
    assert (pvc.phase, pvc.selected_node) == ("Bound", "n1")


@pytest.mark.parametrize(
    ("annotations", "spec_class", "class_name"),
    [
        pytest.param({}, "", "", id="explicit-no-class"),
        pytest.param({"volume.beta.kubernetes.io/storage-class": "beta"}, "spec", "beta", id="beta-annotation-wins"),
        pytest.param({"volume.beta.kubernetes.io/storage-class": ""}, "spec", "", id="empty-beta-annotation-wins"),
    ],
)
def test_persistent_volume_claim_class(annotations: dict[str, str], spec_class: str, class_name: str) -> None:
    obj = with_spec(PVC, storageClassName=spec_class)
    obj["metadata"]["annotations"] = annotations
    pvc = PersistentVolumeClaim.from_dict(obj, PVC_WHERE)
    assert (pvc.storage_class_name, pvc.class_name) == (spec_class, class_name)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(
            with_spec(PVC, accessModes=[]),
            "spec.accessModes: Required value: at least 1 access mode is required",
            id="no-access-modes",
        ),
        pytest.param(
            with_spec(PVC, resources={"requests": {}}),
            "spec.resources.requests.storage: Required value",
            id="no-storage-request",
        ),
        pytest.param(
            with_spec(PVC, resources={"requests": {"storage": -1}}),
            'spec.resources.requests.storage: Invalid value: "-1": must be greater than or equal to 0',
            id="negative-storage-request",
        ),
        pytest.param(
            with_spec(PVC, resources={"requests": {"storage": 0}}),
            'spec.resources.requests.storage: Invalid value: "0": must be greater than zero',
            id="zero-storage-request",
        ),
        pytest.param(
            with_spec(PVC, storageClassName=7), "spec.storageClassName: expected a string, got integer", id="class-type"
        ),
        pytest.param(
            with_spec(PVC, selector={"matchExpressions": [{"key": "a", "operator": "In"}]}),
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or "
            "'NotIn'",
            id="bad-selector",
        ),
        pytest.param(
            {**PVC, "status": {"phase": "Available"}},
            'status.phase: Unsupported value: "Available": supported values: "Pending", "Bound", "Lost"',
            id="volume-phase-on-claim",
        ),
        pytest.param(
            {**PVC, "metadata": {"name": "data", "annotations": {"volume.kubernetes.io/selected-node": 1}}},
            "metadata.annotations.volume.kubernetes.io/selected-node: expected a string, got integer",
            id="annotation-not-a-string",
        ),
    ],
)
def test_persistent_volume_claim_errors(obj: dict[str, Any], message: str) -> None:
    assert error(PersistentVolumeClaim, obj, PVC_WHERE) == f"{PVC_WHERE}: {message}"


# ---------------------------------------------------------------- StorageClass

SC_WHERE = "sc.yaml: StorageClass fast"


def storage_class(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}, **fields}


@pytest.mark.parametrize(
    ("obj", "mode", "topologies"),
    [
        pytest.param(storage_class(provisioner="ebs.csi.aws.com"), "Immediate", 0, id="binding-mode-defaults"),
        pytest.param(
            storage_class(provisioner="kubernetes.io/no-provisioner", volumeBindingMode="WaitForFirstConsumer"),
            "WaitForFirstConsumer",
            0,
            id="wait-for-first-consumer",
        ),
        pytest.param(
            storage_class(
                provisioner="p",
                allowedTopologies=[
                    {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["a"]}]},
                    {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["b"]}]},
                ],
            ),
            "Immediate",
            2,
            id="allowed-topologies",
        ),
    ],
)
def test_storage_class(obj: dict[str, Any], mode: str, topologies: int) -> None:
    sc = StorageClass.from_dict(obj, SC_WHERE)
    assert (sc.name, sc.metadata.namespace, sc.provisioner) == ("fast", "", obj["provisioner"])
    assert (sc.volume_binding_mode, sc.wait_for_first_consumer) == (mode, mode == "WaitForFirstConsumer")
    assert len(sc.allowed_topologies) == topologies


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(storage_class(), "provisioner: Required value", id="no-provisioner"),
        pytest.param(
            storage_class(provisioner="p", volumeBindingMode="Later"),
            'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"',
            id="unknown-binding-mode",
        ),
        pytest.param(
            storage_class(
                provisioner="p",
                allowedTopologies=[
                    {"matchLabelExpressions": [{"key": "z", "values": ["a", "b"]}]},
                    {"matchLabelExpressions": [{"key": "z", "values": ["b", "a"]}]},
                ],
            ),
            'allowedTopologies[1].matchLabelExpressions: Duplicate value: ""',
            id="duplicate-term",
        ),
        pytest.param(
            storage_class(provisioner="p", allowedTopologies=[{"matchLabelExpressions": [{"key": "z"}]}]),
            "allowedTopologies[0].matchLabelExpressions[0].values: Required value",
            id="term-without-values",
        ),
        pytest.param(
            storage_class(provisioner="p", allowedTopologies={"zone": "a"}),
            "allowedTopologies: expected a list, got mapping",
            id="topologies-not-a-list",
        ),
    ],
)
def test_storage_class_errors(obj: dict[str, Any], message: str) -> None:
    assert error(StorageClass, obj, SC_WHERE) == f"{SC_WHERE}: {message}"


# ---------------------------------------------------------------- CSINode

CSI_WHERE = "csinodes.yaml: CSINode n1"


def csi_node(*drivers: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n1"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": list(drivers)}}


def test_csi_node_drivers() -> None:
    node = CSINode.from_dict(
        csi_node(
            {
                "name": "ebs.csi.aws.com",
                "nodeID": "i-0abc",
                "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
                "allocatable": {"count": 25},
            },
            {"name": "efs.csi.aws.com", "nodeID": "i-0abc"},
            annotations={"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs,kubernetes.io/cinder"},
        ),
        CSI_WHERE,
    )
    assert node.name == "n1"
    assert node.drivers == (
        CSINodeDriver("ebs.csi.aws.com", "i-0abc", ("topology.ebs.csi.aws.com/zone",), 25),
        CSINodeDriver("efs.csi.aws.com", "i-0abc"),
    )
    assert node.driver("efs.csi.aws.com") is node.drivers[1]
    assert node.driver("missing") is None
    assert node.migrated_plugins == frozenset({"kubernetes.io/aws-ebs", "kubernetes.io/cinder"})


def test_csi_node_without_drivers() -> None:
    node = CSINode.from_dict({"kind": "CSINode", "metadata": {"name": "n1"}}, CSI_WHERE)
    assert (node.drivers, node.migrated_plugins) == ((), frozenset())


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(csi_node({"nodeID": "x"}), "spec.drivers[0].name: Required value", id="no-name"),
        pytest.param(csi_node({"name": "d"}), "spec.drivers[0].nodeID: Required value", id="no-node-id"),
        pytest.param(
            csi_node({"name": "d", "nodeID": "x"}, {"name": "d", "nodeID": "y"}),
            'spec.drivers[1].name: Duplicate value: "d"',
            id="duplicate-driver",
        ),
        pytest.param(
            csi_node({"name": "d", "nodeID": "x", "allocatable": {"count": -1}}),
            "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
            id="negative-count",
        ),
        pytest.param(
            csi_node({"name": "d", "nodeID": "x", "allocatable": {"count": "10"}}),
            "spec.drivers[0].allocatable.count: expected an integer, got string",
            id="count-not-an-integer",
        ),
        pytest.param(
            csi_node({"name": "d", "nodeID": "x", "topologyKeys": ["z", "z"]}),
            'spec.drivers[0].topologyKeys[1]: Duplicate value: "z"',
            id="duplicate-topology-key",
        ),
    ],
)
def test_csi_node_errors(obj: dict[str, Any], message: str) -> None:
    assert error(CSINode, obj, CSI_WHERE) == f"{CSI_WHERE}: {message}"
