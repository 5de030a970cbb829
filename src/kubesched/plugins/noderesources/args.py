"""Typed args of NodeResourcesFit and NodeResourcesBalancedAllocation: fields, defaults, validation.

Who reads it: the config loader (``kubesched.config.args_decode`` decodes ``pluginConfig[].args`` into these
classes, then calls ``validate``), the plugin factories (which validate again), and ``dump_config``.
Defaults are kube-scheduler's ``SetDefaults_NodeResourcesFitArgs`` / ``..BalancedAllocationArgs``
(applied in ``__post_init__``); validation is ``validation_pluginargs.go`` with its field paths and
messages, every error reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kubesched.errors import FieldError
from kubesched.plugins.helper.validation import qualified_name_errors

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SUPPORTED_SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
"""Sorted, as upstream lists them in its "supported values" message."""

MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores are 0..10 and are multiplied by MaxNodeScore / 10 when scoring."""

MIN_UTILIZATION = 0
MAX_UTILIZATION = 100
MAX_RESOURCE_WEIGHT = 100


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSpec:
    """A resource that takes part in scoring and its weight (0 means "unset" and becomes 1)."""

    name: str = ""
    weight: int = 0


DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (
    ResourceSpec(name="cpu", weight=1),
    ResourceSpec(name="memory", weight=1),
)


def _defaulted(resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
    """No resources → cpu and memory; a weight left at 0 → 1 (v1 defaulting)."""
    if not resources:
        return DEFAULT_RESOURCES
    return tuple(r if r.weight != 0 else replace(r, weight=1) for r in resources)


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilizationShapePoint:
    """One point of the RequestedToCapacityRatio function: utilization 0..100 → score 0..10."""

    utilization: int = 0
    score: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoringStrategy:
    """How NodeResourcesFit scores: LeastAllocated (default), MostAllocated or RequestedToCapacityRatio."""

    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = ()
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


def _validate_resources(resources: tuple[ResourceSpec, ...], path: str) -> list[FieldError]:
    return [
        FieldError.invalid(
            f"{path}[{i}].weight",
            resource.weight,
            f"resource weight of {resource.name} not in valid range (0, {MAX_RESOURCE_WEIGHT}]",
        )
        for i, resource in enumerate(resources)
        if resource.weight <= 0 or resource.weight > MAX_RESOURCE_WEIGHT
    ]


def _validate_function_shape(shape: tuple[UtilizationShapePoint, ...], path: str) -> list[FieldError]:
    if not shape:
        return [FieldError.required(path, "at least one point must be specified")]
    errors: list[FieldError] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errors.append(
                FieldError.invalid(
                    f"{path}[{i}].utilization", shape[i].utilization, "values must be sorted in increasing order"
                )
            )
            break
    for i, point in enumerate(shape):
        if not MIN_UTILIZATION <= point.utilization <= MAX_UTILIZATION:
            errors.append(
                FieldError.invalid(
                    f"{path}[{i}].utilization",
                    point.utilization,
                    f"not in valid range [{MIN_UTILIZATION}, {MAX_UTILIZATION}]",
                )
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(
                FieldError.invalid(
                    f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
                )
            )
    return errors


def _label_name_errors(value: str, path: str) -> list[FieldError]:
    return [FieldError.invalid(path, value, message) for message in qualified_name_errors(value)]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResourcesFitArgs:
    """``NodeResourcesFitArgs``: resources the Filter ignores and the Score strategy.

    ``ignored_resources`` lists extended resources the Filter does not check; ``ignored_resource_groups``
    lists prefixes (the part before "/") of extended resources it does not check.
    """

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)

    def __post_init__(self) -> None:
        strategy = self.scoring_strategy
        object.__setattr__(self, "scoring_strategy", replace(strategy, resources=_defaulted(strategy.resources)))

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        resources_path = _join(path, "ignoredResources")
        for i, name in enumerate(self.ignored_resources):
            errors.extend(_label_name_errors(name, f"{resources_path}[{i}]"))
        groups_path = _join(path, "ignoredResourceGroups")
        for i, group in enumerate(self.ignored_resource_groups):
            item_path = f"{groups_path}[{i}]"
            if "/" in group:
                errors.append(FieldError.invalid(item_path, group, "resource group name can't contain '/'"))
            errors.extend(_label_name_errors(group, item_path))
        strategy = self.scoring_strategy
        strategy_path = _join(path, "scoringStrategy")
        if strategy.type not in SUPPORTED_SCORING_STRATEGY_TYPES:
            errors.append(
                FieldError.unsupported(_join(strategy_path, "type"), strategy.type, SUPPORTED_SCORING_STRATEGY_TYPES)
            )
        errors.extend(_validate_resources(strategy.resources, _join(strategy_path, "resources")))
        ratio = strategy.requested_to_capacity_ratio
        # Upstream validates the shape whenever it is given, at "scoringStrategy.shape"; a
        # RequestedToCapacityRatio strategy without one would crash kube-scheduler's factory, so it is
        # reported here as the same "Required" error an empty shape gets.
        if ratio is not None or strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            shape = ratio.shape if ratio is not None else ()
            errors.extend(_validate_function_shape(shape, _join(strategy_path, "shape")))
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResourcesBalancedAllocationArgs:
    """``NodeResourcesBalancedAllocationArgs``: the resources whose usage fractions are balanced (weights must be 1)."""

    resources: tuple[ResourceSpec, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", _defaulted(self.resources))

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        seen: set[str] = set()
        resources_path = _join(path, "resources")
        for i, resource in enumerate(self.resources):
            if resource.name in seen:
                errors.append(FieldError.duplicate(f"{resources_path}[{i}].name", resource.name))
            else:
                seen.add(resource.name)
            if resource.weight != 1:
                errors.append(FieldError.invalid(f"{resources_path}[{i}].weight", resource.weight, "must be 1"))
        return errors
