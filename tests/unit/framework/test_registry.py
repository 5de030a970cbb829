from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubesched.framework.runtime.registry import (
    PluginRegistration,
    RegistryError,
    extension_points_of,
    merge,
    with_entry_points,
)
from kubesched.plugins.registry import in_tree_registry

PLUGIN_MODULE = '''
class Audit:
    """Rejects nodes without a compliance label."""

    name = "ThirdPartyAudit"

    def __init__(self, args, handle):
        pass

    def filter(self, state, pod, node_info):
        return None

    def reserve(self, state, pod, node_name):
        return None

    def unreserve(self, state, pod, node_name):
        pass


def registry():
    from kubesched.framework.runtime.registry import PluginRegistration
    return {"ThirdPartyAudit": PluginRegistration.of("ThirdPartyAudit", Audit)}


def broken():
    raise RuntimeError("cannot load")


class Nameless:
    def filter(self, state, pod, node_info):
        return None


NOT_A_PLUGIN = 42


def junk():
    return ["ThirdPartyAudit"]


def as_list():
    from kubesched.framework.runtime.registry import PluginRegistration
    return [PluginRegistration.of("ListedAudit", Audit)]
'''


def test_extension_points_derived_from_methods() -> None:
    registration = in_tree_registry()["NodeResourcesFit"]
    assert registration.extension_points == frozenset({"preFilter", "filter", "preScore", "score"})
    assert extension_points_of(object) == frozenset()


def test_merge_refuses_to_replace_a_built_plugin_but_may_fill_a_planned_one() -> None:
    # A planned entry of its own: which default plugins are still planned changes as they get built.
    base = {**in_tree_registry(), "Planned": PluginRegistration.planned("Planned", ("filter",))}
    with pytest.raises(RegistryError, match="NodeResourcesFit"):
        merge(base, {"NodeResourcesFit": base["NodeResourcesFit"]})
    assert not base["Planned"].implemented
    replacement = PluginRegistration.of("Planned", type("Zone", (), {"filter": lambda *a: None}))
    assert merge(base, {"Planned": replacement})["Planned"].implemented


def test_entry_point_plugins_join_and_broken_ones_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "thirdparty_audit.py").write_text(PLUGIN_MODULE)
    dist = tmp_path / "thirdparty_audit-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-audit\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[kubesched.plugins]\n"
        "audit = thirdparty_audit:registry\n"
        "broken = thirdparty_audit:broken\n"
        "the-class = thirdparty_audit:Audit\n"
        "listed = thirdparty_audit:as_list\n"
        "nameless = thirdparty_audit:Nameless\n"
        "neither = thirdparty_audit:NOT_A_PLUGIN\n"
        "junk = thirdparty_audit:junk\n"
        "missing = thirdparty_audit_gone:thing\n"
        "taken = thirdparty_audit:registry\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry = with_entry_points(in_tree_registry())
    finally:
        sys.modules.pop("thirdparty_audit", None)
    assert registry["ThirdPartyAudit"].extension_points == frozenset({"filter", "reserve"})
    assert registry["ThirdPartyAudit"].description == "Rejects nodes without a compliance label."
    assert registry["ListedAudit"].factory is registry["ThirdPartyAudit"].factory
    warnings = {record.getMessage() for record in caplog.records if record.levelname == "WARNING"}
    # "the-class" and "taken" both bring ThirdPartyAudit again; whichever of the three comes first joins.
    taken = {w for w in warnings if w.endswith("a plugin named 'ThirdPartyAudit' already exists")}
    assert len(taken) == 2, warnings
    assert warnings - taken == {
        "skipping plugin entry point 'broken' (thirdparty_audit:broken): calling it raised RuntimeError: cannot load",
        "skipping plugin entry point 'nameless' (thirdparty_audit:Nameless): "
        "class Nameless has no string `name` attribute (its plugin name)",
        "skipping plugin entry point 'neither' (thirdparty_audit:NOT_A_PLUGIN): it is int, "
        "not a plugin class with a string `name`, or a function returning plugin registrations",
        "skipping plugin entry point 'junk' (thirdparty_audit:junk): "
        "it returned str among its registrations, not a PluginRegistration",
        "skipping plugin entry point 'missing' (thirdparty_audit_gone:thing): "
        "cannot import it: ModuleNotFoundError: No module named 'thirdparty_audit_gone'",
    }
