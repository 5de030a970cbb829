"""Builders for the storage objects the volume plugins read: PersistentVolumes, PersistentVolumeClaims,
StorageClasses and CSINodes, in tests.

Who calls it: the volume plugins' unit tests and scheduler-level volume tests. Like ``builders``, each builder
writes the manifest a user would write and ``.obj()`` parses it with the real ``from_dict``. Defaults keep
objects valid and neutral: a volume of 1Gi, ReadWriteOnce, in no class; a claim of 1Gi, ReadWriteOnce, in
namespace ``default`` with no class; a class with the ``kubernetes.io/no-provisioner`` provisioner and
Immediate binding. ``pv_object``, ``pvc_object`` and ``storage_class_object`` are the same builders called with
keywords, for tables that vary several fields at once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Self

from kubesched.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

__all__ = [
    "PersistentVolumeBuilder",
    "PersistentVolumeClaimBuilder",
    "StorageClassBuilder",
    "make_csi_node",
    "make_pv",
    "make_pvc",
    "make_storage_class",
    "pv_object",
    "pvc_object",
    "storage_class_object",
]


def _in_terms(labels: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """One node selector term with an ``In`` requirement per key (upstream's ``withNodeAffinity``)."""
    expressions = [{"key": key, "operator": "In", "values": list(values)} for key, values in labels.items()]
    return {"nodeSelectorTerms": [{"matchExpressions": expressions}]}


class PersistentVolumeBuilder:
    __slots__ = ("_metadata", "_spec", "_status")

    def __init__(self, name: str) -> None:
        self._metadata: dict[str, Any] = {"name": name}
        self._spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
        self._status: dict[str, Any] = {}

    def storage_class(self, name: str) -> Self:
        self._spec["storageClassName"] = name
        return self

    def capacity(self, storage: str) -> Self:
        self._spec["capacity"] = {"storage": storage}
        return self

    def access_modes(self, *modes: str) -> Self:
        self._spec["accessModes"] = list(modes)
        return self

    def volume_mode(self, mode: str) -> Self:
        self._spec["volumeMode"] = mode
        return self

    def csi(self, driver: str, handle: str) -> Self:
        self._spec["csi"] = {"driver": driver, "volumeHandle": handle}
        return self

    def source(self, source: Mapping[str, Any]) -> Self:
        """Another volume source, as written (e.g. ``{"awsElasticBlockStore": {"volumeID": "vol-1"}}``)."""
        self._spec.update(copy.deepcopy(dict(source)))
        return self

    def node_affinity(self, labels: Mapping[str, Sequence[str]]) -> Self:
        self._spec["nodeAffinity"] = {"required": _in_terms(labels)}
        return self

    def claim_ref(self, name: str, namespace: str = "default", uid: str = "") -> Self:
        ref = {"name": name, "namespace": namespace}
        if uid:
            ref["uid"] = uid
        self._spec["claimRef"] = ref
        return self

    def phase(self, phase: str) -> Self:
        self._status["phase"] = phase
        return self

    def available(self) -> Self:
        return self.phase("Available")

    def label(self, key: str, value: str) -> Self:
        self._metadata.setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._metadata.setdefault("annotations", {})[key] = value
        return self

    def terminating(self, at: str = "2024-01-01T00:00:00Z") -> Self:
        self._metadata["deletionTimestamp"] = at
        return self

    def raw(self) -> dict[str, Any]:
        manifest = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": self._metadata, "spec": self._spec}
        if self._status:
            manifest["status"] = self._status
        return copy.deepcopy(manifest)

    def obj(self) -> PersistentVolume:
        raw = self.raw()
        return PersistentVolume.from_dict(raw, f"make_pv: PersistentVolume {raw['metadata']['name']}")


class PersistentVolumeClaimBuilder:
    __slots__ = ("_metadata", "_spec", "_status")

    def __init__(self, name: str, namespace: str = "default") -> None:
        self._metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        self._spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        self._status: dict[str, Any] = {}

    def uid(self, uid: str) -> Self:
        self._metadata["uid"] = uid
        return self

    def storage_class(self, name: str) -> Self:
        self._spec["storageClassName"] = name
        return self

    def request(self, storage: str) -> Self:
        self._spec["resources"] = {"requests": {"storage": storage}}
        return self

    def access_modes(self, *modes: str) -> Self:
        self._spec["accessModes"] = list(modes)
        return self

    def volume_mode(self, mode: str) -> Self:
        self._spec["volumeMode"] = mode
        return self

    def selector(self, match_labels: Mapping[str, str]) -> Self:
        self._spec["selector"] = {"matchLabels": dict(match_labels)}
        return self

    def volume_name(self, volume: str) -> Self:
        """Name a volume without the PV controller's bind-completed mark: a pre-bound claim."""
        self._spec["volumeName"] = volume
        return self

    def bound_to(self, volume: str) -> Self:
        """Fully bound (upstream's ``withBoundPV``): the volume name and ``pv.kubernetes.io/bind-completed``."""
        self._spec["volumeName"] = volume
        self._status["phase"] = "Bound"
        return self.annotation(ANN_BIND_COMPLETED, "yes")

    def selected_node(self, node: str) -> Self:
        return self.annotation(ANN_SELECTED_NODE, node)

    def phase(self, phase: str) -> Self:
        self._status["phase"] = phase
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._metadata.setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str, *, uid: str, controller: bool = True) -> Self:
        ref = {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": controller}
        self._metadata.setdefault("ownerReferences", []).append(ref)
        return self

    def terminating(self, at: str = "2024-01-01T00:00:00Z") -> Self:
        self._metadata["deletionTimestamp"] = at
        return self

    def raw(self) -> dict[str, Any]:
        manifest = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": self._metadata,
            "spec": self._spec,
        }
        if self._status:
            manifest["status"] = self._status
        return copy.deepcopy(manifest)

    def obj(self) -> PersistentVolumeClaim:
        raw = self.raw()
        where = f"make_pvc: PersistentVolumeClaim {raw['metadata']['namespace']}/{raw['metadata']['name']}"
        return PersistentVolumeClaim.from_dict(raw, where)


class StorageClassBuilder:
    __slots__ = ("_raw",)

    def __init__(self, name: str) -> None:
        self._raw: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": NOT_SUPPORTED_PROVISIONER,
        }

    def provisioner(self, name: str) -> Self:
        self._raw["provisioner"] = name
        return self

    def wait_for_first_consumer(self) -> Self:
        self._raw["volumeBindingMode"] = "WaitForFirstConsumer"
        return self

    def allowed_topology(self, labels: Mapping[str, Sequence[str]]) -> Self:
        """Add one ``allowedTopologies`` term requiring each key to have one of its values."""
        term = {"matchLabelExpressions": [{"key": key, "values": list(values)} for key, values in labels.items()]}
        self._raw.setdefault("allowedTopologies", []).append(term)
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._raw)

    def obj(self) -> StorageClass:
        raw = self.raw()
        return StorageClass.from_dict(raw, f"make_storage_class: StorageClass {raw['metadata']['name']}")


def make_pv(name: str) -> PersistentVolumeBuilder:
    return PersistentVolumeBuilder(name)


def make_pvc(name: str, namespace: str = "default") -> PersistentVolumeClaimBuilder:
    return PersistentVolumeClaimBuilder(name, namespace)


def make_storage_class(name: str) -> StorageClassBuilder:
    return StorageClassBuilder(name)


def pv_object(
    name: str,
    *,
    csi: tuple[str, str] | None = None,
    source: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    storage_class: str = "",
    claim: tuple[str, str] | None = None,
    phase: str = "",
) -> PersistentVolume:
    """A volume with a CSI source (``csi`` = (driver, handle)) or another ``source``; ``claim`` = (namespace,
    name) of the claim it is bound to."""
    builder = make_pv(name)
    if csi is not None:
        builder.csi(*csi)
    if source:
        builder.source(source)
    for key, value in (labels or {}).items():
        builder.label(key, value)
    if storage_class:
        builder.storage_class(storage_class)
    if claim is not None:
        builder.claim_ref(claim[1], claim[0])
    if phase:
        builder.phase(phase)
    return builder.obj()


def pvc_object(
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
    builder = make_pvc(name, namespace).access_modes(*access_modes)
    if volume_name:
        builder.volume_name(volume_name)
    if storage_class is not None:
        builder.storage_class(storage_class)
    if owner_pod is not None:
        builder.owner("Pod", owner_pod[0], uid=owner_pod[1])
    for key, value in (annotations or {}).items():
        builder.annotation(key, value)
    if phase:
        builder.phase(phase)
    return builder.obj()


def storage_class_object(name: str, provisioner: str, *, binding_mode: str = "") -> StorageClass:
    builder = make_storage_class(name).provisioner(provisioner)
    if binding_mode == "WaitForFirstConsumer":
        builder.wait_for_first_consumer()
    elif binding_mode not in ("", "Immediate"):
        raise ValueError(f"unknown volumeBindingMode {binding_mode!r}")
    return builder.obj()


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
