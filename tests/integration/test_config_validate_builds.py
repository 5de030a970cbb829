"""``kubesched config validate`` does what start-up does: every plugin of every profile is built (policies
compiled, their ``decisionPath`` checked, compliance files read), and an error names the file and the profile."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SEED_CONFIG = ROOT / "tests" / "unit" / "config" / "testdata" / "seed-config.yaml"


def validate(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str, str]:
    code = main(["config", "validate", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def example_configs() -> list[Path]:
    return [
        path
        for path in sorted(EXAMPLES.glob("*.yaml"))
        if (yaml.safe_load(path.read_text()) or {}).get("kind") == "KubeSchedulerConfiguration"
    ]


def security_config(tmp_path: Path, args: Mapping[str, object], *, profile: str = "secure") -> Path:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": "default-scheduler"},
            {
                "schedulerName": profile,
                "plugins": {"filter": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                "pluginConfig": [{"name": "SecurityAuditFilter", "args": dict(args)}],
            },
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_every_example_configuration_builds(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # the examples name their policy and compliance files relative to themselves
    configs = example_configs()
    assert len(configs) >= 2, configs
    for path in configs:
        code, out, err = validate(capsys, path)
        assert code == 0, err
        assert "valid" in out


def test_a_policy_that_does_not_compile_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "broken.rego").write_text("package kubernetes.authz\n\nallow { input.x\n")
    code, _, err = validate(capsys, security_config(tmp_path, {"policies": [str(tmp_path / "broken.rego")]}))
    assert code == 1
    assert f'{tmp_path / "config.yaml"}: profile "secure": initializing plugin "SecurityAuditFilter"' in err
    assert "policy does not compile" in err and "broken.rego:3" in err


@pytest.mark.parametrize(
    ("decision_path", "defined"),
    [
        ("kubernetes/authz", True),  # a package
        ("kubernetes/authz/allow", True),  # a rule
        ("kubernetes/authz/decision/allowed", True),  # inside a rule's value
        ("kubernetes", True),  # holds the package
        ("settings/mode", True),  # in the data
        ("kubernetes/authz/alow", False),
        ("kubernetes/other", False),
        ("settings/missing", False),
    ],
)
def test_a_decision_path_nothing_defines_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, decision_path: str, defined: bool
) -> None:
    (tmp_path / "policy.rego").write_text(
        "package kubernetes.authz\n\nimport rego.v1\n\ndefault allow := false\n\n"
        "allow if input.pod.metadata.name\n\ndecision := {\"allowed\": allow}\n"
    )
    (tmp_path / "data.json").write_text('{"settings": {"mode": "strict"}}')
    args = {"policies": [str(tmp_path / "policy.rego")], "data": [str(tmp_path / "data.json")]}
    code, _, err = validate(capsys, security_config(tmp_path, {**args, "decisionPath": decision_path}))
    if defined:
        assert code == 0, err
    else:
        assert code == 1
        assert f'decisionPath "{decision_path}"' in err and "is not defined by the loaded policies" in err
        assert "(packages: data.kubernetes.authz)" in err and 'profile "secure"' in err


def test_remote_endpoint_and_embedded_policies_together_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "policy.rego").write_text("package kubernetes.authz\n\nimport rego.v1\n\ndefault allow := false\n")
    args = {"opaEndpoint": "http://opa:8181/v1/data/kubernetes/authz", "policies": [str(tmp_path / "policy.rego")]}
    code, _, err = validate(capsys, security_config(tmp_path, args))
    assert code == 1
    assert "profiles[1].pluginConfig[0].args.policies: Forbidden: may not be set together with opaEndpoint" in err
    remote_with_data = {"opaEndpoint": "http://opa:8181/v1/data/kubernetes/authz", "data": ["data.json"]}
    code, _, err = validate(capsys, security_config(tmp_path, remote_with_data))
    assert code == 1 and "args.data: Forbidden: only the embedded engine reads data files" in err


def test_a_missing_compliance_file_is_an_error_naming_it_and_the_profile(capsys: pytest.CaptureFixture[str]) -> None:
    # The seed's configuration reads /etc/scheduler/compliance.json, as start-up would.
    code, _, err = validate(capsys, SEED_CONFIG)
    assert code == 1
    assert 'profile "security-aware-scheduler": initializing plugin "ComplianceScore"' in err
    assert "/etc/scheduler/compliance.json" in err


def test_every_plugin_that_cannot_be_built_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "a",
                "plugins": {
                    "filter": {"enabled": [{"name": "SecurityAuditFilter"}]},
                    "score": {"enabled": [{"name": "ComplianceScore"}]},
                },
                "pluginConfig": [
                    {"name": "SecurityAuditFilter", "args": {"policies": ["missing-a.rego"]}},
                    {"name": "ComplianceScore", "args": {"complianceDataPath": "missing.json"}},
                ],
            },
            {
                "schedulerName": "b",
                "plugins": {"permit": {"enabled": [{"name": "SecurityAuditPermit"}]}},
                "pluginConfig": [{"name": "SecurityAuditPermit", "args": {"policies": ["missing-b.rego"]}}],
            },
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out, err = validate(capsys, path)
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert lines[0].startswith(f'error: {path}: profile "a": initializing plugin "SecurityAuditFilter": ')
    assert "missing-a.rego" in lines[0]
    assert lines[1].startswith(f'{path}: profile "a": initializing plugin "ComplianceScore": ')
    assert "missing.json" in lines[1]
    assert lines[2].startswith(f'{path}: profile "b": initializing plugin "SecurityAuditPermit": ')
    assert "missing-b.rego" in lines[2]


def test_a_mistyped_plugin_name_gets_a_suggestion(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: a\n  plugins:\n    filter: {enabled: [{name: NodeResourceFit}, {name: Nonsense}]}\n"
        "  pluginConfig:\n  - {name: imagelocality, args: {}}\n"
    )
    code, _, err = validate(capsys, path)
    assert code == 1
    assert (
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "NodeResourceFit": plugin does not exist '
        '(did you mean "NodeResourcesFit"?)'
    ) in err
    assert 'Invalid value: "Nonsense": plugin does not exist\n' in err  # nothing close: no guess
    assert 'Invalid value: "imagelocality": plugin does not exist (did you mean "ImageLocality"?)' in err
