"""The cluster agent's wire format: paths, labels, and ClusterState / reservation requests as JSON.

Who calls it: the agent (:mod:`kubesched.agent.server`, which writes these shapes) and the hub's agent client
(:mod:`kubesched.federation.agent_client`, which reads them), so the two sides share one definition. Amounts
are canonical integers (milli-CPU, bytes, counts) on the way out; a reservation request may also give
Kubernetes quantity strings (``"500m"``, ``"1Gi"``), which are converted here. ``observedAt`` and
``expiresAt`` are seconds since the epoch (floats), on the agent's clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Taint, Toleration
from kubesched.api.quantity import to_canonical
from kubesched.clusterapi.contract import SCHEDULING_TAINT_EFFECTS, ClusterState, NodeBucket, WorkloadKey
from kubesched.errors import KubeschedError

__all__ = [
    "API_VERSION_PREFIX",
    "BIND_PATH",
    "FENCED_REASON",
    "FENCING_TOKEN_HEADER",
    "HUB_PODS_PATH",
    "HUB_POD_UID_ANNOTATION",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "PODS_PATH",
    "RESERVATIONS_PATH",
    "RESERVATION_ANNOTATION",
    "RESERVATION_ID_PATTERN",
    "RESERVATION_LABEL",
    "STATE_PATH",
    "ReservationRequest",
    "WireError",
    "parse_requests",
    "reservation_request_from_json",
    "state_from_json",
    "state_to_json",
]

API_VERSION_PREFIX = "/v1"
STATE_PATH = f"{API_VERSION_PREFIX}/state"
RESERVATIONS_PATH = f"{API_VERSION_PREFIX}/reservations"
BIND_PATH = f"{API_VERSION_PREFIX}/bind"
PODS_PATH = f"{API_VERSION_PREFIX}/pods"
HUB_PODS_PATH = f"{API_VERSION_PREFIX}/hubpods"

FENCING_TOKEN_HEADER = "Kubesched-Fencing-Token"
"""The hub's fencing token on every mutating call (docs/explanation/cross-cluster-commit.md#fencing)."""
FENCED_REASON = "Fenced"
"""The reason of the agent's ``409`` to a fencing token older than the newest its member has seen."""

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "kubesched"
RESERVATION_LABEL = "multicluster.kubesched.io/reservation"
"""On the ConfigMaps the agent stores in the member (value ``"true"`` for a reservation, ``"fence"`` for a fencing
token), so one watch finds them all."""
RESERVATION_ANNOTATION = "multicluster.kubesched.io/reservation-id"
"""On a pod the agent created: the reservation it consumed (what makes bind idempotent)."""
HUB_POD_UID_ANNOTATION = "multicluster.kubesched.io/hub-pod-uid"
"""On a pod the agent created: the uid of the hub pod it stands for (reported back as accounted)."""

# A reservation id becomes part of a ConfigMap name: a DNS label, so any id the hub derives fits.
RESERVATION_ID_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_TTL_SECONDS = 3600.0


class WireError(KubeschedError):
    """A request or answer that does not have the agent's shape (the message names the field)."""


def _amounts(obj: object, where: str) -> dict[str, int]:
    if not isinstance(obj, Mapping):
        raise WireError(f"{where}: must be an object of resource name to amount")
    out: dict[str, int] = {}
    for name, amount in obj.items():
        if not isinstance(name, str) or isinstance(amount, bool) or not isinstance(amount, int):
            raise WireError(f"{where}.{name}: must be an integer amount")
        out[name] = amount
    return out


def parse_requests(obj: object, where: str = "requests") -> dict[str, int]:
    """Resource requests given as canonical integers or as quantity strings; each must be non-negative."""
    if not isinstance(obj, Mapping):
        raise WireError(f"{where}: must be an object of resource name to quantity")
    out: dict[str, int] = {}
    for name, amount in obj.items():
        if not isinstance(name, str) or not name:
            raise WireError(f"{where}: resource names must be non-empty strings")
        if isinstance(amount, bool) or not isinstance(amount, int | str):
            raise WireError(f"{where}.{name}: must be an integer or a quantity string")
        try:
            value = amount if isinstance(amount, int) else to_canonical(name, amount)
        except (KubeschedError, ValueError) as error:
            raise WireError(f"{where}.{name}: {error}") from error
        if value < 0:
            raise WireError(f"{where}.{name}: must not be negative")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class ReservationRequest:
    """``POST /v1/reservations``: hold ``requests`` (canonical) for ``ttl_seconds`` under ``id``."""

    id: str
    requests: Mapping[str, int]
    ttl_seconds: float
    pod_uid: str = ""
    tolerations: tuple[Toleration, ...] = ()
    """The pod's: a node whose NoSchedule/NoExecute taints they all tolerate may hold the reservation."""

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "requests": dict(self.requests), "ttlSeconds": self.ttl_seconds}
        if self.pod_uid:
            body["podUID"] = self.pod_uid
        if self.tolerations:
            body["tolerations"] = [toleration_to_json(t) for t in self.tolerations]
        return body


def toleration_to_json(toleration: Toleration) -> dict[str, Any]:
    """A toleration as the Kubernetes API writes it (empty fields left out)."""
    body: dict[str, Any] = {"operator": toleration.operator}
    for name, value in (("key", toleration.key), ("value", toleration.value), ("effect", toleration.effect)):
        if value:
            body[name] = value
    if toleration.toleration_seconds is not None:
        body["tolerationSeconds"] = toleration.toleration_seconds
    return body


def reservation_request_from_json(body: object) -> ReservationRequest:
    if not isinstance(body, Mapping):
        raise WireError("the body must be a JSON object")
    rid = body.get("id")
    if not isinstance(rid, str) or not RESERVATION_ID_PATTERN.match(rid):
        raise WireError("id: must be a DNS label (lower-case letters, digits and '-', at most 63 characters)")
    ttl = body.get("ttlSeconds")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise WireError(f"ttlSeconds: must be a number in (0, {MAX_TTL_SECONDS:g}]")
    pod_uid = body.get("podUID", "")
    if not isinstance(pod_uid, str):
        raise WireError("podUID: must be a string")
    listed = body.get("tolerations", [])
    if not isinstance(listed, list):
        raise WireError("tolerations: must be a list")
    try:
        tolerations = tuple(
            Toleration.from_dict(item, "the reservation", path=f"tolerations[{i}]") for i, item in enumerate(listed)
        )
    except KubeschedError as error:
        raise WireError(str(error)) from None
    return ReservationRequest(rid, parse_requests(body.get("requests", {})), float(ttl), pod_uid, tolerations)


def state_to_json(state: ClusterState, reservations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``GET /v1/state``'s answer; ``reservations`` (already counted in ``allocated`` and ``nodes``) for people."""
    body: dict[str, Any] = {
        "name": state.name,
        "ready": state.ready,
        "readyReason": state.ready_reason,
        "observedAt": state.observed_at,
        "allocatable": dict(state.allocatable),
        "allocated": dict(state.allocated),
        "nodes": None if state.nodes is None else [_bucket_to_json(bucket) for bucket in state.nodes],
        "apis": None if state.apis is None else sorted(state.apis),
        "workloads": [{"key": list(key), "count": count} for key, count in state.workloads.items()],
        "accountedPods": sorted(state.accounted_pods),
        "podPhases": dict(sorted(state.pod_phases.items())),
        "podNames": dict(sorted(state.pod_names.items())),
    }
    if reservations is not None:
        body["reservations"] = reservations
    return body


def taint_to_json(taint: Taint) -> dict[str, str]:
    """A taint as the Kubernetes API writes it (a node bucket's, on the wire and in MemberCluster status)."""
    return {"key": taint.key, "value": taint.value, "effect": taint.effect}


def _bucket_to_json(bucket: NodeBucket) -> dict[str, Any]:
    body: dict[str, Any] = {"count": bucket.count, "free": dict(bucket.free)}
    if bucket.taints:
        body["taints"] = [taint_to_json(taint) for taint in bucket.taints]
    return body


def _taints(obj: object, where: str) -> tuple[Taint, ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list):
        raise WireError(f"{where}: must be a list")
    taints = []
    for i, item in enumerate(obj):
        fields = item if isinstance(item, Mapping) else {}
        key, value, effect = fields.get("key"), fields.get("value", ""), fields.get("effect")
        if not (isinstance(key, str) and key and isinstance(value, str) and effect in SCHEDULING_TAINT_EFFECTS):
            raise WireError(f"{where}[{i}]: must be a taint (key, value, effect NoSchedule or NoExecute)")
        taints.append(Taint(key, value, str(effect)))
    return tuple(taints)


def _workload_key(obj: object, where: str) -> WorkloadKey:
    if not isinstance(obj, list) or not all(isinstance(part, str) for part in obj):
        raise WireError(f"{where}: must be a list of strings")
    if len(obj) == 4 and obj[0] == "owner":
        return ("owner", obj[1], obj[2], obj[3])
    if len(obj) == 3 and obj[0] == "app":
        return ("app", obj[1], obj[2])
    raise WireError(f"{where}: must be [owner, namespace, kind, name] or [app, namespace, value]")


def state_from_json(body: object, name: str, generation: int = 0) -> ClusterState:
    """The ClusterState an agent's ``GET /v1/state`` answer describes, named ``name`` as the hub knows it."""
    if not isinstance(body, Mapping):
        raise WireError("state: must be a JSON object")
    ready = body.get("ready")
    observed = body.get("observedAt")
    if not isinstance(ready, bool):
        raise WireError("state.ready: must be a boolean")
    if observed is not None and (isinstance(observed, bool) or not isinstance(observed, int | float)):
        raise WireError("state.observedAt: must be seconds since the epoch")
    nodes_raw = body.get("nodes")
    nodes: tuple[NodeBucket, ...] | None = None
    if nodes_raw is not None:
        if not isinstance(nodes_raw, list):
            raise WireError("state.nodes: must be a list")
        buckets = []
        for i, item in enumerate(nodes_raw):
            if (
                not isinstance(item, Mapping)
                or isinstance(item.get("count"), bool)
                or not isinstance(item.get("count"), int)
            ):
                raise WireError(f"state.nodes[{i}].count: must be an integer")
            free = _amounts(item.get("free", {}), f"state.nodes[{i}].free")
            buckets.append(NodeBucket(item["count"], free, _taints(item.get("taints"), f"state.nodes[{i}].taints")))
        nodes = tuple(buckets)
    apis_raw = body.get("apis")
    if apis_raw is not None and (not isinstance(apis_raw, list) or not all(isinstance(a, str) for a in apis_raw)):
        raise WireError("state.apis: must be a list of strings")
    workloads: dict[WorkloadKey, int] = {}
    workloads_raw = body.get("workloads", [])
    if not isinstance(workloads_raw, list):
        raise WireError("state.workloads: must be a list")
    for i, item in enumerate(workloads_raw):
        if (
            not isinstance(item, Mapping)
            or isinstance(item.get("count"), bool)
            or not isinstance(item.get("count"), int)
        ):
            raise WireError(f"state.workloads[{i}].count: must be an integer")
        workloads[_workload_key(item.get("key"), f"state.workloads[{i}].key")] = item["count"]
    accounted = body.get("accountedPods", [])
    if not isinstance(accounted, list) or not all(isinstance(uid, str) for uid in accounted):
        raise WireError("state.accountedPods: must be a list of strings")
    phases = body.get("podPhases", {})  # an agent before phases were reported sends none
    if not isinstance(phases, Mapping) or not all(isinstance(phase, str) for phase in phases.values()):
        raise WireError("state.podPhases: must be an object of hub pod uid -> phase")
    names = body.get("podNames", {})
    if not isinstance(names, Mapping) or not all(isinstance(name, str) for name in names.values()):
        raise WireError("state.podNames: must be an object of hub pod uid -> namespace/name")
    reason = body.get("readyReason", "")
    return ClusterState(
        name=name,
        ready=ready,
        ready_reason=reason if isinstance(reason, str) else "",
        observed_at=None if observed is None else float(observed),
        allocatable=_amounts(body.get("allocatable", {}), "state.allocatable"),
        allocated=_amounts(body.get("allocated", {}), "state.allocated"),
        nodes=nodes,
        apis=None if apis_raw is None else frozenset(apis_raw),
        workloads=workloads,
        accounted_pods=frozenset(accounted),
        pod_phases=dict(phases),
        pod_names=dict(names),
        generation=generation,
    )
