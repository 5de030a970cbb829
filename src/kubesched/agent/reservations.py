"""What the cluster agent stores in its member: one ConfigMap per reservation, and fencing tokens.

Who calls it: :class:`~kubesched.agent.core.Agent` (writing them) and :class:`~kubesched.agent.view.MemberView`
(reading them from its watch). A reservation is the ConfigMap ``kubesched-reservation-<id>`` in the agent's
namespace, labelled :data:`~kubesched.federation.wire.RESERVATION_LABEL` ``=true``, with ``requests`` (canonical
JSON), ``node``, ``podUID``, ``expiresAt`` and ``createdAt``: the member itself stores it, so an agent restart (or a
second agent process) sees every reservation. The newest hub fencing token the member has seen is the ConfigMap
``kubesched-fence-<token>`` (label value ``fence``): created, never updated, so raising it is one create that
either happens or does not (docs/explanation/cross-cluster-commit.md#fencing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api import jsonwire
from kubesched.federation.wire import MANAGED_BY_LABEL, MANAGED_BY_VALUE, RESERVATION_LABEL

__all__ = [
    "CONFIGMAP_PREFIX",
    "FENCE_PREFIX",
    "Reservation",
    "fence_configmap",
    "held_by_node",
    "reservation_configmap",
    "stored_fence",
    "stored_reservation",
]

log = logging.getLogger(__name__)

CONFIGMAP_PREFIX = "kubesched-reservation-"
FENCE_PREFIX = "kubesched-fence-"
RESERVATION_KIND = "true"
FENCE_KIND = "fence"


@dataclass(frozen=True, slots=True)
class Reservation:
    id: str
    node: str
    requests: Mapping[str, int]
    expires_at: float
    pod_uid: str = ""
    created_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "node": self.node,
            "requests": dict(self.requests),
            "expiresAt": self.expires_at,
            "podUID": self.pod_uid,
            "createdAt": self.created_at,
        }


def reservation_configmap(reservation: Reservation, namespace: str) -> dict[str, Any]:
    """The ConfigMap that stores ``reservation`` in ``namespace``."""
    return {
        "metadata": {
            "name": CONFIGMAP_PREFIX + reservation.id,
            "namespace": namespace,
            "labels": {RESERVATION_LABEL: RESERVATION_KIND, MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        },
        "data": {
            "requests": jsonwire.dumps(dict(sorted(reservation.requests.items()))).decode(),
            "node": reservation.node,
            "podUID": reservation.pod_uid,
            "expiresAt": repr(reservation.expires_at),
            "createdAt": repr(reservation.created_at),
        },
    }


def stored_reservation(obj: Mapping[str, Any]) -> Reservation | None:
    """The reservation a ConfigMap stores; None for one that is not ours or is damaged (logged)."""
    name = str(obj.get("metadata", {}).get("name", ""))
    data = obj.get("data") or {}
    try:
        requests = json.loads(data["requests"])
        return Reservation(
            id=name.removeprefix(CONFIGMAP_PREFIX),
            node=str(data["node"]),
            requests={str(k): int(v) for k, v in requests.items()},
            expires_at=float(data["expiresAt"]),
            pod_uid=str(data.get("podUID", "")),
            created_at=float(data.get("createdAt", 0.0)),
        )
    except (KeyError, ValueError, TypeError, AttributeError):
        log.warning("ignoring reservation ConfigMap %s: its data is not a reservation's", name)
        return None


def fence_configmap(token: int, namespace: str) -> dict[str, Any]:
    """The ConfigMap that records fencing token ``token`` in ``namespace``."""
    return {
        "metadata": {
            "name": f"{FENCE_PREFIX}{token}",
            "namespace": namespace,
            "labels": {RESERVATION_LABEL: FENCE_KIND, MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        },
        "data": {"token": str(token)},
    }


def stored_fence(obj: Mapping[str, Any]) -> int | None:
    """The fencing token a fence ConfigMap records; None for one that is not a fence (or is damaged)."""
    metadata = obj.get("metadata") or {}
    if (metadata.get("labels") or {}).get(RESERVATION_LABEL) != FENCE_KIND:
        return None
    try:
        token = int((obj.get("data") or {})["token"])
    except (KeyError, ValueError, TypeError):
        log.warning("ignoring fence ConfigMap %s: its data is not a token", metadata.get("name"))
        return None
    return token if token >= 0 else None


def held_by_node(reservations: Iterable[Reservation]) -> dict[str, list[Mapping[str, int]]]:
    """The requests each node holds for ``reservations``, by node name."""
    held: dict[str, list[Mapping[str, int]]] = {}
    for reservation in reservations:
        held.setdefault(reservation.node, []).append(reservation.requests)
    return held
