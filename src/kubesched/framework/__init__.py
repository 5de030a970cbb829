"""The public plugin API: what a plugin author imports.

A plugin is any object with a ``name`` and the methods of the extension points it serves (one Protocol
per point in :mod:`kubesched.framework.interface`); it returns ``None`` for success and a
:class:`Status` to reject. The runtime that runs plugins lives in :mod:`kubesched.framework.runtime`.
"""

from kubesched.framework.cycle_state import CycleState as CycleState
from kubesched.framework.events import ActionType as ActionType
from kubesched.framework.events import ClusterEvent as ClusterEvent
from kubesched.framework.events import ClusterEventWithHint as ClusterEventWithHint
from kubesched.framework.events import EventResource as EventResource
from kubesched.framework.events import QueueingHint as QueueingHint
from kubesched.framework.interface import MAX_NODE_SCORE as MAX_NODE_SCORE
from kubesched.framework.interface import FilterPrefetcher as FilterPrefetcher
from kubesched.framework.interface import Handle as Handle
from kubesched.framework.interface import QueuedPodInfo as QueuedPodInfo
from kubesched.framework.listers import Listers as Listers
from kubesched.framework.node_table import BatchFilterResult as BatchFilterResult
from kubesched.framework.node_table import NodeBatch as NodeBatch
from kubesched.framework.runtime.registry import PluginRegistration as PluginRegistration
from kubesched.framework.snapshot import Snapshot as Snapshot
from kubesched.framework.status import Code as Code
from kubesched.framework.status import Status as Status
from kubesched.framework.types import NodeInfo as NodeInfo
from kubesched.framework.types import PodInfo as PodInfo
from kubesched.framework.types import PreFilterResult as PreFilterResult

__all__ = [
    "MAX_NODE_SCORE",
    "ActionType",
    "BatchFilterResult",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "CycleState",
    "EventResource",
    "FilterPrefetcher",
    "Handle",
    "Listers",
    "NodeBatch",
    "NodeInfo",
    "PluginRegistration",
    "PodInfo",
    "PreFilterResult",
    "QueuedPodInfo",
    "QueueingHint",
    "Snapshot",
    "Status",
]
