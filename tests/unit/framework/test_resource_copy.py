"""Per-pod and per-node derivations written out for the hot path: Resource.copy and Resource.from_mapping (slot
by slot) make what the constructor makes, uniform_scores what np.full makes, and pod_host_ports takes the ports of
app and sidecar containers with or without init containers."""

from __future__ import annotations

import dataclasses

import numpy as np

from kubesched.api.objects import Pod
from kubesched.framework.types import Resource, pod_host_ports
from kubesched.plugins.helper.classes import uniform_scores
from kubesched.testing.builders import make_pod


def test_copy_is_equal_and_independent() -> None:
    original = Resource(1500, 2**30, 7, 110, {"example.com/gpu": 2})
    copy = original.copy()
    assert copy == original and copy is not original
    # every field carried (a field added later and missed here would be unset, and this would raise)
    assert all(getattr(copy, f.name) == getattr(original, f.name) for f in dataclasses.fields(Resource))
    copy.scalar["example.com/gpu"] = 3
    copy.milli_cpu += 1
    assert original == Resource(1500, 2**30, 7, 110, {"example.com/gpu": 2})


def test_uniform_scores_is_np_full() -> None:
    for size, value in ((0, 5), (1, 0), (657, 100)):
        got = uniform_scores(size, value)
        expected = np.full(size, value, dtype=np.int64)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_from_mapping_equals_the_constructor() -> None:
    amounts = {"cpu": 1500, "memory": 2**30, "ephemeral-storage": 9, "pods": 110, "example.com/gpu": 2}
    assert Resource.from_mapping(amounts) == Resource(1500, 2**30, 9, 110, {"example.com/gpu": 2})
    assert Resource.from_mapping({}) == Resource()


def test_host_ports_of_app_and_sidecar_containers_only() -> None:
    plain = make_pod("p").host_port(80).obj()
    assert pod_host_ports(plain) == (("0.0.0.0", "TCP", 80),)
    assert pod_host_ports(make_pod("q").container(cpu="1").obj()) == ()
    raw = make_pod("r").host_port(80).raw()
    raw["spec"]["initContainers"] = [
        {"name": "side", "image": "i", "restartPolicy": "Always", "ports": [{"containerPort": 9, "hostPort": 9}]},
        {"name": "init", "image": "i", "ports": [{"containerPort": 7, "hostPort": 7}]},
    ]
    with_inits = Pod.from_dict(raw, "Pod default/r")
    assert pod_host_ports(with_inits) == (("0.0.0.0", "TCP", 9), ("0.0.0.0", "TCP", 80))
