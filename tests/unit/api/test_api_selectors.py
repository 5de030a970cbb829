"""LabelSelector, NodeSelector and TopologySelectorTerm as embedded objects read them: shapes and error paths."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.selectors import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    TopologySelectorLabelRequirement,
    TopologySelectorTerm,
)
from kubesched.errors import ManifestError

WHERE = "pv.yaml: PersistentVolume pv-1"


def error(build: Any, raw: Any, path: str) -> str:
    with pytest.raises(ManifestError) as info:
        build(raw, WHERE, path=path)
    return str(info.value)


# ---------------------------------------------------------------- LabelSelector


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({}, LabelSelector(), id="empty-selects-everything"),
        pytest.param({"matchLabels": {"a": "b"}}, LabelSelector(match_labels={"a": "b"}), id="match-labels"),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]},
            LabelSelector(match_expressions=(LabelSelectorRequirement("a", "NotIn", ("x",)),)),
            id="not-in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": []}]},
            LabelSelector(match_expressions=(LabelSelectorRequirement("a", "Exists"),)),
            id="exists-with-empty-values",
        ),
    ],
)
def test_label_selector(raw: dict[str, Any], expected: LabelSelector) -> None:
    selector = LabelSelector.from_dict(raw, WHERE, path="spec.selector")
    assert selector == expected
    assert selector.is_empty == (not raw.get("matchLabels") and not raw.get("matchExpressions"))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' "
            "or 'NotIn'",
            id="in-without-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
            "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is "
            "'Exists' or 'DoesNotExist'",
            id="does-not-exist-with-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a"}]},
            'spec.selector.matchExpressions[0].operator: Invalid value: "": not a valid selector operator',
            id="missing-operator",
        ),
        pytest.param(
            {"matchExpressions": [{"operator": "Exists"}]},
            "spec.selector.matchExpressions[0].key: Required value",
            id="missing-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]},
            "spec.selector.matchExpressions[0].values[0]: expected a string, got integer",
            id="value-not-a-string",
        ),
        pytest.param(
            {"matchExpressions": {"key": "a"}},
            "spec.selector.matchExpressions: expected a list, got mapping",
            id="expressions-not-a-list",
        ),
        pytest.param(
            {"matchLabels": {"a": 1}}, "spec.selector.matchLabels.a: expected a string, got integer", id="label"
        ),
    ],
)
def test_label_selector_errors(raw: dict[str, Any], message: str) -> None:
    assert error(LabelSelector.from_dict, raw, "spec.selector") == f"{WHERE}: {message}"


# ---------------------------------------------------------------- NodeSelector

REQUIRED = "spec.nodeAffinity.required"


def test_node_selector_terms() -> None:
    raw = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}]},
            {
                "matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["3"]}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}],
            },
            {},
        ]
    }
    selector = NodeSelector.from_dict(raw, WHERE, path=REQUIRED)
    assert selector.terms == (
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("a", "b")),)),
        NodeSelectorTerm(
            match_expressions=(NodeSelectorRequirement("rank", "Gt", ("3",)),),
            match_fields=(NodeSelectorRequirement("metadata.name", "NotIn", ("n1",)),),
        ),
        NodeSelectorTerm(),
    )
    assert selector.raw is raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"nodeSelectorTerms": []},
            f"{REQUIRED}.nodeSelectorTerms: Required value: must have at least one node selector term",
            id="no-terms",
        ),
        pytest.param(
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Lt", "values": ["1", "2"]}]}]},
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified single "
            "value when `operator` is 'Lt' or 'Gt'",
            id="lt-two-values",
        ),
        pytest.param(
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Nope"}]}]},
            f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "Nope": not a valid '
            "selector operator",
            id="unknown-operator",
        ),
        pytest.param(
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]},
            f'{REQUIRED}.nodeSelectorTerms[0].matchFields[0].operator: Invalid value: "Exists": not a valid '
            "selector operator",
            id="field-exists",
        ),
        pytest.param(
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
                ]
            },
            f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].values: Required value: must be only one value when "
            "`operator` is 'In' or 'NotIn' for node field selector",
            id="field-two-values",
        ),
        pytest.param(
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a"]}]}]},
            f'{REQUIRED}.nodeSelectorTerms[0].matchFields[0].key: Invalid value: "metadata.uid": not a valid field '
            "selector key",
            id="field-key",
        ),
        pytest.param(
            {"nodeSelectorTerms": ["x"]}, f"{REQUIRED}.nodeSelectorTerms[0]: expected a mapping, got string", id="term"
        ),
    ],
)
def test_node_selector_errors(raw: dict[str, Any], message: str) -> None:
    assert error(NodeSelector.from_dict, raw, REQUIRED) == f"{WHERE}: {message}"


# ---------------------------------------------------------------- TopologySelectorTerm


def test_topology_selector_term() -> None:
    raw = {"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}, {"key": "rack", "values": ["1"]}]}
    assert TopologySelectorTerm.from_dict(raw, WHERE, path="allowedTopologies[0]") == TopologySelectorTerm(
        (TopologySelectorLabelRequirement("zone", ("a", "b")), TopologySelectorLabelRequirement("rack", ("1",)))
    )
    assert TopologySelectorTerm.from_dict({}, WHERE, path="allowedTopologies[0]") == TopologySelectorTerm()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"matchLabelExpressions": [{"key": "zone"}]},
            "allowedTopologies[0].matchLabelExpressions[0].values: Required value",
            id="no-values",
        ),
        pytest.param(
            {"matchLabelExpressions": [{"key": "zone", "values": ["a", "a"]}]},
            'allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: "a"',
            id="duplicate-value",
        ),
        pytest.param(
            {"matchLabelExpressions": [{"key": "zone", "values": ["a"]}, {"key": "zone", "values": ["b"]}]},
            'allowedTopologies[0].matchLabelExpressions[1].key: Duplicate value: "zone"',
            id="duplicate-key",
        ),
        pytest.param(
            {"matchLabelExpressions": [{"values": ["a"]}]},
            "allowedTopologies[0].matchLabelExpressions[0].key: Required value",
            id="no-key",
        ),
    ],
)
def test_topology_selector_term_errors(raw: dict[str, Any], message: str) -> None:
    assert error(TopologySelectorTerm.from_dict, raw, "allowedTopologies[0]") == f"{WHERE}: {message}"
