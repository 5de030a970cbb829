"""PreFilterExtensions of PodTopologySpread against filtering_test.go's TestPreFilterStateAddPod and
TestPreFilterStateRemovePod (v1.35: node inclusion policies on), plus the clone isolation nominated-pod
filtering relies on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from spreadtest_helpers import (
    BAR,
    DNS,
    FOO,
    MAX_INT32,
    UNSCHEDULABLE_TAINT,
    Run,
    constraint,
    node_affinity_not_in,
    node_in,
    placed,
    pod,
    sorted_paths,
    zone_node,
)

from kubesched.api.objects import Node, Pod
from kubesched.framework.status import Code
from kubesched.framework.types import PodInfo

Paths = tuple[tuple[str, int], tuple[str, int]]


@dataclass
class Case:
    preemptor: Pod
    changed: Pod
    node: str
    nodes: Sequence[Node]
    existing: Sequence[Pod]
    counts: Sequence[dict[str, int]]
    paths: Sequence[Paths]


ZONE = constraint(1, "zone", DNS, FOO)
NODE = constraint(1, "node", DNS, FOO)
AB = [zone_node("node-a", "zone1"), zone_node("node-b", "zone1")]
AX = [zone_node("node-a", "zone1"), zone_node("node-x", "zone2")]
ABX = [zone_node("node-a", "zone1"), zone_node("node-b", "zone1"), zone_node("node-x", "zone2")]
FOO_BAR_NODES = [
    zone_node("node-a", "zone1", foo="bar"),
    node_in("node-b", {"zone": "zone2", "node": "node-b", "foo": ""}),
]
TAINTED_A = [
    node_in("node-a", {"zone": "zone1", "node": "node-a"}, taints=[UNSCHEDULABLE_TAINT]),
    node_in("node-b", {"zone": "zone2", "node": "node-b"}),
]
NOT_BAR = node_affinity_not_in("foo", "bar")

ADD_CASES = [
    pytest.param(
        Case(
            pod("p", {"foo": ""}, NODE),
            placed("p-a1", "node-a"),
            "node-a",
            AB,
            [],
            [{"node-a": 1, "node-b": 0}],
            [(("node-b", 0), ("node-a", 1))],
        ),
        id="node-a-and-b-both-impact-current-min-match",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, NODE),
            placed("p-a1", "node-a"),
            "node-a",
            AB,
            [placed("p-b1", "node-b")],
            [{"node-a": 1, "node-b": 1}],
            [(("node-a", 1), ("node-b", 1))],
        ),
        id="only-node-a-impacts-current-min-match",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, NODE),
            placed("p-a1", "node-a", namespace="ns1"),
            "node-a",
            AB,
            [placed("p-b1", "node-b")],
            [{"node-a": 0, "node-b": 1}],
            [(("node-a", 0), ("node-b", 1))],
        ),
        id="add-a-pod-in-a-different-namespace-changes-nothing",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, NODE),
            placed("p-b2", "node-b"),
            "node-b",
            AB,
            [placed("p-b1", "node-b")],
            [{"node-a": 0, "node-b": 2}],
            [(("node-a", 0), ("node-b", 2))],
        ),
        id="add-pod-on-non-critical-node-wont-trigger-re-calculation",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE),
            placed("p-a1", "node-a"),
            "node-a",
            AX,
            [],
            [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}],
            [(("zone2", 0), ("zone1", 1)), (("node-x", 0), ("node-a", 1))],
        ),
        id="node-a-and-x-both-impact-zone-and-node",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE),
            placed("p-a1", "node-a"),
            "node-a",
            AX,
            [placed("p-x1", "node-x")],
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}],
            [(("zone1", 1), ("zone2", 1)), (("node-a", 1), ("node-x", 1))],
        ),
        id="only-node-a-impacts-zone-and-node",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE),
            placed("p-a1", "node-a"),
            "node-a",
            ABX,
            [placed("p-b1", "node-b"), placed("p-b2", "node-b"), placed("p-x1", "node-x")],
            [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}],
            [(("zone2", 1), ("zone1", 3)), (("node-a", 1), ("node-x", 1))],
        ),
        id="node-a-impacts-node-node-x-impacts-zone",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, ZONE, constraint(1, "node", DNS, BAR)),
            placed("p-a1", "node-a", {"foo": ""}),
            "node-a",
            ABX,
            [
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-x1", "node-x", {"foo": "", "bar": ""}),
                placed("p-x2", "node-x", {"bar": ""}),
            ],
            [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 1, "node-x": 2}],
            [(("zone2", 1), ("zone1", 2)), (("node-a", 0), ("node-b", 1))],
        ),
        id="different-selectors-node-a-impacts-zone",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, ZONE, constraint(1, "node", DNS, BAR)),
            placed("p-a1", "node-a", {"foo": "", "bar": ""}),
            "node-a",
            ABX,
            [
                placed("p-b1", "node-b", {"bar": ""}),
                placed("p-x1", "node-x", {"foo": "", "bar": ""}),
                placed("p-x2", "node-x", {"bar": ""}),
            ],
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
            [(("zone1", 1), ("zone2", 1)), (("node-a", 1), ("node-b", 1))],
        ),
        id="different-selectors-node-a-impacts-zone-and-node",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, affinity=NOT_BAR),
            placed("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
            "node-a",
            FOO_BAR_NODES,
            [
                placed("p-a2", "node-a", {"foo": "", "zone": "zone1"}),
                placed("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
            ],
            [{"zone2": 1}],
            [(("zone2", 1), ("", MAX_INT32))],
        ),
        id="add-a-pod-when-scheduling-node-affinity-unmatched-pod",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
            "node-b",
            FOO_BAR_NODES,
            [
                placed("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
                placed("p-b2", "node-b", {"foo": "", "zone": "zone2"}),
            ],
            [{"zone1": 1, "zone2": 2}],
            [(("zone1", 1), ("zone2", 2))],
        ),
        id="add-a-pod-when-scheduling-node-affinity-matched-pod",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-b1", "node-b", {"zone": "zone2"}),
            "node-b",
            FOO_BAR_NODES,
            [
                placed("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
                placed("p-b2", "node-b", {"foo": "", "zone": "zone2"}),
            ],
            [{"zone1": 1, "zone2": 1}],
            [(("zone1", 1), ("zone2", 1))],
        ),
        id="add-a-label-selector-not-matched-pod",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, tolerate=["node.kubernetes.io/unschedulable"]),
            placed("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
            "node-b",
            TAINTED_A,
            [
                placed("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
                placed("p-b2", "node-b", {"foo": "", "zone": "zone2"}),
            ],
            [{"zone1": 1, "zone2": 2}],
            [(("zone1", 1), ("zone2", 2))],
        ),
        id="add-a-pod-when-scheduling-taint-tolerated-pod",
    ),
]

REMOVE_CASES = [
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-a1", "node-a"),
            "node-a",
            ABX,
            [placed("p-a1", "node-a"), placed("p-b1", "node-b"), placed("p-x1", "node-x")],
            [{"zone1": 1, "zone2": 1}],
            [(("zone1", 1), ("zone2", 1))],
        ),
        id="one-constraint-on-zone-min-unchanged",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-a1", "node-a"),
            "node-a",
            [*ABX, zone_node("node-y", "zone2")],
            [placed("p-a1", "node-a"), placed("p-b1", "node-b"), placed("p-x1", "node-x"), placed("p-y1", "node-y")],
            [{"zone1": 1, "zone2": 2}],
            [(("zone1", 1), ("zone2", 2))],
        ),
        id="one-constraint-on-zone-min-changed",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-a0", "node-a", {"bar": ""}),
            "node-a",
            [*ABX, zone_node("node-y", "zone2")],
            [
                placed("p-a0", "node-a", {"bar": ""}),
                placed("p-a1", "node-a"),
                placed("p-b1", "node-b"),
                placed("p-x1", "node-x"),
                placed("p-y1", "node-y"),
            ],
            [{"zone1": 2, "zone2": 2}],
            [(("zone1", 2), ("zone2", 2))],
        ),
        id="delete-an-irrelevant-pod-wont-help",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-a0", "node-a", {"bar": ""}),
            "node-a",
            [*ABX, zone_node("node-y", "zone2")],
            [placed("p-a1", "node-a"), placed("p-b1", "node-b"), placed("p-x1", "node-x"), placed("p-y1", "node-y")],
            [{"zone1": 2, "zone2": 2}],
            [(("zone1", 2), ("zone2", 2))],
        ),
        id="delete-a-non-existing-pod-wont-help",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE),
            placed("p-x1", "node-x"),
            "node-x",
            ABX,
            [
                placed("p-a1", "node-a"),
                placed("p-a2", "node-a"),
                placed("p-b1", "node-b"),
                placed("p-x1", "node-x"),
                placed("p-x2", "node-x"),
            ],
            [{"zone1": 3, "zone2": 1}, {"node-a": 2, "node-b": 1, "node-x": 1}],
            [(("zone2", 1), ("zone1", 3)), (("node-b", 1), ("node-x", 1))],
        ),
        id="two-spread-constraints",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, affinity=NOT_BAR),
            placed("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
            "node-a",
            FOO_BAR_NODES,
            [
                placed("p-a2", "node-a", {"foo": "", "zone": "zone1"}),
                placed("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
            ],
            [{"zone2": 1}],
            [(("zone2", 1), ("", MAX_INT32))],
        ),
        id="remove-a-pod-when-scheduling-node-affinity-unmatched-pod",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE),
            placed("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
            "node-b",
            FOO_BAR_NODES,
            [
                placed("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
                placed("p-b2", "node-b", {"foo": "", "zone": "zone2"}),
            ],
            [{"zone1": 1, "zone2": 0}],
            [(("zone2", 0), ("zone1", 1))],
        ),
        id="remove-a-pod-when-scheduling-node-affinity-matched-pod",
    ),
]


def _run(case: Case, delta: int) -> Run:
    run = Run(case.nodes, case.existing)
    info, status = run.pre_filter(case.preemptor)
    assert status is None
    node_info = run.snapshot.by_name[case.node]
    if delta > 0:
        result = run.plugin.add_pod(run.state, info, PodInfo(case.changed), node_info)
    else:
        result = run.plugin.remove_pod(run.state, info, PodInfo(case.changed), node_info)
    assert result is None
    return run


def _check(run: Run, case: Case) -> None:
    state = run.pre_filter_state()
    assert [dict(c) for c in state.tp_value_to_match_num] == [dict(c) for c in case.counts]
    assert [sorted_paths(p.as_tuple()) for p in state.critical_paths] == [sorted_paths(p) for p in case.paths]


@pytest.mark.parametrize("case", ADD_CASES)
def test_pre_filter_state_add_pod(case: Case) -> None:
    _check(_run(case, 1), case)


@pytest.mark.parametrize("case", REMOVE_CASES)
def test_pre_filter_state_remove_pod(case: Case) -> None:
    _check(_run(case, -1), case)


def test_clone_isolates_add_pod_from_the_original_state() -> None:
    run = Run(AB, [placed("p-b1", "node-b")])
    info, _ = run.pre_filter(pod("p", {"foo": ""}, NODE))
    copy = run.state.clone()
    assert run.plugin.add_pod(copy, info, PodInfo(placed("p-a1", "node-a")), run.snapshot.by_name["node-a"]) is None
    assert run.pre_filter_state().tp_value_to_match_num == [{"node-a": 0, "node-b": 1}]
    assert run.pre_filter_state().critical_paths[0].min_match_num == 0


def test_extensions_without_pre_filter_state_fail_with_an_error() -> None:
    run = Run(AB)
    status = run.plugin.add_pod(
        run.state, PodInfo(pod("p")), PodInfo(placed("q", "node-a")), run.snapshot.by_name["node-a"]
    )
    assert status is not None and status.code is Code.ERROR
    assert 'reading "PreFilterPodTopologySpread" from cycleState' in status.message
