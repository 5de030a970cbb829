"""A pod's key read from its manifest (``Keying.key_of_pod``, ``Keying.entry_key``) equals its key from its policy
document (``Keying.pod_key(pod_document(pod))``, the reference), for replicas of several templates whose manifests
hold the pod's name in other places too (a container or a label named like the pod, a key that ends in ``"name``,
names with quotes and backslashes), with fields in any order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.plugins.security.policy_keys import Keying
from kubesched.policy.embedded import EmbeddedRegoEngine
from kubesched.policyapi.contract import InputPaths, Step, decision_input, node_document, pod_document
from kubesched.testing.builders import make_node, make_pod

EXAMPLE_POLICIES = Path(__file__).resolve().parents[4] / "examples" / "policies"

NAMES = st.sampled_from(["p", "q", "web-1", "web-2", 'a"b', "a\\", "é", "x\\u0022", "name", "a b"])
PATH_CHOICES = [
    ("pod", "metadata"),
    ("pod", "metadata", "labels"),
    ("pod", "metadata", "name"),
    ("pod", "metadata", "namespace"),
    ("pod", "spec", "containers"),
    ("pod", "spec", "containers", 0, "name"),
    ("pod", "spec", "containers", Step.EACH, "image"),
    ("pod", "spec", "containers", Step.COUNT),
    ("pod", "metadata", "labels", Step.EACH),
    ("pod", "metadata", Step.EACH),
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
    templates: list[dict[str, Any]], picks: list[tuple[int, str]], paths: list[tuple[str | int | Step, ...]]
) -> None:
    keying = Keying(InputPaths(tuple(paths)), "node", node_document)
    for index, name in picks:
        manifest = templates[index % len(templates)]
        replica = {**manifest, "metadata": {**manifest["metadata"], "name": name}}
        pod = Pod.from_dict(replica, "test")
        reference = keying.pod_key(pod_document(pod), _whole)
        assert keying.key_of_pod(pod, _whole) == reference, (replica, paths)
        assert keying.entry_key(pod, _whole) == f"{reference}/{keying._node[0]}"


def _placement_pod(*containers: tuple[str, str]) -> Pod:
    """A pod whose containers are (image, the name of its per-pod service account token mount), as real pods have."""
    raw = make_pod("p").namespace("default").raw()
    raw["spec"]["containers"] = [
        {"name": f"c{i}", "image": image, "volumeMounts": [{"name": mount, "mountPath": "/var/run/secrets"}]}
        for i, (image, mount) in enumerate(containers)
    ]
    return Pod.from_dict(raw, "test")


def test_pods_that_differ_only_in_their_token_mounts_share_a_key_under_the_example_policy() -> None:
    # The example policy iterates the containers and reads only each one's image: replicas whose containers mount
    # their own kube-api-access-<random> volume are one key; another image, in any position, or another number of
    # containers is another key, and the engine's answers agree.
    engine = EmbeddedRegoEngine([str(EXAMPLE_POLICIES)], [str(EXAMPLE_POLICIES / "data.json")])
    keying = Keying(engine.input_paths, "node", node_document)
    replicas = [_placement_pod(("nginx:1", f"kube-api-access-{s}"), ("busybox", f"kube-api-access-{s}")) for s in "ab"]
    others = [
        _placement_pod(("nginx:1", "kube-api-access-a"), ("evil.io/x", "kube-api-access-a")),
        _placement_pod(("evil.io/x", "kube-api-access-a"), ("busybox", "kube-api-access-a")),
        _placement_pod(("nginx:1", "kube-api-access-a")),
    ]
    keys = [keying.key_of_pod(pod, _whole) for pod in (*replicas, *others)]
    assert keys[0] == keys[1]
    assert len(set(keys)) == 4
    node = node_document(make_node("node-b").obj())
    allowed = [
        engine.decide(
            decision_input(pod_document(pod), node, target_kind="node", operation="schedule", time="")
        ).allowed
        for pod in (*replicas, *others)
    ]
    assert allowed == [True, True, False, False, True]
