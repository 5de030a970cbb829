"""Per-pod backoff: initial · 2^(k−1) seconds capped at max, k = failures of the current kind.

kube-scheduler 1.34 counts unschedulable failures and consecutive errors separately; a pod whose last
failure was an Error backs off by its error count, otherwise by its unschedulable count.
"""

from __future__ import annotations

from kubesched.framework.interface import QueuedPodInfo


def backoff_duration(qpi: QueuedPodInfo, initial: float, maximum: float) -> float:
    count = qpi.consecutive_errors_count or qpi.unschedulable_count
    if count <= 0:
        return 0.0
    duration = initial
    for _ in range(count - 1):
        duration *= 2
        if duration >= maximum:
            return maximum
    return min(duration, maximum)


def backoff_expiry(qpi: QueuedPodInfo, initial: float, maximum: float) -> float:
    return qpi.timestamp + backoff_duration(qpi, initial, maximum)
