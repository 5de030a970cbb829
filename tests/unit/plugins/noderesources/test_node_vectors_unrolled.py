"""The resource scorers' unrolled (cpu, memory) reads of a node and of a pod's requests equal their general
per-resource loops: the per-slot rescoring of the nodes a cycle changed, and every PreScore, go through them for
both NodeResourcesFit's and NodeResourcesBalancedAllocation's default resources."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.noderesources.args import ResourceSpec
from kubesched.plugins.noderesources.resource_allocation import Balanced, LeastAllocated, ResourceAllocationScorer
from kubesched.testing.builders import make_node, make_pod


@settings(max_examples=300, deadline=None)
@given(
    node_cpu=st.sampled_from(["0", "1", "4"]),
    node_memory=st.sampled_from(["0", "1Gi", "8Gi"]),
    placed=st.lists(
        st.tuples(st.sampled_from([None, "0", "500m", "3"]), st.sampled_from([None, "0", "1Gi"])), max_size=3
    ),
    incoming=st.tuples(st.sampled_from([None, "0", "100m", "5"]), st.sampled_from([None, "0", "512Mi", "9Gi"])),
    weights=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    use_requested=st.booleans(),
)
def test_unrolled_cpu_memory_vectors_equal_the_general_loop(
    node_cpu: str,
    node_memory: str,
    placed: list[tuple[str | None, str | None]],
    incoming: tuple[str | None, str | None],
    weights: tuple[int, int],
    use_requested: bool,
) -> None:
    info = NodeInfo(make_node("n").capacity(cpu=node_cpu, memory=node_memory, pods=10).obj())
    for i, (cpu, memory) in enumerate(placed):
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        info.add_pod(PodInfo(make_pod(f"p{i}").uid(f"p{i}").req(**requests).obj()))
    requests = {k: v for k, v in (("cpu", incoming[0]), ("memory", incoming[1])) if v is not None}
    pod = PodInfo(make_pod("incoming").req(**requests).obj())
    resources = [ResourceSpec(name="cpu", weight=weights[0]), ResourceSpec(name="memory", weight=weights[1])]
    for strategy in (LeastAllocated(weights), Balanced()):
        unrolled = ResourceAllocationScorer(resources, strategy, use_requested=use_requested)
        general = ResourceAllocationScorer(resources, strategy, use_requested=use_requested)
        assert unrolled._cpu_then_memory
        general._cpu_then_memory = False  # the per-resource loop, the reference
        pod_requests = unrolled.pod_requests(pod)
        assert pod_requests == general.pod_requests(pod)
        assert unrolled.node_vectors(info, pod_requests) == general.node_vectors(info, pod_requests)
        assert unrolled.score_node(info, pod_requests) == general.score_node(info, pod_requests)


def test_other_resource_lists_keep_the_general_loop() -> None:
    for names in (("memory", "cpu"), ("cpu",), ("cpu", "memory", "example.com/gpu")):
        scorer = ResourceAllocationScorer(
            [ResourceSpec(name=n, weight=1) for n in names], Balanced(), use_requested=True
        )
        assert not scorer._cpu_then_memory
