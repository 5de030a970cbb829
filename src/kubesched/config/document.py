"""Strict structural decoding of a ``KubeSchedulerConfiguration`` v1 document.

Internal to :mod:`kubesched.config`; the loader calls :func:`decode_document` on the parsed YAML/JSON
mapping. It checks ``apiVersion``/``kind``, rejects unknown fields (``unknown field "pluginz"``, as
kube-scheduler's strict decoder does) and wrong types, and returns a :class:`RawConfig` whose values are
still *unset* (``None``) where the file said nothing — defaulting, merging and semantic validation happen
later, in :mod:`kubesched.config.profiles` and :mod:`kubesched.config.loader`. Every value that can be
blamed later keeps the field path it came from. ``null`` means "unset" everywhere (Go pointer semantics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.durations import DurationError, parse_go_duration
from kubesched.errors import FieldError

from .args_decode import unknown_field
from .catalog import EXTENSION_POINTS, MULTI_POINT
from .defaults import API_VERSION, KIND, REMOVED_API_VERSIONS

PLUGIN_SETS: tuple[str, ...] = (*EXTENSION_POINTS, MULTI_POINT)

_TOP_FIELDS = (
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
)
_LEADER_FIELDS = (
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
)
_CLIENT_FIELDS = ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")
_PROFILE_FIELDS = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")
_PLUGIN_SET_FIELDS = ("enabled", "disabled")
_PLUGIN_FIELDS = ("name", "weight")
_PLUGIN_CONFIG_FIELDS = ("name", "args")

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class RawPlugin:
    """One ``{name, weight}`` entry; ``path`` is where it was written (``None``: from the defaults)."""

    name: str
    weight: int = 0
    path: str | None = None


@dataclass(slots=True)
class RawPluginSet:
    enabled: list[RawPlugin] = field(default_factory=list)
    disabled: list[RawPlugin] = field(default_factory=list)


@dataclass(slots=True)
class RawPluginConfig:
    name: str
    args: Any
    path: str


@dataclass(slots=True)
class RawProfile:
    path: str
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: int | None = None
    plugins: dict[str, RawPluginSet] = field(default_factory=dict)
    plugin_config: list[RawPluginConfig] = field(default_factory=list)


@dataclass(slots=True)
class RawConfig:
    parallelism: int | None = None
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: int | None = None
    pod_max_backoff_seconds: int | None = None
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    delay_cache_until_active: bool | None = None
    leader_elect: bool | None = None
    lease_duration_ns: int | None = None
    renew_deadline_ns: int | None = None
    retry_period_ns: int | None = None
    resource_lock: str | None = None
    resource_name: str | None = None
    resource_namespace: str | None = None
    kubeconfig: str | None = None
    accept_content_types: str | None = None
    content_type: str | None = None
    qps: float | None = None
    burst: int | None = None
    profiles: list[RawProfile] = field(default_factory=list)
    extenders_count: int = 0


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Reader:
    """Type-checked access to a parsed document; records every problem and keeps going."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors

    def wrong(self, path: str, value: object, expected: str) -> None:
        self.errors.append(FieldError.invalid(path, value, f"must be of type {expected}"))

    def obj(self, value: object, path: str, known: Sequence[str]) -> Mapping[str, Any] | None:
        """The mapping at ``path`` (``None`` if absent/null or wrong), after flagging unknown keys."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.wrong(path or "<root>", value, "object")
            return None
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.errors.append(FieldError.invalid(path or "<root>", key, "field names must be strings"))
            elif key not in known:
                self.errors.append(unknown_field(path, key, known))
            else:
                out[key] = item
        return out

    def array(self, value: object, path: str) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            self.wrong(path, value, "array")
            return None
        return value

    def integer(self, value: object, path: str, bits: int = 32) -> int | None:
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        lo, hi = _INT32 if bits == 32 else _INT64
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            self.wrong(path, value, f"int{bits}")
            return None
        return value

    def number(self, value: object, path: str) -> float | None:
        if value is None:
            return None
        if not isinstance(value, int | float) or isinstance(value, bool):
            self.wrong(path, value, "number")
            return None
        return float(value)

    def boolean(self, value: object, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.wrong(path, value, "boolean")
            return None
        return value

    def string(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.wrong(path, value, "string")
            return None
        return value

    def duration(self, value: object, path: str) -> int | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.wrong(path, value, 'duration string (e.g. "15s")')
            return None
        try:
            return parse_go_duration(value)
        except DurationError as exc:
            self.errors.append(FieldError.invalid(path, value, str(exc)))
            return None


def _check_type_meta(doc: Mapping[str, Any], errors: list[FieldError]) -> bool:
    """Check apiVersion/kind; ``False`` means the document is not a v1 config and decoding stops."""
    ok = True
    api_version = doc.get("apiVersion")
    if api_version is None or api_version == "":
        errors.append(FieldError.required("apiVersion", f'must be "{API_VERSION}"'))
        ok = False
    elif not isinstance(api_version, str):
        errors.append(FieldError.invalid("apiVersion", api_version, "must be of type string"))
        ok = False
    elif api_version in REMOVED_API_VERSIONS:
        errors.append(FieldError.invalid("apiVersion", api_version, f"no longer served; use {API_VERSION}"))
        ok = False
    elif api_version != API_VERSION:
        errors.append(FieldError.unsupported("apiVersion", api_version, [API_VERSION]))
        ok = False
    kind = doc.get("kind")
    if kind is None or kind == "":
        errors.append(FieldError.required("kind", f'must be "{KIND}"'))
    elif kind != KIND:
        errors.append(FieldError.unsupported("kind", kind, [KIND]))
    return ok


def _decode_plugin_list(r: _Reader, value: object, path: str, *, enabled: bool) -> list[RawPlugin]:
    out: list[RawPlugin] = []
    items = r.array(value, path)
    for i, item in enumerate(items or ()):
        ipath = f"{path}[{i}]"
        obj = r.obj(item, ipath, _PLUGIN_FIELDS)
        if obj is None and item is not None:
            continue
        obj = obj or {}
        name = r.string(obj.get("name"), join(ipath, "name"))
        weight = r.integer(obj.get("weight"), join(ipath, "weight"))
        if obj.get("name") is None or name == "":
            r.errors.append(FieldError.required(join(ipath, "name")))
        if not name:
            continue
        if weight is not None and weight < 0 and enabled:
            r.errors.append(FieldError.invalid(join(ipath, "weight"), weight, "must not be negative"))
            weight = None
        out.append(RawPlugin(name, weight or 0, ipath))
    return out


def _decode_profile(r: _Reader, value: object, path: str) -> RawProfile:
    prof = RawProfile(path=path)
    obj = r.obj(value, path, _PROFILE_FIELDS)
    if obj is None:
        return prof
    prof.scheduler_name = r.string(obj.get("schedulerName"), join(path, "schedulerName"))
    prof.percentage_of_nodes_to_score = r.integer(
        obj.get("percentageOfNodesToScore"), join(path, "percentageOfNodesToScore")
    )
    ppath = join(path, "plugins")
    plugins = r.obj(obj.get("plugins"), ppath, PLUGIN_SETS)
    for set_name, set_value in (plugins or {}).items():
        spath = join(ppath, set_name)
        sobj = r.obj(set_value, spath, _PLUGIN_SET_FIELDS)
        if sobj is None:
            continue
        prof.plugins[set_name] = RawPluginSet(
            enabled=_decode_plugin_list(r, sobj.get("enabled"), join(spath, "enabled"), enabled=True),
            disabled=_decode_plugin_list(r, sobj.get("disabled"), join(spath, "disabled"), enabled=False),
        )
    cpath = join(path, "pluginConfig")
    for j, item in enumerate(r.array(obj.get("pluginConfig"), cpath) or ()):
        ipath = f"{cpath}[{j}]"
        iobj = r.obj(item, ipath, _PLUGIN_CONFIG_FIELDS)
        if iobj is None and item is not None:
            continue
        iobj = iobj or {}
        name = r.string(iobj.get("name"), join(ipath, "name"))
        if iobj.get("name") is None or name == "":
            r.errors.append(FieldError.required(join(ipath, "name")))
        prof.plugin_config.append(RawPluginConfig(name or "", iobj.get("args"), ipath))
    return prof


def decode_document(doc: object, errors: list[FieldError]) -> RawConfig | None:
    """Decode a parsed document; ``None`` when it is not a v1 ``KubeSchedulerConfiguration`` at all.

    Problems are appended to ``errors``; decoding carries on past them so every problem is reported.
    """
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        errors.append(FieldError.invalid("<root>", doc, "must be of type object"))
        return None
    if not _check_type_meta(doc, errors):
        return None
    r = _Reader(errors)
    top = r.obj(doc, "", _TOP_FIELDS) or {}
    raw = RawConfig()
    raw.parallelism = r.integer(top.get("parallelism"), "parallelism")
    raw.percentage_of_nodes_to_score = r.integer(top.get("percentageOfNodesToScore"), "percentageOfNodesToScore")
    raw.pod_initial_backoff_seconds = r.integer(
        top.get("podInitialBackoffSeconds"), "podInitialBackoffSeconds", bits=64
    )
    raw.pod_max_backoff_seconds = r.integer(top.get("podMaxBackoffSeconds"), "podMaxBackoffSeconds", bits=64)
    raw.enable_profiling = r.boolean(top.get("enableProfiling"), "enableProfiling")
    raw.enable_contention_profiling = r.boolean(top.get("enableContentionProfiling"), "enableContentionProfiling")
    raw.delay_cache_until_active = r.boolean(top.get("delayCacheUntilActive"), "delayCacheUntilActive")

    le = r.obj(top.get("leaderElection"), "leaderElection", _LEADER_FIELDS) or {}
    raw.leader_elect = r.boolean(le.get("leaderElect"), "leaderElection.leaderElect")
    raw.lease_duration_ns = r.duration(le.get("leaseDuration"), "leaderElection.leaseDuration")
    raw.renew_deadline_ns = r.duration(le.get("renewDeadline"), "leaderElection.renewDeadline")
    raw.retry_period_ns = r.duration(le.get("retryPeriod"), "leaderElection.retryPeriod")
    raw.resource_lock = r.string(le.get("resourceLock"), "leaderElection.resourceLock")
    raw.resource_name = r.string(le.get("resourceName"), "leaderElection.resourceName")
    raw.resource_namespace = r.string(le.get("resourceNamespace"), "leaderElection.resourceNamespace")

    cc = r.obj(top.get("clientConnection"), "clientConnection", _CLIENT_FIELDS) or {}
    raw.kubeconfig = r.string(cc.get("kubeconfig"), "clientConnection.kubeconfig")
    raw.accept_content_types = r.string(cc.get("acceptContentTypes"), "clientConnection.acceptContentTypes")
    raw.content_type = r.string(cc.get("contentType"), "clientConnection.contentType")
    raw.qps = r.number(cc.get("qps"), "clientConnection.qps")
    raw.burst = r.integer(cc.get("burst"), "clientConnection.burst")

    for i, item in enumerate(r.array(top.get("profiles"), "profiles") or ()):
        raw.profiles.append(_decode_profile(r, item, f"profiles[{i}]"))

    raw.extenders_count = len(r.array(top.get("extenders"), "extenders") or ())
    return raw
