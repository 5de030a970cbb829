"""The pod nominator: which pending pods are nominated to which node, kept beside the scheduling queue.

A pod is nominated when preemption makes room for it on a node (its ``status.nominatedNodeName``), or
when it arrives with a nomination already set. Until it is bound, Filter on that node runs "as if" the
nominated pods of at least the same priority were already there
(:meth:`~kubesched.framework.runtime.framework.Framework.run_filter_plugins_with_nominated_pods`), so the
room is not given away. The event handlers and the failure handler write here; the framework reads it
through its Handle, as kube-scheduler's ``PodNominator`` lives with its queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kubesched.framework.types import PodInfo


class PodNominator:
    """Nominated pods by node, and each nominated pod's node."""

    __slots__ = ("_by_node", "_generation", "_node_generation", "_node_of")

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        # A stamp per node with nominated pods, from one counter: DefaultPreemption's columnar dry run keeps
        # what each node's nominated pods request and recomputes a node only when its stamp moved.
        self._node_generation: dict[str, int] = {}
        self._generation = 0

    def _changed(self, node_name: str) -> None:
        self._generation += 1
        self._node_generation[node_name] = self._generation

    def add_nominated_pod(self, pod: PodInfo, node_name: str) -> None:
        self.delete_nominated_pod_if_exists(pod.uid)
        if not node_name:
            return
        self._by_node.setdefault(node_name, {})[pod.uid] = pod
        self._node_of[pod.uid] = node_name
        self._changed(node_name)

    def delete_nominated_pod_if_exists(self, uid: str) -> None:
        node_name = self._node_of.pop(uid, None)
        if node_name is None:
            return
        pods = self._by_node[node_name]
        del pods[uid]
        if pods:
            self._changed(node_name)
        else:
            del self._by_node[node_name]
            del self._node_generation[node_name]

    def update_nominated_pod(self, pod: PodInfo) -> None:
        node_name = self._node_of.get(pod.uid)
        if node_name is not None:
            self._by_node[node_name][pod.uid] = pod
            self._changed(node_name)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self._by_node.get(node_name, {}).values())

    def nominated_node_names(self) -> frozenset[str]:
        return frozenset(self._by_node)

    def node_generations(self) -> Mapping[str, int]:
        return MappingProxyType(self._node_generation)

    def node_of(self, uid: str) -> str | None:
        return self._node_of.get(uid)

    def __bool__(self) -> bool:
        return bool(self._node_of)
