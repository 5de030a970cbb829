"""PrioritySort against priority_sort_test.go (TestLess)."""

from __future__ import annotations

import pytest

from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.types import PodInfo
from kubesched.plugins.queuesort import PrioritySort
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle

LOW, HIGH = 10, 100
T1, T2 = 1_700_000_000.0, 1_700_000_001.0


def queued(priority: int | None, timestamp: float = T1) -> QueuedPodInfo:
    builder = make_pod()
    if priority is not None:
        builder.priority(priority)
    return QueuedPodInfo(PodInfo(builder.obj()), timestamp)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        pytest.param(queued(LOW), queued(HIGH), False, id="p1-priority-less-than-p2"),
        pytest.param(queued(HIGH), queued(LOW), True, id="p1-priority-greater-than-p2"),
        pytest.param(queued(HIGH, T1), queued(HIGH, T2), True, id="equal-priority-p1-queued-earlier"),
        pytest.param(queued(HIGH, T2), queued(HIGH, T1), False, id="equal-priority-p2-queued-earlier"),
        pytest.param(queued(None), queued(-1), True, id="missing-priority-counts-as-zero"),
        pytest.param(queued(HIGH, T1), queued(HIGH, T1), False, id="identical-is-not-less"),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, want: bool) -> None:
    assert PrioritySort(None, PluginHandle()).less(a, b) is want
