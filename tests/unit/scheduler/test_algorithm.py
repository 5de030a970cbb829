from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle, truncate_event_message
from kubesched.framework.node_table import BatchFilterResult, NodeBatch
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.registry import PluginRegistration, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.algorithm import FitError, ScheduleAlgorithm, num_feasible_nodes_to_find, wrapped_slice
from kubesched.scheduler.diagnosis import NO_NODES_AVAILABLE, Diagnosis, RejectedNodes, fit_error_message
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        pytest.param(0, 10, 10, id="fewer-than-100-nodes-all"),
        pytest.param(0, 99, 99, id="99-nodes-all"),
        pytest.param(0, 100, 100, id="100-nodes-50-percent-floored-at-100"),
        pytest.param(0, 1000, 420, id="1000-nodes-42-percent"),
        pytest.param(0, 5000, 500, id="5000-nodes-10-percent"),
        pytest.param(0, 6000, 300, id="6000-nodes-floor-5-percent"),
        pytest.param(0, 15000, 750, id="15000-nodes-5-percent"),
        pytest.param(50, 1000, 500, id="explicit-50-percent"),
        pytest.param(1, 1000, 100, id="explicit-1-percent-floored-at-100"),
        pytest.param(100, 5000, 5000, id="explicit-100-percent"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_wrapped_slice_is_the_round_robin_walk(data: st.DataObject) -> None:
    """The node search's next stretch of candidates, as the modular index it replaces would pick it."""
    n = data.draw(st.integers(1, 40))
    slots = np.asarray(data.draw(st.permutations(range(100)))[:n], dtype=np.int64)
    first = data.draw(st.integers(0, 200))
    count = data.draw(st.integers(0, n))
    got = wrapped_slice(slots, first, count)
    assert got.tolist() == slots[(first + np.arange(count)) % n].tolist()
    assert got.dtype == np.int64
    got[:] = -1  # a copy: the caller may keep it while the snapshot's slot array changes
    assert (slots >= 0).all()


def test_fit_error_message_sorts_histogram_as_strings_and_counts_each_reason() -> None:
    fit = Status(Code.UNSCHEDULABLE, "Insufficient cpu", "Insufficient memory", plugin="NodeResourcesFit")
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)")
    cpu = Status(Code.UNSCHEDULABLE, "Insufficient cpu")
    statuses = {f"n{i}": cpu for i in range(10)} | {"a": fit, "b": fit, "t": taint}
    message = fit_error_message(13, Diagnosis(node_to_status=RejectedNodes(statuses)))
    assert message == (
        "0/13 nodes are available: 1 node(s) had untolerated taint(s), 12 Insufficient cpu, 2 Insufficient memory."
    )


def test_fit_error_message_string_sort_puts_10_before_2() -> None:
    statuses = {f"c{i}": Status(Code.UNSCHEDULABLE, "Insufficient cpu") for i in range(10)}
    statuses |= {f"m{i}": Status(Code.UNSCHEDULABLE, "Too many pods") for i in range(2)}
    statuses |= {f"x{i}": Status(Code.UNSCHEDULABLE, "Insufficient memory") for i in range(2)}
    message = fit_error_message(14, Diagnosis(node_to_status=RejectedNodes(statuses)))
    assert message == "0/14 nodes are available: 10 Insufficient cpu, 2 Insufficient memory, 2 Too many pods."


def test_fit_error_message_prefilter_and_postfilter() -> None:
    diagnosis = Diagnosis(pre_filter_msg="pod affinity terms conflict", post_filter_msg="preemption: not eligible")
    assert fit_error_message(3, diagnosis) == (
        "0/3 nodes are available: pod affinity terms conflict. preemption: not eligible"
    )


def test_fit_error_message_post_filter_reasons_follow_the_summary_unchanged() -> None:
    """v1.35: the PostFilter message gets no full stop of its own (the oracle prints exactly this)."""
    statuses = {"a": Status(Code.UNSCHEDULABLE, "Insufficient cpu")}
    diagnosis = Diagnosis(node_to_status=RejectedNodes(statuses), post_filter_msg="no new claims to deallocate")
    assert fit_error_message(1, diagnosis) == "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate"


def test_fit_error_message_without_nodes_is_the_bare_error() -> None:
    assert fit_error_message(0, Diagnosis(pre_filter_msg=NO_NODES_AVAILABLE)) == "no nodes available to schedule pods"


def test_fit_error_message_counts_absent_nodes() -> None:
    diagnosis = Diagnosis(
        node_to_status=RejectedNodes({"a": Status(Code.UNSCHEDULABLE, "Insufficient cpu")}),
        absent_nodes_status=Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't satisfy plugin(s) [NodeAffinity]"
        ),
        absent_node_count=4,
    )
    assert fit_error_message(5, diagnosis) == (
        "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_event_message_truncated_to_1024() -> None:
    assert truncate_event_message("x" * 1024) == "x" * 1024
    long = truncate_event_message("y" * 2000)
    assert len(long) == 1024 and long.endswith(" ...") and long.startswith("y" * 1020)


# ---- the node search ------------------------------------------------------------------------------

REJECTED: set[str] = set()
LOG: list[tuple[str, tuple[int, ...]]] = []


class RejectSome:
    """Batch Filter rejecting the nodes named in REJECTED; logs every prefetch and filter batch by slots
    (a one-node batch as the per-node call it becomes)."""

    name = "RejectSome"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    async def prefetch_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        LOG.append(("prefetch", tuple(nodes.slots.tolist())))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        # A one-node batch is filtered node by node (Framework.run_filter_batch): it is logged as a batch.
        LOG.append(("filter", (node_info.slot,)))
        return Status(Code.UNSCHEDULABLE, "rejected") if node_info.name in REJECTED else None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        LOG.append(("filter", tuple(nodes.slots.tolist())))
        codes = np.fromiter((info.name in REJECTED for info in nodes.infos), dtype=np.int64, count=len(nodes))
        return BatchFilterResult(codes, [Status(Code.UNSCHEDULABLE, "rejected")])

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return 0


def _framework(handle: PluginHandle, percentage: int | None = None) -> Framework:
    registry = merge(in_tree_registry(), {"RejectSome": PluginRegistration.of("RejectSome", RejectSome)})
    profile: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "plugins": {
            "multiPoint": {"disabled": [{"name": "*"}]},
            "queueSort": {"enabled": [{"name": "PrioritySort"}]},
            "filter": {"enabled": [{"name": "RejectSome"}]},
            "score": {"enabled": [{"name": "RejectSome"}]},
            "bind": {"enabled": [{"name": "DefaultBinder"}]},
        },
    }
    if percentage is not None:
        profile["percentageOfNodesToScore"] = percentage
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }
    config = load_config_dict(document, "test", registry)
    return Framework(config.profiles[0], registry, handle.context)


def _reference_search(order: list[str], start: int, to_find: int) -> tuple[list[str], int]:
    """kube-scheduler's sequential search: from ``start`` round-robin until ``to_find`` nodes pass."""
    feasible: list[str] = []
    processed = 0
    for offset in range(len(order)):
        if len(feasible) >= to_find:
            break
        name = order[(start + offset) % len(order)]
        processed += 1
        if name not in REJECTED:
            feasible.append(name)
    return feasible, processed


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 700),
    rejected=st.sets(st.integers(0, 699)),
    start=st.integers(0, 10_000),
    percentage=st.one_of(st.none(), st.integers(1, 100)),
)
def test_chunked_search_finds_what_the_sequential_search_finds(
    count: int, rejected: set[int], start: int, percentage: int | None
) -> None:
    REJECTED.clear()
    REJECTED.update(f"n{i}" for i in rejected if i < count)
    LOG.clear()
    cache, snapshot = make_cluster(
        [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(count)]
    )
    fwk = _framework(PluginHandle(cache), percentage)
    algorithm = ScheduleAlgorithm(0, random.Random(0))
    algorithm.next_start_node_index = start
    order = [info.name for info in snapshot.node_infos]
    to_find = num_feasible_nodes_to_find(percentage if percentage is not None else 0, count)
    want, processed = _reference_search(order, start % count, to_find)
    pod = PodInfo(make_pod("p").obj())
    try:
        result = asyncio.run(algorithm.schedule_pod(fwk, CycleState(), pod, snapshot, frozenset()))
    except FitError as err:
        assert want == []
        assert set(err.diagnosis.node_to_status) == REJECTED
    else:
        assert list(result.scored_nodes or [result.node]) == want
        assert result.evaluated_nodes == processed
        assert set(result.node_to_status) == {
            n for n in REJECTED if order.index(n) in _visited(order, start, processed)
        }
    assert algorithm.next_start_node_index == (start % count + processed) % count
    # Every batch is prefetched right before it is filtered, and no node is filtered twice.
    assert [kind for kind, _ in LOG] == ["prefetch", "filter"] * (len(LOG) // 2)
    assert all(LOG[i][1] == LOG[i + 1][1] for i in range(0, len(LOG), 2))
    filtered = [slot for kind, slots in LOG if kind == "filter" for slot in slots]
    assert len(filtered) == len(set(filtered))


def _visited(order: list[str], start: int, processed: int) -> set[int]:
    return {(start % len(order) + i) % len(order) for i in range(processed)}


def test_round_robin_start_moves_on_by_the_nodes_each_search_processed() -> None:
    REJECTED.clear()
    REJECTED.update({"n3", "n250"})
    cache, snapshot = make_cluster(
        [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(300)]
    )
    fwk = _framework(PluginHandle(cache))
    algorithm = ScheduleAlgorithm(0, random.Random(0))
    starts = []
    for _ in range(4):
        starts.append(algorithm.next_start_node_index)
        asyncio.run(algorithm.schedule_pod(fwk, CycleState(), PodInfo(make_pod("p").obj()), snapshot, frozenset()))
    # 300 nodes: 144 to find; each search meets one rejected node (n3, n250, n3 again), so processes 145.
    assert starts == [0, 145, 290, 135]


def test_nominated_node_is_tried_first_and_rechecked_with_its_nominated_pods() -> None:
    REJECTED.clear()
    cache, snapshot = make_cluster(
        [make_node(f"n{i}").capacity(cpu="2", memory="8Gi", pods=10).obj() for i in range(3)]
    )
    handle = PluginHandle(cache)
    registry = in_tree_registry()
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler"}],
    }
    fwk = Framework(load_config_dict(document, "test", registry).profiles[0], registry, handle.context)
    # A higher-priority pod nominated to n1 takes its CPU; the pod must not be placed there.
    handle.nominator.add_nominated_pod(PodInfo(make_pod("vip").uid("vip").req(cpu="1500m").priority(100).obj()), "n1")
    algorithm = ScheduleAlgorithm(0, random.Random(0))
    pod = PodInfo(make_pod("p").req(cpu="1").obj())
    result = asyncio.run(algorithm.schedule_pod(fwk, CycleState(), pod, snapshot, frozenset({"n1"})))
    assert result.node != "n1" and result.node_to_status["n1"].reasons == ("Insufficient cpu",)
    # Its own nomination is tried first and taken without scoring when it fits.
    nominated = PodInfo(make_pod("p").req(cpu="1").nominated("n2").obj())
    result = asyncio.run(algorithm.schedule_pod(fwk, CycleState(), nominated, snapshot, frozenset({"n1"})))
    assert (result.node, result.evaluated_nodes, result.totals) == ("n2", 1, None)


CODES: dict[str, tuple[np.ndarray[Any, Any], list[Status]]] = {}


class FixedCodes:
    """Batch Filter answering with the codes and statuses set in CODES for its name (the same array object every
    time, as a plugin that keeps its answers may give it)."""

    name = ""

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        codes, statuses = CODES[self.name]
        code = int(codes[node_info.slot])
        return statuses[code - 1] if code else None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        codes, statuses = CODES[self.name]
        return BatchFilterResult(codes, statuses)


class First(FixedCodes):
    name = "First"


class Second(FixedCodes):
    name = "Second"


def _fixed_codes_framework(handle: PluginHandle) -> Framework:
    registry = merge(
        in_tree_registry(),
        {"First": PluginRegistration.of("First", First), "Second": PluginRegistration.of("Second", Second)},
    )
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "*"}]},
                    "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                    "filter": {"enabled": [{"name": "First"}, {"name": "Second"}]},
                    "bind": {"enabled": [{"name": "DefaultBinder"}]},
                },
            }
        ],
    }
    config = load_config_dict(document, "test", registry)
    return Framework(config.profiles[0], registry, handle.context)


NO = Status(Code.UNSCHEDULABLE, "no")
NEVER = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never")
BROKEN = Status(Code.ERROR, "broken")


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param(
            ([1, 0, 0, 0], [NO]),
            ([0, 1, 2, 0], [NEVER, NO]),
            [NO.with_plugin("First"), NEVER.with_plugin("Second"), NO.with_plugin("Second"), None],
            id="one-status-first-then-two",
        ),
        pytest.param(
            ([0, 0, 0, 0], [BROKEN]),
            ([0, 0, 1, 0], [NO]),
            [None, None, NO.with_plugin("Second"), None],
            id="an-unused-error-status-is-no-error",
        ),
        pytest.param(
            ([0, 1, 0, 0], [BROKEN]),
            ([0, 0, 0, 0], []),
            'running "First" filter plugin: broken',
            id="a-used-error-status-is-an-error",
        ),
        pytest.param(
            ([0, 0, 0, 0], [NO]),
            ([1, 0, 0, 1], [NO]),
            [NO.with_plugin("Second"), None, None, NO.with_plugin("Second")],
            id="one-status-unused-then-another",
        ),
    ],
)
def test_batch_filter_statuses_equal_the_per_node_path_and_leave_the_plugins_codes_alone(
    first: tuple[list[int], list[Status]], second: tuple[list[int], list[Status]], expected: list[Status | None] | str
) -> None:
    cache, snapshot = make_cluster([make_node(f"n{i}").obj() for i in range(4)])
    for name, (codes, statuses) in (("First", first), ("Second", second)):
        by_slot = np.zeros(len(codes), dtype=np.int64)
        by_slot[[info.slot for info in snapshot.node_infos]] = codes
        CODES[name] = (by_slot, statuses)
    kept = {name: codes.copy() for name, (codes, _) in CODES.items()}
    fwk = _fixed_codes_framework(PluginHandle(cache))
    pod = PodInfo(make_pod("p").obj())
    batch = NodeBatch(snapshot.table, np.asarray([info.slot for info in snapshot.node_infos], dtype=np.int64))
    outcome = fwk.run_filter_batch(CycleState(), pod, batch)
    per_node = [fwk.run_filter(CycleState(), pod, info) for info in snapshot.node_infos]
    if isinstance(expected, str):
        assert outcome.error is not None and outcome.error.message == expected
        assert per_node[1] is not None and per_node[1].message == expected
    else:
        assert outcome.error is None
        assert [outcome.status_of(i) for i in range(len(batch))] == per_node == expected
    assert all((CODES[name][0] == codes).all() for name, codes in kept.items()), "a plugin's codes were written"


def test_a_tie_breaker_chooses_among_the_tied_nodes_only() -> None:
    """Three identical nodes tie; the tie breaker sees them all, and its answer is taken when it names one of
    them. An answer naming no tied node (or None) leaves the choice to the seeded random source."""
    REJECTED.clear()
    cache, snapshot = make_cluster(
        [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(3)]
    )
    fwk = _framework(PluginHandle(cache))
    asked: list[tuple[str, list[str]]] = []
    answers = {"a": "n2", "b": "elsewhere"}

    def tie_breaker(pod: PodInfo, tied: Sequence[str]) -> str | None:
        asked.append((pod.name, list(tied)))
        return answers.get(pod.name)

    chosen = {}
    for name in ("a", "b", "c"):
        algorithm = ScheduleAlgorithm(0, random.Random(0), tie_breaker)
        pod = PodInfo(make_pod(name).obj())
        chosen[name] = asyncio.run(algorithm.schedule_pod(fwk, CycleState(), pod, snapshot, frozenset())).node
    unbroken = ScheduleAlgorithm(0, random.Random(0))
    seeded = asyncio.run(unbroken.schedule_pod(fwk, CycleState(), PodInfo(make_pod("b").obj()), snapshot, frozenset()))
    assert [sorted(tied) for _, tied in asked] == [["n0", "n1", "n2"]] * 3
    assert seeded.node != "n2"  # so that "a" placed on n2 is the tie breaker's doing
    assert chosen["a"] == "n2"
    assert chosen["b"] == chosen["c"] == seeded.node
