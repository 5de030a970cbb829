"""The seed's configuration places pods identically with the embedded engine and a remote OPA server.

The remote side is the project's OPA-compatible server on loopback (real HTTP), loaded with the same
policy and data files; the configuration is examples/security-config.yaml with SecurityAuditFilter's
``policies``/``data`` replaced by the seed's ``opaEndpoint``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.manifests import load_manifests
from kubesched.cli.report import report_json
from kubesched.config.loader import load_config_dict
from kubesched.harness.opa_server import OpaTestServer
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def remote_variant(document: dict[str, Any], url: str) -> dict[str, Any]:
    remote = copy.deepcopy(document)
    for profile in remote["profiles"]:
        for entry in profile.get("pluginConfig", []):
            if entry["name"] == "SecurityAuditFilter":
                entry["args"] = {"opaEndpoint": f"{url}/v1/data/kubernetes/authz", "timeoutSeconds": 5}
    return remote


def test_embedded_and_remote_engines_place_identically() -> None:
    registry = in_tree_registry()
    document = yaml.safe_load((EXAMPLES / "security-config.yaml").read_text())
    manifests = load_manifests([str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "secure-workloads.yaml")])
    # The example's paths are relative to its directory.
    embedded_config = load_config_dict(document, "embedded", registry, base_dir=str(EXAMPLES))
    embedded = report_json(simulate(manifests, embedded_config, registry).records)

    policies = {str(path): path.read_text() for path in (EXAMPLES / "policies").glob("*.rego")
                if not path.stem.endswith("_test")}
    data = json.loads((EXAMPLES / "policies" / "data.json").read_text())
    with OpaTestServer(policies, data) as server:
        config = load_config_dict(remote_variant(document, server.url), "remote", registry, base_dir=str(EXAMPLES))
        remote = report_json(simulate(manifests, config, registry).records)
        requests = server.requests

    assert remote == embedded
    secure = [pod for pod in embedded["pods"] if pod["profile"] == "security-aware-scheduler"]
    assert {pod["name"]: pod["result"] for pod in secure} == {
        "checkout": "Scheduled", "frontend": "Scheduled", "coredns-x": "Scheduled",
        "ledger": "Unschedulable", "miner": "Unschedulable",
    }
    # The batch module's check and install, what OPA reports of its modules (one GET /v1/policies: the simulation
    # takes less than the freshness bound), and one batch decision per evaluated pod: never one call per node.
    assert requests <= 2 + len(secure)


def test_security_profile_batch_and_reference_paths_agree() -> None:
    registry = in_tree_registry()
    document = yaml.safe_load((EXAMPLES / "security-config.yaml").read_text())
    manifests = load_manifests([str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "secure-workloads.yaml")])
    config = load_config_dict(document, "t", registry, base_dir=str(EXAMPLES))
    reports = [report_json(simulate(manifests, config, registry, use_batch=batch).records) for batch in (True, False)]
    assert reports[0] == reports[1]
