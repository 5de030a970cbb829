"""What the cluster plugins share: the cycle's cluster snapshot as Filter and Score read it, in-flight pods,
a pod's requests as a resource map, and the reasons every cluster plugin may give.

Who calls it: the plugins of :mod:`kubesched.plugins.multicluster` only.
"""

from __future__ import annotations

from collections.abc import Iterator

from kubesched.clusterapi.contract import ClusterSnapshot, ClusterState, cycle_snapshot
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo, Resource

ERR_REASON_UNKNOWN_CLUSTER = "cluster(s) had no reported state"
"""A super node the cluster state source does not know (a member removed since, or not yet observed)."""

UNKNOWN_CLUSTER = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNKNOWN_CLUSTER)

NO_SNAPSHOT = "no cluster snapshot in the cycle state: enable the plugin at preFilter (and preScore) too"


class MissingSnapshotError(RuntimeError):
    """Filter or Score ran without the PreFilter/PreScore that takes the cycle's snapshot."""


def read_snapshot(state: CycleState) -> ClusterSnapshot:
    """The cycle's snapshot, for Filter and Score; :class:`MissingSnapshotError` when nothing took it."""
    snapshot = cycle_snapshot(state)
    if snapshot is None:
        raise MissingSnapshotError(NO_SNAPSHOT)
    return snapshot


def in_flight(node_info: NodeInfo, cluster: ClusterState) -> Iterator[PodInfo]:
    """The pods bound to the super node that the cluster's reported state does not count yet, in bind order."""
    accounted = cluster.accounted_pods
    for uid, pod in node_info.pods.items():
        if uid not in accounted:
            yield pod


def running_in(snapshot: ClusterSnapshot, uid: str) -> str | None:
    """The first cluster, by name, whose reported state has a pod made for hub pod ``uid`` (None: none has)."""
    found = [name for name, cluster in snapshot.clusters.items() if uid in cluster.pod_phases]
    return min(found) if found else None


def request_items(request: Resource, ignored: frozenset[str] = frozenset()) -> dict[str, int]:
    """A pod's request as {resource: amount}, non-zero amounts only, cpu/memory/ephemeral-storage first."""
    items: dict[str, int] = {}
    for name, amount in (
        (CPU, request.milli_cpu),
        (MEMORY, request.memory),
        (EPHEMERAL_STORAGE, request.ephemeral_storage),
    ):
        if amount > 0:
            items[name] = amount
    for name, amount in request.scalar.items():
        if amount > 0 and name not in ignored:
            items[name] = amount
    return items
