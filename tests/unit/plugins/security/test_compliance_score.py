"""ComplianceScore: args, the data file's format and errors, resolution order, expiry, missing-data policy,
reload on change (incl. a ConfigMap-style symlink swap), broken reloads, and score_batch == score."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node
from kubesched.clock import VirtualClock
from kubesched.config.args_decode import decode_args
from kubesched.config.loader import load_config_dict
from kubesched.errors import ValidationFailed
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime.framework import Framework, FrameworkBuildError
from kubesched.framework.runtime.outcomes import ScoreOutcome
from kubesched.framework.runtime.registry import PluginRegistration, Registry
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.plugins.security.compliance_data import (
    ComplianceDataError,
    parse_compliance_data,
)
from kubesched.plugins.security.compliance_score import (
    COMPLIANCE_SCORE,
    ComplianceScore,
    ComplianceScoreArgs,
)
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import (
    PluginHandle,
    batch_of,
    make_cluster,
    pre_score,
    score_nodes,
    score_nodes_batch,
)

NOW = 1_700_000_000.0
"""VirtualClock's default start (2023-11-14T22:13:20Z)."""
ZONE = "topology.kubernetes.io/zone"
POD = PodInfo(make_pod("p").obj())


def at(offset: float) -> str:
    """RFC 3339 for ``NOW + offset`` seconds."""
    return datetime.fromtimestamp(NOW + offset, tz=UTC).isoformat().replace("+00:00", "Z")


def write_atomically(path: Path, doc: object) -> str:
    """Replace ``path`` with a new file (new inode), as a ConfigMap update or ``kubectl cp`` would."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    os.replace(tmp, path)
    return str(path)


def node(name: str, **labels: str) -> Node:
    return make_node(name).labels(labels).obj()


def build(
    path: Path, doc: object, nodes: Sequence[Node], *, clock: VirtualClock | None = None, **args: Any
) -> tuple[ComplianceScore, Cache, VirtualClock]:
    write_atomically(path, doc)
    cache, _ = make_cluster(nodes)
    clock = clock or VirtualClock(NOW)
    plugin = ComplianceScore(
        ComplianceScoreArgs(compliance_data_path=str(path), **args), PluginHandle(cache, clock=clock)
    )
    return plugin, cache, clock


def scores(plugin: ComplianceScore, cache: Cache) -> dict[str, int]:
    """A cycle after the reload check it may start has finished: PreScore, then Score per node and in batch
    (which must agree); name -> score."""
    snapshot = cache.snapshot()
    _cycle(plugin, snapshot)
    state = _cycle(plugin, snapshot)
    per_node = score_nodes(plugin, state, POD, snapshot)
    assert score_nodes_batch(plugin, state, POD, snapshot) == per_node
    return {info.name: s for info, s in zip(snapshot.node_infos, per_node, strict=True)}


def _cycle(plugin: ComplianceScore, snapshot: Snapshot) -> CycleState:
    """PreScore of one cycle, then the reload check it may have started (off the cycle) runs to its end."""
    state = CycleState()
    assert pre_score(plugin, state, POD, snapshot) is None
    handle = plugin.handle
    assert isinstance(handle, PluginHandle)
    asyncio.run(handle.run_spawned())
    return state


# ---- args ---------------------------------------------------------------------------------------------

ARGS_PATH = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param(
            {"complianceDataPath": "/etc/scheduler/compliance.json", "weight": 30},
            ComplianceScoreArgs(compliance_data_path="/etc/scheduler/compliance.json", weight=30),
            id="seed-args-decode-with-defaults",
        ),
        pytest.param(
            {
                "complianceDataPath": "/data/c.json",
                "missingDataPolicy": "zero",
                "neutralScore": 70,
                "reloadIntervalSeconds": 0,
            },
            ComplianceScoreArgs(
                compliance_data_path="/data/c.json",
                missing_data_policy="zero",
                neutral_score=70,
                reload_interval_seconds=0.0,
            ),
            id="every-field-camel-case",
        ),
    ],
)
def test_args_decode(raw: dict[str, Any], want: ComplianceScoreArgs) -> None:
    args, errors = decode_args(ComplianceScoreArgs, raw, ARGS_PATH)
    assert errors == []
    assert args == want


def test_args_defaults() -> None:
    args = ComplianceScoreArgs(compliance_data_path="x.json")
    assert (args.weight, args.missing_data_policy, args.neutral_score, args.reload_interval_seconds) == (
        1,
        "neutral",
        50,
        5.0,
    )
    assert args.missing_score == 50
    assert ComplianceScoreArgs(compliance_data_path="x", missing_data_policy="zero").missing_score == 0


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param(
            None,
            [f"{ARGS_PATH}.complianceDataPath: Required value: the path of the compliance data JSON file"],
            id="no-args-path-is-required",
        ),
        pytest.param(
            {
                "complianceDataPath": "",
                "weight": 0,
                "missingDataPolicy": "ignore",
                "neutralScore": 101,
                "reloadIntervalSeconds": -1,
            },
            [
                f"{ARGS_PATH}.weight: Invalid value: 0: must be greater than 0",
                f"{ARGS_PATH}.complianceDataPath: Required value: the path of the compliance data JSON file",
                f'{ARGS_PATH}.missingDataPolicy: Unsupported value: "ignore": supported values: "neutral", "zero"',
                f"{ARGS_PATH}.neutralScore: Invalid value: 101: must be between 0 and 100",
                f"{ARGS_PATH}.reloadIntervalSeconds: Invalid value: -1.0: must be a finite number of seconds >= 0",
            ],
            id="every-error-with-its-path",
        ),
        pytest.param(
            {"complianceDataPath": "c.json", "complianceDataFile": "c.json"},
            [
                f'{ARGS_PATH}.complianceDataFile: Invalid value: unknown field "complianceDataFile" '
                '(did you mean "complianceDataPath"?)'
            ],
            id="unknown-field",
        ),
    ],
)
def test_args_errors(raw: dict[str, Any] | None, want: list[str]) -> None:
    args, errors = decode_args(ComplianceScoreArgs, raw, ARGS_PATH)
    assert args is None
    assert [str(e) for e in errors] == want


def test_factory_validates_args_again() -> None:
    with pytest.raises(ValidationFailed, match=r"ComplianceScoreArgs: neutralScore: Invalid value: -5"):
        ComplianceScore(ComplianceScoreArgs(compliance_data_path="c.json", neutral_score=-5), PluginHandle())


# ---- the data file --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        pytest.param(
            {"nodes": {"node-a": {"score": 140}}},
            ["nodes.node-a.score: must be between 0 and 100, got 140"],
            id="score-out-of-range",
        ),
        pytest.param(
            {"nodes": {"node-a": -1}}, ["nodes.node-a: must be between 0 and 100, got -1"], id="bare-negative"
        ),
        pytest.param(
            {"nodes": {"node-a": True}},
            ['nodes.node-a: must be a number or an object {"score": ..., "expires": ...}, got boolean'],
            id="bare-boolean",
        ),
        pytest.param(
            {"nodes": {"node-a": {"score": 87.5}}},
            ["nodes.node-a.score: must be an integer between 0 and 100, got 87.5"],
            id="fractional-score",
        ),
        pytest.param(
            {"nodes": {"node-a": {"score": "95"}}},
            ["nodes.node-a.score: must be a number between 0 and 100, got string"],
            id="score-as-string",
        ),
        pytest.param({"nodes": {"node-a": {}}}, ["nodes.node-a.score: required"], id="record-without-score"),
        pytest.param(
            {"nodes": {"node-a": {"score": 90, "scroe": 10}}},
            ['nodes.node-a.scroe: unknown field "scroe" (allowed: "score", "expires")'],
            id="typo-in-record",
        ),
        pytest.param(
            {"nodes": {"node-a": {"score": 90, "expires": "tomorrow"}}},
            [
                'nodes.node-a.expires: must be an RFC 3339 timestamp with a time zone (e.g. "2030-01-31T00:00:00Z"), '
                'got "tomorrow"'
            ],
            id="expires-not-a-timestamp",
        ),
        pytest.param(
            {"nodes": {"node-a": {"score": 90, "expires": "2030-01-01T00:00:00"}}},
            [
                'nodes.node-a.expires: must be an RFC 3339 timestamp with a time zone (e.g. "2030-01-31T00:00:00Z"), '
                'got "2030-01-01T00:00:00"'
            ],
            id="expires-without-time-zone",
        ),
        pytest.param(
            {"nodes": {"node-a": {"score": 90, "expires": "2030-02-30T00:00:00Z"}}},
            [
                'nodes.node-a.expires: must be an RFC 3339 timestamp, got "2030-02-30T00:00:00Z": '
                "day is out of range for month"
            ],
            id="expires-impossible-date",
        ),
        pytest.param(
            {"nodes": {"ip-10-0-0-1.ec2.internal": 150}},
            ['nodes["ip-10-0-0-1.ec2.internal"]: must be between 0 and 100, got 150'],
            id="dotted-node-name-is-quoted-in-the-path",
        ),
        pytest.param({"default": 101}, ["default: must be between 0 and 100, got 101"], id="default-out-of-range"),
        pytest.param(
            {"defualt": 50},
            ['defualt: unknown field "defualt" (allowed: "default", "nodes", "rules", "metadata")'],
            id="unknown-top-level-key",
        ),
        pytest.param(
            {"nodes": [{"name": "node-a", "score": 1}]},
            ["nodes: must be an object keyed by node name, got array"],
            id="nodes-not-an-object",
        ),
        pytest.param(
            {
                "rules": [
                    {
                        "selector": {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]},
                        "score": 10,
                    }
                ]
            },
            ['rules[0].selector.matchExpressions[0].operator: Invalid value: "Gt": not a valid selector operator'],
            id="invalid-selector-operator",
        ),
        pytest.param(
            {"rules": [{"selector": {"matchExpressions": [{"key": "zone", "operator": "In"}]}, "score": 10}]},
            [
                "rules[0].selector.matchExpressions[0].values: Required value: "
                "must be specified when `operator` is 'In' or 'NotIn'"
            ],
            id="in-without-values",
        ),
        pytest.param(
            {
                "rules": [
                    {
                        "selector": {"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}]},
                        "score": 10,
                    }
                ]
            },
            [
                "rules[0].selector.matchExpressions[0].values: Forbidden: "
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            ],
            id="exists-with-values",
        ),
        pytest.param(
            {"rules": [{"score": 10}]},
            ['rules[0].selector: required (use {} to match every node, or "default")'],
            id="rule-without-selector",
        ),
        pytest.param(
            {"rules": [{"selector": {"matchLabels": {"zone": "a b"}}, "score": 10}]},
            [
                'rules[0].selector.matchLabels.zone: Invalid value: "a b": a valid label must be an empty string or '
                "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ],
            id="invalid-label-value",
        ),
        pytest.param([1, 2], ["must be a JSON object, got array"], id="top-level-array"),
        pytest.param(
            {"default": 10, "nodes": {"a": 500, "b": {"score": 5, "expires": 3}}, "rules": [{"selector": {}}]},
            [
                "nodes.a: must be between 0 and 100, got 500",
                'nodes.b.expires: must be an RFC 3339 timestamp with a time zone (e.g. "2030-01-31T00:00:00Z"), '
                "got number",
                "rules[0].score: required",
            ],
            id="every-problem-is-reported",
        ),
    ],
)
def test_malformed_data_names_the_json_path(doc: object, want: list[str]) -> None:
    with pytest.raises(ComplianceDataError) as caught:
        parse_compliance_data(json.dumps(doc), "compliance.json")
    assert caught.value.problems == want
    assert str(caught.value) == "\n".join(f"compliance.json: {p}" for p in want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param(
            '{"nodes": {"a": 1,}}',
            "invalid JSON at line 1 column 19: Expecting property name enclosed in double quotes",
            id="trailing-comma",
        ),
        pytest.param("", "invalid JSON at line 1 column 1: Expecting value", id="empty-file"),
        pytest.param('{"default": NaN}', "invalid JSON: NaN is not valid JSON", id="nan"),
        pytest.param('{"nodes": {"a": 1, "a": 2}}', "nodes.a: duplicate key", id="duplicate-node"),
    ],
)
def test_unparseable_data(text: str, want: str) -> None:
    with pytest.raises(ComplianceDataError) as caught:
        parse_compliance_data(text, "compliance.json")
    assert caught.value.problems == [want]


def test_broken_file_at_startup_is_a_construction_error_naming_file_and_path(tmp_path: Path) -> None:
    path = tmp_path / "compliance.json"
    with pytest.raises(
        ComplianceDataError,
        match=r"compliance\.json: nodes\.node-a\.score: must be between 0 and "
        r"100, got 140",
    ):
        build(path, {"nodes": {"node-a": {"score": 140}}}, [node("node-a")])


def test_missing_file_at_startup_is_a_construction_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ComplianceDataError) as caught:
        ComplianceScore(ComplianceScoreArgs(compliance_data_path=str(missing)), PluginHandle())
    assert str(caught.value) == f"{missing}: cannot read compliance data: No such file or directory"


def _registry() -> Registry:
    registry = in_tree_registry()
    registry[COMPLIANCE_SCORE] = PluginRegistration.of(COMPLIANCE_SCORE, ComplianceScore, args_type=ComplianceScoreArgs)
    return registry


def _profile(path: str, *, multi_point: bool) -> Any:
    plugins = (
        {"multiPoint": {"enabled": [{"name": COMPLIANCE_SCORE, "weight": 30}]}}
        if multi_point
        else {"score": {"enabled": [{"name": COMPLIANCE_SCORE, "weight": 30}]}}
    )
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "security-aware-scheduler",
                "plugins": plugins,
                "pluginConfig": [{"name": COMPLIANCE_SCORE, "args": {"complianceDataPath": path}}],
            }
        ],
    }
    return load_config_dict(doc, "config.yaml", _registry()).profiles[0]


def test_framework_reports_a_broken_file_as_a_build_error(tmp_path: Path) -> None:
    path = write_atomically(tmp_path / "compliance.json", {"nodes": {"node-a": {"score": 140}}})
    with pytest.raises(FrameworkBuildError) as caught:
        Framework(_profile(path, multi_point=True), _registry(), PluginHandle().context)
    assert str(caught.value) == (
        f'initializing plugin "ComplianceScore": {path}: nodes.node-a.score: must be between 0 and 100, got 140'
    )


@pytest.mark.parametrize("multi_point", [True, False], ids=["multi-point", "score-only-like-the-seed"])
def test_in_a_framework_batch_and_reference_paths_agree(tmp_path: Path, multi_point: bool) -> None:
    path = write_atomically(tmp_path / "compliance.json", {"nodes": {"a": 90, "b": 20}, "default": 55})
    cache, snapshot = make_cluster([node("a"), node("b"), node("c")])
    handle = PluginHandle(cache, clock=VirtualClock(NOW))
    totals = []
    for use_batch in (True, False):
        fwk = Framework(_profile(path, multi_point=multi_point), _registry(), handle.context, use_batch=use_batch)
        state = CycleState()
        assert fwk.run_pre_score(state, POD, snapshot.node_infos) is None
        outcome = fwk.run_score(state, POD, batch_of(snapshot))
        assert isinstance(outcome, ScoreOutcome)
        totals.append(outcome.per_plugin[COMPLIANCE_SCORE].tolist())
    assert totals[0] == totals[1] == [90, 20, 55]


# ---- resolution -----------------------------------------------------------------------------------------


ZONE1 = {ZONE: "zone-1"}
ZONE2 = {ZONE: "zone-2"}


@pytest.mark.parametrize(
    ("doc", "args", "want"),
    [
        pytest.param(
            {"nodes": {"a": 95}, "rules": [{"selector": {}, "score": 10}], "default": 70},
            {},
            {"a": 95, "b": 10, "c": 10},
            id="node-record-wins-over-rules",
        ),
        pytest.param(
            {
                "rules": [
                    {"selector": {"matchLabels": ZONE1}, "score": 30},
                    {"selector": {"matchExpressions": [{"key": ZONE, "operator": "Exists"}]}, "score": 80},
                ],
                "default": 70,
            },
            {},
            {"a": 30, "b": 80, "c": 70},
            id="first-matching-rule-wins-then-default",
        ),
        pytest.param(
            {
                "rules": [
                    {
                        "selector": {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["zone-1"]}]},
                        "score": 5,
                    }
                ]
            },
            {},
            {"a": 50, "b": 5, "c": 5},
            id="not-in-matches-nodes-without-the-label",
        ),
        pytest.param(
            {"rules": [{"selector": {"matchExpressions": [{"key": ZONE, "operator": "DoesNotExist"}]}, "score": 5}]},
            {},
            {"a": 50, "b": 50, "c": 5},
            id="does-not-exist",
        ),
        pytest.param({"nodes": {"a": 95}}, {}, {"a": 95, "b": 50, "c": 50}, id="no-data-is-neutral-by-default"),
        pytest.param({"nodes": {"a": 95}}, {"neutral_score": 65}, {"a": 95, "b": 65, "c": 65}, id="neutral-score-set"),
        pytest.param(
            {"nodes": {"a": 95}}, {"missing_data_policy": "zero"}, {"a": 95, "b": 0, "c": 0}, id="no-data-is-zero"
        ),
        pytest.param(
            {"nodes": {"a": 95}, "default": 70},
            {"missing_data_policy": "zero"},
            {"a": 95, "b": 70, "c": 70},
            id="default-beats-missing-data-policy",
        ),
        pytest.param({}, {}, {"a": 50, "b": 50, "c": 50}, id="empty-file"),
        pytest.param(
            {"nodes": {"a": 95.0, "b": {"score": 0}}, "default": 100},
            {},
            {"a": 95, "b": 0, "c": 100},
            id="integral-float-and-extremes",
        ),
    ],
)
def test_resolution_order(tmp_path: Path, doc: dict[str, Any], args: dict[str, Any], want: dict[str, int]) -> None:
    nodes = [node("a", **ZONE1), node("b", **ZONE2), node("c")]
    plugin, cache, _ = build(tmp_path / "compliance.json", doc, nodes, **args)
    assert scores(plugin, cache) == want


@pytest.mark.parametrize("policy", ["neutral", "zero"])
def test_expired_records_and_rules_follow_missing_data_policy(tmp_path: Path, policy: str) -> None:
    doc = {
        "nodes": {"a": {"score": 95, "expires": at(100)}},
        "rules": [
            {"selector": {"matchLabels": ZONE2}, "score": 80, "expires": at(200)},
            {"selector": {}, "score": 10},
        ],
        "default": 70,
    }
    nodes = [node("a", **ZONE2), node("b", **ZONE2), node("c")]
    plugin, cache, clock = build(tmp_path / "compliance.json", doc, nodes, missing_data_policy=policy)
    missing = 50 if policy == "neutral" else 0
    assert scores(plugin, cache) == {"a": 95, "b": 80, "c": 10}
    clock.advance(99.5)
    assert scores(plugin, cache) == {"a": 95, "b": 80, "c": 10}
    clock.advance(0.5)  # exactly at "expires": expired, and the zone rule is not consulted for "a"
    assert scores(plugin, cache) == {"a": missing, "b": 80, "c": 10}
    clock.advance(100)  # the first matching rule expired: "b" does not fall through to the catch-all rule
    assert scores(plugin, cache) == {"a": missing, "b": missing, "c": 10}
    assert plugin.explain(cache.snapshot().by_name["b"]).describe() == "rule[0] (expired)"


def test_example_file_for_the_example_cluster() -> None:
    root = Path(__file__).resolve().parents[4]
    cache, _ = make_cluster(
        [
            node("node-a", **ZONE1),
            node("node-b", **ZONE1, accelerator="nvidia"),
            node("node-c", **ZONE2),
            node("node-d", **ZONE2),
            node("node-e", **{ZONE: "zone-3"}),
            node("node-f", **{ZONE: "zone-4"}),
        ]
    )
    plugin = ComplianceScore(
        ComplianceScoreArgs(compliance_data_path=str(root / "examples" / "compliance.json")),
        PluginHandle(cache, clock=VirtualClock(NOW)),
    )
    assert scores(plugin, cache) == {
        "node-a": 95,
        "node-b": 80,
        "node-c": 50,
        "node-d": 85,
        "node-e": 30,
        "node-f": 60,
    }


# ---- reload ---------------------------------------------------------------------------------------------


def test_reload_after_the_interval_on_change(tmp_path: Path) -> None:
    path = tmp_path / "compliance.json"
    plugin, cache, clock = build(path, {"nodes": {"a": 10}}, [node("a")], reload_interval_seconds=5)
    assert scores(plugin, cache) == {"a": 10}
    write_atomically(path, {"nodes": {"a": 90}})
    clock.advance(4.9)
    assert scores(plugin, cache) == {"a": 10}, "checked at most every reloadIntervalSeconds"
    clock.advance(0.1)
    assert scores(plugin, cache) == {"a": 90}
    assert plugin.data_version == 2
    assert plugin.last_reload_error is None


def test_unchanged_file_is_not_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "compliance.json"
    plugin, cache, clock = build(path, {"nodes": {"a": 10}}, [node("a")], reload_interval_seconds=0)
    for _ in range(3):
        clock.advance(1)
        assert scores(plugin, cache) == {"a": 10}
    assert plugin.data_version == 1


def test_configmap_symlink_swap_is_seen_even_with_same_size_and_mtime(tmp_path: Path) -> None:
    """kubelet's AtomicWriter: <mount>/compliance.json -> ..data/compliance.json, ..data -> ..<timestamp>."""
    first, second = tmp_path / "..2024_01_01", tmp_path / "..2024_01_02"
    first.mkdir()
    second.mkdir()
    (first / "compliance.json").write_text(json.dumps({"nodes": {"a": 10}}))
    (second / "compliance.json").write_text(json.dumps({"nodes": {"a": 90}}))
    stat = os.stat(first / "compliance.json")
    os.utime(second / "compliance.json", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.symlink(first.name, tmp_path / "..data")
    os.symlink("..data/compliance.json", tmp_path / "compliance.json")
    clock = VirtualClock(NOW)
    cache, _ = make_cluster([node("a")])
    args = ComplianceScoreArgs(compliance_data_path=str(tmp_path / "compliance.json"), reload_interval_seconds=1)
    plugin = ComplianceScore(args, PluginHandle(cache, clock=clock))
    assert scores(plugin, cache) == {"a": 10}
    os.symlink(second.name, tmp_path / "..data_tmp")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    clock.advance(1)
    assert scores(plugin, cache) == {"a": 90}


def test_broken_reload_keeps_the_last_good_data(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "compliance.json"
    plugin, cache, clock = build(path, {"nodes": {"a": 10}}, [node("a"), node("b")], reload_interval_seconds=1)
    write_atomically(path, {"nodes": {"a": 140}})
    clock.advance(1)
    with caplog.at_level(logging.WARNING):
        assert scores(plugin, cache) == {"a": 10, "b": 50}
        clock.advance(1)
        assert scores(plugin, cache) == {"a": 10, "b": 50}
    assert plugin.data_version == 1
    assert plugin.last_reload_error == f"{path}: nodes.a: must be between 0 and 100, got 140"
    assert plugin.reload_failures == 1, "the same broken file is not parsed again"
    assert [r.getMessage() for r in caplog.records] == [
        f"ComplianceScore: keeping compliance data version 1: {path}: nodes.a: must be between 0 and 100, got 140"
    ]
    write_atomically(path, "{not json")
    clock.advance(1)
    assert scores(plugin, cache) == {"a": 10, "b": 50}
    assert (
        plugin.last_reload_error == f"{path}: invalid JSON at line 1 column 2: Expecting property name enclosed in "
        "double quotes"
    )
    os.remove(path)
    clock.advance(1)
    assert scores(plugin, cache) == {"a": 10, "b": 50}
    assert plugin.last_reload_error == f"{path}: cannot read compliance data: No such file or directory"
    write_atomically(path, {"nodes": {"a": 20}})
    clock.advance(1)
    assert scores(plugin, cache) == {"a": 20, "b": 50}
    assert _status(plugin) == (2, None)


def _status(plugin: ComplianceScore) -> tuple[int, str | None]:
    return plugin.data_version, plugin.last_reload_error


def test_score_works_without_pre_score(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugin, cache, _ = build(tmp_path / "c.json", {"nodes": {"a": 77}}, [node("a"), node("b")])
    snapshot = cache.snapshot()
    state = CycleState()
    with caplog.at_level(logging.WARNING):
        assert score_nodes(plugin, state, POD, snapshot) == [77, 50]
        assert score_nodes_batch(plugin, state, POD, snapshot) == [77, 50]
    assert len(caplog.records) == 1
    assert "runs without its PreScore" in caplog.records[0].getMessage()


def test_batch_follows_node_updates_adds_and_removals(tmp_path: Path) -> None:
    doc = {"nodes": {"b": 99}, "rules": [{"selector": {"matchLabels": ZONE1}, "score": 30}], "default": 70}
    plugin, cache, _ = build(tmp_path / "c.json", doc, [node("a", **ZONE1), node("b")])
    assert scores(plugin, cache) == {"a": 30, "b": 99}
    cache.update_node(node("a", **ZONE2))
    assert scores(plugin, cache) == {"a": 70, "b": 99}
    cache.add_node(node("c", **ZONE1))
    cache.remove_node("b")
    cache.add_node(node("d"))
    assert scores(plugin, cache) == {"a": 70, "c": 30, "d": 70}
    cache.add_node(node("b", **ZONE1))
    assert scores(plugin, cache) == {"a": 70, "c": 30, "d": 70, "b": 99}


# ---- property: score_batch == score ---------------------------------------------------------------------

NAMES = ["n0", "n1", "n2", "n3", "n4", "n5"]
LABEL_KEYS = ["zone", "tier", "pci"]
LABEL_VALUES = ["a", "b", "c"]
OFFSETS = [-50.0, 0.0, 10.0, 20.0, 40.0]

labels_st = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=3)
score_st = st.integers(0, 100)
expires_st = st.none() | st.sampled_from(OFFSETS).map(at)


@st.composite
def requirement_st(draw: st.DrawFn) -> dict[str, Any]:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    req: dict[str, Any] = {"key": draw(st.sampled_from(LABEL_KEYS)), "operator": operator}
    if operator in ("In", "NotIn"):
        req["values"] = draw(st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=2, unique=True))
    return req


@st.composite
def rule_st(draw: st.DrawFn) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    match_labels = draw(st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2))
    if match_labels:
        selector["matchLabels"] = match_labels
    expressions = draw(st.lists(requirement_st(), max_size=2))
    if expressions:
        selector["matchExpressions"] = expressions
    rule: dict[str, Any] = {"selector": selector, "score": draw(score_st)}
    expires = draw(expires_st)
    if expires is not None:
        rule["expires"] = expires
    return rule


@st.composite
def data_st(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    default = draw(st.none() | score_st)
    if default is not None:
        doc["default"] = default
    records: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4)):
        score = draw(score_st)
        expires = draw(expires_st)
        records[name] = score if expires is None and draw(st.booleans()) else {"score": score, "expires": expires}
    doc["nodes"] = records
    doc["rules"] = draw(st.lists(rule_st(), max_size=4))
    return doc


step_st = st.one_of(
    st.tuples(st.just("advance"), st.sampled_from([0.0, 5.0, 10.0, 25.0, -30.0])),
    st.tuples(st.just("upsert"), st.sampled_from(NAMES), labels_st),
    st.tuples(st.just("remove"), st.sampled_from(NAMES)),
    st.tuples(st.just("rewrite"), data_st()),
    st.tuples(st.just("subset"), st.lists(st.sampled_from(NAMES), unique=True)),
)


class _SteppingClock(VirtualClock):
    """A virtual clock that may also step back, as a wall clock does under NTP corrections."""

    def set(self, when: float) -> None:
        self._now = when


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=data_st(),
    initial=st.dictionaries(st.sampled_from(NAMES), labels_st, min_size=1),
    policy=st.sampled_from(["neutral", "zero"]),
    steps=st.lists(step_st, max_size=8),
)
def test_score_batch_equals_score(
    doc: dict[str, Any], initial: dict[str, dict[str, str]], policy: str, steps: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "compliance.json"
        clock = _SteppingClock(NOW - 20)
        plugin, cache, _ = build(
            path,
            doc,
            [node(name, **labels) for name, labels in initial.items()],
            clock=clock,
            missing_data_policy=policy,
            neutral_score=37,
            reload_interval_seconds=0,
        )
        reference = plugin.data
        _check_cycle(plugin, cache, None, reference, clock.now())
        for step in steps:
            subset: Sequence[str] | None = None
            if step[0] == "advance":
                clock.set(clock.now() + step[1])
            elif step[0] == "upsert":
                cache.add_node(node(step[1], **step[2]))
            elif step[0] == "remove" and cache.node_count > 1:
                cache.remove_node(step[1])
            elif step[0] == "rewrite":
                write_atomically(path, step[1])
                reference = parse_compliance_data(json.dumps(step[1]), str(path))
            elif step[0] == "subset":
                subset = [name for name in step[1] if cache.node(name) is not None]
            _check_cycle(plugin, cache, subset, reference, clock.now())


def _check_cycle(
    plugin: ComplianceScore, cache: Cache, subset: Sequence[str] | None, reference: Any, now: float
) -> None:
    snapshot = cache.snapshot()
    _cycle(plugin, snapshot)
    state = _cycle(plugin, snapshot)
    assert plugin.data == reference
    infos = snapshot.node_infos if subset is None else [snapshot.by_name[n] for n in subset]
    per_node = [plugin.score(state, POD, info) for info in infos]
    batch = np.asarray(plugin.score_batch(state, POD, batch_of(snapshot, [i.name for i in infos]))).tolist()
    assert batch == per_node
    missing = plugin.args.missing_score
    for info, got in zip(infos, per_node, strict=True):
        resolved = reference.resolve(info.name, info.labels, now).score
        assert got == (missing if resolved is None else resolved)
        assert 0 <= got <= 100
