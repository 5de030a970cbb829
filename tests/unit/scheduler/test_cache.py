from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node
from kubesched.framework import node_table
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo
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


def test_image_columns_follow_node_changes_and_keep_the_most_recently_used(monkeypatch: Any) -> None:
    monkeypatch.setattr(node_table, "MAX_IMAGE_COLUMNS", 2)
    cache = Cache()
    cache.add_node(make_node("a").capacity(cpu="1", memory="1Gi", pods=10).image("web:1", size=300).obj())
    cache.add_node(make_node("b").capacity(cpu="1", memory="1Gi", pods=10).obj())
    table = cache.snapshot().table
    slot_a, slot_b = (info.slot for info in cache.snapshot().node_infos)
    assert (table.image_sizes("web:1")[slot_a], table.image_sizes("web:1")[slot_b]) == (300, 0)
    cache.update_node(make_node("b").capacity(cpu="1", memory="1Gi", pods=10).image("web:1", size=310).obj())
    cache.remove_node("a")
    table = cache.snapshot().table
    assert (table.image_sizes("web:1")[slot_a], table.image_sizes("web:1")[slot_b]) == (0, 310)
    kept = table.image_sizes("web:1")
    table.image_sizes("db:1")
    table.image_sizes("web:1")  # the most recent again: the third image drops db's column, not web's
    table.image_sizes("cache:1")
    assert table.image_sizes("web:1") is kept


# ---- generation snapshots ---------------------------------------------------------------------------

_ZONES = ["", "a", "b"]
_NODE_NAMES = [f"n{i}" for i in range(6)]
_POD_NAMES = [f"p{i}" for i in range(8)]

_operations = st.lists(
    st.one_of(
        st.tuples(st.just("add-node"), st.sampled_from(_NODE_NAMES), st.sampled_from(_ZONES), st.integers(1, 8)),
        st.tuples(st.just("status-update"), st.sampled_from(_NODE_NAMES), st.integers(1, 8)),
        st.tuples(st.just("remove-node"), st.sampled_from(_NODE_NAMES)),
        st.tuples(st.just("add-pod"), st.sampled_from(_POD_NAMES), st.sampled_from(_NODE_NAMES), st.integers(1, 900)),
        st.tuples(st.just("assume"), st.sampled_from(_POD_NAMES), st.sampled_from(_NODE_NAMES)),
        st.tuples(st.just("forget"), st.sampled_from(_POD_NAMES)),
        st.tuples(st.just("remove-pod"), st.sampled_from(_POD_NAMES)),
        st.tuples(st.just("update-snapshot")),
    ),
    max_size=40,
)


_IMAGES = ("img-0", "img-1", "img-2")


def _node(name: str, zone: str, cpus: int) -> Node:
    builder = make_node(name).capacity(cpu=str(cpus), memory="8Gi", pods=20).image(f"img-{cpus % 3}", size=1000 * cpus)
    return (builder.zone(zone) if zone else builder).obj()


def _picture(snapshot: Snapshot) -> list[tuple[object, ...]]:
    """Everything a cycle reads, per node in search order: the NodeInfo and its table row."""
    table = snapshot.table
    rows = []
    for info in snapshot.node_infos:
        slot = info.slot
        rows.append(
            (
                info.name,
                info.requested.milli_cpu,
                info.non_zero_requested.memory,
                info.allocatable.milli_cpu,
                tuple(sorted(info.pods)),
                int(table.req_cpu[slot]),
                int(table.nonzero_memory[slot]),
                int(table.alloc_cpu[slot]),
                int(table.pod_count[slot]),
                bool(table.live[slot]),
                table.infos[slot] is info,
                int(snapshot.slots[int(snapshot.position_of_slot[slot])]) == slot,
                # ImageLocality's columns, made on the first picture and kept up to date from then on
                tuple(int(table.image_sizes(image)[slot]) for image in _IMAGES),
                tuple(info.image_sizes.get(image, 0) for image in _IMAGES),
            )
        )
    return [*rows, ("images", tuple(sorted(snapshot.image_node_counts.items())))]


@settings(max_examples=300, deadline=None)
@given(operations=_operations)
def test_incremental_snapshot_equals_a_fresh_one_and_never_changes_between_updates(
    operations: list[tuple[Any, ...]],
) -> None:
    cache = Cache()
    kept = Snapshot()
    cache.update_snapshot(kept)
    pods: dict[str, PodInfo] = {}
    frozen = _picture(kept)
    for op in operations:
        kind = op[0]
        if kind == "add-node":
            cache.add_node(_node(op[1], op[2], op[3]))
        elif kind == "status-update" and cache.node(op[1]) is not None:
            old = cache.node(op[1])
            assert old is not None
            labels = old.node.metadata.labels
            zone = labels.get("topology.kubernetes.io/zone", "")
            cache.update_node(_node(op[1], zone, op[2]))
        elif kind == "remove-node":
            cache.remove_node(op[1])
        elif kind == "add-pod":
            pod = make_pod(op[1]).uid(op[1]).node_name(op[2]).req(cpu=f"{op[3]}m").obj()
            if op[1] in pods:
                cache.remove_pod(pods.pop(op[1]).pod)
            pods[op[1]] = cache.add_pod(pod)
        elif kind == "assume" and op[1] not in pods:
            pods[op[1]] = cache.assume_pod(PodInfo(make_pod(op[1]).uid(op[1]).req(cpu="100m").obj()), op[2])
        elif kind == "forget" and op[1] in pods and cache.is_assumed(op[1]):
            cache.forget_pod(op[1])
            del pods[op[1]]
        elif kind == "remove-pod" and op[1] in pods:
            cache.remove_pod(pods.pop(op[1]).pod)
        elif kind == "update-snapshot":
            cache.update_snapshot(kept)
            frozen = _picture(kept)
        assert _picture(kept) == frozen, "a snapshot changes only when it is updated"
    cache.update_snapshot(kept)
    fresh = Snapshot()
    cache.update_snapshot(fresh)
    assert _picture(kept) == _picture(fresh)
    assert [info.name for info in kept.node_infos] == cache.node_order()
    assert kept.generation == fresh.generation == cache.generation


def test_a_status_only_update_copies_one_node_and_keeps_the_order() -> None:
    cache = Cache()
    for i in range(50):
        cache.add_node(_node(f"n{i}", "a" if i % 2 else "b", 4))
    snapshot = Snapshot()
    assert cache.update_snapshot(snapshot) == 50
    order = list(snapshot.slots)
    cache.update_node(_node("n7", "a", 8))
    assert cache.update_snapshot(snapshot) == 1
    assert list(snapshot.slots) == order
    assert snapshot.by_name["n7"].allocatable.milli_cpu == 8000 == snapshot.table.alloc_cpu[snapshot.by_name["n7"].slot]
    assert cache.update_snapshot(snapshot) == 0, "nothing changed since"


_confirm_operations = st.lists(
    st.one_of(
        # assume pod i on node n: (kind, pod, node, cpu millis, host port?, pod affinity?)
        st.tuples(
            st.just("assume"),
            st.sampled_from(_POD_NAMES),
            st.sampled_from(("a", "b")),
            st.integers(1, 900),
            st.booleans(),
            st.booleans(),
        ),
        # the informer confirms pod i: bound as assumed, or with other requests, on the other node, or relabelled
        st.tuples(
            st.just("confirm"), st.sampled_from(_POD_NAMES), st.sampled_from(("same", "resized", "moved", "relabelled"))
        ),
        st.tuples(st.just("update-snapshot")),
    ),
    max_size=40,
)


def _assumable(name: str, cpu: int, host_port: bool, affinity: bool) -> PodInfo:
    builder = make_pod(name).uid(name).label("app", name).req(cpu=f"{cpu}m", memory=f"{cpu}Mi")
    if host_port:
        builder = builder.host_port(8000 + cpu % 3)
    if affinity:
        builder = builder.pod_affinity("app", "In", ["x"], topology_key="zone", anti=True)
    return PodInfo(builder.obj())


def _node_view(info: Any) -> tuple[object, ...]:
    return (
        [(uid, pod_info.pod) for uid, pod_info in info.pods.items()],
        info.pods_with_affinity,
        (info.requested.milli_cpu, info.requested.memory, info.requested.ephemeral_storage),
        (info.non_zero_requested.milli_cpu, info.non_zero_requested.memory),
        {ip: sorted(ports) for ip, ports in info.used_ports.items()},
    )


@settings(max_examples=300, deadline=None)
@given(operations=_confirm_operations)
def test_confirming_assumed_pods_leaves_nodes_as_removing_and_adding_them_would(
    operations: list[tuple[Any, ...]],
) -> None:
    """The informer's confirmation of an assumed pod swaps its PodInfo without touching the node's aggregates
    when nothing they derive from moved; the nodes (pods in order, the bound Pod objects, requests, ports, pods
    with affinity) and the snapshot must be what removing the assumed pod and adding the bound one gives."""
    nodes = {name: make_node(name).capacity(cpu="64", memory="64Gi", pods=50).obj() for name in ("a", "b")}
    cache = Cache()
    for node in nodes.values():
        cache.add_node(node)
    kept = Snapshot()
    cache.update_snapshot(kept)
    # The reference: per node, the PodInfos in the order remove-then-add leaves them.
    expected: dict[str, list[PodInfo]] = {"a": [], "b": []}
    assumed: dict[str, tuple[PodInfo, str]] = {}
    confirmed: set[str] = set()
    for op in operations:
        if op[0] == "assume" and op[1] not in assumed and op[1] not in confirmed:
            info = cache.assume_pod(_assumable(op[1], op[3], op[4], op[5]), op[2])
            assumed[op[1]] = (info, op[2])
            expected[op[2]].append(info)
        elif op[0] == "confirm" and op[1] in assumed:
            info, on = assumed.pop(op[1])
            confirmed.add(op[1])
            pod = info.pod
            if op[2] == "resized":
                resized = _assumable(op[1], 901, bool(info.host_ports), info.has_pod_affinity).pod
                pod = replace(pod, spec=replace(resized.spec, node_name=on))
            if op[2] == "relabelled":
                pod = replace(pod, metadata=replace(pod.metadata, labels={"app": "other"}))
            target = "b" if op[2] == "moved" and on == "a" else "a" if op[2] == "moved" else on
            bound = replace(pod, spec=replace(pod.spec, node_name=target), status=replace(pod.status, phase="Running"))
            expected[on] = [p for p in expected[on] if p.uid != op[1]]
            expected[target].append(cache.add_pod(bound))
            assert not cache.is_assumed(op[1])
        elif op[0] == "update-snapshot":
            cache.update_snapshot(kept)
    cache.update_snapshot(kept)
    for name, node in nodes.items():
        reference = NodeInfo(node)
        for pod_info in expected[name]:
            reference.add_pod(pod_info)
        live = cache.node(name)
        assert live is not None
        assert _node_view(live) == _node_view(reference)
        assert _node_view(kept.by_name[name]) == _node_view(reference)
        slot = live.slot
        assert int(kept.table.req_cpu[slot]) == reference.requested.milli_cpu
        assert int(kept.table.pod_count[slot]) == len(reference.pods)
        # One NodeInfo per node across the snapshot's views of it.
        assert kept.table.infos[slot] is kept.by_name[name] is kept.table.info_column[slot]
        assert kept.node_infos[int(kept.position_of_slot[slot])] is kept.by_name[name]


def test_a_bind_confirmed_as_assumed_reaches_the_snapshot_without_a_change_to_the_table() -> None:
    """A confirmation that leaves every per-node count as it was (same spec fields, labels, not terminating)
    gives the snapshot the bound PodInfo without logging the node as changed, so the per-node caches read from
    the table's log do not recompute it; a relabelled pod is a change (PodTopologySpread counts labels)."""
    cache = Cache()
    cache.add_node(make_node("n").capacity(cpu="4", memory="8Gi", pods=10).obj())
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    table = snapshot.table
    for name, labels, logged in (("same", {"app": "a"}, False), ("relabelled", {"app": "b"}, True)):
        assumed = cache.assume_pod(PodInfo(make_pod(name).uid(name).label("app", "a").obj()), "n")
        cache.update_snapshot(snapshot)
        since = table.change_position
        bound = replace(assumed.pod, metadata=replace(assumed.pod.metadata, labels=labels))
        confirmed = cache.add_pod(replace(bound, status=replace(bound.status, phase="Running")))
        cache.update_snapshot(snapshot)
        info = snapshot.by_name["n"]
        assert info.pods[name] is confirmed and info.pods[name].pod.status.phase == "Running"
        assert table.infos[info.slot] is info
        assert (len(table.changed_slots(since)) == 1) is logged, name
