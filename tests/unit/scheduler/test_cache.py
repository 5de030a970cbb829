from __future__ import annotations

from kubesched.framework.types import PodInfo
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_node, make_pod


def test_zone_interleaved_node_order() -> None:
    cache = Cache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")]:
        cache.add_node(make_node(name).zone(zone).capacity(cpu="1", memory="1Gi", pods=10).obj())
    assert cache.node_order() == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert [info.name for info in cache.snapshot().node_infos] == cache.node_order()


def test_assume_forget_and_confirm_keep_table_equal_to_node_info() -> None:
    cache = Cache()
    cache.add_node(make_node("n").capacity(cpu="4", memory="8Gi", pods=10).obj())
    pod = PodInfo(make_pod("p").req(cpu="1", memory="1Gi").obj())
    assumed = cache.assume_pod(pod, "n")
    info = cache.node("n")
    assert info is not None
    slot = info.slot
    assert cache.is_assumed(pod.uid)
    assert cache.snapshot().table.req_cpu[slot] == 1000 == info.requested.milli_cpu
    assert cache.snapshot().table.pod_count[slot] == 1
    cache.forget_pod(pod.uid)
    assert cache.snapshot().table.req_cpu[slot] == 0 and cache.snapshot().table.pod_count[slot] == 0
    cache.assume_pod(pod, "n")
    cache.finish_binding(pod.uid)
    cache.add_pod(assumed.pod)  # the informer confirms the binding
    assert not cache.is_assumed(pod.uid)
    assert cache.snapshot().table.req_cpu[slot] == 1000 and cache.snapshot().table.pod_count[slot] == 1
    assert cache.snapshot().table.nonzero_memory[slot] == info.non_zero_requested.memory == 1024**3


def test_pod_before_its_node_is_applied_when_node_arrives() -> None:
    cache = Cache()
    cache.add_pod(make_pod("early").node_name("late-node").req(cpu="500m").obj())
    cache.add_node(make_node("late-node").capacity(cpu="2", memory="1Gi", pods=10).obj())
    info = cache.node("late-node")
    assert info is not None and info.requested.milli_cpu == 500
    assert cache.snapshot().table.req_cpu[info.slot] == 500


def test_removed_node_slot_is_reused_and_cleared() -> None:
    cache = Cache()
    cache.add_node(make_node("x").capacity(cpu="2", memory="1Gi", pods=10, **{"nvidia.com/gpu": 2}).obj())
    slot = cache.snapshot().node_infos[0].slot
    cache.remove_node("x")
    cache.add_node(make_node("y").capacity(cpu="1", memory="1Gi", pods=10).obj())
    info = cache.node("y")
    assert info is not None and info.slot == slot
    alloc, _ = cache.snapshot().table.scalar("nvidia.com/gpu")
    assert alloc[slot] == 0
    assert cache.snapshot().table.alloc_cpu[slot] == 1000


def test_table_grows_past_initial_capacity() -> None:
    cache = Cache()
    for i in range(200):
        cache.add_node(make_node(f"n{i}").capacity(cpu=str(i + 1), memory="1Gi", pods=10).obj())
    snapshot = cache.snapshot()
    assert len(snapshot) == 200
    for info in snapshot.node_infos:
        assert cache.snapshot().table.alloc_cpu[info.slot] == info.allocatable.milli_cpu
