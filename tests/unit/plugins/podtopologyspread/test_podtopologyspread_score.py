"""PodTopologySpread's PreScore/Score/NormalizeScore against scoring_test.go (v1.35): TestPreScoreSkip,
TestPreScoreStateEmptyNodes (domains, ignored nodes, weights) and TestPodTopologySpreadScore (final scores,
system defaulting as upstream's table runs it), per node and in batch. Cases whose only point was a disabled
feature gate are left out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from spreadtest_helpers import (
    BAR,
    DNS,
    FOO,
    HONOR,
    HOSTNAME,
    IGNORE,
    SA,
    UNSCHEDULABLE_TAINT,
    Run,
    constraint,
    labels_selector,
    list_args,
    node_affinity_in,
    node_in,
    placed,
    pod,
)

from kubesched.api.objects import Node, Pod
from kubesched.api.workloads import ReplicaSet, Service
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.listers import Listers, ListerStores
from kubesched.framework.status import Code
from kubesched.framework.types import PodInfo
from kubesched.plugins.podtopologyspread import PodTopologySpreadArgs
from kubesched.plugins.podtopologyspread.plugin import PRE_SCORE_STATE_KEY, PreScoreState
from kubesched.testing.framework_helpers import batch_of, normalize

ZONE_LABEL = "topology.kubernetes.io/zone"
RS1 = ("apps/v1", "ReplicaSet", "rs1")
RS2 = ("apps/v1", "ReplicaSet", "rs2")


def weight(size: int) -> float:
    return math.log(size + 2)


def hn(name: str, **labels: str) -> Node:
    """A node labelled with its hostname (and ``labels``)."""
    return node_in(name, {HOSTNAME: name, **labels})


def listers(*, services: Sequence[dict[str, str]] = (), replica_sets: Sequence[tuple[str, object]] = ()) -> Listers:
    stores = ListerStores()
    for i, service_selector in enumerate(services):
        raw = {"metadata": {"name": f"svc-{i}", "namespace": "default"}, "spec": {"selector": service_selector}}
        stores.services.add(Service.from_dict(raw, "test"))
    for name, selector in replica_sets:
        rs_raw = {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}
        stores.replica_sets.add(ReplicaSet.from_dict(rs_raw, "test"))
    return stores.listers()


# ---- TestPreScoreSkip --------------------------------------------------------------------------------


def test_pre_score_skips_without_soft_constraints() -> None:
    run = Run([hn("node-a"), hn("node-b")])
    status = run.plugin.pre_score(run.state, PodInfo(pod("p")), run.snapshot.node_infos)
    assert status is not None and status.code is Code.SKIP


def test_pre_score_skips_with_default_constraints_and_a_replica_set_that_does_not_match() -> None:
    run = Run(
        [node_in("node-a", {"planet": "mars"})],
        args=list_args(constraint(2, "planet", SA, None)),
        listers=listers(replica_sets=[("rs1", {"matchExpressions": [{"key": "tar", "operator": "Exists"}]})]),
    )
    incoming = pod("p", {"foo": "bar", "baz": "sup"}, owner=RS2)
    status = run.plugin.pre_score(run.state, PodInfo(incoming), run.snapshot.node_infos)
    assert status is not None and status.code is Code.SKIP


def test_pre_score_skips_when_the_cluster_has_no_nodes() -> None:
    run = Run([])
    status = run.plugin.pre_score(run.state, PodInfo(pod("p", {}, constraint(1, "zone", SA, FOO))), [])
    assert status is not None and status.code is Code.SKIP


# ---- TestPreScoreStateEmptyNodes -------------------------------------------------------------------------


@dataclass
class StateCase:
    pod: Pod
    nodes: Sequence[Node]
    counts: Sequence[dict[str, int]]
    weights: Sequence[float]
    ignored: frozenset[str] = frozenset()
    args: PodTopologySpreadArgs = field(default_factory=lambda: PodTopologySpreadArgs(defaulting_type="List"))
    listers: Listers | None = None


THREE_ZONE_NODES = [hn("node-a", zone="zone1"), hn("node-b", zone="zone1"), hn("node-x", zone="zone2")]
FOO_THREE = [hn("node-a", zone="zone1", foo=""), hn("node-b", zone="zone1", foo=""), hn("node-x", zone="zone2")]
TAINTED_X = [
    hn("node-a", zone="zone1", foo=""),
    hn("node-b", zone="zone1", foo=""),
    node_in("node-x", {"zone": "zone2", HOSTNAME: "node-x"}, taints=[UNSCHEDULABLE_TAINT]),
]
RS_FOO = listers(replica_sets=[("rs1", FOO)])
TWO_ZONES = [{"zone1": 0, "zone2": 0}]

STATE_CASES = [
    pytest.param(
        StateCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, FOO), constraint(1, HOSTNAME, SA, FOO)),
            THREE_ZONE_NODES,
            [{"zone1": 0, "zone2": 0}, {}],
            [weight(2), weight(3)],
        ),
        id="normal-case",
    ),
    pytest.param(
        StateCase(pod("p", {"foo": ""}, constraint(1, "zone", SA, None)), THREE_ZONE_NODES, TWO_ZONES, [weight(2)]),
        id="null-selector",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, FOO), constraint(1, HOSTNAME, SA, BAR)),
            [hn("node-a", zone="zone1"), hn("node-b", zone="zone1"), hn("node-x")],
            [{"zone1": 0}, {}],
            [weight(1), weight(2)],
            ignored=frozenset({"node-x"}),
        ),
        id="node-x-doesnt-have-label-zone",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": "tar", "baz": "sup"}, owner=RS1),
            [
                hn("node-a", **{ZONE_LABEL: "mars"}),
                hn("node-b", **{ZONE_LABEL: "mars"}),
                hn("node-c"),
                hn("node-d"),
            ],
            [{}, {"mars": 0, "": 0}],
            [weight(4), weight(2)],
            args=PodTopologySpreadArgs(),
            listers=RS_FOO,
        ),
        id="system-default-constraints-and-a-replica-set",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": "tar", "baz": "sup"}, owner=RS1),
            [node_in("node-a", {"rack": "rack1", HOSTNAME: "node-a", "planet": "mars"})],
            [{}, {"mars": 0}],
            [weight(1), weight(1)],
            args=list_args(
                constraint(1, HOSTNAME, SA, None), constraint(2, "rack", DNS, None), constraint(2, "planet", SA, None)
            ),
            listers=RS_FOO,
        ),
        id="default-constraints-and-a-replica-set",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                {"foo": "bar", "baz": "sup"},
                constraint(1, "zone", DNS, BAR),
                constraint(2, "planet", SA, labels_selector(baz="sup")),
                owner=RS1,
            ),
            [node_in("node-a", {"planet": "mars", "galaxy": "andromeda"})],
            [{"mars": 0}],
            [weight(1)],
            args=list_args(constraint(2, "galaxy", SA, None)),
            listers=RS_FOO,
        ),
        id="default-constraints-and-a-replica-set-but-pod-has-constraints",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, BAR), node_selector={"foo": ""}),
            FOO_THREE,
            TWO_ZONES,
            [weight(2)],
        ),
        id="node-affinity-policy-honored-with-label-selectors",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, BAR, affinity_policy=IGNORE), node_selector={"foo": ""}),
            FOO_THREE,
            TWO_ZONES,
            [weight(2)],
        ),
        id="node-affinity-policy-ignored-with-label-selectors",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, BAR), affinity=node_affinity_in("foo", "")),
            FOO_THREE,
            TWO_ZONES,
            [weight(2)],
        ),
        id="node-affinity-policy-honored-with-node-affinity",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "zone", SA, BAR, affinity_policy=IGNORE),
                affinity=node_affinity_in("foo", ""),
            ),
            FOO_THREE,
            TWO_ZONES,
            [weight(2)],
        ),
        id="node-affinity-policy-ignored-with-node-affinity",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, BAR, taints_policy=HONOR)),
            TAINTED_X,
            TWO_ZONES,
            [weight(2)],
        ),
        id="node-taints-policy-honored",
    ),
    pytest.param(
        StateCase(pod("p", {"foo": ""}, constraint(1, "zone", SA, BAR)), TAINTED_X, TWO_ZONES, [weight(2)]),
        id="node-taints-policy-ignored",
    ),
]


@pytest.mark.parametrize("case", STATE_CASES)
def test_pre_score_state_empty_nodes(case: StateCase) -> None:
    run = Run(case.nodes, args=case.args, listers=case.listers)
    status = run.plugin.pre_score(run.state, PodInfo(case.pod), run.snapshot.node_infos)
    assert status is None
    state = run.state.get(PRE_SCORE_STATE_KEY, PreScoreState)
    assert state is not None
    assert [dict(c) for c in state.topology_value_to_pod_counts] == list(case.counts)
    assert state.ignored_nodes == case.ignored
    assert list(state.topology_normalizing_weight) == list(case.weights)


# ---- TestPodTopologySpreadScore ----------------------------------------------------------------------


@dataclass
class ScoreCase:
    pod: Pod
    existing: Sequence[Pod]
    nodes: Sequence[Node]
    want: Sequence[int]
    failed: Sequence[Node] = ()
    listers: Listers | None = None


def _pods(spec: str) -> list[Pod]:
    """``"a:2 b:1"`` → two foo pods on node-a, one on node-b."""
    out: list[Pod] = []
    for item in spec.split():
        node, count = item.split(":")
        out.extend(placed(f"p-{node}{i}", f"node-{node}") for i in range(1, int(count) + 1))
    return out


HOST_ABCD = [hn(f"node-{n}") for n in "abcd"]
HOST = constraint(1, HOSTNAME, SA, FOO)
ZONE_HOST = [hn("node-a", zone="zone1"), hn("node-b", zone="zone1"), hn("node-x", zone="zone2")]
FOUR_ZONE_HOST = [*ZONE_HOST, hn("node-y", zone="zone2")]
NODE_FOO = [node_in("node-a", {"node": "node-a", "foo": ""}), node_in("node-b", {"node": "node-b", "foo": ""})]
NODE_ABC_FOO = [*NODE_FOO, node_in("node-c", {"node": "node-c"})]
NODE_ABC_TAINT = [
    node_in("node-a", {"node": "node-a"}),
    node_in("node-b", {"node": "node-b"}),
    node_in("node-c", {"node": "node-c"}, taints=[UNSCHEDULABLE_TAINT]),
]
AFFINITY_PODS = _pods("a:2 b:1 c:1")
ZONE_HOST_ABCD = [
    hn("node-a", zone="zone1"),
    hn("node-b", zone="zone1"),
    hn("node-c", zone="zone2"),
    hn("node-d", zone="zone2"),
]

SCORE_CASES = [
    pytest.param(
        ScoreCase(pod("p", {"foo": ""}, HOST), [], HOST_ABCD[:2], [100, 100]),
        id="one-constraint-on-node-no-existing-pods",
    ),
    pytest.param(
        ScoreCase(pod("p", {"foo": ""}, HOST), _pods("a:2 b:1"), HOST_ABCD[:1], [100], failed=HOST_ABCD[1:2]),
        id="one-constraint-on-node-only-one-node-is-candidate",
    ),
    pytest.param(
        ScoreCase(pod("p", {"foo": ""}, HOST), _pods("a:1 b:1"), HOST_ABCD[:2], [100, 100]),
        id="one-constraint-on-node-all-nodes-have-the-same-number-of-matching-pods",
    ),
    pytest.param(
        ScoreCase(pod("p", {"foo": ""}, HOST), _pods("a:2 b:1 d:3"), HOST_ABCD, [20, 60, 100, 0]),
        id="one-constraint-on-node-all-4-nodes-are-candidates",
    ),
    pytest.param(
        ScoreCase(pod("p", {"foo": ""}, constraint(1, HOSTNAME, SA, None)), _pods("a:2 b:1 d:3"), HOST_ABCD, [100] * 4),
        id="one-constraint-on-node-null-selector",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(2, HOSTNAME, SA, FOO)), _pods("a:2 b:1 d:3"), HOST_ABCD, [33, 66, 100, 16]
        ),
        id="one-constraint-on-node-all-4-nodes-are-candidates-max-skew-2",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(3, HOSTNAME, SA, FOO)),
            _pods("a:4 b:3 c:2 d:1"),
            HOST_ABCD,
            [44, 66, 77, 100],
        ),
        id="one-constraint-on-node-all-4-nodes-are-candidates-max-skew-3",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}),
            _pods("a:4 b:3 c:2 d:1"),
            HOST_ABCD,
            [44, 66, 77, 100],
            listers=listers(services=[{"foo": ""}]),
        ),
        id="system-defaulting-nodes-dont-have-zone-pods-match-service",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, HOST),
            _pods("a:4 b:2 x:1 y:3"),
            [hn("node-a"), hn("node-b"), hn("node-x")],
            [33, 83, 100],
            failed=[hn("node-y")],
        ),
        id="one-constraint-on-node-3-out-of-4-nodes-are-candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, HOST),
            _pods("a:4 b:2 x:1 y:3"),
            [hn("node-a"), node_in("node-b", {"n": "node-b"}), hn("node-x")],
            [16, 0, 100],
            failed=[hn("node-y")],
        ),
        id="one-constraint-on-node-3-of-4-candidates-one-node-doesnt-match-topology-key",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, FOO)),
            _pods("a:4 b:2 x:1 y:3"),
            ZONE_HOST,
            [75, 75, 100],
            failed=[hn("node-y", zone="zone2")],
        ),
        id="one-constraint-on-zone-3-out-of-4-nodes-are-candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(1, "zone", SA, FOO), HOST),
            _pods("a:2 b:1 x:2 y:4"),
            [hn("node-a", zone="zone1"), hn("node-x", zone="zone2")],
            [100, 63],
            failed=[hn("node-b", zone="zone1"), hn("node-y", zone="zone2")],
        ),
        id="two-constraints-on-zone-and-node-2-out-of-4-nodes-are-candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", SA, FOO), constraint(1, "zone", SA, BAR)),
            [
                placed("p-a1", "node-a", {"foo": "", "bar": ""}),
                placed("p-a2", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-y1", "node-y"),
                placed("p-y2", "node-y", {"foo": "", "bar": ""}),
                placed("p-y3", "node-y"),
            ],
            [node_in("node-a", {"zone": "zone1"}), node_in("node-x", {"zone": "zone2"})],
            [85, 100],
            failed=[node_in("node-b", {"zone": "zone1"}), node_in("node-y", {"zone": "zone2"})],
        ),
        id="two-constraints-on-zone-2-out-of-4-nodes-are-candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", SA, FOO), constraint(1, HOSTNAME, SA, BAR)),
            [
                placed("p-a1", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-y1", "node-y"),
                placed("p-y2", "node-y", {"bar": ""}),
            ],
            FOUR_ZONE_HOST,
            [60, 20, 100, 60],
        ),
        id="two-constraints-on-zone-and-node-with-different-label-selectors",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", SA, FOO), constraint(1, HOSTNAME, SA, BAR)),
            [
                placed("p-b1", "node-b", {"bar": ""}),
                placed("p-x1", "node-x"),
                placed("p-y1", "node-y", {"foo": "", "bar": ""}),
            ],
            FOUR_ZONE_HOST,
            [100, 60, 40, 0],
        ),
        id="two-constraints-different-label-selectors-some-nodes-have-0-pods",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": "", "bar": ""}, constraint(1, "zone", SA, FOO), constraint(1, HOSTNAME, SA, BAR)),
            [
                placed("p-a1", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-y1", "node-y"),
                placed("p-y2", "node-y", {"bar": ""}),
            ],
            ZONE_HOST,
            [50, 25, 100],
            failed=[hn("node-y", zone="zone2")],
        ),
        id="two-constraints-different-label-selectors-3-out-of-4-nodes-are-candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, HOST),
            [placed("p-a1", "node-a", namespace="ns1"), *_pods("a:0 b:2"), placed("p-a2", "node-a")],
            HOST_ABCD[:2],
            [100, 33],
        ),
        id="existing-pods-in-a-different-namespace-do-not-count",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, HOST),
            [placed("p-a", "node-a", terminating=True), placed("p-b", "node-b")],
            HOST_ABCD[:2],
            [100, 0],
        ),
        id="terminating-pods-should-be-excluded",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(2, "node", SA, FOO, min_domains=10)),
            _pods("a:2 b:2 c:1"),
            [node_in(f"node-{n}", {"node": f"node-{n}"}) for n in "abc"],
            [75, 75, 100],
        ),
        id="min-domains-has-no-effect-when-schedule-anyway",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(1, "node", SA, FOO), node_selector={"foo": ""}),
            AFFINITY_PODS,
            NODE_ABC_FOO,
            [0, 33, 100],
        ),
        id="node-affinity-policy-honored-with-label-selectors",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(1, "node", SA, FOO, affinity_policy=IGNORE), node_selector={"foo": ""}),
            AFFINITY_PODS,
            NODE_ABC_FOO,
            [66, 100, 100],
        ),
        id="node-affinity-policy-ignored-with-label-selectors",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(1, "node", SA, FOO), affinity=node_affinity_in("foo", "")),
            AFFINITY_PODS,
            NODE_ABC_FOO,
            [0, 33, 100],
        ),
        id="node-affinity-policy-honored-with-node-affinity",
    ),
    pytest.param(
        ScoreCase(
            pod(
                "p",
                {"foo": ""},
                constraint(1, "node", SA, FOO, affinity_policy=IGNORE),
                affinity=node_affinity_in("foo", ""),
            ),
            AFFINITY_PODS,
            NODE_ABC_FOO,
            [66, 100, 100],
        ),
        id="node-affinity-policy-ignored-with-node-affinity",
    ),
    pytest.param(
        ScoreCase(
            pod("p", {"foo": ""}, constraint(1, "node", SA, FOO, taints_policy=HONOR)),
            AFFINITY_PODS,
            NODE_ABC_TAINT,
            [0, 33, 100],
        ),
        id="node-taints-policy-honored",
    ),
    pytest.param(
        ScoreCase(pod("p", {"foo": ""}, constraint(1, "node", SA, FOO)), AFFINITY_PODS, NODE_ABC_TAINT, [66, 100, 100]),
        id="node-taints-policy-ignored",
    ),
    pytest.param(
        ScoreCase(
            pod(
                "p",
                {"foo": "", "bar": ""},
                constraint(1, "zone", SA, {}, match_label_keys=["foo"]),
                constraint(1, HOSTNAME, SA, {}, match_label_keys=["bar"]),
            ),
            [
                placed("p-a1", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": ""}),
                placed("p-y1", "node-c"),
                placed("p-y2", "node-c", {"bar": ""}),
            ],
            ZONE_HOST_ABCD,
            [60, 20, 60, 100],
        ),
        id="match-label-keys-anded-with-label-selector-when-empty",
    ),
    pytest.param(
        ScoreCase(
            pod(
                "p",
                {"foo": "", "bar": "", "baz": ""},
                constraint(1, "zone", SA, FOO),
                constraint(1, HOSTNAME, SA, BAR, match_label_keys=["baz"]),
            ),
            [
                placed("p-a1", "node-a"),
                placed("p-b1", "node-b", {"foo": "", "bar": "", "baz": ""}),
                placed("p-c1", "node-c"),
                placed("p-c2", "node-c", {"bar": ""}),
                placed("p-d3", "node-c", {"bar": "", "baz": ""}),
            ],
            ZONE_HOST_ABCD,
            [60, 20, 60, 100],
        ),
        id="match-label-keys-anded-with-label-selector-when-not-empty",
    ),
]


@pytest.mark.parametrize("case", SCORE_CASES)
def test_pod_topology_spread_score(case: ScoreCase) -> None:
    run = Run([*case.nodes, *case.failed], case.existing, args=PodTopologySpreadArgs(), listers=case.listers)
    info = PodInfo(case.pod)
    names = [n.metadata.name for n in case.nodes]
    filtered = [run.snapshot.by_name[name] for name in names]
    assert run.plugin.pre_score(run.state, info, filtered) is None
    raw = [run.plugin.score(run.state, info, node) for node in filtered]
    batch = run.plugin.score_batch(run.state, info, batch_of(run.snapshot, names)).tolist()
    assert batch == raw
    assert normalize(run.plugin, run.state, info, raw) == list(case.want)


def test_normalize_without_pre_score_state_fails() -> None:
    run = Run([hn("node-a")])
    status = run.plugin.normalize_score(CycleState(), PodInfo(pod("p")), run.snapshot.slots.copy())
    assert status is not None and status.code is Code.ERROR
