"""The informers ``kubesched run`` needs: pods, nodes, and every object the plugins' listers read.

Built by :class:`~kubesched.backends.kube.backend.KubeBackend`. Pods come from two kinds of watch, as the
scheduler needs them: for each profile, the unassigned pods that name it (``spec.schedulerName=NAME,
spec.nodeName=``), and every assigned pod that has not terminated (``spec.nodeName!=``, not Succeeded or
Failed). :class:`PodStreams` merges them into the old/new pod events kube-scheduler's single pod informer
gives: a pod that gets bound leaves the first watch (a DELETED carrying its *unbound* state, since the API
server sends the previous object when one leaves a selector) and enters the second (ADDED) in either order,
and the scheduler sees one update from pending to assigned — or, when the DELETED comes first, the pod
leaving the queue and then an assigned pod arriving, which is what kube-scheduler sees from two informers.
Nodes go straight to the scheduler's handlers; the other kinds fill the :class:`ListerStores` the plugins
read through the Handle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from kubesched.api.objects import Namespace, Node, Pod, PodDisruptionBudget
from kubesched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.api.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from kubesched.backends.base import ClusterEventHandler
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.reflector import Reflector, ResourceKind
from kubesched.framework.events import ActionType, EventResource
from kubesched.framework.listers import ClusterStore, ListerStores, NamespacedStore

log = logging.getLogger(__name__)

T = TypeVar("T")

PODS = ResourceKind("pods", "/api/v1/pods", Pod.from_dict)
NODES = ResourceKind("nodes", "/api/v1/nodes", Node.from_dict)
NOT_TERMINATED = "status.phase!=Succeeded,status.phase!=Failed"
ASSIGNED_PODS = f"spec.nodeName!=,{NOT_TERMINATED}"


def unassigned_pods_of(scheduler_name: str) -> str:
    return f"spec.schedulerName={scheduler_name},spec.nodeName=,{NOT_TERMINATED}"


def assigned_pods_of(scheduler_name: str) -> str:
    """The assigned, not terminated pods that name ``scheduler_name`` (the live hub's pods bound to clusters)."""
    return f"spec.schedulerName={scheduler_name},{ASSIGNED_PODS}"


# (store attribute, kind) for the listers the Handle hands out. Not PriorityClasses: in a cluster the priority
# admission plugin has resolved every pod's spec.priority, and kube-scheduler (whose built-in role cannot
# list them) never reads them; that store stays empty in live mode.
LISTER_KINDS: tuple[tuple[str, ResourceKind], ...] = (
    ("namespaces", ResourceKind("namespaces", "/api/v1/namespaces", Namespace.from_dict)),
    ("pod_disruption_budgets", ResourceKind(
        "poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", PodDisruptionBudget.from_dict
    )),
    ("services", ResourceKind("services", "/api/v1/services", Service.from_dict)),
    ("replica_sets", ResourceKind("replicasets", "/apis/apps/v1/replicasets", ReplicaSet.from_dict)),
    ("replication_controllers", ResourceKind(
        "replicationcontrollers", "/api/v1/replicationcontrollers", ReplicationController.from_dict
    )),
    ("stateful_sets", ResourceKind("statefulsets", "/apis/apps/v1/statefulsets", StatefulSet.from_dict)),
    ("persistent_volumes", ResourceKind("persistentvolumes", "/api/v1/persistentvolumes", PersistentVolume.from_dict)),
    ("persistent_volume_claims", ResourceKind(
        "persistentvolumeclaims", "/api/v1/persistentvolumeclaims", PersistentVolumeClaim.from_dict
    )),
    ("storage_classes", ResourceKind(
        "storageclasses", "/apis/storage.k8s.io/v1/storageclasses", StorageClass.from_dict
    )),
    ("csi_nodes", ResourceKind("csinodes", "/apis/storage.k8s.io/v1/csinodes", CSINode.from_dict)),
)  # fmt: skip

InvalidHandler = Callable[[str, Mapping[str, Any], Exception], None]


class _StoreFeed(Generic[T]):
    """A reflector handler that keeps one lister store; changes of a kind plugins register events for
    (``resource``) are also cluster events for the queue's hints, after the store has them."""

    def __init__(
        self,
        kind: str,
        store: ClusterStore[Any] | NamespacedStore[Any],
        on_invalid: InvalidHandler,
        events: tuple[EventResource, ClusterEventHandler] | None = None,
    ) -> None:
        self.kind = kind
        self.store = store
        self._on_invalid = on_invalid
        self._events = events

    def _event(self, action: ActionType, old: object, new: object) -> None:
        if self._events is not None:
            resource, handler = self._events
            handler.on_object_event(resource, action, old, new)

    def on_add(self, obj: T) -> None:
        self.store.add(obj)
        self._event(ActionType.ADD, None, obj)

    def on_update(self, old: T, new: T) -> None:
        self.store.update(new)
        self._event(ActionType.UPDATE, old, new)

    def on_delete(self, obj: T) -> None:
        meta = obj.metadata  # type: ignore[attr-defined]
        if isinstance(self.store, NamespacedStore):
            self.store.delete(meta.namespace, meta.name)
        else:
            self.store.delete(meta.name)
        self._event(ActionType.DELETE, obj, None)

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        self._on_invalid(self.kind, raw, error)


class _NodeFeed:
    def __init__(self, handler: ClusterEventHandler, on_invalid: InvalidHandler) -> None:
        self.handler = handler
        self._on_invalid = on_invalid

    def on_add(self, obj: Node) -> None:
        self.handler.on_node_add(obj)

    def on_update(self, old: Node, new: Node) -> None:
        self.handler.on_node_update(old, new)

    def on_delete(self, obj: Node) -> None:
        self.handler.on_node_delete(obj)

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        self._on_invalid("nodes", raw, error)


class PodStreams:
    """Merges the unassigned-pod and assigned-pod watches into one pod informer's events (module doc)."""

    def __init__(self, handler: ClusterEventHandler, on_invalid: InvalidHandler) -> None:
        self.handler = handler
        self._on_invalid = on_invalid
        self.known: dict[str, Pod] = {}  # uid -> the latest version either watch delivered
        self.pending: set[str] = set()  # uids the unassigned watch holds
        # uids that were assigned and are gone while the unassigned watch, lagging, still holds a pending version
        self.gone: set[str] = set()
        self.unassigned = _PodStream(self, assigned=False)
        self.assigned = _PodStream(self, assigned=True)

    def pending_arrived(self, pod: Pod) -> None:
        self.pending.add(pod.uid)
        if pod.uid in self.gone:
            return  # an old, unbound version of a pod that was bound and has left since
        known = self.known.get(pod.uid)
        if known is not None and known.spec.node_name:
            return  # the assigned watch already told us: this is the older, unbound version
        self.known[pod.uid] = pod
        if known is None:
            self.handler.on_pod_add(pod)
        else:
            self.handler.on_pod_update(known, pod)

    def pending_left(self, pod: Pod) -> None:
        self.pending.discard(pod.uid)
        if pod.uid in self.gone:
            self.gone.discard(pod.uid)  # the handler saw it go already
            return
        known = self.known.get(pod.uid)
        if known is not None and known.spec.node_name:
            return  # bound: the assigned watch already delivered it
        self.known.pop(pod.uid, None)
        # Deleted, or bound with the assigned watch not there yet: either way it leaves the queue.
        self.handler.on_pod_delete(known if known is not None else pod)

    def assigned_arrived(self, pod: Pod) -> None:
        known = self.known.get(pod.uid)
        self.known[pod.uid] = pod
        if known is None:
            self.handler.on_pod_add(pod)
        else:
            self.handler.on_pod_update(known, pod)

    def assigned_left(self, pod: Pod) -> None:
        known = self.known.pop(pod.uid, None)
        if pod.uid in self.pending:
            self.gone.add(pod.uid)
        self.handler.on_pod_delete(known if known is not None and known.spec.node_name else pod)

    def invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        self._on_invalid("pods", raw, error)


class _PodStream:
    def __init__(self, streams: PodStreams, *, assigned: bool) -> None:
        self.streams = streams
        self.assigned = assigned

    def on_add(self, obj: Pod) -> None:
        (self.streams.assigned_arrived if self.assigned else self.streams.pending_arrived)(obj)

    def on_update(self, old: Pod, new: Pod) -> None:
        self.on_add(new)

    def on_delete(self, obj: Pod) -> None:
        (self.streams.assigned_left if self.assigned else self.streams.pending_left)(obj)

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        self.streams.invalid(raw, error)


# The lister kinds whose changes the volume plugins' queueing hints wait for.
EVENT_RESOURCES = {
    "persistent_volumes": EventResource.PERSISTENT_VOLUME,
    "persistent_volume_claims": EventResource.PERSISTENT_VOLUME_CLAIM,
    "storage_classes": EventResource.STORAGE_CLASS,
    "csi_nodes": EventResource.CSI_NODE,
}


def _store_feed(
    attribute: str,
    kind: ResourceKind,
    stores: ListerStores,
    handler: ClusterEventHandler,
    on_invalid: InvalidHandler,
) -> _StoreFeed[Any]:
    resource = EVENT_RESOURCES.get(attribute)
    events = None if resource is None else (resource, handler)
    return _StoreFeed(kind.name, getattr(stores, attribute), on_invalid, events)


class Informers:
    """Every reflector of one scheduler process; :meth:`start`, :meth:`wait_synced`, :meth:`aclose`."""

    def __init__(
        self,
        client: KubeClient,
        scheduler_names: list[str],
        stores: ListerStores,
        handler: ClusterEventHandler,
        on_invalid: InvalidHandler,
        *,
        watch_timeout: tuple[int, int] | None = None,
        nodes: bool = True,
        assigned_selectors: Sequence[str] = (ASSIGNED_PODS,),
        extra: Callable[[dict[str, Any]], Sequence[Reflector[Any]]] | None = None,
    ) -> None:
        """``nodes`` False: no Node watch (the live hub's nodes are member clusters); ``assigned_selectors``: the
        field selectors of the assigned-pod watches (one watch each; the sets must be disjoint); ``extra``: more
        reflectors, built from the reflector options, started, awaited and closed with these."""
        options: dict[str, Any] = {} if watch_timeout is None else {"watch_timeout": watch_timeout}
        self.pods = PodStreams(handler, on_invalid)
        self.reflectors: list[Reflector[Any]] = [
            *([Reflector(client, NODES, _NodeFeed(handler, on_invalid), **options)] if nodes else []),
            *(
                Reflector(client, kind, _store_feed(attribute, kind, stores, handler, on_invalid), **options)
                for attribute, kind in LISTER_KINDS
            ),
            *(
                Reflector(client, PODS, self.pods.assigned, field_selector=selector, **options)
                for selector in assigned_selectors
            ),
            *(
                Reflector(client, PODS, self.pods.unassigned, field_selector=unassigned_pods_of(name), **options)
                for name in scheduler_names
            ),
            *(extra(options) if extra is not None else ()),
        ]
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for reflector in self.reflectors:
            self._tasks.append(asyncio.create_task(reflector.run(), name=f"reflector {reflector.kind.name}"))

    @property
    def synced(self) -> bool:
        return all(reflector.synced.is_set() for reflector in self.reflectors)

    def unsynced(self) -> list[str]:
        return [
            f"{r.kind.name}{' ' + r.field_selector if r.field_selector else ''}"
            for r in self.reflectors
            if not r.synced.is_set()
        ]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(reflector.synced.wait() for reflector in self.reflectors))

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
