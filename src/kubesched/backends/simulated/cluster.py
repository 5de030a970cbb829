"""An in-memory cluster: the embedded backend for ``kubesched simulate`` and for tests.

Holds the nodes and pods loaded from manifests, applies bindings the way the API server's binding
subresource does (sets ``spec.nodeName`` and the PodScheduled=True condition), evicts preemption victims
(the DisruptionTarget condition, then the delete, with no grace period) and tells the scheduler about every
change, like an informer. It also binds volumes for VolumeBinding's PreBind (``bind_volumes``), playing
the PV controller and an instant provisioner. Events and conditions the scheduler writes are kept
for the report. Nothing here sleeps: with a virtual clock a simulation runs as fast as it can.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kubesched.api.evolve import evolve
from kubesched.api.objects import Node, ObjectMeta, Pod, object_uid
from kubesched.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    ClaimReference,
    PersistentVolume,
    PersistentVolumeClaim,
)
from kubesched.backends.base import ClusterEventHandler
from kubesched.clock import Clock
from kubesched.framework.interface import ApiError, truncate_event_message
from kubesched.framework.listers import ClusterStore, Listers, NamespacedStore

ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One event as the scheduler or a plugin emitted it, with what an events.k8s.io/v1 Event would carry:
    the regarding object (always a pod: every recorder call names one), the note and the reporting controller
    (the pod's scheduler name, as kube-scheduler's per-profile recorder sets it)."""

    namespace: str
    name: str
    type: str
    reason: str
    action: str
    message: str
    time: float
    reporting_controller: str = ""
    uid: str = ""
    kind: str = "Pod"


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
        # (pod key, claim key, volume name) for every claim VolumeBinding's PreBind bound, in order.
        self.volume_bindings: list[tuple[str, str, str]] = []

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

    def unsubscribe(self, handler: ClusterEventHandler) -> None:
        """Stop telling ``handler`` about changes (a scheduler process that ended; unknown handlers are ignored)."""
        if handler in self._handlers:
            self._handlers.remove(handler)

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
        # evolve, not replace: the in-memory API server binds every pod of a bench or a simulation.
        bound = evolve(
            current,
            spec=evolve(current.spec, node_name=node_name),
            status=evolve(current.status, conditions=[*_without_scheduled(current), condition]),
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

    async def compare_and_set_annotation(self, pod: Pod, key: str, expected: str | None, value: str) -> bool:
        current = self.pods.get(pod.metadata.uid)
        if current is None:
            raise ApiError(f'pods "{pod.metadata.name}" not found')
        if current.metadata.annotations.get(key) != expected:
            return False
        annotations = {**current.metadata.annotations, key: value}
        self.update_pod(replace(current, metadata=replace(current.metadata, annotations=annotations)))
        return True

    async def bind_volumes(
        self,
        pod: Pod,
        node_name: str,
        bindings: Sequence[tuple[PersistentVolume, PersistentVolumeClaim]],
        provisions: Sequence[PersistentVolumeClaim],
    ) -> None:
        """VolumeBinding's PreBind, done at once: the simulation is API server, PV controller and provisioner.

        A static binding writes the volume's ``claimRef`` and marks volume and claim Bound (the claim with
        ``volumeName`` and ``bind-completed``, as the PV controller would); a claim to provision gets a new
        volume of its class and size, named ``pvc-<claim uid>`` like external provisioners name theirs, bound
        to it. The simulation knows no provisioner's topology, so that volume has no node affinity.
        """
        volumes = self.listers.persistent_volumes
        claims = self.listers.persistent_volume_claims
        if not isinstance(volumes, ClusterStore) or not isinstance(claims, NamespacedStore):
            raise ApiError("the simulated cluster's volumes and claims are read-only")
        for volume, claim in bindings:
            current_volume = volumes.get(volume.name)
            if current_volume is None:
                raise ApiError(f'persistentvolumes "{volume.name}" not found')
            ref = current_volume.claim_ref
            if ref is not None and (ref.namespace, ref.name) != (claim.namespace, claim.name):
                raise ApiError(
                    f'Operation cannot be fulfilled on persistentvolumes "{volume.name}": '
                    f"already bound to claim {ref.namespace}/{ref.name}"
                )
            current_claim = claims.get(claim.namespace, claim.name)
            if current_claim is None:
                raise ApiError(f'persistentvolumeclaims "{claim.name}" not found')
            volumes.update(replace(current_volume, claim_ref=volume.claim_ref, phase="Bound", metadata=volume.metadata))
            claims.update(_bound_claim(current_claim, volume.name))
            self.volume_bindings.append((pod.key, claim.key, volume.name))
        for claim in provisions:
            current_claim = claims.get(claim.namespace, claim.name)
            if current_claim is None:
                raise ApiError(f'persistentvolumeclaims "{claim.name}" not found')
            name = f"pvc-{current_claim.metadata.uid}"
            volumes.add(
                PersistentVolume(
                    metadata=ObjectMeta(name=name, namespace="", uid=object_uid("PersistentVolume", "", name)),
                    capacity=current_claim.storage_request,
                    access_modes=current_claim.access_modes,
                    storage_class_name=current_claim.class_name,
                    volume_mode=current_claim.volume_mode,
                    node_affinity=None,
                    claim_ref=ClaimReference(claim.namespace, claim.name, current_claim.metadata.uid),
                    csi=None,
                    phase="Bound",
                    raw={},
                )
            )
            annotations = {**current_claim.metadata.annotations, ANN_SELECTED_NODE: node_name}
            provisioned = replace(current_claim, metadata=replace(current_claim.metadata, annotations=annotations))
            claims.update(_bound_claim(provisioned, name))
            self.volume_bindings.append((pod.key, claim.key, name))

    def event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        # Kept in the order emitted (the simulate report lists them so); the note is cut as the events API
        # would have it, so the report shows what a live run's event would say.
        self.events.append(
            RecordedEvent(
                pod.metadata.namespace,
                pod.metadata.name,
                event_type,
                reason,
                action,
                truncate_event_message(message),
                self._clock.now(),
                reporting_controller=pod.spec.scheduler_name,
                uid=pod.metadata.uid,
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


def _bound_claim(claim: PersistentVolumeClaim, volume_name: str) -> PersistentVolumeClaim:
    annotations = {**claim.metadata.annotations, ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
    return replace(
        claim, volume_name=volume_name, phase="Bound", metadata=replace(claim.metadata, annotations=annotations)
    )


def _without_scheduled(pod: Pod) -> list[dict[str, Any]]:
    return [c for c in pod.status.conditions if c.get("type") != "PodScheduled"]
