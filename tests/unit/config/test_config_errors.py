"""Every way a config can be wrong, with the exact message kubesched prints (Kubernetes' field-error
format), and the promise that all problems are reported at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cfgtest_catalog import catalog, doc, prof, pset

from kubesched.config import load_config_dict, load_config_file
from kubesched.config.loader import parse_yaml
from kubesched.errors import KubeschedError, ValidationFailed

SEC = catalog(security=True, framework_test=True)
LAZY = catalog(security=True, not_implemented=["NodeAffinity"])


def errors_of(document: Any, cat: Any = SEC) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        load_config_dict(document, "t", cat)
    return info.value.errors


def one_profile(**fields: Any) -> dict[str, Any]:
    return doc(profiles=[prof(**fields)])


CASES = [
    # ---- type meta ----
    pytest.param(
        {"apiVersion": "kubescheduler.config.k8s.io/v1beta3", "kind": "KubeSchedulerConfiguration"},
        SEC,
        [
            'apiVersion: Invalid value: "kubescheduler.config.k8s.io/v1beta3": no longer served; '
            "use kubescheduler.config.k8s.io/v1"
        ],
        id="v1beta3-no-longer-served",
    ),
    pytest.param(
        {"kind": "KubeSchedulerConfiguration", "parallelism": 0},
        SEC,
        ['apiVersion: Required value: must be "kubescheduler.config.k8s.io/v1"'],
        id="missing-api-version-stops-decoding",
    ),
    pytest.param(
        {"apiVersion": "example.com/v1", "kind": "KubeSchedulerConfiguration"},
        SEC,
        ['apiVersion: Unsupported value: "example.com/v1": supported values: "kubescheduler.config.k8s.io/v1"'],
        id="foreign-api-version",
    ),
    pytest.param(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfig"},
        SEC,
        ['kind: Unsupported value: "KubeSchedulerConfig": supported values: "KubeSchedulerConfiguration"'],
        id="wrong-kind",
    ),
    pytest.param(
        ["not", "a", "mapping"],
        SEC,
        ['<root>: Invalid value: ["not", "a", "mapping"]: must be of type object'],
        id="document-not-a-mapping",
    ),
    # ---- top level ----
    pytest.param(
        doc(parallelism=0),
        SEC,
        ["parallelism: Invalid value: 0: should be an integer value greater than zero"],
        id="parallelism-zero",
    ),
    pytest.param(
        doc(percentageOfNodesToScore=101),
        SEC,
        ["percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"],
        id="global-percentage-out-of-range",
    ),
    pytest.param(
        doc(podInitialBackoffSeconds=0),
        SEC,
        ["podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"],
        id="initial-backoff-zero",
    ),
    pytest.param(
        doc(podInitialBackoffSeconds=5, podMaxBackoffSeconds=2),
        SEC,
        ["podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds"],
        id="max-backoff-below-initial",
    ),
    pytest.param(
        doc(extenders=[{"urlPrefix": "http://x"}]),
        SEC,
        ["extenders: Forbidden: extenders are not supported by kubesched yet"],
        id="extenders-not-supported",
    ),
    pytest.param(
        doc(leaderElection={"leaseDuration": "5s"}),
        SEC,
        ['leaderElection.leaseDuration: Invalid value: "10s": must be greater than `RenewDeadline`'],
        id="lease-not-longer-than-renew-deadline",
    ),
    pytest.param(
        doc(leaderElection={"retryPeriod": "-1s"}),
        SEC,
        ['leaderElection.retryPeriod: Invalid value: "-1s": must be greater than zero'],
        id="negative-retry-period",
    ),
    pytest.param(
        doc(leaderElection={"resourceLock": "endpointsleases"}),
        SEC,
        ['leaderElection.resourceLock: Invalid value: "endpointsleases": resourceLock value must be "leases"'],
        id="resource-lock-must-be-leases",
    ),
    pytest.param(
        doc(clientConnection={"burst": -1}),
        SEC,
        ["clientConnection.burst: Invalid value: -1: must be non-negative"],
        id="negative-burst",
    ),
    # ---- profiles ----
    pytest.param(
        doc(profiles=[prof("a"), prof(None)]),
        SEC,
        ["profiles[1].schedulerName: Required value"],
        id="scheduler-name-required-with-two-profiles",
    ),
    pytest.param(
        doc(profiles=[prof("")]),
        SEC,
        ["profiles[0].schedulerName: Required value"],
        id="empty-scheduler-name",
    ),
    pytest.param(
        doc(profiles=[prof("a"), prof("b"), prof("a")]),
        SEC,
        ['profiles[2].schedulerName: Duplicate value: "a"'],
        id="duplicate-scheduler-name",
    ),
    pytest.param(
        one_profile(percentageOfNodesToScore=-1),
        SEC,
        ["profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"],
        id="profile-percentage-out-of-range",
    ),
    # ---- plugins ----
    pytest.param(
        one_profile(plugins={"score": pset(["ImageLocality", "Foo"])}),
        SEC,
        ['profiles[0].plugins.score.enabled[1].name: Invalid value: "Foo": plugin does not exist'],
        id="unknown-plugin",
    ),
    pytest.param(
        one_profile(plugins={"multiPoint": pset(["Foo"]), "filter": pset(["Bar"])}),
        SEC,
        [
            'profiles[0].plugins.filter.enabled[0].name: Invalid value: "Bar": plugin does not exist',
            'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "Foo": plugin does not exist',
        ],
        id="every-unknown-plugin-is-its-own-error",
    ),
    pytest.param(
        one_profile(plugins={"filter": pset(["NodeAffinity"])}),
        LAZY,
        ['profiles[0].plugins.filter.enabled[0].name: Invalid value: "NodeAffinity": plugin is not implemented yet'],
        id="named-plugin-not-implemented",
    ),
    pytest.param(
        one_profile(plugins={"filter": pset(["ImageLocality"])}),
        SEC,
        [
            'profiles[0].plugins.filter.enabled[0].name: Invalid value: "ImageLocality": '
            'plugin "ImageLocality" does not extend FilterPlugin plugin'
        ],
        id="plugin-at-a-point-it-does-not-implement",
    ),
    pytest.param(
        one_profile(plugins={"filter": pset(["SecurityAuditFilter", "SecurityAuditFilter"])}),
        SEC,
        [
            'profiles[0].plugins.filter.enabled[1].name: Invalid value: "SecurityAuditFilter": '
            'plugin "SecurityAuditFilter" already registered as "FilterPlugin"'
        ],
        id="duplicate-at-one-point",
    ),
    pytest.param(
        one_profile(plugins={"multiPoint": pset([("ImageLocality", 2), ("ImageLocality", 3)])}),
        SEC,
        [
            'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "ImageLocality": '
            'plugin "ImageLocality" already registered as "ScorePlugin"'
        ],
        id="duplicate-in-multipoint",
    ),
    pytest.param(
        one_profile(plugins={"queueSort": pset(["CustomSort"])}),
        SEC,
        [
            'profiles[0].plugins.queueSort: Invalid value: ["PrioritySort", "CustomSort"]: only one queue sort '
            'plugin required for profile with scheduler name "default-scheduler", but got 2'
        ],
        id="two-queue-sort-plugins",
    ),
    pytest.param(
        one_profile(plugins={"queueSort": pset(disabled=["*"])}),
        SEC,
        [
            "profiles[0].plugins.queueSort: Required value: only one queue sort plugin required for profile with "
            'scheduler name "default-scheduler", but got 0'
        ],
        id="no-queue-sort-plugin",
    ),
    pytest.param(
        one_profile(plugins={"bind": pset(disabled=["DefaultBinder"])}),
        SEC,
        [
            "profiles[0].plugins.bind: Required value: at least one bind plugin is needed for profile with "
            'scheduler name "default-scheduler"'
        ],
        id="no-bind-plugin",
    ),
    pytest.param(
        doc(profiles=[prof("a"), prof("b", plugins={"queueSort": pset(["CustomSort"], ["*"])})]),
        SEC,
        [
            'profiles[1].plugins.queueSort: Invalid value: {"disabled": [{"name": "*"}], "enabled": '
            '[{"name": "CustomSort"}]}: must be the same for all profiles'
        ],
        id="different-queue-sort-across-profiles",
    ),
    pytest.param(
        doc(profiles=[prof("a", plugins={"queueSort": pset(["PrioritySort"])}), prof("b")]),
        SEC,
        ["profiles[1].plugins.queueSort: Invalid value: {}: must be the same for all profiles"],
        id="queue-sort-set-must-be-written-the-same-even-if-effectively-equal",
    ),
    pytest.param(
        doc(
            profiles=[
                prof("a"),
                prof("b", plugins={"multiPoint": pset(["CustomSort"], ["PrioritySort"])}),
            ]
        ),
        SEC,
        ['profiles[1].plugins.queueSort: Invalid value: ["CustomSort"]: must be the same for all profiles'],
        id="different-queue-sort-through-multipoint",
    ),
    pytest.param(
        doc(
            profiles=[
                prof("a", plugins={"queueSort": pset(["CustomSort"], ["*"])}),
                prof(
                    "b",
                    plugins={"queueSort": pset(["CustomSort"], ["*"])},
                    pluginConfig=[{"name": "CustomSort", "args": {"order": "desc"}}],
                ),
            ]
        ),
        SEC,
        [
            'profiles[1].pluginConfig[0].args: Invalid value: {"order": "desc"}: '
            "queueSort must be the same for all profiles"
        ],
        id="different-queue-sort-args-across-profiles",
    ),
    pytest.param(
        one_profile(plugins={"filter": pset(["EBSLimits"])}),
        SEC,
        [
            'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in version "v1" '
            '(KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")'
        ],
        id="removed-plugin-name",
    ),
    pytest.param(
        one_profile(plugins={"score": pset([("ImageLocality", 3_000_000_000)])}),
        SEC,
        ["profiles[0].plugins.score.enabled[0].weight: Invalid value: 3000000000: must be of type int32"],
        id="weight-beyond-int32",
    ),
    pytest.param(
        one_profile(plugins={"score": pset([("ImageLocality", -1)])}),
        SEC,
        ["profiles[0].plugins.score.enabled[0].weight: Invalid value: -1: must not be negative"],
        id="negative-weight",
    ),
    pytest.param(
        one_profile(plugins={"filter": {"enabled": [{"weight": 1}]}}),
        SEC,
        ["profiles[0].plugins.filter.enabled[0].name: Required value"],
        id="plugin-without-name",
    ),
    # ---- pluginConfig ----
    pytest.param(
        one_profile(pluginConfig=[{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]),
        SEC,
        ['profiles[0].pluginConfig[1]: Duplicate value: "NodeResourcesFit"'],
        id="duplicate-plugin-config",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "Foo", "args": {}}]),
        SEC,
        ['profiles[0].pluginConfig[0].name: Invalid value: "Foo": plugin does not exist'],
        id="plugin-config-for-unknown-plugin",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "NodeAffinity"}]),
        LAZY,
        ['profiles[0].pluginConfig[0].name: Invalid value: "NodeAffinity": plugin is not implemented yet'],
        id="plugin-config-for-unimplemented-plugin",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "GCEPDLimits"}]),
        SEC,
        [
            'profiles[0].pluginConfig[0]: Invalid value: "GCEPDLimits": was invalid in version "v1" '
            '(KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")'
        ],
        id="plugin-config-for-removed-plugin",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "PrioritySort", "args": {"x": 1}}]),
        SEC,
        ['profiles[0].pluginConfig[0].args: Invalid value: {"x": 1}: plugin "PrioritySort" takes no args'],
        id="args-for-plugin-without-args",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "DefaultPreemption", "args": {"kind": "InterPodAffinityArgs"}}]),
        SEC,
        ['profiles[0].pluginConfig[0].args: Invalid value: "InterPodAffinityArgs": has to match plugin args'],
        id="args-of-the-wrong-kind",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 200}}]),
        SEC,
        [
            "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 200: "
            "not in valid range [0, 100]"
        ],
        id="args-fail-plugin-validation",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "SecurityAuditFilter", "args": {"timeoutSecond": 5}}]),
        SEC,
        [
            'profiles[0].pluginConfig[0].args.timeoutSecond: Invalid value: unknown field "timeoutSecond" '
            '(did you mean "timeoutSeconds"?)'
        ],
        id="args-unknown-field",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"name": "SecurityAuditFilter", "args": {"timeoutSeconds": "5"}}]),
        SEC,
        ['profiles[0].pluginConfig[0].args.timeoutSeconds: Invalid value: "5": must be of type integer'],
        id="args-wrong-type",
    ),
    pytest.param(
        one_profile(pluginConfig=[{"args": {}}]),
        SEC,
        ["profiles[0].pluginConfig[0].name: Required value"],
        id="plugin-config-without-name",
    ),
    # ---- unknown fields and wrong types ----
    pytest.param(
        doc(parallelizm=4),
        SEC,
        ['parallelizm: Invalid value: unknown field "parallelizm" (did you mean "parallelism"?)'],
        id="unknown-top-level-field",
    ),
    pytest.param(
        one_profile(pluginz={}),
        SEC,
        ['profiles[0].pluginz: Invalid value: unknown field "pluginz" (did you mean "plugins"?)'],
        id="unknown-profile-field",
    ),
    pytest.param(
        one_profile(plugins={"filters": pset(["NodeName"])}),
        SEC,
        ['profiles[0].plugins.filters: Invalid value: unknown field "filters" (did you mean "filter"?)'],
        id="unknown-plugin-set",
    ),
    pytest.param(
        one_profile(plugins={"filter": {"enable": [{"name": "NodeName"}]}}),
        SEC,
        ['profiles[0].plugins.filter.enable: Invalid value: unknown field "enable" (did you mean "enabled"?)'],
        id="unknown-plugin-set-field",
    ),
    pytest.param(
        doc(leaderElection={"leaseDurationSeconds": 15}),
        SEC,
        [
            'leaderElection.leaseDurationSeconds: Invalid value: unknown field "leaseDurationSeconds" '
            '(did you mean "leaseDuration"?)'
        ],
        id="unknown-leader-election-field",
    ),
    pytest.param(
        doc(parallelism="16"),
        SEC,
        ['parallelism: Invalid value: "16": must be of type int32'],
        id="parallelism-as-string",
    ),
    pytest.param(
        doc(profiles={"schedulerName": "x"}),
        SEC,
        ['profiles: Invalid value: {"schedulerName": "x"}: must be of type array'],
        id="profiles-not-a-list",
    ),
    pytest.param(
        doc(leaderElection={"leaderElect": "maybe"}),
        SEC,
        ['leaderElection.leaderElect: Invalid value: "maybe": must be of type boolean'],
        id="bool-as-string",
    ),
    pytest.param(
        doc(leaderElection={"leaseDuration": 15}),
        SEC,
        ['leaderElection.leaseDuration: Invalid value: 15: must be of type duration string (e.g. "15s")'],
        id="duration-as-number",
    ),
    pytest.param(
        doc(leaderElection={"leaseDuration": "15 s"}),
        SEC,
        ['leaderElection.leaseDuration: Invalid value: "15 s": time: unknown unit " s" in duration "15 s"'],
        id="malformed-duration",
    ),
    pytest.param(
        doc(clientConnection={"qps": True}),
        SEC,
        ["clientConnection.qps: Invalid value: true: must be of type number"],
        id="bool-is-not-a-number",
    ),
    pytest.param(
        one_profile(plugins={"score": {"enabled": "ImageLocality"}}),
        SEC,
        ['profiles[0].plugins.score.enabled: Invalid value: "ImageLocality": must be of type array'],
        id="plugin-list-not-a-list",
    ),
]


@pytest.mark.parametrize(("document", "cat", "expected"), CASES)
def test_error_message(document: Any, cat: Any, expected: list[str]) -> None:
    assert errors_of(document, cat) == expected


def test_all_errors_are_reported_at_once() -> None:
    document = doc(
        parallelism=-1,
        podInitialBackoffSeconds=0,
        bogus=True,
        profiles=[
            prof(
                "a",
                percentageOfNodesToScore=150,
                plugins={
                    "filter": pset(["NoSuchFilter", "ImageLocality"]),
                    "score": pset([("AlsoMissing", 2)]),
                },
                pluginConfig=[
                    {
                        "name": "DefaultPreemption",
                        "args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
                    },
                    {"name": "DefaultPreemption"},
                ],
            ),
            prof("a", plugins={"bind": pset(disabled=["*"])}),
        ],
    )
    assert errors_of(document) == [
        'bogus: Invalid value: unknown field "bogus"',
        "parallelism: Invalid value: -1: should be an integer value greater than zero",
        "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
        "profiles[0].percentageOfNodesToScore: Invalid value: 150: not in valid range [0-100]",
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "NoSuchFilter": plugin does not exist',
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "AlsoMissing": plugin does not exist',
        'profiles[0].plugins.filter.enabled[1].name: Invalid value: "ImageLocality": '
        'plugin "ImageLocality" does not extend FilterPlugin plugin',
        "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 0: "
        "cannot be zero at the same time as minCandidateNodesAbsolute",
        "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute: Invalid value: 0: "
        "cannot be zero at the same time as minCandidateNodesPercentage",
        'profiles[0].pluginConfig[1]: Duplicate value: "DefaultPreemption"',
        "profiles[1].plugins.bind: Required value: at least one bind plugin is needed for profile with "
        'scheduler name "a"',
        'profiles[1].schedulerName: Duplicate value: "a"',
    ]


def test_validation_failed_names_the_source_on_every_line() -> None:
    with pytest.raises(ValidationFailed) as info:
        load_config_dict(doc(parallelism=0, percentageOfNodesToScore=-5), "sched.yaml", SEC)
    assert isinstance(info.value, KubeschedError)
    assert info.value.source == "sched.yaml"
    assert str(info.value) == (
        "sched.yaml: parallelism: Invalid value: 0: should be an integer value greater than zero\n"
        "sched.yaml: percentageOfNodesToScore: Invalid value: -5: not in valid range [0-100]"
    )


# ---- files and YAML ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n  - schedulerName: a\n   plugins: {}\n",
            "invalid YAML: line 5, column 4: ",
            id="bad-indentation",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: [unclosed\n",
            "invalid YAML: line 3, column 1: ",
            id="unclosed-flow-sequence",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nparallelism: 4\nparallelism: 5\n",
            "invalid YAML: line 3, column 1: key 'parallelism' already set in map",
            id="duplicate-key",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\n---\nkind: KubeSchedulerConfiguration\n",
            "invalid YAML: line 2, column 1: ",
            id="two-documents",
        ),
    ],
)
def test_bad_yaml_is_one_error_naming_the_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValidationFailed) as info:
        load_config_file(str(path), SEC)
    assert len(info.value.errors) == 1
    assert info.value.errors[0].startswith(expected)
    assert str(info.value).startswith(f"{path}: invalid YAML: line ")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ValidationFailed) as info:
        load_config_file(str(path), SEC)
    assert info.value.errors == ["cannot read config file: No such file or directory"]


def test_empty_file_asks_for_api_version(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(ValidationFailed) as info:
        load_config_file(str(path), SEC)
    assert info.value.errors == [
        'apiVersion: Required value: must be "kubescheduler.config.k8s.io/v1"',
        'kind: Required value: must be "KubeSchedulerConfiguration"',
    ]


def test_json_is_yaml() -> None:
    data = parse_yaml('{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}', "j")
    assert load_config_dict(data, "j", SEC).parallelism == 16
