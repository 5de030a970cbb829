"""The commit record on a hub pod: which member a hub is committing the pod to, under which reservation.

Who calls it: ClusterBind writes the record (compare-and-set on the hub pod's
:data:`COMMIT_ANNOTATION`) before it asks the member to create the pod; ClusterReservation reads it at PreFilter
to settle an open commit -- one a restarted or newly elected hub did not finish -- before the pod may go anywhere,
and to continue the pod's attempt numbers. The member pod is what says the commit happened; this record says
where to ask (docs/explanation/cross-cluster-commit.md#the-records).
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass

from kubesched.api.objects import Pod

__all__ = ["COMMIT_ANNOTATION", "CommitIntent", "read_intent"]

log = logging.getLogger(__name__)

COMMIT_ANNOTATION = "multicluster.kubesched.io/commit"


@dataclass(frozen=True, slots=True)
class CommitIntent:
    """A hub's commit of the pod to ``cluster`` under ``reservation`` (its ``attempt``-th attempt)."""

    cluster: str
    reservation: str
    attempt: int

    def text(self) -> str:
        """The annotation's value (compact JSON, keys sorted)."""
        return json.dumps(
            {"attempt": self.attempt, "cluster": self.cluster, "reservation": self.reservation},
            separators=(",", ":"),
            sort_keys=True,
        )


def read_intent(pod: Pod) -> CommitIntent | None:
    """The commit record on ``pod``; None without one, or for one that does not parse (logged)."""
    text = pod.metadata.annotations.get(COMMIT_ANNOTATION)
    if not text:
        return None
    intent = _parsed(text)
    if intent is None:
        log.warning("pod %s: annotation %s is not a commit record: %.200s", pod.key, COMMIT_ANNOTATION, text)
    return intent


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> CommitIntent | None:
    try:
        fields = json.loads(text)
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    cluster, reservation, attempt = fields.get("cluster"), fields.get("reservation"), fields.get("attempt")
    if not (isinstance(cluster, str) and cluster and isinstance(reservation, str) and reservation):
        return None
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        return None
    return CommitIntent(cluster, reservation, attempt)
