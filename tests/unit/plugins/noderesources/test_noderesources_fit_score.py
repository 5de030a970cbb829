"""NodeResourcesFit scoring strategies against kube-scheduler's tables: fit_test.go TestFitScore,
least_allocated_test.go, most_allocated_test.go and requested_to_capacity_ratio_test.go (including
TestBrokenLinearFunction and the bin-packing tables), per node and in batch.

Upstream builds "empty" pods without containers, which request nothing even after the non-zero defaults;
kubesched pods always have a container, so those pods are written with explicit zero requests (an
explicit 0 is not defaulted), which asks for exactly the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.types import PodInfo
from kubesched.plugins.noderesources import (
    Fit,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.plugins.noderesources.args import LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO
from kubesched.plugins.noderesources.resource_allocation import RequestedToCapacityRatio
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster, score_nodes, score_nodes_batch

EXTENDED = "abc.com/xyz"
DEFAULT_RESOURCES = (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))
EXTENDED_SET = (*DEFAULT_RESOURCES, ResourceSpec(name=EXTENDED, weight=1))


def empty_pod(name: str = "pod") -> PodBuilder:
    return make_pod(name).req(cpu="0", memory="0")


def node(name: str, cpu: str, memory: str, extra: Mapping[str, str | int] | None = None) -> Node:
    """st.MakeNode().Capacity({...}): quantities as upstream writes them ("4000" cpu = 4000 cores)."""
    return make_node(name).capacity(dict(extra or {}), cpu=cpu, memory=memory).obj()


def on(node_name: str, builder: PodBuilder, index: int) -> PodBuilder:
    return builder.name(f"{node_name}-pod-{index}").node_name(node_name)


def run_score(
    strategy: ScoringStrategy,
    pod: PodBuilder,
    nodes: Sequence[Node],
    existing: Sequence[PodBuilder] = (),
    *,
    run_pre_score: bool = True,
) -> tuple[list[int], list[int]]:
    pods = [b.obj() for b in existing]
    cache, snapshot = make_cluster(nodes, pods)
    plugin = Fit(NodeResourcesFitArgs(scoring_strategy=strategy), PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod.obj())
    if run_pre_score:
        assert plugin.pre_score(state, info, snapshot.node_infos) is None
    return score_nodes(plugin, state, info, snapshot), score_nodes_batch(plugin, state, info, snapshot)


def two_containers() -> PodBuilder:
    return make_pod().container(cpu="1000", memory="2000").container(cpu="2000", memory="3000")


def rtcr(shape: Sequence[tuple[int, int]], resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES) -> ScoringStrategy:
    return ScoringStrategy(
        type=REQUESTED_TO_CAPACITY_RATIO,
        resources=tuple(resources),
        requested_to_capacity_ratio=RequestedToCapacityRatioParam(
            shape=tuple(UtilizationShapePoint(utilization=u, score=s) for u, s in shape)
        ),
    )


FIT_SCORE_NODES = (node("node1", "4000", "10000"), node("node2", "6000", "10000"))
FIT_SCORE_EXISTING = (
    make_pod("e1").node_name("node1").req(cpu="2000", memory="4000"),
    make_pod("e2").node_name("node2").req(cpu="1000", memory="2000"),
)


@pytest.mark.parametrize(
    "run_pre_score", [pytest.param(True, id="with-prescore"), pytest.param(False, id="without-prescore")]
)
@pytest.mark.parametrize(
    ("strategy", "pod", "want"),
    [
        pytest.param(
            rtcr([(0, 10), (100, 0)]),
            make_pod().req(cpu="3000", memory="5000"),
            [10, 32],
            id="requested-to-capacity-ratio-case1",
        ),
        pytest.param(
            rtcr([(0, 0), (100, 10)]),
            make_pod().req(cpu="3000", memory="5000"),
            [95, 68],
            id="requested-to-capacity-ratio-case2",
        ),
        pytest.param(
            ScoringStrategy(type=MOST_ALLOCATED, resources=DEFAULT_RESOURCES),
            make_pod().req(cpu="1000", memory="2000"),
            [67, 36],
            id="most-allocated",
        ),
        pytest.param(
            ScoringStrategy(type=LEAST_ALLOCATED, resources=DEFAULT_RESOURCES),
            make_pod().req(cpu="1000", memory="2000"),
            [32, 63],
            id="least-allocated",
        ),
    ],
)
def test_fit_score(strategy: ScoringStrategy, pod: PodBuilder, want: list[int], run_pre_score: bool) -> None:
    per_node, batch = run_score(strategy, pod, FIT_SCORE_NODES, FIT_SCORE_EXISTING, run_pre_score=run_pre_score)
    assert per_node == want
    assert batch == want


def _existing(*entries: tuple[str, PodBuilder]) -> list[PodBuilder]:
    return [on(node_name, builder, i) for i, (node_name, builder) in enumerate(entries)]


LEAST_ALLOCATED_CASES = [
    pytest.param(
        empty_pod(),
        [node("node1", "4000", "10000"), node("node2", "4000", "10000")],
        [],
        DEFAULT_RESOURCES,
        [100, 100],
        id="nothing-scheduled-nothing-requested",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "4000", "10000"), node("node2", "6000", "10000")],
        [],
        DEFAULT_RESOURCES,
        [37, 50],
        id="nothing-scheduled-resources-requested-differently-sized-nodes",
    ),
    pytest.param(
        empty_pod(),
        [node("node1", "4000", "10000"), node("node2", "4000", "10000")],
        _existing(("node1", empty_pod()), ("node1", empty_pod()), ("node2", empty_pod()), ("node2", empty_pod())),
        DEFAULT_RESOURCES,
        [100, 100],
        id="no-resources-requested-pods-scheduled",
    ),
    pytest.param(
        empty_pod(),
        [node("node1", "10000", "20000"), node("node2", "10000", "20000")],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")),
            ("node1", make_pod().req(cpu="3000", memory="0")),
            ("node2", make_pod().req(cpu="3000", memory="0")),
            ("node2", make_pod().req(cpu="3000", memory="5000")),
        ),
        DEFAULT_RESOURCES,
        [70, 57],
        id="no-resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "10000", "20000"), node("node2", "10000", "20000")],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")), ("node2", make_pod().req(cpu="3000", memory="5000"))
        ),
        DEFAULT_RESOURCES,
        [57, 45],
        id="resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "10000", "20000"), node("node2", "10000", "50000")],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")), ("node2", make_pod().req(cpu="3000", memory="5000"))
        ),
        DEFAULT_RESOURCES,
        [57, 60],
        id="resources-requested-pods-scheduled-with-resources-differently-sized-nodes",
    ),
    pytest.param(
        make_pod().req(cpu="3000", memory="0"),
        [node("node1", "4000", "10000"), node("node2", "4000", "10000")],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")), ("node2", make_pod().req(cpu="3000", memory="5000"))
        ),
        DEFAULT_RESOURCES,
        [50, 25],
        id="requested-resources-exceed-node-capacity",
    ),
    pytest.param(
        empty_pod(),
        [make_node("node1").obj(), make_node("node2").obj()],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")), ("node2", make_pod().req(cpu="3000", memory="5000"))
        ),
        DEFAULT_RESOURCES,
        [0, 0],
        id="zero-node-resources-pods-scheduled-with-resources",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "4000", "10000"), node("node2", "6000", "10000")],
        [],
        (ResourceSpec(name="memory", weight=2), ResourceSpec(name="cpu", weight=1)),
        [41, 50],
        id="different-weights-on-cpu-and-memory",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "6000", "10000"), node("node2", "6000", "10000", {EXTENDED: "4"})],
        [],
        EXTENDED_SET,
        [50, 50],
        id="bypass-extended-resource-if-the-pod-does-not-request-it",
    ),
    pytest.param(
        make_pod().req({EXTENDED: "2"}, cpu="3000", memory="5000"),
        [node("node1", "6000", "10000", {EXTENDED: "4"}), node("node2", "6000", "10000", {EXTENDED: "10"})],
        [],
        EXTENDED_SET,
        [50, 60],
        id="honor-extended-resource-if-the-pod-requests-it",
    ),
    pytest.param(
        make_pod().req(cpu="3000", memory="4000"),
        [node("node1", "6000", "10000"), node("node2", "6000", "10000", {EXTENDED: "4"})],
        [],
        (ResourceSpec(name=EXTENDED, weight=2), *DEFAULT_RESOURCES),
        [55, 55],
        id="node-without-the-resource",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "resources", "want"), LEAST_ALLOCATED_CASES)
def test_least_allocated(
    pod: PodBuilder, nodes: list[Node], existing: list[PodBuilder], resources: tuple[ResourceSpec, ...], want: list[int]
) -> None:
    strategy = ScoringStrategy(type=LEAST_ALLOCATED, resources=resources)
    per_node, batch = run_score(strategy, pod, nodes, existing)
    assert per_node == want
    assert batch == want


MOST_ALLOCATED_CASES = [
    pytest.param(
        empty_pod(),
        [node("node1", "4000", "10000"), node("node2", "4000", "10000")],
        [],
        DEFAULT_RESOURCES,
        [0, 0],
        id="nothing-scheduled-nothing-requested",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "4000", "10000"), node("node2", "6000", "10000")],
        [],
        DEFAULT_RESOURCES,
        [62, 50],
        id="nothing-scheduled-resources-requested-differently-sized-nodes",
    ),
    pytest.param(
        empty_pod(),
        [node("node1", "10000", "20000"), node("node2", "10000", "20000")],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")),
            ("node1", make_pod().req(cpu="3000", memory="0")),
            ("node2", make_pod().req(cpu="3000", memory="0")),
            ("node2", make_pod().req(cpu="3000", memory="5000")),
        ),
        DEFAULT_RESOURCES,
        [30, 42],
        id="no-resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "10000", "20000"), node("node2", "10000", "20000")],
        _existing(
            ("node1", make_pod().req(cpu="3000", memory="0")), ("node2", make_pod().req(cpu="3000", memory="5000"))
        ),
        DEFAULT_RESOURCES,
        [42, 55],
        id="resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        make_pod().container(cpu="2000", memory="4000").container(cpu="3000", memory="5000"),
        [node("node1", "5000", "10000"), node("node2", "10000", "9000")],
        [],
        DEFAULT_RESOURCES,
        [95, 75],
        id="resources-requested-equal-node-capacity",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "4000", "10000"), node("node2", "6000", "10000")],
        [],
        (ResourceSpec(name="memory", weight=2), ResourceSpec(name="cpu", weight=1)),
        [58, 50],
        id="different-weights-on-cpu-and-memory",
    ),
    pytest.param(
        make_pod(),  # one container without requests: counts 100m cpu and 200Mi memory
        [node("node1", "250m", "1000Mi"), node("node2", "250m", "1000Mi")],
        _existing(("node1", make_pod()), ("node1", make_pod())),
        DEFAULT_RESOURCES,
        [80, 30],
        id="no-resources-requested-pods-scheduled-nonzero-request-for-resource",
    ),
    pytest.param(
        two_containers(),
        [node("node1", "6000", "10000"), node("node2", "6000", "10000", {EXTENDED: "4"})],
        [],
        EXTENDED_SET,
        [50, 50],
        id="bypass-extended-resource-if-the-pod-does-not-request-it",
    ),
    pytest.param(
        make_pod().req({EXTENDED: "2"}, cpu="3000", memory="5000"),
        [node("node1", "6000", "10000", {EXTENDED: "4"}), node("node2", "6000", "10000", {EXTENDED: "10"})],
        [],
        EXTENDED_SET,
        [50, 40],
        id="honor-extended-resource-if-the-pod-requests-it",
    ),
    pytest.param(
        make_pod().req(cpu="3000", memory="4000"),
        [node("node1", "6000", "10000"), node("node2", "6000", "10000", {EXTENDED: "4"})],
        [],
        (ResourceSpec(name=EXTENDED, weight=2), *DEFAULT_RESOURCES),
        [45, 45],
        id="node-without-the-resource",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "resources", "want"), MOST_ALLOCATED_CASES)
def test_most_allocated(
    pod: PodBuilder, nodes: list[Node], existing: list[PodBuilder], resources: tuple[ResourceSpec, ...], want: list[int]
) -> None:
    strategy = ScoringStrategy(type=MOST_ALLOCATED, resources=resources)
    per_node, batch = run_score(strategy, pod, nodes, existing)
    assert per_node == want
    assert batch == want


@pytest.mark.parametrize(
    ("pod", "existing", "nodes", "want"),
    [
        pytest.param(
            empty_pod(),
            _existing(("node1", empty_pod()), ("node1", empty_pod())),
            [node("node1", "4000", "10000"), node("node2", "4000", "10000")],
            [100, 100],
            id="nothing-scheduled-nothing-requested-least-requested-preferred",
        ),
        pytest.param(
            two_containers(),
            _existing(("node1", empty_pod()), ("node1", empty_pod())),
            [node("node1", "4000", "10000"), node("node2", "6000", "10000")],
            [38, 50],
            id="nothing-scheduled-resources-requested-differently-sized-nodes",
        ),
        pytest.param(
            empty_pod(),
            _existing(
                ("node1", make_pod().req(cpu="3000", memory="5000")),
                ("node2", make_pod().req(cpu="3000", memory="5000")),
            ),
            [node("node1", "4000", "10000"), node("node2", "6000", "10000")],
            [38, 50],
            id="no-resources-requested-pods-scheduled-with-resources",
        ),
    ],
)
def test_requested_to_capacity_ratio(
    pod: PodBuilder, existing: list[PodBuilder], nodes: list[Node], want: list[int]
) -> None:
    per_node, batch = run_score(rtcr([(0, 10), (100, 0)]), pod, nodes, existing)
    assert per_node == want
    assert batch == want


@pytest.mark.parametrize(
    ("points", "assertions"),
    [
        pytest.param(
            [(10, 1), (90, 9)],
            [
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
            id="increasing",
        ),
        pytest.param(
            [(0, 2), (40, 10), (100, 0)],
            [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
            id="up-then-down",
        ),
        pytest.param(
            [(0, 2), (40, 2), (100, 2)],
            [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)],
            id="flat",
        ),
    ],
)
def test_broken_linear_function(points: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    # Upstream feeds helper.BuildBrokenLinearFunction raw points; the strategy's constructor would scale
    # config scores by 10, so the raw points are set directly.
    strategy = RequestedToCapacityRatio([1], [])
    strategy.points = tuple(points)
    for p, expected in assertions:
        assert strategy.broken_linear(p) == expected, p
        assert int(strategy.broken_linear_matrix(np.asarray([[p]], dtype=np.int64))[0, 0]) == expected, p


def test_broken_linear_truncates_toward_zero_on_falling_slopes() -> None:
    # score goes 100 -> 0 over utilization 0..100 in steps of 30: (0-100)*(1-0)/30 = -3.33 -> -3 in Go, -4 with floor.
    shape = [UtilizationShapePoint(utilization=0, score=10), UtilizationShapePoint(utilization=30, score=0)]
    strategy = RequestedToCapacityRatio([1], shape)
    assert strategy.broken_linear(1) == 97


def bin_node(name: str, extended: Mapping[str, int]) -> Node:
    """makeNode(name, 4000 milli-CPU, 10000 MiB, extended)."""
    return make_node(name).capacity(dict(extended), cpu="4000m", memory=f"{10000 * 1024 * 1024}").obj()


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(empty_pod(), [], [0, 0], id="nothing-scheduled-nothing-requested"),
        pytest.param(
            make_pod().req({"intel.com/foo": "2"}), [], [2, 5], id="requested-pods-scheduled-with-less-resources"
        ),
        pytest.param(
            make_pod().req({"intel.com/foo": "2"}),
            [make_pod("other").req({"intel.com/foo": "2"}).node_name("node2")],
            [2, 10],
            id="requested-on-node-with-existing-pod",
        ),
        pytest.param(
            make_pod().req({"intel.com/foo": "4"}), [], [5, 10], id="requested-pods-scheduled-with-more-resources"
        ),
    ],
)
def test_bin_packing_single_extended(pod: PodBuilder, existing: list[PodBuilder], want: list[int]) -> None:
    nodes = [bin_node("node1", {"intel.com/foo": 8}), bin_node("node2", {"intel.com/foo": 4})]
    strategy = rtcr([(0, 0), (100, 1)], [ResourceSpec(name="intel.com/foo", weight=1)])
    per_node, batch = run_score(strategy, pod, nodes, existing)
    assert per_node == want
    assert batch == want


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(empty_pod(), [], [0, 0], id="nothing-scheduled-nothing-requested"),
        pytest.param(
            make_pod().req({"intel.com/foo": "2", "intel.com/bar": "2"}),
            [],
            [4, 3],
            id="requested-pods-scheduled-with-less-resources",
        ),
        pytest.param(
            make_pod().req({"intel.com/foo": "2", "intel.com/bar": "2"}),
            [make_pod("other").req({"intel.com/foo": "4", "intel.com/bar": "2"}).node_name("node2")],
            [4, 7],
            id="requested-on-node-with-existing-pod",
        ),
        pytest.param(
            make_pod().req({"intel.com/foo": "4", "intel.com/bar": "2"}),
            [],
            [5, 5],
            id="requested-pods-scheduled-with-more-resources",
        ),
    ],
)
def test_bin_packing_multiple_extended(pod: PodBuilder, existing: list[PodBuilder], want: list[int]) -> None:
    nodes = [
        bin_node("node1", {"intel.com/foo": 8, "intel.com/bar": 4}),
        bin_node("node2", {"intel.com/foo": 4, "intel.com/bar": 8}),
    ]
    strategy = rtcr(
        [(0, 0), (100, 1)], [ResourceSpec(name="intel.com/foo", weight=3), ResourceSpec(name="intel.com/bar", weight=5)]
    )
    per_node, batch = run_score(strategy, pod, nodes, existing)
    assert per_node == want
    assert batch == want


def test_requested_to_capacity_ratio_rounds_half_away_from_zero() -> None:
    # cpu 1000/4000 = 25% -> 2, memory 3000/10000 = 30% -> 3; (2 + 3) / 2 = 2.5 -> 3 (Python's round gives 2).
    strategy = rtcr([(0, 0), (100, 1)])
    per_node, batch = run_score(strategy, make_pod().req(cpu="1000", memory="3000"), [node("node1", "4000", "10000")])
    assert per_node == batch == [3]



def test_the_score_reads_the_containers_requests_of_a_pod_with_pod_level_requests() -> None:
    """kube-scheduler v1.35 builds this plugin's scorer without the PodLevelResources feature: the incoming pod
    counts its containers' requests, 3 cpu and 128Mi here, not its pod-level 1 cpu and 1Gi, which would favour
    node a (75 against 68). The golden case pod-level-resources-scoring checks it against kube-scheduler."""
    raw = make_pod().req(cpu="3", memory="128Mi").raw()
    raw["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    pod = Pod.from_dict(raw, "test")
    cache, snapshot = make_cluster([node("a", "4", "4Gi"), node("b", "8", "2Gi")], [])
    strategy = ScoringStrategy(type=LEAST_ALLOCATED, resources=DEFAULT_RESOURCES)
    plugin = Fit(NodeResourcesFitArgs(scoring_strategy=strategy), PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod)
    assert plugin.pre_score(state, info, snapshot.node_infos) is None
    by_node = dict(zip((n.name for n in snapshot.node_infos), score_nodes(plugin, state, info, snapshot), strict=True))
    # a: cpu (4-3)/4 = 25, memory (4096-128)/4096 = 96 -> 60; b: cpu 62, memory 93 -> 77.
    assert by_node == {"a": 60, "b": 77}
    assert score_nodes_batch(plugin, state, info, snapshot) == score_nodes(plugin, state, info, snapshot)
    # Filter still reads the pod-level request: 1 cpu fits a node with 1.5 cpu free, 3 would not.
    assert info.request.milli_cpu == 1000
