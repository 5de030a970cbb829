"""A pod's key read from its manifest (``Keying.key_of_pod``, ``Keying.entry_key``) equals its key from its policy
document (``Keying.pod_key(pod_document(pod))``, the reference), for replicas of several templates whose manifests
hold the pod's name in other places too (a container or a label named like the pod, a key that ends in ``"name``,
names with quotes and backslashes), with fields in any order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.framework.policy import InputPaths, node_document, pod_document
from kubesched.plugins.security.policy_keys import Keying

NAMES = st.sampled_from(["p", "q", "web-1", "web-2", 'a"b', "a\\", "é", "x\\u0022", "name", "a b"])
PATH_CHOICES = [
    ("pod", "metadata"),
    ("pod", "metadata", "labels"),
    ("pod", "metadata", "name"),
    ("pod", "metadata", "namespace"),
    ("pod", "spec", "containers"),
    ("pod", "spec", "containers", 0, "name"),
    ("pod", "x"),
]


def _whole() -> str:
    return "whole"


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(NAMES)
    # Fields in any order (the name first, last or between), each possibly holding the pod's own name.
    metadata: dict[str, Any] = {"name": name, "namespace": draw(st.sampled_from(["default", "prod"]))}
    labels = draw(st.dictionaries(st.sampled_from(["app", 'k"name', "name"]), st.one_of(NAMES, st.just(name))))
    if labels:
        metadata["labels"] = labels
    if draw(st.booleans()):
        metadata["annotations"] = {'x"name': draw(st.one_of(NAMES, st.just(name)))}
    metadata = dict(draw(st.permutations(list(metadata.items()))))
    containers = [{"name": draw(st.one_of(NAMES, st.just(name))), "image": draw(st.sampled_from(["nginx", "evil"]))}]
    spec = {"containers": containers}
    fields: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if draw(st.booleans()):
        fields["x"] = {"name": draw(st.one_of(NAMES, st.just(name)))}
    return dict(draw(st.permutations(list(fields.items()))))


@settings(max_examples=300, deadline=None)
@given(
    templates=st.lists(manifests(), min_size=1, max_size=4),
    picks=st.lists(st.tuples(st.integers(0, 3), NAMES), min_size=1, max_size=12),
    paths=st.lists(st.sampled_from(PATH_CHOICES), min_size=1, max_size=3, unique=True),
)
def test_replica_keys_equal_the_keys_of_the_pod_documents(
    templates: list[dict[str, Any]], picks: list[tuple[int, str]], paths: list[tuple[str | int, ...]]
) -> None:
    keying = Keying(InputPaths(tuple(paths)), "node", node_document)
    for index, name in picks:
        manifest = templates[index % len(templates)]
        replica = {**manifest, "metadata": {**manifest["metadata"], "name": name}}
        pod = Pod.from_dict(replica, "test")
        reference = keying.pod_key(pod_document(pod), _whole)
        assert keying.key_of_pod(pod, _whole) == reference, (replica, paths)
        assert keying.entry_key(pod, _whole) == f"{reference}/{keying._node[0]}"
