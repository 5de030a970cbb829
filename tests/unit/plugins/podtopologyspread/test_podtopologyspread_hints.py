"""PodTopologySpread's queueing hints against plugin_test.go (Test_isSchedulableAfterNodeChange,
Test_isSchedulableAfterPodChange), plus the v1.35 additions of plugin.go: a node's taint change and the pod's
own new tolerations when a constraint honours taints; and the events it registers."""

from __future__ import annotations

import pytest
from spreadtest_helpers import BAR, DNS, FOO, HONOR, UNSCHEDULABLE_TAINT, Run, constraint, node_in, pod

from kubesched.api.objects import Node, Pod
from kubesched.framework.events import ActionType, EventResource, QueueingHint

Q, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
ZONE = constraint(1, "zone", DNS, FOO)
NODE = constraint(1, "node", DNS, FOO)
ONE = pod("p", {}, ZONE)
TWO = pod("p", {}, ZONE, NODE)


def _plugin() -> Run:
    return Run([])


NODE_CASES = [
    pytest.param(
        ONE,
        node_in("node-a", {"zone": "zone1"}),
        node_in("node-a", {"zone": "zone2"}),
        Q,
        id="node-updates-label-which-matches-topology-key",
    ),
    pytest.param(
        ONE,
        node_in("node-a", {"foo": "bar1"}),
        node_in("node-a", {"foo": "bar2"}),
        SKIP,
        id="node-that-doesnt-match-updates-non-related-label",
    ),
    pytest.param(
        TWO,
        node_in("node-a", {"zone": "zone1", "node": "node1", "foo": "bar"}),
        node_in("node-a", {"zone": "zone1", "node": "node1"}),
        SKIP,
        id="node-that-matches-changes-a-non-related-label",
    ),
    pytest.param(ONE, None, node_in("node-a", {"foo": "bar"}), SKIP, id="create-node-with-non-related-labels"),
    pytest.param(ONE, None, node_in("node-a", {"zone": "zone1"}), Q, id="create-node-with-related-labels"),
    pytest.param(ONE, node_in("node-a", {"foo": "bar"}), None, SKIP, id="delete-node-with-non-related-labels"),
    pytest.param(ONE, node_in("node-a", {"zone": "zone1"}), None, Q, id="delete-node-with-related-labels"),
    pytest.param(
        TWO, None, node_in("node-a", {"zone": "zone1"}), SKIP, id="add-node-matching-only-one-of-the-constraints"
    ),
    pytest.param(
        TWO, None, node_in("node-a", {"zone": "zone1", "node": "node1"}), Q, id="add-node-matching-all-constraints"
    ),
    pytest.param(
        TWO,
        node_in("node-a", {"zone": "zone1"}),
        node_in("node-a", {"zone": "zone1"}),
        SKIP,
        id="update-node-matching-only-one-of-the-constraints",
    ),
    pytest.param(
        TWO,
        node_in("node-a", {"zone": "zone1", "node": "node1"}),
        node_in("node-a", {"zone": "zone1", "node": "node2"}),
        Q,
        id="update-node-matching-all-constraints-changes-a-topology-value",
    ),
    pytest.param(
        ONE,
        node_in("node-a", {"zone": "zone1"}),
        node_in("node-a", {"zone": "zone1"}, taints=[UNSCHEDULABLE_TAINT]),
        Q,
        id="matching-node-changes-its-taints",
    ),
    pytest.param(
        ONE,
        node_in("node-a", {"foo": ""}),
        node_in("node-a", {"foo": ""}, taints=[UNSCHEDULABLE_TAINT]),
        SKIP,
        id="non-matching-node-changes-its-taints",
    ),
]


@pytest.mark.parametrize(("target", "old", "new", "want"), NODE_CASES)
def test_is_schedulable_after_node_change(target: Pod, old: Node | None, new: Node | None, want: QueueingHint) -> None:
    assert _plugin().plugin.is_schedulable_after_node_change(target, old, new) is want


def assigned(name: str, labels: dict[str, str], *, namespace: str = "default") -> Pod:
    return pod(name, labels, node="fake-node", namespace=namespace)


TARGET = pod("p", {"foo": ""}, ZONE)
TARGET_FOO_BAR = pod("p", {"foo": ""}, ZONE, constraint(1, "node", DNS, BAR))

POD_CASES = [
    pytest.param(TARGET, None, assigned("q", {"foo": ""}), Q, id="add-pod-with-labels-matching-the-selector"),
    pytest.param(TARGET, None, pod("q", {"foo": ""}), SKIP, id="add-unscheduled-pod"),
    pytest.param(TARGET, pod("q", {"bar": ""}), pod("q", {"foo": ""}), SKIP, id="update-unscheduled-pod"),
    pytest.param(TARGET, pod("q", {"foo": ""}), None, SKIP, id="delete-unscheduled-pod"),
    pytest.param(
        TARGET,
        None,
        assigned("q", {"foo": ""}, namespace="fake-namespace"),
        SKIP,
        id="add-pod-with-different-namespace",
    ),
    pytest.param(TARGET, None, assigned("q", {"bar": ""}), SKIP, id="add-pod-with-labels-not-matching-the-selector"),
    pytest.param(TARGET, assigned("q", {"foo": ""}), None, Q, id="delete-pod-with-labels-matching-the-selector"),
    pytest.param(TARGET, assigned("q", {"bar": ""}), None, SKIP, id="delete-pod-with-labels-not-matching-the-selector"),
    pytest.param(
        TARGET,
        assigned("q", {"foo": "", "bar": "bar1"}),
        assigned("q", {"foo": "", "bar": "bar2"}),
        SKIP,
        id="update-pods-non-related-label",
    ),
    pytest.param(TARGET, assigned("q", {}), assigned("q", {"foo": ""}), Q, id="add-pods-label-matching-the-selector"),
    pytest.param(
        TARGET, assigned("q", {"foo": ""}), assigned("q", {}), Q, id="delete-pods-label-matching-the-selector"
    ),
    pytest.param(
        TARGET,
        assigned("q", {"foo": "foo1"}),
        assigned("q", {"foo": "foo2"}),
        SKIP,
        id="change-pods-label-value-that-still-matches-the-selector",
    ),
    pytest.param(
        TARGET_FOO_BAR,
        assigned("q", {"foo": ""}),
        assigned("q", {"foo": "", "bar": "bar2"}),
        Q,
        id="add-label-matching-the-second-of-multiple-constraints",
    ),
    pytest.param(
        TARGET_FOO_BAR,
        assigned("q", {"foo": ""}),
        assigned("q", {"foo": "", "baz": ""}),
        SKIP,
        id="add-label-matching-none-of-multiple-constraints",
    ),
    pytest.param(
        TARGET_FOO_BAR,
        assigned("q", {"foo": "", "bar": ""}),
        assigned("q", {"foo": "", "bar": "bar2"}),
        SKIP,
        id="change-label-value-still-matching-multiple-constraints",
    ),
]


@pytest.mark.parametrize(("target", "old", "new", "want"), POD_CASES)
def test_is_schedulable_after_pod_change(target: Pod, old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    assert _plugin().plugin.is_schedulable_after_pod_change(target, old, new) is want


def test_own_new_toleration_requeues_only_when_a_constraint_honours_taints() -> None:
    honoring = pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO, taints_policy=HONOR))
    tolerating = pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO, taints_policy=HONOR), tolerate=["t"])
    plugin = _plugin().plugin
    assert plugin.is_schedulable_after_pod_change(honoring, honoring, tolerating) is Q
    plain = pod("p", {"foo": ""}, ZONE)
    plain_tolerating = pod("p", {"foo": ""}, ZONE, tolerate=["t"])
    assert plugin.is_schedulable_after_pod_change(plain, plain, plain_tolerating) is SKIP


def test_a_constraint_that_cannot_be_read_queues() -> None:
    broken = pod("p", {}, constraint(1, "zone", DNS, {"matchExpressions": [{"key": "a", "operator": "Gt"}]}))
    plugin = _plugin().plugin
    assert plugin.is_schedulable_after_node_change(broken, None, node_in("n", {})) is Q
    assert plugin.is_schedulable_after_pod_change(broken, None, assigned("q", {})) is Q


def test_events_to_register() -> None:
    events = _plugin().plugin.events_to_register()
    pod_event, node_event = (e.event for e in events)
    assert pod_event.resource is EventResource.POD
    assert pod_event.action == (
        ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATIONS | ActionType.DELETE
    )
    assert node_event.resource is EventResource.NODE
    assert node_event.action == (
        ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
    )
    assert all(e.hint is not None for e in events)
