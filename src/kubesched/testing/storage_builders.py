"""Builders for the storage objects the volume plugins read: claims, volumes, classes and CSINodes.

Who calls it: the volume plugins' unit tests and scheduler-level tests. Like :mod:`kubesched.testing.builders`,
each builds the manifest a user would write and parses it with the real ``from_dict``, so the API server's
defaults this project models (access modes, phases, binding mode) apply. Only the fields the tests vary are
parameters; a required field the scheduler never reads gets a harmless value (a claim asks for 1Gi).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass

__all__ = ["make_csi_node", "make_pv", "make_pvc", "make_storage_class"]


def make_pvc(
    name: str,
    *,
    namespace: str = "default",
    volume_name: str = "",
    storage_class: str | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    owner_pod: tuple[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str = "",
) -> PersistentVolumeClaim:
    """A claim; ``owner_pod`` = (pod name, pod uid) makes the pod its controller (a generic ephemeral volume's)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner_pod is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner_pod[0], "uid": owner_pod[1], "controller": True}
        ]
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"accessModes": list(access_modes), "resources": {"requests": {"storage": "1Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}
    if phase:
        raw["status"] = {"phase": phase}
    return PersistentVolumeClaim.from_dict(raw, f"make_pvc: PersistentVolumeClaim {namespace}/{name}")


def make_pv(
    name: str,
    *,
    csi: tuple[str, str] | None = None,
    source: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    storage_class: str = "",
    claim: tuple[str, str] | None = None,
    phase: str = "",
) -> PersistentVolume:
    """A volume with a CSI source (``csi`` = (driver, volume handle)) or another ``spec`` source as written
    (``source`` = e.g. ``{"awsElasticBlockStore": {"volumeID": "vol-1"}}``); ``claim`` = (namespace, name) of
    the claim it is bound to (``spec.claimRef``)."""
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    if source:
        spec.update(source)
    if storage_class:
        spec["storageClassName"] = storage_class
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata, "spec": spec}
    if phase:
        raw["status"] = {"phase": phase}
    return PersistentVolume.from_dict(raw, f"make_pv: PersistentVolume {name}")


def make_storage_class(name: str, provisioner: str, *, binding_mode: str = "") -> StorageClass:
    raw: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
    }
    if binding_mode:
        raw["volumeBindingMode"] = binding_mode
    return StorageClass.from_dict(raw, f"make_storage_class: StorageClass {name}")


def make_csi_node(
    name: str,
    drivers: Mapping[str, int | None],
    *,
    migrated_plugins: Sequence[str] = (),
) -> CSINode:
    """A CSINode for node ``name``: driver name → ``allocatable.count`` (``None`` reports no limit)."""
    metadata: dict[str, Any] = {"name": name}
    if migrated_plugins:
        metadata["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated_plugins)}
    entries: list[dict[str, Any]] = []
    for driver, count in drivers.items():
        entry: dict[str, Any] = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        entries.append(entry)
    raw = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": metadata, "spec": {"drivers": entries}}
    return CSINode.from_dict(raw, f"make_csi_node: CSINode {name}")
