"""NodeName against node_name_test.go (TestNodeName), per node and in batch."""

from __future__ import annotations

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import NODE_ADD
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.nodename import NodeName
from kubesched.plugins.nodename.node_name import ERR_REASON
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch, make_cluster

REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod(), [None, None], id="no-host-specified"),
        pytest.param(make_pod().node_name("foo"), [None, REJECTED], id="host-matches-only-that-node"),
        pytest.param(make_pod().node_name("bar"), [REJECTED, None], id="host-does-not-match-the-other-node"),
        pytest.param(make_pod().node_name("gone"), [REJECTED, REJECTED], id="host-not-in-cluster"),
    ],
)
def test_node_name(pod: PodBuilder, want: list[Status | None]) -> None:
    cache, snapshot = make_cluster([make_node("foo").obj(), make_node("bar").obj()])
    plugin = NodeName(None, PluginHandle(cache))
    info = PodInfo(pod.obj())
    assert filter_nodes(plugin, CycleState(), info, snapshot) == want
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == want


def test_requeued_by_node_add_only() -> None:
    (registration,) = NodeName(None, PluginHandle()).events_to_register()
    assert registration.event == NODE_ADD
    assert registration.hint is None
