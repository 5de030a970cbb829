"""The in-tree registry and names: every kube-scheduler v1.33 default plugin is registered (built or
planned) with upstream's extension points, built ones construct and report their name, and the config
loader accepts the default configuration with them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubesched.config.defaults import DEFAULT_PLUGINS
from kubesched.config.loader import default_config
from kubesched.errors import ValidationFailed
from kubesched.framework.runtime.registry import PluginRegistration
from kubesched.plugins import names
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.framework_helpers import PluginHandle

UPSTREAM_POINTS = {
    names.SCHEDULING_GATES: {"preEnqueue"},
    names.PRIORITY_SORT: {"queueSort"},
    names.NODE_UNSCHEDULABLE: {"filter"},
    names.NODE_NAME: {"filter"},
    names.TAINT_TOLERATION: {"filter", "preScore", "score"},
    names.NODE_AFFINITY: {"preFilter", "filter", "preScore", "score"},
    names.NODE_PORTS: {"preFilter", "filter"},
    names.NODE_RESOURCES_FIT: {"preFilter", "filter", "preScore", "score"},
    names.VOLUME_RESTRICTIONS: {"preFilter", "filter"},
    names.NODE_VOLUME_LIMITS: {"preFilter", "filter"},
    names.VOLUME_BINDING: {"preFilter", "filter", "reserve", "preBind", "preScore", "score"},
    names.VOLUME_ZONE: {"preFilter", "filter"},
    names.POD_TOPOLOGY_SPREAD: {"preFilter", "filter", "preScore", "score"},
    names.INTER_POD_AFFINITY: {"preFilter", "filter", "preScore", "score"},
    names.DYNAMIC_RESOURCES: {"preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind"},
    names.DEFAULT_PREEMPTION: {"preEnqueue", "postFilter"},
    names.NODE_RESOURCES_BALANCED_ALLOCATION: {"preScore", "score"},
    names.IMAGE_LOCALITY: {"score"},
    names.DEFAULT_BINDER: {"bind"},
}


def test_names_are_the_v1_35_default_set_in_its_order() -> None:
    assert len(names.ALL) == len(set(names.ALL)) == 19
    assert [name for name, _ in DEFAULT_PLUGINS] == list(names.ALL)


def test_registry_keys_are_the_names() -> None:
    registry = in_tree_registry()
    assert list(registry) == [*names.ALL, *names.KUBESCHED, *names.MULTICLUSTER]
    assert all(registration.name == name for name, registration in registry.items())


@pytest.mark.parametrize(("name", "points"), sorted(UPSTREAM_POINTS.items()))
def test_extension_points_are_upstreams(name: str, points: set[str]) -> None:
    assert in_tree_registry()[name].extension_points == frozenset(points)


@pytest.mark.parametrize(
    "registration",
    [
        pytest.param(r, id=r.name)
        for r in in_tree_registry().values()
        if r.implemented and r.name in (*names.ALL, *names.MULTICLUSTER)
    ],
)
def test_built_plugins_construct_with_default_args(registration: PluginRegistration) -> None:
    assert registration.factory is not None
    args = registration.args_type() if registration.args_type is not None else None
    plugin = registration.factory(args, PluginHandle())
    assert plugin.name == registration.name


def test_default_config_loads_with_the_in_tree_registry() -> None:
    config = default_config(in_tree_registry())
    profile = config.profiles[0]
    assert [ref.name for ref in profile.plugins["filter"]] == [
        names.NODE_UNSCHEDULABLE,
        names.NODE_NAME,
        names.TAINT_TOLERATION,
        names.NODE_AFFINITY,
        names.NODE_PORTS,
        names.NODE_RESOURCES_FIT,
        names.VOLUME_RESTRICTIONS,
        names.NODE_VOLUME_LIMITS,
        names.VOLUME_BINDING,
        names.VOLUME_ZONE,
        names.POD_TOPOLOGY_SPREAD,
        names.INTER_POD_AFFINITY,
        names.DYNAMIC_RESOURCES,
    ]
    # v1.35 puts DynamicResources before DefaultPreemption.
    assert [ref.name for ref in profile.plugins["postFilter"]] == [names.DYNAMIC_RESOURCES, names.DEFAULT_PREEMPTION]
    assert {ref.name: ref.weight for ref in profile.plugins["score"]} == {
        names.TAINT_TOLERATION: 3,
        names.NODE_AFFINITY: 2,
        names.NODE_RESOURCES_FIT: 1,
        # Implicit weight 1, as upstream; its PreScore skips without the StorageCapacityScoring gate.
        names.VOLUME_BINDING: 1,
        names.POD_TOPOLOGY_SPREAD: 2,
        names.INTER_POD_AFFINITY: 2,
        names.NODE_RESOURCES_BALANCED_ALLOCATION: 1,
        names.IMAGE_LOCALITY: 1,
    }


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
KUBESCHED_ARGS: dict[str, dict[str, object]] = {
    names.SECURITY_AUDIT_FILTER: {"policies": (str(EXAMPLES / "policies"),)},
    names.SECURITY_AUDIT_PERMIT: {"policies": (str(EXAMPLES / "policies"),)},
    names.COMPLIANCE_SCORE: {"compliance_data_path": str(EXAMPLES / "compliance.json")},
}


@pytest.mark.parametrize("name", names.KUBESCHED)
def test_kubesched_plugins_need_their_files_and_construct_with_them(name: str) -> None:
    registration = in_tree_registry()[name]
    assert registration.factory is not None and registration.args_type is not None
    with pytest.raises(ValidationFailed):
        registration.factory(registration.args_type(), PluginHandle())
    handle = PluginHandle()
    plugin = registration.factory(registration.args_type(**KUBESCHED_ARGS[name]), handle)
    assert plugin.name == name
    asyncio.run(handle.aclose())  # the policy engine the plugin asked for
