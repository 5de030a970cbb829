"""Properties: Go durations print and parse back; any plugin configuration either fails with a
``ValidationFailed`` or yields plugin lists a framework can be built from."""

from __future__ import annotations

from typing import Any

from cfgtest_catalog import IN_TREE, SECURITY, catalog, doc, prof
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.config import EXTENSION_POINTS, MULTI_POINT, dump_config, load_config_dict
from kubesched.durations import format_go_duration, parse_go_duration
from kubesched.errors import ValidationFailed


@given(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1))
def test_go_duration_round_trip(ns: int) -> None:
    assert parse_go_duration(format_go_duration(ns)) == ns


CAT = catalog(security=True, not_implemented=["ImageLocality"])
NAMES = sorted(IN_TREE) + sorted(SECURITY) + ["*", "Missing"]

plugin_entry = st.builds(
    lambda name, weight: {"name": name} if weight is None else {"name": name, "weight": weight},
    st.sampled_from(NAMES),
    st.one_of(st.none(), st.integers(min_value=0, max_value=10)),
)
plugin_set = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.lists(plugin_entry, max_size=4),
        "disabled": st.lists(st.builds(lambda n: {"name": n}, st.sampled_from(NAMES)), max_size=3),
    },
)
plugins = st.dictionaries(st.sampled_from([*EXTENSION_POINTS, MULTI_POINT]), plugin_set, max_size=5)


@settings(max_examples=300, deadline=None)
@given(plugins)
def test_any_plugin_config_is_rejected_or_buildable(p: dict[str, Any]) -> None:
    try:
        cfg = load_config_dict(doc(profiles=[prof(plugins=p)]), "t", CAT)
    except ValidationFailed as exc:
        assert exc.errors
        assert all(": " in e for e in exc.errors)
        return
    (profile,) = cfg.profiles
    for point, refs in profile.plugins.items():
        seen = [r.name for r in refs]
        assert len(seen) == len(set(seen)), point
        for ref in refs:
            assert point in CAT[ref.name].extension_points
            assert CAT[ref.name].implemented
            assert (ref.weight >= 1) if point == "score" else ref.weight == 0
    assert len(profile.plugins["queueSort"]) == 1
    assert profile.plugins["bind"]
    again = load_config_dict(dump_config(cfg), "t", CAT)
    assert again.profiles == cfg.profiles
