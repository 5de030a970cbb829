"""MemberCluster (``multicluster.kubesched.io/v1alpha1``): one member cluster as the hub knows it.

Who calls it: :mod:`kubesched.api.manifests` (loading, in simulation; in live mode the CRD is
``deploy/crds/memberclusters.yaml``) and :mod:`kubesched.federation`, which turns each member into the cluster
state the cluster plugins read and into one framework Node, the "super node". Every problem is a
:class:`~kubesched.errors.ManifestError` naming the file, the object and the field. The object's fields, how
readiness and ``observedAt`` are read, and a member described by its own Nodes: docs/reference/membercluster.md.
Quantities are canonical integers from here on (milli-CPU, bytes, counts), costs :class:`~decimal.Decimal` values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Self
from urllib.parse import urlsplit

from kubesched.errors import FieldError

from . import _fields as f
from .objects import ObjectMeta, Taint, spec_taints

__all__ = [
    "CLUSTER_LABEL",
    "GROUP",
    "KIND",
    "PROVIDER_LABEL",
    "VERSION",
    "AgentConnection",
    "ApiEnablement",
    "ClusterConnection",
    "ClusterCost",
    "MemberCluster",
    "MemberClusterStatus",
    "NodeSummaryBucket",
    "SecretRef",
]

GROUP = "multicluster.kubesched.io"
VERSION = "v1alpha1"
KIND = "MemberCluster"

PROVIDER_LABEL = f"{GROUP}/provider"
"""The cloud or platform a member runs on (``aws``, ``gcp``, ``on-prem``), beside the topology labels."""

CLUSTER_LABEL = f"{GROUP}/cluster"
"""On a Node manifest in simulation: the member cluster the node belongs to (its summary is derived)."""

_CONDITION_STATUSES = ("True", "False", "Unknown")


@dataclass(frozen=True, slots=True)
class SecretRef:
    """A key of a Secret on the hub (``key`` defaults per use: ``kubeconfig`` or ``token``)."""

    namespace: str
    name: str
    key: str

    @classmethod
    def from_dict(cls, obj: object, where: str, path: str, default_key: str) -> Self:
        obj = f.item_mapping(obj, where, path)
        return cls(
            namespace=f.required_string(obj, "namespace", where, path),
            name=f.required_string(obj, "name", where, path),
            key=f.string(obj, "key", where, path) or default_key,
        )


@dataclass(frozen=True, slots=True)
class AgentConnection:
    """Pull mode: the cluster agent's HTTPS endpoint and the Secret holding its bearer token."""

    url: str
    token_secret_ref: SecretRef
    ca_bundle: str = ""


@dataclass(frozen=True, slots=True)
class ClusterConnection:
    """How the hub reaches the member: push (its kubeconfig) or pull (its agent); exactly one is set."""

    kubeconfig_secret_ref: SecretRef | None = None
    agent: AgentConnection | None = None

    @property
    def mode(self) -> str:
        return "push" if self.kubeconfig_secret_ref is not None else "pull"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, path: str) -> Self:
        push, pull = obj.get("kubeconfigSecretRef"), obj.get("agent")
        if (push is None) == (pull is None):
            f.reject(where, FieldError.invalid(path, "", "exactly one of kubeconfigSecretRef or agent must be set"))
        if push is not None:
            return cls(
                kubeconfig_secret_ref=SecretRef.from_dict(push, where, f"{path}.kubeconfigSecretRef", "kubeconfig")
            )
        agent_path = f"{path}.agent"
        agent = f.item_mapping(pull, where, agent_path)
        url = f.required_string(agent, "url", where, agent_path)
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            f.invalid(where, f"{agent_path}.url", url, "must be an https:// URL with a host (the agent serves HTTPS)")
        token = agent.get("tokenSecretRef")
        if token is None:
            f.reject(where, FieldError.required(f"{agent_path}.tokenSecretRef", "the Secret holding the bearer token"))
        return cls(
            agent=AgentConnection(
                url=url,
                token_secret_ref=SecretRef.from_dict(token, where, f"{agent_path}.tokenSecretRef", "token"),
                ca_bundle=f.string(agent, "caBundle", where, agent_path),
            )
        )


def _price(obj: Mapping[str, Any], key: str, where: str, path: str) -> Decimal | None:
    """A non-negative decimal (string or number); absent or null is None."""
    raw = obj.get(key)
    if raw is None:
        return None
    here = f.join(path, key)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        f.wrong_type(where, here, "a decimal number (string or number)", raw)
    if isinstance(raw, float) and not math.isfinite(raw):
        f.invalid(where, here, str(raw), "must be a finite decimal number")
    try:
        # str() first: Decimal(0.1) would carry the binary float's 55 digits.
        price = Decimal(str(raw).strip()) if isinstance(raw, str) else Decimal(str(raw))
    except InvalidOperation:
        f.invalid(where, here, raw, 'must be a decimal number, e.g. "0.031"')
    if not price.is_finite():
        f.invalid(where, here, raw, "must be a finite decimal number")
    if price < 0:
        f.invalid(where, here, raw, "must be greater than or equal to 0")
    return price


@dataclass(frozen=True, slots=True)
class ClusterCost:
    """What running on the member costs per hour: per CPU core, per GiB of memory, per unit of an extended
    resource. A price left out counts as 0 (that resource is free there)."""

    cpu_per_core_hour: Decimal = Decimal(0)
    memory_per_gib_hour: Decimal = Decimal(0)
    extended_per_unit_hour: Mapping[str, Decimal] = field(default_factory=dict)
    currency: str = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, path: str) -> Self:
        extended: dict[str, Decimal] = {}
        ext_path = f.join(path, "extendedPerUnitHour")
        for name in f.mapping(obj, "extendedPerUnitHour", where, path):
            if not isinstance(name, str) or not name:
                f.wrong_type(where, ext_path, "resource names", name)
            if name in ("cpu", "memory"):
                f.invalid(where, f"{ext_path}.{name}", name, "cpu and memory have their own prices")
            price = _price(f.mapping(obj, "extendedPerUnitHour", where, path), name, where, ext_path)
            extended[name] = price if price is not None else Decimal(0)
        return cls(
            cpu_per_core_hour=_price(obj, "cpuPerCoreHour", where, path) or Decimal(0),
            memory_per_gib_hour=_price(obj, "memoryPerGiBHour", where, path) or Decimal(0),
            extended_per_unit_hour=extended,
            currency=f.string(obj, "currency", where, path),
        )


@dataclass(frozen=True, slots=True)
class NodeSummaryBucket:
    """``count`` nodes that each have ``free`` (canonical units) left; ``pods`` absent means not limited;
    ``taints``: the NoSchedule and NoExecute taints they carry (a pod must tolerate each to go there)."""

    count: int
    free: Mapping[str, int]
    taints: tuple[Taint, ...] = ()

    @classmethod
    def from_dict(cls, obj: object, where: str, path: str) -> Self:
        obj = f.item_mapping(obj, where, path)
        if obj.get("count") is None:
            f.reject(where, FieldError.required(f"{path}.count"))
        count = f.integer(obj, "count", where, path)
        if count < 1:
            f.invalid(where, f"{path}.count", count, "must be greater than 0")
        taints = tuple(
            Taint.from_dict(item, where, path=f"{path}.taints[{i}]")
            for i, item in enumerate(f.sequence(obj, "taints", where, path))
        )
        for i, taint in enumerate(taints):
            if taint.effect not in ("NoSchedule", "NoExecute"):
                f.invalid(where, f"{path}.taints[{i}].effect", taint.effect, 'must be "NoSchedule" or "NoExecute"')
        return cls(count=count, free=f.resource_list(obj, "free", where, path), taints=taints)


@dataclass(frozen=True, slots=True)
class ApiEnablement:
    """One served group/version and the kinds it serves (Karmada's ``APIEnablement``)."""

    group_version: str
    kinds: tuple[str, ...]

    @classmethod
    def from_dict(cls, obj: object, where: str, path: str) -> Self:
        obj = f.item_mapping(obj, where, path)
        group_version = f.required_string(obj, "groupVersion", where, path)
        if group_version.count("/") > 1 or group_version.startswith("/") or group_version.endswith("/"):
            f.invalid(where, f"{path}.groupVersion", group_version, 'must be "<version>" or "<group>/<version>"')
        kinds: list[str] = []
        for i, item in enumerate(f.sequence(obj, "resources", where, path)):
            item_path = f"{path}.resources[{i}]"
            resource = f.item_mapping(item, where, item_path)
            kinds.append(f.required_string(resource, "kind", where, item_path))
            f.string(resource, "name", where, item_path)
        return cls(group_version=group_version, kinds=tuple(kinds))


@dataclass(frozen=True, slots=True)
class MemberClusterStatus:
    """What the member last reported. ``node_summary`` None: no per-node figures (the cheap estimate is used);
    ``api_enablements`` None: not reported (every kind is taken as served)."""

    ready: bool = False
    ready_reason: str = ""
    observed_at: float | None = None
    allocatable: Mapping[str, int] | None = None
    allocated: Mapping[str, int] | None = None
    node_summary: tuple[NodeSummaryBucket, ...] | None = None
    api_enablements: tuple[ApiEnablement, ...] | None = None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        path = "status"
        shorthand = obj.get("ready")
        if shorthand is not None and not isinstance(shorthand, bool):
            f.wrong_type(where, "status.ready", "a boolean", shorthand)
        condition_ready: bool | None = None
        reason = ""
        for i, item in enumerate(f.sequence(obj, "conditions", where, path)):
            item_path = f"{path}.conditions[{i}]"
            condition = f.item_mapping(item, where, item_path)
            kind = f.required_string(condition, "type", where, item_path)
            status = f.required_string(condition, "status", where, item_path)
            if status not in _CONDITION_STATUSES:
                f.unsupported(where, f"{item_path}.status", status, _CONDITION_STATUSES)
            f.timestamp(condition, "lastTransitionTime", where, item_path)
            if kind == "Ready":
                condition_ready = status == "True"
                reason = f.string(condition, "reason", where, item_path) or f.string(
                    condition, "message", where, item_path
                )
        if shorthand is not None and condition_ready is not None and shorthand != condition_ready:
            f.invalid(where, "status.ready", shorthand, "disagrees with the Ready condition; give one or the other")
        ready = shorthand if shorthand is not None else bool(condition_ready)
        summary = None
        if obj.get("nodeSummary") is not None:
            summary = tuple(
                NodeSummaryBucket.from_dict(item, where, f"{path}.nodeSummary[{i}]")
                for i, item in enumerate(f.sequence(obj, "nodeSummary", where, path))
            )
        apis = None
        if obj.get("apiEnablements") is not None:
            apis = tuple(
                ApiEnablement.from_dict(item, where, f"{path}.apiEnablements[{i}]")
                for i, item in enumerate(f.sequence(obj, "apiEnablements", where, path))
            )
        return cls(
            ready=ready,
            ready_reason=reason,
            observed_at=f.timestamp(obj, "observedAt", where, path),
            allocatable=f.resource_list(obj, "allocatable", where, path)
            if obj.get("allocatable") is not None
            else None,
            allocated=f.resource_list(obj, "allocated", where, path) if obj.get("allocated") is not None else None,
            node_summary=summary,
            api_enablements=apis,
        )


@dataclass(slots=True)
class MemberCluster:
    """A member cluster: its labels (``metadata.labels``), taints, cost, connection and last status."""

    metadata: ObjectMeta
    taints: tuple[Taint, ...]
    cost: ClusterCost | None
    connection: ClusterConnection | None
    status: MemberClusterStatus
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        if not isinstance(obj, Mapping):
            f.wrong_type(where, "", "a mapping", obj)
        metadata = ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind=KIND, namespaced=False)
        spec = f.mapping(obj, "spec", where, "")
        taints = spec_taints(spec, where)
        cost = (
            ClusterCost.from_dict(f.mapping(spec, "cost", where, "spec"), where, "spec.cost")
            if spec.get("cost") is not None
            else None
        )
        connection = (
            ClusterConnection.from_dict(f.mapping(spec, "connection", where, "spec"), where, "spec.connection")
            if spec.get("connection") is not None
            else None
        )
        status = MemberClusterStatus.from_dict(f.mapping(obj, "status", where, ""), where)
        return cls(metadata=metadata, taints=taints, cost=cost, connection=connection, status=status, raw=obj)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels
