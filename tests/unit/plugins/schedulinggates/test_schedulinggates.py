"""SchedulingGates against scheduling_gates_test.go (TestPreEnqueue) and its queueing hint."""

from __future__ import annotations

import pytest

from kubesched.api.objects import Pod
from kubesched.framework.events import ActionType, ClusterEvent, EventResource, QueueingHint
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.schedulinggates import SchedulingGates
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle


@pytest.fixture
def plugin() -> SchedulingGates:
    return SchedulingGates(None, PluginHandle())


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod("p").obj(), None, id="pod-without-scheduling-gates-enters"),
        pytest.param(
            make_pod("p").gates("foo", "bar").obj(),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [foo bar]"),
            id="pod-with-scheduling-gates-waits",
        ),
    ],
)
def test_pre_enqueue(plugin: SchedulingGates, pod: Pod, want: Status | None) -> None:
    assert plugin.pre_enqueue(PodInfo(pod)) == want


def test_registers_unscheduled_pod_updates_that_remove_gates(plugin: SchedulingGates) -> None:
    (registration,) = plugin.events_to_register()
    assert registration.event.matches(
        ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE, "UnscheduledPodUpdate")
    )
    assert not registration.event.matches(ClusterEvent(EventResource.NODE, ActionType.ADD))


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            make_pod("p").gates("foo").obj(), make_pod("p").obj(), QueueingHint.QUEUE, id="queue-when-all-gates-removed"
        ),
        pytest.param(
            make_pod("p").gates("foo", "bar").obj(),
            make_pod("p").gates("bar").obj(),
            QueueingHint.SKIP,
            id="skip-while-a-gate-remains",
        ),
        pytest.param(
            make_pod("other").gates("foo").obj(), make_pod("other").obj(), QueueingHint.SKIP, id="skip-other-pods"
        ),
        pytest.param(None, "not-a-pod", QueueingHint.QUEUE, id="queue-on-wrong-object-type"),
    ],
)
def test_is_schedulable_after_pod_change(plugin: SchedulingGates, old: object, new: object, want: QueueingHint) -> None:
    pod = make_pod("p").gates("foo").obj()
    assert plugin.is_schedulable_after_pod_change(pod, old, new) is want  # type: ignore[arg-type]
