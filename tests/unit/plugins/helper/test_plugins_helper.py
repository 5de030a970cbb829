"""The shared plugin helpers: DefaultNormalizeScore (normalize_score_test.go), Go integer semantics,
apimachinery's name validators, scalar resource names, label requirements and batch packing."""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.framework.node_table import BatchFilterResult
from kubesched.framework.status import Code, Status
from kubesched.plugins.helper.classes import batch_result, uniform_result
from kubesched.plugins.helper.gomath import go_round, go_round_array, trunc_div, trunc_div_array
from kubesched.plugins.helper.node_selector import (
    LabelRequirement,
    compile_node_selector,
    compile_term,
    parse_int64,
)
from kubesched.plugins.helper.normalize_score import default_normalize_score
from kubesched.plugins.helper.resources import is_extended_resource_name, is_scalar_resource_name
from kubesched.plugins.helper.validation import dns1123_subdomain_errors, label_value_errors, qualified_name_errors


@pytest.mark.parametrize(
    ("reverse", "scores", "want"),
    [
        pytest.param(False, [1, 2, 3, 4], [25, 50, 75, 100], id="scale-to-max"),
        pytest.param(True, [1, 2, 3, 4], [75, 50, 25, 0], id="scale-to-max-reversed"),
        pytest.param(False, [1000, 10, 20, 30], [100, 1, 2, 3], id="large-max"),
        pytest.param(True, [1000, 10, 20, 30], [0, 99, 98, 97], id="large-max-reversed"),
        pytest.param(False, [1, 1, 1, 1], [100, 100, 100, 100], id="all-equal"),
        pytest.param(False, [1000, 1, 1, 1], [100, 0, 0, 0], id="truncates-small-scores-to-zero"),
        pytest.param(True, [0, 1, 1, 1], [100, 0, 0, 0], id="reversed-with-zero"),
        pytest.param(False, [0, 0, 0, 0], [0, 0, 0, 0], id="all-zero"),
        pytest.param(True, [0, 0, 0, 0], [100, 100, 100, 100], id="all-zero-reversed"),
    ],
)
def test_default_normalize_score(reverse: bool, scores: list[int], want: list[int]) -> None:
    array = np.asarray(scores, dtype=np.int64)
    default_normalize_score(100, reverse, array)
    assert array.tolist() == want


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        pytest.param(7, 2, 3, id="positive"),
        pytest.param(-7, 2, -3, id="negative-dividend-truncates-toward-zero"),
        pytest.param(7, -2, -3, id="negative-divisor"),
        pytest.param(-7, -2, 3, id="both-negative"),
    ],
)
def test_trunc_div_matches_go(a: int, b: int, want: int) -> None:
    assert trunc_div(a, b) == want
    assert trunc_div_array(np.asarray([a], dtype=np.int64), b).tolist() == [want]


@pytest.mark.parametrize(
    ("x", "want"),
    [
        pytest.param(2.5, 3, id="half-rounds-up-not-to-even"),
        pytest.param(3.5, 4, id="half-rounds-up"),
        pytest.param(2.4999, 2, id="below-half"),
        pytest.param(-2.5, -3, id="negative-half-away-from-zero"),
        pytest.param(0.0, 0, id="zero"),
    ],
)
def test_go_round(x: float, want: int) -> None:
    assert go_round(x) == want
    assert go_round_array(np.asarray([x])).tolist() == [want]


def test_qualified_name_messages() -> None:
    assert qualified_name_errors("example.com/MyName") == []
    # An empty name part also fails the name regex: apimachinery reports both.
    assert qualified_name_errors("example.com/")[0] == "name part must be non-empty"
    assert len(qualified_name_errors("example.com/")) == 2
    assert qualified_name_errors("/name") == ["prefix part must be non-empty"]
    assert qualified_name_errors("a" * 64) == ["name part must be no more than 63 characters"]
    (too_many,) = qualified_name_errors("a/b/c")
    assert too_many == (
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"
    )
    (prefix,) = qualified_name_errors("Example.com/name")
    assert prefix.startswith("prefix part a lowercase RFC 1123 subdomain must consist of lower case")


def test_dns_subdomain_and_label_value() -> None:
    assert dns1123_subdomain_errors("example.com") == []
    assert dns1123_subdomain_errors("a" * 254)[0] == "must be no more than 253 characters"
    assert label_value_errors("") == []
    assert label_value_errors("my_value") == []
    assert label_value_errors("-bad")[0].startswith("a valid label must be an empty string or consist of")


@pytest.mark.parametrize(
    ("name", "scalar", "extended"),
    [
        pytest.param("cpu", False, False, id="cpu-is-native"),
        pytest.param("pods", False, False, id="pods-is-native"),
        pytest.param("example.com/foo", True, True, id="extended"),
        pytest.param("kubernetes.io/something", True, False, id="prefixed-native"),
        pytest.param("subdomain.kubernetes.io/something", True, False, id="prefixed-native-subdomain"),
        pytest.param("hugepages-2Mi", True, False, id="hugepages"),
        pytest.param("attachable-volumes-csi-x", True, False, id="attachable-volumes"),
        pytest.param("requests.example.com/foo", False, False, id="requests-prefix-is-not-extended"),
    ],
)
def test_scalar_resource_names(name: str, scalar: bool, extended: bool) -> None:
    assert is_scalar_resource_name(name) is scalar
    assert is_extended_resource_name(name) is extended


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("0204", 204, id="leading-zeros"),
        pytest.param("-5", -5, id="negative"),
        pytest.param("+5", 5, id="plus-sign"),
        pytest.param("1_000", None, id="no-underscores"),
        pytest.param(" 5", None, id="no-spaces"),
        pytest.param("9223372036854775808", None, id="out-of-int64-range"),
        pytest.param("1.5", None, id="not-an-integer"),
    ],
)
def test_parse_int64_is_go_parse_int(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


@pytest.mark.parametrize(
    ("requirement", "labels", "want"),
    [
        pytest.param(LabelRequirement("k", "In", frozenset({"a"})), {"k": "a"}, True, id="in-present"),
        pytest.param(LabelRequirement("k", "In", frozenset({"a"})), {}, False, id="in-absent"),
        pytest.param(LabelRequirement("k", "NotIn", frozenset({"a"})), {}, True, id="not-in-absent-matches"),
        pytest.param(LabelRequirement("k", "NotIn", frozenset({"a"})), {"k": "a"}, False, id="not-in-listed"),
        pytest.param(LabelRequirement("k", "Exists", frozenset()), {"k": ""}, True, id="exists-empty-value"),
        pytest.param(LabelRequirement("k", "DoesNotExist", frozenset()), {"k": ""}, False, id="does-not-exist"),
        pytest.param(LabelRequirement("k", "Gt", frozenset({"5"}), 5), {"k": "6"}, True, id="gt"),
        pytest.param(LabelRequirement("k", "Gt", frozenset({"5"}), 5), {"k": "5"}, False, id="gt-equal"),
        pytest.param(LabelRequirement("k", "Lt", frozenset({"5"}), 5), {"k": "-1"}, True, id="lt-negative"),
        pytest.param(LabelRequirement("k", "Lt", frozenset({"5"}), 5), {"k": "x"}, False, id="lt-non-integer-label"),
        pytest.param(LabelRequirement("k", "Gt", frozenset({"5"}), 5), {}, False, id="gt-absent"),
    ],
)
def test_label_requirement(requirement: LabelRequirement, labels: dict[str, str], want: bool) -> None:
    assert requirement.matches(labels) is want


def test_term_parse_errors_are_kept_with_paths() -> None:
    term = compile_term(
        {
            "matchExpressions": [
                {"key": "a", "operator": "In"},
                {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c", "operator": "Gt", "values": ["1", "2"]},
                {"key": "d", "operator": "Foo"},
            ],
            "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}],
        },
        "t",
    )
    assert [(e.path, e.detail) for e in term.errors] == [
        ("t.matchExpressions[0].values", "for 'in', 'notin' operators, values set can't be empty"),
        ("t.matchExpressions[1].values", "values set must be empty for exists and does not exist"),
        ("t.matchExpressions[2].values", "for 'Gt', 'Lt' operators, exactly one value is required"),
        ("t.matchExpressions[3].operator", ""),
        ("t.matchFields[0].key", "not a valid field selector key"),
    ]
    assert not term.matches({"a": "x", "d": "y"}, "n")


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param({"key": "zone", "operator": "In", "values": ["a", "b"]}, id="valid"),
        pytest.param({"key": "zone", "operator": "In", "values": ["not valid!"]}, id="bad-value"),
        pytest.param({"key": "bad key!", "operator": "Exists"}, id="bad-key"),
        pytest.param({"key": "n", "operator": "Gt", "values": ["x"]}, id="gt-not-an-int"),
        pytest.param({"key": "zone", "operator": "Exists", "values": "oops"}, id="values-not-a-list"),
    ],
)
def test_compiling_the_same_requirement_again_gives_the_same_term_with_its_own_paths(
    expression: dict[str, object],
) -> None:
    # Valid requirements are remembered across compiles; the second compile, at another path, must read
    # exactly as a first one would.
    first = compile_term({"matchExpressions": [expression]}, "a")
    second = compile_term({"matchExpressions": [expression]}, "b")
    assert second.labels == first.labels
    assert [e.path.replace("b.", "a.", 1) for e in second.errors] == [e.path for e in first.errors]
    assert [e.detail for e in second.errors] == [e.detail for e in first.errors]
    assert all(e.path.startswith("b.") for e in second.errors)


def test_node_selector_with_only_empty_terms_matches_nothing() -> None:
    selector = compile_node_selector({"nodeSelectorTerms": [{}, {"matchExpressions": []}]})
    assert selector.terms == ()
    assert selector.match({"a": "b"}, "n") == (False, False)


def test_batch_result_interns_equal_statuses() -> None:
    rejected = Status(Code.UNSCHEDULABLE, "x")
    result = batch_result([None, rejected, Status(Code.UNSCHEDULABLE, "x"), None])
    assert isinstance(result, BatchFilterResult)
    assert result.codes.tolist() == [0, 1, 1, 0]
    assert list(result.statuses) == [rejected]
    assert batch_result([None, None]) is None
    per_class = batch_result([None, rejected], np.asarray([1, 0, 1], dtype=np.int64))
    assert per_class is not None and per_class.codes.tolist() == [1, 0, 1]
    assert uniform_result(3, None) is None
