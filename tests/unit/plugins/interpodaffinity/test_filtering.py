"""InterPodAffinity PreFilter/Filter against upstream's filtering_test.go, as data: TestRequiredAffinitySingleNode,
TestRequiredAffinityMultipleNodes, TestPreFilterDisabled, TestPreFilterStateAddRemovePod,
TestGetTPMapMatchingIncomingAffinityAntiAffinity. Every Filter case is also run through ``filter_batch``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from ipatest_helpers import node, pod, setup, term

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.interpodaffinity.inter_pod_affinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PRE_FILTER_STATE_KEY,
    InterPodAffinity,
    _PreFilterState,
)
from kubesched.testing.builders import make_node
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch

AFF = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
ANTI = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
EXIST = Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
SKIP = Status(Code.SKIP)

LABEL = {"service": "securityscan"}
LABEL2 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})
EXISTING = pod(labels=LABEL, node="node1")
IN_SCAN = term("service", "In", "region", ["securityscan", "value2"])
ANTI_NODE = term("service", "In", "node", ["antivirusscan", "value2"])
ANTI_ZONE = term("service", "In", "zone", ["securityscan", "value2"])
BAD_VALUE_MESSAGE = (
    'parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must '
    "be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _two_terms(second_in: str) -> list[dict[str, object]]:
    first: dict[str, object] = {
        "labelSelector": {
            "matchExpressions": [
                {"key": "service", "operator": "Exists"},
                {"key": "wrongkey", "operator": "DoesNotExist"},
            ]
        },
        "topologyKey": "region",
    }
    second: dict[str, object] = {
        "labelSelector": {
            "matchExpressions": [
                {"key": "service", "operator": "In", "values": [second_in]},
                {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
            ]
        },
        "topologyKey": "region",
    }
    return [first, second]


def _ns_term(topology: str, ns_selector: Mapping[str, object]) -> dict[str, object]:
    return term("service", "In", topology, ["securityscan", "value2"], namespaceSelector=ns_selector)


TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}


def run(
    incoming: Pod, existing: Sequence[Pod], nodes: Sequence[Node], namespaces: Mapping[str, Mapping[str, str]] | None
) -> tuple[Status | None, list[Status | None] | None]:
    plugin, _, snapshot = setup(nodes, existing, namespaces=namespaces)
    state = CycleState()
    info = PodInfo(incoming)
    pre = plugin.pre_filter(state, info, snapshot.node_infos)
    assert pre is None or isinstance(pre, Status)
    if pre is not None:
        return pre, None
    per_node = filter_nodes(plugin, state, info, snapshot)
    assert filter_nodes_batch(plugin, state, info, snapshot) == per_node
    return None, per_node


SINGLE_NODE = [
    pytest.param(pod(), [], SKIP, None, id="no-required-affinity-skips"),
    pytest.param(pod(labels=LABEL2, affinity=[IN_SCAN]), [EXISTING], None, None, id="in-operator-matches-existing"),
    pytest.param(
        pod(labels=LABEL2, affinity=[term("service", "NotIn", "region", ["securityscan3", "value3"])]),
        [EXISTING],
        None,
        None,
        id="not-in-operator-matches-existing",
    ),
    pytest.param(
        pod(
            labels=LABEL2,
            affinity=[
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]
                    },
                    "namespaces": ["DiffNameSpace"],
                }
            ],
        ),
        [pod(ns="ns", labels=LABEL, node="node1")],
        None,
        AFF,
        id="different-namespace-does-not-match",
    ),
    pytest.param(
        pod(labels=LABEL, affinity=[term("service", "In", "", ["antivirusscan", "value2"])]),
        [EXISTING],
        None,
        AFF,
        id="unmatching-label-selector",
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=_two_terms("securityscan")), [EXISTING], None, None, id="several-operators-match"
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=_two_terms("securityscan2")), [EXISTING], None, AFF, id="requirements-are-anded"
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=[IN_SCAN], anti=[ANTI_NODE]), [EXISTING], None, None, id="affinity-and-anti-ok"
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=[IN_SCAN], anti=[ANTI_NODE]),
        [pod(labels=LABEL, node="node1", anti=[ANTI_NODE])],
        None,
        None,
        id="affinity-anti-and-symmetry-ok",
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=[IN_SCAN], anti=[ANTI_ZONE]),
        [EXISTING],
        None,
        ANTI,
        id="own-anti-affinity-violated",
    ),
    pytest.param(
        pod(labels=LABEL, affinity=[IN_SCAN], anti=[ANTI_NODE]),
        [pod(labels=LABEL, node="node1", anti=[ANTI_ZONE])],
        None,
        EXIST,
        id="existing-anti-affinity-symmetry-violated",
    ),
    # Upstream's existing pod sits on "node2", which is not in the snapshot; it cannot count either way.
    pytest.param(
        pod(labels=LABEL, affinity=[term("service", "NotIn", "region", ["securityscan", "value2"])]),
        [],
        None,
        AFF,
        id="pod-does-not-match-its-own-terms",
    ),
    pytest.param(
        pod(labels=LABEL),
        [pod(labels=LABEL, node="node1", anti=[ANTI_ZONE])],
        None,
        EXIST,
        id="existing-anti-affinity-respected-without-own-terms",
    ),
    pytest.param(
        pod(labels=LABEL),
        [pod(labels=LABEL, node="node1", anti=[term("service", "NotIn", "zone", ["securityscan", "value2"])])],
        SKIP,
        None,
        id="existing-anti-affinity-not-matching-skips",
    ),
    pytest.param(
        pod(labels=LABEL, anti=[term("service", "Exists", "region"), term("security", "Exists", "region")]),
        [pod(labels=LABEL2, node="node1", anti=[term("security", "Exists", "zone")])],
        None,
        ANTI,
        id="anti-ok-with-existing-but-existing-violates-incoming",
    ),
    pytest.param(
        pod(labels=LABEL, anti=[term("service", "Exists", "zone"), term("security", "Exists", "zone")]),
        [pod(labels=LABEL2, node="node1", anti=[term("security", "Exists", "zone")])],
        None,
        ANTI,
        id="symmetry-a1",
    ),
    pytest.param(
        pod(labels=LABEL2, anti=[term("security", "Exists", "zone")]),
        [pod(labels=LABEL, node="node1", anti=[term("service", "Exists", "zone"), term("security", "Exists", "zone")])],
        None,
        EXIST,
        id="symmetry-a2",
    ),
    pytest.param(
        pod(labels={"abc": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")]),
        [
            pod(
                labels={"def": "", "xyz": ""},
                node="node1",
                anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")],
            )
        ],
        None,
        ANTI,
        id="symmetry-b1",
    ),
    pytest.param(
        pod(labels={"def": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")]),
        [
            pod(
                labels={"abc": "", "xyz": ""},
                node="node1",
                anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")],
            )
        ],
        None,
        ANTI,
        id="symmetry-b2",
    ),
    pytest.param(
        pod(labels=LABEL, affinity=[term("service", "In", "region", ["{{.bad-value.}}"]), ANTI_NODE]),
        [],
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, BAD_VALUE_MESSAGE),
        None,
        id="invalid-affinity-label-value-fails-prefilter",
    ),
    pytest.param(
        pod(
            labels=LABEL,
            affinity=[term("service", "In", "region", ["foo"]), term("service", "In", "node", ["{{.bad-value.}}"])],
        ),
        [],
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, BAD_VALUE_MESSAGE),
        None,
        id="invalid-second-term-label-value-fails-prefilter",
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=[_ns_term("region", TEAM1)]),
        [pod(ns="subteam1.team1", labels=LABEL, node="node1")],
        None,
        None,
        id="affinity-namespace-selector",
    ),
    pytest.param(
        pod(labels=LABEL2, affinity=[_ns_term("region", TEAM1)]),
        [pod(ns="subteam1.team2", labels=LABEL, node="node1")],
        None,
        AFF,
        id="affinity-non-matching-namespace-selector",
    ),
    pytest.param(
        pod(ns="subteam1.team1", labels=LABEL2, anti=[_ns_term("zone", TEAM1)]),
        [pod(ns="subteam2.team1", labels=LABEL, node="node1")],
        None,
        ANTI,
        id="anti-affinity-matching-namespace-selector",
    ),
    pytest.param(
        pod(ns="subteam1.team1", labels=LABEL2, anti=[_ns_term("zone", {})]),
        [pod(ns="subteam2.team1", labels=LABEL, node="node1")],
        None,
        ANTI,
        id="anti-affinity-empty-namespace-selector-matches-all",
    ),
    pytest.param(
        pod(ns="subteam1.team1", labels=LABEL2, anti=[_ns_term("zone", TEAM1)]),
        [pod(ns="subteam1.team2", labels=LABEL, node="node1")],
        None,
        None,
        id="anti-affinity-non-matching-namespace-selector",
    ),
]


@pytest.mark.parametrize(("incoming", "existing", "want_pre", "want_filter"), SINGLE_NODE)
def test_required_affinity_single_node(
    incoming: Pod, existing: list[Pod], want_pre: Status | None, want_filter: Status | None
) -> None:
    pre, filtered = run(incoming, existing, [NODE1], None)
    assert pre == want_pre
    if pre is None:
        assert filtered == [want_filter]


CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def _hosts(*zones: str, region: str = "r1") -> list[Node]:
    return [
        node(f"node{chr(65 + i)}", {"region": region, "zone": zone, "hostname": f"node{chr(65 + i)}"})
        for i, zone in enumerate(zones)
    ]


MULTIPLE_NODES = [
    pytest.param(
        pod(affinity=[term("foo", "In", "region", ["bar"])]),
        [pod("p1", node="node1", labels={"foo": "bar"})],
        [node("node1", CHINA), node("node2", CHINA_AZ1), node("node3", INDIA)],
        None,
        [None, None, AFF],
        id="same-domain-as-matching-pod",
    ),
    pytest.param(
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[term("foo", "In", "zone", ["bar"]), term("service", "In", "zone", ["securityscan"])],
        ),
        [pod("p1", node="nodeA", labels={"foo": "bar"})],
        [node("nodeA", {"zone": "az1", "hostname": "h1"}), node("nodeB", {"zone": "az2", "hostname": "h2"})],
        None,
        [None, None],
        id="first-pod-of-collection-not-blocked",
    ),
    pytest.param(
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[term("foo", "In", "zone", ["bar"]), term("service", "In", "zone", ["securityscan"])],
        ),
        [pod("p1", node="nodeA", labels={"foo": "bar"})],
        [node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), node("nodeB", {"zoneLabel": "az2", "hostname": "h2"})],
        None,
        [AFF, AFF],
        id="first-pod-of-collection-needs-topology-keys",
    ),
    pytest.param(
        pod(anti=[term("foo", "In", "region", ["abc"])]),
        [pod(node="nodeA", labels={"foo": "abc"})],
        [node("nodeA", {"region": "r1", "hostname": "nodeA"}), node("nodeB", {"region": "r1", "hostname": "nodeB"})],
        None,
        [ANTI, ANTI],
        id="anti-affinity-blocks-whole-domain",
    ),
    pytest.param(
        pod(anti=[term("foo", "In", "region", ["abc"]), term("service", "In", "zone", ["securityscan"])]),
        [pod(node="nodeA", labels={"foo": "abc", "service": "securityscan"})],
        _hosts("z1", "z2"),
        None,
        [ANTI, ANTI],
        id="anti-affinity-any-term-matches",
    ),
    pytest.param(
        pod(anti=[term("foo", "In", "region", ["abc"])]),
        [pod(node="nodeA", labels={"foo": "abc"})],
        [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)],
        None,
        [ANTI, ANTI, None],
        id="anti-affinity-other-region-ok",
    ),
    pytest.param(
        pod(ns="NS1", labels={"foo": "123"}, anti=[term("foo", "In", "region", ["bar"])]),
        [
            pod(node="nodeA", ns="NS1", labels={"foo": "bar"}),
            pod(node="nodeC", ns="NS2", anti=[term("foo", "In", "region", ["123"])]),
        ],
        [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)],
        None,
        [ANTI, ANTI, None],
        id="existing-anti-affinity-in-other-namespace-ignored",
    ),
    pytest.param(
        pod(labels={"foo": ""}),
        [pod(node="nodeA", anti=[term("foo", "Exists", "invalid-node-label")])],
        _hosts("z1", "z1"),
        SKIP,
        None,
        id="existing-term-with-absent-topology-key-skips",
    ),
    pytest.param(
        pod(node="nodeA", anti=[term("foo", "Exists", "invalid-node-label")]),
        [pod(node="nodeA", labels={"foo": ""})],
        _hosts("z1", "z1"),
        None,
        [None, None],
        id="incoming-anti-affinity-needs-topology-key",
    ),
    pytest.param(
        pod(labels={"foo": "", "bar": ""}),
        [
            pod(node="nodeA", anti=[term("foo", "Exists", "zone")]),
            pod(node="nodeA", anti=[term("bar", "Exists", "region")]),
        ],
        _hosts("z1", "z2"),
        None,
        [EXIST, EXIST],
        id="existing-anti-affinity-terms-on-all-nodes",
    ),
    pytest.param(
        pod(anti=[term("foo", "Exists", "zone"), term("bar", "Exists", "region")]),
        [pod(node="nodeA", labels={"foo": ""}), pod(node="nodeB", labels={"bar": ""})],
        _hosts("z1", "z2"),
        None,
        [ANTI, ANTI],
        id="incoming-anti-affinity-violates-one-term-each",
    ),
    pytest.param(
        pod(labels={"foo": "", "bar": ""}),
        [pod(node="nodeA", anti=[term("foo", "Exists", "invalid-node-label"), term("bar", "Exists", "zone")])],
        _hosts("z1", "z2"),
        None,
        [EXIST, None],
        id="existing-anti-affinity-one-term-absent-key",
    ),
    pytest.param(
        pod(anti=[term("foo", "Exists", "invalid-node-label"), term("bar", "Exists", "zone")]),
        [pod("podA", node="nodeA", labels={"foo": "", "bar": ""})],
        _hosts("z1", "z2"),
        None,
        [ANTI, None],
        id="incoming-anti-affinity-one-term-absent-key",
    ),
    pytest.param(
        pod(labels={"foo": "", "bar": ""}),
        [pod(node="nodeA", anti=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")])],
        _hosts("z1", "z2"),
        None,
        [EXIST, EXIST],
        id="existing-anti-affinity-all-terms-valid",
    ),
    pytest.param(
        pod(anti=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [pod(node="nodeA", labels={"foo": "", "bar": ""})],
        _hosts("z1", "z2"),
        None,
        [ANTI, ANTI],
        id="incoming-anti-affinity-all-terms-valid",
    ),
    pytest.param(
        pod(labels={"foo": "", "bar": ""}),
        [
            pod(node="nodeA", anti=[term("foo", "Exists", "zone"), term("labelA", "Exists", "zone")]),
            pod(node="nodeB", anti=[term("bar", "Exists", "zone"), term("labelB", "Exists", "zone")]),
        ],
        _hosts("z1", "z2", "z3"),
        None,
        [EXIST, EXIST, None],
        id="existing-anti-affinity-only-node-c-left",
    ),
    pytest.param(
        pod(affinity=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [pod("pod1", labels={"foo": "", "bar": ""}, node="nodeA")],
        _hosts("z1", "z1"),
        None,
        [None, None],
        id="affinity-terms-then-topology-keys",
    ),
    pytest.param(
        pod(affinity=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [pod("pod1", node="nodeA", labels={"foo": ""}), pod("pod2", node="nodeB", labels={"bar": ""})],
        _hosts("z1", "z2"),
        None,
        [AFF, AFF],
        id="affinity-terms-must-match-the-same-pod",
    ),
]


@pytest.mark.parametrize(("incoming", "existing", "nodes", "want_pre", "want_filter"), MULTIPLE_NODES)
def test_required_affinity_multiple_nodes(
    incoming: Pod,
    existing: list[Pod],
    nodes: list[Node],
    want_pre: Status | None,
    want_filter: list[Status | None] | None,
) -> None:
    pre, filtered = run(incoming, existing, nodes, {"NS1": {}})
    assert pre == want_pre
    if pre is None:
        # The snapshot interleaves zones; compare by node name.
        _, _, snapshot = setup(nodes, existing)
        by_name = dict(zip([info.name for info in snapshot.node_infos], filtered or [], strict=True))
        assert [by_name[n.metadata.name] for n in nodes] == want_filter


def test_pre_filter_disabled_filter_errors() -> None:
    plugin = InterPodAffinity(None, PluginHandle())
    got = plugin.filter(CycleState(), PodInfo(pod()), NodeInfo(make_node("n").obj()))
    assert got == Status(Code.ERROR, 'error reading "PreFilterInterPodAffinity" from cycleState: not found')


# ---- TestPreFilterStateAddRemovePod -----------------------------------------------------------------------

LABEL_A = {"region": "r1", "zone": "z11"}
LABEL_B = {"region": "r1", "zone": "z12"}
LABEL_C = {"region": "r2", "zone": "z21"}
FOO_BAR = {"foo": "bar"}
ANTI_FOO_BAR = [term("foo", "In", "region", ["bar"])]
COMPLEX = [term("foo", "In", "region", ["bar", "buzz"]), term("service", "NotIn", "zone", ["bar", "security", "test"])]
ABC_NODES = [node("nodeA", LABEL_A), node("nodeB", LABEL_B), node("nodeC", LABEL_C)]

ADD_REMOVE = [
    pytest.param(
        pod("pending", labels=FOO_BAR, anti=ANTI_FOO_BAR),
        [pod("p1", labels=FOO_BAR, node="nodeA"), pod("p2", node="nodeC", anti=ANTI_FOO_BAR)],
        pod("addedPod", labels=FOO_BAR, node="nodeB", anti=ANTI_FOO_BAR),
        {("region", "r1"): 2},
        {},
        id="anti-affinity-terms-updated",
    ),
    pytest.param(
        pod("pending", labels=FOO_BAR, anti=COMPLEX),
        [pod("p1", labels=FOO_BAR, node="nodeA"), pod("p2", node="nodeC", anti=ANTI_FOO_BAR)],
        pod("addedPod", labels=FOO_BAR, node="nodeA", anti=COMPLEX),
        {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
        {},
        id="complex-anti-affinity-terms-updated",
    ),
    pytest.param(
        pod("pending", labels=FOO_BAR, affinity=COMPLEX),
        [pod("p1", labels=FOO_BAR, node="nodeA"), pod("p2", node="nodeC", anti=ANTI_FOO_BAR, affinity=COMPLEX)],
        pod("addedPod", labels=FOO_BAR, node="nodeA", anti=COMPLEX),
        {},
        {("region", "r1"): 2, ("zone", "z11"): 2},
        id="affinity-and-anti-affinity-updated",
    ),
]


def _state(plugin: InterPodAffinity, pending: Pod, nodes: Sequence[NodeInfo]) -> tuple[CycleState, _PreFilterState]:
    state = CycleState()
    assert plugin.pre_filter(state, PodInfo(pending), nodes) is None
    found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
    assert found is not None
    return state, found


def _counts(s: _PreFilterState) -> tuple[dict[tuple[str, str], int], ...]:
    return s.existing_anti_affinity, s.affinity, s.anti_affinity


@pytest.mark.parametrize(("pending", "existing", "added", "want_anti", "want_affinity"), ADD_REMOVE)
def test_pre_filter_state_add_remove_pod(
    pending: Pod,
    existing: list[Pod],
    added: Pod,
    want_anti: dict[tuple[str, str], int],
    want_affinity: dict[tuple[str, str], int],
) -> None:
    all_plugin, _, all_snapshot = setup(ABC_NODES, [*existing, added])
    _, all_state = _state(all_plugin, pending, all_snapshot.node_infos)
    plugin, _, snapshot = setup(ABC_NODES, existing)
    state, before = _state(plugin, pending, snapshot.node_infos)
    original = before.clone()
    node_info = snapshot.by_name[added.spec.node_name]
    assert plugin.add_pod(state, PodInfo(pending), PodInfo(added), node_info) is None
    after = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
    assert after is not None
    assert after.anti_affinity == want_anti
    assert after.affinity == want_affinity
    assert _counts(after) == _counts(all_state)
    assert plugin.remove_pod(state, PodInfo(pending), PodInfo(added), node_info) is None
    assert _counts(after) == _counts(original)


def test_pre_filter_state_clone_is_deep() -> None:
    plugin, _, snapshot = setup(ABC_NODES, [pod("p1", labels=FOO_BAR, node="nodeA")])
    _, s = _state(plugin, pod("pending", labels=FOO_BAR, anti=ANTI_FOO_BAR), snapshot.node_infos)
    clone = s.clone()
    assert clone is not s and _counts(clone) == _counts(s)
    clone.anti_affinity[("region", "r9")] = 1
    assert ("region", "r9") not in s.anti_affinity


def test_add_remove_pod_without_pre_filter_state_errors() -> None:
    plugin = InterPodAffinity(None, PluginHandle())
    info = NodeInfo(make_node("n").obj())
    want = Status(Code.ERROR, 'error reading "PreFilterInterPodAffinity" from cycleState: not found')
    assert plugin.add_pod(CycleState(), PodInfo(pod()), PodInfo(pod("x")), info) == want
    assert plugin.remove_pod(CycleState(), PodInfo(pod()), PodInfo(pod("x")), info) == want


# ---- TestGetTPMapMatchingIncomingAffinityAntiAffinity ------------------------------------------------------

NODE_A = node("nodeA", {"hostname": "nodeA"})
HOST_A = ("hostname", "nodeA")


def _normal(*labels: str) -> Pod:
    return pod("normal", node="nodeA", labels=dict.fromkeys(labels, ""))


def _exists(*keys: str) -> list[dict[str, object]]:
    return [term(k, "Exists", "hostname") for k in keys]


INCOMING_COUNTS = [
    pytest.param([], pod("aaa-normal"), {}, {}, id="nil"),
    pytest.param([_normal("aaa")], pod("aaa-normal"), {}, {}, id="no-affinity-no-op"),
    pytest.param(
        [_normal("bbb")], pod("aaa-anti", affinity=_exists("aaa"), anti=_exists("aaa")), {}, {}, id="no-match"
    ),
    pytest.param(
        [_normal("aaa")],
        pod("affi-antiaffi", affinity=_exists("aaa"), anti=_exists("aaa")),
        {HOST_A: 1},
        {HOST_A: 1},
        id="single-term-matches",
    ),
    pytest.param(
        [_normal("aaa", "bbb")],
        pod("affi-antiaffi", affinity=_exists("aaa", "bbb"), anti=_exists("aaa")),
        {HOST_A: 2},
        {HOST_A: 1},
        id="multiple-terms-one-count-per-term",
    ),
    pytest.param(
        [_normal("aaa")],
        pod("affi-antiaffi", affinity=_exists("aaa", "bbb"), anti=_exists("aaa", "bbb")),
        {},
        {HOST_A: 1},
        id="affinity-not-matched-anti-matched",
    ),
    pytest.param(
        [_normal("aaa", "bbb")],
        pod("anaffi-antiaffiti", affinity=_exists("aaa", "ccc"), anti=_exists("aaa", "ccc")),
        {},
        {HOST_A: 1},
        id="anti-partial-case-1",
    ),
    pytest.param(
        [_normal("bbb")],
        pod("affi-antiaffi", affinity=_exists("aaa", "bbb"), anti=_exists("aaa", "bbb")),
        {},
        {HOST_A: 1},
        id="anti-partial-case-2",
    ),
]


@pytest.mark.parametrize(("existing", "incoming", "want_affinity", "want_anti"), INCOMING_COUNTS)
def test_incoming_affinity_anti_affinity_counts(
    existing: list[Pod],
    incoming: Pod,
    want_affinity: dict[tuple[str, str], int],
    want_anti: dict[tuple[str, str], int],
) -> None:
    plugin, _, snapshot = setup([NODE_A], existing)
    state = CycleState()
    status = plugin.pre_filter(state, PodInfo(incoming), snapshot.node_infos)
    if status == SKIP:
        assert want_affinity == {} and want_anti == {}
        return
    assert status is None
    found = state.get(PRE_FILTER_STATE_KEY, _PreFilterState)
    assert found is not None
    assert found.affinity == want_affinity
    assert found.anti_affinity == want_anti
