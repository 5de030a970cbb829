"""DynamicResources (PreEnqueue, PreFilter, Filter, PostFilter, Reserve, PreBind), kube-scheduler v1.35.

Built by the framework from the registry; part of the default profile since v1.34 (dynamic resource
allocation is GA and its feature gate on), placed right before DefaultPreemption. kubesched does not
model ResourceClaims, DeviceClasses or ResourceSlices, so the plugin does exactly what upstream does for
the pods that need none of them, and refuses the others:

- A pod without ``spec.resourceClaims``: PreEnqueue admits it, PreFilter returns Skip (so Filter never
  runs), Reserve and PreBind have nothing to do. PostFilter, which runs only when no node fits, answers
  Unschedulable ``no new claims to deallocate`` -- upstream's text, which therefore follows the node
  summary of every FailedScheduling message of the default profile
  (``0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, preemption: ...``).
- A pod with resource claims: PreFilter rejects it, UnschedulableAndUnresolvable
  ``dynamic resource allocation is not supported by kubesched``, rather than placing it on a node whose
  devices nobody checked. PostFilter adds nothing for it (there is nothing kubesched could deallocate).
  No cluster event can change that, so the plugin registers none and the pod is not retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ClusterEventWithHint
from kubesched.framework.interface import NodeToStatus, PostFilterResult
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.dynamicresources.args import DynamicResourcesArgs
from kubesched.plugins.helper.args import validated

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        EnqueueExtensions,
        FilterPlugin,
        Handle,
        PostFilterPlugin,
        PreBindPlugin,
        PreEnqueuePlugin,
        PreFilterExtensions,
        PreFilterPlugin,
        ReservePlugin,
        SkipWrites,
    )

ERR_REASON_UNSUPPORTED = "dynamic resource allocation is not supported by kubesched"
ERR_REASON_NO_CLAIMS = "no new claims to deallocate"

_UNSUPPORTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSUPPORTED)
_SKIP = Status(Code.SKIP)
_NO_CLAIMS = Status(Code.UNSCHEDULABLE, ERR_REASON_NO_CLAIMS)
# Upstream's PostFilter for a pod with claims of which none could be freed says only "unschedulable".
_NOTHING_TO_FREE = Status(Code.UNSCHEDULABLE)
STATE_KEY = names.DYNAMIC_RESOURCES
_STATE_NOT_FOUND = Status(Code.ERROR, "not found")


class _PreFilterRan:
    """The cycle-state marker PreFilter leaves (upstream's empty stateData for a pod without claims)."""

    def clone(self) -> _PreFilterRan:
        return self


_PRE_FILTER_RAN = _PreFilterRan()


def _record_pre_filter_ran(state: CycleState) -> None:
    """What PreFilter writes before it returns Skip for a pod without claims."""
    state.write(STATE_KEY, _PRE_FILTER_RAN)


def has_resource_claims(pod: PodInfo) -> bool:
    return bool(pod.pod.spec.resource_claims)


class DynamicResources:
    """Dynamic resource allocation: a no-op for pods without claims, a clear refusal for pods with them."""

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        del handle
        # Validated like every plugin's args; kubesched allocates nothing, so the timeouts go unused.
        self.args = validated(args, DynamicResourcesArgs)

    @property
    def name(self) -> str:
        return names.DYNAMIC_RESOURCES

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        # Upstream holds a pod here until its claims exist. kubesched has no claims to wait for: letting the
        # pod through lets PreFilter say why it cannot be scheduled, in a FailedScheduling message.
        return None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status:
        # Upstream records "PreFilter ran" for every pod, and PostFilter fails without that record.
        state.write(STATE_KEY, _PRE_FILTER_RAN)
        return _UNSUPPORTED if has_resource_claims(pod) else _SKIP

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Without RESOURCE_CLAIMS: Skip, after the "PreFilter ran" record.
        return None if shape & PodShape.RESOURCE_CLAIMS else _record_pre_filter_ran

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        # Reached only if a config runs Filter without this plugin's PreFilter.
        return _UNSUPPORTED if has_resource_claims(pod) else None

    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered_node_status: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status | None]:
        if state.get(STATE_KEY, _PreFilterRan) is None:
            # An earlier PreFilter plugin rejected the pod before this PreFilter ran (VolumeBinding's missing
            # claim, say): upstream's PostFilter then fails reading its state, and the FailedScheduling
            # message ends in that error's text, "not found" (kube-oracle v1.35.4 shows exactly that).
            return None, _STATE_NOT_FOUND
        return None, _NOTHING_TO_FREE if has_resource_claims(pod) else _NO_CLAIMS

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return _UNSUPPORTED if has_resource_claims(pod) else None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return _UNSUPPORTED if has_resource_claims(pod) else None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # A pod's resource claims are immutable and kubesched never supports them: no event can help.
        return []


if TYPE_CHECKING:

    def _conforms(
        plugin: DynamicResources,
    ) -> tuple[PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, PostFilterPlugin, ReservePlugin, PreBindPlugin]:
        return plugin, plugin, plugin, plugin, plugin, plugin

    def _hints(plugin: DynamicResources) -> EnqueueExtensions:
        return plugin
