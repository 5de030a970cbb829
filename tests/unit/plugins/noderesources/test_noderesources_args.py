"""NodeResourcesFitArgs / NodeResourcesBalancedAllocationArgs: v1 defaults and validation against
kube-scheduler's validation_pluginargs_test.go (TestValidateFitArgs, TestValidate*ScoringStrategy,
TestValidateNodeResourcesBalancedAllocationArgs), and decoding through the config layer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kubesched.config.args_decode import decode_args
from kubesched.errors import ErrorType, FieldError, ValidationFailed
from kubesched.plugins.noderesources import (
    BalancedAllocation,
    Fit,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.plugins.noderesources.args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
)
from kubesched.testing.framework_helpers import PluginHandle

CPU_MEMORY = (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))


def paths(errors: Sequence[FieldError]) -> list[tuple[ErrorType, str]]:
    return [(e.type, e.path) for e in errors]


def test_fit_defaults_are_least_allocated_on_cpu_and_memory() -> None:
    args = NodeResourcesFitArgs()
    assert args.scoring_strategy == ScoringStrategy(type=LEAST_ALLOCATED, resources=CPU_MEMORY)
    assert args.ignored_resources == () and args.ignored_resource_groups == ()
    assert args.validate("") == []


@pytest.mark.parametrize(
    ("strategy", "resources"),
    [
        pytest.param(ScoringStrategy(type=MOST_ALLOCATED), CPU_MEMORY, id="empty-resources-become-cpu-and-memory"),
        pytest.param(
            ScoringStrategy(resources=(ResourceSpec(name="cpu"), ResourceSpec(name="gpu.io/x", weight=4))),
            (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="gpu.io/x", weight=4)),
            id="unset-weight-becomes-1",
        ),
    ],
)
def test_fit_defaulting(strategy: ScoringStrategy, resources: tuple[ResourceSpec, ...]) -> None:
    assert NodeResourcesFitArgs(scoring_strategy=strategy).scoring_strategy.resources == resources


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        pytest.param(
            NodeResourcesFitArgs(ignored_resources=("longvalue" + "a" * 64,)),
            "name part must be no more than 63 characters",
            id="ignored-resources-too-long-value",
        ),
        pytest.param(
            NodeResourcesFitArgs(ignored_resources=("example.com/",)),
            "name part must be non-empty",
            id="ignored-resources-name-is-empty",
        ),
        pytest.param(
            NodeResourcesFitArgs(ignored_resources=("example.com/aaa/bbb",)),
            "a qualified name must consist of alphanumeric characters",
            id="ignored-resources-name-has-too-many-slashes",
        ),
        pytest.param(
            NodeResourcesFitArgs(ignored_resource_groups=("example.com/",)),
            "name part must be non-empty",
            id="ignored-resource-groups-illegal-args",
        ),
        pytest.param(
            NodeResourcesFitArgs(ignored_resource_groups=("a" * 64,)),
            "name part must be no more than 63 characters",
            id="ignored-resource-groups-name-is-too-long",
        ),
        pytest.param(
            NodeResourcesFitArgs(ignored_resource_groups=("example.com/aa",)),
            "resource group name can't contain '/'",
            id="ignored-resource-groups-name-cannot-contain-slash",
        ),
        pytest.param(
            NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="Invalid")),
            'Unsupported value: "Invalid"',
            id="scoring-strategy-type-is-unsupported",
        ),
    ],
)
def test_validate_fit_args_reports_upstream_messages(args: NodeResourcesFitArgs, expect: str) -> None:
    assert any(expect in str(error) for error in args.validate("")), args.validate("")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(NodeResourcesFitArgs(ignored_resources=("example.com",)), id="ignored-resources-valid"),
        pytest.param(
            NodeResourcesFitArgs(ignored_resource_groups=("example.com",)), id="ignored-resource-groups-valid"
        ),
    ],
)
def test_validate_fit_args_accepts_valid_names(args: NodeResourcesFitArgs) -> None:
    assert args.validate("") == []


def test_unsupported_type_lists_the_supported_values() -> None:
    (error,) = NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="Invalid")).validate("args")
    assert str(error) == (
        'args.scoringStrategy.type: Unsupported value: "Invalid": supported values: '
        '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'
    )


def test_too_long_name_message_is_apimachinerys() -> None:
    (error,) = NodeResourcesFitArgs(ignored_resources=("a" * 64,)).validate("")
    assert (
        str(error) == f'ignoredResources[0]: Invalid value: "{"a" * 64}": name part must be no more than 63 characters'
    )


@pytest.mark.parametrize("strategy_type", [LEAST_ALLOCATED, MOST_ALLOCATED])
@pytest.mark.parametrize(
    ("resources", "want"),
    [
        pytest.param((), [], id="default-config"),
        pytest.param(
            (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=10)), [], id="multi-valid"
        ),
        pytest.param(
            (ResourceSpec(name="cpu", weight=-1),), ["scoringStrategy.resources[0].weight"], id="weight-less-than-min"
        ),
        pytest.param(
            (ResourceSpec(name="cpu", weight=101),),
            ["scoringStrategy.resources[0].weight"],
            id="weight-greater-than-max",
        ),
        pytest.param(
            (ResourceSpec(name="cpu", weight=-5), ResourceSpec(name="memory", weight=101)),
            ["scoringStrategy.resources[0].weight", "scoringStrategy.resources[1].weight"],
            id="multi-invalid-reports-every-error",
        ),
    ],
)
def test_validate_least_and_most_allocated(
    strategy_type: str, resources: tuple[ResourceSpec, ...], want: list[str]
) -> None:
    args = NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type=strategy_type, resources=resources))
    assert paths(args.validate("")) == [(ErrorType.INVALID, p) for p in want]


def test_weight_message_names_the_resource() -> None:
    args = NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(resources=(ResourceSpec(name="cpu", weight=101),)))
    assert [str(e) for e in args.validate("")] == [
        "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]"
    ]


def _rtcr(shape: Sequence[tuple[int, int]] | None, resources: tuple[ResourceSpec, ...] = ()) -> NodeResourcesFitArgs:
    ratio = (
        None
        if shape is None
        else RequestedToCapacityRatioParam(shape=tuple(UtilizationShapePoint(utilization=u, score=s) for u, s in shape))
    )
    return NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type=REQUESTED_TO_CAPACITY_RATIO, resources=resources, requested_to_capacity_ratio=ratio
        )
    )


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(_rtcr([]), [(ErrorType.REQUIRED, "scoringStrategy.shape")], id="no-shapes"),
        pytest.param(_rtcr(None), [(ErrorType.REQUIRED, "scoringStrategy.shape")], id="no-ratio-param-at-all"),
        pytest.param(
            _rtcr([(30, 3)], (ResourceSpec(name="cpu", weight=101),)),
            [(ErrorType.INVALID, "scoringStrategy.resources[0].weight")],
            id="weight-greater-than-max",
        ),
        pytest.param(
            _rtcr([(30, 3)], (ResourceSpec(name="cpu", weight=-1),)),
            [(ErrorType.INVALID, "scoringStrategy.resources[0].weight")],
            id="weight-less-than-min",
        ),
        pytest.param(_rtcr([(30, 3)]), [], id="valid-shapes"),
        pytest.param(
            _rtcr([(-1, 3)]), [(ErrorType.INVALID, "scoringStrategy.shape[0].utilization")], id="utilization-below-min"
        ),
        pytest.param(
            _rtcr([(101, 3)]), [(ErrorType.INVALID, "scoringStrategy.shape[0].utilization")], id="utilization-above-max"
        ),
        pytest.param(
            _rtcr([(10, 3), (10, 3)]),
            [(ErrorType.INVALID, "scoringStrategy.shape[1].utilization")],
            id="duplicated-utilization-values",
        ),
        pytest.param(_rtcr([(10, 3), (20, 3), (30, 3)]), [], id="increasing-utilization-values"),
        pytest.param(
            _rtcr([(10, 3), (20, 3), (15, 3)]),
            [(ErrorType.INVALID, "scoringStrategy.shape[2].utilization")],
            id="non-increasing-utilization-values",
        ),
        pytest.param(_rtcr([(10, -1)]), [(ErrorType.INVALID, "scoringStrategy.shape[0].score")], id="score-below-min"),
        pytest.param(_rtcr([(10, 11)]), [(ErrorType.INVALID, "scoringStrategy.shape[0].score")], id="score-above-max"),
    ],
)
def test_validate_requested_to_capacity_ratio(args: NodeResourcesFitArgs, want: list[tuple[ErrorType, str]]) -> None:
    assert paths(args.validate("")) == want


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        pytest.param(CPU_MEMORY, [], id="valid-config"),
        pytest.param(
            (ResourceSpec(name="cpu", weight=2), ResourceSpec(name="memory", weight=1)),
            [(ErrorType.INVALID, "resources[0].weight")],
            id="weight-must-be-1",
        ),
        pytest.param(
            (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="cpu", weight=1)),
            [(ErrorType.DUPLICATE, "resources[1].name")],
            id="repeated-resources",
        ),
    ],
)
def test_validate_balanced_allocation_args(
    resources: tuple[ResourceSpec, ...], want: list[tuple[ErrorType, str]]
) -> None:
    assert paths(NodeResourcesBalancedAllocationArgs(resources=resources).validate("")) == want


def test_balanced_allocation_defaults() -> None:
    assert NodeResourcesBalancedAllocationArgs().resources == CPU_MEMORY


def test_decoding_a_config_file_applies_defaults_and_prefixes_paths() -> None:
    raw = {
        "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}, {"name": "memory", "weight": 3}]}
    }
    args, errors = decode_args(NodeResourcesFitArgs, raw, "profiles[0].pluginConfig[0].args")
    assert errors == []
    assert args is not None
    assert args.scoring_strategy.resources == (
        ResourceSpec(name="cpu", weight=1),
        ResourceSpec(name="memory", weight=3),
    )
    _, errors = decode_args(NodeResourcesFitArgs, {"ignoredResourceGroups": ["a/b"]}, "p")
    assert [str(e) for e in errors] == [
        "p.ignoredResourceGroups[0]: Invalid value: \"a/b\": resource group name can't contain '/'"
    ]


def test_factories_validate_again() -> None:
    with pytest.raises(ValidationFailed, match="resource weight of cpu"):
        Fit(
            NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(resources=(ResourceSpec(name="cpu", weight=500),))),
            PluginHandle(),
        )
    with pytest.raises(ValidationFailed, match="must be 1"):
        BalancedAllocation(
            NodeResourcesBalancedAllocationArgs(resources=(ResourceSpec(name="cpu", weight=2),)), PluginHandle()
        )
