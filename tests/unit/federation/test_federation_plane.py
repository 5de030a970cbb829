"""Splitting a simulation's manifests into its node plane and its cluster plane, the mistakes refused there, which
profiles are cluster profiles, and the FailedScheduling wording of a cluster scheduler."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kubesched.api.manifests import LoadedManifests, load_manifest_text
from kubesched.config.loader import load_config_dict
from kubesched.errors import ManifestError
from kubesched.federation.plane import split_planes
from kubesched.federation.profiles import cluster_profiles
from kubesched.federation.state import placeholder_uid
from kubesched.framework.status import Code, Status
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS, Diagnosis, RejectedNodes, fit_error_message
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.multicluster_builders import make_member

CLUSTER_LABEL = "multicluster.kubesched.io/cluster"
MC = "multicluster-scheduler"


def manifests(*objects: dict[str, Any]) -> LoadedManifests:
    return load_manifest_text(yaml.safe_dump_all(objects), "m.yaml")


def test_members_hub_pods_and_member_objects_go_to_their_planes() -> None:
    loaded = manifests(
        make_node("hub-1").raw(),
        make_member("east").allocated(cpu="2").raw(),
        make_member("south").without_figures().raw(),
        make_node("south-1").label(CLUSTER_LABEL, "south").allocatable(cpu="8", pods="110").raw(),
        make_pod("member-pod").req(cpu="1").node_name("south-1").raw(),
        make_pod("hub-pending").scheduler(MC).raw(),
        make_pod("hub-placed").node_name("east").raw(),
        make_pod("node-pending").raw(),
        make_pod("node-bound").node_name("hub-1").raw(),
    )
    node_plane, plane = split_planes(loaded, frozenset({MC}))
    assert [n.metadata.name for n in node_plane.nodes] == ["hub-1"]
    assert [p.name for p in node_plane.pods] == ["node-pending", "node-bound"]
    assert node_plane.member_clusters == []
    assert plane.cluster_names == ["east", "south"]
    assert [n.metadata.name for n in plane.nodes] == ["east", "south"]
    # east's placeholder (south's allocation comes from its member pod: a placeholder too), then the hub pods.
    assert [p.metadata.uid for p in plane.pods[:2]] == [placeholder_uid("east"), placeholder_uid("south")]
    assert [p.name for p in plane.pods[2:]] == ["hub-pending", "hub-placed"]
    assert plane.states["south"].allocated == {"cpu": 1000, "pods": 1}
    assert plane.source.snapshot(0.0).clusters.keys() == {"east", "south"}


def test_without_members_or_cluster_pods_the_manifests_are_the_node_plane() -> None:
    loaded = manifests(make_node("n").raw(), make_pod("p").raw())
    node_plane, plane = split_planes(loaded, frozenset({MC}))
    assert node_plane is loaded and plane.members == [] and plane.pods == []


def test_cluster_pods_without_members_make_an_empty_cluster_plane() -> None:
    loaded = manifests(make_pod("p").scheduler(MC).raw())
    node_plane, plane = split_planes(loaded, frozenset({MC}))
    assert node_plane.pods == [] and [p.name for p in plane.pods] == ["p"] and plane.nodes == []


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        pytest.param(
            [make_node("x").label(CLUSTER_LABEL, "nowhere").raw()],
            f'm.yaml: Node x: metadata.labels.{CLUSTER_LABEL}: Not found: "nowhere": no MemberCluster with this name '
            "was loaded",
            id="node-of-an-unknown-member",
        ),
        pytest.param(
            [make_member("south").raw(), make_node("s1").label(CLUSTER_LABEL, "south").raw()],
            f"m.yaml: MemberCluster south: status.allocatable: Forbidden: derived from the 1 Node(s) labelled "
            f"{CLUSTER_LABEL}=south; describe the member by its status or by its Nodes, not both",
            id="status-figures-beside-own-nodes",
        ),
        pytest.param(
            [
                make_member("south").without_figures().nodes(1, cpu="1").raw(),
                make_node("s1").label(CLUSTER_LABEL, "south").raw(),
            ],
            f"m.yaml: MemberCluster south: status.nodeSummary: Forbidden: derived from the 1 Node(s) labelled "
            f"{CLUSTER_LABEL}=south; describe the member by its status or by its Nodes, not both",
            id="node-summary-beside-own-nodes",
        ),
        pytest.param(
            [make_member("same").raw(), make_node("same").raw()],
            'm.yaml: MemberCluster same: metadata.name: Duplicate value: "same": a Node has this name too; a pod\'s '
            "spec.nodeName would not say which is meant",
            id="cluster-named-like-a-hub-node",
        ),
    ],
)
def test_mistakes_are_refused_naming_the_file_and_object(objects: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        split_planes(manifests(*objects), frozenset({MC}))
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("plugins", "is_cluster"),
    [
        pytest.param("score: {enabled: [{name: ClusterCost}]}", True, id="a-cluster-score-plugin"),
        pytest.param("filter: {enabled: [{name: ClusterReadiness}]}", True, id="a-cluster-filter-plugin"),
        pytest.param("filter: {enabled: [{name: NodeResourcesFit}]}", False, id="only-node-plugins"),
    ],
)
def test_a_profile_enabling_any_cluster_plugin_is_a_cluster_profile(plugins: str, is_cluster: bool) -> None:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler"}, {"schedulerName": MC, "plugins": yaml.safe_load(plugins)}],
    }
    config = load_config_dict(document, "config.yaml", in_tree_registry())
    assert cluster_profiles(config) == (frozenset({MC}) if is_cluster else frozenset())


def _diagnosis(**statuses: Status) -> Diagnosis:
    return Diagnosis(node_to_status=RejectedNodes(statuses))


@pytest.mark.parametrize(
    ("num", "diagnosis", "message"),
    [
        pytest.param(
            3,
            _diagnosis(
                a=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)"),
                b=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "cluster(s) were not ready"),
                c=Status(Code.UNSCHEDULABLE, "Insufficient cpu"),
            ),
            "0/3 clusters are available: 1 Insufficient cpu, 1 cluster(s) had untolerated taint(s), "
            "1 cluster(s) were not ready.",
            id="upstream-node-reasons-read-as-cluster-reasons",
        ),
        pytest.param(
            2,
            _diagnosis(
                a=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "cluster(s) were not ready"),
                b=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were not ready"),
            ),
            "0/2 clusters are available: 2 cluster(s) were not ready.",
            id="the-same-reason-either-way-is-counted-once",
        ),
        pytest.param(0, Diagnosis(), "no clusters available to schedule pods", id="no-clusters"),
    ],
)
def test_a_cluster_schedulers_message_counts_clusters(num: int, diagnosis: Diagnosis, message: str) -> None:
    assert fit_error_message(num, diagnosis, TARGET_CLUSTERS) == message


def test_a_node_schedulers_message_is_unchanged() -> None:
    diagnosis = _diagnosis(a=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)"))
    assert fit_error_message(1, diagnosis) == "0/1 nodes are available: 1 node(s) had untolerated taint(s)."
