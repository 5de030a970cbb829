"""pod_requests against k8s component-helpers' PodRequests cases (incl. sidecars) and the non-zero defaults; the
combined call PodInfo makes against the two separate ones."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.api.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    pod_requests,
    pod_requests_with_non_zero,
)
from kubesched.testing.builders import make_pod

GI = 2**30


def test_default_constants() -> None:
    assert (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST) == (100, 209715200)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod().obj(), {}, id="best-effort-requests-nothing"),
        # component-helpers TestPodResourceRequests
        pytest.param(
            make_pod().init_container(cpu="4").container(cpu="1").obj(), {"cpu": 4000}, id="larger-init-container"
        ),
        pytest.param(
            make_pod().init_container(cpu="2").container(cpu="2").container(cpu="3").obj(),
            {"cpu": 5000},
            id="larger-containers",
        ),
        pytest.param(
            make_pod()
            .init_container(cpu="2")
            .container(cpu="2")
            .container(cpu="3")
            .overhead(cpu="1", memory="1Gi")
            .obj(),
            {"cpu": 6000, "memory": GI},
            id="overhead-included",
        ),
        pytest.param(
            make_pod().sidecar(cpu="1").container(cpu="1").obj(), {"cpu": 2000}, id="restartable-init-container"
        ),
        pytest.param(
            make_pod()
            .init_container(cpu="5")
            .sidecar(cpu="1")
            .sidecar(cpu="2")
            .sidecar(cpu="3")
            .container(cpu="1")
            .obj(),
            {"cpu": 7000},
            id="multiple-restartable-init-containers",
        ),
        pytest.param(
            make_pod()
            .init_container(cpu="5")
            .sidecar(cpu="1")
            .sidecar(cpu="2")
            .init_container(cpu="5")
            .sidecar(cpu="3")
            .container(cpu="1")
            .obj(),
            {"cpu": 8000},
            id="multiple-restartable-and-regular-init-containers",
        ),
        pytest.param(
            make_pod().sidecar(cpu="10").init_container(cpu="200").container(cpu="100").obj(),
            {"cpu": 210_000},
            id="restartable-init-init-and-regular",
        ),
        # component-helpers TestPodRequestsAndLimits / WithoutOverhead (values are plain numbers there)
        pytest.param(
            make_pod().req(cpu="1", memory="10").overhead(cpu="5", memory="5").obj(),
            {"cpu": 6000, "memory": 15},
            id="req-and-overhead",
        ),
        pytest.param(make_pod().overhead(cpu="5", memory="5").obj(), {"cpu": 5000, "memory": 5}, id="just-overhead"),
        pytest.param(
            make_pod().container(cpu="1", memory="5").container(cpu="4", memory="12").obj(),
            {"cpu": 5000, "memory": 17},
            id="two-containers-sum",
        ),
        pytest.param(
            make_pod()
            .container(cpu="1", memory="5")
            .container(cpu="4", memory="12")
            .init_container(cpu="1", memory="5")
            .init_container(cpu="40", memory="120")
            .overhead(cpu="3", memory="8")
            .obj(),
            {"cpu": 43_000, "memory": 128},
            id="massive-init-plus-overhead",
        ),
        # Our objects carry the API server's defaulting, so a limit alone also sets the request.
        pytest.param(make_pod().lim(cpu="9").obj(), {"cpu": 9000}, id="limit-only-defaults-request"),
        pytest.param(
            make_pod()
            .req({"nvidia.com/gpu": 1})
            .sidecar({"nvidia.com/gpu": 1})
            .init_container({"nvidia.com/gpu": 3})
            .obj(),
            {"nvidia.com/gpu": 4},
            id="extended-resource-init-step-wins",
        ),
        pytest.param(
            make_pod().container(cpu="1").container(memory="1Gi").init_container(ephemeral_storage="1Gi").obj(),
            {"cpu": 1000, "memory": GI, "ephemeral-storage": GI},
            id="resources-merge-per-name",
        ),
    ],
)
def test_pod_requests(pod: Pod, expected: dict[str, int]) -> None:
    assert pod_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod().obj(), {"cpu": 100, "memory": 209715200}, id="missing-cpu-and-memory-defaulted"),
        pytest.param(make_pod().req(cpu="0", memory="0").obj(), {"cpu": 0, "memory": 0}, id="explicit-zero-stays"),
        pytest.param(
            make_pod().req(cpu="500m").obj(), {"cpu": 500, "memory": 209715200}, id="only-missing-resource-defaulted"
        ),
        pytest.param(
            make_pod().container().container().obj(), {"cpu": 200, "memory": 2 * 209715200}, id="default-per-container"
        ),
        pytest.param(
            make_pod().req(cpu="50m", memory="1Gi").init_container().obj(),
            {"cpu": 100, "memory": GI},
            id="init-container-defaults-count",
        ),
        pytest.param(
            make_pod().req(cpu="1").sidecar().obj(), {"cpu": 1100, "memory": 2 * 209715200}, id="sidecar-defaults-add"
        ),
        pytest.param(
            make_pod().req(ephemeral_storage="1Gi").obj(),
            {"cpu": 100, "memory": 209715200, "ephemeral-storage": GI},
            id="only-cpu-and-memory-defaulted",
        ),
        pytest.param(
            make_pod().overhead(cpu="250m").obj(), {"cpu": 350, "memory": 209715200}, id="overhead-added-after-defaults"
        ),
    ],
)
def test_pod_requests_non_zero(pod: Pod, expected: dict[str, int]) -> None:
    assert pod_requests(pod, non_zero=True) == expected


def test_pod_requests_does_not_mutate_containers() -> None:
    pod = make_pod().req(cpu="1").sidecar(cpu="1").obj()
    pod_requests(pod, non_zero=True)
    pod_requests(pod)
    assert pod.spec.containers[0].requests == {"cpu": 1000}
    assert pod.spec.init_containers[0].requests == {"cpu": 1000}


def pod_level(resources: dict[str, dict[str, str]], *containers: dict[str, str]) -> Pod:
    builder = make_pod()
    for requests in containers:
        builder.container(requests)
    raw = builder.raw()
    raw["spec"]["resources"] = resources
    return Pod.from_dict(raw, "Pod default/pod")


@pytest.mark.parametrize(
    ("pod", "expected", "non_zero"),
    [
        # component-helpers TestPodRequestsWithPodLevelResources-style cases (PodLevelResources on).
        pytest.param(
            pod_level({"requests": {"cpu": "3"}}, {"cpu": "500m"}, {"cpu": "500m", "memory": "1Gi"}),
            {"cpu": 3000, "memory": GI},
            {"cpu": 3000, "memory": GI},
            id="pod-level-cpu-replaces-the-containers-sum",
        ),
        pytest.param(
            pod_level({"limits": {"cpu": "1", "memory": "6Gi"}}, {}),
            {"cpu": 1000, "memory": 6 * GI},
            {"cpu": 1000, "memory": 6 * GI},
            id="pod-level-limit-defaults-the-request",
        ),
        pytest.param(
            pod_level({"limits": {"memory": "12Gi"}}, {"memory": "1Gi"}),
            {"memory": GI},
            {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": GI},
            id="containers-requests-win-over-a-pod-level-limit",
        ),
        pytest.param(
            pod_level({"requests": {"memory": "2Gi", "example.com/gpu": "1"}}, {}),
            {"memory": 2 * GI},
            {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": 2 * GI},
            id="only-cpu-memory-hugepages-at-pod-level-and-defaults-only-where-missing-at-both-levels",
        ),
    ],
)
def test_pod_level_resources(pod: Pod, expected: dict[str, int], non_zero: dict[str, int]) -> None:
    assert pod_requests(pod) == expected
    assert pod_requests(pod, non_zero=True) == non_zero


_container_requests = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["0", "100m", "1"]),
        "memory": st.sampled_from(["0", "1Gi"]),
        "example.com/gpu": st.sampled_from(["0", "1"]),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    containers=st.lists(_container_requests, min_size=1, max_size=3),
    inits=st.lists(st.tuples(st.booleans(), _container_requests), max_size=2),
    overhead=st.fixed_dictionaries({}, optional={"cpu": st.just("10m"), "memory": st.just("1Mi")}),
    pod_level_requests=st.one_of(st.none(), st.fixed_dictionaries({}, optional={"cpu": st.just("2")})),
)
def test_requests_with_non_zero_equal_the_two_separate_sums(
    containers: list[dict[str, str]],
    inits: list[tuple[bool, dict[str, str]]],
    overhead: dict[str, str],
    pod_level_requests: dict[str, str] | None,
) -> None:
    """PodInfo's one call for both sums (the second made once when no default can apply) answers what the two
    calls do, pod-level requests, sidecars and overhead included."""
    builder = make_pod("p")
    for requests in containers:
        builder = builder.container(requests)
    for sidecar, requests in inits:
        builder = builder.sidecar(requests) if sidecar else builder.init_container(requests)
    if overhead:
        builder = builder.overhead(overhead)
    raw = builder.raw()
    if pod_level_requests is not None:
        raw["spec"]["resources"] = {"requests": pod_level_requests}
    pod = Pod.from_dict(raw, "Pod default/p")
    both = pod_requests_with_non_zero(pod)
    assert both == (pod_requests(pod), pod_requests(pod, non_zero=True))
    assert both[0] is not both[1]
