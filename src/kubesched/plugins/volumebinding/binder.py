"""The volume binder: the decisions behind VolumeBinding, and the plugin's own cache of assumed bindings.

Who calls it: :mod:`kubesched.plugins.volumebinding.volume_binding` only. It carries over kube-scheduler v1.35's
``binder.go`` and the parts of component-helpers' ``storage/volume`` it relies on: which claims are bound, delayed
(WaitForFirstConsumer) or immediate; a bound claim's volume must reach the node; a delayed claim takes its selected
node, or the smallest Available volume of its class that fits (claims in order of increasing request), or must be
provisionable on the node. The assume cache stands for upstream's PV/PVC assume caches: an assumed object replaces
the lister's until it is reverted, forgotten after PreBind, or superseded by a different object in the lister
(identity plays the part of upstream's resourceVersion check). Not modelled: CSI migration of in-tree volumes and
storage-capacity checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    ClaimReference,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from kubesched.framework.listers import Listers
from kubesched.plugins.helper.label_selector import LabelSelector, compile_label_selector
from kubesched.plugins.helper.node_selector import NodeSelector, compile_node_selector

ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


class BinderError(Exception):
    """Something the binder cannot decide (upstream returns an error and the cycle fails with Error)."""


def claim_name_of(pod: Pod, volume: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(claim name, is generic ephemeral) of a pod volume that uses a claim; None for other volumes.

    A generic ephemeral volume's claim is named ``<pod>-<volume>`` (component-helpers' ``VolumeClaimName``).
    """
    source = volume.get("persistentVolumeClaim")
    if isinstance(source, Mapping):
        name = source.get("claimName")
        return (name if isinstance(name, str) else "", False)
    if volume.get("ephemeral") is not None:
        return (f"{pod.metadata.name}-{volume.get('name', '')}", True)
    return None


def pod_claim_names(pod: Pod) -> list[tuple[str, bool]]:
    """The claims of every pod volume that uses one, in volume order."""
    names: list[tuple[str, bool]] = []
    for volume in pod.spec.volumes:
        found = claim_name_of(pod, volume)
        if found is not None:
            names.append(found)
    return names


def ephemeral_owner_error(pod: Pod, claim: PersistentVolumeClaim) -> str | None:
    """``ephemeral.VolumeIsForPod``: a generic ephemeral volume's claim must be controlled by the pod."""
    for owner in claim.metadata.owner_references:
        if owner.controller and owner.uid == pod.metadata.uid:
            return None
    return (
        f"PVC {claim.namespace}/{claim.name} was not created for pod "
        f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
    )


def is_fully_bound(claim: PersistentVolumeClaim) -> bool:
    return bool(claim.volume_name) and ANN_BIND_COMPLETED in claim.metadata.annotations


def is_volume_bound_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.metadata.uid


def match_topology(class_: StorageClass, labels: Mapping[str, str]) -> bool:
    """``v1helper.MatchTopologySelectorTerms``: no terms allow every node; a term needs all its labels."""
    terms = class_.allowed_topologies
    if not terms:
        return True
    for term in terms:
        if term.match_label_expressions and all(
            labels.get(req.key) in req.values for req in term.match_label_expressions
        ):
            return True
    return False


@dataclass(frozen=True, slots=True)
class StaticBinding:
    """A claim and the existing volume chosen for it."""

    pv: PersistentVolume
    pvc: PersistentVolumeClaim


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What one node needs for the pod: volumes to bind to claims, claims to provision there."""

    static_bindings: tuple[StaticBinding, ...] = ()
    dynamic_provisions: tuple[PersistentVolumeClaim, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.static_bindings and not self.dynamic_provisions


@dataclass(frozen=True, slots=True)
class PodVolumeClaims:
    """The pod's claims sorted as PreFilter found them, and the candidate volumes of each delayed class."""

    bound: tuple[PersistentVolumeClaim, ...] = ()
    unbound_immediate: tuple[PersistentVolumeClaim, ...] = ()
    unbound_delay: tuple[PersistentVolumeClaim, ...] = ()
    volumes_by_class: Mapping[str, tuple[PersistentVolume, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class _Assumed:
    base: object  # the lister's object the assumption was made from (None if it was absent)
    assumed: Any


class VolumeBinder:
    """Reads volumes and claims through the assume cache, decides, and keeps the assumptions."""

    def __init__(self, listers: Listers) -> None:
        self._listers = listers
        self._pvs: dict[str, _Assumed] = {}
        self._pvcs: dict[str, _Assumed] = {}
        # Compiled once per volume object: CheckNodeAffinity runs for every (volume, node) pair.
        self._affinity: dict[str, tuple[PersistentVolume, NodeSelector | None]] = {}
        self._selectors: dict[str, tuple[PersistentVolumeClaim, LabelSelector | None]] = {}

    # ---- the assume cache ---------------------------------------------------------------------

    def get_pv(self, name: str) -> PersistentVolume | None:
        current = self._listers.persistent_volumes.get(name)
        entry = self._pvs.get(name)
        if entry is None:
            return current
        if entry.base is not current:
            del self._pvs[name]  # the cluster moved on: its object wins over our assumption
            return current
        assumed: PersistentVolume = entry.assumed
        return assumed

    def get_pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        key = f"{namespace}/{name}"
        current = self._listers.persistent_volume_claims.get(namespace, name)
        entry = self._pvcs.get(key)
        if entry is None:
            return current
        if entry.base is not current:
            del self._pvcs[key]
            return current
        assumed: PersistentVolumeClaim = entry.assumed
        return assumed

    def list_pvs(self, class_name: str) -> tuple[PersistentVolume, ...]:
        """The volumes of a class (``GetPersistentVolumeClass``), assumed versions in place of the lister's."""
        found: list[PersistentVolume] = []
        for volume in self._listers.persistent_volumes.list():
            if self._pvs:
                volume = self.get_pv(volume.name) or volume
            if volume.class_name == class_name:
                found.append(volume)
        return tuple(found)

    def assume_pv(self, volume: PersistentVolume) -> None:
        self._pvs[volume.name] = _Assumed(self._listers.persistent_volumes.get(volume.name), volume)

    def assume_pvc(self, claim: PersistentVolumeClaim) -> None:
        self._pvcs[claim.key] = _Assumed(self._listers.persistent_volume_claims.get(claim.namespace, claim.name), claim)

    def restore_pv(self, name: str) -> None:
        self._pvs.pop(name, None)

    def restore_pvc(self, key: str) -> None:
        self._pvcs.pop(key, None)

    @property
    def assumed_pvs(self) -> Mapping[str, PersistentVolume]:
        return {name: entry.assumed for name, entry in self._pvs.items()}

    @property
    def assumed_pvcs(self) -> Mapping[str, PersistentVolumeClaim]:
        return {key: entry.assumed for key, entry in self._pvcs.items()}

    # ---- PreFilter ----------------------------------------------------------------------------

    def is_delay_binding(self, claim: PersistentVolumeClaim) -> bool:
        """``IsDelayBindingMode``: the claim's class exists and waits for the first consumer."""
        class_name = claim.class_name
        if not class_name:
            return False
        class_ = self._listers.storage_classes.get(class_name)
        return class_ is not None and class_.wait_for_first_consumer

    def pod_volume_claims(self, pod: Pod) -> PodVolumeClaims:
        """``GetPodVolumeClaims``; raises BinderError where upstream returns an error."""
        bound: list[PersistentVolumeClaim] = []
        immediate: list[PersistentVolumeClaim] = []
        delay: list[PersistentVolumeClaim] = []
        namespace = pod.metadata.namespace
        for name, ephemeral in pod_claim_names(pod):
            claim = self.get_pvc(namespace, name)
            if claim is None:
                raise BinderError(f'error getting PVC "{namespace}/{name}": not found')
            if ephemeral:
                problem = ephemeral_owner_error(pod, claim)
                if problem is not None:
                    raise BinderError(problem)
            if is_fully_bound(claim):
                bound.append(claim)
            elif self.is_delay_binding(claim) and not claim.volume_name:
                delay.append(claim)
            else:
                # Pre-bound claims (a volumeName without bind-completed) wait for the PV controller too.
                immediate.append(claim)
        by_class: dict[str, tuple[PersistentVolume, ...]] = {}
        for claim in delay:
            if claim.class_name not in by_class:
                by_class[claim.class_name] = self.list_pvs(claim.class_name)
        return PodVolumeClaims(tuple(bound), tuple(immediate), tuple(delay), by_class)

    # ---- Filter -------------------------------------------------------------------------------

    def _node_affinity(self, volume: PersistentVolume) -> NodeSelector | None:
        cached = self._affinity.get(volume.name)
        if cached is not None and cached[0] is volume:
            return cached[1]
        selector = (
            compile_node_selector(volume.node_affinity.raw, "spec.nodeAffinity.required")
            if volume.node_affinity is not None
            else None
        )
        self._affinity[volume.name] = (volume, selector)
        return selector

    def check_node_affinity(self, volume: PersistentVolume, labels: Mapping[str, str]) -> bool:
        """``CheckNodeAffinity``: matched against the node's labels only (a ``metadata.name`` field
        requirement sees an empty name, as upstream's label-only node does)."""
        selector = self._node_affinity(volume)
        return selector is None or selector.matches(labels, "")

    def _claim_selector(self, claim: PersistentVolumeClaim) -> LabelSelector | None:
        cached = self._selectors.get(claim.key)
        if cached is not None and cached[0] is claim:
            return cached[1]
        selector = None
        if claim.selector is not None:
            selector, errors = compile_label_selector(claim.selector.raw, "spec.selector")
            if errors:
                raise BinderError(f"error creating internal label selector for claim: {claim.key}: {errors[0]}")
        self._selectors[claim.key] = (claim, selector)
        return selector

    def find_matching_volume(
        self,
        claim: PersistentVolumeClaim,
        volumes: Sequence[PersistentVolume],
        labels: Mapping[str, str],
        excluded: set[str],
    ) -> PersistentVolume | None:
        """``FindMatchingVolume`` on the scheduler path (a node is given, delayed binding)."""
        selector = self._claim_selector(claim)
        requested_class = claim.class_name
        smallest: PersistentVolume | None = None
        for volume in volumes:
            if volume.name in excluded:
                continue
            bound_to_claim = is_volume_bound_to_claim(volume, claim)
            if volume.claim_ref is not None and not bound_to_claim:
                continue
            if volume.capacity < claim.storage_request:
                continue
            if volume.volume_mode != claim.volume_mode:
                continue
            if volume.volume_attributes_class_name != claim.volume_attributes_class_name:
                continue
            if volume.metadata.deletion_timestamp is not None:
                continue
            affinity_ok = self.check_node_affinity(volume, labels)
            if bound_to_claim:
                # A volume pre-bound to this claim is the only candidate: on a node it cannot reach, none is.
                return volume if affinity_ok else None
            if volume.phase != "Available":
                continue
            if selector is not None and not selector.matches(volume.metadata.labels):
                continue
            if volume.class_name != requested_class or not affinity_ok:
                continue
            if not all(mode in volume.access_modes for mode in claim.access_modes):
                continue
            if smallest is None or volume.capacity < smallest.capacity:
                smallest = volume
        return smallest

    def find_pod_volumes(
        self, claims: PodVolumeClaims, node_name: str, labels: Mapping[str, str]
    ) -> tuple[PodVolumes, list[str]]:
        """``FindPodVolumes``: what the node needs for the pod, or the reasons it cannot serve it."""
        bound_ok = unbound_ok = enough_space = pvs_found = True
        bindings: list[StaticBinding] = []
        provisions: list[PersistentVolumeClaim] = []

        for claim in claims.bound:
            volume = self.get_pv(claim.volume_name)
            if volume is None:
                pvs_found = False
                break
            if not self.check_node_affinity(volume, labels):
                bound_ok = False
                break

        if claims.unbound_delay:
            to_match: list[PersistentVolumeClaim] = []
            to_provision: list[PersistentVolumeClaim] = []
            fast_fail = False
            for claim in claims.unbound_delay:
                selected = claim.selected_node
                if selected is not None:
                    if selected != node_name:
                        fast_fail = True  # provisioning was already asked for on another node
                        break
                    to_provision.append(claim)
                else:
                    to_match.append(claim)
            if fast_fail:
                unbound_ok = False
            else:
                if to_match:
                    chosen: set[str] = set()
                    for claim in sorted(to_match, key=lambda c: c.storage_request):
                        volume = self.find_matching_volume(
                            claim, claims.volumes_by_class.get(claim.class_name, ()), labels, chosen
                        )
                        if volume is None:
                            unbound_ok = False
                            to_provision.append(claim)
                            continue
                        chosen.add(volume.name)
                        bindings.append(StaticBinding(volume, claim))
                if to_provision:
                    unbound_ok, enough_space, provisions = self._check_provisions(to_provision, labels)

        reasons: list[str] = []
        if not bound_ok:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not enough_space:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not pvs_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return PodVolumes(tuple(bindings), tuple(provisions)), reasons

    def _check_provisions(
        self, claims: Sequence[PersistentVolumeClaim], labels: Mapping[str, str]
    ) -> tuple[bool, bool, list[PersistentVolumeClaim]]:
        """``checkVolumeProvisions``: (provisionable, enough storage, the claims to provision)."""
        for claim in claims:
            class_name = claim.class_name
            if not class_name:
                raise BinderError(f'no class for claim "{claim.key}"')
            class_ = self._listers.storage_classes.get(class_name)
            if class_ is None:
                raise BinderError(f'failed to find storage class "{class_name}"')
            if not class_.provisioner or class_.provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not match_topology(class_, labels):
                return False, True, []
        return True, True, list(claims)

    # ---- Reserve / Unreserve / PreBind --------------------------------------------------------

    def pod_volumes_bound(self, pod: Pod) -> bool:
        """``arePodVolumesBound``: every claim of the pod is fully bound (as the assume cache sees it)."""
        namespace = pod.metadata.namespace
        for name, ephemeral in pod_claim_names(pod):
            claim = self.get_pvc(namespace, name)
            if claim is None or not is_fully_bound(claim):
                return False
            if ephemeral and ephemeral_owner_error(pod, claim) is not None:
                return False
        return True

    def assume(self, pod: Pod, node_name: str, volumes: PodVolumes) -> tuple[bool, PodVolumes]:
        """``AssumePodVolumes``: (all bound already, the volumes as assumed). Each chosen volume is assumed
        pre-bound to its claim (so no other pod picks it), each claim to provision gets the node."""
        if self.pod_volumes_bound(pod):
            return True, volumes
        bindings: list[StaticBinding] = []
        for binding in volumes.static_bindings:
            volume, dirty = bind_volume_to_claim(binding.pv, binding.pvc)
            if dirty:
                self.assume_pv(volume)
            bindings.append(StaticBinding(volume, binding.pvc))
        provisions: list[PersistentVolumeClaim] = []
        for claim in volumes.dynamic_provisions:
            annotations = {**claim.metadata.annotations, ANN_SELECTED_NODE: node_name}
            assumed = replace(claim, metadata=replace(claim.metadata, annotations=annotations))
            self.assume_pvc(assumed)
            provisions.append(assumed)
        return False, PodVolumes(tuple(bindings), tuple(provisions))

    def revert(self, volumes: PodVolumes) -> None:
        """``RevertAssumedPodVolumes``."""
        for binding in volumes.static_bindings:
            self.restore_pv(binding.pv.name)
        for claim in volumes.dynamic_provisions:
            self.restore_pvc(claim.key)


def bind_volume_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """``GetBindVolumeToClaim``: the volume with ``claimRef`` naming the claim, and whether it changed."""
    dirty = False
    result = volume
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace or ref.uid != claim.metadata.uid:
        result = replace(result, claim_ref=ClaimReference(claim.namespace, claim.name, claim.metadata.uid))
        dirty = True
    if not is_volume_bound_to_claim(volume, claim) and ANN_BOUND_BY_CONTROLLER not in volume.metadata.annotations:
        annotations = {**result.metadata.annotations, ANN_BOUND_BY_CONTROLLER: "yes"}
        result = replace(result, metadata=replace(result.metadata, annotations=annotations))
        dirty = True
    return result, dirty
