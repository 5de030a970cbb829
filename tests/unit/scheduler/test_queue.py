from __future__ import annotations

import pytest

from kubesched.clock import VirtualClock
from kubesched.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.scheduler.queue.backoff import backoff_duration
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue
from kubesched.testing.builders import make_pod


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    if a.pod_info.priority != b.pod_info.priority:
        return a.pod_info.priority > b.pod_info.priority
    return (a.timestamp, a.stamp_order) < (b.timestamp, b.stamp_order)


def pod(name: str, priority: int = 0, gates: tuple[str, ...] = ()) -> PodInfo:
    builder = make_pod(name).priority(priority)
    if gates:
        builder = builder.gates(*gates)
    return PodInfo(builder.obj())


def gate_check(pod_info: PodInfo) -> Status | None:
    if pod_info.pod.spec.scheduling_gates:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin="SchedulingGates")
    return None


def new_queue(
    clock: VirtualClock, hints: dict[str, list[ClusterEventWithHint] | None] | None = None
) -> SchedulingQueue:
    return SchedulingQueue(priority_less, clock, pre_enqueue=gate_check, hints_for=lambda _pod: hints or {})


@pytest.mark.parametrize(
    ("unschedulable", "errors", "expected"),
    [
        pytest.param(0, 0, 0.0, id="never-failed-no-backoff"),
        pytest.param(1, 0, 1.0, id="first-failure-initial"),
        pytest.param(2, 0, 2.0, id="second-doubles"),
        pytest.param(4, 0, 8.0, id="fourth-eight"),
        pytest.param(5, 0, 10.0, id="capped-at-max"),
        pytest.param(30, 0, 10.0, id="large-count-capped"),
        pytest.param(3, 1, 1.0, id="errors-count-separately"),
    ],
)
def test_backoff_duration(unschedulable: int, errors: int, expected: float) -> None:
    qpi = QueuedPodInfo(pod("p"), timestamp=0.0, unschedulable_count=unschedulable, consecutive_errors_count=errors)
    assert backoff_duration(qpi, 1.0, 10.0) == expected


def test_pop_orders_by_priority_then_arrival() -> None:
    clock = VirtualClock()
    queue = new_queue(clock)
    queue.add(pod("low", 1))
    clock.advance(1)
    queue.add(pod("high-late", 10))
    queue.add(pod("low-late", 1))
    popped = []
    while (qpi := queue.pop()) is not None:
        popped.append(qpi.pod_info.name)
    assert popped == ["high-late", "low", "low-late"]


def test_gated_pod_waits_until_gates_removed() -> None:
    clock = VirtualClock()
    queue = new_queue(clock)
    queue.add(pod("g", gates=("x",)))
    assert queue.pop() is None
    assert queue.counts().gated == 1
    queue.update(pod("g"))
    qpi = queue.pop()
    assert qpi is not None and qpi.pod_info.name == "g"


def test_unschedulable_pod_moves_only_on_registered_event_with_queue_hint() -> None:
    clock = VirtualClock()

    def only_node_add(_pod: object, _old: object, new: object) -> QueueingHint:
        return QueueingHint.QUEUE

    hints: dict[str, list[ClusterEventWithHint] | None] = {
        "NodeResourcesFit": [ClusterEventWithHint(NODE_ADD, only_node_add)]
    }
    queue = new_queue(clock, hints)
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"NodeResourcesFit"}, pending=(), error=False)
    assert queue.counts().unschedulable == 1
    queue.on_event(ASSIGNED_POD_ADD)
    assert queue.counts().unschedulable == 1, "an event the plugin did not register must not move the pod"
    queue.on_event(NODE_ADD)
    assert queue.counts().unschedulable == 0
    assert queue.counts().backoff == 1
    # Pops from backoffQ when activeQ is empty (kube-scheduler 1.33+ SchedulerPopFromBackoffQ).
    again = queue.pop()
    assert again is not None and again.attempts == 2


def test_skip_hint_keeps_pod_in_unschedulable_pool() -> None:
    clock = VirtualClock()
    hints: dict[str, list[ClusterEventWithHint] | None] = {
        "P": [ClusterEventWithHint(NODE_ADD, lambda *_: QueueingHint.SKIP)]
    }
    queue = new_queue(clock, hints)
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"P"}, pending=(), error=False)
    queue.on_event(NODE_ADD)
    assert queue.counts().unschedulable == 1


def test_plugin_without_registration_requeues_on_any_event() -> None:
    clock = VirtualClock()
    queue = new_queue(clock, {"P": None})
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"P"}, pending=(), error=False)
    queue.on_event(ASSIGNED_POD_DELETE)
    assert queue.counts().unschedulable == 0


def test_pending_plugin_queue_goes_straight_to_active() -> None:
    clock = VirtualClock()
    queue = new_queue(clock, {"P": [ClusterEventWithHint(NODE_ADD)]})
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by=(), pending={"P"}, error=False)
    queue.on_event(NODE_ADD)
    assert queue.counts().active == 1


def test_event_during_attempt_is_replayed_on_failure() -> None:
    clock = VirtualClock()
    queue = new_queue(clock, {"P": [ClusterEventWithHint(NODE_ADD)]})
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.on_event(NODE_ADD)  # happens while p is in flight
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"P"}, pending=(), error=False)
    assert queue.counts().unschedulable == 0
    assert queue.counts().backoff == 1


def test_error_backoff_not_popped_early_and_released_after_expiry() -> None:
    clock = VirtualClock()
    queue = new_queue(clock)
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by=(), pending=(), error=True)
    assert queue.pop() is None
    # Its 1 s backoff ends in the window starting 1 s from now; it is released when the next window begins.
    assert queue.next_backoff_expiry() == pytest.approx(clock.now() + 2.0)
    clock.advance(1.5)
    assert queue.pop() is None
    clock.advance(0.5)
    again = queue.pop()
    assert again is not None and again.consecutive_errors_count == 1


def test_unschedulable_timeout_flush_after_five_minutes() -> None:
    clock = VirtualClock()
    queue = new_queue(clock, {"P": [ClusterEventWithHint(NODE_ADD)]})
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"P"}, pending=(), error=False)
    clock.advance(299)
    queue.flush_unschedulable_left_over()
    assert queue.counts().unschedulable == 1
    clock.advance(2)
    queue.flush_unschedulable_left_over()
    assert queue.counts().unschedulable == 0


def test_activate_moves_to_active_and_delete_forgets() -> None:
    clock = VirtualClock()
    queue = new_queue(clock, {"P": [ClusterEventWithHint(ClusterEvent(EventResource.NODE, NODE_ADD.action))]})
    info = pod("p")
    queue.add(info)
    qpi = queue.pop()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"P"}, pending=(), error=False)
    queue.activate([info.uid])
    assert queue.counts().active == 1
    queue.delete(info.uid)
    assert queue.pop() is None


def test_an_event_no_rejecting_plugin_registered_evaluates_no_hint() -> None:
    """1000 pods rejected by a plugin registered for NodeAdd only: a bind (AssignedPodAdd) looks at none of
    them; a NodeAdd asks the hint once per pod and moves them all."""
    clock = VirtualClock()
    calls: list[str] = []

    def counting(pod: object, _old: object, _new: object) -> QueueingHint:
        calls.append("hint")
        return QueueingHint.QUEUE

    queue = new_queue(clock, {"NodeResourcesFit": [ClusterEventWithHint(NODE_ADD, counting)]})
    for i in range(1000):
        queue.add(pod(f"p{i}"))
        qpi = queue.pop()
        assert qpi is not None
        queue.add_unschedulable_if_not_present(qpi, rejected_by={"NodeResourcesFit"}, pending=(), error=False)
    queue.on_event(ASSIGNED_POD_ADD)
    assert (len(calls), queue.counts().unschedulable) == (0, 1000)
    queue.on_event(NODE_ADD)
    assert (len(calls), queue.counts().unschedulable, queue.counts().backoff) == (1000, 0, 1000)


def test_pods_rejected_by_different_plugins_are_requeued_in_the_order_they_were_parked() -> None:
    clock = VirtualClock()
    queue = new_queue(clock, {"P": [ClusterEventWithHint(NODE_ADD)], "Q": [ClusterEventWithHint(NODE_ADD)]})
    for name, plugin in (("a", "P"), ("b", "Q"), ("c", "P"), ("d", "Q")):
        queue.add(pod(name))
        qpi = queue.pop()
        assert qpi is not None
        queue.add_unschedulable_if_not_present(qpi, rejected_by=(), pending={plugin}, error=False)
    queue.on_event(NODE_ADD)  # pending plugins' QUEUE skips backoff: all four go to activeQ, in order
    popped = []
    while (qpi := queue.pop()) is not None:
        popped.append(qpi.pod_info.name)
    assert popped == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("steps", "failing", "replayed"),
    [
        pytest.param(["pop a", "pop b", "event", "done a"], "b", True, id="event-just-after-the-oldest-attempt-starts"),
        pytest.param(["pop a", "event", "pop b", "done a"], "b", False, id="event-before-the-attempt-started"),
        pytest.param(["pop a", "pop b", "event", "done b"], "a", True, id="a-later-attempt-completes-first"),
        pytest.param(["pop a", "pop b", "pop c", "event", "done a", "done c"], "b", True, id="two-completions-around"),
        pytest.param(["pop a", "event", "pop b", "done a", "pop c", "done c"], "b", False, id="trimmed-once-unneeded"),
        pytest.param(
            ["pop a", "event", "pop b", "event", "done a"], "b", True, id="trim-keeps-the-event-after-the-oldest-start"
        ),
        pytest.param(["pop a", "event", "pop b", "pop c", "done b"], "a", True, id="the-oldest-is-the-first-popped"),
    ],
)
def test_events_are_replayed_to_exactly_the_attempts_in_flight_when_they_happened(
    steps: list[str], failing: str, replayed: bool
) -> None:
    """Completions trim the event log to what the oldest attempt still in flight may need: an event is replayed
    to a failed attempt if and only if it happened after that attempt was popped."""
    clock = VirtualClock()
    queue = new_queue(clock, {"P": [ClusterEventWithHint(NODE_ADD)]})
    for name in ("a", "b", "c"):
        queue.add(pod(name))
    popped: dict[str, QueuedPodInfo] = {}
    for step in steps:
        action, _, name = step.partition(" ")
        if action == "pop":
            qpi = queue.pop()
            assert qpi is not None and qpi.pod_info.name == name
            popped[name] = qpi
        elif action == "event":
            queue.on_event(NODE_ADD)
        else:
            queue.done(popped[name].pod_info.uid)
    queue.add_unschedulable_if_not_present(popped[failing], rejected_by={"P"}, pending=(), error=False)
    assert (queue.counts().backoff, queue.counts().unschedulable) == ((1, 0) if replayed else (0, 1))


def test_a_pod_leaving_the_unschedulable_pool_passes_pre_enqueue_again() -> None:
    """Upstream's moveToActiveQ and moveToBackoffQ run the PreEnqueue plugins: a preemptor requeued while its
    preemption is still being carried out (DefaultPreemption's PreEnqueue) is held back, and the next event its
    rejecting plugin's hint queues it for lets it go once PreEnqueue admits it."""
    clock = VirtualClock()
    preempting: set[str] = set()

    def pre_enqueue(pod_info: PodInfo) -> Status | None:
        if pod_info.uid in preempting:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting", plugin="DefaultPreemption")
        return None

    hints: dict[str, list[ClusterEventWithHint] | None] = {
        "NodeResourcesFit": [ClusterEventWithHint(ASSIGNED_POD_DELETE)],
        "DefaultPreemption": [ClusterEventWithHint(ASSIGNED_POD_DELETE, lambda *_: QueueingHint.SKIP)],
    }
    queue = SchedulingQueue(priority_less, clock, pre_enqueue=pre_enqueue, hints_for=lambda _pod: hints)
    info = pod("preemptor")
    queue.add(info)
    qpi = queue.pop()
    assert qpi is not None
    preempting.add(info.uid)
    queue.on_event(ASSIGNED_POD_DELETE)  # the first victim goes while the attempt is in flight
    queue.add_unschedulable_if_not_present(qpi, rejected_by={"NodeResourcesFit"}, pending=(), error=False)
    assert queue.counts().gated == 1 and queue.pop() is None, "held back: its preemption is still running"
    queue.on_event(ASSIGNED_POD_DELETE)
    assert queue.counts().gated == 1, "still running: PreEnqueue holds it again"
    preempting.clear()
    queue.on_event(ASSIGNED_POD_DELETE)  # the last victim: NodeResourcesFit's hint queues it, PreEnqueue admits
    assert queue.counts().gated == 0 and queue.counts().backoff == 1
    again = queue.pop()
    assert again is not None and again.attempts == 2


def test_backoff_q_pops_a_window_s_pods_in_active_q_order() -> None:
    """Backoff expiries are aligned to 1 s windows and, within one, pods leave in activeQ's order (priority, then
    arrival), as kube-scheduler's backoffQ does with SchedulerPopFromBackoffQ: the high-priority pod that failed
    last is popped first once activeQ is empty."""
    clock = VirtualClock(1000.25)
    queue = new_queue(clock, {"P": [ClusterEventWithHint(NODE_ADD)]})
    for name, priority in (("low", 1), ("high", 100)):
        queue.add(pod(name, priority))
    popped = []
    for _ in range(2):
        qpi = queue.pop()
        assert qpi is not None
        popped.append(qpi)
    for qpi in reversed(popped):  # high's attempt ends after low's
        clock.advance(0.1)
        queue.add_unschedulable_if_not_present(qpi, rejected_by={"P"}, pending=(), error=False)
    queue.on_event(NODE_ADD)
    assert queue.counts().backoff == 2
    assert [qpi.pod_info.name for qpi in (queue.pop(), queue.pop()) if qpi is not None] == ["high", "low"]


def test_pods_failing_at_the_same_clock_time_leave_backoff_q_in_the_order_they_failed() -> None:
    """A virtual clock that stands still: "first" fails before "second", but an event moves "second" back first.
    kube-scheduler's clock moves between the two failures, so activeQ's order (priority, then the time of the
    failure) puts "first" ahead in backoffQ's window; the order the events moved them must not decide."""
    clock = VirtualClock(1000.25)
    queue = new_queue(
        clock, {"First": [ClusterEventWithHint(NODE_ADD)], "Second": [ClusterEventWithHint(ASSIGNED_POD_ADD)]}
    )
    for name in ("first", "second"):
        queue.add(pod(name, 5))
    for plugin in ("First", "Second"):
        qpi = queue.pop()
        assert qpi is not None
        queue.add_unschedulable_if_not_present(qpi, rejected_by={plugin}, pending=(), error=False)
    queue.on_event(ASSIGNED_POD_ADD)  # moves "second"
    queue.on_event(NODE_ADD)  # moves "first"
    assert queue.counts().backoff == 2
    assert [qpi.pod_info.name for qpi in (queue.pop(), queue.pop()) if qpi is not None] == ["first", "second"]
