"""Entry points: load, default, merge and validate a ``KubeSchedulerConfiguration`` v1.

Called by the CLI (``kubesched run --config``, ``kubesched config validate``/``view``) and by whatever
builds the scheduler from a file; the result's profiles are what the runtime builds frameworks from.
Every function raises :class:`kubesched.errors.ValidationFailed` carrying *every* problem found, each
formatted like Kubernetes (``profiles[0].plugins.score.enabled[1].name: Invalid value: "Foo": plugin does
not exist``); a YAML syntax error is one error naming its line.

The pipeline: YAML -> :func:`kubesched.config.document.decode_document` (structure, types, unknown fields)
-> top-level defaults and validation (here, after kube-scheduler's ``defaults.go`` and
``ValidateKubeSchedulerConfiguration``) -> :func:`kubesched.config.profiles.build_profile` per profile
(plugin merge, multiPoint expansion, args) -> cross-profile checks (unique names, one common queueSort) -> file
paths in plugin args made relative to the configuration file's directory, as kubeconfig files do
(:mod:`kubesched.config.relative_paths`).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from typing import Any

import yaml

from kubesched.bounded_input import InputTooLarge, load_yaml, read_text
from kubesched.durations import format_go_duration
from kubesched.errors import FieldError, ValidationFailed

from .args_decode import encode_args
from .catalog import PluginCatalog
from .defaults import (
    API_VERSION,
    DEFAULT_BURST,
    DEFAULT_CONTENT_TYPE,
    DEFAULT_LEADER_ELECT,
    DEFAULT_LEASE_DURATION_NS,
    DEFAULT_PARALLELISM,
    DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE,
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    DEFAULT_QPS,
    DEFAULT_RENEW_DEADLINE_NS,
    DEFAULT_RESOURCE_LOCK,
    DEFAULT_RESOURCE_NAME,
    DEFAULT_RESOURCE_NAMESPACE,
    DEFAULT_RETRY_PERIOD_NS,
    DEFAULT_SCHEDULER_NAME,
    KIND,
)
from .document import RawConfig, RawProfile, decode_document
from .dump import dump_config
from .profiles import ProfileResult, build_profile
from .relative_paths import resolve_plugin_paths
from .types import ClientConnectionConfig, LeaderElectionConfig, ProfileConfig, SchedulerConfiguration

__all__ = ["DEFAULTS_SOURCE", "default_config", "dump_config", "load_config_dict", "load_config_file", "parse_yaml"]

DEFAULTS_SOURCE = "<defaults>"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping (kube's strict decoder does too)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            continue
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"key {key!r} already set in map", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str) -> Any:
    """Parse one YAML (or JSON) document; a syntax error becomes a one-error ``ValidationFailed``."""
    try:
        return load_yaml(text, source, _StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or exc.context or "malformed YAML"
        raise ValidationFailed(source, [f"invalid YAML: {where}{problem}"]) from None
    except yaml.YAMLError as exc:
        raise ValidationFailed(source, [f"invalid YAML: {exc}"]) from None
    except InputTooLarge as exc:
        raise ValidationFailed(source, [str(exc).removeprefix(f"{source}: ")]) from None


def load_config_file(path: str, catalog: PluginCatalog) -> SchedulerConfiguration:
    """Read, default, merge and validate the config file at ``path`` (YAML or JSON)."""
    try:
        text = read_text(path)
    except InputTooLarge as exc:
        raise ValidationFailed(path, [str(exc).removeprefix(f"{path}: ")]) from None
    except OSError as exc:
        raise ValidationFailed(path, [f"cannot read config file: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise ValidationFailed(path, [f"cannot read config file: not UTF-8 text ({exc.reason})"]) from None
    return load_config_dict(parse_yaml(text, path), path, catalog, base_dir=os.path.dirname(path))


def default_config(catalog: PluginCatalog) -> SchedulerConfiguration:
    """The configuration kube-scheduler runs with when given no file (one ``default-scheduler`` profile)."""
    return load_config_dict({"apiVersion": API_VERSION, "kind": KIND}, DEFAULTS_SOURCE, catalog)


def load_config_dict(
    data: Mapping[str, Any] | Any, source: str, catalog: PluginCatalog, *, base_dir: str = ""
) -> SchedulerConfiguration:
    """Default, merge and validate an already-parsed document; ``source`` names it in errors. Relative file
    paths in plugin args are joined to ``base_dir``, the directory of the file the document came from
    (:mod:`kubesched.config.relative_paths`); without one they stay as written (relative to the working directory)."""
    errors: list[FieldError] = []
    raw = decode_document(data, errors)
    if raw is None:
        raise ValidationFailed(source, errors)
    config = _build(raw, source, catalog, errors)
    if errors or config is None:
        raise ValidationFailed(source, errors)
    return resolve_plugin_paths(config, base_dir)


def _build(
    raw: RawConfig, source: str, catalog: PluginCatalog, errors: list[FieldError]
) -> SchedulerConfiguration | None:
    parallelism = _or(raw.parallelism, DEFAULT_PARALLELISM)
    percentage = _or(raw.percentage_of_nodes_to_score, DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE)
    initial_backoff = _or(raw.pod_initial_backoff_seconds, DEFAULT_POD_INITIAL_BACKOFF_SECONDS)
    max_backoff = _or(raw.pod_max_backoff_seconds, DEFAULT_POD_MAX_BACKOFF_SECONDS)
    enable_profiling = _or(raw.enable_profiling, True)
    enable_contention = raw.enable_contention_profiling
    if enable_contention is None:
        enable_contention = enable_profiling

    leader = _leader_election(raw, errors)
    client = ClientConnectionConfig(
        kubeconfig=raw.kubeconfig or "",
        accept_content_types=raw.accept_content_types or "",
        content_type=raw.content_type or DEFAULT_CONTENT_TYPE,
        qps=raw.qps or DEFAULT_QPS,  # 0 means unset, as in kube-scheduler
        burst=raw.burst or DEFAULT_BURST,
    )
    if client.burst < 0:
        errors.append(FieldError.invalid("clientConnection.burst", client.burst, "must be non-negative"))

    if parallelism <= 0:
        errors.append(FieldError.invalid("parallelism", parallelism, "should be an integer value greater than zero"))
    if not 0 <= percentage <= 100:
        errors.append(FieldError.invalid("percentageOfNodesToScore", percentage, "not in valid range [0-100]"))
    if initial_backoff <= 0:
        errors.append(FieldError.invalid("podInitialBackoffSeconds", initial_backoff, "must be greater than 0"))
    if max_backoff < initial_backoff:
        errors.append(
            FieldError.invalid(
                "podMaxBackoffSeconds", max_backoff, "must be greater than or equal to PodInitialBackoffSeconds"
            )
        )
    if raw.extenders_count:
        errors.append(FieldError.forbidden("extenders", "extenders are not supported by kubesched yet"))

    raw_profiles = raw.profiles or [RawProfile(path="profiles[0]")]
    results: list[ProfileResult] = []
    first_with_name: dict[str, int] = {}
    for i, rp in enumerate(raw_profiles):
        name = rp.scheduler_name
        if name is None and len(raw_profiles) == 1:
            name = DEFAULT_SCHEDULER_NAME
        name = name or ""
        if not name:
            errors.append(FieldError.required(f"{rp.path}.schedulerName"))
        result = build_profile(rp, name, catalog)
        errors.extend(result.errors)
        results.append(result)
        if name and name in first_with_name:
            errors.append(FieldError.duplicate(f"{rp.path}.schedulerName", name))
        first_with_name.setdefault(name, i)
    errors.extend(_common_queue_sort(raw_profiles, results))

    if errors:
        return None
    profiles: list[ProfileConfig] = [r.profile for r in results if r.profile is not None]
    return SchedulerConfiguration(
        parallelism=parallelism,
        percentage_of_nodes_to_score=percentage,
        pod_initial_backoff_seconds=initial_backoff,
        pod_max_backoff_seconds=max_backoff,
        leader_election=leader,
        client_connection=client,
        profiles=tuple(profiles),
        warnings=tuple(w for r in results for w in r.warnings),
        source=source,
        enable_profiling=enable_profiling,
        enable_contention_profiling=enable_contention,
        delay_cache_until_active=_or(raw.delay_cache_until_active, False),
    )


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _leader_election(raw: RawConfig, errors: list[FieldError]) -> LeaderElectionConfig:
    """Defaults (``RecommendedDefaultLeaderElectionConfiguration``; a zero duration means unset) and
    ``ValidateLeaderElectionConfiguration`` plus the scheduler's leases-only rule."""
    elect = _or(raw.leader_elect, DEFAULT_LEADER_ELECT)
    lease = raw.lease_duration_ns or DEFAULT_LEASE_DURATION_NS
    renew = raw.renew_deadline_ns or DEFAULT_RENEW_DEADLINE_NS
    retry = raw.retry_period_ns or DEFAULT_RETRY_PERIOD_NS
    lock = raw.resource_lock or DEFAULT_RESOURCE_LOCK
    if elect:
        p = "leaderElection"
        for key, value in (("leaseDuration", lease), ("renewDeadline", renew), ("retryPeriod", retry)):
            if value <= 0:
                errors.append(FieldError.invalid(f"{p}.{key}", format_go_duration(value), "must be greater than zero"))
        if lease <= renew:
            errors.append(
                FieldError.invalid(
                    f"{p}.leaseDuration", format_go_duration(renew), "must be greater than `RenewDeadline`"
                )
            )
        if lock != "leases":
            errors.append(FieldError.invalid(f"{p}.resourceLock", lock, 'resourceLock value must be "leases"'))
    return LeaderElectionConfig(
        leader_elect=elect,
        lease_duration=lease / 1e9,
        renew_deadline=renew / 1e9,
        retry_period=retry / 1e9,
        resource_lock=lock,
        resource_name=raw.resource_name or DEFAULT_RESOURCE_NAME,
        resource_namespace=raw.resource_namespace or DEFAULT_RESOURCE_NAMESPACE,
    )


def _common_queue_sort(raw_profiles: list[RawProfile], results: list[ProfileResult]) -> list[FieldError]:
    """Every profile must use profile 0's queueSort: the same merged ``queueSort`` plugin set as written
    (``validateCommonQueueSort``), the same plugin after expansion (``profile.NewMap``), the same args."""
    errors: list[FieldError] = []
    first = results[0]
    first_ok = first.comparable and len(first.queue_sort) == 1
    for rp, result in zip(raw_profiles[1:], results[1:], strict=True):
        where = f"{rp.path}.plugins.queueSort"
        if result.queue_sort_set != first.queue_sort_set:
            errors.append(FieldError.invalid(where, result.queue_sort_set, "must be the same for all profiles"))
            continue
        if not first_ok or not result.comparable or len(result.queue_sort) != 1:
            continue
        if result.queue_sort != first.queue_sort:
            errors.append(FieldError.invalid(where, list(result.queue_sort), "must be the same for all profiles"))
            continue
        sort_name = first.queue_sort[0]
        args = result.plugin_args.get(sort_name)
        if args != first.plugin_args.get(sort_name):
            entry = result.explicit_args_paths.get(sort_name)
            path = f"{entry}.args" if entry else f"{rp.path}.pluginConfig"
            shown = encode_args(args) if args is not None else None
            errors.append(FieldError.invalid(path, shown, "queueSort must be the same for all profiles"))
    return errors
