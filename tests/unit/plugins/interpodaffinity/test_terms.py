"""Parsing of pod (anti-)affinity terms: selectors, namespaces, matchLabelKeys, malformed input."""

from __future__ import annotations

from typing import Any

import pytest
from ipatest_helpers import node, pod, setup, term

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.interpodaffinity.terms import matches_all, parse_pod_terms
from kubesched.testing.builders import make_pod


def parse_required(raw_term: dict[str, Any], *, labels: dict[str, str] | None = None, ns: str = "default") -> Any:
    return parse_pod_terms(pod(ns=ns, labels=labels, affinity=[raw_term]))


def test_defaults_to_own_namespace_without_namespaces_or_selector() -> None:
    parsed = parse_required(term("app", "Exists", "zone"), ns="ns1")
    assert parsed.error is None
    assert parsed.required_affinity[0].namespaces == frozenset({"ns1"})


def test_namespace_selector_replaces_own_namespace() -> None:
    parsed = parse_required(term("app", "Exists", "zone", namespaceSelector={"matchLabels": {"team": "a"}}))
    assert parsed.required_affinity[0].namespaces == frozenset()


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        pytest.param(None, {"app": "x"}, False, id="null-selector-matches-nothing"),
        pytest.param({}, {"app": "x"}, True, id="empty-selector-matches-everything"),
        pytest.param({"matchLabels": {"app": "x"}}, {"app": "x"}, True, id="match-labels"),
        pytest.param({"matchLabels": {"app": "x"}}, {"app": "y"}, False, id="match-labels-differ"),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["y"]}]},
            {},
            True,
            id="not-in-absent-label",
        ),
    ],
)
def test_label_selector_semantics(selector: dict[str, Any] | None, labels: dict[str, str], want: bool) -> None:
    raw: dict[str, Any] = {"topologyKey": "zone"}
    if selector is not None:
        raw["labelSelector"] = selector
    parsed = parse_required(raw)
    assert parsed.error is None
    assert matches_all(parsed.required_affinity, pod("other", labels=labels)) is want


def test_match_label_keys_merged_like_the_api_server() -> None:
    raw = term("app", "Exists", "zone", matchLabelKeys=["tier", "missing"], mismatchLabelKeys=["team"])
    parsed = parse_required(raw, labels={"app": "x", "tier": "web", "team": "a"})
    terms = parsed.required_affinity
    assert matches_all(terms, pod("o", labels={"app": "y", "tier": "web", "team": "b"}))
    assert not matches_all(terms, pod("o", labels={"app": "y", "tier": "db", "team": "b"}))
    assert not matches_all(terms, pod("o", labels={"app": "y", "tier": "web", "team": "a"}))


def test_match_label_keys_ignored_with_null_selector() -> None:
    parsed = parse_required({"topologyKey": "zone", "matchLabelKeys": ["tier"]}, labels={"tier": "web"})
    assert parsed.error is None
    assert not matches_all(parsed.required_affinity, pod("o", labels={"tier": "web"}))


@pytest.mark.parametrize(
    ("affinity", "want"),
    [
        pytest.param(
            {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("app", "Gt", "zone", ["1"])]}},
            'requiredAffinityTerms: "Gt" is not a valid label selector operator',
            id="bad-operator",
        ),
        pytest.param(
            {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("app", "In", "zone")]}},
            "requiredAntiAffinityTerms: values: Invalid value: []string{}: "
            "for 'in', 'notin' operators, values set can't be empty",
            id="in-without-values",
        ),
        pytest.param(
            {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": term("app", "Exists", "zone", ["x"])}
                    ]
                }
            },
            'preferredAffinityTerms: values: Invalid value: []string{"x"}: '
            "values set must be empty for exists and does not exist",
            id="exists-with-values",
        ),
        pytest.param(
            {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "high", "podAffinityTerm": {}}]
                }
            },
            "preferredAntiAffinityTerms: spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"
            "[0].weight: Invalid value: must be a 32-bit integer",
            id="weight-not-an-integer",
        ),
        pytest.param(
            {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "oops"}},
            "requiredAffinityTerms: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
            "Invalid value: must be of type array",
            id="terms-not-a-list",
        ),
        pytest.param(
            {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("app", "Gt", "zone", ["1"])]},
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": 3, "labelSelector": {}}]
                },
            },
            '[requiredAffinityTerms: "Gt" is not a valid label selector operator, requiredAntiAffinityTerms: '
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: "
            "Invalid value: must be of type string]",
            id="two-lists-fail",
        ),
    ],
)
def test_malformed_terms_are_reported_not_raised(affinity: dict[str, Any], want: str) -> None:
    incoming = make_pod("bad").affinity(affinity).obj()
    assert parse_pod_terms(incoming).error == want
    plugin, _, snapshot = setup([node("n1", {"zone": "z"})])
    status = plugin.pre_filter(CycleState(), PodInfo(incoming), snapshot.node_infos)
    assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {want}")


def test_existing_pod_with_unparsable_list_keeps_its_other_lists() -> None:
    existing = (
        make_pod("e")
        .node_name("n1")
        .affinity(
            {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("app", "Gt", "zone", ["1"])]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("app", "Exists", "zone")]},
            }
        )
        .obj()
    )
    plugin, _, snapshot = setup([node("n1", {"zone": "z"})], [existing])
    state = CycleState()
    incoming = PodInfo(pod("in", labels={"app": "x"}))
    assert plugin.pre_filter(state, incoming, snapshot.node_infos) is None
    status = plugin.filter(state, incoming, snapshot.node_infos[0])
    assert status is not None and status.code is Code.UNSCHEDULABLE


def test_empty_topology_key_is_a_label_no_node_has() -> None:
    plugin, _, snapshot = setup([node("n1", {"zone": "z"})], [pod("e", labels={"app": "x"}, node="n1")])
    state = CycleState()
    incoming = PodInfo(pod("in", affinity=[term("app", "Exists", "")]))
    assert plugin.pre_filter(state, incoming, snapshot.node_infos) is None
    status = plugin.filter(state, incoming, snapshot.node_infos[0])
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
