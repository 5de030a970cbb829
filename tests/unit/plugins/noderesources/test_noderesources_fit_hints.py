"""NodeResourcesFit's registered events and queueing hints against fit_test.go (TestEventsToRegister,
Test_isSchedulableAfterPodChange, Test_isSchedulableAfterNodeChange), with QueueingHints and
InPlacePodVerticalScaling on as in kube-scheduler v1.33."""

from __future__ import annotations

import pytest

from kubesched.api.objects import Node, Pod
from kubesched.framework.events import ActionType, ClusterEvent, EventResource, QueueingHint
from kubesched.plugins.noderesources import Fit
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"


@pytest.fixture
def plugin() -> Fit:
    return Fit(None, PluginHandle())


def test_events_to_register(plugin: Fit) -> None:
    events = [registration.event for registration in plugin.events_to_register()]
    assert [(e.resource, e.action) for e in events] == [
        (EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
    ]
    assert all(registration.hint is not None for registration in plugin.events_to_register())


def test_registrations_match_the_events_the_scheduler_emits(plugin: Fit) -> None:
    pod_delete, node_change = (registration.event for registration in plugin.events_to_register())
    assert pod_delete.matches(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE))
    assert node_change.matches(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE))
    assert not node_change.matches(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL))


def cpu_pod(name: str, cpu: str, node: str = "") -> Pod:
    builder = make_pod(name).req(cpu=cpu)
    return (builder.node_name(node) if node else builder).obj()


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        pytest.param(make_pod().obj(), "not-a-pod", None, QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(make_pod().obj(), None, "not-a-pod", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(
            cpu_pod("pod1", "1"),
            cpu_pod("pod2", "1", "fake"),
            None,
            QueueingHint.QUEUE,
            id="queue-on-other-pod-deleted",
        ),
        pytest.param(
            make_pod("pod1").obj(),
            make_pod("pod2").obj(),
            None,
            QueueingHint.SKIP,
            id="skip-queue-on-unscheduled-pod-deleted",
        ),
        pytest.param(
            cpu_pod("pod1", "1"),
            cpu_pod("pod2", "2"),
            cpu_pod("pod2", "1"),
            QueueingHint.SKIP,
            id="skip-queue-on-other-unscheduled-pod",
        ),
        pytest.param(
            make_pod("pod1").obj(),
            make_pod("pod2").label("k", "v").node_name("fake").obj(),
            make_pod("pod2").label("foo", "bar").node_name("fake").obj(),
            QueueingHint.SKIP,
            id="skip-queue-on-other-pod-non-resource-changes",
        ),
        pytest.param(
            cpu_pod("pod1", "1"),
            make_pod("pod2").req(memory="2").node_name("fake").obj(),
            make_pod("pod2").req(memory="1").node_name("fake").obj(),
            QueueingHint.SKIP,
            id="skip-queue-on-other-pod-unrelated-resource-changes",
        ),
        pytest.param(
            cpu_pod("pod1", "1"),
            cpu_pod("pod2", "1", "fake"),
            cpu_pod("pod2", "2", "fake"),
            QueueingHint.SKIP,
            id="skip-queue-on-other-pod-resource-scale-up",
        ),
        pytest.param(
            cpu_pod("pod1", "1"),
            cpu_pod("pod2", "2", "fake"),
            cpu_pod("pod2", "1", "fake"),
            QueueingHint.QUEUE,
            id="queue-on-other-pod-some-resource-scale-down",
        ),
        pytest.param(
            cpu_pod("pod1", "1"),
            cpu_pod("pod1", "2"),
            cpu_pod("pod1", "1"),
            QueueingHint.QUEUE,
            id="queue-on-target-pod-some-resource-scale-down",
        ),
    ],
)
def test_is_schedulable_after_pod_event(plugin: Fit, pod: Pod, old: object, new: object, want: QueueingHint) -> None:
    assert plugin.is_schedulable_after_pod_event(pod, old, new) is want  # type: ignore[arg-type]


def capacity_node(resources: dict[str, str | int]) -> Node:
    """st.MakeNode().Capacity({...}): room for 32 pods plus the given resources."""
    return make_node("node").capacity(resources, pods=32).obj()


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        pytest.param(make_pod().obj(), None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(
            make_pod().obj(), "not-a-node", make_node().obj(), QueueingHint.QUEUE, id="backoff-wrong-old-object"
        ),
        pytest.param(
            make_pod().req(memory="2").obj(),
            None,
            capacity_node({"memory": "1"}),
            QueueingHint.SKIP,
            id="skip-queue-on-node-add-without-sufficient-resources",
        ),
        pytest.param(
            make_pod().req({EXT_A: 1}).obj(),
            None,
            capacity_node({EXT_B: "1"}),
            QueueingHint.SKIP,
            id="skip-queue-on-node-add-without-required-resource-type",
        ),
        pytest.param(
            make_pod().req({EXT_A: 1}, memory="2").obj(),
            None,
            capacity_node({"memory": "4", EXT_A: "2"}),
            QueueingHint.QUEUE,
            id="queue-on-node-add-with-sufficient-resources",
        ),
        pytest.param(
            make_pod().req({EXT_A: 1}, memory="2").obj(),
            capacity_node({"memory": "4", EXT_A: "2"}),
            capacity_node({"memory": "1", EXT_A: "2"}),
            QueueingHint.SKIP,
            id="skip-queue-on-node-changes-from-suitable-to-unsuitable",
        ),
        pytest.param(
            make_pod().req({EXT_A: 1}, memory="2").obj(),
            capacity_node({"memory": "1", EXT_A: "2"}),
            capacity_node({"memory": "4", EXT_A: "2"}),
            QueueingHint.QUEUE,
            id="queue-on-node-changes-from-unsuitable-to-suitable",
        ),
        pytest.param(
            make_pod().req(cpu="1").obj(),
            capacity_node({"cpu": "2"}),
            make_node("node").capacity(cpu="2", pods=32).label("foo", "bar").obj(),
            QueueingHint.SKIP,
            id="skip-queue-when-fitting-node-gains-nothing-the-pod-asks-for",
        ),
    ],
)
def test_is_schedulable_after_node_change(plugin: Fit, pod: Pod, old: object, new: object, want: QueueingHint) -> None:
    assert plugin.is_schedulable_after_node_change(pod, old, new) is want  # type: ignore[arg-type]
