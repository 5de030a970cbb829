"""A plugin catalog for the config tests: kube-scheduler's in-tree plugins with their upstream extension
points (the real plugins are built elsewhere), args types modelled on kube-scheduler's, and the seed
config's two security plugins. Builders: :func:`catalog` and :func:`desc`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from kubesched.config import PluginCatalog
from kubesched.errors import FieldError


@dataclass(frozen=True, slots=True)
class Desc:
    """A minimal PluginDescriptor."""

    name: str
    extension_points: frozenset[str]
    args_type: type[Any] | None = None
    implemented: bool = True


# ---- args types (kube-scheduler's shapes and defaults) -------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSpec:
    name: str = ""
    weight: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilizationShapePoint:
    utilization: int = 0
    score: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()


DEFAULT_RESOURCES = (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoringStrategy:
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:  # SetDefaults_NodeResourcesFitArgs
        resources = self.resources or DEFAULT_RESOURCES
        resources = tuple(r if r.weight else ResourceSpec(name=r.name, weight=1) for r in resources)
        object.__setattr__(self, "resources", resources)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResourcesFitArgs:
    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)

    def validate(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                errs.append(
                    FieldError.invalid(
                        f"{path}.ignoredResourceGroups[{i}]", group, "resource group name can't contain '/'"
                    )
                )
        sp = f"{path}.scoringStrategy"
        for i, r in enumerate(self.scoring_strategy.resources):
            if not 0 < r.weight <= 100:
                errs.append(
                    FieldError.invalid(
                        f"{sp}.resources[{i}].weight",
                        r.weight,
                        f"resource weight of {r.name} not in valid range (0, 100]",
                    )
                )
        if self.scoring_strategy.type == "RequestedToCapacityRatio":
            if self.scoring_strategy.requested_to_capacity_ratio is None:
                errs.append(
                    FieldError.required(
                        f"{sp}.requestedToCapacityRatio", "must be specified when type is RequestedToCapacityRatio"
                    )
                )
        elif self.scoring_strategy.requested_to_capacity_ratio is not None:
            errs.append(
                FieldError.forbidden(
                    f"{sp}.requestedToCapacityRatio", "must be nil when type is not RequestedToCapacityRatio"
                )
            )
        return errs


@dataclass(frozen=True, slots=True, kw_only=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def validate(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        pp = f"{path}.minCandidateNodesPercentage"
        ap = f"{path}.minCandidateNodesAbsolute"
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            errs.append(FieldError.invalid(pp, self.min_candidate_nodes_percentage, "not in valid range [0, 100]"))
        if self.min_candidate_nodes_absolute < 0:
            errs.append(FieldError.invalid(ap, self.min_candidate_nodes_absolute, "not in valid range [0, inf)"))
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            errs.append(FieldError.invalid(pp, 0, "cannot be zero at the same time as minCandidateNodesAbsolute"))
            errs.append(FieldError.invalid(ap, 0, "cannot be zero at the same time as minCandidateNodesPercentage"))
        return errs


@dataclass(frozen=True, slots=True, kw_only=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self, path: str) -> list[FieldError]:
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            return [
                FieldError.invalid(
                    f"{path}.hardPodAffinityWeight", self.hard_pod_affinity_weight, "not in valid range [0, 100]"
                )
            ]
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityAuditFilterArgs:
    opa_endpoint: str = "http://localhost:8181/v1/data/kubernetes/authz"
    timeout_seconds: int = 1

    def validate(self, path: str) -> list[FieldError]:
        if self.timeout_seconds <= 0:
            return [FieldError.invalid(f"{path}.timeoutSeconds", self.timeout_seconds, "must be greater than 0")]
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class ComplianceScoreArgs:
    weight: int = 10
    compliance_data_path: str = ""

    def validate(self, path: str) -> list[FieldError]:
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomSortArgs:
    order: Literal["asc", "desc"] = "asc"

    def validate(self, path: str) -> list[FieldError]:
        return []


# ---- the catalog ----------------------------------------------------------------------------------

ALL_POINTS = frozenset(
    {
        "queueSort",
        "preFilter",
        "filter",
        "postFilter",
        "preScore",
        "score",
        "reserve",
        "permit",
        "preBind",
        "bind",
        "postBind",
    }
)

IN_TREE: dict[str, tuple[frozenset[str], type[Any] | None]] = {
    "SchedulingGates": (frozenset({"preEnqueue"}), None),
    "PrioritySort": (frozenset({"queueSort"}), None),
    "NodeUnschedulable": (frozenset({"filter"}), None),
    "NodeName": (frozenset({"filter"}), None),
    "TaintToleration": (frozenset({"filter", "preScore", "score"}), None),
    "NodeAffinity": (frozenset({"preFilter", "filter", "preScore", "score"}), None),
    "NodePorts": (frozenset({"preFilter", "filter"}), None),
    "NodeResourcesFit": (frozenset({"preFilter", "filter", "preScore", "score"}), NodeResourcesFitArgs),
    "VolumeRestrictions": (frozenset({"preFilter", "filter"}), None),
    "NodeVolumeLimits": (frozenset({"preFilter", "filter"}), None),
    "VolumeBinding": (frozenset({"preFilter", "filter", "reserve", "preBind", "preScore", "score"}), None),
    "VolumeZone": (frozenset({"preFilter", "filter"}), None),
    "PodTopologySpread": (frozenset({"preFilter", "filter", "preScore", "score"}), None),
    "InterPodAffinity": (frozenset({"preFilter", "filter", "preScore", "score"}), InterPodAffinityArgs),
    "DynamicResources": (
        frozenset({"preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind"}),
        None,
    ),
    "DefaultPreemption": (frozenset({"preEnqueue", "postFilter"}), DefaultPreemptionArgs),
    "NodeResourcesBalancedAllocation": (frozenset({"preScore", "score"}), None),
    "ImageLocality": (frozenset({"score"}), None),
    "DefaultBinder": (frozenset({"bind"}), None),
}

SECURITY: dict[str, tuple[frozenset[str], type[Any] | None]] = {
    "SecurityAuditFilter": (frozenset({"preFilter", "filter"}), SecurityAuditFilterArgs),
    "ComplianceScore": (frozenset({"preScore", "score"}), ComplianceScoreArgs),
}

# The plugins of kube-scheduler's framework_test.go (TestNewFrameworkMultiPointExpansion).
FRAMEWORK_TEST: dict[str, tuple[frozenset[str], type[Any] | None]] = {
    "test-plugin": (ALL_POINTS, None),
    "score-plugin-1": (frozenset({"preScore", "score"}), None),
    "score-with-normalize-plugin-1": (frozenset({"score"}), None),
    "no-op-queue-sort-plugin": (frozenset({"queueSort"}), None),
    "bind-plugin": (frozenset({"bind"}), None),
    "CustomSort": (frozenset({"queueSort"}), CustomSortArgs),
    "AnotherSort": (frozenset({"queueSort"}), None),
    "CustomBind": (frozenset({"bind"}), None),
}


def desc(name: str, points: Iterable[str], args_type: type[Any] | None = None, implemented: bool = True) -> Desc:
    return Desc(name, frozenset(points), args_type, implemented)


def catalog(
    *,
    in_tree: bool = True,
    security: bool = False,
    framework_test: bool = False,
    not_implemented: Iterable[str] = (),
    without: Iterable[str] = (),
) -> PluginCatalog:
    """The in-tree plugins (all implemented unless named in ``not_implemented``), optionally the seed's
    security plugins and the framework-test plugins; ``without`` drops names."""
    table: dict[str, tuple[frozenset[str], type[Any] | None]] = {}
    if in_tree:
        table.update(IN_TREE)
    if security:
        table.update(SECURITY)
    if framework_test:
        table.update(FRAMEWORK_TEST)
    lazy = set(not_implemented)
    drop = set(without)
    return {
        name: Desc(name, points, args, name not in lazy) for name, (points, args) in table.items() if name not in drop
    }


# ---- document builders ------------------------------------------------------------------------------

API = "kubescheduler.config.k8s.io/v1"


def doc(**fields: Any) -> dict[str, Any]:
    """A v1 KubeSchedulerConfiguration document with ``fields`` set."""
    return {"apiVersion": API, "kind": "KubeSchedulerConfiguration", **fields}


def prof(name: str | None = "default-scheduler", **fields: Any) -> dict[str, Any]:
    """One profile; ``prof(None)`` leaves schedulerName unset."""
    out: dict[str, Any] = {} if name is None else {"schedulerName": name}
    out.update(fields)
    return out


def pset(enabled: Iterable[str | tuple[str, int]] = (), disabled: Iterable[str] = ()) -> dict[str, Any]:
    """A PluginSet: ``pset(["A", ("B", 3)], ["*"])``."""
    out: dict[str, Any] = {}
    en = [{"name": e} if isinstance(e, str) else {"name": e[0], "weight": e[1]} for e in enabled]
    if en:
        out["enabled"] = en
    dis = [{"name": d} for d in disabled]
    if dis:
        out["disabled"] = dis
    return out


def names(refs: Iterable[Any]) -> list[str]:
    return [r.name for r in refs]


def weighted(refs: Iterable[Any]) -> list[tuple[str, int]]:
    return [(r.name, r.weight) for r in refs]
