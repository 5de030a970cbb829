"""A member cluster as one framework Node (the "super node"), so the framework runs unchanged on clusters.

Who calls it: :mod:`kubesched.federation.plane` for the simulation's cluster plane (and, later, the live hub's
backend, which lists MemberClusters instead of Nodes). The super node is what upstream plugins see:

- ``metadata.name`` is the cluster's name (NodeAffinity's ``matchFields: metadata.name`` picks clusters by
  name), ``metadata.labels`` the cluster's labels (region, zone, provider: ``nodeSelector`` and node affinity
  select on them), ``metadata.annotations`` its annotations (a cluster policy may read them), ``spec.taints``
  the cluster's taints (TaintToleration filters and scores on them);
- ``status.allocatable`` the cluster's allocatable, and its already-allocated capacity is the request of one
  placeholder pod bound to the super node (:func:`allocated_pod`), so NodeInfo's requested, NodeResourcesFit,
  LeastAllocated and the columnar table all count it without knowing about clusters. The placeholder counts as
  one pod, so the super node's ``pods`` allocatable is the cluster's free pod slots plus one.

The placeholder has the highest priority there is (``system-node-critical``), so no preemption ever chooses
it as a victim; it lives in :data:`~kubesched.federation.state.PLACEHOLDER_NAMESPACE` and the cluster state
lists its uid among the pods it already accounts for, so capacity overlays never count it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.multicluster import MemberCluster
from kubesched.api.objects import Node, Pod
from kubesched.api.quantity import format_quantity
from kubesched.clusterapi.contract import ClusterState
from kubesched.federation.state import PLACEHOLDER_NAMESPACE, placeholder_uid

__all__ = ["PLACEHOLDER_PRIORITY", "allocated_pod", "super_node"]

PODS = "pods"
PLACEHOLDER_PRIORITY = 2_000_001_000
"""system-node-critical's value: nothing outranks the placeholder, so preemption never evicts it."""


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in amounts.items()}


def _has_placeholder(state: ClusterState) -> bool:
    return any(state.allocated.values())


def super_node(member: MemberCluster, state: ClusterState) -> Node:
    """The framework Node standing for ``member`` (built through ``Node.from_dict``, like any Node)."""
    allocatable = dict(state.allocatable)
    if _has_placeholder(state):
        free_slots = max(allocatable.get(PODS, 0) - state.allocated.get(PODS, 0), 0)
        allocatable[PODS] = free_slots + 1
    raw: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": member.name,
            "labels": dict(member.labels),
            # What a cluster policy may read besides labels (input.cluster.metadata.annotations).
            "annotations": dict(member.metadata.annotations),
            "uid": member.metadata.uid,
        },
        "spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in member.taints]},
        "status": {"allocatable": _quantities(allocatable), "capacity": _quantities(allocatable)},
    }
    return Node.from_dict(raw, f"MemberCluster {member.name}")


def allocated_pod(state: ClusterState) -> Pod | None:
    """The placeholder pod holding ``state``'s allocated capacity on its super node; None when nothing is
    allocated there."""
    if not _has_placeholder(state):
        return None
    requests = {name: amount for name, amount in state.allocated.items() if name != PODS and amount > 0}
    name = f"{state.name}-allocated"
    raw: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": PLACEHOLDER_NAMESPACE,
            "uid": placeholder_uid(state.name),
            "annotations": {"multicluster.kubesched.io/placeholder": "allocated capacity reported by the member"},
        },
        "spec": {
            "nodeName": state.name,
            "priority": PLACEHOLDER_PRIORITY,
            "containers": [{"name": "allocated", "resources": {"requests": _quantities(requests)}}],
        },
        "status": {"phase": "Running"},
    }
    return Pod.from_dict(raw, f"placeholder pod of MemberCluster {state.name}")
