"""NodeName (Filter): when ``spec.nodeName`` is set, every other node is UnschedulableAndUnresolvable.

Run by the framework for every candidate node; the batch form compares the names through a class column
keyed by node name, so it costs one list lookup plus one array comparison per cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import NODE_ADD, ClusterEventWithHint
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.classes import NODE_NAME

if TYPE_CHECKING:
    from kubesched.framework.interface import BatchFilterPlugin, EnqueueExtensions, Handle, NodeOnlyFilter

ERR_REASON = "node(s) didn't match the requested node name"
_REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)


class NodeName:
    """Filter: the node must be the one named by ``spec.nodeName``, if the pod names one."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    @property
    def name(self) -> str:
        return names.NODE_NAME

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        wanted = pod.node_name
        if not wanted or wanted == node_info.name:
            return None
        return _REJECTED

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        wanted = pod.node_name
        if not wanted:
            return None
        column = nodes.table.class_column(NODE_NAME.name, NODE_NAME.key_fn)
        try:
            target = column.values.index(wanted)
        except ValueError:
            target = -1  # no node of that name: every candidate fails
        codes = (column.ids[nodes.slots] != target).astype(np.int64)
        return BatchFilterResult(codes, [_REJECTED]) if codes.any() else None

    def filter_ignores_node_pods(self) -> bool:
        return True

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # Only a new node can be the named one; no hint needed (Queue), as upstream with QueueingHints on.
        return [ClusterEventWithHint(NODE_ADD)]


if TYPE_CHECKING:

    def _conforms(plugin: NodeName) -> tuple[BatchFilterPlugin, NodeOnlyFilter, EnqueueExtensions]:
        return plugin, plugin, plugin
