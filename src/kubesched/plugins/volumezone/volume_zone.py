"""VolumeZone (PreFilter, Filter), kube-scheduler v1.35: a node must be in the zone/region of the pod's volumes.

Built by the framework from the registry; in the default profile, right after VolumeBinding. PreFilter reads,
for every ``persistentVolumeClaim`` volume of the pod (generic ephemeral volumes are not looked at, as
upstream), the bound volume's zone and region labels — ``topology.kubernetes.io/{zone,region}`` and their
``failure-domain.beta.kubernetes.io`` forerunners, a value being a ``__``-separated set of zones
(``LabelZonesToSet``; a value with an empty member is ignored). An unbound claim of a WaitForFirstConsumer
class is skipped (VolumeBinding picks its volume); other unbound claims, missing claims, classes and volumes
reject the pod, UnschedulableAndUnresolvable, with upstream's texts. No labels at all: Skip.

Filter passes a node that has none of the four labels (single-zone clusters) and otherwise requires, for every
volume label, the node's label of that key (or, for a beta key, of its GA key) to be one of the volume's
values; failing that, ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable).

The batch form is a loop over the candidates' labels: PreFilter's Skip keeps it off most pods' path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.framework.cycle_state import CycleState, no_writes
from kubesched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kubesched.framework.listers import Listers
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.classes import batch_result

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        EnqueueExtensions,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        SkipWrites,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.VOLUME_ZONE
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
ERR_CLAIM_NO_NAME = "PersistentVolumeClaim had no name"
ERR_NO_PV_NO_CLASS = "PersistentVolumeClaim had no pv name and storageClass name"
ERR_NO_PV_NAME = "PersistentVolume had no name"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA_OF = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER = "__"

_CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
_SKIP = Status(Code.SKIP)


@dataclass(frozen=True, slots=True)
class VolumeTopology:
    """One topology label of a volume: the node's label of ``key`` must be one of ``values``."""

    pv_name: str
    key: str
    values: frozenset[str]


def zones_of(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: the ``__``-separated members, trimmed; None if one is empty (label ignored)."""
    members = [part.strip() for part in value.split(MULTI_ZONE_DELIMITER)]
    if any(not member for member in members):
        return None
    return frozenset(members)


def volume_topologies(volume: PersistentVolume) -> tuple[VolumeTopology, ...]:
    """``getPVTopologies``: the volume's topology labels in upstream's key order (node affinity is not read:
    NodeAffinity and VolumeBinding see to it)."""
    found: list[VolumeTopology] = []
    labels = volume.metadata.labels
    for key in TOPOLOGY_LABELS:
        value = labels.get(key)
        if value is None:
            continue
        zones = zones_of(value)
        if zones is not None:
            found.append(VolumeTopology(volume.name, key, zones))
    return tuple(found)


def claim_names(pod: Pod) -> list[str]:
    """The claim names of the pod's ``persistentVolumeClaim`` volumes, in order."""
    found: list[str] = []
    for volume in pod.spec.volumes:
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            name = source.get("claimName")
            found.append(name if isinstance(name, str) else "")
    return found


def node_fits(topologies: Sequence[VolumeTopology], labels: Mapping[str, str]) -> bool:
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return True  # a node without zone labels: a single-zone cluster
    for topology in topologies:
        value = labels.get(topology.key)
        if value is None:
            value = labels.get(_GA_OF.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return False
    return True


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    topologies: tuple[VolumeTopology, ...]

    def clone(self) -> _PreFilterState:
        return self


class VolumeZone:
    """PreFilter/Filter: the node is in the zone (and region) of every bound volume of the pod."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args
        self._listers: Listers = handle.listers

    @property
    def name(self) -> str:
        return names.VOLUME_ZONE

    def pod_topologies(self, pod: Pod) -> tuple[VolumeTopology, ...] | Status:
        """``getPVbyPod``: the topologies of the pod's bound volumes, or the status that rejects the pod."""
        found: list[VolumeTopology] = []
        namespace = pod.metadata.namespace
        for claim_name in claim_names(pod):
            if not claim_name:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_CLAIM_NO_NAME)
            claim = self._listers.persistent_volume_claims.get(namespace, claim_name)
            if claim is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{claim_name}" not found')
            if not claim.volume_name:
                class_name = claim.class_name
                if not class_name:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_PV_NO_CLASS)
                class_ = self._listers.storage_classes.get(class_name)
                if class_ is None:
                    return Status(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'storageclass.storage.k8s.io "{class_name}" not found'
                    )
                if class_.wait_for_first_consumer:
                    continue  # VolumeBinding chooses its volume
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_PV_NAME)
            volume = self._listers.persistent_volumes.get(claim.volume_name)
            if volume is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolume "{claim.volume_name}" not found')
            found.extend(volume_topologies(volume))
        return tuple(found)

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        topologies = self.pod_topologies(pod.pod)
        if isinstance(topologies, Status):
            return topologies
        if not topologies:
            return _SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(topologies))
        return None

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Without VOLUMES the pod has no claims, so no topologies: Skip, nothing written.
        return None if shape & PodShape.VOLUMES else no_writes

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _topologies(self, state: CycleState, pod: Pod) -> tuple[VolumeTopology, ...] | Status:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        # Without PreFilter's state (a config that runs Filter alone) upstream computes it here.
        return found.topologies if found is not None else self.pod_topologies(pod)

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if not pod.pod.spec.volumes:
            return None
        topologies = self._topologies(state, pod.pod)
        if isinstance(topologies, Status):
            return topologies
        return None if node_fits(topologies, node_info.labels) else _CONFLICT

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        if not pod.pod.spec.volumes:
            return None
        topologies = self._topologies(state, pod.pod)
        if isinstance(topologies, Status):
            return batch_result([topologies] * len(nodes))
        return batch_result([None if node_fits(topologies, info.labels) else _CONFLICT for info in nodes.infos])

    # ---- queueing hints -----------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        add_update = ActionType.ADD | ActionType.UPDATE
        return [
            # The binding mode is immutable: only a new WaitForFirstConsumer class can help.
            ClusterEventWithHint(
                ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD, "StorageClassAdd"),
                self.is_schedulable_after_storage_class_added,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeChange")
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, add_update, "PersistentVolumeClaimChange"),
                self.is_schedulable_after_claim_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME, add_update, "PersistentVolumeChange"),
                self.is_schedulable_after_volume_change,
            ),
        ]

    def is_schedulable_after_claim_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when the claim is one of the pod's (created, or now naming its volume)."""
        if not isinstance(new, PersistentVolumeClaim):
            return QueueingHint.QUEUE
        if new.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if new.name in claim_names(pod) else QueueingHint.SKIP

    def is_schedulable_after_storage_class_added(self, pod: Pod, old: object, new: object) -> QueueingHint:
        if not isinstance(new, StorageClass):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if new.wait_for_first_consumer else QueueingHint.SKIP

    def is_schedulable_after_volume_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue on a new volume, or when a volume's topology labels changed."""
        if not isinstance(new, PersistentVolume) or (old is not None and not isinstance(old, PersistentVolume)):
            return QueueingHint.QUEUE
        if old is None:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if volume_topologies(old) != volume_topologies(new) else QueueingHint.SKIP


if TYPE_CHECKING:

    def _conforms(plugin: VolumeZone) -> tuple[PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions]:
        return plugin, plugin, plugin
