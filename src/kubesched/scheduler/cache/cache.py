"""The scheduler cache: every node and every assigned pod, plus pods assumed but not yet bound.

Fed by the informer event handlers (``add_node``, ``add_pod`` ...) and by the scheduling and binding
cycles (``assume_pod`` before binding, ``finish_binding`` / ``forget_pod`` after). Assumed pods never
expire, as in kube-scheduler since 1.25. Every mutation of a NodeInfo stamps it with the next value of a
global generation counter; :meth:`Cache.update_snapshot` brings a :class:`Snapshot` up to date by copying
only the NodeInfos stamped after the snapshot's generation (kube-scheduler's ``UpdateSnapshot``), so a
cycle costs what changed, not the size of the cluster. A confirmed bind that only swaps a PodInfo for an
equivalent one is noted apart: the snapshot takes the new PodInfos without the node counting as changed. The
node order is kube-scheduler's zone-interleaved node tree, which drives the round-robin search.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.api.objects import Node, Pod
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo, zone_key


@dataclass(slots=True)
class _PodState:
    pod_info: PodInfo
    node_name: str
    assumed: bool
    binding_finished: bool = False


class _Slots:
    """Row numbers for the columnar tables: a node keeps its slot for life; freed slots are reused."""

    __slots__ = ("_free", "_next")

    def __init__(self) -> None:
        self._free: list[int] = []
        self._next = 0

    def allocate(self) -> int:
        if self._free:
            return self._free.pop()
        slot = self._next
        self._next += 1
        return slot

    def release(self, slot: int) -> None:
        self._free.append(slot)


class Cache:
    """Nodes and assigned pods, incrementally aggregated; brings cycle snapshots up to date."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        # Pods reported on a node the cache has not seen yet (informers race); applied when it arrives.
        self._orphans: dict[str, dict[str, PodInfo]] = {}
        self._zones: dict[str, list[str]] = {}
        self._image_nodes: dict[str, int] = {}
        self._slots = _Slots()
        self._generation = 0
        # Node names in the order they were last changed (a dict keeps insertion order; re-inserting moves a
        # name to the end), so an update walks back from the newest change to the snapshot's generation.
        self._recent: dict[str, None] = {}
        # Node names whose pods were swapped for equivalent PodInfos (a confirmed bind), oldest first, with the
        # generation of the last swap: a snapshot takes the new PodInfos without copying the node's aggregates
        # or logging a change to the table's readers, which would recompute a node that did not change.
        self._swapped: dict[str, int] = {}
        self._removed_at = 0  # generation of the last node removal
        self._order_changed_at = 0  # ... of the last change to the node tree (add, remove, zone change)
        self._images_changed_at = 0  # ... of the last change to the image spread
        self._own_snapshot: Snapshot | None = None

    def _touch(self, info: NodeInfo) -> None:
        self._generation += 1
        info.generation = self._generation
        self._recent.pop(info.name, None)
        self._recent[info.name] = None

    def _note_swap(self, info: NodeInfo) -> None:
        self._generation += 1
        self._swapped.pop(info.name, None)
        self._swapped[info.name] = self._generation

    # ---- nodes -------------------------------------------------------------------------------

    def add_node(self, node: Node) -> NodeInfo:
        existing = self._nodes.get(node.metadata.name)
        if existing is not None:
            return self.update_node(node)
        info = NodeInfo(node, self._slots.allocate())
        self._nodes[info.name] = info
        self._zones.setdefault(zone_key(node.metadata.labels), []).append(info.name)
        for pod_info in self._orphans.pop(info.name, {}).values():
            info.add_pod(pod_info)
        self._touch(info)
        self._order_changed_at = self._generation
        if info.image_sizes:
            self._count_images(info, +1)
        return info

    def update_node(self, node: Node) -> NodeInfo:
        info = self._nodes.get(node.metadata.name)
        if info is None:
            return self.add_node(node)
        old_zone = zone_key(info.node.metadata.labels)
        new_zone = zone_key(node.metadata.labels)
        old_images = info.image_sizes
        info.set_node(node)
        self._touch(info)
        if info.image_sizes.keys() != old_images.keys():
            self._count_images_of(old_images, -1)
            self._count_images(info, +1)
        if old_zone != new_zone:
            self._zones[old_zone].remove(info.name)
            if not self._zones[old_zone]:
                del self._zones[old_zone]
            self._zones.setdefault(new_zone, []).append(info.name)
            self._order_changed_at = self._generation
        return info

    def remove_node(self, name: str) -> NodeInfo | None:
        info = self._nodes.pop(name, None)
        if info is None:
            return None
        zone = zone_key(info.node.metadata.labels)
        self._zones[zone].remove(name)
        if not self._zones[zone]:
            del self._zones[zone]
        # Pods still on a removed node stay known (their delete events come separately).
        if info.pods:
            self._orphans[name] = dict(info.pods)
        self._slots.release(info.slot)
        self._recent.pop(name, None)
        self._swapped.pop(name, None)
        self._generation += 1
        self._removed_at = self._order_changed_at = self._generation
        if info.image_sizes:
            self._count_images(info, -1)
        return info

    def _count_images(self, info: NodeInfo, delta: int) -> None:
        self._count_images_of(info.image_sizes, delta)

    def _count_images_of(self, images: dict[str, int], delta: int) -> None:
        for image in images:
            count = self._image_nodes.get(image, 0) + delta
            if count > 0:
                self._image_nodes[image] = count
            else:
                self._image_nodes.pop(image, None)
        self._images_changed_at = self._generation

    def node(self, name: str) -> NodeInfo | None:
        """The live NodeInfo (changes under you; cycles read the snapshot instead)."""
        return self._nodes.get(name)

    @property
    def node_count(self) -> int:
        return len(self._nodes)

    @property
    def generation(self) -> int:
        return self._generation

    # ---- pods --------------------------------------------------------------------------------

    def _place(self, pod_info: PodInfo, node_name: str) -> None:
        info = self._nodes.get(node_name)
        if info is None:
            self._orphans.setdefault(node_name, {})[pod_info.uid] = pod_info
            return
        info.add_pod(pod_info)
        self._touch(info)

    def _unplace(self, uid: str, node_name: str) -> None:
        info = self._nodes.get(node_name)
        if info is None:
            self._orphans.get(node_name, {}).pop(uid, None)
            return
        info.remove_pod(uid)
        self._touch(info)

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
        # Confirming an assumed pod: its PodInfo holds for the bound version unless a derived-from field moved.
        rebound = state.pod_info.rebound(pod) if state is not None and state.assumed else None
        if rebound is not None and state is not None and state.node_name == pod.spec.node_name:
            # On the node it was assumed on, with the same requests, ports and terms: the node's aggregates stay
            # as they are; only the PodInfo is swapped. When what the per-node counts read of a pod is the same
            # too, snapshots take the new PodInfo without the node counting as changed.
            info = self._nodes.get(state.node_name)
            if info is not None and info.replace_pod(rebound):
                self._pods[uid] = _PodState(rebound, state.node_name, assumed=False)
                if _counted_alike(state.pod_info.pod, pod):
                    self._note_swap(info)
                else:
                    self._touch(info)
                return rebound
        pod_info = rebound or PodInfo(pod)
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

    def update_snapshot(self, snapshot: Snapshot) -> int:
        """Bring ``snapshot`` to the cache's generation; returns how many NodeInfos were copied."""
        since = snapshot.generation
        if since == self._generation:
            return 0
        if self._removed_at > since:
            self._prune(snapshot)
        changed: list[NodeInfo] = []
        for name in reversed(self._recent):
            info = self._nodes[name]
            if info.generation <= since:
                break
            changed.append(info)
        table = snapshot.table
        by_name = snapshot.by_name
        # A node removed and re-added under its name moved to a new slot; clear every old slot first so that
        # a slot reused by another node in this same update is never cleared after it was written.
        for info in changed:
            old = by_name.get(info.name)
            if old is not None and old.slot != info.slot and table.infos[old.slot] is old:
                table.clear(old.slot)
        positions_stale = self._order_changed_at > since
        for info in changed:
            old = by_name.get(info.name)
            copy = info.clone()
            by_name[info.name] = copy
            table.sync(copy, node_changed=old is None or old.node is not info.node or old.slot != info.slot)
            if not positions_stale and old is not None:
                # Same node tree: the copy takes its predecessor's place in the ordered list.
                snapshot.node_infos[int(snapshot.position_of_slot[old.slot])] = copy
        for name, swapped_at in reversed(self._swapped.items()):
            if swapped_at <= since:
                break
            info = self._nodes[name]
            old = by_name.get(name)
            if info.generation > since or old is None or old.slot != info.slot:
                continue  # copied whole above
            copy = old.with_pods_of(info)
            by_name[name] = copy
            table.replace_info(copy)
            if not positions_stale:
                snapshot.node_infos[int(snapshot.position_of_slot[old.slot])] = copy
        if positions_stale:
            snapshot.node_infos = [by_name[name] for name in self.node_order()]
            snapshot.set_order(snapshot.node_infos)
        if self._images_changed_at > since:
            snapshot.image_node_counts = dict(self._image_nodes)
        snapshot.generation = self._generation
        return len(changed)

    def _prune(self, snapshot: Snapshot) -> None:
        for name in [name for name in snapshot.by_name if name not in self._nodes]:
            gone = snapshot.by_name.pop(name)
            if snapshot.table.infos[gone.slot] is gone:
                snapshot.table.clear(gone.slot)

    def snapshot(self) -> Snapshot:
        """A snapshot of the cache as it is now (kept and updated in place on every call: tests, tools)."""
        if self._own_snapshot is None:
            self._own_snapshot = Snapshot()
        self.update_snapshot(self._own_snapshot)
        return self._own_snapshot


def _counted_alike(assumed: Pod, bound: Pod) -> bool:
    """Whether the per-node counts kept across cycles (PodTopologySpread's matching pods, InterPodAffinity's
    terms) see ``bound`` as they saw ``assumed``: its labels and whether it is terminating, beyond the spec
    fields :meth:`PodInfo.rebound` already holds equal."""
    old, new = assumed.metadata, bound.metadata
    return (old.labels is new.labels or old.labels == new.labels) and old.deletion_timestamp == new.deletion_timestamp
