"""The scheduler cache: every node and every assigned pod, plus pods assumed but not yet bound.

Fed by the backend's informer events (``add_node``, ``add_pod`` ...) and by the scheduling cycle
(``assume_pod`` before binding, ``finish_binding`` / ``forget_pod`` after). Assumed pods never expire,
as in kube-scheduler since 1.25. Every NodeInfo change is mirrored into the columnar NodeTable, and the
node order is kube-scheduler's zone-interleaved node tree, which drives the round-robin search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.framework.node_table import NodeTable
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo, zone_key


@dataclass(slots=True)
class _PodState:
    pod_info: PodInfo
    node_name: str
    assumed: bool
    binding_finished: bool = False


class Cache:
    """Nodes and assigned pods, incrementally aggregated; hands out cycle snapshots."""

    def __init__(self) -> None:
        self.table = NodeTable()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        # Pods reported on a node the cache has not seen yet (informers race); applied when it arrives.
        self._orphans: dict[str, dict[str, PodInfo]] = {}
        self._zones: dict[str, list[str]] = {}
        self._image_nodes: dict[str, int] = {}
        self._snapshot: Snapshot | None = None
        self._nodes_version = 0

    # ---- nodes -------------------------------------------------------------------------------

    def add_node(self, node: Node) -> NodeInfo:
        existing = self._nodes.get(node.metadata.name)
        if existing is not None:
            return self.update_node(node)
        info = NodeInfo(node, self.table.allocate_slot())
        self._nodes[info.name] = info
        self._zones.setdefault(zone_key(node.metadata.labels), []).append(info.name)
        self._count_images(info, +1)
        for pod_info in self._orphans.pop(info.name, {}).values():
            info.add_pod(pod_info)
        self.table.sync(info, node_changed=True)
        self._invalidate()
        return info

    def update_node(self, node: Node) -> NodeInfo:
        info = self._nodes.get(node.metadata.name)
        if info is None:
            return self.add_node(node)
        old_zone = zone_key(info.node.metadata.labels)
        new_zone = zone_key(node.metadata.labels)
        self._count_images(info, -1)
        info.set_node(node)
        self._count_images(info, +1)
        if old_zone != new_zone:
            self._zones[old_zone].remove(info.name)
            if not self._zones[old_zone]:
                del self._zones[old_zone]
            self._zones.setdefault(new_zone, []).append(info.name)
        self.table.sync(info, node_changed=True)
        self._invalidate()
        return info

    def remove_node(self, name: str) -> NodeInfo | None:
        info = self._nodes.pop(name, None)
        if info is None:
            return None
        zone = zone_key(info.node.metadata.labels)
        self._zones[zone].remove(name)
        if not self._zones[zone]:
            del self._zones[zone]
        self._count_images(info, -1)
        # Pods still on a removed node stay known (their delete events come separately).
        if info.pods:
            self._orphans[name] = dict(info.pods)
        self.table.release_slot(info.slot)
        self._invalidate()
        return info

    def _count_images(self, info: NodeInfo, delta: int) -> None:
        for image in info.image_sizes:
            count = self._image_nodes.get(image, 0) + delta
            if count > 0:
                self._image_nodes[image] = count
            else:
                self._image_nodes.pop(image, None)

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    @property
    def node_count(self) -> int:
        return len(self._nodes)

    def _invalidate(self) -> None:
        self._snapshot = None
        self._nodes_version += 1

    # ---- pods --------------------------------------------------------------------------------

    def _place(self, pod_info: PodInfo, node_name: str) -> None:
        info = self._nodes.get(node_name)
        if info is None:
            self._orphans.setdefault(node_name, {})[pod_info.uid] = pod_info
            return
        info.add_pod(pod_info)
        self.table.sync(info, node_changed=False)

    def _unplace(self, uid: str, node_name: str) -> None:
        info = self._nodes.get(node_name)
        if info is None:
            self._orphans.get(node_name, {}).pop(uid, None)
            return
        info.remove_pod(uid)
        self.table.sync(info, node_changed=False)

    def assume_pod(self, pod_info: PodInfo, node_name: str) -> PodInfo:
        """Account for the pod on ``node_name`` now, before it is bound; returns the assumed copy."""
        if pod_info.uid in self._pods:
            raise ValueError(f"pod {pod_info.key} is in the cache, so can't be assumed")
        assumed = pod_info.with_node(node_name)
        self._pods[assumed.uid] = _PodState(assumed, node_name, assumed=True)
        self._place(assumed, node_name)
        return assumed

    def finish_binding(self, uid: str) -> None:
        state = self._pods.get(uid)
        if state is not None and state.assumed:
            state.binding_finished = True

    def forget_pod(self, uid: str) -> None:
        """Undo ``assume_pod`` after a failed Reserve, Permit, PreBind or Bind."""
        state = self._pods.get(uid)
        if state is None or not state.assumed:
            return
        del self._pods[uid]
        self._unplace(uid, state.node_name)

    def is_assumed(self, uid: str) -> bool:
        state = self._pods.get(uid)
        return state is not None and state.assumed

    def add_pod(self, pod: Pod) -> PodInfo:
        """An assigned pod seen by the informer: confirms an assumed pod or adds a new one."""
        uid = pod.metadata.uid
        state = self._pods.get(uid)
        pod_info = PodInfo(pod)
        if state is not None:
            self._unplace(uid, state.node_name)
        self._pods[uid] = _PodState(pod_info, pod.spec.node_name, assumed=False)
        self._place(pod_info, pod.spec.node_name)
        return pod_info

    def remove_pod(self, pod: Pod) -> PodInfo | None:
        state = self._pods.pop(pod.metadata.uid, None)
        if state is None:
            return None
        self._unplace(pod.metadata.uid, state.node_name)
        return state.pod_info

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_pod_count(self) -> int:
        return sum(1 for state in self._pods.values() if state.assumed)

    # ---- snapshots ---------------------------------------------------------------------------

    def node_order(self) -> list[str]:
        """kube-scheduler's node tree: the 1st node of every zone, then the 2nd of every zone, ..."""
        order: list[str] = []
        zones = list(self._zones.values())
        depth = max((len(names) for names in zones), default=0)
        for i in range(depth):
            for names in zones:
                if i < len(names):
                    order.append(names[i])
        return order

    def snapshot(self) -> Snapshot:
        """The cycle's view; rebuilt only when the set of nodes changed (aggregates are live)."""
        if self._snapshot is None:
            infos = [self._nodes[name] for name in self.node_order()]
            slots = np.fromiter((info.slot for info in infos), dtype=np.int64, count=len(infos))
            self._snapshot = Snapshot(infos, self.table, slots, self._image_nodes, self._nodes_version)
        return self._snapshot
