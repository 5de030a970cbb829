"""ClusterAPIEnablement (PreFilter, Filter): the cluster must serve every API the workload needs there.

What a workload needs, worked out once per pod at PreFilter, each as ``group/version/Kind`` (``v1/Kind`` for
the core group):

- ``v1/Pod`` always: whatever the hub places is created in the member as a pod;
- with ``includeOwnerKind`` (the default), the kind of the pod's controller, from its owner reference's
  ``apiVersion`` and ``kind`` (a pod of a ``batch/v1`` Job needs ``batch/v1/Job``), since the member runs the
  workload the way its controller would;
- every entry of the pod annotation ``multicluster.kubesched.io/required-apis``: a comma-separated list of
  ``group/version/Kind`` or ``version/Kind`` (``ray.io/v1/RayCluster, v1/ConfigMap``), for what the workload
  uses beside its pods (a CRD, an operator's kind). A malformed annotation rejects the pod at PreFilter,
  naming it.

Filter compares with the cluster's served APIs (``status.apiEnablements``): a missing one rejects the cluster
as UnschedulableAndUnresolvable with ``cluster(s) did not serve <api>`` (the first missing one in sorted order,
so the reasons stay few and the message says what to install). A cluster that reports no API list passes under
``unreportedPolicy: Allow`` (the default) and is rejected under ``Reject`` with ``cluster(s) did not report
their served APIs``. Karmada's APIEnablement filter works the same way on its clusters' reported lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.multicluster import GROUP
from kubesched.clusterapi.contract import CORE_POD_API, take_cycle_snapshot
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.multicluster.args import UNREPORTED_REJECT, ClusterAPIEnablementArgs
from kubesched.plugins.multicluster.common import UNKNOWN_CLUSTER, read_snapshot

if TYPE_CHECKING:
    from kubesched.framework.interface import FilterPlugin, Handle, PreFilterExtensions, PreFilterPlugin

REQUIRED_APIS_ANNOTATION = f"{GROUP}/required-apis"
ERR_REASON_UNREPORTED = "cluster(s) did not report their served APIs"

STATE_KEY = "PreFilter" + names.CLUSTER_API_ENABLEMENT

_UNREPORTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNREPORTED)


def not_served(api: str) -> str:
    return f"cluster(s) did not serve {api}"


_NOT_SERVED: dict[str, Status] = {}


def _not_served_status(api: str) -> Status:
    # One Status per API, made on its first rejection: Filter returns shared values.
    status = _NOT_SERVED.get(api)
    if status is None:
        status = _NOT_SERVED[api] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, not_served(api))
    return status


class MalformedApiList(ValueError):
    """The required-apis annotation has an entry that is not ``[group/]version/Kind``."""


def parse_api(text: str) -> str:
    """``group/version/Kind`` or ``version/Kind`` as written, checked; :class:`MalformedApiList` otherwise."""
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts) or any(part != part.strip() for part in parts):
        raise MalformedApiList(f'"{text}" is not group/version/Kind or version/Kind')
    if not parts[-1][0].isupper():
        raise MalformedApiList(f'"{text}": a kind starts with an upper-case letter')
    return text


def required_apis(pod: PodInfo, include_owner_kind: bool) -> frozenset[str]:
    """Every API the pod's workload needs in the member (module doc); raises :class:`MalformedApiList`."""
    needed = {CORE_POD_API}
    metadata = pod.pod.metadata
    if include_owner_kind:
        owner = metadata.controller_ref()
        if owner is not None and owner.api_version:
            needed.add(f"{owner.api_version}/{owner.kind}")
    listed = metadata.annotations.get(REQUIRED_APIS_ANNOTATION, "")
    for entry in listed.split(","):
        entry = entry.strip()
        if entry:
            needed.add(parse_api(entry))
    return frozenset(needed)


@dataclass(frozen=True, slots=True)
class _Required:
    apis: tuple[str, ...]
    """Sorted, so the first missing one is the same on every cluster and every run."""

    def clone(self) -> _Required:
        return self


class ClusterAPIEnablement:
    """Filter: clusters that do not serve the workload's kind (and the APIs its annotation names)."""

    def __init__(self, args: ClusterAPIEnablementArgs | None, handle: Handle) -> None:
        self.args = validated(args, ClusterAPIEnablementArgs)
        self._handle = handle

    @property
    def name(self) -> str:
        return names.CLUSTER_API_ENABLEMENT

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        try:
            apis = required_apis(pod, self.args.include_owner_kind)
        except MalformedApiList as exc:
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"pod annotation {REQUIRED_APIS_ANNOTATION} is malformed: {exc}"
            )
        state.write(STATE_KEY, _Required(tuple(sorted(apis))))
        take_cycle_snapshot(state, self._handle)
        return None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        required = state.get(STATE_KEY, _Required)
        if required is None:
            return Status.error(f"{STATE_KEY} not found: the plugin's PreFilter did not run")
        cluster = read_snapshot(state).get(node_info.name)
        if cluster is None:
            return UNKNOWN_CLUSTER
        served = cluster.apis
        if served is None:
            return _UNREPORTED if self.args.unreported_policy == UNREPORTED_REJECT else None
        for api in required.apis:
            if api not in served:
                return _not_served_status(api)
        return None


if TYPE_CHECKING:

    def _conforms(plugin: ClusterAPIEnablement) -> tuple[PreFilterPlugin, FilterPlugin]:
        return plugin, plugin
