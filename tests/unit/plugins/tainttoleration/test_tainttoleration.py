"""TaintToleration against taint_toleration_test.go (TestTaintTolerationScore, TestTaintTolerationFilter,
TestIsSchedulableAfterNodeChange, Test_isSchedulableAfterPodChange), per node and in batch."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.tainttoleration import TaintToleration
from kubesched.testing.builders import NodeBuilder, PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import (
    PluginHandle,
    filter_nodes,
    filter_nodes_batch,
    make_cluster,
    normalize,
    score_nodes,
    score_nodes_batch,
)

PREFER = "PreferNoSchedule"


UNTOLERATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)")


def node_with(name: str, *taints: tuple[str, str, str]) -> NodeBuilder:
    builder = make_node(name)
    for key, value, effect in taints:
        builder.taint(key, value, effect)
    return builder


def pod_with(*tolerations: tuple[str, str, str, str]) -> PodBuilder:
    builder = make_pod("pod1")
    for key, operator, value, effect in tolerations:
        builder.toleration(key, operator, value, effect)
    return builder


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        pytest.param(
            pod_with(("foo", "Equal", "bar", PREFER)),
            [node_with("nodeA", ("foo", "bar", PREFER)), node_with("nodeB", ("foo", "blah", PREFER))],
            [100, 0],
            id="tolerated-taints-score-higher-than-intolerable-ones",
        ),
        pytest.param(
            pod_with(("cpu-type", "Equal", "arm64", PREFER), ("disk-type", "Equal", "ssd", PREFER)),
            [
                node_with("nodeA"),
                node_with("nodeB", ("cpu-type", "arm64", PREFER)),
                node_with("nodeC", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 100, 100],
            id="number-of-tolerated-taints-does-not-matter",
        ),
        pytest.param(
            pod_with(("foo", "Equal", "bar", PREFER)),
            [
                node_with("nodeA"),
                node_with("nodeB", ("cpu-type", "arm64", PREFER)),
                node_with("nodeC", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 50, 0],
            id="more-intolerable-taints-lower-score",
        ),
        pytest.param(
            pod_with(("cpu-type", "Equal", "arm64", "NoSchedule"), ("disk-type", "Equal", "ssd", "NoSchedule")),
            [
                node_with("nodeA"),
                node_with("nodeB", ("cpu-type", "arm64", "NoSchedule")),
                node_with("nodeC", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 100, 0],
            id="only-prefer-no-schedule-taints-and-tolerations-count",
        ),
        pytest.param(
            pod_with(),
            [node_with("nodeA"), node_with("nodeB", ("cpu-type", "arm64", PREFER))],
            [100, 0],
            id="no-tolerations-lands-on-node-without-taints",
        ),
    ],
)
def test_score(pod: PodBuilder, nodes: Sequence[NodeBuilder], want: list[int]) -> None:
    cache, snapshot = make_cluster([n.obj() for n in nodes])
    plugin = TaintToleration(None, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod.obj())
    assert plugin.pre_score(state, info, snapshot.node_infos) is None
    raw = score_nodes(plugin, state, info, snapshot)
    assert score_nodes_batch(plugin, state, info, snapshot) == raw
    assert normalize(plugin, state, info, raw) == want


def test_score_without_prescore_is_an_error() -> None:
    cache, snapshot = make_cluster([make_node().obj()])
    plugin = TaintToleration(None, PluginHandle(cache))
    with pytest.raises(LookupError, match="PreScoreTaintToleration"):
        plugin.score(CycleState(), PodInfo(make_pod().obj()), snapshot.node_infos[0])


@pytest.mark.parametrize(
    ("pod", "node", "want"),
    [
        pytest.param(
            pod_with(),
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")),
            UNTOLERATED,
            id="no-tolerations-cannot-land-on-tainted-node",
        ),
        pytest.param(
            pod_with(("dedicated", "Equal", "user1", "NoSchedule")),
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")),
            None,
            id="dedicated-node-for-user1-tolerated",
        ),
        pytest.param(
            pod_with(("dedicated", "Equal", "user2", "NoSchedule")),
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")),
            UNTOLERATED,
            id="dedicated-node-for-user1-not-tolerated-by-user2",
        ),
        pytest.param(
            pod_with(("foo", "Exists", "", "NoSchedule")),
            node_with("nodeA", ("foo", "bar", "NoSchedule")),
            None,
            id="exists-operator-tolerates-taint",
        ),
        pytest.param(
            pod_with(("dedicated", "Equal", "user2", "NoSchedule"), ("foo", "Exists", "", "NoSchedule")),
            node_with("nodeA", ("dedicated", "user2", "NoSchedule"), ("foo", "bar", "NoSchedule")),
            None,
            id="multiple-tolerations-tolerate-all-taints",
        ),
        pytest.param(
            pod_with(("foo", "Equal", "bar", PREFER)),
            node_with("nodeA", ("foo", "bar", "NoSchedule")),
            UNTOLERATED,
            id="matching-key-and-value-but-different-effect",
        ),
        pytest.param(
            pod_with(("foo", "Equal", "bar", "")),
            node_with("nodeA", ("foo", "bar", "NoSchedule")),
            None,
            id="empty-toleration-effect-tolerates-no-schedule",
        ),
        pytest.param(
            pod_with(("dedicated", "Equal", "user2", "NoSchedule")),
            node_with("nodeA", ("dedicated", "user1", PREFER)),
            None,
            id="prefer-no-schedule-taint-never-filters",
        ),
        pytest.param(
            pod_with(), node_with("nodeA", ("dedicated", "user1", PREFER)), None, id="no-tolerations-prefer-no-schedule"
        ),
        pytest.param(
            pod_with(),
            node_with("nodeA", ("node.kubernetes.io/unreachable", "", "NoExecute"), ("b", "2", "NoSchedule")),
            UNTOLERATED,
            id="any-untolerated-taint-gives-the-one-v1-35-reason",
        ),
    ],
)
def test_filter(pod: PodBuilder, node: NodeBuilder, want: Status | None) -> None:
    cache, snapshot = make_cluster([node.obj()])
    plugin = TaintToleration(None, PluginHandle(cache))
    info = PodInfo(pod.obj())
    assert filter_nodes(plugin, CycleState(), info, snapshot) == [want]
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == [want]


def test_batch_filter_over_mixed_nodes_shares_classes() -> None:
    nodes = [
        node_with("a", ("k", "v", "NoSchedule")).obj(),
        node_with("b").obj(),
        node_with("c", ("k", "v", "NoSchedule")).obj(),
    ]
    cache, snapshot = make_cluster(nodes)
    plugin = TaintToleration(None, PluginHandle(cache))
    info = PodInfo(make_pod().obj())
    want = [UNTOLERATED, None, UNTOLERATED]
    assert filter_nodes(plugin, CycleState(), info, snapshot) == want
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == want


TOLERATES_USER2 = pod_with(("dedicated", "Equal", "user2", "NoSchedule"))


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(
            "not-a-node",
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")).obj(),
            QueueingHint.QUEUE,
            id="backoff-wrong-old-object",
        ),
        pytest.param(
            None,
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")).obj(),
            QueueingHint.SKIP,
            id="skip-queue-on-untolerated-taint-node-added",
        ),
        pytest.param(
            None,
            node_with("nodeA", ("dedicated", "user2", "NoSchedule")).obj(),
            QueueingHint.QUEUE,
            id="queue-on-tolerated-taint-node-added",
        ),
        pytest.param(
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")).obj(),
            node_with("nodeA", ("dedicated", "user1", "NoSchedule"), ("dedicated", "user3", PREFER)).obj(),
            QueueingHint.SKIP,
            id="skip-unrelated-change",
        ),
        pytest.param(
            node_with("nodeA", ("dedicated", "user1", "NoSchedule")).obj(),
            node_with("nodeA", ("dedicated", "user2", "NoSchedule")).obj(),
            QueueingHint.QUEUE,
            id="queue-on-taint-change",
        ),
    ],
)
def test_is_schedulable_after_node_change(old: object, new: object, want: QueueingHint) -> None:
    plugin = TaintToleration(None, PluginHandle())
    assert plugin.is_schedulable_after_node_change(TOLERATES_USER2.obj(), old, new) is want  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, "not-a-pod", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param("not-a-pod", make_pod("pod1").obj(), QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(
            make_pod("pod-2").obj(),
            make_pod("pod-2").toleration("k", "Exists").obj(),
            QueueingHint.SKIP,
            id="skip-updates-other-pod",
        ),
        pytest.param(
            make_pod("pod1").obj(),
            make_pod("pod1").toleration("k", "Exists").obj(),
            QueueingHint.QUEUE,
            id="queue-on-the-pods-own-toleration-change",
        ),
    ],
)
def test_is_schedulable_after_pod_toleration_change(old: object, new: object, want: QueueingHint) -> None:
    plugin = TaintToleration(None, PluginHandle())
    hint = plugin.is_schedulable_after_pod_toleration_change(make_pod("pod1").obj(), old, new)  # type: ignore[arg-type]
    assert hint is want
