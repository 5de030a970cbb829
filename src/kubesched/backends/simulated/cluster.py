"""An in-memory cluster: the embedded backend for ``kubesched simulate`` and for tests.

Holds the nodes and pods loaded from manifests, applies bindings the way the API server's binding
subresource does (sets ``spec.nodeName`` and the PodScheduled=True condition), evicts preemption victims
(the DisruptionTarget condition, then the delete, with no grace period) and tells the scheduler about every
change, like an informer. Events and conditions the scheduler writes are kept
for the report. Nothing here sleeps: with a virtual clock a simulation runs as fast as it can.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.backends.base import ClusterEventHandler
from kubesched.clock import Clock
from kubesched.framework.interface import ApiError
from kubesched.framework.listers import Listers


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    namespace: str
    name: str
    type: str
    reason: str
    action: str
    message: str
    time: float


class SimulatedCluster:
    """Nodes and pods in memory, with the API semantics the scheduler relies on."""

    def __init__(
        self,
        clock: Clock,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        *,
        listers: Listers | None = None,
    ) -> None:
        self._clock = clock
        # Services, volumes, claims, ... loaded with the nodes and pods (``Listers.from_objects(manifests)``):
        # the cluster owns every object of the simulated API, and plugins reach these through the Handle.
        self.listers: Listers = listers if listers is not None else Listers.empty()
        self.nodes: dict[str, Node] = {node.metadata.name: node for node in nodes}
        self.pods: dict[str, Pod] = {pod.metadata.uid: pod for pod in pods}
        self.events: list[RecordedEvent] = []
        self.conditions: dict[str, dict[str, Any]] = {}
        self._handlers: list[ClusterEventHandler] = []
        self.bind_failures: dict[str, str] = {}
        # Victim uid -> the error its eviction fails with (tests of preemption's failure path).
        self.preempt_failures: dict[str, str] = {}
        # Preemptor uid -> "namespace/name" of every pod evicted for it, in eviction order (the report's
        # "preempted"); the DisruptionTarget condition each victim got before it was deleted, by victim uid.
        self.preempted: dict[str, list[str]] = {}
        self.disruption_conditions: dict[str, dict[str, Any]] = {}

    def subscribe(self, handler: ClusterEventHandler) -> None:
        self._handlers.append(handler)
        for node in self.nodes.values():
            handler.on_node_add(node)
        for pod in self.pods.values():
            if pod.spec.node_name:
                handler.on_pod_add(pod)
        for pod in self.pods.values():
            if not pod.spec.node_name:
                handler.on_pod_add(pod)

    # ---- writes the scheduler makes ----------------------------------------------------------

    async def bind(self, pod: Pod, node_name: str) -> None:
        uid = pod.metadata.uid
        current = self.pods.get(uid)
        if current is None:
            raise ApiError(f'pods "{pod.metadata.name}" not found')
        if current.spec.node_name:
            raise ApiError(
                f'Operation cannot be fulfilled on pods/binding "{pod.metadata.name}": '
                f'pod {pod.metadata.name} is already assigned to node "{current.spec.node_name}"'
            )
        if node_name not in self.nodes:
            raise ApiError(f'nodes "{node_name}" not found')
        failure = self.bind_failures.get(uid)
        if failure is not None:
            raise ApiError(failure)
        condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": self._clock.now()}
        bound = replace(
            current,
            spec=replace(current.spec, node_name=node_name),
            status=replace(current.status, conditions=[*_without_scheduled(current), condition]),
        )
        self.pods[uid] = bound
        self.conditions[uid] = condition
        for handler in self._handlers:
            handler.on_pod_update(current, bound)

    async def preempt(self, victim: Pod, preemptor: Pod) -> None:
        uid = victim.metadata.uid
        if uid not in self.pods:
            return  # gone already: as good as evicted, which is all the preemptor needs
        failure = self.preempt_failures.get(uid)
        if failure is not None:
            raise ApiError(failure)
        self.disruption_conditions[uid] = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": f"{preemptor.spec.scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": self._clock.now(),
        }
        self.preempted.setdefault(preemptor.metadata.uid, []).append(victim.key)
        # No kubelet here to wait out a grace period: the victim is gone at once, which the scheduler sees
        # as an AssignedPodDelete (and a deleted pending pod, for an assumed victim).
        self.delete_pod(uid)

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        current = self.pods.get(pod.metadata.uid)
        if current is None or not current.status.nominated_node_name:
            return
        self.update_pod(replace(current, status=replace(current.status, nominated_node_name="")))

    def event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        self.events.append(
            RecordedEvent(
                pod.metadata.namespace, pod.metadata.name, event_type, reason, action, message, self._clock.now()
            )
        )

    def set_pod_condition(self, pod: Pod, reason: str, message: str, nominated_node_name: str | None) -> None:
        uid = pod.metadata.uid
        current = self.pods.get(uid)
        if current is None:
            return
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        status = replace(current.status, conditions=[*_without_scheduled(current), condition])
        if nominated_node_name is not None:
            status = replace(status, nominated_node_name=nominated_node_name)
        # Status-only changes are not scheduling events (kube-scheduler ignores them), so no handler call.
        self.pods[uid] = replace(current, status=status)
        self.conditions[uid] = condition

    # ---- changes a test or a workload makes --------------------------------------------------

    def add_node(self, node: Node) -> None:
        self.nodes[node.metadata.name] = node
        for handler in self._handlers:
            handler.on_node_add(node)

    def update_node(self, node: Node) -> None:
        old = self.nodes[node.metadata.name]
        self.nodes[node.metadata.name] = node
        for handler in self._handlers:
            handler.on_node_update(old, node)

    def delete_node(self, name: str) -> None:
        node = self.nodes.pop(name)
        for handler in self._handlers:
            handler.on_node_delete(node)

    def add_pod(self, pod: Pod) -> None:
        self.pods[pod.metadata.uid] = pod
        for handler in self._handlers:
            handler.on_pod_add(pod)

    def update_pod(self, pod: Pod) -> None:
        old = self.pods[pod.metadata.uid]
        self.pods[pod.metadata.uid] = pod
        for handler in self._handlers:
            handler.on_pod_update(old, pod)

    def delete_pod(self, uid: str) -> None:
        pod = self.pods.pop(uid)
        for handler in self._handlers:
            handler.on_pod_delete(pod)

    def events_for(self, namespace: str, name: str) -> list[RecordedEvent]:
        return [e for e in self.events if e.namespace == namespace and e.name == name]


def _without_scheduled(pod: Pod) -> list[dict[str, Any]]:
    return [c for c in pod.status.conditions if c.get("type") != "PodScheduled"]
