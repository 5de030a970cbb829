"""SchedulingGates (PreEnqueue): a pod carrying scheduling gates waits, gated, until they are all removed.

The scheduling queue runs it before a pod may enter activeQ; a gated pod is parked without an attempt
being counted. It is requeued only by an update of that same pod that leaves no gates (kube-scheduler
v1.35, ``UpdatePodSchedulingGatesEliminated`` with its queueing hint).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.framework.events import (
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.hints import as_pods

if TYPE_CHECKING:
    from kubesched.framework.interface import EnqueueExtensions, Handle, PreEnqueuePlugin


class SchedulingGates:
    """PreEnqueue: reject a pod while ``spec.schedulingGates`` is non-empty."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    @property
    def name(self) -> str:
        return names.SCHEDULING_GATES

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        gates = pod_info.pod.spec.scheduling_gates
        if not gates:
            return None
        # Go prints a []string with %v as "[a b]".
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"waiting for scheduling gates: [{' '.join(gates)}]")

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.UNSCHEDULED_POD,
                    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                    "UnscheduledPodUpdate",
                ),
                self.is_schedulable_after_pod_change,
            )
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue only when the rejected pod itself was updated and carries no gates any more."""
        try:
            _, modified = as_pods(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        return QueueingHint.SKIP if modified.spec.scheduling_gates else QueueingHint.QUEUE


if TYPE_CHECKING:

    def _conforms(plugin: SchedulingGates) -> tuple[PreEnqueuePlugin, EnqueueExtensions]:
        return plugin, plugin
