"""VolumeBinding (PreFilter, Filter, Reserve, PreBind, PreScore, Score), kube-scheduler v1.35.

Built by the framework in the default profile. The pod's claims are those of its ``persistentVolumeClaim`` and
generic ephemeral volumes. PreFilter skips pods without claims and refuses, with upstream's texts, claims that are
missing, lost, being deleted, not the pod's own, or unbound with Immediate binding; Filter checks bound volumes'
node affinity and finds volumes (or provisioning) for WaitForFirstConsumer claims, keeping each feasible node's
needs in the cycle state (:mod:`.binder` decides); Reserve assumes the chosen volumes, Unreserve reverts them;
PreBind hands the bindings to ``handle.client.bind_volumes``, which the simulated cluster performs and the live
backend refuses. PreScore always skips: upstream scores only behind an alpha gate, off in v1.35.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kubesched.api.objects import Pod
from kubesched.api.quantity import parse_quantity
from kubesched.api.storage import MIGRATED_PLUGINS_ANNOTATION, CSINode, PersistentVolumeClaim, StorageClass
from kubesched.framework.cycle_state import CycleState, no_writes
from kubesched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.interface import ApiError
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import batch_result, uniform_result
from kubesched.plugins.volumebinding.args import VolumeBindingArgs
from kubesched.plugins.volumebinding.binder import (
    BinderError,
    PodVolumeClaims,
    PodVolumes,
    VolumeBinder,
    ephemeral_owner_error,
    pod_claim_names,
)

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        EnqueueExtensions,
        Handle,
        PreBindPlugin,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
        ReservePlugin,
        ScorePlugin,
        SkipWrites,
    )

STATE_KEY = names.VOLUME_BINDING
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_SKIP = Status(Code.SKIP)


@dataclass(slots=True)
class _State:
    """Written by PreFilter, filled in by Filter (one entry per feasible node), read by Reserve/PreBind.

    Shared, not copied, by ``clone`` (as upstream's pointer): filtering with nominated pods must record its
    nodes in the same state that Reserve reads.
    """

    claims: PodVolumeClaims | None = None
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False

    def clone(self) -> _State:
        return self


def _write_empty_state(state: CycleState) -> None:
    """What PreFilter writes for a pod without claims (its Skip): a fresh state per pod, as Reserve fills it."""
    state.write(STATE_KEY, _State())


def _missing_state() -> Status:
    # Upstream's CycleState.Read error text.
    return Status(Code.ERROR, "not found")


class VolumeBinding:
    """Binds a pod's PersistentVolumeClaims to volumes its node can reach (or has them provisioned there)."""

    def __init__(self, args: VolumeBindingArgs | None, handle: Handle) -> None:
        self.args = validated(args, VolumeBindingArgs)
        self._handle = handle
        self._listers = handle.listers
        self.binder = VolumeBinder(handle.listers)

    @property
    def name(self) -> str:
        return names.VOLUME_BINDING

    # ---- PreFilter ----------------------------------------------------------------------------

    def _claims_problem(self, pod: Pod) -> tuple[bool, str | None]:
        """``podHasPVCs``: (the pod uses claims, the first problem with one of them)."""
        has_claims = False
        namespace = pod.metadata.namespace
        for name, ephemeral in pod_claim_names(pod):
            has_claims = True
            claim = self._listers.persistent_volume_claims.get(namespace, name)
            if claim is None:
                if ephemeral:
                    return True, f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                return True, f'persistentvolumeclaim "{name}" not found'
            if claim.phase == "Lost":
                return True, (
                    f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume "{claim.volume_name}"'
                )
            if claim.metadata.deletion_timestamp is not None:
                return True, f'persistentvolumeclaim "{claim.name}" is being deleted'
            if ephemeral:
                problem = ephemeral_owner_error(pod, claim)
                if problem is not None:
                    return True, problem
        return has_claims, None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        has_claims, problem = self._claims_problem(pod.pod)
        if problem is not None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, problem)
        if not has_claims:
            # Reserve and PreBind still read the state: they run for every pod.
            state.write(STATE_KEY, _State())
            return _SKIP
        try:
            claims = self.binder.pod_volume_claims(pod.pod)
        except BinderError as exc:
            return Status.error(str(exc))
        if claims.unbound_immediate:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, _State(claims=claims))
        return None

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Without VOLUMES the pod has no claims: Skip, with the empty state Reserve and PreBind read.
        return None if shape & PodShape.VOLUMES else _write_empty_state

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # ---- Filter -------------------------------------------------------------------------------

    def _filter_one(self, found: _State, info: NodeInfo) -> Status | None:
        claims = found.claims
        if claims is None:
            return None  # a pod without claims (Filter runs only if a config skips PreFilter)
        try:
            volumes, reasons = self.binder.find_pod_volumes(claims, info.name, info.labels)
        except BinderError as exc:
            return Status.error(str(exc))
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)
        found.by_node[info.name] = volumes
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        found = state.get(STATE_KEY, _State)
        if found is None:
            return _missing_state()
        return self._filter_one(found, node_info)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        found = state.get(STATE_KEY, _State)
        if found is None:
            return uniform_result(len(nodes), _missing_state())
        return batch_result([self._filter_one(found, info) for info in nodes.infos])

    # ---- PreScore / Score ---------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        # No scorer without the StorageCapacityScoring gate (off in v1.35), so upstream always skips.
        return _SKIP

    def pre_score_skip(self, shape: PodShape) -> SkipWrites | None:
        return no_writes  # PreScore skips every pod

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return 0

    # ---- Reserve / Unreserve / PreBind --------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        found = state.get(STATE_KEY, _State)
        if found is None:
            return _missing_state()
        volumes = found.by_node.get(node_name)
        if volumes is None:
            found.all_bound = True  # the pod uses no claim
            return None
        all_bound, assumed = self.binder.assume(pod.pod, node_name, volumes)
        found.all_bound = all_bound
        found.by_node[node_name] = assumed
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        found = state.get(STATE_KEY, _State)
        if found is None:
            return
        volumes = found.by_node.get(node_name)
        if volumes is not None:
            self.binder.revert(volumes)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        found = state.get(STATE_KEY, _State)
        if found is None:
            return _missing_state()
        if found.all_bound:
            return None
        volumes = found.by_node.get(node_name)
        if volumes is None:
            return Status.error(f'no pod volumes found for node "{node_name}"')
        bindings = [(b.pv, b.pvc) for b in volumes.static_bindings]
        try:
            await self._handle.client.bind_volumes(pod.pod, node_name, bindings, list(volumes.dynamic_provisions))
        except ApiError as exc:
            # Unreserve follows and reverts the assumptions.
            return Status.error(f"binding volumes: {exc}")
        # The cluster holds the bound objects now; our assumptions have served their purpose.
        self.binder.revert(volumes)
        return None

    # ---- queueing hints -----------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        add_update = ActionType.ADD | ActionType.UPDATE
        return [
            # A missing or mis-configured class (allowedTopologies, binding mode) may be fixed.
            ClusterEventWithHint(
                ClusterEvent(EventResource.STORAGE_CLASS, add_update, "StorageClassChange"),
                self.is_schedulable_after_storage_class_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, add_update, "PersistentVolumeClaimChange"),
                self.is_schedulable_after_claim_change,
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, add_update, "PersistentVolumeChange")),
            # Node labels decide volume node affinity and allowed topologies. With queueing hints (GA) there
            # is no need for upstream's UpdateNodeTaint workaround.
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeChange")
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_NODE, add_update, "CSINodeChange"),
                self.is_schedulable_after_csi_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE, "CSIDriverUpdate"),
                self.is_schedulable_after_csi_driver_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, add_update, "CSIStorageCapacityChange"),
                self.is_schedulable_after_capacity_change,
            ),
        ]

    def is_schedulable_after_claim_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when the created or updated claim is one of the pod's (almost any change may help)."""
        if not isinstance(new, PersistentVolumeClaim):
            return QueueingHint.QUEUE
        if new.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        if any(name == new.name for name, _ in pod_claim_names(pod)):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_storage_class_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue on a new class, or on a change of ``allowedTopologies`` (the binding mode is immutable)."""
        if not isinstance(new, StorageClass) or (old is not None and not isinstance(old, StorageClass)):
            return QueueingHint.QUEUE
        if old is None:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if old.allowed_topologies != new.allowed_topologies else QueueingHint.SKIP

    def is_schedulable_after_csi_node_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue on a new CSINode, or when its migrated-plugins annotation changed (CSI translation)."""
        if old is None:
            return QueueingHint.QUEUE
        if not isinstance(old, CSINode) or not isinstance(new, CSINode):
            return QueueingHint.QUEUE
        before = old.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION)
        after = new.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION)
        return QueueingHint.QUEUE if before != after else QueueingHint.SKIP

    def is_schedulable_after_csi_driver_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue when a CSI driver of one of the pod's inline CSI volumes stopped tracking storage capacity.

        kubesched has no CSIDriver type: the objects are the decoded manifests (mappings)."""
        if not isinstance(old, Mapping) or not isinstance(new, Mapping):
            return QueueingHint.QUEUE
        driver = _get(new, "metadata", "name")
        for volume in pod.spec.volumes:
            csi = volume.get("csi")
            if not isinstance(csi, Mapping) or csi.get("driver") != driver:
                continue
            if _get(old, "spec", "storageCapacity") is True and _get(new, "spec", "storageCapacity") is not True:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_capacity_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Queue on new capacity, or when the volume limit (maximumVolumeSize, else capacity) grew.

        The objects are decoded CSIStorageCapacity manifests (mappings), as kubesched has no type for them."""
        if not isinstance(new, Mapping):
            return QueueingHint.QUEUE
        if old is None:
            return QueueingHint.QUEUE
        if not isinstance(old, Mapping):
            return QueueingHint.QUEUE
        try:
            before, after = _volume_limit(old), _volume_limit(new)
        except (TypeError, ValueError):
            return QueueingHint.QUEUE
        if after is not None and (before is None or after > before):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _get(obj: Mapping[str, Any], *path: str) -> object:
    current: object = obj
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _volume_limit(capacity: Mapping[str, Any]) -> Fraction | None:
    for key in ("maximumVolumeSize", "capacity"):
        raw = capacity.get(key)
        if raw is not None:
            if not isinstance(raw, str | int | float):
                raise TypeError(f"{key}: not a quantity")
            return parse_quantity(raw)
    return None


if TYPE_CHECKING:

    def _conforms(
        plugin: VolumeBinding,
    ) -> tuple[PreFilterPlugin, BatchFilterPlugin, ReservePlugin, PreBindPlugin, PreScorePlugin, ScorePlugin]:
        return plugin, plugin, plugin, plugin, plugin, plugin

    def _hints(plugin: VolumeBinding) -> EnqueueExtensions:
        return plugin
