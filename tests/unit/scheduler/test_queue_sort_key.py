"""activeQ ordered by PrioritySort's sort key pops pods in exactly the order its ``less`` gives, through adds
at any time, pops and updates that keep or change the pod's place: checked against a model that picks, at
every pop, the least waiting pod by ``less``. Pods added at the same clock time are not tied: the queue's
timestamps grow with every pod it takes in, as kube-scheduler's clock does between two adds, so the model breaks
equal times by the order of the adds, whatever updates came since."""

from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.clock import VirtualClock
from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.types import PodInfo
from kubesched.plugins.queuesort import PrioritySort
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle

SORT = PrioritySort(None, PluginHandle())

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-2, 2)),
        st.tuples(st.just("tick"), st.sampled_from([0.0, 0.5, 1.0])),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("update"), st.integers(0, 30)),
        st.tuples(st.just("reprioritise"), st.integers(0, 30)),
    ),
    max_size=60,
)


def _run(ops: list[tuple[str, float]], model: bool) -> list[str]:
    clock = VirtualClock()
    queue = SchedulingQueue(SORT.less, clock, sort_key=SORT.sort_key)
    waiting: dict[str, tuple[QueuedPodInfo, int]] = {}  # the model: uid -> (pod, its place among the adds)
    arrivals = iter(range(10**6))
    pods: list[PodInfo] = []
    popped: list[str] = []

    def pop() -> str:
        if not model:
            qpi = queue.pop()
            return qpi.pod_info.name if qpi is not None else "-"
        if not waiting:
            return "-"

        def order(a: tuple[QueuedPodInfo, int], b: tuple[QueuedPodInfo, int]) -> int:
            if SORT.less(a[0], b[0]):
                return -1
            if SORT.less(b[0], a[0]):
                return 1
            return a[1] - b[1]

        least = min(waiting.values(), key=functools.cmp_to_key(order))[0]
        del waiting[least.pod_info.uid]
        return least.pod_info.name

    for op, value in ops:
        if op == "add":
            info = PodInfo(make_pod(f"p{len(pods)}").uid(f"u{len(pods)}").priority(int(value)).obj())
            pods.append(info)
            if model:
                waiting[info.uid] = (QueuedPodInfo(info, timestamp=clock.now()), next(arrivals))
            else:
                queue.add(info)
        elif op == "tick":
            clock.advance(value)
        elif op == "pop":
            popped.append(pop())
        elif pods:
            index = int(value) % len(pods)
            if op == "reprioritise":  # the same pod (uid) at another priority: its place changes
                old = pods[index]
                pods[index] = PodInfo(make_pod(old.name).uid(old.uid).priority(old.priority + 3).obj())
            info = pods[index]
            if not model:
                queue.update(info)
            elif info.uid in waiting:
                waiting[info.uid][0].pod_info = info
    while (name := pop()) != "-":
        popped.append(name)
    return popped


@settings(max_examples=200, deadline=None)
@given(operations)
def test_the_keyed_queue_pops_in_the_order_less_gives(ops: list[tuple[str, float]]) -> None:
    assert _run(ops, model=False) == _run(ops, model=True)


@given(st.integers(-3, 3), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 2.5]), st.sampled_from([0.0, 1.0, 2.5]))
def test_priority_sort_key_orders_as_less(pa: int, pb: int, ta: float, tb: float) -> None:
    a = QueuedPodInfo(PodInfo(make_pod("a").priority(pa).obj()), timestamp=ta)
    b = QueuedPodInfo(PodInfo(make_pod("b").priority(pb).obj()), timestamp=tb)
    assert SORT.less(a, b) == (SORT.sort_key(a) < SORT.sort_key(b))
    assert SORT.less(b, a) == (SORT.sort_key(b) < SORT.sort_key(a))
