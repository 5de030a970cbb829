"""NodeUnschedulable against node_unschedulable_test.go (TestNodeUnschedulable,
TestIsSchedulableAfterNodeChange) plus its toleration-change hint, per node and in batch."""

from __future__ import annotations

import pytest

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.nodeunschedulable import NodeUnschedulable
from kubesched.plugins.nodeunschedulable.node_unschedulable import ERR_REASON_UNSCHEDULABLE
from kubesched.testing.builders import NodeBuilder, PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch, make_cluster

REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE)
UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"


@pytest.fixture
def plugin() -> NodeUnschedulable:
    return NodeUnschedulable(None, PluginHandle())


@pytest.mark.parametrize(
    ("pod", "node", "want"),
    [
        pytest.param(make_pod(), make_node().unschedulable(), REJECTED, id="does-not-schedule-to-unschedulable-node"),
        pytest.param(make_pod(), make_node().unschedulable(False), None, id="schedules-to-normal-node"),
        pytest.param(
            make_pod().toleration(UNSCHEDULABLE_KEY, operator="Exists", effect="NoSchedule"),
            make_node().unschedulable(),
            None,
            id="pod-tolerating-unschedulable-taint-schedules-to-unschedulable-node",
        ),
        pytest.param(
            make_pod().toleration(operator="Exists"),
            make_node().unschedulable(),
            None,
            id="tolerate-everything-toleration-schedules-to-unschedulable-node",
        ),
        pytest.param(
            make_pod().toleration(UNSCHEDULABLE_KEY, operator="Exists", effect="NoExecute"),
            make_node().unschedulable(),
            REJECTED,
            id="toleration-for-another-effect-does-not-help",
        ),
    ],
)
def test_node_unschedulable(plugin: NodeUnschedulable, pod: PodBuilder, node: NodeBuilder, want: Status | None) -> None:
    _, snapshot = make_cluster([node.obj()])
    info = PodInfo(pod.obj())
    assert filter_nodes(plugin, CycleState(), info, snapshot) == [want]
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == [want]


def test_batch_mixes_cordoned_and_schedulable_nodes(plugin: NodeUnschedulable) -> None:
    nodes = [make_node("a").obj(), make_node("b").unschedulable().obj(), make_node("c").obj()]
    _, snapshot = make_cluster(nodes)
    info = PodInfo(make_pod().obj())
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == [None, REJECTED, None]


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(
            "not-a-node", make_node().unschedulable().obj(), QueueingHint.QUEUE, id="backoff-wrong-old-object"
        ),
        pytest.param(
            None, make_node().unschedulable().obj(), QueueingHint.SKIP, id="skip-queue-on-unschedulable-node-added"
        ),
        pytest.param(None, make_node().obj(), QueueingHint.QUEUE, id="queue-on-schedulable-node-added"),
        pytest.param(
            make_node().unschedulable().obj(),
            make_node().unschedulable().taint("node.kubernetes.io/not-ready", effect="NoExecute").obj(),
            QueueingHint.SKIP,
            id="skip-unrelated-change",
        ),
        pytest.param(
            make_node().unschedulable().obj(),
            make_node().obj(),
            QueueingHint.QUEUE,
            id="queue-on-unschedulable-field-change",
        ),
    ],
)
def test_is_schedulable_after_node_change(
    plugin: NodeUnschedulable, old: object, new: object, want: QueueingHint
) -> None:
    assert plugin.is_schedulable_after_node_change(make_pod().obj(), old, new) is want  # type: ignore[arg-type]


def _pod(tolerates: bool, name: str = "pod") -> Pod:
    builder = make_pod(name)
    if tolerates:
        builder.toleration(UNSCHEDULABLE_KEY, operator="Exists", effect="NoSchedule")
    return builder.obj()


@pytest.mark.parametrize(
    ("new", "want"),
    [
        pytest.param(_pod(True), QueueingHint.QUEUE, id="queue-when-the-pod-now-tolerates-the-taint"),
        pytest.param(
            make_pod().toleration("other", operator="Exists").obj(), QueueingHint.SKIP, id="skip-unrelated-toleration"
        ),
        pytest.param(_pod(True, "other-pod"), QueueingHint.SKIP, id="skip-other-pods"),
    ],
)
def test_is_schedulable_after_pod_toleration_change(plugin: NodeUnschedulable, new: Pod, want: QueueingHint) -> None:
    assert plugin.is_schedulable_after_pod_toleration_change(_pod(False), _pod(False), new) is want
