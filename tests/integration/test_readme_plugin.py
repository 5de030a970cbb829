"""The plugin shown in README.md works as written: extracted from the README, registered, scheduled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kubesched.api.manifests import LoadedManifests
from kubesched.config.loader import load_config_dict
from kubesched.framework import PluginRegistration
from kubesched.framework.runtime.registry import merge
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate
from kubesched.testing.builders import make_node, make_pod

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_plugin() -> type:
    section = README.read_text().split("## Writing a plugin", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    plugin: type = namespace["AuditFilter"]
    return plugin


def test_readme_plugin_filters_nodes() -> None:
    plugin = readme_plugin()
    registry = merge(in_tree_registry(), {"AuditFilter": PluginRegistration.of("AuditFilter", plugin)})
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": "default-scheduler", "plugins": {"filter": {"enabled": [{"name": "AuditFilter"}]}}}
        ],
    }
    cluster = LoadedManifests()
    cluster.nodes = [make_node("pci").label("compliance", "pci").obj(), make_node("plain").obj()]
    cluster.pods = [make_pod(f"p{i}").obj() for i in range(3)]
    report = simulate(cluster, load_config_dict(document, "readme", registry), registry)
    assert [record.node for record in report.records] == ["pci", "pci", "pci"]
    assert report.records[0].node_to_status["plain"].reasons == ("node is not PCI compliant",)
