"""The framework runtime's runners, table by table, with scripted fake plugins in a real framework.

Each fake plugin implements every extension point and does what the test's script says at each point
(return a status or value, or raise); the framework is built from a real configuration through the real
registry and config loader, so the runners see exactly the plugin lists a profile would give them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import numpy as np
import pytest

from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle, PostFilterResult, PreFilterExtensions
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.runtime.framework import Framework, FrameworkBuildError
from kubesched.framework.runtime.outcomes import ScoreOutcome
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, make_cluster

Runner = Callable[[Coroutine[Any, Any, Any]], Any]

# (plugin, point) -> what the plugin does there: a value to return, or an exception instance to raise.
SCRIPT: dict[tuple[str, str], object] = {}
CALLS: list[str] = []


def act(plugin: str, point: str, default: object = None) -> Any:
    CALLS.append(f"{plugin}.{point}")
    outcome = SCRIPT.get((plugin, point), default)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class _Extensions:
    def __init__(self, plugin: str) -> None:
        self.plugin = plugin

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        result: Status | None = act(self.plugin, "addPod")
        return result

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        result: Status | None = act(self.plugin, "removePod")
        return result


class Scripted:
    """A plugin at every point; what it does comes from SCRIPT."""

    name = "Scripted"

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        result: Status | None = act(self.name, "preEnqueue")
        return result

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        result: PreFilterResult | Status | None = act(self.name, "preFilter")
        return result

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return _Extensions(self.name)

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        outcome = act(self.name, "filter")
        result: Status | None = outcome(node_info) if callable(outcome) else outcome
        return result

    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Any
    ) -> tuple[PostFilterResult | None, Status | None]:
        result: tuple[PostFilterResult | None, Status | None] = act(self.name, "postFilter", (None, None))
        return result

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        result: Status | None = act(self.name, "preScore")
        return result

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        outcome = act(self.name, "score", 0)
        return int(outcome(node_info) if callable(outcome) else outcome)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        outcome = act(self.name, "normalizeScore")
        if outcome == "double":
            scores *= 2
            return None
        result: Status | None = outcome
        return result

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        result: Status | None = act(self.name, "reserve")
        return result

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        act(self.name, "unreserve")

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        result: tuple[Status | None, float] = act(self.name, "permit", (None, 0.0))
        return result

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        result: Status | None = act(self.name, "preBind")
        return result

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        result: Status | None = act(self.name, "bind")
        return result

    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        act(self.name, "postBind")

    async def prefetch_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        result: Status | None = act(self.name, "prefetch")
        return result


class A(Scripted):
    name = "A"


class B(Scripted):
    name = "B"


class C(Scripted):
    name = "C"


class FilterOnly:
    """Declared at filter and score by its registration, but built without a score method."""

    name = "FilterOnly"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return None


def registry() -> Registry:
    extra = {cls.name: PluginRegistration.of(cls.name, cls) for cls in (A, B, C)}
    extra["FilterOnly"] = PluginRegistration(
        "FilterOnly", lambda args, handle: FilterOnly(), extension_points=frozenset({"filter", "score"})
    )
    return merge(in_tree_registry(), extra)


def framework(
    handle: PluginHandle | None = None, *, weights: dict[str, int] | None = None, **points: list[str]
) -> Framework:
    """A profile with only the named plugins at the named points (plus PrioritySort and DefaultBinder)."""
    plugins: dict[str, Any] = {"multiPoint": {"disabled": [{"name": "*"}]}}
    plugins["queueSort"] = {"enabled": [{"name": "PrioritySort"}]}
    plugins["bind"] = {"enabled": [{"name": n} for n in points.pop("bind", ["DefaultBinder"])]}
    for point, names in points.items():
        entries = [
            {"name": n, **({"weight": weights[n]} if weights and n in weights and point == "score" else {})}
            for n in names
        ]
        plugins[point] = {"enabled": entries}
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "plugins": plugins}],
    }
    config = load_config_dict(document, "test", registry())
    return Framework(config.profiles[0], registry(), (handle or PluginHandle()).context)


@pytest.fixture(autouse=True)
def _fresh_script() -> None:
    SCRIPT.clear()
    CALLS.clear()


POD = PodInfo(make_pod("p").req(cpu="100m").obj())


def cluster(*names: str) -> tuple[PluginHandle, Any]:
    cache, snapshot = make_cluster([make_node(n).capacity(cpu="4", memory="8Gi", pods=10).obj() for n in names])
    return PluginHandle(cache), snapshot


# ---- build time ---------------------------------------------------------------------------------


def test_a_plugin_built_without_a_configured_points_method_is_a_build_error() -> None:
    with pytest.raises(FrameworkBuildError) as caught:
        framework(filter=["FilterOnly"], score=["FilterOnly"])
    assert str(caught.value) == 'plugin "FilterOnly" does not extend ScorePlugin plugin'


def test_a_plugin_serving_several_points_is_one_object() -> None:
    fwk = framework(preFilter=["A"], filter=["A"], score=["A"])
    objects: list[object] = [fwk.pre_filter_plugins[0][1], fwk.filter_plugins[0][1], fwk.score_plugins[0].plugin]
    assert all(plugin is fwk.plugins["A"] for plugin in objects)
    assert [name for name, _ in fwk.prefetchers] == ["A"]
    assert fwk.plugins["A"].handle is fwk  # type: ignore[attr-defined]


# ---- PreFilter ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "status", "rejected_by", "calls"),
    [
        pytest.param({}, None, set(), ["A.preFilter", "B.preFilter"], id="all-succeed"),
        pytest.param(
            {("A", "preFilter"): Status(Code.UNSCHEDULABLE, "a says no")},
            Status(Code.UNSCHEDULABLE, "a says no", plugin="A"),
            {"A"},
            ["A.preFilter", "B.preFilter"],
            id="unschedulable-keeps-running-the-rest",
        ),
        pytest.param(
            {("A", "preFilter"): Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never")},
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never", plugin="A"),
            {"A"},
            ["A.preFilter"],
            id="unresolvable-stops-at-once",
        ),
        pytest.param(
            {("B", "preFilter"): Status(Code.ERROR, "disk on fire")},
            Status(Code.ERROR, 'running PreFilter plugin "B": disk on fire', plugin="B"),
            set(),
            ["A.preFilter", "B.preFilter"],
            id="error-is-wrapped",
        ),
        pytest.param(
            {("A", "preFilter"): RuntimeError("kaboom")},
            Status(Code.ERROR, 'running PreFilter plugin "A": kaboom', plugin="A"),
            set(),
            ["A.preFilter"],
            id="raising-is-an-error-status",
        ),
        pytest.param(
            {("A", "preFilter"): Status(Code.WAIT, "later")},
            Status(Code.ERROR, 'running PreFilter plugin "A": later', plugin="A"),
            set(),
            ["A.preFilter"],
            id="wait-is-not-a-prefilter-answer",
        ),
    ],
)
def test_pre_filter(
    script: dict[tuple[str, str], object], status: Status | None, rejected_by: set[str], calls: list[str]
) -> None:
    SCRIPT.update(script)
    handle, snapshot = cluster("n1")
    outcome = framework(handle, preFilter=["A", "B"]).run_pre_filter(CycleState(), POD, snapshot.node_infos)
    assert (outcome.status, outcome.rejected_by, CALLS) == (status, rejected_by, calls)
    if status is not None:
        assert outcome.status is not None and outcome.status.plugin == status.plugin


@pytest.mark.parametrize(
    ("a", "b", "names", "message"),
    [
        pytest.param({"n1", "n2"}, {"n2", "n3"}, frozenset({"n2"}), None, id="results-intersect"),
        pytest.param({"n1"}, None, frozenset({"n1"}), None, id="none-means-all-nodes"),
        pytest.param(
            {"n1"}, {"n2"}, None, "node(s) didn't satisfy plugin(s) [A B] simultaneously", id="empty-intersection"
        ),
        pytest.param(set(), None, None, "node(s) didn't satisfy plugin A", id="one-plugin-allows-nothing"),
    ],
)
def test_pre_filter_results(a: set[str], b: set[str] | None, names: frozenset[str] | None, message: str | None) -> None:
    SCRIPT[("A", "preFilter")] = PreFilterResult(frozenset(a))
    SCRIPT[("B", "preFilter")] = PreFilterResult(frozenset(b) if b is not None else None)
    handle, snapshot = cluster("n1", "n2", "n3")
    outcome = framework(handle, preFilter=["A", "B"]).run_pre_filter(CycleState(), POD, snapshot.node_infos)
    if message is None:
        assert outcome.status is None and outcome.result is not None and outcome.result.node_names == names
    else:
        assert outcome.status is not None
        assert (outcome.status.code, outcome.status.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


def test_pre_filter_skip_skips_the_plugins_filter_and_its_extensions() -> None:
    SCRIPT[("A", "preFilter")] = Status(Code.SKIP)
    SCRIPT[("A", "filter")] = Status(Code.UNSCHEDULABLE, "would reject")
    handle, snapshot = cluster("n1")
    fwk = framework(handle, preFilter=["A", "B"], filter=["A", "B"])
    state = CycleState()
    assert fwk.run_pre_filter(state, POD, snapshot.node_infos).status is None
    assert state.skip_filter_plugins == {"A"}
    info = snapshot.node_infos[0]
    assert fwk.run_filter(state, POD, info) is None
    assert fwk.run_filter_batch(state, POD, batch_of(snapshot)).status_of(0) is None
    assert fwk.run_pre_filter_extension_add_pod(state, POD, POD, info) is None
    assert "A.filter" not in CALLS and "A.addPod" not in CALLS and "B.addPod" in CALLS


# ---- PreFilter extensions -----------------------------------------------------------------------


@pytest.mark.parametrize("which", ["addPod", "removePod"])
@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        pytest.param(RuntimeError("kaboom"), "kaboom", id="raising"),
        pytest.param(Status(Code.UNSCHEDULABLE, "no"), "no", id="non-success"),
    ],
)
def test_pre_filter_extensions_fail_as_errors(which: str, outcome: object, message: str) -> None:
    SCRIPT[("A", which)] = outcome
    handle, snapshot = cluster("n1")
    fwk = framework(handle, preFilter=["A"])
    info = snapshot.node_infos[0]
    run = fwk.run_pre_filter_extension_add_pod if which == "addPod" else fwk.run_pre_filter_extension_remove_pod
    status = run(CycleState(), POD, POD, info)
    label = "AddPod" if which == "addPod" else "RemovePod"
    assert status == Status(Code.ERROR, f'running {label} on PreFilter plugin "A": {message}', plugin="A")


# ---- Filter -------------------------------------------------------------------------------------


def _denies(*names: str) -> Callable[[NodeInfo], Status | None]:
    return lambda info: Status(Code.UNSCHEDULABLE, f"no {info.name}") if info.name in names else None


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param({}, {"n1": None, "n2": None, "n3": None}, id="all-pass"),
        pytest.param(
            {("A", "filter"): lambda: _denies("n1"), ("B", "filter"): lambda: _denies("n1", "n2")},
            {
                "n1": Status(Code.UNSCHEDULABLE, "no n1", plugin="A"),
                "n2": Status(Code.UNSCHEDULABLE, "no n2", plugin="B"),
                "n3": None,
            },
            id="first-rejection-wins",
        ),
        pytest.param(
            {("A", "filter"): Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never")},
            {n: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never", plugin="A") for n in ("n1", "n2", "n3")},
            id="unresolvable",
        ),
    ],
)
def test_filter_per_node_and_batch_agree(
    script: dict[tuple[str, str], object], expected: dict[str, Status | None]
) -> None:
    for key, value in script.items():
        SCRIPT[key] = value() if callable(value) else value
    handle, snapshot = cluster("n1", "n2", "n3")
    fwk = framework(handle, filter=["A", "B"])
    per_node = {info.name: fwk.run_filter(CycleState(), POD, info) for info in snapshot.node_infos}
    outcome = fwk.run_filter_batch(CycleState(), POD, batch_of(snapshot))
    batch = {info.name: outcome.status_of(i) for i, info in enumerate(snapshot.node_infos)}
    # A one-node batch takes the per-node path inside run_filter_batch; it must read the same.
    single = {n: fwk.run_filter_batch(CycleState(), POD, batch_of(snapshot, [n])).status_of(0) for n in per_node}
    assert per_node == batch == single == expected


def test_a_batch_rejection_is_attributed_once_per_status_object_and_keeps_its_cause() -> None:
    handle, _ = cluster("n1")
    fwk = framework(handle, filter=["A"])
    first = Status(Code.UNSCHEDULABLE, "no", cause=ValueError("first"))
    attributed = fwk._attributed(first, "A")
    assert attributed == Status(Code.UNSCHEDULABLE, "no", plugin="A")
    assert attributed.cause is first.cause
    assert fwk._attributed(first, "A") is attributed  # made once
    second = Status(Code.UNSCHEDULABLE, "no", cause=ValueError("second"))  # equal to the first, another cause
    assert fwk._attributed(second, "A").cause is second.cause


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        pytest.param(RuntimeError("kaboom"), 'running "A" filter plugin: kaboom', id="raising"),
        pytest.param(Status(Code.ERROR, "broken"), 'running "A" filter plugin: broken', id="error"),
        pytest.param(Status(Code.SKIP), 'running "A" filter plugin: ', id="skip-is-not-a-filter-answer"),
        pytest.param(Status(Code.WAIT, "later"), 'running "A" filter plugin: later', id="wait-is-not-a-filter-answer"),
    ],
)
def test_filter_failures_are_errors_on_both_paths(outcome: object, message: str) -> None:
    SCRIPT[("A", "filter")] = outcome
    handle, snapshot = cluster("n1", "n2")
    fwk = framework(handle, filter=["A"])
    assert fwk.run_filter(CycleState(), POD, snapshot.node_infos[0]) == Status(Code.ERROR, message, plugin="A")
    batch = fwk.run_filter_batch(CycleState(), POD, batch_of(snapshot))
    assert batch.error == Status(Code.ERROR, message, plugin="A")
    single = fwk.run_filter_batch(CycleState(), POD, batch_of(snapshot, ["n2"]))
    assert single.error == Status(Code.ERROR, message, plugin="A")


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        pytest.param(None, None, id="success"),
        pytest.param(
            RuntimeError("kaboom"), Status(Code.ERROR, 'running "A" filter plugin: kaboom', plugin="A"), id="raising"
        ),
        pytest.param(
            Status(Code.UNSCHEDULABLE, "nope"), Status(Code.ERROR, "nope", plugin="A"), id="a-rejection-is-an-error"
        ),
        pytest.param(Status(Code.ERROR, "down"), Status(Code.ERROR, "down", plugin="A"), id="error"),
    ],
)
def test_prefetch(run_async: Runner, outcome: object, expected: Status | None) -> None:
    SCRIPT[("A", "prefetch")] = outcome
    handle, snapshot = cluster("n1")
    fwk = framework(handle, filter=["A"])
    assert run_async(fwk.run_prefetch(CycleState(), POD, batch_of(snapshot))) == expected


# ---- nominated pods -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("priority", "fits"),
    [
        pytest.param(10, False, id="higher-priority-nominated-pod-takes-the-room"),
        pytest.param(0, False, id="equal-priority-nominated-pod-takes-the-room"),
        pytest.param(-5, True, id="lower-priority-nominated-pod-is-ignored"),
    ],
)
def test_filter_with_nominated_pods_runs_two_passes(priority: int, fits: bool) -> None:
    cache, snapshot = make_cluster([make_node("n1").capacity(cpu="2", memory="8Gi", pods=10).obj()])
    handle = PluginHandle(cache)
    nominated = PodInfo(make_pod("big").uid("big").req(cpu="1500m").priority(priority).obj())
    handle.nominator.add_nominated_pod(nominated, "n1")
    fwk = framework(handle, preFilter=["NodeResourcesFit", "A"], filter=["NodeResourcesFit"])
    pod = PodInfo(make_pod("p").req(cpu="1").obj())
    state = CycleState()
    assert fwk.run_pre_filter(state, pod, snapshot.node_infos).status is None
    status = fwk.run_filter_plugins_with_nominated_pods(state, pod, snapshot.node_infos[0])
    assert (status is None) == fits
    if not fits:
        assert status is not None and status.reasons == ("Insufficient cpu",)
        assert "A.addPod" in CALLS, "PreFilter extensions learn about the nominated pod"
    assert fwk.run_filter(state, pod, snapshot.node_infos[0]) is None, "without nominations the pod fits"


def test_nominated_pod_add_pod_failure_is_an_error() -> None:
    SCRIPT[("A", "addPod")] = RuntimeError("kaboom")
    handle, snapshot = cluster("n1")
    handle.nominator.add_nominated_pod(PodInfo(make_pod("other").uid("o").obj()), "n1")
    fwk = framework(handle, preFilter=["A"], filter=["A"])
    status = fwk.run_filter_plugins_with_nominated_pods(CycleState(), POD, snapshot.node_infos[0])
    assert status == Status(Code.ERROR, 'running AddPod on PreFilter plugin "A": kaboom', plugin="A")


# ---- PostFilter ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "nominated", "status"),
    [
        pytest.param(
            {("A", "postFilter"): (PostFilterResult("n1"), None)},
            "n1",
            Status(Code.SUCCESS),
            id="success-stops-with-its-result",
        ),
        pytest.param(
            {
                ("A", "postFilter"): (PostFilterResult("n1"), Status(Code.UNSCHEDULABLE, "a: no")),
                ("B", "postFilter"): (None, Status(Code.UNSCHEDULABLE, "b: no")),
            },
            "n1",
            Status(Code.UNSCHEDULABLE, "a: no", "b: no"),
            id="unschedulable-tries-the-next-and-keeps-the-last-nomination",
        ),
        pytest.param(
            {("A", "postFilter"): (None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never"))},
            None,
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never"),
            id="unresolvable-stops",
        ),
        pytest.param(
            {("A", "postFilter"): RuntimeError("kaboom")},
            None,
            Status(Code.ERROR, 'running PostFilter plugin "A": kaboom'),
            id="raising",
        ),
        pytest.param(
            {("A", "postFilter"): (None, Status(Code.ERROR, "not found"))},
            None,
            Status(Code.ERROR, "not found"),
            id="error-status-keeps-the-plugins-text",
        ),
    ],
)
def test_post_filter(script: dict[tuple[str, str], object], nominated: str | None, status: Status) -> None:
    SCRIPT.update(script)
    result, got = framework(postFilter=["A", "B"]).run_post_filter(CycleState(), POD, {})
    assert (result.nominated_node_name if result else None, got.code, got.message) == (
        nominated,
        status.code,
        status.message,
    )


# ---- PreScore and Score -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "status", "skipped"),
    [
        pytest.param(None, None, set(), id="success"),
        pytest.param(Status(Code.SKIP), None, {"A"}, id="skip-skips-its-score"),
        pytest.param(
            Status(Code.UNSCHEDULABLE, "no"), 'running PreScore plugin "A": no', set(), id="rejection-is-error"
        ),
        pytest.param(RuntimeError("kaboom"), 'running PreScore plugin "A": kaboom', set(), id="raising"),
    ],
)
def test_pre_score(outcome: object, status: str | None, skipped: set[str]) -> None:
    SCRIPT[("A", "preScore")] = outcome
    state = CycleState()
    got = framework(preScore=["A"]).run_pre_score(state, POD, [])
    assert (got.message if got else None, state.skip_score_plugins) == (status, skipped)
    if got is not None:
        assert got.code is Code.ERROR


def test_score_weights_normalization_and_skip() -> None:
    handle, snapshot = cluster("n1", "n2", "n3")
    SCRIPT[("A", "score")] = lambda info: {"n1": 10, "n2": 20, "n3": 30}[info.name]
    SCRIPT[("B", "score")] = lambda info: 5
    SCRIPT[("B", "normalizeScore")] = "double"
    SCRIPT[("C", "score")] = 100
    fwk = framework(handle, score=["A", "B", "C"], weights={"A": 3, "B": 1, "C": 7})
    state = CycleState()
    state.skip_score_plugins.add("C")
    outcome = fwk.run_score(state, POD, batch_of(snapshot))
    assert isinstance(outcome, ScoreOutcome)
    assert {name: scores.tolist() for name, scores in outcome.per_plugin.items()} == {
        "A": [10, 20, 30],
        "B": [10, 10, 10],
    }
    assert outcome.totals.tolist() == [40, 70, 100]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        pytest.param({("A", "score"): RuntimeError("kaboom")}, 'plugin "A" failed with: kaboom', id="raising"),
        pytest.param(
            {("A", "score"): 101},
            'plugin "A" returns an invalid score 101, it should in the range of [0, 100] after normalizing',
            id="out-of-range",
        ),
        pytest.param(
            {("A", "score"): 1, ("A", "normalizeScore"): Status(Code.ERROR, "bad")},
            'plugin "A" failed with: bad',
            id="normalize-fails",
        ),
    ],
)
def test_score_failures(script: dict[tuple[str, str], object], message: str) -> None:
    SCRIPT.update(script)
    handle, snapshot = cluster("n1", "n2")
    outcome = framework(handle, score=["A"]).run_score(CycleState(), POD, batch_of(snapshot))
    assert isinstance(outcome, Status) and (outcome.code, outcome.message) == (Code.ERROR, message)


# ---- Reserve and Permit -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "status", "calls"),
    [
        pytest.param({}, None, ["A.reserve", "B.reserve"], id="all-reserve"),
        pytest.param(
            {("A", "reserve"): Status(Code.UNSCHEDULABLE, "full")},
            Status(Code.UNSCHEDULABLE, "full", plugin="A"),
            ["A.reserve"],
            id="rejection-stops",
        ),
        pytest.param(
            {("B", "reserve"): RuntimeError("kaboom")},
            Status(Code.ERROR, 'running Reserve plugin "B": kaboom', plugin="B"),
            ["A.reserve", "B.reserve"],
            id="raising",
        ),
    ],
)
def test_reserve(script: dict[tuple[str, str], object], status: Status | None, calls: list[str]) -> None:
    SCRIPT.update(script)
    got = framework(reserve=["A", "B"]).run_reserve(CycleState(), POD, "n1")
    assert (got, CALLS) == (status, calls)
    if got is not None:
        assert got.plugin == status.plugin  # type: ignore[union-attr]


def test_unreserve_runs_in_reverse_and_survives_a_raising_plugin() -> None:
    SCRIPT[("B", "unreserve")] = RuntimeError("kaboom")
    framework(reserve=["A", "B", "C"]).run_unreserve(CycleState(), POD, "n1")
    assert CALLS == ["C.unreserve", "B.unreserve", "A.unreserve"]


@pytest.mark.parametrize(
    ("script", "status"),
    [
        pytest.param(
            {("A", "permit"): (Status(Code.UNSCHEDULABLE, "no"), 0.0)}, Status(Code.UNSCHEDULABLE, "no"), id="reject"
        ),
        pytest.param(
            {("A", "permit"): RuntimeError("kaboom")},
            Status(Code.ERROR, 'running Permit plugin "A": kaboom'),
            id="raising",
        ),
        pytest.param(
            {("A", "permit"): (Status(Code.SKIP), 0.0)}, Status(Code.ERROR, 'running Permit plugin "A": '), id="skip"
        ),
    ],
)
def test_permit_failures(run_async: Runner, script: dict[tuple[str, str], object], status: Status) -> None:
    SCRIPT.update(script)

    async def scenario() -> None:
        got = framework(permit=["A", "B"]).run_permit(CycleState(), POD, "n1")
        assert got is not None and (got.code, got.message, got.plugin) == (status.code, status.message, "A")
        assert "B.permit" not in CALLS

    run_async(scenario())


@pytest.mark.parametrize(
    ("decide", "expected"),
    [
        pytest.param("allow", None, id="allowed-by-every-waiting-plugin"),
        pytest.param("reject", Status(Code.UNSCHEDULABLE, "not today", plugin="B"), id="rejected-by-one"),
        pytest.param(
            "timeout",
            Status(Code.UNSCHEDULABLE, "rejected due to timeout after waiting 15m0s at plugin A", plugin="A"),
            id="times-out-at-the-15-minute-cap",
        ),
    ],
)
def test_permit_wait(run_async: Runner, decide: str, expected: Status | None) -> None:
    SCRIPT[("A", "permit")] = (Status(Code.WAIT), 3600.0)  # capped at 15 minutes
    SCRIPT[("B", "permit")] = (Status(Code.WAIT), 3600.0)
    handle = PluginHandle()
    clock = handle.clock

    async def scenario() -> None:
        fwk = framework(handle, permit=["A", "B"])
        status = fwk.run_permit(CycleState(), POD, "n1")
        assert status is not None and status.code is Code.WAIT
        waiting = fwk.get_waiting_pod(POD.uid)
        assert waiting is not None and sorted(waiting.pending_plugins()) == ["A", "B"]
        outcome = asyncio.ensure_future(fwk.wait_on_permit(POD))
        await asyncio.sleep(0)
        if decide == "allow":
            waiting.allow("A")
            waiting.allow("B")
        elif decide == "reject":
            waiting.reject("B", "not today")
        else:
            clock.advance(899)  # type: ignore[attr-defined]
            await asyncio.sleep(0)
            assert not outcome.done()
            clock.advance(1)  # type: ignore[attr-defined]
        assert await outcome == expected
        assert fwk.get_waiting_pod(POD.uid) is None

    run_async(scenario())


# ---- the binding cycle --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "status", "calls"),
    [
        pytest.param(
            {("A", "bind"): Status(Code.SKIP)}, None, ["A.preBind", "A.bind", "B.bind"], id="skip-passes-to-next-binder"
        ),
        pytest.param(
            {("A", "bind"): Status(Code.SKIP), ("B", "bind"): Status(Code.SKIP)},
            Status(Code.SKIP, "all bind plugins skipped"),
            ["A.preBind", "A.bind", "B.bind"],
            id="all-skip",
        ),
        pytest.param(
            {("A", "preBind"): Status(Code.UNSCHEDULABLE, "volume gone")},
            Status(Code.UNSCHEDULABLE, "volume gone", plugin="A"),
            ["A.preBind"],
            id="prebind-rejection",
        ),
        pytest.param(
            {("A", "preBind"): RuntimeError("kaboom")},
            Status(Code.ERROR, 'running PreBind plugin "A": kaboom', plugin="A"),
            ["A.preBind"],
            id="prebind-raising",
        ),
        pytest.param(
            {("A", "bind"): RuntimeError("api down")},
            Status(Code.ERROR, 'running Bind plugin "A": api down', plugin="A"),
            ["A.preBind", "A.bind"],
            id="bind-raising",
        ),
    ],
)
def test_pre_bind_and_bind(
    run_async: Runner, script: dict[tuple[str, str], object], status: Status | None, calls: list[str]
) -> None:
    SCRIPT.update(script)

    async def scenario() -> Status | None:
        fwk = framework(preBind=["A"], bind=["A", "B"])
        got = await fwk.run_pre_bind(CycleState(), POD, "n1")
        if got is None:
            got = await fwk.run_bind(CycleState(), POD, "n1")
        return got

    got = run_async(scenario())
    assert (got, CALLS) == (status, calls)
    if got is not None and status is not None:
        assert got.plugin == status.plugin


def test_post_bind_failure_is_logged_not_raised(run_async: Runner, caplog: pytest.LogCaptureFixture) -> None:
    SCRIPT[("A", "postBind")] = RuntimeError("kaboom")
    run_async(framework(postBind=["A", "B"]).run_post_bind(CycleState(), POD, "n1"))
    assert CALLS == ["A.postBind", "B.postBind"]
    assert "PostBind plugin A failed" in caplog.text


# ---- PreEnqueue ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        pytest.param(None, None, id="admitted"),
        pytest.param(Status(Code.UNSCHEDULABLE, "gated"), Status(Code.UNSCHEDULABLE, "gated", plugin="A"), id="gated"),
        pytest.param(RuntimeError("kaboom"), Status(Code.ERROR, "kaboom", plugin="A"), id="raising"),
    ],
)
def test_pre_enqueue(outcome: object, status: Status | None) -> None:
    SCRIPT[("A", "preEnqueue")] = outcome
    got = framework(preEnqueue=["A"]).run_pre_enqueue(POD)
    assert got == status
    if got is not None:
        assert got.plugin == "A"


def test_batch_of_one_node_matches_the_table() -> None:
    _, snapshot = cluster("n1", "n2")
    info = snapshot.by_name["n2"]
    one = NodeBatch(snapshot.table, np.asarray([info.slot], dtype=np.int64))
    assert one.infos == [info]


class BrokenSort:
    name = "BrokenSort"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def less(self, a: Any, b: Any) -> bool:
        raise RuntimeError("kaboom")

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return None

    def events_to_register(self) -> list[Any]:
        raise RuntimeError("kaboom")


def test_a_raising_queue_sort_falls_back_to_arrival_order_and_broken_hints_to_every_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = merge(registry(), {"BrokenSort": PluginRegistration.of("BrokenSort", BrokenSort)})
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "*"}]},
                    "queueSort": {"enabled": [{"name": "BrokenSort"}]},
                    "filter": {"enabled": [{"name": "BrokenSort"}]},
                    "bind": {"enabled": [{"name": "DefaultBinder"}]},
                },
            }
        ],
    }
    fwk = Framework(load_config_dict(document, "test", reg).profiles[0], reg, PluginHandle().context)
    from kubesched.framework.interface import QueuedPodInfo

    early, late = QueuedPodInfo(POD, timestamp=1.0), QueuedPodInfo(POD, timestamp=2.0)
    assert fwk.less(early, late) and not fwk.less(late, early)
    assert fwk.events_to_register() == {"BrokenSort": None}
    assert "QueueSort plugin BrokenSort failed" in caplog.text
