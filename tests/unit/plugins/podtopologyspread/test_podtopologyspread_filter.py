"""PodTopologySpread's Filter against filtering_test.go's TestSingleConstraint (incl. its minDomains cases),
TestMultipleConstraints and TestPreFilterDisabled (v1.35: node inclusion policies on), per node and in batch,
with upstream's reason strings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from spreadtest_helpers import (
    BAR,
    DNS,
    FOO,
    HONOR,
    IGNORE,
    SA,
    UNSCHEDULABLE_TAINT,
    Run,
    constraint,
    node_affinity_in,
    node_affinity_not_in,
    node_in,
    nodes_abxy,
    placed,
    pod,
    zone_node,
)

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.podtopologyspread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from kubesched.testing.framework_helpers import batch_of, expand_batch_result

S, U, UU = "S", "U", "UU"
STATUS = {
    S: None,
    U: Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH),
    UU: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH),
}


@dataclass
class Case:
    pod: Pod
    nodes: Sequence[Node]
    existing: Sequence[Pod]
    want: Mapping[str, str]


SIX = [
    placed("p-a1", "node-a"),
    placed("p-a2", "node-a"),
    placed("p-b1", "node-b"),
    placed("p-y1", "node-y"),
    placed("p-y2", "node-y"),
    placed("p-y3", "node-y"),
]
ABC = [node_in(n, {"node": n}) for n in ("node-a", "node-b", "node-c")]
TWO_TWO_ONE = [
    placed("p-a1", "node-a"),
    placed("p-a2", "node-a"),
    placed("p-b1", "node-b"),
    placed("p-b2", "node-b"),
    placed("p-c1", "node-c"),
]
ONE_ONE_ZERO_ONE = [placed("p-b1", "node-a"), placed("p-b2", "node-b"), placed("p-y1", "node-y")]
FOO_ABX_Y = [
    node_in("node-a", {"node": "node-a", "foo": ""}),
    node_in("node-b", {"node": "node-b", "foo": ""}),
    node_in("node-x", {"node": "node-x", "foo": ""}),
    node_in("node-y", {"node": "node-y"}),
]
FOO_ABX_TAINTED_Y = [*FOO_ABX_Y[:3], node_in("node-y", {"node": "node-y"}, taints=[UNSCHEDULABLE_TAINT])]
ALL_S = {"node-a": S, "node-b": S, "node-x": S, "node-y": S}

SINGLE = [
    pytest.param(
        Case(pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)), nodes_abxy(), [], ALL_S), id="no-existing-pods"
    ),
    pytest.param(
        Case(pod("p", {"foo": ""}, constraint(1, "zone", DNS, BAR)), nodes_abxy(), [], ALL_S),
        id="no-existing-pods-incoming-pod-doesnt-match-itself",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)),
            nodes_abxy(),
            [
                placed("p-a1", "node-a", namespace="ns1"),
                placed("p-b1", "node-a", namespace="ns2"),
                placed("p-x1", "node-x"),
                placed("p-y1", "node-y"),
            ],
            {"node-a": S, "node-b": S, "node-x": U, "node-y": U},
        ),
        id="existing-pods-in-a-different-namespace-do-not-count",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, None)),
            nodes_abxy(),
            [placed("p-x1", "node-x"), placed("p-y1", "node-y")],
            ALL_S,
        ),
        id="existing-pods-do-not-match-null-selector",
    ),
    pytest.param(
        Case(pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)), nodes_abxy(), SIX, ALL_S),
        id="pods-spread-across-zones-as-3-3-all-nodes-fit",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)),
            [
                zone_node("node-a", "zone1"),
                node_in("node-b", {"zon": "zone1", "node": "node-b"}),
                zone_node("node-x", "zone2"),
                zone_node("node-y", "zone2"),
            ],
            [placed("p-a1", "node-a"), placed("p-b1", "node-b"), placed("p-x1", "node-x"), placed("p-y1", "node-y")],
            {"node-a": S, "node-b": UU, "node-x": U, "node-y": U},
        ),
        id="pods-spread-as-1-2-due-to-absence-of-label-zone-on-node-b",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "rack", DNS, FOO)),
            [zone_node("node-a", "zone1"), zone_node("node-x", "zone2")],
            [],
            {"node-a": UU, "node-x": UU},
        ),
        id="pod-cannot-be-scheduled-as-no-node-has-label-rack",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO)),
            nodes_abxy(),
            SIX,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="pods-spread-across-nodes-as-2-1-0-3-only-node-x-fits",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(2, "node", DNS, FOO)),
            nodes_abxy(),
            SIX,
            {"node-a": U, "node-b": S, "node-x": S, "node-y": U},
        ),
        id="pods-spread-as-2-1-0-3-max-skew-2-node-b-and-node-x-fit",
    ),
    pytest.param(
        Case(
            pod("p", {"bar": ""}, constraint(1, "node", DNS, FOO)),
            nodes_abxy(),
            SIX,
            {"node-a": U, "node-b": S, "node-x": S, "node-y": U},
        ),
        id="pods-spread-as-2-1-0-3-but-pod-doesnt-match-itself",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "node", DNS, FOO),
                affinity=node_affinity_in("node", "node-a", "node-y"),
            ),
            nodes_abxy(),
            SIX,
            {"node-a": S, "node-b": S, "node-x": S, "node-y": U},
        ),
        id="incoming-pod-has-node-affinity-hence-node-a-fits",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO)),
            [node_in("node-a", {"node": "node-a"}), node_in("node-b", {"node": "node-b"})],
            [placed("p-a", "node-a", terminating=True), placed("p-b", "node-b")],
            {"node-a": S, "node-b": U},
        ),
        id="terminating-pods-should-be-excluded",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", DNS, FOO),
                affinity=node_affinity_not_in("node", "node-b"),
            ),
            nodes_abxy(),
            [placed("p-b1", "node-b"), placed("p-b2", "node-b"), placed("p-y1", "node-y")],
            {"node-a": S, "node-b": S, "node-x": U, "node-y": U},
        ),
        id="incoming-pod-has-node-affinity-pods-spread-as-0-2-0-1-node-a-fits",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(2, "node", DNS, FOO, min_domains=4)),
            ABC,
            TWO_TWO_ONE,
            {"node-a": U, "node-b": U, "node-c": S},
        ),
        id="min-domains-2-2-1-max-skew-2-fewer-domains-than-min-domains-third-node-fits",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(2, "node", DNS, FOO, min_domains=2)),
            ABC,
            TWO_TWO_ONE,
            {"node-a": S, "node-b": S, "node-c": S},
        ),
        id="min-domains-2-2-1-max-skew-2-more-domains-than-min-domains-all-fit",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(2, "zone", DNS, FOO, min_domains=3)),
            nodes_abxy(),
            [placed("p-b1", "node-a"), placed("p-b2", "node-b"), placed("p-y1", "node-y")],
            {"node-a": U, "node-b": U, "node-x": S, "node-y": S},
        ),
        id="min-domains-zones-2-1-fewer-domains-than-min-domains-third-and-fourth-fit",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(2, "zone", DNS, FOO, min_domains=1)),
            nodes_abxy(),
            [placed("p-b1", "node-a"), placed("p-b2", "node-b"), placed("p-y1", "node-y")],
            ALL_S,
        ),
        id="min-domains-zones-2-1-more-domains-than-min-domains-all-fit",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO), node_selector={"foo": ""}),
            FOO_ABX_Y,
            ONE_ONE_ZERO_ONE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": S},
        ),
        id="node-affinity-policy-honored-with-label-selectors",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO, affinity_policy=IGNORE), node_selector={"foo": ""}),
            FOO_ABX_Y,
            ONE_ONE_ZERO_ONE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="node-affinity-policy-ignored-with-label-selectors",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO), affinity=node_affinity_in("foo", "")),
            FOO_ABX_Y,
            ONE_ONE_ZERO_ONE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": S},
        ),
        id="node-affinity-policy-honored-with-node-affinity",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "node", DNS, FOO, affinity_policy=IGNORE),
                affinity=node_affinity_in("foo", ""),
            ),
            FOO_ABX_Y,
            ONE_ONE_ZERO_ONE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="node-affinity-policy-ignored-with-node-affinity",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO, taints_policy=HONOR)),
            FOO_ABX_TAINTED_Y,
            ONE_ONE_ZERO_ONE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": S},
        ),
        id="node-taints-policy-honored",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, FOO)),
            FOO_ABX_TAINTED_Y,
            ONE_ONE_ZERO_ONE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="node-taints-policy-ignored",
    ),
]

ZONE = constraint(1, "zone", DNS, FOO)
NODE = constraint(1, "node", DNS, FOO)
NODE_BAR = constraint(1, "node", DNS, BAR)
FOO_ZONE_NODES = [
    zone_node("node-a", "zone1", foo=""),
    zone_node("node-b", "zone1", foo=""),
    zone_node("node-x", "zone2", foo=""),
]
THREE = [placed("p-a1", "node-a"), placed("p-b1", "node-b"), placed("p-y1", "node-y")]

MULTIPLE = [
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE), nodes_abxy(), SIX, {"node-a": U, "node-b": U, "node-x": S, "node-y": U}
        ),
        id="two-constraints-on-zone-and-node-spreads-3-3-2-1-0-3",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE),
            nodes_abxy(),
            [*SIX, placed("p-y4", "node-y")],
            {"node-a": U, "node-b": U, "node-x": U, "node-y": U},
        ),
        id="two-constraints-on-zone-and-node-spreads-3-4-2-1-0-4",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, ZONE, NODE_BAR),
            nodes_abxy(),
            [placed("p-a1", "node-a"), placed("p-y1", "node-y", {"bar": ""})],
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="different-selectors-spreads-1-0-1-0-0-1",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, ZONE, NODE_BAR),
            nodes_abxy(),
            [placed("p-a1", "node-a"), placed("p-x1", "node-x", {"bar": ""}), placed("p-y1", "node-y", {"bar": ""})],
            {"node-a": U, "node-b": U, "node-x": U, "node-y": U},
        ),
        id="different-selectors-spreads-1-0-0-0-1-1",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, ZONE, NODE_BAR),
            nodes_abxy(),
            [
                placed("p-a1", "node-a"),
                placed("p-a2", "node-a", {"foo": "", "bar": ""}),
                placed("p-y1", "node-y"),
                placed("p-y2", "node-y", {"foo": "", "bar": ""}),
                placed("p-y3", "node-y"),
            ],
            {"node-a": U, "node-b": S, "node-x": U, "node-y": U},
        ),
        id="different-selectors-spreads-2-3-1-0-0-1",
    ),
    pytest.param(
        Case(
            pod("p", {"bar": ""}, ZONE, NODE_BAR),
            nodes_abxy(),
            [placed("p-a1", "node-a"), placed("p-x1", "node-x", {"bar": ""}), placed("p-y1", "node-y", {"bar": ""})],
            {"node-a": S, "node-b": S, "node-x": U, "node-y": U},
        ),
        id="different-selectors-pod-doesnt-match-itself-on-zone",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE),
            [
                zone_node("node-a", "zone1"),
                zone_node("node-b", "zone1"),
                node_in("node-x", {"zone": "zone2"}),
                zone_node("node-y", "zone2"),
            ],
            [placed("p-a1", "node-a"), placed("p-y3", "node-y")],
            {"node-a": U, "node-b": S, "node-x": UU, "node-y": U},
        ),
        id="two-constraints-absence-of-label-node-on-node-x",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                ZONE,
                constraint(1, "node", DNS, FOO, affinity_policy=IGNORE),
                node_selector={"foo": ""},
            ),
            [*FOO_ZONE_NODES, zone_node("node-y", "zone2")],
            THREE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="two-inclusion-constraints-zone-honor-ignore-node-ignore-ignore",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO, taints_policy=HONOR), NODE),
            [*FOO_ZONE_NODES, node_in("node-y", {"zone": "zone2", "node": "node-y"}, taints=[UNSCHEDULABLE_TAINT])],
            THREE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="two-inclusion-constraints-zone-honor-honor-node-honor-ignore",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, ZONE, NODE, node_selector={"foo": ""}),
            [
                zone_node("node-a", "zone1", foo=""),
                zone_node("node-b", "zone1"),
                zone_node("node-x", "zone2", foo=""),
                node_in("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, taints=[UNSCHEDULABLE_TAINT]),
            ],
            THREE,
            {"node-a": U, "node-b": S, "node-x": S, "node-y": U},
        ),
        id="two-inclusion-constraints-zone-honor-ignore-node-honor-ignore",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", DNS, FOO, taints_policy=HONOR),
                constraint(1, "node", DNS, FOO, affinity_policy=IGNORE),
                node_selector={"foo": ""},
            ),
            [
                zone_node("node-a", "zone1", foo=""),
                zone_node("node-b", "zone1"),
                zone_node("node-x", "zone2", foo=""),
                node_in("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, taints=[UNSCHEDULABLE_TAINT]),
            ],
            THREE,
            {"node-a": U, "node-b": U, "node-x": S, "node-y": U},
        ),
        id="two-inclusion-constraints-zone-honor-honor-node-ignore-ignore",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", DNS, BAR), ZONE),
            nodes_abxy(),
            [
                placed("p-a1", "node-a", {"foo": "", "bar": ""}),
                placed("p-a2", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-y1", "node-y"),
                placed("p-y2", "node-y", {"foo": "", "bar": ""}),
                placed("p-y3", "node-y"),
            ],
            {"node-a": U, "node-b": U, "node-x": S, "node-y": S},
        ),
        id="two-constraints-on-zone-spreads-3-3-2-1",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", DNS, BAR), ZONE),
            nodes_abxy(),
            [
                placed("p-a1", "node-a", {"foo": "", "bar": ""}),
                placed("p-a2", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-y1", "node-y"),
                placed("p-y2", "node-y", {"foo": "", "bar": ""}),
                placed("p-y3", "node-y"),
                placed("p-y4", "node-y"),
            ],
            {"node-a": U, "node-b": U, "node-x": U, "node-y": U},
        ),
        id="two-constraints-on-zone-spreads-3-4-2-1",
    ),
]


def _check(case: Case) -> None:
    run = Run(case.nodes, case.existing)
    info, status = run.pre_filter(case.pod)
    assert status is None
    names = [n.metadata.name for n in case.nodes]
    per_node = [run.plugin.filter(run.state, info, run.snapshot.by_name[name]) for name in names]
    assert dict(zip(names, per_node, strict=True)) == {name: STATUS[code] for name, code in case.want.items()}
    batch = run.plugin.filter_batch(run.state, info, batch_of(run.snapshot, names))
    assert expand_batch_result(batch, len(names)) == per_node


@pytest.mark.parametrize("case", SINGLE)
def test_single_constraint(case: Case) -> None:
    _check(case)


@pytest.mark.parametrize("case", MULTIPLE)
def test_multiple_constraints(case: Case) -> None:
    _check(case)


def test_pre_filter_disabled_filter_fails_with_an_error() -> None:
    run = Run([node_in("n", {})])
    info = PodInfo(pod("p"))
    status = run.plugin.filter(CycleState(), info, run.snapshot.by_name["n"])
    assert status is not None and status.code is Code.ERROR
    assert status.message == 'reading "PreFilterPodTopologySpread" from cycleState: not found'
    batch = run.plugin.filter_batch(CycleState(), info, batch_of(run.snapshot))
    assert expand_batch_result(batch, 1) == [status]


# ---- malformed constraints: kube-scheduler's per-pod outcome, never an exception -----------------------


def test_a_selector_apimachinery_refuses_fails_pre_filter_with_upstreams_error() -> None:
    bad = {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}
    run = Run(nodes_abxy())
    _, status = run.pre_filter(pod("p", {"foo": ""}, constraint(1, "zone", DNS, bad)))
    assert status is not None and status.code is Code.ERROR
    assert status.message == (
        "get constraints from pod: obtaining pod's hard topology spread constraints: "
        '"Gt" is not a valid label selector operator'
    )


def test_a_bad_selector_on_a_soft_constraint_only_fails_pre_score() -> None:
    bad = {"matchExpressions": [{"key": "app", "operator": "In"}]}
    run = Run(nodes_abxy())
    info, status = run.pre_filter(pod("p", {"foo": ""}, constraint(1, "zone", SA, bad)))
    assert status is not None and status.code is Code.SKIP
    scored = run.plugin.pre_score(CycleState(), info, run.snapshot.node_infos)
    assert scored is not None and scored.code is Code.ERROR
    assert scored.message.startswith("calculating preScoreState: obtaining pod's soft topology spread constraints: ")


def test_a_value_of_the_wrong_type_names_the_pod_and_the_field() -> None:
    run = Run(nodes_abxy())
    raw = {"maxSkew": "one", "topologyKey": "zone", "whenUnsatisfiable": DNS}
    _, status = run.pre_filter(pod("p", {"foo": ""}, raw))
    assert status is not None and status.code is Code.ERROR
    assert "pod default/p: spec.topologySpreadConstraints[0].maxSkew: Invalid value" in status.message


def test_max_skew_zero_rejects_every_node_as_upstream_does() -> None:
    run = Run(nodes_abxy())
    info, status = run.pre_filter(pod("p", {"foo": ""}, constraint(0, "zone", DNS, FOO)))
    assert status is None
    assert {run.plugin.filter(run.state, info, n) for n in run.snapshot.node_infos} == {STATUS[U]}


def test_an_unknown_when_unsatisfiable_is_neither_hard_nor_soft() -> None:
    run = Run(nodes_abxy())
    info, status = run.pre_filter(pod("p", {"foo": ""}, constraint(1, "zone", "Sometimes", FOO)))
    assert status is not None and status.code is Code.SKIP
    scored = run.plugin.pre_score(CycleState(), info, run.snapshot.node_infos)
    assert scored is not None and scored.code is Code.SKIP


def test_an_empty_selector_matches_the_pod_but_counts_no_existing_pod() -> None:
    # kube-scheduler v1.35 skips counting for a selector without requirements (checked with kube-oracle).
    run = Run(nodes_abxy(), SIX)
    _, status = run.pre_filter(pod("p", {"foo": ""}, constraint(1, "node", DNS, {})))
    assert status is None
    state = run.pre_filter_state()
    assert state.tp_value_to_match_num == [{"node-a": 0, "node-b": 0, "node-x": 0, "node-y": 0}]
    assert state.self_match == (1,)
