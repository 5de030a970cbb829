"""Defaults: the configuration kube-scheduler runs with when the file says (almost) nothing."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from cfgtest_catalog import (
    ComplianceScoreArgs,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    NodeResourcesFitArgs,
    catalog,
    doc,
    names,
    prof,
    pset,
    weighted,
)

from kubesched.config import (
    EXTENSION_POINTS,
    ClientConnectionConfig,
    LeaderElectionConfig,
    default_config,
    dump_config,
    load_config_dict,
    load_config_file,
)
from kubesched.durations import DurationError, format_go_duration, parse_go_duration

# kube-scheduler v1.35's default plugins per point (all enabled through multiPoint), upstream order.
DEFAULT_LISTS: dict[str, list[str]] = {
    "preEnqueue": ["SchedulingGates", "DynamicResources", "DefaultPreemption"],
    "queueSort": ["PrioritySort"],
    "preFilter": [
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    ],
    "filter": [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    ],
    "postFilter": ["DynamicResources", "DefaultPreemption"],
    "preScore": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "score": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    ],
    "reserve": ["VolumeBinding", "DynamicResources"],
    "permit": [],
    "preBind": ["VolumeBinding", "DynamicResources"],
    "bind": ["DefaultBinder"],
    "postBind": [],
}
DEFAULT_SCORE_WEIGHTS = [
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("VolumeBinding", 1),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
]  # fmt: skip


@pytest.mark.parametrize("point", [pytest.param(p, id=f"point-{p}") for p in EXTENSION_POINTS])
def test_empty_config_has_default_plugins_in_upstream_order(point: str) -> None:
    cfg = load_config_dict(doc(), "t", catalog())
    assert len(cfg.profiles) == 1
    assert names(cfg.profiles[0].plugins[point]) == DEFAULT_LISTS[point]


def test_default_score_weights() -> None:
    cfg = default_config(catalog())
    assert weighted(cfg.profiles[0].plugins["score"]) == DEFAULT_SCORE_WEIGHTS
    assert all(r.weight == 0 for p in EXTENSION_POINTS if p != "score" for r in cfg.profiles[0].plugins[p])


def test_every_point_is_a_key_in_order() -> None:
    cfg = default_config(catalog())
    assert tuple(cfg.profiles[0].plugins) == EXTENSION_POINTS


def test_top_level_defaults() -> None:
    cfg = default_config(catalog())
    assert (cfg.parallelism, cfg.percentage_of_nodes_to_score) == (16, 0)
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1, 10)
    assert cfg.leader_election == LeaderElectionConfig(
        leader_elect=True, lease_duration=15.0, renew_deadline=10.0, retry_period=2.0,
        resource_lock="leases", resource_name="kube-scheduler", resource_namespace="kube-system",
    )  # fmt: skip
    assert cfg.client_connection == ClientConnectionConfig(
        kubeconfig="", accept_content_types="", content_type="application/vnd.kubernetes.protobuf", qps=50.0, burst=100
    )
    assert (cfg.enable_profiling, cfg.enable_contention_profiling, cfg.delay_cache_until_active) == (True, True, False)
    assert cfg.profiles[0].scheduler_name == "default-scheduler"
    assert cfg.profiles[0].percentage_of_nodes_to_score is None
    assert cfg.warnings == ()
    assert cfg.source == "<defaults>"


def test_default_plugin_args_are_filled_for_enabled_plugins_with_args() -> None:
    cfg = default_config(catalog())
    assert dict(cfg.profiles[0].plugin_args) == {
        "DefaultPreemption": DefaultPreemptionArgs(),
        "InterPodAffinity": InterPodAffinityArgs(),
        "NodeResourcesFit": NodeResourcesFitArgs(),
    }


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({}, {}, id="nothing-set-gives-kube-defaults"),
        pytest.param(
            {"leaderElection": {"leaseDuration": "1m30s", "renewDeadline": "1m", "retryPeriod": "500ms"}},
            {"lease_duration": 90.0, "renew_deadline": 60.0, "retry_period": 0.5},
            id="go-durations-are-parsed",
        ),
        pytest.param(
            {"leaderElection": {"leaseDuration": "0s", "resourceLock": "", "resourceName": ""}},
            {"lease_duration": 15.0, "resource_lock": "leases", "resource_name": "kube-scheduler"},
            id="zero-and-empty-mean-unset",
        ),
        pytest.param(
            {"leaderElection": {"leaderElect": False, "resourceLock": "endpoints", "renewDeadline": "20s"}},
            {"leader_elect": False, "resource_lock": "endpoints", "renew_deadline": 20.0},
            id="no-leader-election-means-no-lease-checks",
        ),
    ],
)
def test_leader_election(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    le = load_config_dict(doc(**fields), "t", catalog()).leader_election
    for key, value in expected.items():
        assert getattr(le, key) == value


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({"qps": 0, "burst": 0}, (50.0, 100), id="zero-means-scheduler-default"),
        pytest.param({"qps": 7.5, "burst": 9}, (7.5, 9), id="explicit-values-kept"),
    ],
)
def test_client_connection_qps_burst(fields: dict[str, Any], expected: tuple[float, int]) -> None:
    cc = load_config_dict(doc(clientConnection=fields), "t", catalog()).client_connection
    assert (cc.qps, cc.burst) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({"enableProfiling": False}, (False, False), id="contention-follows-profiling-off"),
        pytest.param(
            {"enableProfiling": False, "enableContentionProfiling": True}, (False, True), id="explicit-contention"
        ),
        pytest.param({}, (True, True), id="both-on-by-default"),
    ],
)
def test_profiling_defaults(fields: dict[str, Any], expected: tuple[bool, bool]) -> None:
    cfg = load_config_dict(doc(**fields), "t", catalog())
    assert (cfg.enable_profiling, cfg.enable_contention_profiling) == expected


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"profiles": []}, id="empty-profiles-list"),
        pytest.param({"profiles": None}, id="null-profiles"),
        pytest.param({"profiles": [{}]}, id="one-profile-without-name"),
    ],
)
def test_single_profile_is_named_default_scheduler(fields: dict[str, Any]) -> None:
    cfg = load_config_dict(doc(**fields), "t", catalog())
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]


def test_profile_percentage_overrides_global() -> None:
    cfg = load_config_dict(
        doc(percentageOfNodesToScore=30, profiles=[prof("a", percentageOfNodesToScore=70), prof("b")]), "t", catalog()
    )
    assert cfg.percentage_of_nodes_to_score == 30
    assert [p.percentage_of_nodes_to_score for p in cfg.profiles] == [70, None]
    assert cfg.profile("b") is cfg.profiles[1]
    assert cfg.profile("c") is None


# ---- default plugins that are not built yet -------------------------------------------------------


def test_unimplemented_default_plugins_are_skipped_with_a_warning() -> None:
    cfg = default_config(catalog(not_implemented=["NodeAffinity", "ImageLocality"]))
    plugins = cfg.profiles[0].plugins
    for point, expected in DEFAULT_LISTS.items():
        assert names(plugins[point]) == [n for n in expected if n not in ("NodeAffinity", "ImageLocality")]
    assert cfg.warnings == (
        'profile "default-scheduler": default plugins not implemented yet, skipped: NodeAffinity, ImageLocality',
    )
    assert "NodeAffinity" not in cfg.profiles[0].plugin_args


def test_default_plugin_missing_from_catalog_is_skipped_with_a_warning() -> None:
    cfg = default_config(catalog(without=["ImageLocality"]))
    assert "ImageLocality" not in names(cfg.profiles[0].plugins["score"])
    assert cfg.warnings == (
        'profile "default-scheduler": default plugins not in the plugin catalog, skipped: ImageLocality',
    )


@pytest.mark.parametrize(
    "plugins",
    [
        pytest.param({"multiPoint": pset(disabled=["NodeAffinity"])}, id="disabled-in-multipoint"),
        pytest.param(
            {p: pset(disabled=["NodeAffinity"]) for p in ("preFilter", "filter", "preScore", "score")},
            id="disabled-at-every-point-it-implements",
        ),
    ],
)
def test_no_warning_for_an_unimplemented_default_the_user_disabled(plugins: dict[str, Any]) -> None:
    cfg = load_config_dict(doc(profiles=[prof(plugins=plugins)]), "t", catalog(not_implemented=["NodeAffinity"]))
    assert cfg.warnings == ()


def test_warnings_name_each_profile() -> None:
    cfg = load_config_dict(doc(profiles=[prof("a"), prof("b")]), "t", catalog(not_implemented=["ImageLocality"]))
    assert cfg.warnings == (
        'profile "a": default plugins not implemented yet, skipped: ImageLocality',
        'profile "b": default plugins not implemented yet, skipped: ImageLocality',
    )


def test_plugin_config_for_a_plugin_not_enabled_is_kept_unused_with_a_warning() -> None:
    cfg = load_config_dict(
        doc(profiles=[prof(
            plugins={"multiPoint": pset(disabled=["InterPodAffinity"])},
            pluginConfig=[{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}}],
        )]),
        "t",
        catalog(),
    )  # fmt: skip
    # kube-scheduler keeps the decoded entry (config view shows it; loading the view again keeps it); no
    # framework builds the plugin.
    args = cfg.profiles[0].plugin_args["InterPodAffinity"]
    assert isinstance(args, InterPodAffinityArgs) and args.hard_pod_affinity_weight == 5
    assert all(ref.name != "InterPodAffinity" for refs in cfg.profiles[0].plugins.values() for ref in refs)
    assert cfg.warnings == (
        'profile "default-scheduler": profiles[0].pluginConfig[0] configures plugin "InterPodAffinity", '
        "which is not enabled; ignored",
    )


# ---- dump_config ---------------------------------------------------------------------------------------


def _complex() -> dict[str, Any]:
    return doc(
        parallelism=4,
        percentageOfNodesToScore=40,
        leaderElection={"leaseDuration": "1m30s", "leaderElect": False},
        profiles=[
            prof(
                "a",
                percentageOfNodesToScore=10,
                plugins={
                    "score": pset([("NodeResourcesFit", 7), "ComplianceScore"], ["ImageLocality"]),
                    "filter": pset(["SecurityAuditFilter"]),
                    "multiPoint": pset([("TaintToleration", 9)]),
                },
                pluginConfig=[
                    {"name": "ComplianceScore", "args": {"weight": 3}},
                    {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
                ],
            ),
            prof("b", plugins={"multiPoint": pset(disabled=["DefaultPreemption"])}),
        ],
    )


@pytest.mark.parametrize(
    ("document", "lazy"),
    [
        pytest.param(doc(), (), id="defaults"),
        pytest.param(doc(), ("NodeAffinity", "VolumeBinding"), id="defaults-with-unimplemented-plugins"),
        pytest.param(_complex(), (), id="two-profiles-with-overrides"),
    ],
)
def test_dump_config_round_trips(document: dict[str, Any], lazy: tuple[str, ...]) -> None:
    cat = catalog(security=True, not_implemented=lazy)
    cfg = load_config_dict(document, "t", cat)
    dumped = dump_config(cfg)
    again = load_config_dict(yaml.safe_load(yaml.safe_dump(dumped)), "t", cat)
    assert again.profiles == cfg.profiles
    assert (again.parallelism, again.leader_election, again.client_connection) == (
        cfg.parallelism, cfg.leader_election, cfg.client_connection,
    )  # fmt: skip
    assert again.warnings == ()
    assert dump_config(again) == dumped


def test_dump_config_spells_out_defaults() -> None:
    dumped = dump_config(default_config(catalog()))
    assert dumped["leaderElection"] == {
        "leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s",
        "resourceLock": "leases", "resourceName": "kube-scheduler", "resourceNamespace": "kube-system",
    }  # fmt: skip
    profile = dumped["profiles"][0]
    assert profile["plugins"]["multiPoint"] == {"disabled": [{"name": "*"}]}
    assert profile["plugins"]["score"]["enabled"][0] == {"name": "TaintToleration", "weight": 3}
    assert "permit" not in profile["plugins"]
    assert [c["name"] for c in profile["pluginConfig"]] == ["DefaultPreemption", "InterPodAffinity", "NodeResourcesFit"]
    assert profile["pluginConfig"][0]["args"] == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "DefaultPreemptionArgs",
        "minCandidateNodesPercentage": 10,
        "minCandidateNodesAbsolute": 100,
    }


def test_load_config_file_reads_yaml(tmp_path: Any) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_complex()))
    cfg = load_config_file(str(path), catalog(security=True))
    assert cfg.source == str(path)
    assert cfg.profiles[1].scheduler_name == "b"
    assert cfg.profiles[0].plugin_args["ComplianceScore"] == ComplianceScoreArgs(weight=3)


# ---- Go durations ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        pytest.param("0", 0, id="bare-zero"),
        pytest.param("15s", 15 * 10**9, id="seconds"),
        pytest.param("1m30s", 90 * 10**9, id="minutes-and-seconds"),
        pytest.param("1.5h", 5400 * 10**9, id="fractional-hours"),
        pytest.param("-2ms", -2 * 10**6, id="negative"),
        pytest.param("+3us", 3000, id="plus-sign-micro"),
        pytest.param("3µs", 3000, id="micro-sign"),
        pytest.param("1h2m3.25s", 3723250000000, id="all-units"),
        pytest.param(".5s", 5 * 10**8, id="leading-dot"),
    ],
)
def test_parse_go_duration(text: str, ns: int) -> None:
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", 'time: invalid duration ""', id="empty"),
        pytest.param("15", 'time: missing unit in duration "15"', id="missing-unit"),
        pytest.param("1d", 'time: unknown unit "d" in duration "1d"', id="days-are-not-go"),
        pytest.param("s", 'time: invalid duration "s"', id="no-number"),
        pytest.param(".s", 'time: invalid duration ".s"', id="lone-dot"),
    ],
)
def test_parse_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_go_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(15 * 10**9, "15s", id="seconds"),
        pytest.param(90 * 10**9, "1m30s", id="minutes"),
        pytest.param(3600 * 10**9, "1h0m0s", id="hour-prints-all-units"),
        pytest.param(5 * 10**8, "500ms", id="milliseconds"),
        pytest.param(1500, "1.5µs", id="microseconds"),
        pytest.param(7, "7ns", id="nanoseconds"),
        pytest.param(-1500 * 10**6, "-1.5s", id="negative-fraction"),
    ],
)
def test_format_go_duration(ns: int, text: str) -> None:
    assert format_go_duration(ns) == text
    assert parse_go_duration(text) == ns
