"""NodeUnschedulable (Filter): a node with ``spec.unschedulable`` rejects pods that do not tolerate
``node.kubernetes.io/unschedulable:NoSchedule`` (UnschedulableAndUnresolvable).

Run by the framework per candidate node; the batch form reads a class column keyed by the node's
unschedulable flag, so it is one toleration check and one array lookup per cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import (
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.classes import NODE_UNSCHEDULABLE, class_filter_result
from kubesched.plugins.helper.hints import as_nodes, as_pods
from kubesched.plugins.helper.taints import UNSCHEDULABLE_TAINT, tolerations_tolerate_taint

if TYPE_CHECKING:
    from kubesched.framework.interface import BatchFilterPlugin, EnqueueExtensions, Handle, NodeOnlyFilter

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE)


class NodeUnschedulable:
    """Filter: skip cordoned nodes unless the pod tolerates the unschedulable taint."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    @property
    def name(self) -> str:
        return names.NODE_UNSCHEDULABLE

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if not node_info.unschedulable:
            return None
        if tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return None
        return _REJECTED

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        if tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return None
        return class_filter_result(nodes, NODE_UNSCHEDULABLE, lambda cordoned: _REJECTED if cordoned else None)

    def filter_ignores_node_pods(self) -> bool:
        return True

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT, "NodeAdd|NodeTaintChange"
                ),
                self.is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS, "PodTolerationChange"),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue when a schedulable node is added or a node is uncordoned."""
        try:
            original, modified = as_nodes(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.SKIP if modified.spec_unschedulable else QueueingHint.QUEUE
        if original.spec_unschedulable and not modified.spec_unschedulable:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue when the rejected pod itself now tolerates the unschedulable taint."""
        try:
            _, modified = as_pods(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        if tolerations_tolerate_taint(modified.spec.tolerations, UNSCHEDULABLE_TAINT):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


if TYPE_CHECKING:

    def _conforms(plugin: NodeUnschedulable) -> tuple[BatchFilterPlugin, NodeOnlyFilter, EnqueueExtensions]:
        return plugin, plugin, plugin
