"""kubesched.api: the typed Kubernetes object model every other part reads.

- :mod:`.quantity`: resource quantities ("100m", "1.5Gi") parsed exactly, canonical integers.
- :mod:`.objects`: Pod, Node, Namespace, PriorityClass, PodDisruptionBudget, parsed from decoded JSON/YAML.
- :mod:`.workloads`: Service, ReplicaSet, ReplicationController, StatefulSet (the selectors spreading reads).
- :mod:`.storage`: PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode (what volume plugins read).
- :mod:`.selectors`: LabelSelector, NodeSelector, TopologySelectorTerm, as those objects embed them.
- :mod:`.resources`: a pod's effective request (component-helpers ``PodRequests``).
- :mod:`.manifests`: loading manifest files, with priority resolution.
"""

from .manifests import LoadedManifests, load_manifest_text, load_manifests, resolve_priorities
from .objects import (
    Container,
    ContainerPort,
    Namespace,
    Node,
    NodeImage,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodDisruptionBudget,
    PodResourceClaim,
    PodSpec,
    PodStatus,
    PriorityClass,
    Taint,
    Toleration,
)
from .quantity import QuantityError, format_quantity, milli_value, parse_quantity, to_canonical, value
from .resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, pod_requests
from .selectors import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    TopologySelectorLabelRequirement,
    TopologySelectorTerm,
)
from .storage import (
    ClaimReference,
    CSINode,
    CSINodeDriver,
    CSIPersistentVolumeSource,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from .workloads import ReplicaSet, ReplicationController, Service, StatefulSet

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "CSINode",
    "CSINodeDriver",
    "CSIPersistentVolumeSource",
    "ClaimReference",
    "Container",
    "ContainerPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LoadedManifests",
    "Namespace",
    "Node",
    "NodeImage",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "OwnerReference",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodDisruptionBudget",
    "PodResourceClaim",
    "PodSpec",
    "PodStatus",
    "PriorityClass",
    "QuantityError",
    "ReplicaSet",
    "ReplicationController",
    "Service",
    "StatefulSet",
    "StorageClass",
    "Taint",
    "Toleration",
    "TopologySelectorLabelRequirement",
    "TopologySelectorTerm",
    "format_quantity",
    "load_manifest_text",
    "load_manifests",
    "milli_value",
    "parse_quantity",
    "pod_requests",
    "resolve_priorities",
    "to_canonical",
    "value",
]
