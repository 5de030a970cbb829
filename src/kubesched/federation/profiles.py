"""Which profiles of a configuration place pods onto member clusters rather than onto nodes.

Who calls it: the simulation and ``kubesched run`` (to split a run into its node plane and its cluster plane)
and the reports (to say "cluster" for those pods). A profile is a cluster profile when it enables any cluster plugin
(:data:`kubesched.plugins.names.MULTICLUSTER`) at any extension point: its nodes must be clusters for those
plugins to mean anything, and a node profile never needs them.
"""

from __future__ import annotations

from dataclasses import replace

from kubesched.config.types import ProfileConfig, SchedulerConfiguration
from kubesched.plugins.names import MULTICLUSTER

__all__ = ["cluster_profiles", "is_cluster_profile", "split_by_plane"]

_CLUSTER_PLUGINS = frozenset(MULTICLUSTER)


def is_cluster_profile(profile: ProfileConfig) -> bool:
    return any(ref.name in _CLUSTER_PLUGINS for refs in profile.plugins.values() for ref in refs)


def cluster_profiles(config: SchedulerConfiguration) -> frozenset[str]:
    """The scheduler names of the configuration's cluster profiles."""
    return frozenset(p.scheduler_name for p in config.profiles if is_cluster_profile(p))


def split_by_plane(
    config: SchedulerConfiguration,
) -> tuple[SchedulerConfiguration | None, SchedulerConfiguration | None]:
    """(the node profiles' configuration, the cluster profiles'), each None when it has no profile; a side
    with every profile is ``config`` itself. Who calls it: ``kubesched run``, which schedules each side with
    its own scheduler (the simulation splits the same way)."""
    clusters = cluster_profiles(config)
    node_side = tuple(p for p in config.profiles if p.scheduler_name not in clusters)
    cluster_side = tuple(p for p in config.profiles if p.scheduler_name in clusters)

    def keep(profiles: tuple[ProfileConfig, ...]) -> SchedulerConfiguration | None:
        if not profiles:
            return None
        return config if len(profiles) == len(config.profiles) else replace(config, profiles=profiles)

    return keep(node_side), keep(cluster_side)
