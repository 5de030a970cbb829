"""PersistentVolume, PersistentVolumeClaim, StorageClass and CSINode, reduced to what the scheduler reads.

Who calls it: :mod:`kubesched.api.manifests` (loading), and through the framework's listers
(:mod:`kubesched.framework.listers`) the volume plugins. What each reads, in kube-scheduler v1.35:

- VolumeBinding (its binder and component-helpers' ``FindMatchingVolume``): a claim's ``spec.volumeName``,
  class (``GetPersistentVolumeClaimClass``: the beta annotation, then ``spec.storageClassName``),
  ``spec.accessModes``, ``spec.resources.requests.storage``, ``spec.volumeMode``, ``spec.selector`` and the
  ``volume.kubernetes.io/selected-node`` / ``pv.kubernetes.io/bind-completed`` annotations; a volume's
  ``spec.capacity.storage``, access modes, class, volume mode, ``spec.nodeAffinity.required``,
  ``spec.claimRef``, ``status.phase`` (only Available volumes are matched) and deletion timestamp; a class's
  ``provisioner``, ``volumeBindingMode`` and ``allowedTopologies``; a CSINode's annotations (in-tree plugins
  migrated to CSI).
- VolumeZone: a claim's volume name and class, the class's binding mode, and the volume's zone/region labels
  (``metadata.labels``).
- NodeVolumeLimits: a claim's volume name and class, the volume's ``spec.csi.driver`` /
  ``spec.csi.volumeHandle``, the class's provisioner, and a CSINode's ``spec.drivers[].allocatable.count``.
- VolumeRestrictions: a claim's access modes (ReadWriteOncePod).

Defaults are the API server's where the scheduler depends on them: volume mode Filesystem, phase Pending (for
both claims and volumes), binding mode Immediate. Note that the API server leaves a new volume Pending; it is
the PV controller that makes it Available, and only Available volumes are matched to claims. In-tree volume
sources (for CSI migration) stay in ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from kubesched.errors import FieldError

from . import _fields as f
from .objects import ObjectMeta
from .selectors import LabelSelector, NodeSelector, TopologySelectorTerm

__all__ = [
    "ACCESS_MODES",
    "ANN_BIND_COMPLETED",
    "ANN_SELECTED_NODE",
    "BETA_STORAGE_CLASS_ANNOTATION",
    "MIGRATED_PLUGINS_ANNOTATION",
    "NOT_SUPPORTED_PROVISIONER",
    "PVC_PHASES",
    "PV_PHASES",
    "VOLUME_BINDING_MODES",
    "VOLUME_MODES",
    "CSINode",
    "CSINodeDriver",
    "CSIPersistentVolumeSource",
    "ClaimReference",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
]

# Listed sorted, as the API server's "supported values" messages list them.
ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
PV_PHASES = ("Pending", "Available", "Bound", "Released", "Failed")
PVC_PHASES = ("Pending", "Bound", "Lost")
VOLUME_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""Set on a claim by the scheduler (VolumeBinding PreBind) to ask for provisioning on that node."""
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
"""Set on a claim by the PV controller; with ``spec.volumeName`` it makes the claim "fully bound"."""
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
"""The pre-``storageClassName`` way to name a class; where present it wins over the spec field."""
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
"""On a CSINode: comma-separated in-tree plugin names whose volumes the node handles through CSI."""
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
"""A class with this provisioner (or none) cannot provision dynamically."""

_GREATER_THAN_ZERO = "must be greater than zero"


def _top(obj: object, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        f.wrong_type(where, "", "a mapping", obj)
    return obj


def _access_modes(spec: Mapping[str, Any], where: str, required_detail: str) -> tuple[str, ...]:
    modes = f.string_list(spec, "accessModes", where, "spec")
    if not modes:
        f.reject(where, FieldError.required("spec.accessModes", required_detail))
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            f.unsupported(where, f"spec.accessModes[{i}]", mode, ACCESS_MODES)
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        detail = "may not use ReadWriteOncePod with other access modes"
        f.reject(where, FieldError.forbidden("spec.accessModes", detail))
    return tuple(modes)


def _volume_mode(spec: Mapping[str, Any], where: str) -> str:
    mode = f.string(spec, "volumeMode", where, "spec") or "Filesystem"
    if mode not in VOLUME_MODES:
        f.unsupported(where, "spec.volumeMode", mode, VOLUME_MODES)
    return mode


def _storage(holder: Mapping[str, Any], key: str, where: str, path: str) -> int:
    """``<path>.<key>.storage`` in bytes: required and positive, as claim and volume validation demand."""
    amounts = f.resource_list(holder, key, where, path)
    here = f"{path}.{key}.storage"
    if "storage" not in amounts:
        f.reject(where, FieldError.required(here))
    if amounts["storage"] <= 0:
        raw = f.mapping(holder, key, where, path)["storage"]
        f.invalid(where, here, raw if isinstance(raw, str) else str(raw), _GREATER_THAN_ZERO)
    return amounts["storage"]


def _phase(obj: Mapping[str, Any], where: str, phases: tuple[str, ...]) -> str:
    status = f.mapping(obj, "status", where, "")
    phase = f.string(status, "phase", where, "status") or "Pending"
    if phase not in phases:
        f.unsupported(where, "status.phase", phase, phases)
    return phase


@dataclass(frozen=True, slots=True)
class ClaimReference:
    """A volume's ``spec.claimRef``: the claim it is bound (or pre-bound) to. An empty ``uid`` (a user's
    pre-binding) matches any claim of that namespace and name (``IsVolumeBoundToClaim``)."""

    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "spec.claimRef") -> Self:
        obj = f.item_mapping(obj, where, path)
        return cls(
            # Kept as written: the API server does not default a claimRef's namespace.
            namespace=f.string(obj, "namespace", where, path),
            name=f.required_string(obj, "name", where, path),
            uid=f.string(obj, "uid", where, path),
        )


@dataclass(frozen=True, slots=True)
class CSIPersistentVolumeSource:
    """``spec.csi``: NodeVolumeLimits counts a volume once per ``driver/volume_handle`` on a node."""

    driver: str
    volume_handle: str

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "spec.csi") -> Self:
        obj = f.item_mapping(obj, where, path)
        return cls(
            driver=f.required_string(obj, "driver", where, path),
            volume_handle=f.required_string(obj, "volumeHandle", where, path),
        )


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """A PersistentVolume (cluster-scoped). ``capacity`` is ``spec.capacity.storage`` in bytes;
    ``node_affinity`` is ``spec.nodeAffinity.required``; zone and region labels are ``metadata.labels``."""

    metadata: ObjectMeta
    capacity: int
    access_modes: tuple[str, ...]
    storage_class_name: str
    volume_mode: str
    node_affinity: NodeSelector | None
    claim_ref: ClaimReference | None
    csi: CSIPersistentVolumeSource | None
    phase: str
    raw: Mapping[str, Any]
    # ``spec.volumeAttributesClassName`` ("" for none): FindMatchingVolume pairs a claim only with a volume
    # of the same VolumeAttributesClass (GA in v1.34).
    volume_attributes_class_name: str = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(
            f.mapping(obj, "metadata", where, ""), where, kind="PersistentVolume", namespaced=False
        )
        spec = f.mapping(obj, "spec", where, "")
        capacity = f.mapping(spec, "capacity", where, "spec")
        for name in capacity:
            if name != "storage":
                f.unsupported(where, f"spec.capacity.{name}", name, ("storage",))
        node_affinity: NodeSelector | None = None
        if spec.get("nodeAffinity") is not None:
            affinity = f.mapping(spec, "nodeAffinity", where, "spec")
            if affinity.get("required") is None:
                f.reject(
                    where,
                    FieldError.required("spec.nodeAffinity.required", "must specify required node constraints"),
                )
            node_affinity = NodeSelector.from_dict(affinity["required"], where, path="spec.nodeAffinity.required")
        claim_ref = spec.get("claimRef")
        csi = spec.get("csi")
        return cls(
            metadata=metadata,
            capacity=_storage(spec, "capacity", where, "spec"),
            access_modes=_access_modes(spec, where, ""),
            storage_class_name=f.string(spec, "storageClassName", where, "spec"),
            volume_mode=_volume_mode(spec, where),
            node_affinity=node_affinity,
            claim_ref=ClaimReference.from_dict(claim_ref, where) if claim_ref is not None else None,
            csi=CSIPersistentVolumeSource.from_dict(csi, where) if csi is not None else None,
            phase=_phase(obj, where, PV_PHASES),
            raw=obj,
            volume_attributes_class_name=f.string(spec, "volumeAttributesClassName", where, "spec"),
        )

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def class_name(self) -> str:
        """The class the volume belongs to, as component-helpers' ``GetPersistentVolumeClass`` reads it."""
        annotations = self.metadata.annotations
        if BETA_STORAGE_CLASS_ANNOTATION in annotations:
            return annotations[BETA_STORAGE_CLASS_ANNOTATION]
        return self.storage_class_name


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """A PersistentVolumeClaim. ``storage_request`` is ``spec.resources.requests.storage`` in bytes;
    ``storage_class_name`` is ``None`` when the spec names no class (``""`` asks explicitly for none)."""

    metadata: ObjectMeta
    volume_name: str
    storage_class_name: str | None
    access_modes: tuple[str, ...]
    storage_request: int
    volume_mode: str
    selector: LabelSelector | None
    phase: str
    raw: Mapping[str, Any]
    volume_attributes_class_name: str = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind="PersistentVolumeClaim")
        spec = f.mapping(obj, "spec", where, "")
        resources = f.mapping(spec, "resources", where, "spec")
        selector = spec.get("selector")
        return cls(
            metadata=metadata,
            volume_name=f.string(spec, "volumeName", where, "spec"),
            storage_class_name=f.optional_string(spec, "storageClassName", where, "spec"),
            access_modes=_access_modes(spec, where, "at least 1 access mode is required"),
            storage_request=_storage(resources, "requests", where, "spec.resources"),
            volume_mode=_volume_mode(spec, where),
            selector=LabelSelector.from_dict(selector, where, path="spec.selector") if selector is not None else None,
            phase=_phase(obj, where, PVC_PHASES),
            raw=obj,
            volume_attributes_class_name=f.string(spec, "volumeAttributesClassName", where, "spec"),
        )

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """ "namespace/name", the key the volume binder's caches use."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def class_name(self) -> str:
        """The requested class, as component-helpers' ``GetPersistentVolumeClaimClass`` reads it ("" for none)."""
        annotations = self.metadata.annotations
        if BETA_STORAGE_CLASS_ANNOTATION in annotations:
            return annotations[BETA_STORAGE_CLASS_ANNOTATION]
        return self.storage_class_name or ""

    @property
    def selected_node(self) -> str | None:
        """The node the scheduler chose for provisioning (the ``selected-node`` annotation), if any."""
        return self.metadata.annotations.get(ANN_SELECTED_NODE)


@dataclass(frozen=True, slots=True)
class StorageClass:
    """A StorageClass (cluster-scoped; its fields sit at the top level, there is no ``spec``)."""

    metadata: ObjectMeta
    provisioner: str
    volume_binding_mode: str
    allowed_topologies: tuple[TopologySelectorTerm, ...]
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(
            f.mapping(obj, "metadata", where, ""), where, kind="StorageClass", namespaced=False
        )
        mode = f.string(obj, "volumeBindingMode", where, "") or "Immediate"
        if mode not in VOLUME_BINDING_MODES:
            f.unsupported(where, "volumeBindingMode", mode, VOLUME_BINDING_MODES)
        terms = tuple(
            TopologySelectorTerm.from_dict(item, where, path=f"allowedTopologies[{i}]")
            for i, item in enumerate(f.sequence(obj, "allowedTopologies", where, ""))
        )
        seen: list[frozenset[tuple[str, frozenset[str]]]] = []
        for i, term in enumerate(terms):
            shape = frozenset((r.key, frozenset(r.values)) for r in term.match_label_expressions)
            if shape in seen:
                f.reject(where, FieldError.duplicate(f"allowedTopologies[{i}].matchLabelExpressions", ""))
            seen.append(shape)
        return cls(
            metadata=metadata,
            provisioner=f.required_string(obj, "provisioner", where, ""),
            volume_binding_mode=mode,
            allowed_topologies=terms,
            raw=obj,
        )

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def wait_for_first_consumer(self) -> bool:
        """Binding is delayed until a pod using a claim of this class is scheduled."""
        return self.volume_binding_mode == "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True)
class CSINodeDriver:
    """One ``spec.drivers`` entry. ``allocatable_count`` is ``allocatable.count``: the most volumes of this
    driver the node can attach, or ``None`` when the driver reports no limit."""

    name: str
    node_id: str
    topology_keys: tuple[str, ...] = ()
    allocatable_count: int | None = None

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "spec.drivers[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        keys = f.string_list(obj, "topologyKeys", where, path)
        seen: set[str] = set()
        for i, key in enumerate(keys):
            if key in seen:
                f.reject(where, FieldError.duplicate(f"{path}.topologyKeys[{i}]", key))
            seen.add(key)
        allocatable = f.mapping(obj, "allocatable", where, path)
        count = f.optional_integer(allocatable, "count", where, f"{path}.allocatable")
        if count is not None and count < 0:
            f.invalid(where, f"{path}.allocatable.count", count, "must be greater than or equal to 0")
        return cls(
            name=f.required_string(obj, "name", where, path),
            node_id=f.required_string(obj, "nodeID", where, path),
            topology_keys=tuple(keys),
            allocatable_count=count,
        )


@dataclass(frozen=True, slots=True)
class CSINode:
    """A CSINode (cluster-scoped, named after its node): the CSI drivers installed there."""

    metadata: ObjectMeta
    drivers: tuple[CSINodeDriver, ...]
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind="CSINode", namespaced=False)
        spec = f.mapping(obj, "spec", where, "")
        drivers = tuple(
            CSINodeDriver.from_dict(item, where, path=f"spec.drivers[{i}]")
            for i, item in enumerate(f.sequence(spec, "drivers", where, "spec"))
        )
        seen: set[str] = set()
        for i, driver in enumerate(drivers):
            if driver.name in seen:
                f.reject(where, FieldError.duplicate(f"spec.drivers[{i}].name", driver.name))
            seen.add(driver.name)
        return cls(metadata=metadata, drivers=drivers, raw=obj)

    @property
    def name(self) -> str:
        return self.metadata.name

    def driver(self, name: str) -> CSINodeDriver | None:
        for driver in self.drivers:
            if driver.name == name:
                return driver
        return None

    @property
    def migrated_plugins(self) -> frozenset[str]:
        """In-tree plugin names (e.g. ``kubernetes.io/gce-pd``) this node serves through their CSI driver."""
        text = self.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION, "")
        return frozenset(name for name in text.split(",") if name)
