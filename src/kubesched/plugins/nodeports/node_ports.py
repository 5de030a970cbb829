"""NodePorts (PreFilter, Filter): the node must have every (hostIP, protocol, hostPort) the pod asks for.

PreFilter stores the pod's host ports — those of its app containers and of its restartable ("sidecar")
init containers, which keep running; regular init containers have finished before the app starts
(component-helpers ``GetHostPorts``) — and returns Skip when there are none, so most pods never reach
this Filter. Filter fails the node as Unschedulable with ``node(s) didn't have free ports for the
requested pod ports`` when a port is taken; hostIP 0.0.0.0 conflicts with every IP
(NodeInfo.ports_conflict).

The batch form is a loop over the candidates' NodeInfos: used ports change with every pod, so they have
no column, and the PreFilter Skip keeps this path rare.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState, no_writes
from kubesched.framework.events import (
    NODE_ADD,
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import (
    HostPort,
    NodeInfo,
    PodInfo,
    PodShape,
    PreFilterResult,
    pod_host_ports,
    ports_conflict,
)
from kubesched.plugins import names
from kubesched.plugins.helper.classes import batch_result, uniform_result
from kubesched.plugins.helper.hints import as_pods

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        EnqueueExtensions,
        Handle,
        PreFilterExtensions,
        PreFilterPlugin,
        SkipWrites,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_PORTS
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_REJECTED = Status(Code.UNSCHEDULABLE, ERR_REASON)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    ports: tuple[HostPort, ...]

    def clone(self) -> _PreFilterState:
        return self


class NodePorts:
    """PreFilter/Filter: the pod's host ports are free on the node."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    @property
    def name(self) -> str:
        return names.NODE_PORTS

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        wanted = pod.host_ports
        if not wanted:
            return Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(wanted))
        return None

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Without HOST_PORTS the pod's host_ports are empty: Skip, nothing written.
        return None if shape & PodShape.HOST_PORTS else no_writes

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    @staticmethod
    def _missing_state() -> Status:
        return Status(Code.ERROR, f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is None:
            return self._missing_state()
        return _REJECTED if node_info.ports_conflict(found.ports) else None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
        if found is None:
            return uniform_result(len(nodes), self._missing_state())
        ports = found.ports
        return batch_result([_REJECTED if info.ports_conflict(ports) else None for info in nodes.infos])

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            # Container ports are immutable, so only a deletion can free a port.
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE, "PodDelete"), self.is_schedulable_after_pod_deleted
            ),
            ClusterEventWithHint(NODE_ADD),
        ]

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue only when the deleted pod was placed (or nominated) and held a port this pod wants."""
        try:
            deleted, _ = as_pods(old, None)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None or (not deleted.spec.node_name and not deleted.status.nominated_node_name):
            return QueueingHint.SKIP
        freed = pod_host_ports(deleted)
        if not freed:
            return QueueingHint.SKIP
        in_use: dict[str, set[tuple[str, int]]] = {}
        for ip, protocol, port in freed:
            in_use.setdefault(ip, set()).add((protocol, port))
        return QueueingHint.QUEUE if ports_conflict(pod_host_ports(pod), in_use) else QueueingHint.SKIP


if TYPE_CHECKING:

    def _conforms(plugin: NodePorts) -> tuple[PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions]:
        return plugin, plugin, plugin
