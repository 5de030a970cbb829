"""The test builders produce the manifests they promise, parsed through the real from_dict."""

from __future__ import annotations

import pytest

from kubesched.api.objects import ContainerPort, Taint, Toleration
from kubesched.errors import ManifestError
from kubesched.testing.builders import make_node, make_pod


def test_pod_builder_sets_every_field() -> None:
    pod = (
        make_pod()
        .name("p")
        .namespace("ns")
        .label("app", "web")
        .annotation("a", "b")
        .req(cpu="2", memory="1Gi")
        .toleration(key="k", operator="Equal", value="v", effect="NoSchedule")
        .node_selector({"disk": "ssd"})
        .priority(10)
        .scheduler("x")
        .node_name("n")
        .gates("g")
        .host_port(8080)
        .nominated("n2")
        .phase("Running")
        .owner("ReplicaSet", "rs")
        .obj()
    )
    assert pod.key == "ns/p"
    assert (pod.metadata.labels, pod.metadata.annotations) == ({"app": "web"}, {"a": "b"})
    assert [c.requests for c in pod.spec.containers] == [{"cpu": 2000, "memory": 2**30}]
    assert pod.spec.tolerations == (Toleration("k", "Equal", "v", "NoSchedule"),)
    assert (pod.spec.node_selector, pod.spec.priority, pod.spec.scheduler_name) == ({"disk": "ssd"}, 10, "x")
    assert (pod.spec.node_name, pod.spec.scheduling_gates) == ("n", ("g",))
    assert pod.spec.containers[0].ports == (ContainerPort(8080, 8080, "TCP", ""),)
    assert (pod.status.nominated_node_name, pod.status.phase) == ("n2", "Running")
    ref = pod.metadata.controller_ref()
    assert ref is not None and (ref.kind, ref.name) == ("ReplicaSet", "rs")


def test_default_pod_has_one_empty_container() -> None:
    pod = make_pod().obj()
    assert pod.key == "default/pod"
    assert [(c.name, c.requests) for c in pod.spec.containers] == [("c0", {})]


def test_containers_init_containers_sidecars_and_overhead() -> None:
    pod = (
        make_pod()
        .req(cpu="1")
        .container(cpu="2", name="second")
        .init_container(memory="1Gi")
        .sidecar({"nvidia.com/gpu": 1}, limits={"nvidia.com/gpu": 1})
        .overhead(cpu="100m")
        .obj()
    )
    assert [(c.name, c.requests) for c in pod.spec.containers] == [("c0", {"cpu": 1000}), ("second", {"cpu": 2000})]
    assert [(c.name, c.requests, c.is_sidecar) for c in pod.spec.init_containers] == [
        ("init0", {"memory": 2**30}, False),
        ("sidecar1", {"nvidia.com/gpu": 1}, True),
    ]
    assert pod.spec.overhead == {"cpu": 100}


def test_container_first_then_req_targets_first_container() -> None:
    pod = make_pod().container(cpu="1").req(memory="1Gi").lim(memory="2Gi").obj()
    assert [c.requests for c in pod.spec.containers] == [{"cpu": 1000, "memory": 2**30}]
    assert pod.spec.containers[0].limits == {"memory": 2 * 2**30}


def test_underscores_become_hyphens() -> None:
    pod = make_pod().req(ephemeral_storage="1Gi").obj()
    assert pod.spec.containers[0].requests == {"ephemeral-storage": 2**30}


def test_raw_is_a_fresh_copy() -> None:
    builder = make_pod().req(cpu="1")
    raw = builder.raw()
    builder.req(cpu="2").label("x", "y")
    assert raw["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert "labels" not in raw["metadata"]


def test_builder_output_is_validated() -> None:
    with pytest.raises(ManifestError, match=r"^make_pod: Pod default/pod: spec.tolerations\[0\].operator"):
        make_pod().toleration(value="v").obj()


def test_node_builder() -> None:
    node = (
        make_node()
        .name("n")
        .capacity(cpu="4", memory="8Gi", pods=110)
        .taint("k", "v", "NoSchedule")
        .label("a", "b")
        .zone("z1")
        .unschedulable()
        .image("nginx:1.2", size=500, aliases=["nginx@sha256:abc"])
        .obj()
    )
    assert node.name == "n"
    assert node.allocatable == {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}
    assert node.taints == (Taint("k", "v", "NoSchedule"),)
    assert node.metadata.labels == {"a": "b", "topology.kubernetes.io/zone": "z1"}
    assert node.spec_unschedulable
    assert [(i.names, i.size_bytes) for i in node.images] == [(("nginx:1.2", "nginx@sha256:abc"), 500)]


@pytest.mark.parametrize(
    ("builder_allocatable", "expected"),
    [
        pytest.param(None, {"pods": 110}, id="default-node-takes-110-pods"),
        pytest.param({"cpu": "3"}, {"cpu": 3000}, id="explicit-allocatable-replaces-capacity"),
    ],
)
def test_node_allocatable(builder_allocatable: dict[str, str] | None, expected: dict[str, int]) -> None:
    builder = make_node()
    if builder_allocatable is not None:
        builder.allocatable(builder_allocatable)
    assert builder.obj().allocatable == expected
