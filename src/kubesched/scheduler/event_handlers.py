"""Informer event handlers: cluster changes into the cache, the scheduling queue and the nominator.

The backend (simulated cluster, the API server's informers) calls these for every Node and Pod event, and
for changes of the storage kinds the volume plugins register, as kube-scheduler's ``eventhandlers.go``
does: assigned pods and nodes go to the cache; pending pods this scheduler is responsible for go to the
queue (their nomination to the nominator); every change is also a cluster event that may move
unschedulable pods back to the queue. Handlers never run inside a scheduling cycle's reads: the cycle works
on its own snapshot.
"""

from __future__ import annotations

from collections.abc import Callable

from kubesched.api.objects import Node, Pod
from kubesched.api.resources import pod_requests
from kubesched.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    ActionType,
    ClusterEvent,
    EventResource,
)
from kubesched.framework.runtime.waiting_pods import WaitingPods
from kubesched.framework.types import PodInfo
from kubesched.scheduler.cache.cache import Cache
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# kube-scheduler labels an event of another kind "<resource><action>" (e.g. "PersistentVolumeClaimAdd").
_ACTION_LABELS = {ActionType.ADD: "Add", ActionType.UPDATE: "Update", ActionType.DELETE: "Delete"}


class EventHandlers:
    """The scheduler's informer callbacks (a :class:`~kubesched.backends.base.ClusterEventHandler`)."""

    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        waiting_pods: WaitingPods,
        responsible_for: Callable[[Pod], bool],
        pending: dict[str, Pod],
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.nominator = queue.nominator
        self.waiting_pods = waiting_pods
        self.responsible_for = responsible_for
        # Latest version of every pending pod this scheduler places, by uid (the Handle's get_pod).
        self.pending = pending

    # ---- nodes -------------------------------------------------------------------------------

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.on_event(NODE_ADD, None, node)

    def on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(new)
        action = node_update_action(old, new)
        if action:
            self.queue.on_event(ClusterEvent(EventResource.NODE, action, "NodeUpdate"), old, new)

    def on_node_delete(self, node: Node) -> None:
        self.cache.remove_node(node.metadata.name)
        self.queue.on_event(NODE_DELETE, node, None)

    # ---- other kinds ---------------------------------------------------------------------------

    def on_object_event(self, resource: EventResource, action: ActionType, old: object, new: object) -> None:
        self.queue.on_event(ClusterEvent(resource, action, f"{resource.value}{_ACTION_LABELS[action]}"), old, new)

    # ---- pods --------------------------------------------------------------------------------

    def on_pod_add(self, pod: Pod) -> None:
        if pod.status.phase in TERMINAL_PHASES:
            return  # a finished pod holds nothing (kube-scheduler's informer never lists one)
        if pod.spec.node_name:
            self.cache.add_pod(pod)
            self.queue.on_event(ASSIGNED_POD_ADD, None, pod)
            return
        if not self.responsible_for(pod) or pod.status.phase in TERMINAL_PHASES:
            return
        pod_info = PodInfo(pod)
        self.pending[pod_info.uid] = pod
        self.queue.add(pod_info)
        # As kube-scheduler's queue: a new pod's nomination counts once the pod enters activeQ; one held at
        # PreEnqueue (scheduling gates) reserves nothing on its nominated node.
        if pod.status.nominated_node_name and not self.queue.is_gated(pod_info.uid):
            self.nominator.add_nominated_pod(pod_info, pod.status.nominated_node_name)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        # A pod that finishes leaves kube-scheduler's informer (its field selector excludes terminal phases):
        # to the scheduler that is a delete, and a finished pod is never seen again.
        if new.status.phase in TERMINAL_PHASES:
            if old.status.phase not in TERMINAL_PHASES:
                self.on_pod_delete(old)
            return
        if old.status.phase in TERMINAL_PHASES:
            self.on_pod_add(new)
            return
        uid = new.metadata.uid
        version = new.metadata.resource_version
        if version and version == old.metadata.resource_version:
            return  # an informer's resync or relist repeating what we have (kube-scheduler skips these too)
        if new.spec.node_name:
            self.pending.pop(uid, None)
            self.nominator.delete_nominated_pod_if_exists(uid)
            self.queue.delete(uid)
            self.cache.add_pod(new)
            event = (
                ASSIGNED_POD_ADD
                if not old.spec.node_name
                else ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE, "AssignedPodUpdate")
            )
            self.queue.on_event(event, old if old.spec.node_name else None, new)
            return
        if not self.responsible_for(new):
            return
        self.pending[uid] = new
        if self.cache.is_assumed(uid):
            # Waiting at Permit or being bound: a change of the pending version (our own status patch, say)
            # must not put it back in the queue; the informer's assigned version will follow.
            return
        pod_info = PodInfo(new)
        nominated = new.status.nominated_node_name
        if old.status.nominated_node_name or nominated:
            # The nomination was set, moved or cleared on the API (preemption clears those of lower-priority
            # pods on the node it chose): follow it. With neither version naming a node, a nomination made in
            # memory (whose status patch is still on its way) is kept, as kube-scheduler's nominator does.
            if nominated:
                self.nominator.add_nominated_pod(pod_info, nominated)
            else:
                self.nominator.delete_nominated_pod_if_exists(uid)
        else:
            self.nominator.update_nominated_pod(pod_info)
        self.queue.update(pod_info, pod_update_action(old, new))

    def on_pod_delete(self, pod: Pod) -> None:
        uid = pod.metadata.uid
        self.nominator.delete_nominated_pod_if_exists(uid)
        if self.pending.pop(uid, None) is not None:
            self.queue.delete(uid)
            waiting = self.waiting_pods.get(uid)
            if waiting is not None:
                waiting.reject("", "pod was deleted")
        # Only an assigned pod leaves the cache: an unassigned one being deleted may still be assumed (its
        # binding fails and forgets it), or be bound already (the assigned version is on its way).
        if pod.spec.node_name and self.cache.remove_pod(pod) is not None:
            self.queue.on_event(ASSIGNED_POD_DELETE, pod, None)


# What kube-scheduler leaves out when it asks whether a pod was updated in a way that may make it schedulable: the
# bookkeeping of the API server and the status (a scheduler's PodScheduled condition and nominatedNodeName, the
# kubelet's), except the status of the pod's generated resource claims.
_BOOKKEEPING_METADATA = ("resourceVersion", "generation", "managedFields", "finalizers")
_SCHEDULING_STATUS = "resourceClaimStatuses"


def _scheduling_relevant(pod: Pod) -> dict[str, object]:
    manifest = pod.raw
    # The type, too: a list's items come without apiVersion and kind, a watch event's object with them.
    manifest.pop("apiVersion", None)
    manifest.pop("kind", None)
    metadata = manifest.get("metadata")
    if isinstance(metadata, dict):
        for key in _BOOKKEEPING_METADATA:
            metadata.pop(key, None)
    status = manifest.get("status")
    claims = status.get(_SCHEDULING_STATUS) if isinstance(status, dict) else None
    manifest["status"] = {_SCHEDULING_STATUS: claims} if claims else {}
    return manifest


def pod_updated(old: Pod, new: Pod) -> bool:
    """Whether a pending pod changed in a way that may make it schedulable (kube-scheduler's ``isPodUpdated``):
    anything but its resourceVersion, generation, managedFields, finalizers and status (resource claim statuses
    excepted). The scheduler's own writes (the PodScheduled condition, nominatedNodeName) are no such change."""
    return _scheduling_relevant(old) != _scheduling_relevant(new)


def pod_update_action(old: Pod, new: Pod) -> ActionType:
    """What changed in a pending pod that a plugin's rejection may depend on (kube-scheduler's
    ``PodSchedulingPropertiesChange``), UPDATE_POD_OTHER for any other change :func:`pod_updated` sees, and no
    action at all (0) for a change it does not see (a status patch: nothing to requeue the pod for)."""
    if not pod_updated(old, new):
        return ActionType(0)
    action = ActionType(0)
    if old.metadata.labels != new.metadata.labels:
        action |= ActionType.UPDATE_POD_LABEL
    old_requests, new_requests = pod_requests(old), pod_requests(new)
    if any(new_requests.get(name, 0) < amount for name, amount in old_requests.items()):
        action |= ActionType.UPDATE_POD_SCALE_DOWN
    if old.spec.scheduling_gates and not new.spec.scheduling_gates:
        action |= ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    if old.spec.tolerations != new.spec.tolerations:
        action |= ActionType.UPDATE_POD_TOLERATIONS
    return action or ActionType.UPDATE_POD_OTHER


def node_update_action(old: Node, new: Node) -> ActionType:
    """Which parts of a node changed, as the NodeUpdate event's action (0: nothing scheduling cares about)."""
    action = ActionType(0)
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.metadata.labels != new.metadata.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.spec_unschedulable != new.spec_unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.raw.get("status", {}).get("conditions") != new.raw.get("status", {}).get("conditions"):
        action |= ActionType.UPDATE_NODE_CONDITION
    if old.metadata.annotations != new.metadata.annotations:
        action |= ActionType.UPDATE_NODE_ANNOTATION
    return action
