"""split_by_plane: ``kubesched run`` schedules node profiles and cluster profiles with a scheduler each."""

from __future__ import annotations

from typing import Any

from kubesched.config.loader import load_config_dict
from kubesched.federation.profiles import split_by_plane
from kubesched.plugins.registry import in_tree_registry

CLUSTER_PROFILE = {
    "schedulerName": "hub",
    "plugins": {
        "multiPoint": {
            "disabled": [{"name": "*"}],
            "enabled": [{"name": "PrioritySort"}, {"name": "ClusterReadiness"}, {"name": "ClusterBind"}],
        }
    },
}


def _config(*profiles: dict[str, Any]) -> Any:
    document = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    return load_config_dict({**document, "profiles": list(profiles)}, "test", in_tree_registry())


def test_each_side_gets_its_profiles() -> None:
    config = _config({"schedulerName": "default-scheduler"}, CLUSTER_PROFILE)
    nodes, clusters = split_by_plane(config)
    assert nodes is not None and clusters is not None
    assert [p.scheduler_name for p in nodes.profiles] == ["default-scheduler"]
    assert [p.scheduler_name for p in clusters.profiles] == ["hub"]
    assert nodes.client_connection == clusters.client_connection == config.client_connection


def test_a_side_without_profiles_is_none_and_the_other_is_the_config_itself() -> None:
    config = _config(CLUSTER_PROFILE)
    assert split_by_plane(config) == (None, config)
    node_only = _config({"schedulerName": "default-scheduler"})
    assert split_by_plane(node_only) == (node_only, None)
