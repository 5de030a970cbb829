"""PrioritySort (QueueSort): higher ``spec.priority`` first; equal priorities in queue-timestamp order (equal
timestamps in the order the queue took them, ``QueuedPodInfo.stamp_order``).

The scheduling queue orders activeQ by ``sort_key`` (the same order as ``less``, compared without a Python
call per comparison); exactly one QueueSort plugin serves all profiles.
A pod without ``spec.priority`` counts as priority 0 (PodInfo.priority already applies that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.framework.interface import QueuedPodInfo
from kubesched.plugins import names

if TYPE_CHECKING:
    from kubesched.framework.interface import Handle, KeyedQueueSortPlugin


class PrioritySort:
    """QueueSort: higher priority first, then the pod that entered the queue earlier."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    @property
    def name(self) -> str:
        return names.PRIORITY_SORT

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa = a.pod_info.priority
        pb = b.pod_info.priority
        return pa > pb or (pa == pb and (a.timestamp, a.stamp_order) < (b.timestamp, b.stamp_order))

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[object, ...]:
        return (-qpi.pod_info.priority, qpi.timestamp, qpi.stamp_order)


if TYPE_CHECKING:

    def _conforms(plugin: PrioritySort) -> KeyedQueueSortPlugin:
        return plugin
