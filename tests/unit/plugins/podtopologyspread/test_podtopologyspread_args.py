"""PodTopologySpreadArgs: v1 defaults and validation against validation_pluginargs_test.go
(TestValidatePodTopologySpreadArgs), decoding through the config layer with full field paths, the default
profile (enabled, Score weight 2, System defaulting) and the factory's second validation."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.config.args_decode import decode_args
from kubesched.config.loader import default_config, load_config_dict
from kubesched.errors import ErrorType, ValidationFailed
from kubesched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs, TopologySpreadConstraint
from kubesched.plugins.podtopologyspread.args import SYSTEM_DEFAULT_CONSTRAINTS
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.framework_helpers import PluginHandle


def c(max_skew: int, key: str, action: str, selector: dict[str, Any] | None = None) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=max_skew, topology_key=key, when_unsatisfiable=action, label_selector=selector
    )


def listed(*constraints: TopologySpreadConstraint) -> PodTopologySpreadArgs:
    return PodTopologySpreadArgs(defaulting_type="List", default_constraints=constraints)


VALID = [
    pytest.param(
        listed(c(1, "node", "DoNotSchedule"), c(2, "zone", "ScheduleAnyway")),
        id="valid-config",
    ),
    pytest.param(listed(), id="list-default-constraints-no-constraints"),
    pytest.param(PodTopologySpreadArgs(defaulting_type="System"), id="system-default-constraints"),
    pytest.param(PodTopologySpreadArgs(), id="defaulting-type-unset-means-system"),
]


@pytest.mark.parametrize("args", VALID)
def test_valid_args(args: PodTopologySpreadArgs) -> None:
    assert args.validate("args") == []


INVALID = [
    pytest.param(
        listed(c(-1, "node", "DoNotSchedule")),
        ["args.defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf)"],
        id="max-skew-less-than-zero",
    ),
    pytest.param(
        listed(c(3, "", "DoNotSchedule")),
        ["args.defaultConstraints[0].topologyKey: Required value: can not be empty"],
        id="empty-topology-key",
    ),
    pytest.param(
        listed(c(3, "a/b/c", "DoNotSchedule")),
        [
            'args.defaultConstraints[0].topologyKey: Invalid value: "a/b/c": a qualified name must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ],
        id="topology-key-is-not-a-label-name",
    ),
    pytest.param(
        listed(c(1, "node", "")),
        ["args.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty"],
        id="when-unsatisfiable-is-empty",
    ),
    pytest.param(
        listed(c(1, "node", "unknown action")),
        [
            'args.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "unknown action": '
            'supported values: "DoNotSchedule", "ScheduleAnyway"'
        ],
        id="when-unsatisfiable-contains-unsupported-action",
    ),
    pytest.param(
        listed(c(1, "node", "DoNotSchedule"), c(2, "node", "DoNotSchedule")),
        ['args.defaultConstraints[1]: Duplicate value: "{node, DoNotSchedule}"'],
        id="duplicated-constraints",
    ),
    pytest.param(
        listed(c(1, "node", "DoNotSchedule", {"matchLabels": {"a": "b"}})),
        [
            "args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, "
            "as they deduced for each pod"
        ],
        id="label-selector-present",
    ),
    pytest.param(
        PodTopologySpreadArgs(defaulting_type="System", default_constraints=(c(1, "zone", "DoNotSchedule"),)),
        ['args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty'],
        id="system-defaulting-with-constraints",
    ),
    pytest.param(
        PodTopologySpreadArgs(defaulting_type="Unknown"),
        ['args.defaultingType: Unsupported value: "Unknown": supported values: "System", "List"'],
        id="unknown-defaulting-type",
    ),
    pytest.param(
        listed(c(0, "", ""), c(0, "", "")),
        [
            "args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
            "args.defaultConstraints[0].topologyKey: Required value: can not be empty",
            "args.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
            "args.defaultConstraints[1].maxSkew: Invalid value: 0: not in valid range (0, inf)",
            "args.defaultConstraints[1].topologyKey: Required value: can not be empty",
            "args.defaultConstraints[1].whenUnsatisfiable: Required value: can not be empty",
            'args.defaultConstraints[1]: Duplicate value: "{, }"',
        ],
        id="every-error-reported-in-upstream-order",
    ),
]


@pytest.mark.parametrize(("args", "want"), INVALID)
def test_invalid_args(args: PodTopologySpreadArgs, want: list[str]) -> None:
    assert [str(e) for e in args.validate("args")] == want


def test_system_defaults_are_hostname_then_zone_both_soft() -> None:
    assert PodTopologySpreadArgs().effective_constraints == SYSTEM_DEFAULT_CONSTRAINTS
    assert [(x.topology_key, x.max_skew, x.when_unsatisfiable) for x in SYSTEM_DEFAULT_CONSTRAINTS] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"),
        ("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
    ]
    assert listed().effective_constraints == ()


def test_decoding_applies_defaults_and_reports_unknown_fields() -> None:
    raw = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    }
    args, errors = decode_args(PodTopologySpreadArgs, raw, "p")
    assert errors == [] and args is not None
    assert args.default_constraints == (c(1, "zone", "DoNotSchedule"),)
    empty, errors = decode_args(PodTopologySpreadArgs, {}, "p")
    assert errors == [] and empty is not None and empty.defaulting_type == "System"
    _, errors = decode_args(PodTopologySpreadArgs, {"defaultConstraints": [{"maxSkw": 1}]}, "p")
    assert [e.type for e in errors] == [ErrorType.INVALID]
    assert errors[0].path == "p.defaultConstraints[0].maxSkw"


def test_config_file_errors_name_the_full_field_path() -> None:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {}},
                    {
                        "name": "PodTopologySpread",
                        "args": {
                            "defaultingType": "List",
                            "defaultConstraints": [
                                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                            ],
                        },
                    },
                ],
            }
        ],
    }
    with pytest.raises(ValidationFailed) as failed:
        load_config_dict(document, "t", in_tree_registry())
    assert "profiles[0].pluginConfig[1].args.defaultConstraints[0].maxSkew: Invalid value: 0" in str(failed.value)


def test_default_profile_enables_it_with_score_weight_2_and_system_defaulting() -> None:
    config = default_config(in_tree_registry())
    profile = config.profiles[0]
    for point in ("preFilter", "filter", "preScore", "score"):
        assert "PodTopologySpread" in [p.name for p in profile.plugins[point]], point
    assert [p.weight for p in profile.plugins["score"] if p.name == "PodTopologySpread"] == [2]
    args = profile.plugin_args["PodTopologySpread"]
    assert isinstance(args, PodTopologySpreadArgs) and args.defaulting_type == "System"
    assert not any("PodTopologySpread" in warning for warning in config.warnings)


def test_factory_validates_again() -> None:
    with pytest.raises(ValidationFailed, match="not in valid range"):
        PodTopologySpread(listed(c(0, "zone", "DoNotSchedule")), PluginHandle())
