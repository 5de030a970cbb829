"""What kubectl apply --validate=strict refuses is a warning when loading manifests, and an error with strict:
an unknown apiVersion, invalid names, unknown fields, repeated keys. Valid manifests give no finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.api.manifests import load_manifests
from kubesched.errors import ManifestError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

BAD = {
    "version": (
        "apiVersion: apps/v1beta2\nkind: StatefulSet\nmetadata: {name: s}\nspec: {selector: {matchLabels: {a: b}}}\n",
        'StatefulSet default/s: no matches for kind "StatefulSet" in version "apps/v1beta2"',
    ),
    "name": (
        "apiVersion: v1\nkind: Node\nmetadata: {name: Node_1}\n",
        'Node Node_1: metadata.name: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of',
    ),
    "namespace-name": (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n",
        'Namespace a.b: metadata.name: Invalid value: "a.b": a lowercase RFC 1123 label must consist of',
    ),
    "pod-namespace": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: Prod}\nspec: {containers: [{name: c, image: x}]}\n",
        'Pod Prod/p: metadata.namespace: Invalid value: "Prod": a lowercase RFC 1123 label',
    ),
    "field": (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, lables: {a: b}}\nspc: {}\n",
        'Node n: unknown field "spc"',
    ),
    "metadata-field": (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, lables: {a: b}}\n",
        'Node n: unknown field "metadata.lables"',
    ),
    "duplicate-key": (
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  name: m\n",
        'line 5: key "name" already set in map (first at line 4)',
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_findings_are_warnings_or_with_strict_errors(case: str, tmp_path: Path) -> None:
    text, expected = BAD[case]
    path = tmp_path / "m.yaml"
    path.write_text(text)
    loaded = load_manifests([str(path)])
    assert any(w.startswith(f"{path}: ") and expected in w for w in loaded.warnings), loaded.warnings
    with pytest.raises(ManifestError, match="^" + str(path).replace(".", r"\.")) as error:
        load_manifests([str(path)], strict=True)
    assert expected in str(error.value)


def test_the_examples_are_clean_under_strict() -> None:
    for name in ("cluster.yaml", "secure-workloads.yaml"):
        loaded = load_manifests([str(EXAMPLES / name)], strict=True)
        assert loaded.pods and not [w for w in loaded.warnings if "Invalid value" in w or "unknown field" in w]


def test_an_unhashable_key_is_a_one_line_yaml_error(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  ? [a]\n  : b\n")
    with pytest.raises(ManifestError, match=r"m\.yaml: line \d+: could not parse YAML: found unhashable key"):
        load_manifests([str(path)])


JSON_DUPLICATES = """{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "Node",
     "metadata": {"name": "n",
                  "name": "m"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
     "spec": {"containers": [{"name": "c", "image": "x", "image": "y"}]}}
  ]
}
"""


def test_a_repeated_key_in_json_is_found_as_in_yaml(tmp_path: Path) -> None:
    """kubectl's strict decoding refuses both (``duplicate field``); the last value wins in lenient loading."""
    path = tmp_path / "m.json"
    path.write_text(JSON_DUPLICATES)
    loaded = load_manifests([str(path)])
    assert [w for w in loaded.warnings if "already set" in w] == [
        f'{path}: line 7: key "name" already set in map (first at line 6)',
        f'{path}: line 9: key "image" already set in map (first at line 9)',
    ]
    assert [node.metadata.name for node in loaded.nodes] == ["m"]
    with pytest.raises(ManifestError, match=r'm\.json: line 7: key "name" already set in map \(first at line 6\)'):
        load_manifests([str(path)], strict=True)


def test_json_without_repeated_keys_has_no_finding(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"name": "x"}}}')
    assert load_manifests([str(path)], strict=True).warnings == []
