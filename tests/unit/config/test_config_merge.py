"""Merging the user's plugins with the defaults and expanding multiPoint, as kube-scheduler does.

The first table carries over the vectors of kube-scheduler's ``apis/config/v1/default_plugins_test.go``
(``TestMergePlugins``); the second those of ``framework/runtime/framework_test.go``
(``TestNewFrameworkMultiPointExpansion``), run through the whole loader with a catalog that holds only the
framework-test plugins (so no default plugin interferes, as in upstream's test).
"""

from __future__ import annotations

from typing import Any

import pytest
from cfgtest_catalog import catalog, doc, names, prof, pset, weighted

from kubesched.config import load_config_dict
from kubesched.config.document import RawPlugin, RawPluginSet
from kubesched.config.profiles import merge_plugin_set, resolve_score_weights
from kubesched.errors import ValidationFailed

Entry = str | tuple[str, int]


def _set(enabled: list[Entry] = [], disabled: list[str] = []) -> RawPluginSet:  # noqa: B006 - read only
    return RawPluginSet(
        [RawPlugin(e) if isinstance(e, str) else RawPlugin(e[0], e[1]) for e in enabled],
        [RawPlugin(d) for d in disabled],
    )


def _flat(s: RawPluginSet) -> tuple[list[Entry], list[str]]:
    return [p.name if not p.weight else (p.name, p.weight) for p in s.enabled], [p.name for p in s.disabled]


@pytest.mark.parametrize(
    ("default", "custom", "expected"),
    [
        pytest.param(
            _set(["DefaultPlugin1", "DefaultPlugin2"]),
            _set(["CustomPlugin"]),
            (["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"], []),
            id="append-custom-plugin",
        ),
        pytest.param(
            _set(["DefaultPlugin1", "DefaultPlugin2"]),
            _set(["CustomPlugin", "DefaultPlugin2"], ["DefaultPlugin2"]),
            (["DefaultPlugin1", "CustomPlugin", "DefaultPlugin2"], ["DefaultPlugin2"]),
            id="insert-after-default-plugin-2",
        ),
        pytest.param(
            _set(["DefaultPlugin1", "DefaultPlugin2"]),
            _set(["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"], ["*"]),
            (["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"], ["*"]),
            id="insert-before-all-plugins",
        ),
        pytest.param(
            _set(["DefaultPlugin1", "DefaultPlugin2"]),
            _set(["DefaultPlugin2", "DefaultPlugin1"], ["*"]),
            (["DefaultPlugin2", "DefaultPlugin1"], ["*"]),
            id="reorder-default-plugins",
        ),
        pytest.param(
            _set(["DefaultPlugin1", "DefaultPlugin2"]),
            None,
            (["DefaultPlugin1", "DefaultPlugin2"], []),
            id="apply-nil-custom-plugin",
        ),
        pytest.param(
            _set(["Plugin1", "Plugin2", "Plugin3"]),
            _set([("Plugin1", 2), ("Plugin3", 3)]),
            ([("Plugin1", 2), "Plugin2", ("Plugin3", 3)], []),
            id="custom-plugin-overrides-default-in-place",
        ),
        pytest.param(
            _set(["Plugin1", "Plugin2", "Plugin3"]),
            _set([("Plugin2", 2), ("Plugin1", 1)]),
            ([("Plugin1", 1), ("Plugin2", 2), "Plugin3"], []),
            id="order-preserved-after-override",
        ),
        pytest.param(
            _set(["Plugin1", "Plugin2", "Plugin3"]),
            _set(["Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4)]),
            (["Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2)], []),
            id="repeated-custom-plugin-last-one-replaces-the-default",
        ),
        pytest.param(
            _set(["DefaultPlugin1", "DefaultPlugin2"]),
            _set(["CustomPlugin", "CustomPlugin2"], ["DefaultPlugin2"]),
            (["DefaultPlugin1", "CustomPlugin", "CustomPlugin2"], ["DefaultPlugin2"]),
            id="append-disabled-multipoint-plugins",
        ),
        pytest.param(
            _set(["DefaultPlugin"]),
            _set([("DefaultPlugin", 5)]),
            ([("DefaultPlugin", 5)], []),
            id="override-default-multipoint-plugin-with-custom-weight",
        ),
        pytest.param(
            _set(["DefaultPlugin"], ["DefaultPlugin2"]),
            _set(["CustomPlugin"]),
            (["DefaultPlugin", "CustomPlugin"], ["DefaultPlugin2"]),
            id="disabled-plugin-in-default-set-is-kept",
        ),
        pytest.param(
            _set(["DefaultPlugin"]),
            _set([], ["DefaultPlugin"]),
            ([], ["DefaultPlugin"]),
            id="only-disabled-gets-merged",
        ),
    ],
)
def test_merge_plugin_set(
    default: RawPluginSet, custom: RawPluginSet | None, expected: tuple[list[Entry], list[str]]
) -> None:
    assert _flat(merge_plugin_set(default, custom)) == expected


TP, SP1, SWN1 = "test-plugin", "score-plugin-1", "score-with-normalize-plugin-1"
QS, BIND = "no-op-queue-sort-plugin", "bind-plugin"
TP_POINTS = ("queueSort", "preFilter", "filter", "postFilter", "reserve", "permit", "preBind", "bind", "postBind")


def _only_tp(**overrides: list[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = {p: [TP] for p in TP_POINTS}
    out.update(overrides)
    return out


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        pytest.param(
            {"multiPoint": pset([(TP, 5)])},
            _only_tp(preScore=[TP], score=[(TP, 5)]),
            id="plugin-expansion",
        ),
        pytest.param(
            {"multiPoint": pset([TP]), "preScore": pset(disabled=[TP]), "score": pset(disabled=[TP])},
            _only_tp(),
            id="disable-multipoint-plugin-at-some-points",
        ),
        pytest.param(
            {"multiPoint": pset([TP, SP1])},
            _only_tp(preScore=[TP, SP1], score=[(TP, 1), (SP1, 1)]),
            id="multiple-multipoint-plugins",
        ),
        pytest.param(
            {"multiPoint": pset([TP, SP1]), "preScore": pset(disabled=["*"])},
            _only_tp(score=[(TP, 1), (SP1, 1)]),
            id="disable-multipoint-expansion-at-a-point",
        ),
        pytest.param(
            {"multiPoint": pset([SWN1, TP, SP1]), "score": pset([SP1, TP])},
            _only_tp(preScore=[TP, SP1], score=[(SP1, 1), (TP, 1), (SWN1, 1)]),
            id="reorder-specified-point-takes-precedence",
        ),
        pytest.param(
            {"multiPoint": pset([TP, SP1]), "score": pset([SWN1, SP1, TP])},
            _only_tp(preScore=[TP, SP1], score=[(SP1, 1), (TP, 1), (SWN1, 1)]),
            id="reorder-only-for-plugins-also-in-multipoint",
        ),
        pytest.param(
            {"multiPoint": pset([TP, SP1]), "score": pset([(SP1, 5), (TP, 3)])},
            _only_tp(preScore=[TP, SP1], score=[(SP1, 5), (TP, 3)]),
            id="override-multipoint-weights",
        ),
        pytest.param(
            {"multiPoint": pset([QS, BIND, SP1], ["*"])},
            {"queueSort": [QS], "preScore": [SP1], "score": [(SP1, 1)], "bind": [BIND]},
            id="disable-all-and-enable-multipoint-plugins",
        ),
        pytest.param(
            {"multiPoint": pset([BIND, QS, SP1], [SP1])},
            {"queueSort": [QS], "preScore": [SP1], "score": [(SP1, 1)], "bind": [BIND]},
            id="enabled-beats-disabled-in-multipoint",
        ),
    ],
)
def test_multipoint_expansion_framework_vectors(plugins: dict[str, Any], expected: dict[str, list[Entry]]) -> None:
    cfg = load_config_dict(doc(profiles=[prof(plugins=plugins)]), "t", catalog(in_tree=False, framework_test=True))
    got = {
        point: [r.name if point != "score" else (r.name, r.weight) for r in refs]
        for point, refs in cfg.profiles[0].plugins.items()
        if refs
    }
    assert got == expected


def test_multipoint_double_registration_is_an_error() -> None:
    with pytest.raises(ValidationFailed) as info:
        load_config_dict(
            doc(profiles=[prof(plugins={"multiPoint": pset([TP, TP])})]),
            "t",
            catalog(in_tree=False, framework_test=True),
        )
    assert info.value.errors == [
        'profiles[0].plugins.multiPoint.enabled[1].name: Invalid value: "test-plugin": '
        'plugin "test-plugin" already registered as "PreFilterPlugin"'
    ]


# ---- the same rules on the real default set ------------------------------------------------------------


def _profile(plugins: dict[str, Any], **kw: Any) -> Any:
    return load_config_dict(doc(profiles=[prof(plugins=plugins)]), "t", catalog(security=True, **kw)).profiles[0]


DEFAULT_SCORE = [
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("VolumeBinding", 1),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
]  # fmt: skip


@pytest.mark.parametrize(
    ("plugins", "expected_score"),
    [
        pytest.param({"score": pset(disabled=["*"])}, [], id="disable-star-at-score-removes-all-defaults"),
        pytest.param(
            {"score": pset(["ComplianceScore", ("ImageLocality", 4)], ["*"])},
            # No weight in the list: the weight in ComplianceScoreArgs (10 in the test catalog) applies.
            [("ComplianceScore", 10), ("ImageLocality", 4)],
            id="disable-star-then-enable-explicitly-in-order",
        ),
        pytest.param(
            {"multiPoint": pset([("NodeAffinity", 5)])},
            [(n, 5 if n == "NodeAffinity" else w) for n, w in DEFAULT_SCORE],
            id="re-enabled-in-multipoint-with-new-weight-keeps-position",
        ),
        pytest.param(
            {"multiPoint": pset(["NodeAffinity"])},
            [(n, 1 if n == "NodeAffinity" else w) for n, w in DEFAULT_SCORE],
            id="re-enabled-in-multipoint-without-weight-gets-1",
        ),
        pytest.param(
            {"score": pset([("NodeResourcesFit", 7)])},
            [("NodeResourcesFit", 7), *[(n, w) for n, w in DEFAULT_SCORE if n != "NodeResourcesFit"]],
            id="specific-point-beats-multipoint-and-runs-first",
        ),
        pytest.param(
            {"score": pset(["TaintToleration"])},
            [("TaintToleration", 1), *DEFAULT_SCORE[1:]],
            id="score-point-entry-without-weight-gets-1-not-the-default-3",
        ),
        pytest.param(
            {"multiPoint": pset([("ComplianceScore", 4)])},
            [*DEFAULT_SCORE, ("ComplianceScore", 4)],
            id="user-multipoint-plugin-follows-defaults",
        ),
        pytest.param(
            {"multiPoint": pset([("ComplianceScore", 4)]), "score": pset([("ComplianceScore", 6)])},
            [("ComplianceScore", 6), *DEFAULT_SCORE],
            id="specific-point-beats-user-multipoint",
        ),
        pytest.param(
            {"score": pset(["ImageLocality"], ["ImageLocality"])},
            [*DEFAULT_SCORE[:-1], ("ImageLocality", 1)],
            id="enabled-beats-disabled-at-a-point",
        ),
        pytest.param(
            {
                "multiPoint": pset(disabled=["*"]),
                "queueSort": pset(["PrioritySort"]),
                "bind": pset(["DefaultBinder"]),
                "score": pset(["ImageLocality"]),
            },
            [("ImageLocality", 1)],
            id="multipoint-star-removes-all-defaults",
        ),
        pytest.param(
            {"multiPoint": pset(disabled=["TaintToleration"])},
            DEFAULT_SCORE[1:],
            id="multipoint-disable-removes-default-everywhere",
        ),
    ],
)
def test_score_lists_on_default_set(plugins: dict[str, Any], expected_score: list[tuple[str, int]]) -> None:
    assert weighted(_profile(plugins).plugins["score"]) == expected_score


def test_disabling_a_default_at_one_point_keeps_it_elsewhere() -> None:
    p = _profile({"filter": pset(disabled=["TaintToleration"])})
    assert "TaintToleration" not in names(p.plugins["filter"])
    assert "TaintToleration" in names(p.plugins["preScore"])
    assert "TaintToleration" in names(p.plugins["score"])


def test_plugin_enabled_at_one_point_goes_only_there() -> None:
    p = _profile({"filter": pset(["SecurityAuditFilter"])})
    assert names(p.plugins["filter"])[-1] == "SecurityAuditFilter"
    assert "SecurityAuditFilter" not in names(p.plugins["preFilter"])


def test_multiple_profiles_are_independent() -> None:
    cfg = load_config_dict(
        doc(profiles=[
            prof("default-scheduler"),
            prof("security-aware-scheduler", plugins={"multiPoint": pset(["SecurityAuditFilter", "ComplianceScore"])}),
            prof("no-score", plugins={"score": pset(disabled=["*"]), "preScore": pset(disabled=["*"])}),
        ]),
        "t",
        catalog(security=True),
    )  # fmt: skip
    a, b, c = cfg.profiles
    assert weighted(a.plugins["score"]) == DEFAULT_SCORE
    assert names(b.plugins["filter"])[-1] == "SecurityAuditFilter"
    assert names(b.plugins["preFilter"])[-1] == "SecurityAuditFilter"
    assert weighted(b.plugins["score"])[-1] == ("ComplianceScore", 10), "the args weight, as the seed intends"
    assert c.plugins["score"] == () and c.plugins["preScore"] == ()
    assert names(c.plugins["filter"]) == names(a.plugins["filter"])
    assert "SecurityAuditFilter" in b.plugin_args and "SecurityAuditFilter" not in a.plugin_args


def test_overflowing_total_score_is_an_error() -> None:
    big = 2**62
    merged = {
        "score": _set([("A", big)]),
        "multiPoint": _set([("B", 1), ("C", big)]),
    }
    implements = {n: frozenset({"score"}) for n in "ABC"}
    merged["C"] = _set()  # unrelated sets are ignored
    weights, errors = resolve_score_weights(merged, implements, "profiles[0].plugins")
    assert weights["A"] == big
    assert [str(e) for e in errors] == [
        f"profiles[0].plugins.score: Invalid value: {big}: total score of Score plugins could overflow"
    ]
