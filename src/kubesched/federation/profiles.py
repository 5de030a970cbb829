"""Which profiles of a configuration place pods onto member clusters rather than onto nodes.

Who calls it: the simulation (to split a run into its node plane and its cluster plane) and the reports (to
say "cluster" for those pods). A profile is a cluster profile when it enables any cluster plugin
(:data:`kubesched.plugins.names.MULTICLUSTER`) at any extension point: its nodes must be clusters for those
plugins to mean anything, and a node profile never needs them.
"""

from __future__ import annotations

from kubesched.config.types import ProfileConfig, SchedulerConfiguration
from kubesched.plugins.names import MULTICLUSTER

__all__ = ["cluster_profiles", "is_cluster_profile"]

_CLUSTER_PLUGINS = frozenset(MULTICLUSTER)


def is_cluster_profile(profile: ProfileConfig) -> bool:
    return any(ref.name in _CLUSTER_PLUGINS for refs in profile.plugins.values() for ref in refs)


def cluster_profiles(config: SchedulerConfiguration) -> frozenset[str]:
    """The scheduler names of the configuration's cluster profiles."""
    return frozenset(p.scheduler_name for p in config.profiles if is_cluster_profile(p))
