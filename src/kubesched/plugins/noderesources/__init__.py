"""NodeResourcesFit and NodeResourcesBalancedAllocation: resource fit filtering and resource-based scoring."""

from kubesched.plugins.noderesources.args import (
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.plugins.noderesources.balanced_allocation import BalancedAllocation
from kubesched.plugins.noderesources.fit import Fit

__all__ = [
    "BalancedAllocation",
    "Fit",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
]
