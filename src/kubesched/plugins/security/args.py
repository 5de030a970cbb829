"""Typed args of SecurityAuditFilter and SecurityAuditPermit: engine, failure and enforcement settings, with defaults
and validation that reports every error with its field path.

``opaEndpoint`` selects the remote OPA engine; ``policies`` (and ``data``) select the embedded Rego engine. Read by
the config loader and by the plugin factories; documented in docs/reference/plugin-args.md#security-audit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import urlparse

from kubesched.errors import FieldError

ENGINE_EMBEDDED = "embedded"
ENGINE_REMOTE = "remote"
FAILURE_FAIL = "Fail"
FAILURE_IGNORE = "Ignore"
ENFORCE_DENY = "deny"
ENFORCE_WARN = "warn"
ENFORCE_DRYRUN = "dryrun"
MODE_BATCH = "batch"
MODE_PER_NODE = "per-node"
DEFAULT_DECISION_PATH = "kubernetes/authz"
DEFAULT_BREAK_GLASS_LABEL = "kubesched.io/break-glass"
BREAK_GLASS_NAMESPACE_LABEL = "kubesched.io/break-glass-allowed"
MAX_PERMIT_TIMEOUT = 900.0
DEFAULT_POLICY_REFRESH_SECONDS = 2.0
MAX_POLICY_REFRESH_SECONDS = 300.0


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyEngineArgs:
    """Where decisions come from. Shared by both plugins."""

    engine: str = ""  # "" = remote when opaEndpoint is set and no policies are given, else embedded
    opa_endpoint: str = ""
    timeout_seconds: float = 5.0
    # Paths relative to the configuration file (metadata "path": kubesched.config.relative_paths).
    token_file: str = field(default="", metadata={"path": True})
    ca_file: str = field(default="", metadata={"path": True})
    batch_endpoint: str = ""
    policies: tuple[str, ...] = field(default=(), metadata={"path": True})
    data: tuple[str, ...] = field(default=(), metadata={"path": True})
    decision_path: str = ""
    failure_policy: str = FAILURE_FAIL
    enforcement_action: str = ENFORCE_DENY
    exempt_namespaces: tuple[str, ...] = ("kube-system",)
    exempt_pod_labels: dict[str, str] = field(default_factory=dict)
    break_glass_label: str = DEFAULT_BREAK_GLASS_LABEL
    # Where the break-glass label is honoured: these namespaces, and namespaces an administrator labelled
    # BREAK_GLASS_NAMESPACE_LABEL=true. Nowhere by default: a pod author must not be able to skip the policy.
    break_glass_namespaces: tuple[str, ...] = ()
    time_granularity_seconds: float = 60.0
    cache_size: int = 4096
    # The freshness bound of a remote OPA's revision (how long the revision it reported is trusted before the next
    # decision asks again), and how often the scheduler checks either engine for a new revision, requeueing the pods
    # the old one rejected (docs/explanation/policy-freshness.md).
    policy_refresh_seconds: float = DEFAULT_POLICY_REFRESH_SECONDS

    def resolved_engine(self) -> str:
        if self.engine:
            return self.engine
        return ENGINE_REMOTE if self.opa_endpoint and not self.policies else ENGINE_EMBEDDED

    def resolved_decision_path(self) -> str:
        """The decision document: explicit, else the path of opaEndpoint after /v1/data/, else the default."""
        if self.decision_path:
            return self.decision_path.strip("/")
        if self.opa_endpoint:
            path = urlparse(self.opa_endpoint).path
            if path.startswith("/v1/data/"):
                return path.removeprefix("/v1/data/").strip("/")
        return DEFAULT_DECISION_PATH

    def engine_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        engine = self.resolved_engine()
        if self.engine and self.engine not in (ENGINE_EMBEDDED, ENGINE_REMOTE):
            errors.append(FieldError.unsupported(_join(path, "engine"), self.engine, [ENGINE_EMBEDDED, ENGINE_REMOTE]))
        if self.opa_endpoint and self.policies:
            errors.append(
                FieldError.forbidden(
                    _join(path, "policies"),
                    "may not be set together with opaEndpoint: set opaEndpoint to ask a remote OPA, or policies "
                    "(and data) for the embedded engine",
                )
            )
        elif engine == ENGINE_REMOTE and self.data:
            errors.append(FieldError.forbidden(_join(path, "data"), "only the embedded engine reads data files"))
        if engine == ENGINE_REMOTE:
            url = urlparse(self.opa_endpoint)
            if not self.opa_endpoint:
                errors.append(FieldError.required(_join(path, "opaEndpoint"), "the remote engine needs OPA's URL"))
            elif url.scheme not in ("http", "https") or not url.netloc:
                errors.append(
                    FieldError.invalid(_join(path, "opaEndpoint"), self.opa_endpoint, "must be an http(s) URL")
                )
            elif not url.path.startswith("/v1/data/") and not self.decision_path:
                errors.append(
                    FieldError.invalid(
                        _join(path, "opaEndpoint"), self.opa_endpoint, "must be a /v1/data/... path of OPA's Data API"
                    )
                )
            if self.ca_file and url.scheme != "https":
                errors.append(FieldError.invalid(_join(path, "caFile"), self.ca_file, "only used with https"))
        elif engine == ENGINE_EMBEDDED and not self.policies:
            errors.append(FieldError.required(_join(path, "policies"), "the embedded engine needs .rego files"))
        if not self.timeout_seconds > 0:
            errors.append(FieldError.invalid(_join(path, "timeoutSeconds"), self.timeout_seconds, "must be > 0"))
        policies = [FAILURE_FAIL, FAILURE_IGNORE]
        if self.failure_policy not in policies:
            errors.append(FieldError.unsupported(_join(path, "failurePolicy"), self.failure_policy, policies))
        actions = [ENFORCE_DENY, ENFORCE_DRYRUN, ENFORCE_WARN]
        if self.enforcement_action not in actions:
            errors.append(FieldError.unsupported(_join(path, "enforcementAction"), self.enforcement_action, actions))
        if self.time_granularity_seconds < 0:
            errors.append(
                FieldError.invalid(_join(path, "timeGranularitySeconds"), self.time_granularity_seconds, "must be >= 0")
            )
        refresh = self.policy_refresh_seconds
        if not (
            isinstance(refresh, int | float) and math.isfinite(refresh) and 0 < refresh <= MAX_POLICY_REFRESH_SECONDS
        ):
            errors.append(
                FieldError.invalid(
                    _join(path, "policyRefreshSeconds"),
                    refresh,
                    f"must be a number of seconds > 0 and at most {MAX_POLICY_REFRESH_SECONDS:g}",
                )
            )
        if self.cache_size < 0:
            errors.append(FieldError.invalid(_join(path, "cacheSize"), self.cache_size, "must be >= 0"))
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityAuditFilterArgs(PolicyEngineArgs):
    """The engine, failure and enforcement args, plus the evaluation mode."""

    evaluation_mode: str = MODE_BATCH  # per-node: one engine call per (pod, node), the benchmarks' baseline

    def validate(self, path: str) -> list[FieldError]:
        errors = self.engine_errors(path)
        if self.evaluation_mode not in (MODE_BATCH, MODE_PER_NODE):
            errors.append(
                FieldError.unsupported(_join(path, "evaluationMode"), self.evaluation_mode, [MODE_BATCH, MODE_PER_NODE])
            )
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityAuditPermitArgs(PolicyEngineArgs):
    """Asynchronous approval: Wait at Permit while policy (or an approver) decides."""

    permit_timeout_seconds: float = 300.0
    recheck_interval_seconds: float = 10.0

    def validate(self, path: str) -> list[FieldError]:
        errors = self.engine_errors(path)
        if not 0 < self.permit_timeout_seconds <= MAX_PERMIT_TIMEOUT:
            errors.append(
                FieldError.invalid(
                    _join(path, "permitTimeoutSeconds"),
                    self.permit_timeout_seconds,
                    "must be > 0 and at most 900 (kube-scheduler's 15-minute Permit cap)",
                )
            )
        if not self.recheck_interval_seconds > 0:
            errors.append(
                FieldError.invalid(_join(path, "recheckIntervalSeconds"), self.recheck_interval_seconds, "must be > 0")
            )
        return errors
