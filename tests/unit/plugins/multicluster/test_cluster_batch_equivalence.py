"""Property test: the cluster plugins' batch methods answer exactly what their per-cluster methods answer.

For random member clusters (totals, node buckets with and without pod slots, empty and zero-count buckets, tainted
buckets, not ready, stale, unknown to the source) with hub pods in flight, and a random pending pod (cpu, memory,
extended resources, one no cluster reports, one the plugin ignores; tolerations of some taints, all, or none
there), ClusterCapacity's ``filter_batch``,
ClusterReadiness's ``filter_batch``/``score_batch`` and ClusterBalance's ``score_batch`` are compared with the
per-cluster methods of a fresh plugin over the whole snapshot and a shuffled subset. The batch plugins are kept
across rounds in which pods are bound, removed, counted by the member, and states replaced, as in a scheduler, so
their per-slot caches, the verdicts kept per recurring request and the incremental overlay (also across a pod
brought again, which changes its cluster's row and not its pods) are checked against a
recomputation from scratch; one ClusterCapacity and one ClusterBalance send every changed cluster through their
arrays, one each through the per-cluster method as they do for a few.
ClusterReservation's ``filter_batch`` is compared with its ``filter`` over random commit ledgers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod, Taint
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import (
    CLUSTER_COMMIT_SERVICE,
    CLUSTER_STATE_SERVICE,
    ClusterSnapshot,
    ClusterState,
    CommitLedger,
    NodeBucket,
)
from kubesched.federation.adapter import allocated_pod, super_node
from kubesched.federation.state import placeholder_uid
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime.services import Services
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import PodInfo
from kubesched.plugins.multicluster import (
    ClusterBalance,
    ClusterBalanceArgs,
    ClusterCapacity,
    ClusterCapacityArgs,
    ClusterReadiness,
    ClusterReadinessArgs,
    ClusterReservation,
    ClusterReservationArgs,
)
from kubesched.plugins.multicluster.args import ResourceWeight
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result
from kubesched.testing.multicluster_builders import make_member

NOON = 1772366400.0
GI = 2**30
GPU = "example.com/gpu"
LICENSE = "example.com/license"
UNREPORTED = "other.io/fpga"
NAMES = tuple(f"c{i}" for i in range(6))

# Few, round amounts so that "request == free" boundaries come up often.
CPU_FREE = st.sampled_from([0, 500, 1000, 2000, 4000])
MEMORY_FREE = st.sampled_from([0, GI, 2 * GI, 4 * GI])


@st.composite
def free_map(draw: st.DrawFn) -> dict[str, int]:
    free: dict[str, int] = {}
    if draw(st.booleans()):
        free["cpu"] = draw(CPU_FREE)
    if draw(st.booleans()):
        free["memory"] = draw(MEMORY_FREE)
    if draw(st.booleans()):
        free["pods"] = draw(st.sampled_from([0, 1, 3]))
    if draw(st.booleans()):
        free[GPU] = draw(st.sampled_from([0, 1, 2]))
    if draw(st.integers(0, 4)) == 0:
        free[LICENSE] = draw(st.sampled_from([0, 1]))
    return free


@st.composite
def totals(draw: st.DrawFn) -> dict[str, int]:
    out = {
        "cpu": draw(st.sampled_from([0, 1000, 4000, 16000])),
        "memory": draw(st.sampled_from([0, 2 * GI, 16 * GI])),
        "pods": draw(st.sampled_from([0, 1, 2, 10])),
    }
    if draw(st.booleans()):
        out[GPU] = draw(st.sampled_from([0, 2, 8]))
    return {name: amount for name, amount in out.items() if amount or draw(st.booleans())}


GPU_TAINT = Taint(GPU, "true", "NoSchedule")
DRAIN_TAINT = Taint("drain", "", "NoExecute")
TAINT_SETS = st.sampled_from([(), (), (GPU_TAINT,), (DRAIN_TAINT,), (GPU_TAINT, DRAIN_TAINT)])
# (key, operator, value, effect): tolerating the GPU taint, the drain taint, every taint, or none that is there.
TOLERATIONS = [
    (GPU, "Equal", "true", "NoSchedule"),
    ("drain", "Exists", "", "NoExecute"),
    ("", "Exists", "", ""),
    ("spot", "Exists", "", "NoSchedule"),
    (GPU, "Equal", "true", "PreferNoSchedule"),
]


@st.composite
def cluster_state(draw: st.DrawFn, name: str) -> ClusterState:
    allocatable = draw(totals())
    allocated = {k: v // draw(st.sampled_from([1, 2, 4])) for k, v in allocatable.items() if draw(st.booleans())}
    nodes = draw(
        st.one_of(
            st.none(),
            st.lists(st.builds(NodeBucket, st.integers(0, 3), free_map(), TAINT_SETS), max_size=4).map(tuple),
        )
    )
    return ClusterState(
        name=name,
        ready=draw(st.integers(0, 5)) > 0,
        observed_at=draw(st.sampled_from([None, NOON - 10, NOON - 300, NOON - 301, NOON - 3600])),
        allocatable=allocatable,
        allocated=allocated,
        nodes=nodes,
        accounted_pods=frozenset({placeholder_uid(name)}),
    )


@st.composite
def hub_pod(draw: st.DrawFn, name: str, cluster: str | None) -> Pod:
    builder = make_pod(name).namespace("hub")
    requests: dict[str, Any] = {}
    if draw(st.booleans()):
        requests["cpu"] = draw(st.sampled_from(["0", "100m", "500m", "1", "2", "4"]))
    if draw(st.booleans()):
        requests["memory"] = draw(st.sampled_from(["0", "512Mi", "1Gi", "2Gi"]))
    for extended in draw(st.lists(st.sampled_from([GPU, LICENSE, UNREPORTED]), unique=True, max_size=2)):
        requests[extended] = draw(st.integers(0, 2))
    if requests:
        builder.req(requests)
    for toleration in draw(st.lists(st.sampled_from(TOLERATIONS), unique=True, max_size=2)):
        builder.toleration(*toleration)
    if cluster is not None:
        builder.node_name(cluster)
    return builder.obj()


class _Source:
    """A cluster state source that, like the live cache, hands out a new mapping whenever a state changes."""

    def __init__(self, states: Mapping[str, ClusterState]) -> None:
        self.states: Mapping[str, ClusterState] = dict(states)

    def snapshot(self, now: float) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=now, clusters=self.states)

    def put(self, state: ClusterState) -> None:
        self.states = {**self.states, state.name: state}

    def drop(self, name: str) -> None:
        self.states = {k: v for k, v in self.states.items() if k != name}


CAPACITY_ARGS = [ClusterCapacityArgs(), ClusterCapacityArgs(node_level_fit=False, ignored_resources=(LICENSE,))]
READINESS_ARGS = [ClusterReadinessArgs(max_staleness_seconds=300), ClusterReadinessArgs(stale_policy="Penalize")]
BALANCE_ARGS = [
    ClusterBalanceArgs(),
    ClusterBalanceArgs(
        resources=(
            ResourceWeight(name="cpu", weight=3),
            ResourceWeight(name=GPU, weight=5),
            ResourceWeight(name="ephemeral-storage", weight=2),
            ResourceWeight(name=UNREPORTED, weight=1),
        )
    ),
]


def _fresh(kind: type[Any], args: Any, handle: PluginHandle) -> Any:
    return kind(args, handle)


def _check(warm: list[Any], handle: PluginHandle, snapshot: Snapshot, pod: PodInfo, subset: list[str]) -> None:
    orders = [[info.name for info in snapshot.node_infos], subset]
    for plugin in warm:
        reference = _fresh(type(plugin), plugin.args, handle)
        warm_state, ref_state = CycleState(), CycleState()
        if hasattr(plugin, "pre_filter"):
            assert plugin.pre_filter(warm_state, pod, snapshot.node_infos) is None
            assert reference.pre_filter(ref_state, pod, snapshot.node_infos) is None
            for order in orders:
                want = [reference.filter(ref_state, pod, snapshot.by_name[name]) for name in order]
                got = expand_batch_result(plugin.filter_batch(warm_state, pod, batch_of(snapshot, order)), len(order))
                assert got == want, (plugin.name, plugin.args, order)
        if not hasattr(plugin, "score_batch"):
            continue
        warm_state, ref_state = CycleState(), CycleState()
        status = plugin.pre_score(warm_state, pod, snapshot.node_infos)
        assert status == reference.pre_score(ref_state, pod, snapshot.node_infos)
        if status is not None:
            continue  # Skip: the framework never scores with it
        for order in orders:
            want_scores = [reference.score(ref_state, pod, snapshot.by_name[name]) for name in order]
            got_scores = plugin.score_batch(warm_state, pod, batch_of(snapshot, order)).tolist()
            assert got_scores == want_scores, (plugin.name, plugin.args, order)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_cluster_plugins_batch_equals_per_cluster_across_binds_and_state_changes(data: st.DataObject) -> None:
    names = list(NAMES[: data.draw(st.integers(1, len(NAMES)), label="clusters")])
    states = {name: data.draw(cluster_state(name), label=f"state {name}") for name in names}
    unknown = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=1), label="unknown")
    cache = Cache()
    for name in names:
        cache.add_node(super_node(make_member(name).obj(), states[name]))
        placeholder = allocated_pod(states[name])
        if placeholder is not None:
            cache.add_pod(placeholder)
    bound: list[Pod] = []
    counter = 0

    def bind(cluster: str) -> None:
        nonlocal counter
        counter += 1
        pod = data.draw(hub_pod(f"h{counter}", cluster), label="bound pod")
        cache.add_pod(pod)
        bound.append(pod)

    for _ in range(data.draw(st.integers(0, 6), label="in flight")):
        bind(data.draw(st.sampled_from(names)))
    source = _Source({name: state for name, state in states.items() if name not in unknown})
    services = Services()
    services.register(CLUSTER_STATE_SERVICE, lambda spec: source)
    handle = PluginHandle(cache, clock=VirtualClock(NOON), services=services, profile_name="hub")
    arrays_only: list[Any] = [
        *(ClusterCapacity(args, handle) for args in CAPACITY_ARGS),
        *(ClusterBalance(args, handle) for args in BALANCE_ARGS),
    ]
    for plugin in arrays_only:
        plugin.few_slots = 0  # every stale slot through the arrays, none through the per-cluster method
    warm: list[Any] = [
        *arrays_only,
        *(ClusterCapacity(args, handle) for args in CAPACITY_ARGS),
        *(ClusterReadiness(args, handle) for args in READINESS_ARGS),
        *(ClusterBalance(args, handle) for args in BALANCE_ARGS),
    ]
    snapshot = Snapshot()  # one snapshot updated in place, as the scheduler's: table slots persist
    # A few pending pods that recur across rounds, as a workload's templates do: the verdicts kept per request
    # must follow every change in between.
    pending = [PodInfo(data.draw(hub_pod(f"pending-{i}", None), label="pending")) for i in range(2)]
    for _ in range(data.draw(st.integers(1, 5), label="rounds")):
        cache.update_snapshot(snapshot)
        pod = data.draw(st.sampled_from(pending), label="this round's pod")
        order = data.draw(st.permutations(names), label="order")
        subset = order[: data.draw(st.integers(1, len(order)), label="subset size")]
        _check(warm, handle, snapshot, pod, list(subset))
        for _ in range(data.draw(st.integers(0, 3), label="changes")):
            change = data.draw(st.sampled_from(["bind", "bind", "confirm", "remove", "count", "replace", "drop"]))
            cluster = data.draw(st.sampled_from(names))
            if change == "bind":
                bind(cluster)
            elif change == "confirm" and bound:
                # The informer brings a pod again (a bind confirmed): its node's row changes, its pods do not.
                cache.add_pod(bound[data.draw(st.integers(0, len(bound) - 1))])
            elif change == "remove" and bound:
                cache.remove_pod(bound.pop(data.draw(st.integers(0, len(bound) - 1))))
            elif change == "count" and cluster in source.states:
                # The member's state now counts the pods bound to it: they are no longer in flight.
                counted = frozenset(p.metadata.uid for p in bound if p.spec.node_name == cluster)
                current = source.states[cluster]
                source.put(replace(current, accounted_pods=current.accounted_pods | counted))
            elif change == "replace":
                source.put(data.draw(cluster_state(cluster), label="new state"))
            elif change == "drop":
                source.drop(cluster)


class _Committer:
    """Only the ledger: ClusterReservation's Filter reads nothing else of the committer."""

    def __init__(self) -> None:
        self.ledger = CommitLedger()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from([NOON - 120, NOON - 60, NOON - 59, NOON - 1, NOON])),
        max_size=12,
    ),
    st.lists(st.sampled_from(NAMES), max_size=3),
    st.permutations(NAMES),
    st.integers(1, len(NAMES)),
)
def test_reservation_filter_batch_equals_filter_on_the_ledger(
    failures: list[tuple[str, float]], succeeded: list[str], order: list[str], size: int
) -> None:
    committer = _Committer()
    for cluster, at in failures:
        committer.ledger.failed(cluster, at)
    for cluster in succeeded:
        committer.ledger.succeeded(cluster)
    cache = Cache()
    for name in NAMES:
        cache.add_node(super_node(make_member(name).obj(), ClusterState(name=name, ready=True)))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    services = Services()
    services.register(CLUSTER_COMMIT_SERVICE, lambda spec: committer)
    handle = PluginHandle(cache, clock=VirtualClock(NOON), services=services, profile_name="hub")
    plugin = ClusterReservation(ClusterReservationArgs(suspect_after_failures=2, suspect_seconds=60), handle)
    pod = PodInfo(make_pod("p").obj())
    subset = list(order[:size])
    want = [plugin.filter(CycleState(), pod, snapshot.by_name[name]) for name in subset]
    got = expand_batch_result(plugin.filter_batch(CycleState(), pod, batch_of(snapshot, subset)), len(subset))
    assert got == want


def test_reservation_filter_batch_without_a_committer_passes_every_cluster() -> None:
    cache = Cache()
    cache.add_node(super_node(make_member("c0").obj(), ClusterState(name="c0", ready=True)))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    plugin = ClusterReservation(None, PluginHandle(cache, services=Services()))
    assert plugin.filter_batch(CycleState(), PodInfo(make_pod("p").obj()), batch_of(snapshot)) is None
