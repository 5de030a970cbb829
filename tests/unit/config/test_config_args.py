"""The generic plugin-args decoder: camelCase file keys into typed, validated ``<Name>Args`` dataclasses."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from cfgtest_catalog import (
    DefaultPreemptionArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)

from kubesched.config import decode_args, encode_args
from kubesched.errors import FieldError

P = "profiles[0].pluginConfig[0].args"


class Mode(enum.Enum):
    FAST = "Fast"
    SAFE = "Safe"


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    url: str = "http://localhost"
    retries: int = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class KitchenSinkArgs:
    api_url: str = field(default="", metadata={"json": "apiURL"})
    ratio: float = 0.5
    enabled: bool = True
    mode: Mode = Mode.SAFE
    level: Literal["low", "high"] = "low"
    labels: dict[str, str] = field(default_factory=dict)
    extra: Any = None
    endpoints: tuple[Endpoint, ...] = ()
    tags: list[str] = field(default_factory=list)
    fallback: Endpoint | None = None
    limit: int | str = 10

    def validate(self, path: str) -> list[FieldError]:
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class NeedsNameArgs:
    name: str

    def validate(self, path: str) -> list[FieldError]:
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class PickyArgs:
    size: int = 1

    def __post_init__(self) -> None:
        if self.size > 1000:
            raise ValueError("size is too large")

    def validate(self, path: str) -> list[FieldError]:
        return []


@pytest.mark.parametrize(
    ("args_type", "raw", "expected"),
    [
        pytest.param(DefaultPreemptionArgs, None, DefaultPreemptionArgs(), id="none-gives-kube-defaults"),
        pytest.param(DefaultPreemptionArgs, {}, DefaultPreemptionArgs(), id="empty-gives-kube-defaults"),
        pytest.param(
            DefaultPreemptionArgs,
            {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": None},
            DefaultPreemptionArgs(min_candidate_nodes_percentage=20),
            id="camel-case-keys-and-null-means-unset",
        ),
        pytest.param(
            DefaultPreemptionArgs,
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DefaultPreemptionArgs"},
            DefaultPreemptionArgs(),
            id="type-meta-accepted",
        ),
        pytest.param(
            NodeResourcesFitArgs,
            {"ignoredResourceGroups": ["example.com"], "scoringStrategy": {"type": "MostAllocated"}},
            NodeResourcesFitArgs(
                ignored_resource_groups=("example.com",), scoring_strategy=ScoringStrategy(type="MostAllocated")
            ),
            id="nested-dataclass-partially-given-keeps-defaults",
        ),
        pytest.param(
            NodeResourcesFitArgs,
            {"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 5}]}},
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    resources=(ResourceSpec(name="cpu", weight=1), ResourceSpec(name="nvidia.com/gpu", weight=5))
                )
            ),
            id="list-of-dataclasses-with-post-init-defaulting",
        ),
        pytest.param(
            NodeResourcesFitArgs,
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}]},
                }
            },
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    type="RequestedToCapacityRatio",
                    requested_to_capacity_ratio=RequestedToCapacityRatioParam(
                        shape=(UtilizationShapePoint(utilization=0, score=10),)
                    ),
                )
            ),
            id="optional-nested-dataclass",
        ),
        pytest.param(
            KitchenSinkArgs,
            {
                "apiURL": "http://opa:8181",
                "ratio": 1,
                "enabled": False,
                "mode": "Fast",
                "level": "high",
                "labels": {"a": "b"},
                "extra": {"anything": [1, 2]},
                "endpoints": [{"url": "http://a"}, {"retries": 0}],
                "tags": ["x"],
                "fallback": {"url": "http://b"},
                "limit": "50%",
            },
            KitchenSinkArgs(
                api_url="http://opa:8181",
                ratio=1.0,
                enabled=False,
                mode=Mode.FAST,
                level="high",
                labels={"a": "b"},
                extra={"anything": [1, 2]},
                endpoints=(Endpoint(url="http://a"), Endpoint(retries=0)),
                tags=["x"],
                fallback=Endpoint(url="http://b"),
                limit="50%",
            ),
            id="every-supported-field-type",
        ),
    ],
)
def test_decode_args(args_type: type[Any], raw: Any, expected: Any) -> None:
    args, errors = decode_args(args_type, raw, P)
    assert errors == []
    assert args == expected


@pytest.mark.parametrize(
    ("args_type", "raw", "expected"),
    [
        pytest.param(
            DefaultPreemptionArgs,
            {"minCandidateNodesPercentage": 200, "minCandidateNodesAbsolute": -1},
            [
                f"{P}.minCandidateNodesPercentage: Invalid value: 200: not in valid range [0, 100]",
                f"{P}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            ],
            id="plugin-validate-reports-every-problem",
        ),
        pytest.param(
            DefaultPreemptionArgs,
            {"kind": "DefaultPreemptionArgz"},
            [f'{P}: Invalid value: "DefaultPreemptionArgz": has to match plugin args'],
            id="wrong-kind",
        ),
        pytest.param(
            DefaultPreemptionArgs,
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
            [
                f'{P}.apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3": '
                'supported values: "kubescheduler.config.k8s.io/v1"'
            ],
            id="wrong-api-version",
        ),
        pytest.param(
            DefaultPreemptionArgs,
            {"min_candidate_nodes_percentage": 5, "foo": 1},
            [
                f'{P}.min_candidate_nodes_percentage: Invalid value: unknown field "min_candidate_nodes_percentage" '
                '(did you mean "minCandidateNodesPercentage"?)',
                f'{P}.foo: Invalid value: unknown field "foo"',
            ],
            id="snake-case-and-unknown-keys-rejected",
        ),
        pytest.param(
            NodeResourcesFitArgs,
            {"scoringStrategy": {"type": "Foo", "resources": [{"name": "cpu", "weight": "1"}]}},
            [
                f'{P}.scoringStrategy.type: Unsupported value: "Foo": supported values: '
                '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
                f'{P}.scoringStrategy.resources[0].weight: Invalid value: "1": must be of type integer',
            ],
            id="literal-and-nested-type-errors-with-paths",
        ),
        pytest.param(
            NodeResourcesFitArgs,
            {"ignoredResourceGroups": "example.com", "scoringStrategy": []},
            [
                f'{P}.ignoredResourceGroups: Invalid value: "example.com": must be of type array',
                f"{P}.scoringStrategy: Invalid value: []: must be of type object",
            ],
            id="container-type-errors",
        ),
        pytest.param(
            NodeResourcesFitArgs,
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}, "ignoredResourceGroups": ["a/b"]},
            [
                f"{P}.ignoredResourceGroups[0]: Invalid value: \"a/b\": resource group name can't contain '/'",
                f"{P}.scoringStrategy.requestedToCapacityRatio: Required value: "
                "must be specified when type is RequestedToCapacityRatio",
            ],
            id="nodes-resources-fit-validation",
        ),
        pytest.param(
            KitchenSinkArgs,
            {"mode": "Slow", "enabled": 1, "ratio": True, "labels": {"a": 1}, "limit": 1.5},
            [
                f'{P}.mode: Unsupported value: "Slow": supported values: "Fast", "Safe"',
                f"{P}.enabled: Invalid value: 1: must be of type boolean",
                f"{P}.ratio: Invalid value: true: must be of type number",
                f"{P}.labels[a]: Invalid value: 1: must be of type string",
                f"{P}.limit: Invalid value: 1.5: must be of type integer or string",
            ],
            id="scalar-type-errors",
        ),
        pytest.param(NeedsNameArgs, {}, [f"{P}.name: Required value"], id="field-without-default-is-required"),
        pytest.param(
            PickyArgs,
            {"size": 5000},
            [f'{P}: Invalid value: {{"size": 5000}}: size is too large'],
            id="constructor-value-error",
        ),
        pytest.param(DefaultPreemptionArgs, [1], [f"{P}: Invalid value: [1]: must be of type object"], id="not-a-map"),
    ],
)
def test_decode_args_errors(args_type: type[Any], raw: Any, expected: list[str]) -> None:
    args, errors = decode_args(args_type, raw, P)
    assert args is None
    assert [str(e) for e in errors] == expected


def test_kind_defaults_to_the_class_name_and_can_be_overridden() -> None:
    assert decode_args(DefaultPreemptionArgs, {"kind": "DefaultPreemptionArgs"}, P)[1] == []
    _, errors = decode_args(DefaultPreemptionArgs, {"kind": "DefaultPreemptionArgs"}, P, kind="OtherArgs")
    assert [str(e) for e in errors] == [f'{P}: Invalid value: "DefaultPreemptionArgs": has to match plugin args']


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(NodeResourcesFitArgs(), id="defaults"),
        pytest.param(
            NodeResourcesFitArgs(
                ignored_resources=("example.com/foo",),
                scoring_strategy=ScoringStrategy(
                    type="RequestedToCapacityRatio",
                    requested_to_capacity_ratio=RequestedToCapacityRatioParam(
                        shape=(
                            UtilizationShapePoint(utilization=0, score=0),
                            UtilizationShapePoint(utilization=100, score=10),
                        )
                    ),
                ),
            ),
            id="nested",
        ),
        pytest.param(
            KitchenSinkArgs(api_url="u", mode=Mode.FAST, endpoints=(Endpoint(),), labels={"k": "v"}, limit="x"),
            id="kitchen-sink",
        ),
    ],
)
def test_encode_then_decode_round_trips(args: Any) -> None:
    decoded, errors = decode_args(type(args), encode_args(args), P)
    assert errors == []
    assert decoded == args


def test_encode_args_uses_file_names_and_drops_none() -> None:
    assert encode_args(KitchenSinkArgs(api_url="u", fallback=None)) == {
        "apiURL": "u",
        "ratio": 0.5,
        "enabled": True,
        "mode": "Safe",
        "level": "low",
        "labels": {},
        "endpoints": [],
        "tags": [],
        "limit": 10,
    }
    with pytest.raises(TypeError):
        encode_args({"not": "a dataclass"})
