"""NodeResourcesFit PreFilter/Filter against kube-scheduler's fit_test.go tables (TestEnoughRequests,
TestNotEnoughRequests, TestStorageRequests, TestRestartableInitContainers), per node and in batch."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.noderesources import Fit, NodeResourcesFitArgs
from kubesched.plugins.noderesources.fit import PRE_FILTER_STATE_KEY
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import (
    PluginHandle,
    filter_nodes,
    filter_nodes_batch,
    make_cluster,
    pre_filter,
)

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGEPAGE_A = "hugepages-2Mi"


def insufficient(*resources: str) -> Status:
    return Status(Code.UNSCHEDULABLE, *(f"Insufficient {r}" for r in resources))


def beyond(*resources: str) -> Status:
    """A request above the node's whole allocatable: UnschedulableAndUnresolvable since v1.34 (PR #131345)."""
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *(f"Insufficient {r}" for r in resources))


def req(milli_cpu: int = 0, memory: int = 0, **extra: int) -> dict[str, str | int]:
    """A container's requests in upstream's units (framework.Resource): milli-CPU and bytes."""
    out: dict[str, str | int] = {"cpu": f"{milli_cpu}m", "memory": memory}
    out.update(extra)
    return out


def resource_pod(*containers: dict[str, str | int], init: Sequence[dict[str, str | int]] = ()) -> PodBuilder:
    """upstream newResourcePod / newResourceInitPod: one container (or init container) per request map."""
    builder = make_pod("pod")
    for requests in containers:
        builder.container(requests)
    for requests in init:
        builder.init_container(requests)
    return builder


def run_filter(
    pod: Pod,
    existing: Sequence[PodBuilder],
    *,
    allocatable: dict[str, str | int],
    args: NodeResourcesFitArgs | None = None,
) -> tuple[Status | None, Status | None]:
    """(per-node status, batch status) of the pod on one node holding the ``existing`` pods."""
    node = make_node("node").capacity(allocatable).obj()
    pods = [b.name(f"existing-{i}").node_name("node").obj() for i, b in enumerate(existing)]
    cache, snapshot = make_cluster([node], pods)
    plugin = Fit(args, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod)
    assert pre_filter(plugin, state, info, snapshot) is None
    (per_node,) = filter_nodes(plugin, state, info, snapshot)
    (batch,) = filter_nodes_batch(plugin, state, info, snapshot)
    return per_node, batch


# makeAllocatableResources(10, 20, 32, 5, 20, 5): cpu 10m, memory 20, pods 32, extended A 5, storage 20, hugepages 5
ENOUGH_ALLOCATABLE: dict[str, str | int] = {
    "cpu": "10m",
    "memory": 20,
    "pods": 32,
    EXT_A: 5,
    "ephemeral-storage": 20,
    HUGEPAGE_A: 5,
}


@pytest.mark.parametrize(
    ("pod", "existing", "args", "want"),
    [
        # upstream uses a pod without containers; a container without requests asks for the same (nothing)
        pytest.param(make_pod(), [make_pod().req(req(10, 20))], None, None, id="no-resources-requested-always-fits"),
        pytest.param(
            resource_pod(req(1, 1)),
            [make_pod().req(req(10, 20))],
            None,
            insufficient("cpu", "memory"),
            id="too-many-resources-fails",
        ),
        pytest.param(
            resource_pod(req(1, 1), init=[req(3, 1)]),
            [make_pod().req(req(8, 19))],
            None,
            insufficient("cpu"),
            id="too-many-resources-fails-due-to-init-container-cpu",
        ),
        pytest.param(
            resource_pod(req(1, 1), init=[req(3, 1), req(2, 1)]),
            [make_pod().req(req(8, 19))],
            None,
            insufficient("cpu"),
            id="too-many-resources-fails-due-to-highest-init-container-cpu",
        ),
        pytest.param(
            resource_pod(req(1, 1), init=[req(1, 3)]),
            [make_pod().req(req(9, 19))],
            None,
            insufficient("memory"),
            id="too-many-resources-fails-due-to-init-container-memory",
        ),
        pytest.param(
            resource_pod(req(1, 1), init=[req(1, 3), req(1, 2)]),
            [make_pod().req(req(9, 19))],
            None,
            insufficient("memory"),
            id="too-many-resources-fails-due-to-highest-init-container-memory",
        ),
        pytest.param(
            resource_pod(req(1, 1), init=[req(1, 1)]),
            [make_pod().req(req(9, 19))],
            None,
            None,
            id="init-container-fits-because-max-not-sum",
        ),
        pytest.param(
            resource_pod(req(1, 1), init=[req(1, 1), req(1, 1)]),
            [make_pod().req(req(9, 19))],
            None,
            None,
            id="multiple-init-containers-fit-because-max-not-sum",
        ),
        pytest.param(resource_pod(req(1, 1)), [make_pod().req(req(5, 5))], None, None, id="both-resources-fit"),
        pytest.param(
            resource_pod(req(2, 1)),
            [make_pod().req(req(9, 5))],
            None,
            insufficient("cpu"),
            id="one-resource-memory-fits",
        ),
        pytest.param(
            resource_pod(req(1, 2)),
            [make_pod().req(req(5, 19))],
            None,
            insufficient("memory"),
            id="one-resource-cpu-fits",
        ),
        pytest.param(resource_pod(req(5, 1)), [make_pod().req(req(5, 19))], None, None, id="equal-edge-case"),
        pytest.param(
            resource_pod(req(4, 1), init=[req(5, 1)]),
            [make_pod().req(req(5, 19))],
            None,
            None,
            id="equal-edge-case-for-init-container",
        ),
        pytest.param(resource_pod({EXT_A: 1}), [make_pod()], None, None, id="extended-resource-fits"),
        pytest.param(
            resource_pod({}, init=[{EXT_A: 1}]),
            [make_pod()],
            None,
            None,
            id="extended-resource-fits-for-init-container",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_A: 10})),
            [make_pod().req(req(0, 0, **{EXT_A: 0}))],
            None,
            beyond(EXT_A),
            id="extended-resource-capacity-enforced",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{EXT_A: 10})]),
            [make_pod().req(req(0, 0, **{EXT_A: 0}))],
            None,
            beyond(EXT_A),
            id="extended-resource-capacity-enforced-for-init-container",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_A: 1})),
            [make_pod().req(req(0, 0, **{EXT_A: 5}))],
            None,
            insufficient(EXT_A),
            id="extended-resource-allocatable-enforced",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{EXT_A: 1})]),
            [make_pod().req(req(0, 0, **{EXT_A: 5}))],
            None,
            insufficient(EXT_A),
            id="extended-resource-allocatable-enforced-for-init-container",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_A: 3}), req(1, 1, **{EXT_A: 3})),
            [make_pod().req(req(0, 0, **{EXT_A: 2}))],
            None,
            beyond(EXT_A),
            id="extended-resource-allocatable-enforced-for-multiple-containers",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{EXT_A: 3}), req(1, 1, **{EXT_A: 3})]),
            [make_pod().req(req(0, 0, **{EXT_A: 2}))],
            None,
            None,
            id="extended-resource-allocatable-admits-multiple-init-containers",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{EXT_A: 6}), req(1, 1, **{EXT_A: 3})]),
            [make_pod().req(req(0, 0, **{EXT_A: 2}))],
            None,
            beyond(EXT_A),
            id="extended-resource-allocatable-enforced-for-multiple-init-containers",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_B: 1})),
            [make_pod().req(req(0, 0))],
            None,
            beyond(EXT_B),
            id="extended-resource-allocatable-enforced-for-unknown-resource",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{EXT_B: 1})]),
            [make_pod().req(req(0, 0))],
            None,
            beyond(EXT_B),
            id="extended-resource-allocatable-enforced-for-unknown-resource-for-init-container",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{K8S_IO_A: 10})),
            [make_pod().req(req(0, 0))],
            None,
            beyond(K8S_IO_A),
            id="kubernetes-io-resource-capacity-enforced",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{K8S_IO_B: 10})]),
            [make_pod().req(req(0, 0))],
            None,
            beyond(K8S_IO_B),
            id="kubernetes-io-resource-capacity-enforced-for-init-container",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{HUGEPAGE_A: 10})),
            [make_pod().req(req(0, 0, **{HUGEPAGE_A: 0}))],
            None,
            beyond(HUGEPAGE_A),
            id="hugepages-resource-capacity-enforced",
        ),
        pytest.param(
            resource_pod({}, init=[req(1, 1, **{HUGEPAGE_A: 10})]),
            [make_pod().req(req(0, 0, **{HUGEPAGE_A: 0}))],
            None,
            beyond(HUGEPAGE_A),
            id="hugepages-resource-capacity-enforced-for-init-container",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{HUGEPAGE_A: 3}), req(1, 1, **{HUGEPAGE_A: 3})),
            [make_pod().req(req(0, 0, **{HUGEPAGE_A: 2}))],
            None,
            beyond(HUGEPAGE_A),
            id="hugepages-resource-allocatable-enforced-for-multiple-containers",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_B: 1})),
            [make_pod().req(req(0, 0))],
            NodeResourcesFitArgs(ignored_resources=(EXT_B,)),
            None,
            id="skip-checking-ignored-extended-resource",
        ),
        pytest.param(
            resource_pod(req(1, 1)).overhead(cpu="3m", memory="13"),
            [make_pod().req(req(5, 5))],
            None,
            None,
            id="resources-plus-pod-overhead-fits",
        ),
        pytest.param(
            resource_pod(req(1, 1)).overhead(cpu="1m", memory="15"),
            [make_pod().req(req(5, 5))],
            None,
            insufficient("memory"),
            id="requests-plus-overhead-does-not-fit-for-memory",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_B: 1, K8S_IO_A: 1})),
            [make_pod().req(req(0, 0))],
            NodeResourcesFitArgs(ignored_resource_groups=("example.com",)),
            beyond(K8S_IO_A),
            id="skip-checking-ignored-extended-resource-via-resource-groups",
        ),
        pytest.param(
            resource_pod(req(1, 1, **{EXT_A: 0})),
            [make_pod().req(req(0, 0, **{EXT_A: 6}))],
            None,
            None,
            id="skip-checking-extended-resource-request-with-quantity-zero",
        ),
        pytest.param(
            resource_pod({EXT_A: 1}),
            [make_pod().req(req(20, 30, **{EXT_A: 1}))],
            None,
            None,
            id="skip-checking-resource-request-with-quantity-zero",
        ),
    ],
)
def test_enough_requests(
    pod: PodBuilder, existing: list[PodBuilder], args: NodeResourcesFitArgs | None, want: Status | None
) -> None:
    per_node, batch = run_filter(pod.obj(), existing, allocatable=ENOUGH_ALLOCATABLE, args=args)
    assert per_node == want
    assert batch == want


@pytest.mark.parametrize(
    ("pod", "existing"),
    [
        pytest.param(
            make_pod(), make_pod().req(req(10, 20)), id="without-requests-fails-when-no-space-for-another-pod"
        ),
        pytest.param(resource_pod(req(1, 1)), make_pod().req(req(5, 5)), id="both-resources-fit-but-no-pod-slot"),
        pytest.param(resource_pod(req(5, 1)), make_pod().req(req(5, 19)), id="equal-edge-case-but-no-pod-slot"),
        pytest.param(
            resource_pod(req(5, 1), init=[req(5, 1)]),
            make_pod().req(req(5, 19)),
            id="equal-edge-case-with-init-container-but-no-pod-slot",
        ),
    ],
)
def test_not_enough_pods(pod: PodBuilder, existing: PodBuilder) -> None:
    # makeAllocatableResources(10, 20, 1, 0, 0, 0): room for exactly one pod, already taken.
    allocatable: dict[str, str | int] = {"cpu": "10m", "memory": 20, "pods": 1}
    per_node, batch = run_filter(pod.obj(), [existing], allocatable=allocatable)
    want = Status(Code.UNSCHEDULABLE, "Too many pods")
    assert per_node == want
    assert batch == want


def test_too_many_pods_is_reported_with_every_insufficient_resource() -> None:
    per_node, batch = run_filter(
        resource_pod(req(5, 5)).obj(), [make_pod().req(req(9, 19))], allocatable={"cpu": "10m", "memory": 20, "pods": 1}
    )
    want = Status(Code.UNSCHEDULABLE, "Too many pods", "Insufficient cpu", "Insufficient memory")
    assert per_node == want
    assert batch == want


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(resource_pod(req(1, 1)), make_pod().req(req(2, 10)), None, id="empty-storage-requested-pod-fits"),
        pytest.param(
            resource_pod({"ephemeral-storage": 25}),
            make_pod().req(req(2, 2)),
            beyond("ephemeral-storage"),
            id="ephemeral-storage-request-exceeds-allocatable",
        ),
        pytest.param(
            resource_pod({"ephemeral-storage": 5}),
            make_pod().req(req(2, 2, **{"ephemeral-storage": 10})),
            None,
            id="ephemeral-storage-is-sufficient",
        ),
        pytest.param(resource_pod({"ephemeral-storage": 10}), make_pod().req(req(2, 2)), None, id="storage-pod-fits"),
    ],
)
def test_storage_requests(pod: PodBuilder, existing: PodBuilder, want: Status | None) -> None:
    per_node, batch = run_filter(pod.obj(), [existing], allocatable=ENOUGH_ALLOCATABLE)
    assert per_node == want
    assert batch == want


def test_restartable_init_containers_are_allowed_since_sidecars_are_ga() -> None:
    pod = make_pod().container(name="regular").sidecar(name="restartable-init").obj()
    per_node, batch = run_filter(pod, [], allocatable={"pods": 1})
    assert per_node is None
    assert batch is None


def test_prefilter_writes_the_pods_effective_request() -> None:
    pod = resource_pod(req(1, 1), init=[req(3, 5)]).overhead(cpu="2m").obj()
    state = CycleState()
    plugin = Fit(None, PluginHandle())
    assert plugin.pre_filter(state, PodInfo(pod), ()) is None
    request = state.read(PRE_FILTER_STATE_KEY)
    assert (request.milli_cpu, request.memory) == (5, 5)  # type: ignore[attr-defined]


def test_filter_without_prefilter_is_an_error_on_both_paths() -> None:
    node = make_node("node").capacity(cpu="1").obj()
    cache, snapshot = make_cluster([node])
    plugin = Fit(None, PluginHandle(cache))
    info = PodInfo(make_pod().obj())
    want = Status(Code.ERROR, 'error reading "PreFilterNodeResourcesFit" from cycleState: not found')
    assert filter_nodes(plugin, CycleState(), info, snapshot) == [want]
    assert filter_nodes_batch(plugin, CycleState(), info, snapshot) == [want]
