"""PodTopologySpread's PreFilter state against filtering_test.go's TestPreFilterState (v1.35, with the node
inclusion policy and matchLabelKeys features on, as they are by default): matching pods per domain and the
critical paths, per hard constraint. Cases whose only point was a disabled feature gate are left out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from spreadtest_helpers import (
    BAR,
    DNS,
    EMPTY_PATHS,
    FOO,
    HONOR,
    IGNORE,
    SA,
    UNSCHEDULABLE_TAINT,
    Run,
    constraint,
    labels_selector,
    list_args,
    node_affinity_in,
    node_affinity_not_in,
    node_in,
    nodes_abxy,
    placed,
    pod,
    sorted_paths,
    zone_node,
)

from kubesched.api.objects import Node, Pod
from kubesched.api.workloads import Service
from kubesched.framework.listers import ListerStores
from kubesched.framework.status import Code
from kubesched.plugins.podtopologyspread import PodTopologySpreadArgs

Paths = tuple[tuple[str, int], tuple[str, int]]


@dataclass
class Case:
    pod: Pod
    nodes: Sequence[Node] = ()
    existing: Sequence[Pod] = ()
    counts: Sequence[dict[str, int]] = ()
    paths: Sequence[Paths] = ()
    args: PodTopologySpreadArgs | None = None
    services: Sequence[dict[str, str]] = field(default_factory=list)
    skip: bool = False


FIVE_PODS = [
    placed("p-a1", "node-a"),
    placed("p-a2", "node-a"),
    placed("p-b1", "node-b"),
    placed("p-y1", "node-y"),
    placed("p-y2", "node-y"),
]
SEVEN_PODS = [
    placed("p-a1", "node-a"),
    placed("p-a2", "node-a"),
    placed("p-b1", "node-b"),
    placed("p-y1", "node-y"),
    placed("p-y2", "node-y"),
    placed("p-y3", "node-y"),
    placed("p-y4", "node-y"),
]
ABY = [zone_node("node-a", "zone1"), zone_node("node-b", "zone1"), zone_node("node-y", "zone2")]
FOO_NODES = [
    node_in("node-a", {"node": "node-a", "foo": ""}),
    node_in("node-b", {"node": "node-b", "foo": ""}),
    node_in("node-c", {"node": "node-c", "bar": ""}),
]
TAINTED_C = [
    node_in("node-a", {"node": "node-a"}),
    node_in("node-b", {"node": "node-b"}),
    node_in("node-c", {"node": "node-c", "bar": ""}, taints=[UNSCHEDULABLE_TAINT]),
]
BAR_PODS = [
    placed("p-a", "node-a", {"bar": ""}),
    placed("p-b", "node-b", {"bar": ""}),
    placed("p-c", "node-b", {"bar": ""}),
    placed("p-d", "node-c", {}),
]
FOO_A = [
    placed("p-a1", "node-a", {"foo": "a"}),
    placed("p-a2", "node-a", {"foo": "a"}),
    placed("p-b1", "node-b", {"foo": "a"}),
    placed("p-y1", "node-y", {"foo": "a"}),
    placed("p-y2", "node-y", {"foo": "a"}),
]

CASES = [
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(5, "zone", DNS, labels_selector(foo="bar"))),
            nodes_abxy(),
            counts=[{"zone1": 0, "zone2": 0}],
            paths=[(("zone1", 0), ("zone2", 0))],
        ),
        id="clean-cluster-with-one-spread-constraint",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)),
            nodes_abxy(),
            FIVE_PODS,
            counts=[{"zone1": 3, "zone2": 2}],
            paths=[(("zone2", 2), ("zone1", 3))],
        ),
        id="normal-case-with-one-spread-constraint",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, None)),
            nodes_abxy(),
            FIVE_PODS,
            counts=[{"zone1": 0, "zone2": 0}],
            paths=[(("zone2", 0), ("zone1", 0))],
        ),
        id="normal-case-with-null-label-selector",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)),
            [*nodes_abxy(), zone_node("node-o", "zone3"), zone_node("node-p", "zone3")],
            FIVE_PODS,
            counts=[{"zone1": 3, "zone2": 2, "zone3": 0}],
            paths=[(("zone3", 0), ("zone2", 2))],
        ),
        id="normal-case-with-one-spread-constraint-on-a-3-zone-cluster",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO)),
            nodes_abxy(),
            [
                placed("p-a1", "node-a"),
                placed("p-a2", "node-a", namespace="ns1"),
                placed("p-b1", "node-b"),
                placed("p-y1", "node-y", namespace="ns2"),
                placed("p-y2", "node-y"),
            ],
            counts=[{"zone1": 2, "zone2": 1}],
            paths=[(("zone2", 1), ("zone1", 2))],
        ),
        id="namespace-mismatch-doesnt-count",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO), constraint(1, "node", DNS, FOO)),
            nodes_abxy(),
            SEVEN_PODS,
            counts=[{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}],
            paths=[(("zone1", 3), ("zone2", 4)), (("node-x", 0), ("node-b", 1))],
        ),
        id="normal-case-with-two-spread-constraints",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", SA, FOO),
                constraint(1, "zone", DNS, FOO),
                constraint(1, "node", SA, FOO),
                constraint(1, "node", DNS, FOO),
            ),
            ABY,
            SEVEN_PODS,
            counts=[{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
            paths=[(("zone1", 3), ("zone2", 4)), (("node-b", 1), ("node-a", 2))],
        ),
        id="soft-spread-constraints-should-be-bypassed",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", DNS, FOO), constraint(1, "node", DNS, BAR)),
            ABY,
            [placed("p-a", "node-a", {"foo": ""}), placed("p-b", "node-b", {"bar": ""})],
            counts=[{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}],
            paths=[(("zone2", 0), ("zone1", 1)), (("node-a", 0), ("node-y", 0))],
        ),
        id="different-label-selectors-simple-version",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", DNS, FOO), constraint(1, "node", DNS, BAR)),
            ABY,
            [
                placed("p-a1", "node-a", {"foo": ""}),
                placed("p-a2", "node-a", {"foo": "", "bar": ""}),
                placed("p-b1", "node-b", {"foo": ""}),
                placed("p-y1", "node-y", {"foo": ""}),
                placed("p-y2", "node-y", {"foo": "", "bar": ""}),
                placed("p-y3", "node-y", {"foo": ""}),
                placed("p-y4", "node-y", {"foo": "", "bar": ""}),
            ],
            counts=[{"zone1": 3, "zone2": 4}, {"node-a": 1, "node-b": 0, "node-y": 2}],
            paths=[(("zone1", 3), ("zone2", 4)), (("node-b", 0), ("node-a", 1))],
        ),
        id="different-label-selectors-complex-pods",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", DNS, FOO),
                constraint(1, "node", DNS, FOO),
                affinity=node_affinity_not_in("node", "node-x"),
            ),
            nodes_abxy(),
            SEVEN_PODS,
            counts=[{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
            paths=[(("zone1", 3), ("zone2", 4)), (("node-b", 1), ("node-a", 2))],
        ),
        id="two-spread-constraints-and-with-pod-affinity",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "bar", "baz": "kar"}),
            args=list_args(
                constraint(3, "node", DNS, None), constraint(2, "node", SA, None), constraint(5, "rack", DNS, None)
            ),
            services=[{"foo": "bar"}],
            counts=[{}, {}],
            paths=[EMPTY_PATHS, EMPTY_PATHS],
        ),
        id="default-constraints-and-a-service",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "bar"}),
            args=list_args(constraint(3, "node", DNS, None)),
            services=[{"baz": "kep"}],
            skip=True,
        ),
        id="default-constraints-and-a-service-that-doesnt-match",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": "bar", "baz": "tar"},
                constraint(1, "zone", DNS, labels_selector(baz="tar")),
                constraint(2, "planet", SA, labels_selector(fot="rok")),
            ),
            args=list_args(constraint(2, "node", DNS, None)),
            services=[{"foo": "bar"}],
            counts=[{}],
            paths=[EMPTY_PATHS],
        ),
        id="default-constraints-and-a-service-but-pod-has-constraints",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "bar"}),
            args=list_args(constraint(2, "node", SA, None)),
            services=[{"foo": "bar"}],
            skip=True,
        ),
        id="default-soft-constraints-and-a-service",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, BAR), node_selector={"foo": ""}),
            FOO_NODES,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2}],
            paths=[(("node-a", 1), ("node-b", 2))],
        ),
        id="node-affinity-policy-honored-with-label-selectors",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, BAR, affinity_policy=IGNORE), node_selector={"foo": ""}),
            FOO_NODES,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2, "node-c": 0}],
            paths=[(("node-c", 0), ("node-a", 1))],
        ),
        id="node-affinity-policy-ignored-with-label-selectors",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, BAR), affinity=node_affinity_in("foo", "")),
            FOO_NODES,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2}],
            paths=[(("node-a", 1), ("node-b", 2))],
        ),
        id="node-affinity-policy-honored-with-node-affinity",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "node", DNS, BAR, affinity_policy=IGNORE),
                affinity=node_affinity_in("foo", ""),
            ),
            FOO_NODES,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2, "node-c": 0}],
            paths=[(("node-c", 0), ("node-a", 1))],
        ),
        id="node-affinity-policy-ignored-with-node-affinity",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, BAR)),
            TAINTED_C,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2, "node-c": 0}],
            paths=[(("node-c", 0), ("node-a", 1))],
        ),
        id="node-taints-policy-ignored",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "node", DNS, BAR, taints_policy=HONOR)),
            TAINTED_C,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2}],
            paths=[(("node-a", 1), ("node-b", 2))],
        ),
        id="node-taints-policy-honored",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "node", DNS, BAR, taints_policy=HONOR),
                tolerate=["node.kubernetes.io/unschedulable"],
            ),
            TAINTED_C,
            BAR_PODS,
            counts=[{"node-a": 1, "node-b": 2, "node-c": 0}],
            paths=[(("node-c", 0), ("node-a", 1))],
        ),
        id="node-taints-policy-honored-with-tolerated-taints",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", DNS, FOO),
                constraint(1, "node", DNS, FOO, affinity_policy=IGNORE),
                node_selector={"foo": ""},
            ),
            [
                zone_node("node-a", "zone1", foo=""),
                zone_node("node-b", "zone1"),
                zone_node("node-x", "zone2", foo=""),
            ],
            [placed("p-b1", "node-b"), placed("p-b2", "node-b"), placed("p-x1", "node-x")],
            counts=[{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
            paths=[(("zone1", 0), ("zone2", 1)), (("node-a", 0), ("node-x", 1))],
        ),
        id="two-inclusion-constraints-zone-honor-ignore-node-ignore-ignore",
    ),
    pytest.param(
        Case(
            pod(
                "p", {"foo": ""}, constraint(1, "zone", DNS, FOO, taints_policy=HONOR), constraint(1, "node", DNS, FOO)
            ),
            [
                zone_node("node-a", "zone1", foo=""),
                node_in("node-b", {"zone": "zone1", "node": "node-b"}, taints=[UNSCHEDULABLE_TAINT]),
                zone_node("node-x", "zone2", foo=""),
            ],
            [placed("p-b1", "node-b"), placed("p-b2", "node-b"), placed("p-x1", "node-x")],
            counts=[{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
            paths=[(("zone1", 0), ("zone2", 1)), (("node-a", 0), ("node-x", 1))],
        ),
        id="two-inclusion-constraints-zone-honor-honor-node-honor-ignore",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", DNS, FOO),
                constraint(1, "node", DNS, FOO),
                node_selector={"foo": ""},
            ),
            [
                zone_node("node-a", "zone1"),
                node_in("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}, taints=[UNSCHEDULABLE_TAINT]),
                zone_node("node-x", "zone2", foo=""),
                zone_node("node-y", "zone2"),
            ],
            [placed("p-a1", "node-a"), placed("p-a2", "node-a"), placed("p-x1", "node-x"), placed("p-y1", "node-y")],
            counts=[{"zone1": 0, "zone2": 1}, {"node-b": 0, "node-x": 1}],
            paths=[(("zone1", 0), ("zone2", 1)), (("node-b", 0), ("node-x", 1))],
        ),
        id="two-inclusion-constraints-zone-honor-ignore-node-honor-ignore",
    ),
    pytest.param(
        Case(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", DNS, FOO, affinity_policy=IGNORE),
                constraint(1, "node", DNS, FOO, taints_policy=HONOR),
                node_selector={"foo": ""},
            ),
            [
                zone_node("node-a", "zone1"),
                node_in("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}, taints=[UNSCHEDULABLE_TAINT]),
                zone_node("node-x", "zone2", foo=""),
                zone_node("node-y", "zone2", foo=""),
            ],
            [
                placed("p-a1", "node-a"),
                placed("p-a2", "node-a"),
                placed("p-x1", "node-x"),
                placed("p-x2", "node-x"),
                placed("p-y1", "node-y"),
            ],
            counts=[{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}],
            paths=[(("zone1", 2), ("zone2", 3)), (("node-y", 1), ("node-x", 2))],
        ),
        id="two-inclusion-constraints-zone-ignore-ignore-node-honor-honor",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": "a"}, constraint(1, "zone", DNS, FOO, match_label_keys=["bar"])),
            nodes_abxy(),
            [
                placed("p-a1", "node-a", {"foo": ""}),
                placed("p-a2", "node-a", {"foo": "", "bar": "a"}),
                placed("p-b1", "node-b", {"foo": ""}),
                placed("p-y1", "node-y", {"foo": "", "bar": "a"}),
                placed("p-y2", "node-y", {"bar": ""}),
            ],
            counts=[{"zone1": 1, "zone2": 1}],
            paths=[(("zone2", 1), ("zone1", 1))],
        ),
        id="match-label-keys-anded-with-label-selector-when-not-empty",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "a"}, constraint(1, "zone", DNS, {}, match_label_keys=["foo"])),
            nodes_abxy(),
            FOO_A,
            counts=[{"zone1": 3, "zone2": 2}],
            paths=[(("zone2", 2), ("zone1", 3))],
        ),
        id="match-label-keys-anded-with-label-selector-when-empty",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, None, match_label_keys=["bar"])),
            nodes_abxy(),
            FOO_A,
            counts=[{"zone1": 0, "zone2": 0}],
            paths=[(("zone2", 0), ("zone1", 0))],
        ),
        id="match-label-keys-ignored-when-label-selector-is-nil",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": ""}, constraint(1, "zone", DNS, FOO, match_label_keys=["bar"])),
            nodes_abxy(),
            FOO_A,
            counts=[{"zone1": 3, "zone2": 2}],
            paths=[(("zone2", 2), ("zone1", 3))],
        ),
        id="match-label-keys-key-missing-from-pod-labels-is-ignored",
    ),
    pytest.param(
        Case(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", DNS, FOO), constraint(1, "zone", DNS, BAR)),
            nodes_abxy(),
            [
                placed("p-a1", "node-a", {"foo": "", "bar": ""}),
                placed("p-b1", "node-b", {"foo": ""}),
                placed("p-x1", "node-x", {"bar": ""}),
                placed("p-y1", "node-y", {"foo": "", "bar": ""}),
                placed("p-y2", "node-y", {"bar": ""}),
            ],
            counts=[{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}],
            paths=[(("zone2", 1), ("zone1", 2)), (("zone1", 1), ("zone2", 3))],
        ),
        id="two-spread-constraints-with-the-same-topology-key",
    ),
    pytest.param(
        Case(pod("p", {"foo": ""}), [zone_node("node-a", "zone1")], skip=True),
        id="skip-if-not-specified",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_pre_filter_state(case: Case) -> None:
    stores = ListerStores()
    for i, selector in enumerate(case.services):
        stores.services.add(
            Service.from_dict(
                {"metadata": {"name": f"svc-{i}", "namespace": "default"}, "spec": {"selector": selector}}, "test"
            )
        )
    args = case.args if case.args is not None else PodTopologySpreadArgs(defaulting_type="List")
    run = Run(case.nodes, case.existing, args=args, listers=stores.listers())
    _, status = run.pre_filter(case.pod)
    if case.skip:
        assert status is not None and status.code is Code.SKIP
        return
    assert status is None
    state = run.pre_filter_state()
    assert [dict(counts) for counts in state.tp_value_to_match_num] == list(case.counts)
    got_paths = [sorted_paths(paths.as_tuple()) for paths in state.critical_paths]
    assert got_paths == [sorted_paths(p) for p in case.paths]
