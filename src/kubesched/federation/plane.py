"""Split a simulation's manifests into the node plane (the hub's own nodes) and the cluster plane (members).

Who calls it: :mod:`kubesched.simulation.run`. A hub that places work across clusters is its own scheduler
whose nodes are the member clusters; the hub's own nodes are another scheduler's. The simulation runs the two
planes as two schedulers, so a node profile never lands a pod on a cluster, nor a cluster profile on a node:

- **cluster plane**: one super node per MemberCluster (:func:`kubesched.federation.adapter.super_node`), the
  placeholder pods of their allocated capacity, the pending pods whose ``schedulerName`` is a cluster profile's
  and the hub pods already bound to a cluster (``spec.nodeName`` = a cluster's name: placed by the hub, not yet
  counted by the member, so in flight);
- **member objects**: Nodes labelled ``multicluster.kubesched.io/cluster: <name>`` and the pods bound to them
  belong to that member; its state is derived from them (:mod:`kubesched.federation.state`) and they leave the
  node plane;
- **node plane**: everything else, as without members.

Problems are :class:`~kubesched.errors.ManifestError` values naming the file and object: a Node labelled for a
cluster that was not loaded, a member with its own Nodes whose status also gives capacity figures, a cluster
named like a hub node (a pod's ``spec.nodeName`` would be ambiguous).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kubesched.api.manifests import LoadedManifests
from kubesched.api.multicluster import CLUSTER_LABEL, KIND, MemberCluster
from kubesched.api.objects import Node, Pod
from kubesched.clusterapi.contract import ClusterState
from kubesched.errors import FieldError, ManifestError
from kubesched.federation.adapter import allocated_pod, super_node
from kubesched.federation.state import StaticClusterStateSource, cluster_state

__all__ = ["ClusterPlane", "split_planes"]


@dataclass(slots=True)
class ClusterPlane:
    """What the cluster plane's scheduler runs on."""

    members: list[MemberCluster] = field(default_factory=list)
    states: dict[str, ClusterState] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    """One super node per member, in manifest order."""
    pods: list[Pod] = field(default_factory=list)
    """Placeholders first, then the hub pods of the plane, in manifest order."""
    source: StaticClusterStateSource = field(default_factory=lambda: StaticClusterStateSource(()))

    @property
    def cluster_names(self) -> list[str]:
        return [member.name for member in self.members]


def _where(manifests: LoadedManifests, kind: str, namespace: str, name: str) -> str:
    return manifests.origins.get((kind, namespace, name), f"{kind} {name}")


def _check_status_left_out(manifests: LoadedManifests, member: MemberCluster, count: int) -> None:
    status = member.status
    for key, value in (
        ("allocatable", status.allocatable),
        ("allocated", status.allocated),
        ("nodeSummary", status.node_summary),
    ):
        if value is not None:
            where = _where(manifests, KIND, "", member.name)
            detail = (
                f"derived from the {count} Node(s) labelled {CLUSTER_LABEL}={member.name}; "
                "describe the member by its status or by its Nodes, not both"
            )
            raise ManifestError(f"{where}: {FieldError.forbidden(f'status.{key}', detail)}")


def split_planes(manifests: LoadedManifests, cluster_profiles: frozenset[str]) -> tuple[LoadedManifests, ClusterPlane]:
    """(the node plane's manifests, the cluster plane); without MemberClusters, member Nodes and cluster-profile
    pods the node plane is ``manifests`` itself and the cluster plane is empty."""
    members = {member.name: member for member in manifests.member_clusters}
    plane_pending = [
        pod for pod in manifests.pods if not pod.spec.node_name and pod.spec.scheduler_name in cluster_profiles
    ]
    member_labelled = any(CLUSTER_LABEL in node.metadata.labels for node in manifests.nodes)
    if not members and not plane_pending and not member_labelled:
        return manifests, ClusterPlane()

    hub_nodes = {node.metadata.name for node in manifests.nodes if CLUSTER_LABEL not in node.metadata.labels}
    for name in members:
        if name in hub_nodes:
            where = _where(manifests, KIND, "", name)
            raise ManifestError(
                f"{where}: {FieldError.duplicate('metadata.name', name)}: a Node has this name too; a pod's "
                "spec.nodeName would not say which is meant"
            )

    member_nodes: dict[str, list[Node]] = {name: [] for name in members}
    node_owner: dict[str, str] = {}
    for node in manifests.nodes:
        owner = node.metadata.labels.get(CLUSTER_LABEL)
        if owner is None:
            continue
        if owner not in members:
            where = _where(manifests, "Node", "", node.metadata.name)
            problem = FieldError.not_found(f"metadata.labels.{CLUSTER_LABEL}", owner)
            raise ManifestError(f"{where}: {problem}: no MemberCluster with this name was loaded")
        member_nodes[owner].append(node)
        node_owner[node.metadata.name] = owner

    member_pods: dict[str, list[Pod]] = {name: [] for name in members}
    hub_pods: list[Pod] = []
    rest: list[Pod] = []
    for pod in manifests.pods:
        bound = pod.spec.node_name
        if bound in node_owner:
            member_pods[node_owner[bound]].append(pod)
        elif bound in members or (not bound and pod.spec.scheduler_name in cluster_profiles):
            hub_pods.append(pod)
        else:
            rest.append(pod)

    plane = ClusterPlane()
    placeholders: list[Pod] = []
    for name, member in members.items():
        nodes = member_nodes[name]
        if nodes:
            _check_status_left_out(manifests, member, len(nodes))
        state = cluster_state(member, nodes, member_pods[name])
        plane.members.append(member)
        plane.states[name] = state
        plane.nodes.append(super_node(member, state))
        placeholder = allocated_pod(state)
        if placeholder is not None:
            placeholders.append(placeholder)
    plane.pods = [*placeholders, *hub_pods]
    plane.source = StaticClusterStateSource(plane.states.values())
    node_plane = replace(
        manifests,
        nodes=[node for node in manifests.nodes if node.metadata.name not in node_owner],
        pods=rest,
        member_clusters=[],
    )
    return node_plane, plane
