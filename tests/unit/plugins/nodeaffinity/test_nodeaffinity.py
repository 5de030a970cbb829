"""NodeAffinity against node_affinity_test.go (TestNodeAffinity, TestNodeAffinityPriority,
Test_isSchedulableAfterNodeChange) and validation_pluginargs_test.go (TestValidateNodeAffinityArgs),
per node and in batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.errors import ErrorType, ValidationFailed
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo, PreFilterResult
from kubesched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from kubesched.plugins.nodeaffinity.node_affinity import ERR_REASON_CONFLICT, ERR_REASON_ENFORCED, ERR_REASON_POD
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import (
    PluginHandle,
    filter_nodes,
    filter_nodes_batch,
    make_cluster,
    normalize,
    score_nodes,
    score_nodes_batch,
)

POD_MISMATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
ENFORCED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
Raw = dict[str, Any]


def expr(key: str, operator: str, *values: str) -> Raw:
    out: Raw = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def name_in(*names: str) -> Raw:
    return expr("metadata.name", "In", *names)


def term(expressions: Sequence[Raw] = (), fields: Sequence[Raw] = ()) -> Raw:
    out: Raw = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def required(*terms: Raw) -> Raw:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def preferred(*weighted: tuple[int, Raw]) -> Raw:
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": weight, "preference": preference} for weight, preference in weighted
        ]
    }


def with_affinity(node_affinity: Raw, builder: PodBuilder | None = None) -> PodBuilder:
    return (builder or make_pod()).affinity({"nodeAffinity": node_affinity})


FILTER_CASES = [
    pytest.param(make_pod().node_selector({"foo": "bar"}), {}, "node", None, POD_MISMATCH, None, id="missing-labels"),
    pytest.param(make_pod().node_selector({"foo": "bar"}), {"foo": "bar"}, "node", None, None, None, id="same-labels"),
    pytest.param(
        make_pod().node_selector({"foo": "bar"}),
        {"foo": "bar", "baz": "blah"},
        "node",
        None,
        None,
        None,
        id="node-labels-are-superset",
    ),
    pytest.param(
        make_pod().node_selector({"foo": "bar", "baz": "blah"}),
        {"foo": "bar"},
        "node",
        None,
        POD_MISMATCH,
        None,
        id="node-labels-are-subset",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "In", "bar", "value2")]))),
        {"foo": "bar"},
        "node",
        None,
        None,
        None,
        id="in-operator-matches",
    ),
    pytest.param(
        with_affinity(required(term([expr("kernel-version", "Gt", "0204")]))),
        {"kernel-version": "0206"},
        "node",
        None,
        None,
        None,
        id="gt-operator-matches",
    ),
    pytest.param(
        with_affinity(required(term([expr("mem-type", "NotIn", "DDR", "DDR2")]))),
        {"mem-type": "DDR3"},
        "node",
        None,
        None,
        None,
        id="not-in-operator-matches",
    ),
    pytest.param(
        with_affinity(required(term([expr("GPU", "Exists")]))),
        {"GPU": "NVIDIA-GRID-K1"},
        "node",
        None,
        None,
        None,
        id="exists-operator-matches",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "In", "value1", "value2")]))),
        {"foo": "bar"},
        "node",
        None,
        POD_MISMATCH,
        None,
        id="affinity-not-matching-labels",
    ),
    pytest.param(
        with_affinity(required({"matchExpressions": []})),
        {"foo": "bar"},
        "node",
        None,
        POD_MISMATCH,
        None,
        id="empty-match-expressions-match-no-objects",
    ),
    pytest.param(make_pod(), {"foo": "bar"}, "node", Status(Code.SKIP), None, None, id="no-affinity-skips-prefilter"),
    pytest.param(
        with_affinity({}), {"foo": "bar"}, "node", Status(Code.SKIP), None, None, id="affinity-without-required-skips"
    ),
    pytest.param(
        with_affinity(required(term([expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]))),
        {"GPU": "NVIDIA-GRID-K1"},
        "node",
        None,
        None,
        None,
        id="match-expressions-anded-match",
    ),
    pytest.param(
        with_affinity(required(term([expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]))),
        {"GPU": "NVIDIA-GRID-K1"},
        "node",
        None,
        POD_MISMATCH,
        None,
        id="match-expressions-anded-do-not-match",
    ),
    pytest.param(
        with_affinity(
            required(term([expr("foo", "In", "bar", "value2")]), term([expr("diffkey", "In", "wrong", "value2")]))
        ),
        {"foo": "bar"},
        "node",
        None,
        None,
        None,
        id="terms-ored-one-matches",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "Exists")])), make_pod().node_selector({"foo": "bar"})),
        {"foo": "bar"},
        "node",
        None,
        None,
        None,
        id="affinity-and-node-selector-both-satisfied",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "Exists")])), make_pod().node_selector({"foo": "bar"})),
        {"foo": "barrrrrr"},
        "node",
        None,
        POD_MISMATCH,
        None,
        id="affinity-matches-but-node-selector-does-not",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "NotIn", "invalid value: ___@#$%^")]))),
        {"foo": "bar"},
        "node",
        None,
        POD_MISMATCH,
        None,
        id="invalid-value-in-term-never-matches",
    ),
    pytest.param(
        with_affinity(required(term(fields=[name_in("node1")]))),
        {},
        "node1",
        None,
        None,
        PreFilterResult(frozenset({"node1"})),
        id="match-fields-in-matches-node",
    ),
    pytest.param(
        with_affinity(required(term(fields=[name_in("node1")]))),
        {},
        "node2",
        None,
        POD_MISMATCH,
        PreFilterResult(frozenset({"node1"})),
        id="match-fields-in-does-not-match-node",
    ),
    pytest.param(
        with_affinity(required(term(fields=[name_in("node1"), name_in("node2")]), term([expr("foo", "In", "bar")]))),
        {"foo": "bar"},
        "node2",
        None,
        None,
        None,
        id="two-terms-fields-fail-expressions-match",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "In", "bar")], fields=[name_in("node1")]))),
        {"foo": "bar"},
        "node2",
        None,
        POD_MISMATCH,
        PreFilterResult(frozenset({"node1"})),
        id="one-term-fields-fail-expressions-match",
    ),
    pytest.param(
        with_affinity(required(term([expr("foo", "In", "bar")], fields=[name_in("node1")]))),
        {"foo": "bar"},
        "node1",
        None,
        None,
        PreFilterResult(frozenset({"node1"})),
        id="one-term-both-match",
    ),
    pytest.param(
        with_affinity(required(term(fields=[name_in("node1")]), term([expr("foo", "In", "not-match-to-bar")]))),
        {"foo": "bar"},
        "node2",
        None,
        POD_MISMATCH,
        None,
        id="two-terms-neither-matches",
    ),
    pytest.param(
        with_affinity(required(term(fields=[name_in("node1")]), term(fields=[name_in("node2")]))),
        {},
        "node2",
        None,
        None,
        PreFilterResult(frozenset({"node1", "node2"})),
        id="two-terms-of-node-name-affinity",
    ),
    pytest.param(
        with_affinity(required(term(fields=[name_in("node1"), name_in("node2")]))),
        {"foo": "bar"},
        "node2",
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT),
        POD_MISMATCH,
        None,
        id="two-conflicting-match-field-requirements",
    ),
]


@pytest.mark.parametrize(("pod", "labels", "node_name", "want_pre", "want", "want_result"), FILTER_CASES)
def test_filter(
    pod: PodBuilder,
    labels: Mapping[str, str],
    node_name: str,
    want_pre: Status | None,
    want: Status | None,
    want_result: PreFilterResult | None,
) -> None:
    cache, snapshot = make_cluster([make_node(node_name).labels(labels).obj()])
    plugin = NodeAffinity(None, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod.obj())
    pre = plugin.pre_filter(state, info, snapshot.node_infos)
    if isinstance(pre, PreFilterResult):
        assert pre == want_result
    else:
        assert pre == want_pre
        assert want_result is None
    assert filter_nodes(plugin, state, info, snapshot) == [want]
    assert filter_nodes_batch(plugin, state, info, snapshot) == [want]


ADDED_NODE2 = NodeAffinityArgs(added_affinity=required(term(fields=[name_in("node2")])))


@pytest.mark.parametrize(
    ("pod", "args", "want"),
    [
        pytest.param(
            with_affinity(required(term([expr("zone", "In", "foo")]))),
            ADDED_NODE2,
            None,
            id="matches-added-affinity-and-pod-affinity",
        ),
        pytest.param(
            with_affinity(required(term([expr("zone", "In", "bar")]))),
            ADDED_NODE2,
            POD_MISMATCH,
            id="matches-added-affinity-but-not-pod-affinity",
        ),
        pytest.param(
            make_pod(),
            NodeAffinityArgs(added_affinity=required(term([expr("zone", "In", "bar")]))),
            ENFORCED,
            id="does-not-match-added-affinity",
        ),
    ],
)
def test_filter_with_added_affinity(pod: PodBuilder, args: NodeAffinityArgs, want: Status | None) -> None:
    cache, snapshot = make_cluster([make_node("node2").label("zone", "foo").obj()])
    plugin = NodeAffinity(args, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod.obj())
    assert not isinstance(plugin.pre_filter(state, info, snapshot.node_infos), Status)
    assert filter_nodes(plugin, state, info, snapshot) == [want]
    assert filter_nodes_batch(plugin, state, info, snapshot) == [want]


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod().node_selector({"foo": "bar"}), id="node-selector"),
        pytest.param(
            with_affinity(required(term([expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]))),
            id="node-affinity",
        ),
    ],
)
def test_filter_matches_even_if_prefilter_is_not_called(pod: PodBuilder) -> None:
    node = make_node("node").labels({"foo": "bar", "baz": "blah", "GPU": "NVIDIA-GRID-K1"}).obj()
    cache, snapshot = make_cluster([node])
    plugin = NodeAffinity(None, PluginHandle(cache))
    info = PodInfo(pod.obj())
    assert filter_nodes(plugin, CycleState(), info, snapshot) == [None]
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == [None]


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = preferred((2, term([expr("foo", "In", "bar")])))
AFFINITY2 = preferred(
    (2, term([expr("foo", "In", "bar")])),
    (4, term([expr("key", "In", "value")])),
    (5, term([expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")])),
)


@pytest.mark.parametrize(
    "run_pre_score", [pytest.param(True, id="with-prescore"), pytest.param(False, id="without-prescore")]
)
@pytest.mark.parametrize(
    ("pod", "nodes", "args", "want"),
    [
        pytest.param(
            make_pod(),
            [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
            None,
            [0, 0, 0],
            id="all-nodes-same-priority-as-node-affinity-is-nil",
        ),
        pytest.param(
            with_affinity(AFFINITY1),
            [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)],
            None,
            [0, 0, 0],
            id="no-node-matches-preferred-terms",
        ),
        pytest.param(
            with_affinity(AFFINITY1),
            [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
            None,
            [100, 0, 0],
            id="only-node1-matches",
        ),
        pytest.param(
            with_affinity(AFFINITY2),
            [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)],
            None,
            [18, 100, 36],
            id="all-nodes-match-with-different-priorities",
        ),
        pytest.param(
            make_pod(),
            [("node1", LABEL1), ("node2", LABEL2)],
            NodeAffinityArgs(added_affinity=AFFINITY1),
            [100, 0],
            id="added-affinity",
        ),
        pytest.param(
            with_affinity(AFFINITY1),
            [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL5)],
            NodeAffinityArgs(added_affinity=preferred((3, term([expr("key", "In", "value")])))),
            [40, 60, 100],
            id="added-affinity-and-pod-affinity",
        ),
    ],
)
def test_score(
    pod: PodBuilder,
    nodes: list[tuple[str, dict[str, str]]],
    args: NodeAffinityArgs | None,
    want: list[int],
    run_pre_score: bool,
) -> None:
    cache, snapshot = make_cluster([make_node(name).labels(labels).obj() for name, labels in nodes])
    plugin = NodeAffinity(args, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod.obj())
    if run_pre_score:
        status = plugin.pre_score(state, info, snapshot.node_infos)
        if status is not None:
            assert status == Status(Code.SKIP)
            return
    raw = score_nodes(plugin, state, info, snapshot)
    assert score_nodes_batch(plugin, state, info, snapshot) == raw
    assert normalize(plugin, state, info, raw) == want


def test_prescore_skips_without_preferred_terms() -> None:
    plugin = NodeAffinity(None, PluginHandle())
    assert plugin.pre_score(CycleState(), PodInfo(make_pod().obj()), ()) == Status(Code.SKIP)


def test_prescore_reports_a_broken_preferred_term() -> None:
    pod = with_affinity(preferred((2, term([expr("invalid key", "In", "bar")])))).obj()
    status = NodeAffinity(None, PluginHandle()).pre_score(CycleState(), PodInfo(pod), ())
    assert status == Status(
        Code.ERROR,
        '[0].matchExpressions[0].key: Invalid value: "invalid key": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
        "or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    )


def test_preferred_match_fields_are_scored_per_node() -> None:
    pod = with_affinity(preferred((7, term(fields=[name_in("b")])))).obj()
    cache, snapshot = make_cluster([make_node("a").obj(), make_node("b").obj()])
    plugin = NodeAffinity(None, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod)
    assert plugin.pre_score(state, info, snapshot.node_infos) is None
    assert score_nodes(plugin, state, info, snapshot) == score_nodes_batch(plugin, state, info, snapshot) == [0, 7]


WITH_FOO_BAR = with_affinity(required(term([expr("foo", "In", "bar")])))
ADDED_FOO_BAR = NodeAffinityArgs(added_affinity=required(term([expr("foo", "In", "bar")])))


@pytest.mark.parametrize(
    ("args", "old", "new", "want"),
    [
        pytest.param(None, None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(None, "not-a-node", make_node().obj(), QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(None, None, make_node().obj(), QueueingHint.SKIP, id="skip-queue-on-add"),
        pytest.param(None, None, make_node().label("foo", "bar").obj(), QueueingHint.QUEUE, id="queue-on-add"),
        pytest.param(
            None, make_node().obj(), make_node().capacity(cpu="1").obj(), QueueingHint.SKIP, id="skip-unrelated-changes"
        ),
        pytest.param(
            None,
            make_node().obj(),
            make_node().label("k", "v").obj(),
            QueueingHint.SKIP,
            id="skip-unrelated-changes-on-labels",
        ),
        pytest.param(
            None,
            make_node().label("foo", "bar").obj(),
            make_node().label("k", "v").obj(),
            QueueingHint.SKIP,
            id="skip-labels-changes-from-suitable-to-unsuitable",
        ),
        pytest.param(
            None,
            make_node().obj(),
            make_node().label("foo", "bar").obj(),
            QueueingHint.QUEUE,
            id="queue-on-labels-change-makes-pod-schedulable",
        ),
        pytest.param(
            ADDED_FOO_BAR, None, make_node().obj(), QueueingHint.SKIP, id="skip-queue-on-add-scheduler-enforced"
        ),
        pytest.param(
            ADDED_FOO_BAR,
            None,
            make_node().label("foo", "bar").obj(),
            QueueingHint.QUEUE,
            id="queue-on-add-scheduler-enforced",
        ),
    ],
)
def test_is_schedulable_after_node_change(
    args: NodeAffinityArgs | None, old: object, new: object, want: QueueingHint
) -> None:
    plugin = NodeAffinity(args, PluginHandle())
    assert plugin.is_schedulable_after_node_change(WITH_FOO_BAR.obj(), old, new) is want  # type: ignore[arg-type]


def test_validate_added_affinity_reports_every_error_with_its_path() -> None:
    args = NodeAffinityArgs(
        added_affinity={
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr("invalid/label/key", "In", "label-1-val")]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchFields": [name_in("food-1", "food-2")]}}
            ],
        }
    )
    errors = args.validate("")
    assert [(e.type, e.path) for e in errors] == [
        (
            ErrorType.INVALID,
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key",
        ),
        (ErrorType.INVALID, "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values"),
    ]
    with pytest.raises(ValidationFailed):
        NodeAffinity(args, PluginHandle())


@pytest.mark.parametrize(
    "added",
    [
        pytest.param(None, id="empty"),
        pytest.param(required(term([expr("label-1", "In", "label-1-val")])), id="valid-added-affinity"),
        pytest.param(
            {
                **required(term([expr("foo", "In", "bar")])),
                **preferred((1, term(fields=[name_in("node-1")]))),
            },
            id="valid-required-and-preferred",
        ),
    ],
)
def test_validate_added_affinity_accepts_valid_terms(added: dict[str, Any] | None) -> None:
    assert NodeAffinityArgs(added_affinity=added).validate("") == []


def _pod_with_required(raw: Raw) -> Pod:
    return with_affinity(raw).obj()


def test_required_terms_with_bad_gt_values_never_match() -> None:
    pod = _pod_with_required(required(term([expr("n", "Gt", "x")])))
    cache, snapshot = make_cluster([make_node("node").label("n", "5").obj()])
    plugin = NodeAffinity(None, PluginHandle(cache))
    info = PodInfo(pod)
    assert filter_nodes(plugin, CycleState(), info, snapshot) == [POD_MISMATCH]
