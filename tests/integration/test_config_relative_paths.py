"""File paths in a configuration's plugin args are relative to the configuration file, as paths in a kubeconfig are
relative to the kubeconfig: the bundled examples work from any directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubesched.cli.main import main
from kubesched.config.loader import load_config_dict, load_config_file
from kubesched.plugins.registry import in_tree_registry
from kubesched.plugins.security.args import SecurityAuditFilterArgs
from kubesched.plugins.security.compliance_score import ComplianceScoreArgs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def write_config(directory: Path, filter_args: dict[str, object], compliance: str) -> Path:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "secure",
                "plugins": {
                    "filter": {"enabled": [{"name": "SecurityAuditFilter"}]},
                    "score": {"enabled": [{"name": "ComplianceScore"}]},
                },
                "pluginConfig": [
                    {"name": "SecurityAuditFilter", "args": filter_args},
                    {"name": "ComplianceScore", "args": {"complianceDataPath": compliance}},
                ],
            }
        ],
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_relative_paths_in_plugin_args_resolve_against_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = str(tmp_path / "elsewhere" / "data.json")
    path = write_config(
        tmp_path / "conf",
        {"policies": ["policies", "../shared/extra.rego"], "data": [absolute], "timeoutSeconds": 5},
        "compliance.json",
    )
    [profile] = load_config_file("conf/config.yaml", in_tree_registry()).profiles
    filter_args = profile.plugin_args["SecurityAuditFilter"]
    assert isinstance(filter_args, SecurityAuditFilterArgs)
    assert filter_args.policies == ("conf/policies", "conf/../shared/extra.rego")
    assert filter_args.data == (absolute,), "an absolute path is kept"
    compliance = profile.plugin_args["ComplianceScore"]
    assert isinstance(compliance, ComplianceScoreArgs)
    assert compliance.compliance_data_path == "conf/compliance.json"
    remote = write_config(
        tmp_path / "remote",
        {"opaEndpoint": "https://opa:8181/v1/data/k", "tokenFile": "token", "caFile": "ca.pem"},
        str(path.parent / "compliance.json"),
    )
    [profile] = load_config_file(str(remote), in_tree_registry()).profiles
    remote_args = profile.plugin_args["SecurityAuditFilter"]
    assert isinstance(remote_args, SecurityAuditFilterArgs)
    assert (remote_args.token_file, remote_args.ca_file) == (
        str(remote.parent / "token"),
        str(remote.parent / "ca.pem"),
    )


def test_a_document_without_a_file_keeps_its_paths_as_written() -> None:
    document = yaml.safe_load((EXAMPLES / "security-config.yaml").read_text())
    config = load_config_dict(document, "<test>", in_tree_registry())
    args = config.profiles[1].plugin_args["SecurityAuditFilter"]
    assert isinstance(args, SecurityAuditFilterArgs) and args.policies == ("policies",)
    config = load_config_dict(document, "<test>", in_tree_registry(), base_dir=str(EXAMPLES))
    args = config.profiles[1].plugin_args["SecurityAuditFilter"]
    assert isinstance(args, SecurityAuditFilterArgs) and args.policies == (str(EXAMPLES / "policies"),)


def test_the_security_example_runs_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    manifests = [str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "secure-workloads.yaml")]
    argv = ["simulate", "-f", manifests[0], "-f", manifests[1], "--config", str(EXAMPLES / "security-config.yaml")]
    assert main([*argv, "-o", "json"]) == 0
    secure = {pod["name"]: pod["result"] for pod in json.loads(capsys.readouterr().out)["pods"]}
    assert (secure["checkout"], secure["miner"]) == ("Scheduled", "Unschedulable")  # the policy was read
    assert main(["config", "validate", str(EXAMPLES / "multicluster" / "config.yaml")]) == 0
    capsys.readouterr()
    assert main(["config", "view", str(EXAMPLES / "security-config.yaml")]) == 0
    view = yaml.safe_load(capsys.readouterr().out)
    [secure] = [p for p in view["profiles"] if p["schedulerName"] == "security-aware-scheduler"]
    [entry] = [e for e in secure["pluginConfig"] if e["name"] == "SecurityAuditFilter"]
    assert entry["args"]["policies"] == [str(EXAMPLES / "policies")], "config view shows where the files are read"
