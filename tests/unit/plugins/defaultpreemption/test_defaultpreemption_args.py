"""DefaultPreemptionArgs: v1 defaults and validation as kube-scheduler's validation_pluginargs_test.go
(TestValidateDefaultPreemptionArgs), through the config layer and the plugin's own factory."""

from __future__ import annotations

import pytest

from kubesched.config.args_decode import decode_args
from kubesched.errors import FieldError, ValidationFailed
from kubesched.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
from kubesched.testing.framework_helpers import PluginHandle

P = "profiles[0].pluginConfig[0].args"


def test_defaults_are_kube_schedulers() -> None:
    args = DefaultPreemptionArgs()
    assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (10, 100)


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        pytest.param(DefaultPreemptionArgs(), [], id="defaults-are-valid"),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=50, min_candidate_nodes_absolute=500),
            [],
            id="valid-values",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=100),
            [],
            id="zero-percentage-alone-is-fine",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=50, min_candidate_nodes_absolute=0),
            [],
            id="zero-absolute-alone-is-fine",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=-1, min_candidate_nodes_absolute=100),
            [f"{P}.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"],
            id="negative-percentage",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=900, min_candidate_nodes_absolute=100),
            [f"{P}.minCandidateNodesPercentage: Invalid value: 900: not in valid range [0, 100]"],
            id="percentage-over-100",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=20, min_candidate_nodes_absolute=-1),
            [f"{P}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"],
            id="negative-absolute",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=0),
            [
                f"{P}.minCandidateNodesPercentage: Invalid value: 0: "
                "cannot be zero at the same time as minCandidateNodesAbsolute",
                f"{P}.minCandidateNodesAbsolute: Invalid value: 0: "
                "cannot be zero at the same time as minCandidateNodesPercentage",
            ],
            id="both-zero",
        ),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=-1, min_candidate_nodes_absolute=-1),
            [
                f"{P}.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]",
                f"{P}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            ],
            id="all-errors-reported",
        ),
    ],
)
def test_validate(args: DefaultPreemptionArgs, errors: list[str]) -> None:
    assert [str(error) for error in args.validate(P)] == errors


def test_decoded_from_camel_case_with_defaults_for_missing_keys() -> None:
    decoded, errors = decode_args(DefaultPreemptionArgs, {"minCandidateNodesPercentage": 25}, P)
    assert errors == []
    assert decoded == DefaultPreemptionArgs(min_candidate_nodes_percentage=25)


def test_factory_validates_again() -> None:
    with pytest.raises(ValidationFailed) as caught:
        DefaultPreemption(DefaultPreemptionArgs(min_candidate_nodes_absolute=-5), PluginHandle())
    expected = FieldError.invalid("minCandidateNodesAbsolute", -5, "not in valid range [0, inf)")
    assert caught.value.errors == [str(expected)]


def test_factory_without_args_uses_defaults() -> None:
    plugin = DefaultPreemption(None, PluginHandle())
    assert plugin.args == DefaultPreemptionArgs()


@pytest.mark.parametrize(
    ("percentage", "absolute", "nodes", "expected"),
    [
        pytest.param(10, 100, 50, 50, id="absolute-above-nodes-capped-at-nodes"),
        pytest.param(10, 100, 5000, 500, id="percentage-wins-on-large-clusters"),
        pytest.param(40, 1, 5, 2, id="percentage-of-few-nodes"),
        pytest.param(0, 3, 10, 3, id="absolute-only"),
        pytest.param(100, 0, 7, 7, id="all-nodes"),
    ],
)
def test_calculate_num_candidates(percentage: int, absolute: int, nodes: int, expected: int) -> None:
    args = DefaultPreemptionArgs(min_candidate_nodes_percentage=percentage, min_candidate_nodes_absolute=absolute)
    assert DefaultPreemption(args, PluginHandle()).calculate_num_candidates(nodes) == expected
