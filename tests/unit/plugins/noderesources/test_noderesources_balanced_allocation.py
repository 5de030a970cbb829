"""NodeResourcesBalancedAllocation against balanced_allocation_test.go (kube-scheduler v1.33+, incl. the
PreScore Skip for best-effort pods and scalar resources), per node and in batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kubesched.api.objects import Node
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.noderesources import BalancedAllocation, NodeResourcesBalancedAllocationArgs, ResourceSpec
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster, score_nodes, score_nodes_batch

GPU = "nvidia.com/gpu"
DEFAULT = NodeResourcesBalancedAllocationArgs()
WITH_GPU = NodeResourcesBalancedAllocationArgs(
    resources=(
        ResourceSpec(name="cpu", weight=1),
        ResourceSpec(name="memory", weight=1),
        ResourceSpec(name=GPU, weight=1),
    )
)


def make_node_mc(name: str, milli_cpu: int, memory: int, scalar: Mapping[str, int] | None = None) -> Node:
    """upstream makeNode(name, milliCPU, memory, scalar)."""
    return make_node(name).capacity(dict(scalar or {}), cpu=f"{milli_cpu}m", memory=memory).obj()


def cpu_only(node: str) -> PodBuilder:
    return make_pod().container(cpu="1000m", memory="0").container(cpu="2000m", memory="0").node_name(node)


def cpu_and_memory(node: str) -> PodBuilder:
    return make_pod().container(cpu="1000m", memory="2000").container(cpu="2000m", memory="3000").node_name(node)


def cpu_memory_gpu(node: str) -> PodBuilder:
    return (
        make_pod()
        .container(cpu="1000m", memory="2000")
        .container({GPU: "3"}, cpu="2000m", memory="3000")
        .node_name(node)
    )


def run(
    args: NodeResourcesBalancedAllocationArgs,
    pod: PodBuilder,
    nodes: Sequence[Node],
    existing: Sequence[PodBuilder],
    *,
    run_pre_score: bool = True,
) -> tuple[Status | None, list[int], list[int]]:
    pods = [b.name(f"existing-{i}").obj() for i, b in enumerate(existing)]
    cache, snapshot = make_cluster(nodes, pods)
    plugin = BalancedAllocation(args, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod.obj())
    status = plugin.pre_score(state, info, snapshot.node_infos) if run_pre_score else None
    return status, score_nodes(plugin, state, info, snapshot), score_nodes_batch(plugin, state, info, snapshot)


def test_best_effort_pod_is_skipped_in_prescore() -> None:
    status, _, _ = run(
        DEFAULT, make_pod(), [make_node_mc("node1", 4000, 10000), make_node_mc("node2", 4000, 10000)], []
    )
    assert status == Status(Code.SKIP)


def test_best_effort_pod_scores_zero_without_prescore() -> None:
    _, per_node, batch = run(DEFAULT, make_pod(), [make_node_mc("node1", 4000, 10000)], [], run_pre_score=False)
    assert per_node == batch == [0]


@pytest.mark.parametrize(
    "run_pre_score", [pytest.param(True, id="with-prescore"), pytest.param(False, id="without-prescore")]
)
@pytest.mark.parametrize(
    ("args", "pod", "nodes", "existing", "want"),
    [
        pytest.param(
            DEFAULT,
            cpu_and_memory("node2"),
            [make_node_mc("node1", 4000, 10000), make_node_mc("node2", 6000, 10000)],
            [],
            [87, 100],
            id="nothing-scheduled-resources-requested-differently-sized-nodes",
        ),
        pytest.param(
            DEFAULT,
            cpu_and_memory("node2"),
            [make_node_mc("node1", 10000, 20000), make_node_mc("node2", 10000, 20000)],
            [cpu_only("node1"), cpu_and_memory("node2")],
            [82, 95],
            id="resources-requested-pods-scheduled-with-resources",
        ),
        pytest.param(
            DEFAULT,
            cpu_and_memory("node2"),
            [make_node_mc("node1", 10000, 20000), make_node_mc("node2", 10000, 50000)],
            [cpu_only("node1"), cpu_and_memory("node2")],
            [82, 80],
            id="resources-requested-pods-scheduled-with-resources-differently-sized-nodes",
        ),
        pytest.param(
            DEFAULT,
            cpu_only("node1"),
            [make_node_mc("node1", 6000, 10000), make_node_mc("node2", 6000, 10000)],
            [cpu_only("node1"), cpu_and_memory("node2")],
            [50, 75],
            id="requested-resources-at-node-capacity",
        ),
        pytest.param(
            WITH_GPU,
            make_pod().req({GPU: "1"}, memory="0"),
            [make_node_mc("node1", 3500, 40000, {GPU: 8}), make_node_mc("node2", 3500, 40000, {GPU: 8})],
            [cpu_and_memory("node2"), cpu_memory_gpu("node1")],
            [70, 65],
            id="include-scalar-resource-on-a-node",
        ),
        pytest.param(
            WITH_GPU,
            cpu_and_memory("node2"),
            [make_node_mc("node1", 3500, 40000, {GPU: 8}), make_node_mc("node2", 3500, 40000)],
            [],
            [63, 63],
            id="node-without-the-scalar-resource-skips-it",
        ),
    ],
)
def test_balanced_allocation(
    args: NodeResourcesBalancedAllocationArgs,
    pod: PodBuilder,
    nodes: list[Node],
    existing: list[PodBuilder],
    want: list[int],
    run_pre_score: bool,
) -> None:
    # The incoming pod's nodeName is irrelevant to scoring; upstream reuses the pod specs of existing pods.
    status, per_node, batch = run(args, pod.node_name(""), nodes, existing, run_pre_score=run_pre_score)
    assert status is None
    assert per_node == want
    assert batch == want


def test_zero_allocatable_nodes_score_100_because_no_fraction_is_counted() -> None:
    # Upstream's "zero node resources" case for a requesting pod: no resource has allocatable > 0, std = 0.
    _, per_node, batch = run(DEFAULT, cpu_only(""), [make_node_mc("node1", 0, 0)], [])
    assert per_node == batch == [100]
