"""From MemberCluster manifests to the cluster state plugins read, and the source that serves it in simulation.

Who calls it: :mod:`kubesched.federation.plane` (building a simulation's cluster plane) and tests. A member is
described one of two ways:

- by its status alone (``allocatable``, ``allocated``, optionally ``nodeSummary``): the figures are taken as
  they are;
- by its own Nodes (Node manifests labelled ``multicluster.kubesched.io/cluster: <member name>``) and the Pods
  bound to them: ``allocatable`` is the nodes' sum, ``allocated`` the running pods' requests (and their count as
  ``pods``), the node summary one bucket per distinct free capacity of the schedulable (not cordoned) nodes, and
  the pods' owners and app labels are the workloads already running there. The status must then leave
  ``allocatable``, ``allocated`` and ``nodeSummary`` out; readiness, ``observedAt`` and ``apiEnablements``
  still come from it.

:class:`StaticClusterStateSource` serves those states unchanged for the whole simulation: a state without
``observedAt`` is reported as observed at every snapshot (its member keeps reporting), one with ``observedAt``
was last heard of then, and grows stale as the simulated clock moves on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kubesched.api.multicluster import MemberCluster
from kubesched.api.objects import Node, Pod, Taint, object_uid
from kubesched.api.resources import pod_requests
from kubesched.clusterapi.contract import (
    SCHEDULING_TAINT_EFFECTS,
    ClusterSnapshot,
    ClusterState,
    NodeBucket,
    PriceList,
    WorkloadKey,
    workload_keys,
)

__all__ = [
    "PLACEHOLDER_NAMESPACE",
    "StaticClusterStateSource",
    "cluster_state",
    "count_workloads",
    "member_capacity",
    "member_workloads",
    "placed_capacity",
    "placeholder_uid",
    "running_pods",
    "scheduling_taints",
    "takes_new_pods",
]

PODS = "pods"

PLACEHOLDER_NAMESPACE = "kubesched-multicluster"
"""The namespace of the pods that stand for a member's already-allocated capacity on its super node."""

TERMINAL_PHASES = ("Succeeded", "Failed")  # a finished pod holds no capacity


def placeholder_uid(cluster: str) -> str:
    """The uid of the pod standing for ``cluster``'s allocated capacity (deterministic, like manifest uids)."""
    return object_uid("Pod", PLACEHOLDER_NAMESPACE, f"{cluster}-allocated")


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + amount


def running_pods(pods: Iterable[Pod]) -> list[Pod]:
    return [pod for pod in pods if pod.status.phase not in TERMINAL_PHASES]


def takes_new_pods(node: Node) -> bool:
    """Whether a member node may be given a new pod at all: schedulable and Ready (its taints are the pod's to
    tolerate, see :func:`scheduling_taints`). The agent binds by ``spec.nodeName``, past the member's own
    scheduler, so nothing else would keep a pod off a node that is cordoned or not ready. A node that reports no
    Ready condition (a manifest, a node no kubelet has updated) counts as ready."""
    if node.spec_unschedulable:
        return False
    conditions = (node.raw.get("status") or {}).get("conditions") or ()
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True


def scheduling_taints(node: Node) -> tuple[Taint, ...]:
    """The taints of ``node`` that keep a pod off unless it tolerates them: NoSchedule and NoExecute."""
    return tuple(taint for taint in node.taints if taint.effect in SCHEDULING_TAINT_EFFECTS)


def member_capacity(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    held: Mapping[str, Sequence[Mapping[str, int]]] | None = None,
    requests_of: Callable[[Pod], Mapping[str, int]] = pod_requests,
) -> tuple[dict[str, int], dict[str, int], tuple[NodeBucket, ...]]:
    """(allocatable, allocated, node buckets) of a member described by its own nodes and the running ``pods``
    bound to them; ``held``: per node name, the requests of reservations held there (each also takes a pod
    slot), counted as allocated like pods. ``requests_of`` is :func:`pod_requests` or a cache of it. Who calls it:
    :func:`cluster_state`; the cluster agent, whose view keeps each pod's node and requests already, calls
    :func:`placed_capacity` (the same conversion)."""
    return placed_capacity(nodes, [(pod.spec.node_name, requests_of(pod)) for pod in pods], held)


def placed_capacity(
    nodes: Sequence[Node],
    placed: Iterable[tuple[str, Mapping[str, int]]],
    held: Mapping[str, Sequence[Mapping[str, int]]] | None = None,
    open_to_pods: Callable[[Node], bool] = takes_new_pods,
    taints_of: Callable[[Node], tuple[Taint, ...]] = scheduling_taints,
) -> tuple[dict[str, int], dict[str, int], tuple[NodeBucket, ...]]:
    """:func:`member_capacity` of running pods given as (node name, requests) each; ``open_to_pods`` and
    ``taints_of`` are :func:`takes_new_pods` and :func:`scheduling_taints` or caches of them (the agent's view
    keeps both per node). Nodes are bucketed by their free capacity and their scheduling taints."""
    by_node: dict[str, list[Mapping[str, int]]] = {}
    for node_name, requests in placed:
        by_node.setdefault(node_name, []).append(requests)
    allocatable: dict[str, int] = {}
    allocated: dict[str, int] = {}
    buckets: dict[tuple[tuple[Taint, ...], tuple[tuple[str, int], ...]], int] = {}
    for node in nodes:
        _add(allocatable, node.allocatable)
        requested: dict[str, int] = {}
        on_node = by_node.get(node.metadata.name, [])
        for requests in on_node:
            _add(requested, requests)
        holds = held.get(node.metadata.name, ()) if held is not None else ()
        for hold in holds:
            _add(requested, hold)
        _add(allocated, requested)
        allocated[PODS] = allocated.get(PODS, 0) + len(on_node) + len(holds)
        if not open_to_pods(node):
            continue  # counts in the totals, takes no new pod
        free = {name: max(amount - requested.get(name, 0), 0) for name, amount in node.allocatable.items()}
        free[PODS] = max(node.allocatable.get(PODS, 0) - len(on_node) - len(holds), 0)
        key = (taints_of(node), tuple(sorted(free.items())))
        buckets[key] = buckets.get(key, 0) + 1
    allocated.setdefault(PODS, 0)
    summary = tuple(NodeBucket(count, dict(free), taints) for (taints, free), count in buckets.items())
    return allocatable, allocated, summary


def member_workloads(pods: Iterable[Pod]) -> dict[WorkloadKey, int]:
    return count_workloads(workload_keys(pod) for pod in pods)


def count_workloads(keys: Iterable[Iterable[WorkloadKey]]) -> dict[WorkloadKey, int]:
    """How many pods run of each workload, given each pod's workload keys."""
    counts: dict[WorkloadKey, int] = {}
    for pod_keys in keys:
        for key in pod_keys:
            counts[key] = counts.get(key, 0) + 1
    return counts


def _apis(member: MemberCluster) -> frozenset[str] | None:
    enablements = member.status.api_enablements
    if enablements is None:
        return None
    return frozenset(f"{entry.group_version}/{kind}" for entry in enablements for kind in entry.kinds)


def cluster_state(member: MemberCluster, nodes: Sequence[Node] = (), pods: Sequence[Pod] = ()) -> ClusterState:
    """The state of ``member``; with ``nodes`` (its own, see the module doc) and the ``pods`` bound to them, the
    capacity figures and running workloads are derived from those. The caller has checked that the status then
    gives no figures of its own."""
    status = member.status
    running = running_pods(pods)
    if nodes:
        allocatable, allocated, buckets = member_capacity(nodes, running)
        node_buckets: tuple[NodeBucket, ...] | None = buckets
    else:
        allocatable = dict(status.allocatable or {})
        allocated = dict(status.allocated or {})
        node_buckets = (
            tuple(NodeBucket(bucket.count, dict(bucket.free), bucket.taints) for bucket in status.node_summary)
            if status.node_summary is not None
            else None
        )
    cost = member.cost
    prices = (
        PriceList(cost.cpu_per_core_hour, cost.memory_per_gib_hour, dict(cost.extended_per_unit_hour))
        if cost is not None
        else None
    )
    return ClusterState(
        name=member.name,
        ready=status.ready,
        ready_reason=status.ready_reason,
        observed_at=status.observed_at,
        allocatable=allocatable,
        allocated=allocated,
        nodes=node_buckets,
        apis=_apis(member),
        prices=prices,
        workloads=member_workloads(running),
        accounted_pods=frozenset({placeholder_uid(member.name)}),
    )


class StaticClusterStateSource:
    """A :class:`~kubesched.clusterapi.contract.ClusterStateSource` over fixed states (simulation, tests)."""

    def __init__(self, states: Iterable[ClusterState]) -> None:
        self._states: dict[str, ClusterState] = {state.name: state for state in states}

    @property
    def states(self) -> Mapping[str, ClusterState]:
        return self._states

    def snapshot(self, now: float) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=now, clusters=self._states)
