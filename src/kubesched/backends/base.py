"""What the scheduler needs from a cluster: an API to write to and a stream of object events.

A backend delivers Node and Pod events to the scheduler (its informers) and performs the writes the
scheduler makes: the binding, the PodScheduled condition, events. The simulated backend keeps all of
this in memory; the kube backend talks to an API server.
"""

from __future__ import annotations

from typing import Protocol

from kubesched.api.objects import Node, Pod
from kubesched.framework.events import ActionType, EventResource
from kubesched.framework.interface import ClusterClient, EventRecorder
from kubesched.framework.listers import Listers


class ClusterEventHandler(Protocol):
    """The scheduler's informer callbacks."""

    def on_node_add(self, node: Node) -> None: ...

    def on_node_update(self, old: Node, new: Node) -> None: ...

    def on_node_delete(self, node: Node) -> None: ...

    def on_pod_add(self, pod: Pod) -> None: ...

    def on_pod_update(self, old: Pod, new: Pod) -> None: ...

    def on_pod_delete(self, pod: Pod) -> None: ...

    def on_object_event(self, resource: EventResource, action: ActionType, old: object, new: object) -> None:
        """Another watched kind changed (the storage objects the volume plugins register events for)."""
        ...


class Backend(ClusterClient, EventRecorder, Protocol):
    @property
    def listers(self) -> Listers:
        """The objects plugins read besides pods and nodes, as the backend's informers keep them."""
        ...

    def subscribe(self, handler: ClusterEventHandler) -> None:
        """Deliver every existing object as an add, then every later change."""
        ...

    def set_pod_condition(self, pod: Pod, reason: str, message: str, nominated_node_name: str | None) -> None:
        """Record PodScheduled=False with ``reason`` (Unschedulable or SchedulerError) on the pod."""
        ...
