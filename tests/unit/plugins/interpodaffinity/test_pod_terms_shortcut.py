"""InterPodAffinity's per-pod terms: the shortcut for pods without pod (anti-)affinity answers what parsing does,
and parsed pods still come from the cache."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.interpodaffinity.terms import NO_TERMS, parse_pod_terms
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle


def _plugin() -> Any:
    registration = in_tree_registry().get("InterPodAffinity")
    assert registration is not None and registration.factory is not None
    return registration.factory(None, PluginHandle())


@pytest.mark.parametrize(
    "affinity",
    [
        pytest.param(None, id="no-affinity"),
        pytest.param({}, id="empty-affinity"),
        pytest.param({"nodeAffinity": {}}, id="node-affinity-only"),
        pytest.param({"podAffinity": None, "podAntiAffinity": None}, id="null-sections"),
        pytest.param({"podAffinity": {}}, id="empty-pod-affinity"),
        pytest.param({"podAntiAffinity": "nonsense"}, id="malformed-anti-affinity"),
        pytest.param(
            {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]}},
            id="required-anti-affinity",
        ),
    ],
)  # fmt: skip
def test_pod_terms_equal_parsing(affinity: dict[str, Any] | None) -> None:
    builder = make_pod("p").label("app", "a")
    if affinity is not None:
        builder = builder.affinity(affinity)
    pod = builder.obj()
    plugin = _plugin()
    terms = plugin.pod_terms(pod)
    assert terms == parse_pod_terms(pod)
    assert plugin.pod_terms(pod) is terms  # the shortcut's constant, or the cached parse
    if affinity is None or not ({"podAffinity", "podAntiAffinity"} & {k for k, v in affinity.items() if v is not None}):
        assert terms is NO_TERMS
