"""Typed listers: the read-only views of cluster objects, other than pods and nodes, that plugins read.

kube-scheduler's plugins get client-go listers from the framework Handle's informer factory: Namespaces
(InterPodAffinity's namespaceSelector), PodDisruptionBudgets and PriorityClasses (DefaultPreemption),
Services, ReplicaSets, ReplicationControllers and StatefulSets (the default spreading selector of
PodTopologySpread and SelectorSpread), PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes
(VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions). This module is their counterpart:

- :class:`NamespacedLister` / :class:`ClusterLister`: the protocols a plugin sees, one per scope;
- :class:`Listers`: the bundle of eleven listers the Handle will hand out;
- :class:`NamespacedStore` / :class:`ClusterStore`: the in-memory implementation, which a backend feeds with
  add/update/delete (the simulated cluster from loaded manifests, later a live backend from its informers);
- :class:`ListerStores`: one store per kind, built from any object with LoadedManifests' lists.

Who calls it: the simulated backend (``SimulatedCluster.listers``), the scheduler when it builds each profile's
Handle, and plugins through that Handle. Lookups by key are dict lookups and listing one namespace touches only
that namespace's objects, since plugins call these in PreFilter/PreScore for every pod.

Objects are shared, not copied: plugins must treat what a lister returns as read-only, as client-go asks of
informer caches. A change is a new object handed to the store, never an edit of the old one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, Self, TypeVar

from kubesched.api.objects import Namespace, ObjectMeta, PodDisruptionBudget, PriorityClass
from kubesched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.api.workloads import ReplicaSet, ReplicationController, Service, StatefulSet

__all__ = [
    "ClusterLister",
    "ClusterStore",
    "ListedObjects",
    "ListerStores",
    "Listers",
    "NamespacedLister",
    "NamespacedStore",
]


class _HasMetadata(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


T = TypeVar("T", bound=_HasMetadata)
T_co = TypeVar("T_co", covariant=True)


class NamespacedLister(Protocol[T_co]):
    """client-go's ``XLister`` for a namespaced kind: ``Xs(namespace).Get(name)`` and ``List``."""

    def get(self, namespace: str, name: str) -> T_co | None:
        """The object, or ``None`` where client-go returns a NotFound error."""
        ...

    def list(self, namespace: str | None = None) -> Sequence[T_co]:
        """The objects of one namespace, or of every namespace when ``namespace`` is ``None``."""
        ...


class ClusterLister(Protocol[T_co]):
    """client-go's ``XLister`` for a cluster-scoped kind."""

    def get(self, name: str) -> T_co | None: ...

    def list(self) -> Sequence[T_co]: ...


class NamespacedStore(Generic[T]):
    """Objects of one namespaced kind, indexed by namespace, then name.

    ``add`` and ``update`` both store the object under its key and return the one it replaced (an informer's
    relist can deliver an add for an object already known, and handlers want the old object). ``list`` returns
    a snapshot tuple: later changes to the store do not show through it. Order is first-stored order.
    """

    __slots__ = ("_by_namespace", "_count")

    def __init__(self, objects: Iterable[T] = ()) -> None:
        self._by_namespace: dict[str, dict[str, T]] = {}
        self._count = 0
        for obj in objects:
            self.add(obj)

    def get(self, namespace: str, name: str) -> T | None:
        bucket = self._by_namespace.get(namespace)
        return bucket.get(name) if bucket is not None else None

    def list(self, namespace: str | None = None) -> Sequence[T]:
        if namespace is None:
            return tuple(obj for bucket in self._by_namespace.values() for obj in bucket.values())
        bucket = self._by_namespace.get(namespace)
        return tuple(bucket.values()) if bucket is not None else ()

    def add(self, obj: T) -> T | None:
        meta = obj.metadata
        bucket = self._by_namespace.setdefault(meta.namespace, {})
        old = bucket.get(meta.name)
        bucket[meta.name] = obj
        if old is None:
            self._count += 1
        return old

    def update(self, obj: T) -> T | None:
        return self.add(obj)

    def delete(self, namespace: str, name: str) -> T | None:
        """Remove and return the object; ``None`` if there was none."""
        bucket = self._by_namespace.get(namespace)
        if bucket is None:
            return None
        old = bucket.pop(name, None)
        if old is not None:
            self._count -= 1
            if not bucket:
                # Dropped so that listing every namespace never walks namespaces that emptied out.
                del self._by_namespace[namespace]
        return old

    def replace(self, objects: Iterable[T]) -> None:
        """Make the store hold exactly ``objects`` (an informer's initial list or relist)."""
        self._by_namespace.clear()
        self._count = 0
        for obj in objects:
            self.add(obj)

    def __len__(self) -> int:
        return self._count


class ClusterStore(Generic[T]):
    """Objects of one cluster-scoped kind, by name; the same add/update/delete contract as NamespacedStore."""

    __slots__ = ("_by_name",)

    def __init__(self, objects: Iterable[T] = ()) -> None:
        self._by_name: dict[str, T] = {}
        for obj in objects:
            self.add(obj)

    def get(self, name: str) -> T | None:
        return self._by_name.get(name)

    def list(self) -> Sequence[T]:
        return tuple(self._by_name.values())

    def add(self, obj: T) -> T | None:
        name = obj.metadata.name
        old = self._by_name.get(name)
        self._by_name[name] = obj
        return old

    def update(self, obj: T) -> T | None:
        return self.add(obj)

    def delete(self, name: str) -> T | None:
        return self._by_name.pop(name, None)

    def replace(self, objects: Iterable[T]) -> None:
        self._by_name.clear()
        for obj in objects:
            self.add(obj)

    def __len__(self) -> int:
        return len(self._by_name)


@dataclass(frozen=True, slots=True)
class Listers:
    """Every lister a plugin can ask the Handle for, read-only."""

    namespaces: ClusterLister[Namespace]
    priority_classes: ClusterLister[PriorityClass]
    pod_disruption_budgets: NamespacedLister[PodDisruptionBudget]
    services: NamespacedLister[Service]
    replica_sets: NamespacedLister[ReplicaSet]
    replication_controllers: NamespacedLister[ReplicationController]
    stateful_sets: NamespacedLister[StatefulSet]
    persistent_volumes: ClusterLister[PersistentVolume]
    persistent_volume_claims: NamespacedLister[PersistentVolumeClaim]
    storage_classes: ClusterLister[StorageClass]
    csi_nodes: ClusterLister[CSINode]

    @staticmethod
    def from_objects(objects: ListedObjects) -> Listers:
        """Listers over fresh stores filled from ``objects`` (e.g. a LoadedManifests)."""
        return ListerStores.from_objects(objects).listers()

    @staticmethod
    def empty() -> Listers:
        """Listers that find nothing: for clusters and tests with no such objects."""
        return ListerStores().listers()


class ListedObjects(Protocol):
    """The lists :class:`kubesched.api.manifests.LoadedManifests` carries (``pdbs`` is its name for PDBs)."""

    @property
    def namespaces(self) -> Sequence[Namespace]: ...
    @property
    def priority_classes(self) -> Sequence[PriorityClass]: ...
    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]: ...
    @property
    def services(self) -> Sequence[Service]: ...
    @property
    def replica_sets(self) -> Sequence[ReplicaSet]: ...
    @property
    def replication_controllers(self) -> Sequence[ReplicationController]: ...
    @property
    def stateful_sets(self) -> Sequence[StatefulSet]: ...
    @property
    def persistent_volumes(self) -> Sequence[PersistentVolume]: ...
    @property
    def persistent_volume_claims(self) -> Sequence[PersistentVolumeClaim]: ...
    @property
    def storage_classes(self) -> Sequence[StorageClass]: ...
    @property
    def csi_nodes(self) -> Sequence[CSINode]: ...


@dataclass(frozen=True, slots=True)
class ListerStores:
    """One writable store per kind: what a backend keeps and feeds; :meth:`listers` is the plugins' view of the
    same stores, so every change made here is visible to them at once."""

    namespaces: ClusterStore[Namespace] = field(default_factory=ClusterStore)
    priority_classes: ClusterStore[PriorityClass] = field(default_factory=ClusterStore)
    pod_disruption_budgets: NamespacedStore[PodDisruptionBudget] = field(default_factory=NamespacedStore)
    services: NamespacedStore[Service] = field(default_factory=NamespacedStore)
    replica_sets: NamespacedStore[ReplicaSet] = field(default_factory=NamespacedStore)
    replication_controllers: NamespacedStore[ReplicationController] = field(default_factory=NamespacedStore)
    stateful_sets: NamespacedStore[StatefulSet] = field(default_factory=NamespacedStore)
    persistent_volumes: ClusterStore[PersistentVolume] = field(default_factory=ClusterStore)
    persistent_volume_claims: NamespacedStore[PersistentVolumeClaim] = field(default_factory=NamespacedStore)
    storage_classes: ClusterStore[StorageClass] = field(default_factory=ClusterStore)
    csi_nodes: ClusterStore[CSINode] = field(default_factory=ClusterStore)

    @classmethod
    def from_objects(cls, objects: ListedObjects) -> Self:
        """Stores holding ``objects``; of two objects with one key the later wins (LoadedManifests has none)."""
        return cls(
            namespaces=ClusterStore(objects.namespaces),
            priority_classes=ClusterStore(objects.priority_classes),
            pod_disruption_budgets=NamespacedStore(objects.pdbs),
            services=NamespacedStore(objects.services),
            replica_sets=NamespacedStore(objects.replica_sets),
            replication_controllers=NamespacedStore(objects.replication_controllers),
            stateful_sets=NamespacedStore(objects.stateful_sets),
            persistent_volumes=ClusterStore(objects.persistent_volumes),
            persistent_volume_claims=NamespacedStore(objects.persistent_volume_claims),
            storage_classes=ClusterStore(objects.storage_classes),
            csi_nodes=ClusterStore(objects.csi_nodes),
        )

    def listers(self) -> Listers:
        return Listers(
            namespaces=self.namespaces,
            priority_classes=self.priority_classes,
            pod_disruption_budgets=self.pod_disruption_budgets,
            services=self.services,
            replica_sets=self.replica_sets,
            replication_controllers=self.replication_controllers,
            stateful_sets=self.stateful_sets,
            persistent_volumes=self.persistent_volumes,
            persistent_volume_claims=self.persistent_volume_claims,
            storage_classes=self.storage_classes,
            csi_nodes=self.csi_nodes,
        )
