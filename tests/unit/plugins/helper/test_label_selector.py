"""metav1.LabelSelector matching and validation (apimachinery's LabelSelectorAsSelector semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.helper.label_selector import compile_label_selector

LABELS = {"zone": "a", "tier": "web"}


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param({}, True, id="empty-selector-matches-everything"),
        pytest.param({"matchLabels": {"zone": "a"}}, True, id="match-labels"),
        pytest.param({"matchLabels": {"zone": "a", "tier": "db"}}, False, id="match-labels-are-anded"),
        pytest.param({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]}, True, id="in"),
        pytest.param({"matchExpressions": [{"key": "pci", "operator": "In", "values": ["a"]}]}, False, id="in-absent"),
        pytest.param(
            {"matchExpressions": [{"key": "pci", "operator": "NotIn", "values": ["a"]}]}, True, id="not-in-absent"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, False, id="not-in-present"
        ),
        pytest.param({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True, id="exists"),
        pytest.param({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False, id="does-not-exist"),
        pytest.param(
            {"matchLabels": {"zone": "a"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
            False,
            id="labels-and-expressions-are-anded",
        ),
        pytest.param({"matchLabels": None, "matchExpressions": None}, True, id="nulls-are-absent"),
    ],
)
def test_matches(selector: dict[str, Any], want: bool) -> None:
    compiled, errors = compile_label_selector(selector, "selector")
    assert errors == []
    assert compiled.matches(LABELS) is want


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param(
            {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]},
            ['s.matchExpressions[0].operator: Invalid value: "Gt": not a valid selector operator'],
            id="gt-is-for-node-selectors-only",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": []}]},
            ["s.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"],
            id="not-in-needs-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist", "values": ["a"]}]},
            [
                "s.matchExpressions[0].values: Forbidden: "
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            ],
            id="does-not-exist-forbids-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "-bad", "operator": "Exists"}], "matchLabel": {}},
            [
                's.matchLabel: Invalid value: {}: unknown field "matchLabel"',
                's.matchExpressions[0].key: Invalid value: "-bad": name part must consist of alphanumeric '
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',"
                "  or 'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ],
            id="every-error",
        ),
        pytest.param("zone=a", ['s: Invalid value: "zone=a": must be of type object'], id="string-selector"),
    ],
)
def test_errors(selector: object, want: list[str]) -> None:
    _, errors = compile_label_selector(selector, "s")
    assert [str(e) for e in errors] == want
