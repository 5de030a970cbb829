"""InterPodAffinity queueing hints against upstream's plugin_test.go (Test_isSchedulableAfterPodChange,
Test_isSchedulableAfterNodeChange), its registered events, its args (defaults and ValidateInterPodAffinityArgs)
and its place in the default profile."""

from __future__ import annotations

from typing import Any

import pytest
from ipatest_helpers import pod, term

from kubesched.api.objects import Node, Pod
from kubesched.config.args_decode import decode_args
from kubesched.config.loader import default_config
from kubesched.errors import ValidationFailed
from kubesched.framework.events import ActionType, EventResource, QueueingHint
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
SCAN = ["securityscan", "value2"]
AFFINITY_POD = pod("p", affinity=[term("service", "In", "region", SCAN)])
ANTI_POD = pod("p", anti=[term("service", "In", "region", SCAN)])
MULTI_POD = pod("p", affinity=[term("aaa", "Exists", "hostname"), term("bbb", "Exists", "hostname")])


def other(labels: dict[str, str], *, node: str = "fake-node", nominated: str = "") -> Pod:
    builder = make_pod("other").labels(labels)
    if node:
        builder.node_name(node)
    if nominated:
        builder.nominated(nominated)
    return builder.obj()


SECURITYSCAN = {"service": "securityscan"}


@pytest.mark.parametrize(
    ("target", "old", "new", "want"),
    [
        pytest.param(AFFINITY_POD, None, other(SECURITYSCAN), QUEUE, id="add-pod-matching-affinity"),
        pytest.param(AFFINITY_POD, None, other(SECURITYSCAN, node=""), SKIP, id="add-unscheduled-pod"),
        pytest.param(
            AFFINITY_POD, None, other(SECURITYSCAN, node="", nominated="fake-node"), QUEUE, id="add-nominated-pod"
        ),
        pytest.param(
            AFFINITY_POD,
            other(SECURITYSCAN, node=""),
            other(SECURITYSCAN, node="", nominated="fake-node"),
            QUEUE,
            id="update-unscheduled-to-nominated",
        ),
        pytest.param(
            AFFINITY_POD,
            other(SECURITYSCAN, node="", nominated="fake-node"),
            other(SECURITYSCAN, node=""),
            SKIP,
            id="update-nominated-to-unscheduled",
        ),
        pytest.param(AFFINITY_POD, None, other({"aaa": "a"}), SKIP, id="add-pod-not-matching"),
        pytest.param(AFFINITY_POD, other({"aaa": "a"}), other(SECURITYSCAN), QUEUE, id="update-to-match"),
        pytest.param(
            AFFINITY_POD, other({"service": "value2"}), other(SECURITYSCAN), SKIP, id="matches-before-and-after"
        ),
        pytest.param(
            AFFINITY_POD, other(SECURITYSCAN, node=""), other(SECURITYSCAN, node=""), SKIP, id="update-unscheduled"
        ),
        pytest.param(AFFINITY_POD, other(SECURITYSCAN), other({"aaa": "a"}), SKIP, id="update-match-to-non-match"),
        pytest.param(MULTI_POD, other({"aaa": "a"}), other(SECURITYSCAN), SKIP, id="multiple-terms-match-to-non-match"),
        pytest.param(
            MULTI_POD, other({"aaa": "a"}), other({"aaa": "", "bbb": ""}), QUEUE, id="multiple-terms-non-match-to-match"
        ),
        pytest.param(ANTI_POD, other(SECURITYSCAN), other({"service": "aaaa"}), QUEUE, id="anti-match-to-non-match"),
        pytest.param(ANTI_POD, other({"service": "bbb"}), other(SECURITYSCAN), SKIP, id="anti-non-match-to-match"),
        pytest.param(ANTI_POD, other({"aaa": "a"}), None, SKIP, id="delete-pod-not-matching-anti"),
        pytest.param(ANTI_POD, other(SECURITYSCAN), None, QUEUE, id="delete-pod-matching-anti"),
    ],
)
def test_is_schedulable_after_pod_change(target: Pod, old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    plugin = InterPodAffinity(None, PluginHandle())
    assert plugin.is_schedulable_after_pod_change(target, old, new) is want


def n(labels: dict[str, str]) -> Node:
    return make_node("node-a").labels(labels).obj()


ZONE_AFFINITY = pod("p", affinity=[term("service", "In", "zone", SCAN)])
REGION_AFFINITY = pod("p", affinity=[term("service", "In", "region", SCAN)])
ZONE_ANTI = (
    make_pod("p")
    .pod_affinity_term({"labelSelector": {"matchLabels": {"another": "label"}}, "topologyKey": "zone"}, anti=True)
    .obj()
)


@pytest.mark.parametrize(
    ("target", "old", "new", "want"),
    [
        pytest.param(ZONE_AFFINITY, None, n({"zone": "zone1"}), QUEUE, id="add-node-with-affinity-key"),
        pytest.param(REGION_AFFINITY, None, n({"zone": "zone1"}), SKIP, id="add-node-without-affinity-key"),
        pytest.param(ZONE_AFFINITY, n({"aaa": "a"}), n({"aaa": "b"}), SKIP, id="update-unrelated-label"),
        pytest.param(
            ZONE_AFFINITY,
            n({"zone": "zone1"}),
            n({"zone": "zone1", "unrelated-label": "unrelated"}),
            SKIP,
            id="add-unrelated-label",
        ),
        pytest.param(ZONE_AFFINITY, n({"zone": "zone1"}), n({"zone": "zone2"}), QUEUE, id="affinity-domain-changed"),
        pytest.param(ZONE_AFFINITY, n({"aaa": "a"}), n({"zone": "zone1"}), QUEUE, id="gains-affinity-key"),
        pytest.param(ZONE_ANTI, None, n({"zone": "zone1"}), QUEUE, id="add-node-with-anti-affinity-key"),
        pytest.param(ZONE_ANTI, None, n({}), QUEUE, id="add-node-without-anti-affinity-key"),
        pytest.param(
            ZONE_ANTI,
            n({"zone": "zone1"}),
            n({"zone": "zone1", "unrelated-label": "unrelated"}),
            SKIP,
            id="anti-unrelated-label",
        ),
        pytest.param(ZONE_ANTI, n({"zone": "zone1"}), n({"zone": "zone2"}), QUEUE, id="anti-domain-changed"),
        pytest.param(ZONE_ANTI, n({"aaa": "a"}), n({"zone": "zone1"}), SKIP, id="gains-anti-affinity-key"),
        pytest.param(ZONE_ANTI, n({"zone": "zone1"}), n({"aaa": "a"}), QUEUE, id="loses-anti-affinity-key"),
    ],
)
def test_is_schedulable_after_node_change(target: Pod, old: Node | None, new: Node, want: QueueingHint) -> None:
    plugin = InterPodAffinity(None, PluginHandle())
    assert plugin.is_schedulable_after_node_change(target, old, new) is want


def test_hints_queue_on_wrong_objects_and_unparsable_terms() -> None:
    plugin = InterPodAffinity(None, PluginHandle())
    assert plugin.is_schedulable_after_pod_change(AFFINITY_POD, None, n({})) is QUEUE
    assert plugin.is_schedulable_after_node_change(AFFINITY_POD, None, other({})) is QUEUE
    broken = pod("p", affinity=[term("service", "Gt", "zone", ["1"])])
    assert plugin.is_schedulable_after_pod_change(broken, None, other(SECURITYSCAN)) is QUEUE
    assert plugin.is_schedulable_after_node_change(broken, None, n({"zone": "z"})) is QUEUE


def test_events_to_register() -> None:
    events = InterPodAffinity(None, PluginHandle()).events_to_register()
    got = [(e.event.resource, e.event.action) for e in events]
    assert got == [
        (EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE),
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
    ]
    assert all(e.hint is not None for e in events)


# ---- args ---------------------------------------------------------------------------------------------


def test_args_defaults() -> None:
    args, errors = decode_args(InterPodAffinityArgs, None, "profiles[0].pluginConfig[0].args")
    assert errors == []
    assert args == InterPodAffinityArgs(hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=False)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param({"hardPodAffinityWeight": 10}, [], id="valid-args"),
        pytest.param({"hardPodAffinityWeight": 0}, [], id="zero-is-valid"),
        pytest.param({"hardPodAffinityWeight": 100}, [], id="max-is-valid"),
        pytest.param(
            {"hardPodAffinityWeight": -1},
            ["args.hardPodAffinityWeight: Invalid value: -1: not in valid range [0-100]"],
            id="less-than-min",
        ),
        pytest.param(
            {"hardPodAffinityWeight": 101},
            ["args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0-100]"],
            id="more-than-max",
        ),
    ],
)
def test_args_validation(raw: dict[str, Any], want: list[str]) -> None:
    _, errors = decode_args(InterPodAffinityArgs, raw, "args")
    assert [str(e) for e in errors] == want


def test_factory_validates_again() -> None:
    with pytest.raises(ValidationFailed, match=r"hardPodAffinityWeight: Invalid value: 200"):
        InterPodAffinity(InterPodAffinityArgs(hard_pod_affinity_weight=200), PluginHandle())


def test_default_profile_enables_it_with_weight_two() -> None:
    cfg = default_config(in_tree_registry())
    assert not any("InterPodAffinity" in warning for warning in cfg.warnings)
    profile = cfg.profiles[0]
    assert [(r.name, r.weight) for r in profile.plugins["score"] if r.name == "InterPodAffinity"] == [
        ("InterPodAffinity", 2)
    ]
    for point in ("preFilter", "filter", "preScore"):
        assert "InterPodAffinity" in [r.name for r in profile.plugins[point]]
    assert profile.plugin_args["InterPodAffinity"] == InterPodAffinityArgs()
