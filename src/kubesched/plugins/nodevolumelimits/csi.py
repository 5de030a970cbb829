"""NodeVolumeLimits (PreFilter, Filter): a node may not attach more CSI volumes of a driver than it allows.

kube-scheduler v1.35's ``CSILimits``, built by the framework in the default profile. A volume counts once per
``<driver>/<volume handle>`` on a node: claims (named, or a generic ephemeral volume's) by their bound PV's CSI
driver and handle, or by their class's provisioner while unbound, and in-tree volumes csi-translation-lib can
migrate where the node's CSINode has migration on. Limits are the CSINode's ``allocatable.count``; exceeding one
is ``node(s) exceed max volume count`` (Unschedulable), and a claim the pod names that does not exist is
UnschedulableAndUnresolvable. PreFilter skips pods with no volume that could count; Filter resolves each placed
pod's volumes once per cycle. Not modelled: VolumeAttachments no pod accounts for, and the alpha
VolumeLimitScaling check.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.api.storage import CSINode, PersistentVolumeClaim
from kubesched.api.volumes import (
    AWS_EBS_PLUGIN,
    AZURE_DISK_PLUGIN,
    CINDER_PLUGIN,
    GCE_PD_PLUGIN,
    IN_TREE_CSI_DRIVERS,
    PORTWORX_PLUGIN,
    PodVolume,
    TranslationError,
    pv_in_tree_source,
    translate_in_tree,
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
from kubesched.plugins.helper.classes import batch_result
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
    from kubesched.framework.listers import Listers

PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_VOLUME_LIMITS
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
ERR_CLAIM_WITHOUT_NAME = "PersistentVolumeClaim had no name"

_EXCEEDED = Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
# isCSIMigrationOn: migration of these is GA (on wherever the node has a CSINode); Portworx's needs the
# CSINode's migrated-plugins annotation; every other in-tree plugin counts as not migrated.
_ALWAYS_MIGRATED = frozenset({AWS_EBS_PLUGIN, GCE_PD_PLUGIN, AZURE_DISK_PLUGIN, CINDER_PLUGIN})

CSI_NODE_ADD = ClusterEvent(EventResource.CSI_NODE, ActionType.ADD, "CSINodeAdd")
CSI_NODE_UPDATE = ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE, "CSINodeUpdate")
POD_DELETE = ClusterEvent(EventResource.POD, ActionType.DELETE, "PodDelete")
PVC_ADD = ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD, "PersistentVolumeClaimAdd")


def claim_not_found_message(namespace: str, name: str) -> str:
    """Upstream wraps client-go's NotFound error: ``looking up PVC <ns>/<name>: <error>``."""
    return f'looking up PVC {namespace}/{name}: persistentvolumeclaim "{name}" not found'


def is_csi_migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn``: does this node serve ``plugin``'s volumes through its CSI driver?"""
    if csi_node is None or not plugin:
        return False
    if plugin in _ALWAYS_MIGRATED:
        return True
    if plugin == PORTWORX_PLUGIN:
        return plugin in csi_node.migrated_plugins
    return False


def volume_limits(csi_node: CSINode | None) -> dict[str, int]:
    """``getVolumeLimits``: driver name → ``allocatable.count``, for drivers that report one."""
    if csi_node is None:
        return {}
    return {d.name: d.allocatable_count for d in csi_node.drivers if d.allocatable_count is not None}


def may_count(volume: PodVolume) -> bool:
    """The PreFilter test: a claim, a generic ephemeral volume, or an inline volume csi-translation-lib migrates."""
    return (
        volume.claim_name is not None or volume.ephemeral or (volume.in_tree is not None and volume.in_tree.migratable)
    )


@dataclass(frozen=True, slots=True)
class _Attachable:
    """A volume that counts against ``driver``'s limit, only where ``plugin``'s migration is on if it is set;
    ``error`` (an inline volume csi-translation-lib cannot translate) fails Filter there instead."""

    unique: str
    driver: str
    plugin: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class _Failed:
    """Upstream's filterAttachableVolumes returned an error: this status on every node."""

    status: Status


_Item = _Attachable | _Failed


@dataclass(slots=True)
class _PreFilterState:
    """The pod's resolved volumes and a memo of the other pods' (by UID) for this cycle."""

    items: tuple[_Item, ...]
    others: dict[str, tuple[_Item, ...]] = field(default_factory=dict)

    def clone(self) -> _PreFilterState:
        # The memo is a pure cache of this cycle's listers: copies may share it.
        return self


class CSILimits:
    """PreFilter/Filter: per-driver CSI volume counts stay within the node's CSINode allocatable counts."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args
        self._handle = handle
        self._volumes = PodVolumeReader()
        # Unbound claims get handles under this prefix, so that they never collide with a real volume handle
        # (upstream: rand.String(32)).
        self._random_prefix = secrets.token_hex(16)

    @property
    def name(self) -> str:
        return names.NODE_VOLUME_LIMITS

    # ---- resolving volumes (filterAttachableVolumes, minus the node) -------------------------------

    def _resolve(self, listers: Listers, pod: Pod, volumes: Sequence[PodVolume], new_pod: bool) -> tuple[_Item, ...]:
        items: list[_Item] = []
        namespace = pod.metadata.namespace
        for volume in volumes:
            if volume.claim_name is not None:
                claim_name, ephemeral = volume.claim_name, False
            elif volume.ephemeral:
                claim_name, ephemeral = volume.ephemeral_claim_name(pod), True
            else:
                inline = self._inline(volume)
                if inline is not None:
                    items.append(inline)
                continue
            if not claim_name:
                items.append(_Failed(Status.error(ERR_CLAIM_WITHOUT_NAME)))
                break
            claim = listers.persistent_volume_claims.get(namespace, claim_name)
            if claim is None:
                if new_pod:
                    # The pod cannot run without its claim: no node will do until it exists.
                    message = claim_not_found_message(namespace, claim_name)
                    items.append(_Failed(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)))
                    break
                # A placed pod's missing claim may not be attached at all: not counted.
                continue
            if ephemeral and not _controlled_by(claim, pod):
                message = (
                    f"PVC {claim.namespace}/{claim.name} was not created for pod "
                    f"{namespace}/{pod.metadata.name} (pod is not owner)"
                )
                items.append(_Failed(Status.error(message)))
                break
            found = self._claim_driver(listers, claim)
            if found is not None:
                items.append(found)
        return tuple(items)

    @staticmethod
    def _inline(volume: PodVolume) -> _Attachable | None:
        """checkAttachableInlineVolume, up to the node's migration switch."""
        source = volume.in_tree
        if source is None or not source.migratable:
            return None
        try:
            translated = translate_in_tree(source)
        except TranslationError as exc:
            return _Attachable("", "", source.plugin, f"converting volume({volume.name}) from inline to csi: {exc}")
        if translated is None:
            return None
        driver, handle = translated
        return _Attachable(f"{driver}/{handle}", driver, source.plugin)

    def _claim_driver(self, listers: Listers, claim: PersistentVolumeClaim) -> _Attachable | None:
        """getCSIDriverInfo: the bound PV's CSI source (translated if in-tree), else the class's provisioner."""
        pv = listers.persistent_volumes.get(claim.volume_name) if claim.volume_name else None
        if pv is None:
            # Unbound, or bound to a PV not (yet) known: count it under its class, as upstream.
            return self._class_driver(listers, claim)
        if pv.csi is not None:
            if not pv.csi.driver or not pv.csi.volume_handle:
                return None
            return _Attachable(f"{pv.csi.driver}/{pv.csi.volume_handle}", pv.csi.driver)
        try:
            source = pv_in_tree_source(pv)
            translated = translate_in_tree(source, pv.metadata.labels) if source is not None else None
        except (ManifestError, TranslationError):
            # Upstream logs and does not count a PV it cannot translate.
            return None
        if source is None or translated is None:
            return None
        driver, handle = translated
        return _Attachable(f"{driver}/{handle}", driver, source.plugin)

    def _class_driver(self, listers: Listers, claim: PersistentVolumeClaim) -> _Attachable | None:
        """getCSIDriverInfoFromSC: a claim without a class (or with a missing one) must bind before scheduling
        (Immediate mode), so it is not counted."""
        class_name = claim.class_name
        if not class_name:
            return None
        storage_class = listers.storage_classes.get(class_name)
        if storage_class is None:
            return None
        handle = f"{self._random_prefix}-{claim.namespace}/{claim.name}"
        provisioner = storage_class.provisioner
        if provisioner in IN_TREE_CSI_DRIVERS:
            driver = IN_TREE_CSI_DRIVERS[provisioner]
            return _Attachable(f"{driver}/{handle}", driver, provisioner)
        if not provisioner:
            return None
        return _Attachable(f"{provisioner}/{handle}", provisioner)

    # ---- PreFilter / Filter ------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        try:
            volumes = self._volumes(pod.pod)
        except ManifestError as exc:
            return Status.error(str(exc))
        if not any(may_count(v) for v in volumes):
            return Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(self._resolve(self._handle.listers, pod.pod, volumes, True)))
        return None

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Without VOLUMES nothing may count against a limit: Skip, nothing written.
        return None if shape & PodShape.VOLUMES else no_writes

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _state(self, state: CycleState, pod: PodInfo) -> _PreFilterState | Status:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is not None:
            return found
        # Filter without this plugin's PreFilter (a config that disables it): resolve here.
        try:
            volumes = self._volumes(pod.pod)
        except ManifestError as exc:
            return Status.error(str(exc))
        return _PreFilterState(self._resolve(self._handle.listers, pod.pod, volumes, True))

    def _other(self, found: _PreFilterState, other: PodInfo) -> tuple[_Item, ...] | Status:
        items = found.others.get(other.uid)
        if items is None:
            try:
                volumes = self._volumes(other.pod)
            except ManifestError as exc:
                return Status.error(str(exc))
            items = self._resolve(self._handle.listers, other.pod, volumes, False)
            found.others[other.uid] = items
        return items

    def _node_status(self, found: _PreFilterState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if not pod.pod.spec.volumes:
            return None
        csi_node = self._handle.listers.csi_nodes.get(node_info.name)
        wanted: dict[str, str] = {}
        failed = _collect(found.items, csi_node, wanted)
        if failed is not None:
            return failed
        if not wanted:
            return None
        limits = volume_limits(csi_node)
        if not limits:
            return None
        attached: dict[str, str] = {}
        for other in node_info.pods.values():
            if not other.pod.spec.volumes:
                continue
            items = self._other(found, other)
            if isinstance(items, Status):
                return items
            failed = _collect(items, csi_node, attached)
            if failed is not None:
                return failed
        in_use: dict[str, int] = {}
        for unique, driver in attached.items():
            # A volume another pod on the node already uses attaches no second time.
            wanted.pop(unique, None)
            in_use[driver] = in_use.get(driver, 0) + 1
        adding: dict[str, int] = {}
        for driver in wanted.values():
            adding[driver] = adding.get(driver, 0) + 1
        for driver, count in adding.items():
            limit = limits.get(driver)
            if limit is not None and in_use.get(driver, 0) + count > limit:
                return _EXCEEDED
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        found = self._state(state, pod)
        if isinstance(found, Status):
            return found
        return self._node_status(found, pod, node_info)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        found = self._state(state, pod)
        if isinstance(found, Status):
            return batch_result([found] * len(nodes))
        return batch_result([self._node_status(found, pod, info) for info in nodes.infos])

    # ---- queueing hints ----------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            # Any new CSINode may raise a limit (no hint, as upstream).
            ClusterEventWithHint(CSI_NODE_ADD),
            ClusterEventWithHint(CSI_NODE_UPDATE, self.is_schedulable_after_csi_node_updated),
            ClusterEventWithHint(POD_DELETE, self.is_schedulable_after_pod_deleted),
            ClusterEventWithHint(PVC_ADD, self.is_schedulable_after_pvc_added),
        ]

    def is_schedulable_after_csi_node_updated(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when some driver's allocatable count went up (an unset count reads as 0, as upstream)."""
        if not isinstance(old, CSINode) or not isinstance(new, CSINode):
            return QueueingHint.QUEUE
        before = {d.name: d.allocatable_count or 0 for d in old.drivers}
        for driver in new.drivers:
            if (driver.allocatable_count or 0) > before.get(driver.name, 0):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when the deleted pod was placed and had a volume that may have counted."""
        try:
            deleted, _ = as_pods(old, None)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None:
            return QueueingHint.QUEUE
        if not deleted.spec.volumes or not deleted.spec.node_name:
            return QueueingHint.SKIP
        try:
            volumes = self._volumes(deleted)
        except ManifestError:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if any(may_count(v) for v in volumes) else QueueingHint.SKIP

    def is_schedulable_after_pvc_added(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when the added claim is one the pod names or one of its ephemeral volumes' claims."""
        if not isinstance(new, PersistentVolumeClaim):
            return QueueingHint.QUEUE
        if new.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        try:
            volumes = self._volumes(pod)
        except ManifestError:
            return QueueingHint.QUEUE
        for volume in volumes:
            if volume.claim_name is not None:
                claim_name = volume.claim_name
            elif volume.ephemeral:
                claim_name = volume.ephemeral_claim_name(pod)
            else:
                continue
            if claim_name == new.name:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _controlled_by(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    """component-helpers ``ephemeral.VolumeIsForPod``: same namespace, and the claim's controller is the pod."""
    if claim.namespace != pod.metadata.namespace:
        return False
    controller = next((ref for ref in claim.metadata.owner_references if ref.controller), None)
    return controller is not None and controller.uid == pod.metadata.uid


def _collect(items: Sequence[_Item], csi_node: CSINode | None, into: dict[str, str]) -> Status | None:
    """Add the volumes that count on this node to ``into`` (unique name → driver); the first failure stops."""
    for item in items:
        if isinstance(item, _Failed):
            return item.status
        if item.plugin and not is_csi_migration_on(csi_node, item.plugin):
            continue
        if item.error:
            return Status.error(item.error)
        into[item.unique] = item.driver
    return None


if TYPE_CHECKING:

    def _conforms(plugin: CSILimits) -> tuple[PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions]:
        return plugin, plugin, plugin
