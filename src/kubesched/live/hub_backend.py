"""The backend of the live hub's cluster plane: member clusters as nodes, the hub's pods of the cluster profiles.

Who calls it: :class:`kubesched.live.hub.HubPlane` builds one :class:`HubBackend` for the scheduler of the
cluster profiles. It is the kube backend (same writers, same ``bind``: ``POST pods/NAME/binding`` with the
cluster's name as the target -- kube-apiserver takes a ``nodeName`` no Node has) with other informers:

* no Node watch: the nodes are :class:`SuperNodes`, one per MemberCluster, built by
  :func:`kubesched.federation.adapter.super_node` from the MemberCluster (labels, annotations, taints) and the
  cluster state cache's state of it (allocatable), plus the placeholder pod of its allocated capacity
  (:func:`~kubesched.federation.adapter.allocated_pod`). They are recomputed whenever the MemberCluster changes
  or the cache has refreshed the member, and the scheduler is told only what changed, as node add / update /
  delete and placeholder pod add / update / delete events, so the queue's requeueing works as on real nodes;
* pods: per cluster profile, its unassigned pods and its assigned ones (the hub pods bound to clusters, in
  flight until the member's state counts them) -- never the hub's other pods, which the node plane schedules;
* the listers' kinds as in the node plane (a cluster profile may spread or select by them).

A hub pod bound to a cluster that is being deleted (it has a ``deletionTimestamp``: a bound pod is deleted
gracefully, and no kubelet will ever confirm it) or is deleted is also handed to ``on_hub_pod_gone``, after the
scheduler has heard of it, so the hub can have the member delete the pod it made for it.

The super node carries a ``Ready`` condition (the member's readiness, ``Unknown`` while its refreshes fail). No
plugin reads it; it is there so that a member turning ready, or answering again after failing, is a node
update (UPDATE_NODE_CONDITION) that requeues the pods ClusterReadiness turned away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kubesched.api.multicluster import MemberCluster
from kubesched.api.objects import Node, Pod
from kubesched.backends.base import ClusterEventHandler
from kubesched.backends.kube.backend import KubeBackend
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.informers import Informers, assigned_pods_of
from kubesched.backends.kube.reflector import Reflector
from kubesched.clock import Clock
from kubesched.clusterapi.contract import ClusterState
from kubesched.federation.adapter import allocated_pod, super_node
from kubesched.federation.cache import NOT_YET_OBSERVED, ClusterStateCache
from kubesched.framework.events import ActionType, EventResource

__all__ = ["HubBackend", "SuperNodes"]

log = logging.getLogger(__name__)


def _ready_condition(state: ClusterState, failing: bool) -> dict[str, str]:
    if failing:
        return {"type": "Ready", "status": "Unknown", "reason": "RefreshFailing"}
    if state.ready:
        return {"type": "Ready", "status": "True", "reason": "MemberReady"}
    return {"type": "Ready", "status": "False", "reason": "MemberNotReady"}


class SuperNodes:
    """The super nodes and placeholder pods of the members (module doc), kept as events for one handler."""

    def __init__(self, cache: ClusterStateCache) -> None:
        self.cache = cache
        self.members: dict[str, MemberCluster] = {}
        self.nodes: dict[str, Node] = {}
        self.placeholders: dict[str, Pod] = {}
        self._handler: ClusterEventHandler | None = None

    def attach(self, handler: ClusterEventHandler) -> None:
        self._handler = handler
        for node in self.nodes.values():
            handler.on_node_add(node)
        for pod in self.placeholders.values():
            handler.on_pod_add(pod)

    def member_changed(self, member: MemberCluster) -> None:
        self.members[member.name] = member
        self.recompute(member.name)

    def member_removed(self, name: str) -> None:
        self.members.pop(name, None)
        self.recompute(name)

    def recompute(self, name: str) -> None:
        """Derive the member's super node and placeholder again; tell the handler what changed."""
        member = self.members.get(name)
        node: Node | None = None
        placeholder: Pod | None = None
        if member is not None:
            state = self.cache.states.get(name) or ClusterState(name=name, ready=False, ready_reason=NOT_YET_OBSERVED)
            failing = name in self.cache and self.cache.health(name).consecutive_failures > 0
            built = super_node(member, state)
            raw: dict[str, Any] = dict(built.raw)
            raw["status"] = {**raw["status"], "conditions": [_ready_condition(state, failing)]}
            node = Node.from_dict(raw, f"MemberCluster {name}")
            placeholder = allocated_pod(state)
        self._apply_node(name, node)
        self._apply_placeholder(name, placeholder)

    def _apply_node(self, name: str, node: Node | None) -> None:
        old = self.nodes.get(name)
        handler = self._handler
        if node is None:
            if old is not None:
                del self.nodes[name]
                if handler is not None:
                    handler.on_node_delete(old)
            return
        if old is not None and old.raw == node.raw:
            return
        self.nodes[name] = node
        if handler is None:
            return
        if old is None:
            handler.on_node_add(node)
        else:
            handler.on_node_update(old, node)

    def _apply_placeholder(self, name: str, pod: Pod | None) -> None:
        old = self.placeholders.get(name)
        handler = self._handler
        if pod is None:
            if old is not None:
                del self.placeholders[name]
                if handler is not None:
                    handler.on_pod_delete(old)
            return
        if old is not None and old.manifest == pod.manifest:
            return
        self.placeholders[name] = pod
        if handler is None:
            return
        if old is None:
            handler.on_pod_add(pod)
        else:
            handler.on_pod_update(old, pod)


class _DeletionWatch:
    """The scheduler's handler; a pod bound to a known cluster that is terminating or deleted also goes to
    ``on_gone`` with whether it is deleted (a terminating one seen at the first list too: deleted while no hub
    ran)."""

    def __init__(
        self,
        handler: ClusterEventHandler,
        super_nodes: SuperNodes,
        on_gone: Callable[[Pod, bool], None],
        pods: dict[str, Pod],
    ) -> None:
        self.handler = handler
        self.super_nodes = super_nodes
        self.on_gone = on_gone
        self.pods = pods

    def on_node_add(self, node: Node) -> None:
        self.handler.on_node_add(node)

    def on_node_update(self, old: Node, new: Node) -> None:
        self.handler.on_node_update(old, new)

    def on_node_delete(self, node: Node) -> None:
        self.handler.on_node_delete(node)

    def _on_cluster(self, pod: Pod) -> bool:
        return bool(pod.spec.node_name) and pod.spec.node_name in self.super_nodes.members

    def on_pod_add(self, pod: Pod) -> None:
        self.pods[pod.metadata.uid] = pod
        self.handler.on_pod_add(pod)
        if pod.metadata.deletion_timestamp is not None and self._on_cluster(pod):
            self.on_gone(pod, False)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.pods[new.metadata.uid] = new
        self.handler.on_pod_update(old, new)
        terminating = new.metadata.deletion_timestamp is not None and old.metadata.deletion_timestamp is None
        if terminating and self._on_cluster(new):
            self.on_gone(new, False)

    def on_pod_delete(self, pod: Pod) -> None:
        self.pods.pop(pod.metadata.uid, None)
        self.handler.on_pod_delete(pod)
        if self._on_cluster(pod):
            self.on_gone(pod, True)

    def on_object_event(self, resource: EventResource, action: ActionType, old: object, new: object) -> None:
        self.handler.on_object_event(resource, action, old, new)


class HubBackend(KubeBackend):
    """The kube backend with member clusters for nodes (module doc). ``extra``: more reflectors to run with the
    informers (the hub's MemberCluster watch), built from the informers' options."""

    def __init__(
        self,
        client: KubeClient,
        scheduler_names: list[str],
        super_nodes: SuperNodes,
        *,
        extra: Callable[[dict[str, Any]], Sequence[Reflector[Any]]],
        clock: Clock | None = None,
        hostname: str | None = None,
        watch_timeout: tuple[int, int] | None = None,
        on_hub_pod_gone: Callable[[Pod, bool], None] | None = None,
    ) -> None:
        super().__init__(client, scheduler_names, clock=clock, hostname=hostname, watch_timeout=watch_timeout)
        self.super_nodes = super_nodes
        self._extra = extra
        self._on_hub_pod_gone = on_hub_pod_gone
        self.hub_pods: dict[str, Pod] = {}
        """The cluster profiles' hub pods as the informers have them, by uid (with ``on_hub_pod_gone`` only)."""

    def subscribe(self, handler: ClusterEventHandler) -> None:
        if self.informers is not None:
            raise RuntimeError("the hub backend serves one scheduler")
        self.super_nodes.attach(handler)
        pods: ClusterEventHandler = handler
        if self._on_hub_pod_gone is not None:
            pods = _DeletionWatch(handler, self.super_nodes, self._on_hub_pod_gone, self.hub_pods)
        self.informers = Informers(
            self.client,
            self.scheduler_names,
            self.stores,
            pods,
            self._on_invalid,
            watch_timeout=self._watch_timeout,
            nodes=False,
            assigned_selectors=[assigned_pods_of(name) for name in self.scheduler_names],
            extra=self._extra,
        )
