"""The loaded configuration written back as a fully-explicit v1 document (``kubesched config view``).

Called by the CLI's ``config view`` and by tests. The output is a plain mapping ready for YAML/JSON:
every top-level default spelled out, and each profile's *final* plugin lists — ``multiPoint`` disables
``*`` (so no default comes back in) and each extension point lists exactly the plugins that run there,
in order, with resolved score weights — plus one ``pluginConfig`` entry per plugin with args (defaults
included, sorted by name, ``apiVersion``/``kind`` set). Loading the output again gives an equal
configuration (minus warnings about skipped defaults, which are already gone).
"""

from __future__ import annotations

from typing import Any

from kubesched.durations import format_go_duration, seconds_to_ns

from .args_decode import encode_args
from .catalog import EXTENSION_POINTS, MULTI_POINT
from .defaults import API_VERSION, KIND
from .types import ProfileConfig, SchedulerConfiguration


def _dump_profile(profile: ProfileConfig) -> dict[str, Any]:
    plugins: dict[str, Any] = {MULTI_POINT: {"disabled": [{"name": "*"}]}}
    for point in EXTENSION_POINTS:
        refs = profile.plugins.get(point, ())
        if not refs:
            continue
        if point == "score":
            plugins[point] = {"enabled": [{"name": r.name, "weight": r.weight} for r in refs]}
        else:
            plugins[point] = {"enabled": [{"name": r.name} for r in refs]}
    out: dict[str, Any] = {"schedulerName": profile.scheduler_name}
    if profile.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
    out["plugins"] = plugins
    out["pluginConfig"] = [
        {"name": name, "args": {"apiVersion": API_VERSION, "kind": f"{name}Args", **encode_args(args)}}
        for name, args in sorted(profile.plugin_args.items())
    ]
    return out


def dump_config(cfg: SchedulerConfiguration) -> dict[str, Any]:
    """The fully-defaulted ``KubeSchedulerConfiguration`` v1 document for ``cfg``."""
    le = cfg.leader_election
    cc = cfg.client_connection
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "parallelism": cfg.parallelism,
        "percentageOfNodesToScore": cfg.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": cfg.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": cfg.pod_max_backoff_seconds,
        "enableProfiling": cfg.enable_profiling,
        "enableContentionProfiling": cfg.enable_contention_profiling,
        "delayCacheUntilActive": cfg.delay_cache_until_active,
        "leaderElection": {
            "leaderElect": le.leader_elect,
            "leaseDuration": format_go_duration(seconds_to_ns(le.lease_duration)),
            "renewDeadline": format_go_duration(seconds_to_ns(le.renew_deadline)),
            "retryPeriod": format_go_duration(seconds_to_ns(le.retry_period)),
            "resourceLock": le.resource_lock,
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        },
        "clientConnection": {
            "kubeconfig": cc.kubeconfig,
            "acceptContentTypes": cc.accept_content_types,
            "contentType": cc.content_type,
            "qps": cc.qps,
            "burst": cc.burst,
        },
        "profiles": [_dump_profile(p) for p in cfg.profiles],
    }
