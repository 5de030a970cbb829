"""The seed document's config (a security-aware second scheduler) against catalogs with and without its
two security plugins."""

from __future__ import annotations

from pathlib import Path

import pytest
from cfgtest_catalog import ComplianceScoreArgs, SecurityAuditFilterArgs, catalog, names, weighted

from kubesched.config import load_config_file
from kubesched.errors import ValidationFailed

SEED = str(Path(__file__).parent / "testdata" / "seed-config.yaml")


def test_seed_fails_naming_every_missing_plugin() -> None:
    with pytest.raises(ValidationFailed) as info:
        load_config_file(SEED, catalog())
    assert info.value.errors == [
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "SecurityAuditFilter": plugin does not exist',
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "ComplianceScore": plugin does not exist',
        'profiles[0].pluginConfig[0].name: Invalid value: "SecurityAuditFilter": plugin does not exist',
        'profiles[0].pluginConfig[1].name: Invalid value: "ComplianceScore": plugin does not exist',
    ]
    assert str(info.value).splitlines()[0].startswith(f"{SEED}: profiles[0].plugins.filter.enabled[0].name")


def test_seed_fails_when_security_plugins_are_not_built_yet() -> None:
    cat = catalog(security=True, not_implemented=["SecurityAuditFilter", "ComplianceScore"])
    with pytest.raises(ValidationFailed) as info:
        load_config_file(SEED, cat)
    assert info.value.errors == [
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "SecurityAuditFilter": '
        "plugin is not implemented yet",
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "ComplianceScore": plugin is not implemented yet',
        'profiles[0].pluginConfig[0].name: Invalid value: "SecurityAuditFilter": plugin is not implemented yet',
        'profiles[0].pluginConfig[1].name: Invalid value: "ComplianceScore": plugin is not implemented yet',
    ]


def test_seed_loads_when_plugins_are_present() -> None:
    cfg = load_config_file(SEED, catalog(security=True))
    assert cfg.warnings == ()
    (p,) = cfg.profiles
    assert p.scheduler_name == "security-aware-scheduler"
    # NodeResourcesFit is also in multiPoint, so the explicit entry runs first; SecurityAuditFilter is not,
    # so it runs after every multiPoint plugin; NodeUnschedulable is disabled at filter only.
    assert names(p.plugins["filter"]) == [
        "NodeResourcesFit", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "VolumeRestrictions",
        "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity",
        "DynamicResources", "SecurityAuditFilter",
    ]  # fmt: skip
    assert weighted(p.plugins["score"]) == [
        ("NodeResourcesBalancedAllocation", 1), ("TaintToleration", 3), ("NodeAffinity", 2),
        ("NodeResourcesFit", 1), ("VolumeBinding", 1), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
        ("ImageLocality", 1), ("ComplianceScore", 30),  # the seed's args weight: 30
    ]  # fmt: skip
    assert "SecurityAuditFilter" not in names(p.plugins["preFilter"])
    assert p.plugin_args["SecurityAuditFilter"] == SecurityAuditFilterArgs(
        opa_endpoint="http://opa-service:8181/v1/data/kubernetes/authz", timeout_seconds=5
    )
    assert p.plugin_args["ComplianceScore"] == ComplianceScoreArgs(
        weight=30, compliance_data_path="/etc/scheduler/compliance.json"
    )


def test_seed_with_unimplemented_defaults_still_loads_with_warnings() -> None:
    cfg = load_config_file(SEED, catalog(security=True, not_implemented=["VolumeBinding", "NodeAffinity"]))
    assert cfg.warnings == (
        'profile "security-aware-scheduler": default plugins not implemented yet, skipped: NodeAffinity, VolumeBinding',
    )
    assert "VolumeBinding" not in names(cfg.profiles[0].plugins["reserve"])
