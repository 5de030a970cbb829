"""PodInfo.rebound: the cache confirms an assumed pod without deriving its PodInfo again, and only when the
bound version agrees in every field the derived ones come from."""

from __future__ import annotations

import dataclasses

import pytest

from kubesched.api.objects import Pod
from kubesched.framework.types import PodInfo
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod

DERIVED = (
    "name",
    "namespace",
    "key",
    "uid",
    "priority",
    "request",
    "non_zero_milli_cpu",
    "non_zero_memory",
    "tolerations",
    "host_ports",
    "has_pod_affinity",
    "shape",
)


def _pod() -> Pod:
    return (
        make_pod("web")
        .req(cpu="250m", memory="1Gi")
        .toleration("dedicated", "Equal", "web", "NoSchedule")
        .priority(7)
        .affinity({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}})
        .obj()
    )


def _bound(pod: Pod, node: str, **spec_changes: object) -> Pod:
    """What the informer delivers after the bind: a decoded copy (equal, not the same objects) on ``node``."""
    spec = dataclasses.replace(pod.spec, node_name=node, **spec_changes)  # type: ignore[arg-type]
    return dataclasses.replace(pod, spec=dataclasses.replace(spec, containers=tuple(spec.containers)))


def test_a_rebound_pod_info_equals_a_fresh_one_for_the_bound_pod() -> None:
    assumed = PodInfo(_pod()).with_node("n1")
    bound = _bound(_pod(), "n1")
    rebound = assumed.rebound(bound)
    assert rebound is not None
    fresh = PodInfo(bound)
    assert rebound.pod is bound
    assert {f: getattr(rebound, f) for f in DERIVED} == {f: getattr(fresh, f) for f in DERIVED}


@pytest.mark.parametrize(
    "changed",
    [
        {"priority": 8},
        {"tolerations": ()},
        {"overhead": {"cpu": 10}},
        {"affinity": None},
        {"containers": make_pod("web").req(cpu="1").obj().spec.containers},
    ],
)
def test_a_bound_pod_that_differs_where_it_counts_is_derived_again(changed: dict[str, object]) -> None:
    assumed = PodInfo(_pod()).with_node("n1")
    assert assumed.rebound(_bound(_pod(), "n1", **changed)) is None


def test_the_cache_confirms_an_assumed_pod_with_the_bound_version() -> None:
    cache = Cache()
    cache.add_node(make_node("n1").capacity(cpu="4", memory="8Gi").obj())
    pending = PodInfo(_pod())
    cache.assume_pod(pending, "n1")
    bound = _bound(_pod(), "n1")
    confirmed = cache.add_pod(bound)
    assert confirmed.pod is bound and not cache.is_assumed(pending.uid)
    info = cache.node("n1")
    assert info is not None and info.pods[pending.uid].pod is bound
    assert info.requested.milli_cpu == 250
    # A bound version asking for more is derived again: the node counts what the bound pod asks for.
    cache.remove_pod(bound)
    cache.assume_pod(pending, "n1")
    cache.add_pod(_bound(_pod(), "n1", containers=make_pod("web").req(cpu="1").obj().spec.containers))
    assert info.requested.milli_cpu == 1000


def test_copies_carry_every_slot() -> None:
    """with_node and rebound copy PodInfo through a copier written from its __slots__: every slot but the pod is
    the very object of the original."""
    info = PodInfo(_pod())
    for copy in (info.with_node("n1"), info.with_node("n1").rebound(_bound(_pod(), "n1"))):
        assert copy is not None
        for slot in PodInfo.__slots__:
            if slot != "pod":
                assert getattr(copy, slot) is getattr(info, slot), slot
