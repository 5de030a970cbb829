"""The loaded configuration: plain frozen dataclasses, fully defaulted, merged and validated.

Produced by :mod:`kubesched.config.loader`; read by the runtime that builds one framework per profile
(``ProfileConfig.plugins`` is the final, ordered plugin list per extension point, ``plugin_args`` the
decoded args object each plugin's factory receives), by the scheduler (parallelism, backoff, percentage
of nodes to score), by the leader elector and the kube backend (``leader_election``,
``client_connection``), and by ``kubesched config view`` through :func:`kubesched.config.dump_config`.
Nothing here is ever mutated after loading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PluginRef:
    """One plugin at one extension point. ``weight`` is the resolved score weight (≥ 1) at ``score``
    and 0 everywhere else."""

    name: str
    weight: int = 0


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """``leaderElection``; durations are in seconds (the file spells them as Go durations, ``"15s"``)."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass(frozen=True, slots=True)
class ClientConnectionConfig:
    """``clientConnection``: how the kube backend talks to the API server (scheduler defaults 50/100)."""

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: int = 100


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """One scheduling profile, ready to build a framework from.

    ``plugins`` has all twelve keys of :data:`kubesched.config.catalog.EXTENSION_POINTS`, each the final
    ordered tuple after merging with the default set and expanding ``multiPoint``; score weights are
    resolved. ``plugin_args`` maps every enabled plugin that has an args type to its decoded, validated
    args (kube-scheduler's defaults where the file gave none).
    ``percentage_of_nodes_to_score`` is ``None`` when the profile does not override the global value.
    """

    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    plugins: Mapping[str, tuple[PluginRef, ...]]
    plugin_args: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class SchedulerConfiguration:
    """A whole ``KubeSchedulerConfiguration`` after defaulting, merging and validation.

    ``percentage_of_nodes_to_score`` 0 means adaptive. ``warnings`` are things that did not stop loading
    (e.g. a default plugin skipped because it is not implemented yet); ``source`` names where the
    document came from (a file path, or ``"<defaults>"``).
    """

    parallelism: int
    percentage_of_nodes_to_score: int
    pod_initial_backoff_seconds: int
    pod_max_backoff_seconds: int
    leader_election: LeaderElectionConfig
    client_connection: ClientConnectionConfig
    profiles: tuple[ProfileConfig, ...]
    warnings: tuple[str, ...]
    source: str
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    delay_cache_until_active: bool = False

    def profile(self, scheduler_name: str) -> ProfileConfig | None:
        """The profile that handles pods with ``spec.schedulerName == scheduler_name``, if any."""
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None
