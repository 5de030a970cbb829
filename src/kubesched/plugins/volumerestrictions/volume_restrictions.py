"""VolumeRestrictions (PreFilter, Filter, PreFilterExtensions): volumes only one pod, or one node, may use.

Two rules, as kube-scheduler v1.35 has them:

- **In-tree disk conflicts**, per node: the pod may not go where a pod already uses the same GCE PD (unless
  both mount it read-only), the same AWS EBS volume ID, the same iSCSI IQN (unless both read-only), or the same
  Ceph RBD image (a common monitor, same pool and image; unless both read-only). Filter answers
  ``node(s) had no available disk`` (Unschedulable).
- **ReadWriteOncePod claims**, cluster-wide: PreFilter looks up each claim the pod names (a missing claim is
  ``persistentvolumeclaim "<name>" not found``, UnschedulableAndUnresolvable) and counts how many of its
  ReadWriteOncePod claims a placed (or assumed) pod already uses — upstream's ``IsPVCUsedByPods``, here a
  walk over the snapshot's pods, done only for pods that have such claims. Filter then rejects every node
  with ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by
  another pod`` (Unschedulable, so preemption may evict the holder). AddPod/RemovePod move the count when
  preemption simulates adding or removing pods.

PreFilter returns Skip when the pod has no in-tree disk to check and none of its ReadWriteOncePod claims is in
use. Queueing hints: a pod deleted that held a conflicting disk or one of the pod's claims, a node added, a claim
the pod names added (no backend delivers claim events yet). Who calls it: the framework (built from the
registry for the default profile's preFilter/filter).
The batch Filter loops over the candidates' NodeInfos: conflicts depend on the pods on each node, and the
Skip keeps this path rare.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.api.storage import PersistentVolumeClaim
from kubesched.api.volumes import (
    AWS_EBS_PLUGIN,
    GCE_PD_PLUGIN,
    ISCSI_PLUGIN,
    RBD_PLUGIN,
    InTreeSource,
    PodVolume,
)
from kubesched.errors import ManifestError
from kubesched.framework.cycle_state import CycleState, no_writes
from kubesched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.classes import batch_result, uniform_result
from kubesched.plugins.helper.hints import as_pods
from kubesched.plugins.helper.volumes import PodVolumeReader

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        EnqueueExtensions,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        SkipWrites,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.VOLUME_RESTRICTIONS
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

_DISK_CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT)
_RWOP_CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
_CONFLICT_PLUGINS = frozenset({GCE_PD_PLUGIN, AWS_EBS_PLUGIN, ISCSI_PLUGIN, RBD_PLUGIN})

PVC_ADD = ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD, "PersistentVolumeClaimAdd")
POD_DELETE = ClusterEvent(EventResource.POD, ActionType.DELETE, "PodDelete")
NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")


def not_found_message(claim_name: str) -> str:
    """The text of client-go's NotFound error for a claim, which upstream puts in the status as is."""
    return f'persistentvolumeclaim "{claim_name}" not found'


def conflict_sources(volumes: Iterable[PodVolume]) -> tuple[InTreeSource, ...]:
    """The pod's volumes VolumeRestrictions checks for disk conflicts (``needsRestrictionsCheck``)."""
    return tuple(v.in_tree for v in volumes if v.in_tree is not None and v.in_tree.plugin in _CONFLICT_PLUGINS)


def _conflicts(disk: InTreeSource, other: InTreeSource) -> bool:
    """``isVolumeConflict`` for one pair of in-tree sources."""
    if disk.plugin != other.plugin or disk.ident != other.ident:
        return False
    both_read_only = disk.read_only and other.read_only
    if disk.plugin == AWS_EBS_PLUGIN:
        # An EBS volume attaches to one instance at a time, read-only or not.
        return True
    if disk.plugin == RBD_PLUGIN:
        return disk.pool == other.pool and bool(set(disk.monitors) & set(other.monitors)) and not both_read_only
    return not both_read_only


def has_disk_conflict(disks: Sequence[InTreeSource], existing: Iterable[PodVolume]) -> bool:
    """True if any of ``disks`` conflicts with a volume of a pod whose volumes are ``existing``."""
    others = [v.in_tree for v in existing if v.in_tree is not None]
    return any(_conflicts(disk, other) for disk in disks for other in others)


@dataclass(slots=True)
class _PreFilterState:
    """The pod's in-tree disks, its ReadWriteOncePod claim names, and how many uses of them exist."""

    disks: tuple[InTreeSource, ...]
    rwop_claims: frozenset[str]
    conflicting_refs: int

    def clone(self) -> _PreFilterState:
        # Only the count changes (AddPod/RemovePod); the rest is immutable and shared.
        return _PreFilterState(self.disks, self.rwop_claims, self.conflicting_refs)

    def refs_of(self, volumes: Iterable[PodVolume]) -> int:
        return sum(1 for v in volumes if v.claim_name is not None and v.claim_name in self.rwop_claims)


class VolumeRestrictions:
    """PreFilter/Filter: in-tree disk conflicts on the node and ReadWriteOncePod claims already in use."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args
        self._handle = handle
        self._volumes = PodVolumeReader()

    @property
    def name(self) -> str:
        return names.VOLUME_RESTRICTIONS

    # ---- PreFilter ---------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        try:
            volumes = self._volumes(pod.pod)
        except ManifestError as exc:
            return Status.error(str(exc))
        disks = conflict_sources(volumes)
        claims = self._handle.listers.persistent_volume_claims
        rwop: set[str] = set()
        for volume in volumes:
            if volume.claim_name is None:
                continue
            claim: PersistentVolumeClaim | None = claims.get(pod.namespace, volume.claim_name)
            if claim is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, not_found_message(volume.claim_name))
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(claim.name)
        refs = self._claims_in_use(pod.namespace, rwop, nodes) if rwop else 0
        if not disks and refs == 0:
            return Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(disks, frozenset(rwop), refs))
        return None

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Without VOLUMES: no disks, no claims, so Skip, nothing written.
        return None if shape & PodShape.VOLUMES else no_writes

    def _claims_in_use(self, namespace: str, claims: set[str], nodes: Sequence[NodeInfo]) -> int:
        """How many of ``claims`` some pod in the snapshot uses (each counted once, as ``IsPVCUsedByPods``)."""
        used: set[str] = set()
        for info in nodes:
            for other in info.pods.values():
                if other.namespace != namespace or not other.pod.spec.volumes:
                    continue
                try:
                    volumes = self._volumes(other.pod)
                except ManifestError:
                    # The API server would have refused such a pod; one bad placed pod must not fail every
                    # pod's cycle, so it counts as using no claim.
                    continue
                used.update(v.claim_name for v in volumes if v.claim_name is not None and v.claim_name in claims)
                if len(used) == len(claims):
                    return len(used)
        return len(used)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod_to_add, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod_to_remove, -1)

    def _update(self, state: CycleState, other: PodInfo, multiplier: int) -> Status | None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is None:
            return self._missing_state()
        # By claim name only, as upstream's conflictingPVCRefCountForPod.
        try:
            volumes = self._volumes(other.pod)
        except ManifestError as exc:
            return Status.error(str(exc))
        found.conflicting_refs += multiplier * found.refs_of(volumes)
        return None

    @staticmethod
    def _missing_state() -> Status:
        return Status(Code.ERROR, f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState')

    # ---- Filter ------------------------------------------------------------------------------------

    def _node_status(self, disks: Sequence[InTreeSource], info: NodeInfo) -> Status | None:
        if not disks:
            return None
        for other in info.pods.values():
            if not other.pod.spec.volumes:
                continue
            try:
                volumes = self._volumes(other.pod)
            except ManifestError as exc:
                return Status.error(str(exc))
            if has_disk_conflict(disks, volumes):
                return _DISK_CONFLICT
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is None:
            return self._missing_state()
        status = self._node_status(found.disks, node_info)
        if status is not None:
            return status
        return _RWOP_CONFLICT if found.conflicting_refs > 0 else None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is None:
            return uniform_result(len(nodes), self._missing_state())
        rwop = _RWOP_CONFLICT if found.conflicting_refs > 0 else None
        if not found.disks:
            return uniform_result(len(nodes), rwop)
        return batch_result([self._node_status(found.disks, info) or rwop for info in nodes.infos])

    # ---- queueing hints ----------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            # A conflicting pod's deletion frees its disk or its ReadWriteOncePod claim; spec.volumes is
            # immutable, so pod updates cannot.
            ClusterEventWithHint(POD_DELETE, self.is_schedulable_after_pod_deleted),
            # Any new node may be free of conflicts (with queueing hints on, upstream registers Add only).
            ClusterEventWithHint(NODE_ADD),
            # The claim the pod names may have been missing.
            ClusterEventWithHint(PVC_ADD, self.is_schedulable_after_pvc_added),
        ]

    def is_schedulable_after_pvc_added(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when the added claim is one the pod names (same namespace)."""
        if not isinstance(new, PersistentVolumeClaim):
            return QueueingHint.QUEUE
        if new.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        try:
            volumes = self._volumes(pod)
        except ManifestError:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if any(v.claim_name == new.name for v in volumes) else QueueingHint.SKIP

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when the deleted pod (same namespace) held a disk conflicting with this pod's, or named one of
        its claims (it may have held a ReadWriteOncePod claim; the claim is not fetched, as upstream)."""
        try:
            deleted, _ = as_pods(old, None)
            if deleted is None:
                return QueueingHint.QUEUE
            if deleted.metadata.namespace != pod.metadata.namespace:
                return QueueingHint.SKIP
            mine = self._volumes(pod)
            theirs = self._volumes(deleted)
        except (TypeError, ManifestError):
            return QueueingHint.QUEUE
        if has_disk_conflict(conflict_sources(mine), theirs):
            return QueueingHint.QUEUE
        claims = {v.claim_name for v in mine if v.claim_name is not None}
        if any(v.claim_name in claims for v in theirs if v.claim_name is not None):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


if TYPE_CHECKING:

    def _conforms(plugin: VolumeRestrictions) -> tuple[PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions]:
        return plugin, plugin, plugin

    def _extensions(plugin: VolumeRestrictions) -> PreFilterExtensions:
        return plugin
