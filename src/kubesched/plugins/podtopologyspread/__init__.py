"""PodTopologySpread: spreads pods across topology domains (hard constraints filter, soft ones score)."""

from kubesched.plugins.podtopologyspread.args import PodTopologySpreadArgs, TopologySpreadConstraint
from kubesched.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["PodTopologySpread", "PodTopologySpreadArgs", "TopologySpreadConstraint"]
