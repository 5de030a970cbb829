"""InterPodAffinity PreScore/Score/NormalizeScore against upstream's scoring_test.go, as data: TestPreferredAffinity
and TestPreferredAffinityWithHardPodAffinitySymmetricWeight. Scores are also computed with ``score_batch``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from ipatest_helpers import node, pod, setup, term

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.testing.framework_helpers import PluginHandle, batch_of

SKIP = Status(Code.SKIP)
MAX = 100
CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}

Affinity = dict[str, Any]


def _preferred(*weighted: tuple[int, Mapping[str, Any]], anti: bool = False) -> Affinity:
    section = "podAntiAffinity" if anti else "podAffinity"
    entries = [{"weight": w, "podAffinityTerm": dict(t)} for w, t in weighted]
    return {section: {"preferredDuringSchedulingIgnoredDuringExecution": entries}}


STAY_WITH_S1_IN_REGION = _preferred((5, term("security", "In", "region", ["S1"])))
STAY_WITH_S2_IN_REGION = _preferred((6, term("security", "In", "region", ["S2"])))
AFFINITY3 = _preferred(
    (
        8,
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": "security", "operator": "NotIn", "values": ["S1"]},
                    {"key": "security", "operator": "In", "values": ["S2"]},
                ]
            },
            "topologyKey": "region",
        },
    ),
    (
        2,
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": "security", "operator": "Exists"},
                    {"key": "wrongkey", "operator": "DoesNotExist"},
                ]
            },
            "topologyKey": "region",
        },
    ),
)
HARD_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            term("security", "In", "region", ["S1", "value2"]),
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "security", "operator": "Exists"},
                        {"key": "wrongkey", "operator": "DoesNotExist"},
                    ]
                },
                "topologyKey": "region",
            },
        ]
    }
}
AWAY_FROM_S1_IN_AZ = _preferred((5, term("security", "In", "az", ["S1"])), anti=True)
AWAY_FROM_S2_IN_AZ = _preferred((5, term("security", "In", "az", ["S2"])), anti=True)
STAY_WITH_S1_AWAY_FROM_S2 = {
    **_preferred((8, term("security", "In", "region", ["S1"]))),
    **_preferred((5, term("security", "In", "az", ["S2"])), anti=True),
}
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
_NS_TERM = term("security", "In", "region", ["S1"], namespaces=["subteam2.team2"], namespaceSelector=TEAM1)
AFFINITY_NS_SELECTOR = _preferred((5, _NS_TERM))
ANTI_AFFINITY_NS_SELECTOR = _preferred((5, _NS_TERM), anti=True)
INVALID_AFFINITY = _preferred((8, term("security", "In", "region", ["{{.bad-value.}}"])))
INVALID_ANTI_AFFINITY = _preferred((5, term("security", "In", "az", ["{{.bad-value.}}"])), anti=True)


def p(
    node_name: str = "", labels: Mapping[str, str] | None = None, affinity: Affinity | None = None, ns: str = "default"
) -> Pod:
    built = pod(ns=ns, labels=labels, node=node_name)
    if affinity is not None:
        raw = dict(built.raw)
        raw["spec"] = {**raw["spec"], "affinity": affinity}
        built = Pod.from_dict(raw, "scoring test pod")
    return built


def nodes(*labels: Mapping[str, str]) -> list[Node]:
    return [node(f"node{i + 1}", lbl) for i, lbl in enumerate(labels)]


def run_scores(
    incoming: Pod, existing: Sequence[Pod], cluster: Sequence[Node], args: InterPodAffinityArgs
) -> tuple[Status | None, list[int]]:
    plugin, _, snapshot = setup(cluster, existing, args=args)
    state = CycleState()
    info = PodInfo(incoming)
    status = plugin.pre_score(state, info, snapshot.node_infos)
    if status is not None:
        return status, []
    by_name = {n.name: plugin.score(state, info, n) for n in snapshot.node_infos}
    names = [n.metadata.name for n in cluster]
    raw = [by_name[name] for name in names]
    batch = plugin.score_batch(state, info, batch_of(snapshot, names))
    assert batch.tolist() == raw
    scores = np.asarray(raw, dtype=np.int64)
    assert plugin.normalize_score(state, info, scores) is None
    return None, [int(s) for s in scores.tolist()]


PREFERRED = [
    pytest.param(p(labels=S1), [], nodes(CHINA, INDIA, AZ1), False, SKIP, [], id="no-affinity-skips"),
    pytest.param(
        p(labels=S1, affinity=STAY_WITH_S1_IN_REGION),
        [p("node1", S1), p("node2", S2), p("node3", S1)],
        nodes(CHINA, INDIA, AZ1),
        False,
        None,
        [MAX, 0, 0],
        id="affinity-topology-and-pods-match",
    ),
    pytest.param(
        p(affinity=STAY_WITH_S1_IN_REGION),
        [p("node1", S1)],
        nodes(CHINA, CHINA_AZ1, INDIA),
        False,
        None,
        [MAX, MAX, 0],
        id="same-domain-same-score",
    ),
    pytest.param(
        p(labels=S1, affinity=STAY_WITH_S2_IN_REGION),
        [p("node1", S2), p("node1", S2), p("node2", S2), p("node3", S2), p("node4", S2), p("node5", S2)],
        nodes(CHINA, INDIA, CHINA, CHINA, INDIA),
        False,
        None,
        [MAX, 0, MAX, MAX, 0],
        id="region-with-more-matches-wins",
    ),
    pytest.param(
        p(labels=S1, affinity=AFFINITY3),
        [p("node1", S1), p("node2", S2), p("node3", S1)],
        nodes(CHINA, INDIA, AZ1),
        False,
        None,
        [20, MAX, 0],
        id="operators-and-partial-matches",
    ),
    pytest.param(
        p(labels=S2),
        [p("node1", S1, STAY_WITH_S1_IN_REGION), p("node2", S2, STAY_WITH_S2_IN_REGION)],
        nodes(CHINA, INDIA, AZ1),
        False,
        None,
        [0, MAX, 0],
        id="affinity-symmetry-preferred",
    ),
    pytest.param(
        p(labels=S1, ns="subteam1.team1"),
        [p("node1", S1, AFFINITY_NS_SELECTOR), p("node2", S2, STAY_WITH_S2_IN_REGION)],
        nodes(CHINA, INDIA, AZ1),
        False,
        None,
        [MAX, 0, 0],
        id="affinity-symmetry-namespace-selector",
    ),
    pytest.param(
        p(labels=S1, ns="subteam1.team1"),
        [p("node1", S1, ANTI_AFFINITY_NS_SELECTOR), p("node2", S2, STAY_WITH_S2_IN_REGION)],
        nodes(CHINA, INDIA, AZ1),
        False,
        None,
        [0, MAX, MAX],
        id="anti-affinity-symmetry-namespace-selector",
    ),
    pytest.param(
        p(labels=S1),
        [p("node1", S1, HARD_AFFINITY), p("node2", S2, HARD_AFFINITY)],
        nodes(CHINA, INDIA, AZ1),
        False,
        None,
        [MAX, MAX, 0],
        id="affinity-symmetry-required",
    ),
    pytest.param(
        p(labels=S1, affinity=AWAY_FROM_S1_IN_AZ),
        [p("node1", S1), p("node2", S2)],
        nodes(AZ1, CHINA),
        False,
        None,
        [0, MAX],
        id="anti-affinity-unmatched-node-wins",
    ),
    pytest.param(
        p(labels=S1, affinity=AWAY_FROM_S1_IN_AZ),
        [p("node1", S1), p("node2", S1)],
        nodes(AZ1, CHINA),
        False,
        None,
        [0, MAX],
        id="anti-affinity-node-without-topology-key-wins",
    ),
    pytest.param(
        p(labels=S1, affinity=AWAY_FROM_S1_IN_AZ),
        [p("node1", S1), p("node1", S1), p("node2", S2)],
        nodes(AZ1, INDIA),
        False,
        None,
        [0, MAX],
        id="anti-affinity-more-unmatches-wins",
    ),
    pytest.param(
        p(labels=S2),
        [p("node1", S1, AWAY_FROM_S2_IN_AZ), p("node2", S2, AWAY_FROM_S1_IN_AZ)],
        nodes(AZ1, AZ2),
        False,
        None,
        [0, MAX],
        id="anti-affinity-symmetry",
    ),
    pytest.param(
        p(labels=S1, affinity=STAY_WITH_S1_AWAY_FROM_S2),
        [p("node1", S1), p("node2", S1)],
        nodes(CHINA, AZ1),
        False,
        None,
        [MAX, 0],
        id="affinity-and-anti-affinity",
    ),
    pytest.param(
        p(labels=S1, affinity=STAY_WITH_S1_AWAY_FROM_S2),
        [
            p("node1", S1),
            p("node1", S1),
            p("node2", S1),
            p("node3", S1),
            p("node3", S1),
            p("node4", S1),
            p("node5", S1),
        ],
        nodes(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA),
        False,
        None,
        [MAX, 0, MAX, MAX, 0],
        id="affinity-and-anti-affinity-same-labels",
    ),
    pytest.param(
        p(labels=S1, affinity=STAY_WITH_S1_AWAY_FROM_S2),
        [
            p("node1", S1),
            p("node2", S2),
            p("node3", affinity=STAY_WITH_S1_AWAY_FROM_S2),
            p("node4", affinity=AWAY_FROM_S1_IN_AZ),
        ],
        nodes(CHINA, AZ1, INDIA, AZ2),
        False,
        None,
        [MAX, 0, MAX, 0],
        id="affinity-anti-affinity-and-symmetry",
    ),
    pytest.param(
        p(labels=S1),
        [p("node1", S1), p("node2", affinity=STAY_WITH_S1_AWAY_FROM_S2)],
        nodes(CHINA, CHINA),
        False,
        None,
        [0, 0],
        id="partial-nodes-with-affinity-no-panic",
    ),
    pytest.param(
        p(affinity=INVALID_AFFINITY), [], nodes(CHINA, CHINA), False, Status(Code.ERROR), [], id="invalid-affinity"
    ),
    pytest.param(
        p(affinity=INVALID_ANTI_AFFINITY),
        [],
        nodes(CHINA, CHINA),
        False,
        Status(Code.ERROR),
        [],
        id="invalid-anti-affinity",
    ),
    pytest.param(
        p(labels=S1, affinity=AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam1.team2"),
            p("node2", S1, ns="subteam2.team1"),
        ],
        nodes(CHINA, INDIA),
        False,
        None,
        [MAX, 0],
        id="affinity-namespace-selector-matches",
    ),
    pytest.param(
        p(labels=S1, affinity=AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam2.team2"),
            p("node2", S1, ns="subteam2.team1"),
        ],
        nodes(CHINA, INDIA),
        False,
        None,
        [MAX, 0],
        id="affinity-namespace-selector-and-namespaces",
    ),
    pytest.param(
        p(labels=S1, affinity=ANTI_AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam1.team2"),
            p("node2", S1, ns="subteam2.team1"),
        ],
        nodes(CHINA, INDIA),
        False,
        None,
        [0, MAX],
        id="anti-affinity-namespace-selector-matches",
    ),
    pytest.param(
        p(labels=S1, affinity=ANTI_AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam1.team1"),
            p("node1", S1, ns="subteam2.team2"),
            p("node2", S1, ns="subteam2.team1"),
        ],
        nodes(CHINA, INDIA),
        False,
        None,
        [0, MAX],
        id="anti-affinity-namespace-selector-and-namespaces",
    ),
    pytest.param(
        p(labels=S2),
        [p("node1", S1, STAY_WITH_S1_AWAY_FROM_S2), p("node2", S2, STAY_WITH_S2_IN_REGION)],
        nodes(CHINA, INDIA),
        True,
        SKIP,
        [],
        id="ignore-preferred-terms-of-existing-pods",
    ),
    pytest.param(
        p(labels=S2),
        [p("node1", S1, STAY_WITH_S1_AWAY_FROM_S2), p("node2", S2, STAY_WITH_S2_IN_REGION)],
        nodes(CHINA, INDIA),
        False,
        None,
        [0, MAX],
        id="do-not-ignore-preferred-terms-of-existing-pods",
    ),
    pytest.param(p(labels=S2), [], [], False, SKIP, [], id="no-nodes-to-score"),
]


@pytest.mark.parametrize(("incoming", "existing", "cluster", "ignore", "want_status", "want"), PREFERRED)
def test_preferred_affinity(
    incoming: Pod,
    existing: list[Pod],
    cluster: list[Node],
    ignore: bool,
    want_status: Status | None,
    want: list[int],
) -> None:
    args = InterPodAffinityArgs(hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=ignore)
    status, scores = run_scores(incoming, existing, cluster, args)
    if want_status is None:
        assert status is None
        assert scores == want
        return
    assert status is not None and status.code == want_status.code
    if status.code is Code.ERROR:
        assert 'Invalid value: "{{.bad-value.}}"' in status.message


HARD_POD_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            term("service", "In", "region", ["S1"], namespaces=["default", "subteam2.team2"], namespaceSelector=TEAM1)
        ]
    }
}
SERVICE_S1 = {"service": "S1"}
HARD_PODS = [p("node1", affinity=HARD_POD_AFFINITY), p("node2", affinity=HARD_POD_AFFINITY)]


@pytest.mark.parametrize(
    ("incoming", "weight", "want_status", "want"),
    [
        pytest.param(p(labels=SERVICE_S1), 1, None, [MAX, MAX, 0], id="default-weight"),
        pytest.param(p(labels=SERVICE_S1), 0, SKIP, [], id="zero-weight"),
        pytest.param(p(labels=SERVICE_S1, ns="subteam1.team2"), 1, SKIP, [], id="no-matching-namespace"),
        pytest.param(
            p(labels=SERVICE_S1, ns="subteam1.team1"), 1, None, [MAX, MAX, 0], id="matching-namespace-selector"
        ),
        pytest.param(p(labels=SERVICE_S1, ns="subteam2.team2"), 1, None, [MAX, MAX, 0], id="matching-namespaces"),
    ],
)
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
    incoming: Pod, weight: int, want_status: Status | None, want: list[int]
) -> None:
    args = InterPodAffinityArgs(hard_pod_affinity_weight=weight)
    status, scores = run_scores(incoming, HARD_PODS, nodes(CHINA, INDIA, AZ1), args)
    assert status == want_status
    assert scores == want


@pytest.mark.parametrize(
    ("scores", "want"),
    [
        pytest.param([0, 0, 0], [0, 0, 0], id="all-equal"),
        pytest.param([-5, 0, 5], [0, 50, 100], id="negative-min"),
        pytest.param([-10, -3, -1], [0, 77, 100], id="all-negative-truncates"),
        pytest.param([1, 2, 4], [0, 33, 100], id="float-then-truncate"),
    ],
)
def test_normalize_score_min_max(scores: list[int], want: list[int]) -> None:
    plugin, _, snapshot = setup(nodes(CHINA, INDIA), [p("node1", S1)], args=InterPodAffinityArgs())
    state = CycleState()
    incoming = PodInfo(p(affinity=STAY_WITH_S1_IN_REGION))
    assert plugin.pre_score(state, incoming, snapshot.node_infos) is None
    array = np.asarray(scores, dtype=np.int64)
    assert plugin.normalize_score(state, incoming, array) is None
    assert array.tolist() == want


def test_score_without_pre_score_state_fails() -> None:
    plugin = InterPodAffinity(None, PluginHandle())
    with pytest.raises(LookupError, match='failed to read "PreScoreInterPodAffinity" from cycleState'):
        plugin.score(CycleState(), PodInfo(p()), setup(nodes(CHINA))[2].node_infos[0])
    status = plugin.normalize_score(CycleState(), PodInfo(p()), np.zeros(1, dtype=np.int64))
    assert status is not None and status.code is Code.ERROR
