"""The pod's projection read from its manifest (``pod_projection``, what SecurityAuditFilter keys each attempt on)
equals the projection of its policy document (``projection(pod_document(pod))``, the reference) for any manifest
and any read paths: through the instance metadata, ``spec.nodeName`` and ``status`` that the document leaves out,
a namespace it defaults, indexes, and lookups that stop on a string or past a list's end."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.policyapi.contract import InputPath, pod_document, pod_projection, projection

KEYS = ["name", "uid", "namespace", "labels", "generateName", "nodeName", "containers", "image", "status", "x"]
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from(["", "a", "nginx", "evil"]))
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
    max_leaves=8,
)
PARTS = st.one_of(st.sampled_from(["metadata", "spec", "status", "kind", *KEYS]), st.integers(-1, 2))
PATHS = st.lists(st.lists(PARTS, min_size=1, max_size=4).map(tuple), max_size=5)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    # Fields the parser does not check hold any value; the ones it checks hold what it accepts.
    metadata: dict[str, Any] = draw(st.dictionaries(st.sampled_from(["x", "image", "containers"]), VALUES, max_size=2))
    metadata["name"] = "p"
    for key in draw(st.lists(st.sampled_from(["uid", "resourceVersion", "generateName"]), max_size=2)):
        metadata[key] = draw(st.sampled_from(["", "a", "7"]))
    if draw(st.booleans()):
        metadata["namespace"] = draw(st.sampled_from(["default", "prod"]))
    if draw(st.booleans()):
        metadata["labels"] = draw(st.dictionaries(st.sampled_from(["team", "app"]), st.sampled_from(["a", "b"])))
    spec: dict[str, Any] = draw(st.dictionaries(st.sampled_from(["x", "image", "status"]), VALUES, max_size=3))
    spec["containers"] = [{"name": "c", "image": draw(st.sampled_from(["nginx", "evil"]))}]
    if draw(st.booleans()):
        spec["nodeName"] = "node-1"
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if draw(st.booleans()):
        manifest["status"] = {"phase": "Pending"}
    if draw(st.booleans()):
        manifest["x"] = draw(VALUES)
    return manifest


@settings(max_examples=300, deadline=None)
@given(manifest=manifests(), paths=PATHS)
def test_pod_projection_equals_the_projection_of_the_pod_document(
    manifest: dict[str, Any], paths: list[InputPath]
) -> None:
    pod = Pod.from_dict(manifest, "test")
    assert pod_projection(pod, paths) == projection(pod_document(pod), paths)


@pytest.mark.parametrize(
    "paths",
    [
        pytest.param([("metadata",)], id="whole-metadata-without-instance-fields"),
        pytest.param([("metadata", "name"), ("metadata", "uid")], id="instance-metadata-is-absent"),
        pytest.param([("metadata", "namespace")], id="defaulted-namespace"),
        pytest.param([("metadata", "namespace", "x")], id="lookup-stops-on-the-namespace-string"),
        pytest.param([("spec",), ("spec", "nodeName")], id="node-name-is-absent"),
        pytest.param([("status",), ("status", "phase")], id="status-is-absent"),
        pytest.param([("spec", "containers", 0, "image"), ("spec", "containers", 1)], id="indexes"),
        pytest.param([(0,), ("kind",), ("kind", "x")], id="top-level"),
        pytest.param([()], id="the-whole-document"),
    ],
)
def test_pod_projection_of_a_bound_pod(paths: list[InputPath]) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p-1", "uid": "u", "labels": {"app": "a"}, "resourceVersion": "7"},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running"},
    }
    pod = Pod.from_dict(manifest, "test")
    assert pod_projection(pod, paths) == projection(pod_document(pod), paths)
