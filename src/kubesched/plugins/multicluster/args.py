"""Typed args of the cluster plugins: fields, defaults, validation with field paths.

See docs/explanation/design.md#typed-defaulted-validated-plugin-args.

Who reads it: the config loader (``pluginConfig[].args`` decoded by ``kubesched.config.args_decode``, then
``validate``), the plugin constructors (which validate again through ``plugins.helper.args.validated``) and
``kubesched config view``. Every default is usable as it is: a multi-cluster profile may enable the plugins with
no ``pluginConfig`` at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from kubesched.errors import FieldError

STALE_REJECT = "Reject"
STALE_PENALIZE = "Penalize"
STALE_POLICIES = (STALE_PENALIZE, STALE_REJECT)

UNREPORTED_ALLOW = "Allow"
UNREPORTED_REJECT = "Reject"
UNREPORTED_POLICIES = (UNREPORTED_ALLOW, UNREPORTED_REJECT)

MATCH_OWNER = "owner"
MATCH_APP = "app"
MATCH_KINDS = (MATCH_APP, MATCH_OWNER)

MAX_RESOURCE_WEIGHT = 100
MIN_SCORE = 0
MAX_SCORE = 100


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterReadinessArgs:
    """``ClusterReadinessArgs``: how old a cluster's state may be, and what happens to a cluster whose state is
    older. ``Reject`` filters it out (Unschedulable); ``Penalize`` keeps it feasible and scores it 0 (fresh
    clusters score 100), so work goes to a stale cluster only when nothing fresh fits."""

    max_staleness_seconds: float = 60.0
    stale_policy: str = STALE_REJECT

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        limit = self.max_staleness_seconds
        if math.isnan(limit) or math.isinf(limit) or limit <= 0:
            errors.append(
                FieldError.invalid(_join(path, "maxStalenessSeconds"), limit, "must be a finite number of seconds > 0")
            )
        if self.stale_policy not in STALE_POLICIES:
            errors.append(FieldError.unsupported(_join(path, "stalePolicy"), self.stale_policy, STALE_POLICIES))
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterAPIEnablementArgs:
    """``ClusterAPIEnablementArgs``: whether the pod's controller kind must be served too
    (``includeOwnerKind``), and what a cluster that reports no API list gets (``Allow``: every kind counts as
    served, as before the member reported; ``Reject``: it is filtered out)."""

    include_owner_kind: bool = True
    unreported_policy: str = UNREPORTED_ALLOW

    def validate(self, path: str) -> list[FieldError]:
        if self.unreported_policy not in UNREPORTED_POLICIES:
            return [
                FieldError.unsupported(_join(path, "unreportedPolicy"), self.unreported_policy, UNREPORTED_POLICIES)
            ]
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterCapacityArgs:
    """``ClusterCapacityArgs``: ``nodeLevelFit`` false ignores node summaries and always uses Karmada's general
    estimate from the cluster's totals; ``ignoredResources`` are extended resources the check leaves out (as
    NodeResourcesFit's own ``ignoredResources``)."""

    node_level_fit: bool = True
    ignored_resources: tuple[str, ...] = ()

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        for i, name in enumerate(self.ignored_resources):
            if not name or name in ("cpu", "memory", "pods"):
                errors.append(
                    FieldError.invalid(
                        f"{_join(path, 'ignoredResources')}[{i}]", name, "must name an extended resource"
                    )
                )
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceWeight:
    """A resource ClusterBalance weighs, and its weight (0 means unset and becomes 1)."""

    name: str = ""
    weight: int = 0


DEFAULT_BALANCE_RESOURCES: tuple[ResourceWeight, ...] = (
    ResourceWeight(name="cpu", weight=1),
    ResourceWeight(name="memory", weight=1),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterBalanceArgs:
    """``ClusterBalanceArgs``: the resources whose free share is weighed (default cpu and memory, weight 1)."""

    resources: tuple[ResourceWeight, ...] = ()

    def __post_init__(self) -> None:
        resources = self.resources or DEFAULT_BALANCE_RESOURCES
        object.__setattr__(self, "resources", tuple(r if r.weight != 0 else replace(r, weight=1) for r in resources))

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            here = f"{_join(path, 'resources')}[{i}]"
            if not resource.name:
                errors.append(FieldError.required(f"{here}.name"))
            elif resource.name in seen:
                errors.append(FieldError.duplicate(f"{here}.name", resource.name))
            seen.add(resource.name)
            if not 1 <= resource.weight <= MAX_RESOURCE_WEIGHT:
                errors.append(
                    FieldError.invalid(
                        f"{here}.weight", resource.weight, f"must be in the range [1, {MAX_RESOURCE_WEIGHT}]"
                    )
                )
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterCostArgs:
    """``ClusterCostArgs``: the score of a cluster that publishes no prices (``missingCostScore``, 0..100)."""

    missing_cost_score: int = 0

    def validate(self, path: str) -> list[FieldError]:
        if not MIN_SCORE <= self.missing_cost_score <= MAX_SCORE:
            return [
                FieldError.invalid(
                    _join(path, "missingCostScore"),
                    self.missing_cost_score,
                    f"must be between {MIN_SCORE} and {MAX_SCORE}",
                )
            ]
        return []


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLocalityArgs:
    """``ClusterLocalityArgs``: what makes a running pod part of the same workload: ``owner`` (the same
    controller) and/or ``app`` (the same ``app.kubernetes.io/name``, else ``app``, label), in one namespace."""

    match_by: tuple[str, ...] = field(default=(MATCH_OWNER, MATCH_APP))

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        here = _join(path, "matchBy")
        if not self.match_by:
            errors.append(FieldError.required(here, "at least one of owner, app"))
        for i, kind in enumerate(self.match_by):
            if kind not in MATCH_KINDS:
                errors.append(FieldError.unsupported(f"{here}[{i}]", kind, MATCH_KINDS))
        return errors


APPROVAL_AUTOMATIC = "Automatic"
APPROVAL_ANNOTATION = "Annotation"
APPROVAL_MODES = (APPROVAL_ANNOTATION, APPROVAL_AUTOMATIC)
MAX_PERMIT_TIMEOUT_SECONDS = 900.0  # kube-scheduler's cap on a Permit wait (15 minutes)


def _positive_seconds(value: float, path: str, key: str, errors: list[FieldError], limit: float | None = None) -> None:
    if math.isnan(value) or math.isinf(value) or value <= 0 or (limit is not None and value > limit):
        allowed = f"a number of seconds in (0, {limit:g}]" if limit is not None else "a finite number of seconds > 0"
        errors.append(FieldError.invalid(_join(path, key), value, f"must be {allowed}"))


# kube-scheduler's default parallelism. Why commits are bounded, and what the bound costs in throughput (the bound
# divided by one commit's time): docs/explanation/two-phase-commit.md#commits-in-flight.
DEFAULT_MAX_COMMITS_IN_FLIGHT = 16
MAX_COMMITS_IN_FLIGHT = 100000


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterReservationArgs:
    """``ClusterReservationArgs``: the first phase of the two-phase commit, at Permit.

    ``ttlSeconds``: how long the member holds an unconfirmed reservation. ``permitTimeoutSeconds``: how long the
    pod may wait at Permit for reserve and approval together (then it is rejected and requeued). Each reserve
    call has ``reserveTimeoutSeconds`` and is tried ``reserveAttempts`` times while it gets no answer (same
    reservation id: the repeat is idempotent). ``approval``: ``Automatic`` (approved once reserved) or
    ``Annotation`` (the pod's ``multicluster.kubesched.io/approval`` must become ``approved``; ``denied``
    rejects; re-read every ``recheckIntervalSeconds``). A cluster with ``suspectAfterFailures`` consecutive commit
    failures (reserve or bind) is filtered out for ``suspectSeconds`` after the last one.
    ``maxCommitsInFlight``: at most this many of the profile's pods between the end of their scheduling cycle and
    the end of their commit (reserving, awaiting approval, binding) at once; while that many are, the scheduler
    pops no pod, so a burst waits in the queue, in order, rather than in commits that share the members; ``0``
    leaves them unbounded."""

    ttl_seconds: float = 60.0
    permit_timeout_seconds: float = 30.0
    reserve_timeout_seconds: float = 2.0
    reserve_attempts: int = 2
    approval: str = APPROVAL_AUTOMATIC
    recheck_interval_seconds: float = 1.0
    suspect_after_failures: int = 3
    suspect_seconds: float = 60.0
    max_commits_in_flight: int = DEFAULT_MAX_COMMITS_IN_FLIGHT

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        _positive_seconds(self.ttl_seconds, path, "ttlSeconds", errors, 3600.0)
        if not 0 <= self.max_commits_in_flight <= MAX_COMMITS_IN_FLIGHT:
            errors.append(
                FieldError.invalid(
                    _join(path, "maxCommitsInFlight"),
                    self.max_commits_in_flight,
                    f"must be in [0, {MAX_COMMITS_IN_FLIGHT}] (0: unbounded)",
                )
            )
        _positive_seconds(self.permit_timeout_seconds, path, "permitTimeoutSeconds", errors, MAX_PERMIT_TIMEOUT_SECONDS)
        _positive_seconds(self.reserve_timeout_seconds, path, "reserveTimeoutSeconds", errors)
        _positive_seconds(self.recheck_interval_seconds, path, "recheckIntervalSeconds", errors)
        _positive_seconds(self.suspect_seconds, path, "suspectSeconds", errors)
        if not 1 <= self.reserve_attempts <= 10:
            errors.append(
                FieldError.invalid(_join(path, "reserveAttempts"), self.reserve_attempts, "must be in [1, 10]")
            )
        if self.suspect_after_failures < 1:
            errors.append(
                FieldError.invalid(_join(path, "suspectAfterFailures"), self.suspect_after_failures, "must be >= 1")
            )
        if self.approval not in APPROVAL_MODES:
            errors.append(FieldError.unsupported(_join(path, "approval"), self.approval, APPROVAL_MODES))
        return errors


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterBindArgs:
    """``ClusterBindArgs``: the deadline of the agent's bind call (``bindTimeoutSeconds``) and how often a bind
    that got no answer is sent again under the same reservation id (``bindAttempts``; the agent makes one pod of
    it however often it is sent): a bind whose answer was lost must not become a second placement elsewhere."""

    bind_timeout_seconds: float = 5.0
    bind_attempts: int = 3

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        _positive_seconds(self.bind_timeout_seconds, path, "bindTimeoutSeconds", errors)
        if not 1 <= self.bind_attempts <= 10:
            errors.append(FieldError.invalid(_join(path, "bindAttempts"), self.bind_attempts, "must be in [1, 10]"))
        return errors
