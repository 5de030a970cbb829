"""What a policy reads of its input, from regorus' AST: the paths, the cases that make it unbounded, and the
projection that keys decisions on those paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import regorus

from kubesched.policy.input_paths import input_paths
from kubesched.policyapi.contract import InputPath, InputPaths, Step, projection

ROOT = Path(__file__).resolve().parents[3]
BENCH_POLICY = ROOT / "src" / "kubesched" / "bench" / "workloads" / "security" / "placement.rego"
EXAMPLE_POLICY = ROOT / "examples" / "policies" / "placement.rego"
RESIDENCY_POLICY = ROOT / "examples" / "multicluster" / "policies" / "residency.rego"

EACH, COUNT = Step.EACH, Step.COUNT
PLACEMENT_PATHS: tuple[InputPath, ...] = (
    ("node", "metadata", "labels"),
    ("node", "metadata", "name"),
    ("pod", "metadata", "labels"),
    ("pod", "metadata", "namespace"),
    # count(containers) > 0, and `some container in array.concat(...)` reading only container.image.
    ("pod", "spec", "containers", COUNT),
    ("pod", "spec", "containers", EACH, "image"),
    ("pod", "spec", "initContainers", COUNT),
    ("pod", "spec", "initContainers", EACH, "image"),
)


def analysed(*modules: str, data: dict[str, Any] | None = None) -> InputPaths:
    engine = regorus.Engine()
    for index, text in enumerate(modules):
        engine.add_policy(f"m{index}.rego", text)
    return input_paths(engine.get_ast_as_json(), data)


def rule(body: str, *, header: str = "") -> str:
    return f"package t\n\nimport rego.v1\n{header}\nallow if {{\n\t{body}\n}}\n"


def test_the_placement_policies_read_a_few_pod_and_node_fields() -> None:
    for policy in (BENCH_POLICY, EXAMPLE_POLICY):
        paths = analysed(policy.read_text())
        assert paths.paths == PLACEMENT_PATHS, policy
        # object.get(input.pod.metadata, "labels", {}) reads the labels, not the whole metadata (annotations).
        assert paths.below("pod") == (
            ("metadata", "labels"),
            ("metadata", "namespace"),
            ("spec", "containers", COUNT),
            ("spec", "containers", EACH, "image"),
            ("spec", "initContainers", COUNT),
            ("spec", "initContainers", EACH, "image"),
        )
        assert paths.below("node") == (("metadata", "labels"), ("metadata", "name"))


def test_the_residency_policy_never_reads_the_cluster_name() -> None:
    paths = analysed(RESIDENCY_POLICY.read_text())
    assert paths.below("cluster") == (("metadata", "annotations"), ("metadata", "labels"))
    assert paths.below("pod") == (("metadata", "labels"),)
    assert paths.below("node") == ()  # never read: every node looks the same to it


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            'input.pod.metadata.labels["team"] == "a"', [("pod", "metadata", "labels", "team")], id="string-key"
        ),
        pytest.param("input.pod.spec.containers[0].image", [("pod", "spec", "containers", 0, "image")], id="index"),
        pytest.param("input.pod.metadata.labels[k]", [("pod", "metadata", "labels")], id="variable-key-whole-subtree"),
        pytest.param("input.pod.x[1.5]", [("pod", "x")], id="fractional-index-whole-subtree"),
        pytest.param(
            "some c in input.pod.spec.containers\n\tc.image",
            [("pod", "spec", "containers", COUNT), ("pod", "spec", "containers", EACH, "image")],
            id="some-in-collection-element-paths",
        ),
        pytest.param(
            "input.pod.metadata.labels[input.node.metadata.name]",
            [("node", "metadata", "name"), ("pod", "metadata", "labels")],
            id="reference-in-an-index",
        ),
        pytest.param(
            'object.get(input.pod, ["metadata", "labels", "team"], "")',
            [("pod", "metadata", "labels", "team")],
            id="object-get-path",
        ),
        pytest.param(
            "object.get(input.pod.metadata, k, {})", [("pod", "metadata")], id="object-get-variable-key-whole-object"
        ),
        pytest.param(
            'object.get(input.pod.metadata, "labels", input.node.metadata.labels)',
            [("node", "metadata", "labels"), ("pod", "metadata", "labels")],
            id="object-get-default-is-read-too",
        ),
        pytest.param("m := input.pod.metadata\n\tm.labels.a", [("pod", "metadata")], id="alias-counts-whole"),
        pytest.param("[x | x := input.pod.a]", [("pod", "a")], id="comprehension"),
        pytest.param("every c in input.pod.c { c.x }", [("pod", "c")], id="every"),
        pytest.param("f(input.pod.spec)", [("pod", "spec")], id="function-argument-whole"),
        pytest.param(
            "some c in input.pod.spec.containers\n\tc == {}", [("pod", "spec", "containers")], id="element-used-whole"
        ),
        pytest.param(
            "some c in input.pod.spec.containers\n\tx := c\n\tx.image",
            [("pod", "spec", "containers")],
            id="element-bound-again",
        ),
        pytest.param("some c in input.pod.c\n\tf(c)", [("pod", "c")], id="element-passed-whole"),
        pytest.param("some c in input.pod.c\n\tc[k]", [("pod", "c", COUNT), ("pod", "c", EACH)], id="element-any-key"),
        pytest.param(
            "some i, c in input.pod.c\n\ti == 0\n\tc.image",
            [("pod", "c", COUNT), ("pod", "c", EACH, "image")],
            id="index-used-too",
        ),
        pytest.param(
            "some c in input.pod.c\n\tsome p in c.ports\n\tp.number == 80",
            [("pod", "c", COUNT), ("pod", "c", EACH, "ports", COUNT), ("pod", "c", EACH, "ports", EACH, "number")],
            id="nested-iteration",
        ),
        pytest.param(
            'some c in object.get(input.pod.spec, "c", input.pod.x)\n\tc.image',
            [("pod", "spec", "c", COUNT), ("pod", "spec", "c", EACH, "image"), ("pod", "x")],
            id="object-get-collection-default-read-whole",
        ),
        pytest.param(
            "some c in array.concat(input.pod.a, [1])\n\tc.b", [("pod", "a")], id="concat-with-a-literal-whole"
        ),
        pytest.param("count(input.pod.spec.containers) > 0", [("pod", "spec", "containers", COUNT)], id="count"),
        pytest.param(
            "some c in input.pod.c\n\ttrue", [("pod", "c", COUNT)], id="iteration-without-element-reads-the-size"
        ),
        pytest.param("walk(input, [p, v])", None, id="walk-input-unbounded"),
        pytest.param("x := input\n\tx.pod", None, id="input-whole-unbounded"),
        pytest.param("input[k].metadata", None, id="dynamic-root-unbounded"),
        pytest.param("data.t.g with input.pod as {}", None, id="with-input-unbounded"),
        pytest.param("count(input) > 0", None, id="builtin-on-input-unbounded"),
    ],
)
def test_paths_read_by_one_rule(body: str, expected: list[InputPath] | None) -> None:
    policy = rule(body) + "\nf(x) := x\n\ng := true\n"
    paths = analysed(policy).paths
    assert (sorted(paths, key=repr) if paths is not None else None) == (
        sorted(expected, key=repr) if expected is not None else None
    )


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("import input.pod as p", id="import-input-pod"),
        pytest.param("import input.pod", id="import-input-pod-unaliased"),
    ],
)
def test_an_imported_input_reference_is_read_whole(header: str) -> None:
    paths = analysed(rule("p.metadata.labels.a", header=header) if "as" in header else rule("pod.x", header=header))
    assert paths.below("pod") is None and paths.below("node") == ()


def test_import_input_is_unbounded() -> None:
    assert analysed(rule("input.pod.x", header="import input")).paths is None


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param(rule('object.get(input.pod, "a", 1)', header="import data.lib as object"), id="import-as-object"),
        pytest.param(rule('object.get(input.pod, "a", 1)', header="import data.object"), id="import-object"),
        pytest.param(
            rule('object.get(input.pod, "a", 1) with object.get as mock') + "\nmock(a, b, c) := a\n", id="with-mock"
        ),
    ],
)
def test_object_get_is_taken_for_the_builtin_only_when_nothing_can_shadow_it(policy: str) -> None:
    lib = "package lib\n\nimport rego.v1\n\nget(a, b, c) := a\n"
    objects = "package object\n\nimport rego.v1\n\nget(a, b, c) := a\n"
    paths = analysed(policy, lib, objects)
    assert paths.below("pod") is None  # the whole pod: the call may read it all


def test_generated_modules_are_not_analysed() -> None:
    from kubesched.policy.contract import batch_module

    paths = analysed(BENCH_POLICY.read_text(), batch_module("kubernetes/authz", "node"))
    assert paths.paths == PLACEMENT_PATHS  # the batch module's input.nodes and `with input as` are kubesched's


def test_paths_below_a_root_are_prefix_free() -> None:
    paths = InputPaths((("pod", "a"), ("pod", "a", "b"), ("pod", "c", 0), ("node", "x"), ("time",)))
    assert paths.below("pod") == (("a",), ("c", 0))
    assert InputPaths((("pod",), ("pod", "a"))).below("pod") is None
    assert InputPaths(None).below("pod") is None
    assert paths.below("cluster") == ()


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        pytest.param({"a": {"b": 1}, "z": 1}, {"a": {"b": 1}, "z": 2}, True, id="unread-field-differs"),
        pytest.param({"a": {"b": 1}}, {"a": {"b": 1.5}}, False, id="read-value-differs"),
        pytest.param({"a": {}}, {"a": {"c": 1}}, True, id="both-without-the-key"),
        pytest.param({"a": {}}, {"a": "text"}, False, id="missing-key-is-not-a-string"),
        pytest.param({"a": "x"}, {"a": "y"}, True, id="strings-stop-the-lookup-alike"),
        pytest.param({"a": {"b": None}}, {"a": {}}, False, id="null-is-not-absent"),
        pytest.param({"a": {"b": True}}, {"a": {"b": 1}}, False, id="true-is-not-one"),
        pytest.param({"l": [{"b": 1}]}, {"l": [{"b": 1}, {"b": 2}]}, True, id="only-element-zero-read"),
        pytest.param({"l": []}, {"l": {}}, False, id="empty-array-is-not-empty-object"),
    ],
)
def test_projection(left: dict[str, object], right: dict[str, object], equal: bool) -> None:
    paths: tuple[InputPath, ...] = (("a", "b"), ("l", 0, "b"))
    assert (projection(left, paths) == projection(right, paths)) is equal


# ---- paths read only to look a record up in the data ---------------------------------------------------------

RECORDS: dict[str, Any] = {
    "compliance": {
        "nodes": {"n1": {"level": "pci"}, "n2": {"level": "standard"}, "n3": {"level": "pci"}, "n4": {"level": "x"}}
    },
    "owners": {"n1": "team-a", "n2": "team-a", "n3": "team-b"},
}
NAME: InputPath = ("node", "metadata", "name")


def test_the_placement_policy_reads_the_node_name_only_to_find_its_compliance_record() -> None:
    paths = analysed(BENCH_POLICY.read_text(), data=RECORDS)
    (lookup,) = paths.lookups
    assert (lookup.path, lookup.data_paths) == (NAME, (("compliance", "nodes"),))
    assert lookup.classes["n1"] == lookup.classes["n3"] != lookup.classes["n2"] != lookup.classes["n4"]
    assert lookup.class_of(("key", "n1")) == lookup.class_of(("key", "n3")) == ("class", lookup.classes["n1"])
    assert lookup.class_of(("key", "unknown")) == lookup.class_of(("key", "n5")) == ("class", 0)
    assert paths.lookups_below("node") == {("metadata", "name"): lookup}
    assert analysed(BENCH_POLICY.read_text()).lookups == (), "without the data, no record classes"


def test_records_at_several_data_paths_class_a_key_together() -> None:
    body = "data.compliance.nodes[input.node.metadata.name].level == data.owners[input.node.metadata.name]"
    (lookup,) = analysed(rule(body), data=RECORDS).lookups
    assert lookup.data_paths == (("compliance", "nodes"), ("owners",))
    assert len({lookup.classes[name] for name in ("n1", "n2", "n3", "n4")}) == 4  # n1, n3: same level, not owner


def test_a_record_class_fingerprint_follows_the_data() -> None:
    first = analysed(BENCH_POLICY.read_text(), data=RECORDS).lookups[0]
    again = analysed(BENCH_POLICY.read_text(), data=RECORDS).lookups[0]
    changed = {**RECORDS, "compliance": {"nodes": {**RECORDS["compliance"]["nodes"], "n2": {"level": "pci"}}}}
    other = analysed(BENCH_POLICY.read_text(), data=changed).lookups[0]
    assert first == again and first.fingerprint == again.fingerprint
    assert other != first and other.classes["n2"] == other.classes["n1"]


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param(
            rule('sprintf("%s", [input.node.metadata.name]) != ""\n\tdata.compliance.nodes[input.node.metadata.name]'),
            id="formatted",
        ),
        pytest.param(
            rule('input.node.metadata.name == "n1"\n\tdata.compliance.nodes[input.node.metadata.name]'), id="compared"
        ),
        pytest.param(
            rule(
                'object.get(input.node.metadata, "name", "") != ""\n\tdata.compliance.nodes[input.node.metadata.name]'
            ),
            id="object-get",
        ),
        pytest.param(
            rule(
                "input.node.metadata.x\n\tdata.compliance.nodes[input.node.metadata.name]\n\tinput.node.metadata == {}"
            ),
            id="parent-read-whole",
        ),
        pytest.param(rule("some k\n\tdata.compliance[k][input.node.metadata.name]"), id="after-a-variable-index"),
        pytest.param(
            rule("data.t.nodes[input.node.metadata.name]") + '\nnodes[k] := k if some k in ["n1"]\n',
            id="rule-defined-data",
        ),
        pytest.param(rule("data.t[input.node.metadata.name]"), id="data-holding-rules"),
        pytest.param(rule("data[input.node.metadata.name]"), id="data-root"),
        pytest.param(
            rule("data.compliance.nodes[input.node.metadata.name] with data.compliance.nodes as {}"), id="with-data"
        ),
        pytest.param(
            rule("is_string(input.node.metadata.name)\n\tdata.compliance.nodes[input.node.metadata.name]")
            + "\nis_string(x) := true\n",
            id="is-string-shadowed",
        ),
    ],
)
def test_a_name_used_any_other_way_is_keyed_by_its_value(policy: str) -> None:
    paths = analysed(policy, data=RECORDS)
    assert NAME in (paths.paths or (NAME,))
    assert paths.lookups == ()


@pytest.mark.parametrize("shadow", ["\ncount(x) := 1\n", "\narray := 1\n"])
def test_count_and_array_concat_are_taken_for_the_builtins_only_when_nothing_shadows_them(shadow: str) -> None:
    body = "count(input.pod.c) > 0" if "count" in shadow else "some c in array.concat(input.pod.a, input.pod.b)\n\tc.x"
    paths = analysed(rule(body) + shadow).paths
    assert paths is not None and not any(isinstance(part, Step) for path in paths for part in path)


@pytest.mark.parametrize(
    ("path", "left", "right", "equal"),
    [
        pytest.param(("l", EACH, "b"), {"l": [{"b": 1, "x": 1}]}, {"l": [{"b": 1, "x": 2}]}, True, id="other-fields"),
        pytest.param(("l", EACH, "b"), {"l": [{"b": 1}]}, {"l": [{"b": 1}, {"b": 1}]}, False, id="element-count"),
        pytest.param(("l", EACH, "b"), {"l": [{"b": 1}, {"b": 2}]}, {"l": [{"b": 2}, {"b": 1}]}, False, id="order"),
        pytest.param(("l", EACH, "b"), {"l": [{"b": 1}]}, {"l": [{}]}, False, id="element-without-the-key"),
        pytest.param(("l", EACH, "b"), {"l": [{"b": 1}]}, {"l": {"k": {"b": 1}}}, False, id="array-is-not-object"),
        pytest.param(
            ("l", EACH), {"l": {"k": 1, "j": 2}}, {"l": {"j": 2, "k": 1}}, True, id="object-keys-in-any-order"
        ),
        pytest.param(("l", EACH), {"l": {"k": 1}}, {"l": {"j": 1}}, False, id="object-keys-count"),
        pytest.param(("l", EACH, "b"), {"l": "ab"}, {"l": "cd"}, True, id="strings-are-not-iterated-alike"),
        pytest.param(("l", COUNT), {"l": [1, 2]}, {"l": [3, 4]}, True, id="count-only"),
        pytest.param(("l", COUNT), {"l": [1]}, {"l": {"k": 1}}, False, id="count-keeps-the-type"),
        pytest.param(("l", COUNT), {"l": [1]}, {"l": [1, 2]}, False, id="count-differs"),
        pytest.param(("l", COUNT), {}, {"l": []}, False, id="count-of-nothing"),
    ],
)
def test_projection_of_every_element_and_of_a_size(
    path: InputPath, left: dict[str, object], right: dict[str, object], equal: bool
) -> None:
    assert (projection(left, [path]) == projection(right, [path])) is equal
