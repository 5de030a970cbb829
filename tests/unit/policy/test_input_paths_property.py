"""Keying decisions on the read paths never changes a decision: random policies (the examples' and a few that
read input in the awkward ways), random pods and nodes, decisions looked up by (pod key, node class) equal
the engine's answer for the very input."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node
from kubesched.framework.node_table import NodeTable
from kubesched.framework.types import NodeInfo
from kubesched.plugins.security.policy_keys import Keying
from kubesched.policy.embedded import EmbeddedRegoEngine
from kubesched.policyapi.contract import (
    Decision,
    decision_input,
    digest,
    pod_document,
    target_document,
)
from kubesched.testing.builders import make_node, make_pod

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
TIME = "2026-11-30T16:00:00Z"

SYNTHETIC = {
    # A label by a constant key, an image by index, a node label and a taint.
    "indexed": """package t
import rego.v1
default allow := false
allow if {
\tinput.pod.metadata.labels.team == "a"
\tstartswith(input.pod.spec.containers[0].image, "nginx")
\tnot input.node.spec.taints[0]
}
allow if object.get(input.node.metadata, ["labels", "pool"], "") == "general"
""",
    # Dynamic keys: every label is read, and every annotation of the node.
    "dynamic": """package t
import rego.v1
deny contains msg if {
\tsome k, v in input.pod.metadata.labels
\tstartswith(k, "noise")
\tv != object.get(input.node.metadata.annotations, k, "")
\tmsg := sprintf("label %s", [k])
}
allow if count(deny) == 0
""",
    # The node's name only as a key into the data (records shared by several names), beside a label.
    "lookup": """package t
import rego.v1
default allow := false
record := data.inventory.nodes[input.node.metadata.name]
allow if {
\tis_string(input.node.metadata.name)
\trecord.tier == object.get(input.pod.metadata.labels, "team", "")
}
allow if {
\tnot record
\tinput.node.metadata.labels.pool == "general"
}
deny contains sprintf("tier %s", [data.audit[input.node.metadata.name]]) if input.pod.metadata.namespace == "prod"
""",
    # Containers by iteration: every port of every container, the index, the count; and a container used whole.
    "iterate": """package t
import rego.v1
default allow := false
allow if {
\tcount(input.pod.spec.containers) < 3
\tnot bad_port
}
bad_port if {
\tsome i, c in input.pod.spec.containers
\tsome p in c.ports
\tp.containerPort == 22
\ti >= 0
}
allow if {
\tsome c in input.pod.spec.containers
\tc == {"name": "c0", "image": "nginx:1"}
}
""",
    # Unbounded: the whole input is looked at.
    "walk": """package t
import rego.v1
default allow := false
allow if {
\tnot any_evil
}
any_evil if {
\twalk(input, [_, v])
\tv == "evil"
}
""",
}

POLICIES = ["placement", "residency", "indexed", "dynamic", "lookup", "iterate", "walk"]
LOOKUP_DATA = {
    "inventory": {"nodes": {"node-a": {"tier": "a"}, "node-b": {"tier": "a"}, "node-c": {"tier": "b"}}},
    "audit": {"node-a": "x", "node-b": "x", "node-c": "x"},
}


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[EmbeddedRegoEngine, str]]]:
    folder = tmp_path_factory.mktemp("policies")
    built: dict[str, tuple[EmbeddedRegoEngine, str]] = {
        "placement": (
            EmbeddedRegoEngine([str(EXAMPLES / "policies")], [str(EXAMPLES / "policies" / "data.json")]),
            "node",
        ),
        "residency": (
            EmbeddedRegoEngine(
                [str(EXAMPLES / "multicluster" / "policies")], decision_path="kubesched/clusters", reload_interval=0
            ),
            "cluster",
        ),
    }
    (folder / "data" / "lookup").mkdir(parents=True)
    (folder / "data" / "lookup" / "data.json").write_text(json.dumps(LOOKUP_DATA))
    for name, text in SYNTHETIC.items():
        (folder / f"{name}.rego").write_text(text)
        data = [str(folder / "data" / name)] if (folder / "data" / name).exists() else []
        built[name] = (EmbeddedRegoEngine([str(folder / f"{name}.rego")], data, decision_path="t"), "node")
    yield built


WORDS = ["a", "b", "evil", "restricted-gpu", "general", ""]


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    builder = make_pod("p").namespace(draw(st.sampled_from(["default", "prod", "dev"])))
    for key in draw(
        st.lists(st.sampled_from(["team", "security.example.com/clearance", "noise-1", "app"]), max_size=3)
    ):
        builder.label(key, draw(st.sampled_from(WORDS)))
    for key in draw(st.lists(st.sampled_from(["note", "noise-1", "kubesched.io/bench-index"]), max_size=2)):
        builder.annotation(key, draw(st.sampled_from(WORDS)))
    for _ in range(draw(st.integers(0, 2))):
        builder.container(image=draw(st.sampled_from(["nginx:1", "evil.io/x", "registry.k8s.io/pause:3.10"])))
    if draw(st.booleans()):
        builder.init_container(image=draw(st.sampled_from(["busybox", "evil"])))
    document = pod_document(builder.obj())
    # What real pods' containers differ in besides images: the service account token's per-pod volume mount, ports.
    for container in document["spec"].get("containers", []):
        if draw(st.booleans()):
            container["volumeMounts"] = [{"name": f"kube-api-access-{draw(st.sampled_from(['x1', 'y2']))}"}]
        if draw(st.booleans()):
            container["ports"] = [{"containerPort": draw(st.sampled_from([22, 80]))}]
    return document


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    builder = make_node(draw(st.sampled_from(["node-a", "node-b", "node-c", "node-x"])))
    for key in draw(
        st.lists(
            st.sampled_from(["security.example.com/pool", "pool", "topology.kubernetes.io/region", "noise"]),
            max_size=3,
        )
    ):
        builder.label(key, draw(st.sampled_from(["restricted-gpu", "general", "eu-west", "us-east", "evil"])))
    if draw(st.booleans()):
        builder.taint("dedicated", draw(st.sampled_from(["gpu", "evil"])))
    raw = builder.raw()
    annotations = draw(
        st.dictionaries(st.sampled_from(["multicluster.kubesched.io/change-freeze", "noise-1"]), st.sampled_from(WORDS))
    )
    raw["metadata"]["annotations"] = annotations
    return Node.from_dict(raw, "test")


def _answer(decision: Decision) -> tuple[bool, tuple[str, ...]]:
    return decision.allowed, decision.reasons


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    pairs=st.lists(st.tuples(pods(), nodes()), min_size=1, max_size=12),
)
def test_decisions_by_the_projected_key_equal_decisions_without_a_cache(
    engines: dict[str, tuple[EmbeddedRegoEngine, str]], policy: str, pairs: list[tuple[dict[str, Any], Node]]
) -> None:
    engine, kind = engines[policy]
    paths = engine.input_paths
    to_document = target_document(kind)
    keying = Keying(paths, kind, to_document)
    # The nodes' classes as SecurityAuditFilter finds them: a table's class column, its classes grouped by data record
    # where the policy only looks the name up (the "lookup" policy; the placement policy's records all differ).
    table = NodeTable()
    for slot, (_, node) in enumerate(pairs):
        table.sync(NodeInfo(node, slot), node_changed=True)
    classes = keying.node_classes(table)
    cache: dict[tuple[str, int], tuple[bool, tuple[str, ...]]] = {}
    for slot, (pod_doc, node) in enumerate(pairs):
        class_id = int(classes.column.ids[slot])
        node_key = class_id if classes.groups is None else int(classes.groups[class_id])
        # A twin that differs only where no policy here distinguishes, by construction of the vocabulary... or
        # not: either way its decision must equal the engine's.
        for doc in (pod_doc, {**pod_doc, "metadata": {**pod_doc["metadata"], "annotations": {"extra": "x"}}}):
            node_doc = to_document(node)
            whole = functools.partial(digest, {"pod": doc, "operation": "schedule", "time": TIME})
            key = (keying.pod_key(doc, whole), node_key)
            fresh = _answer(
                engine.decide(decision_input(doc, node_doc, target_kind=kind, operation="schedule", time=TIME))
            )
            assert cache.setdefault(key, fresh) == fresh, (policy, paths, key)
