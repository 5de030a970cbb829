"""ClusterReservation's ``maxCommitsInFlight`` through a real hub scheduler: never more commits in flight than the
bound, every pod committed exactly once (none lost, none starved: they leave the queue in its order), commits
that fail give their place back, and the live loop is woken when a commit ends."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import CLUSTER_COMMIT_SERVICE, CommitError, CommitLedger, ReleaseOutcome
from kubesched.config.loader import load_config_dict
from kubesched.framework.runtime.services import Services
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.admission import BindingAdmission
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

HUB = "hub-scheduler"
CLUSTERS = ("east", "west", "south")


def _config(max_in_flight: int) -> Any:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": HUB,
                "plugins": {
                    "multiPoint": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": n} for n in ("PrioritySort", "ClusterReservation", "ClusterBind")],
                    }
                },
                "pluginConfig": [
                    {"name": "ClusterReservation", "args": {"maxCommitsInFlight": max_in_flight}},
                ],
            }
        ],
    }
    return load_config_dict(document, "admission test", in_tree_registry())


class _SlowMembers:
    """Members that take a few loop turns (seeded, different per call) to answer, refuse each pod's first reserve
    when ``refuse_first`` says so, and count the commits in flight: from a pod's reserve until its bind or the
    release of its reservation."""

    def __init__(self, seed: int, refuse_first: frozenset[str] = frozenset()) -> None:
        self.ledger = CommitLedger()
        self.rng = random.Random(seed)
        self.refuse_first = set(refuse_first)
        self.open: dict[str, str] = {}  # reservation id -> pod name
        self.most = 0
        self.bound: list[str] = []

    async def _answer(self) -> None:
        for _ in range(self.rng.randrange(1, 12)):
            await asyncio.sleep(0)

    async def reserve(
        self,
        cluster: str,
        reservation_id: str,
        pod: Pod,
        requests: Mapping[str, int],
        ttl_seconds: float,
        *,
        timeout: float,
    ) -> str:
        self.open[reservation_id] = pod.metadata.name
        self.most = max(self.most, len(self.open))
        await self._answer()
        if pod.metadata.name in self.refuse_first:
            self.refuse_first.discard(pod.metadata.name)
            del self.open[reservation_id]  # a refused reservation holds nothing
            raise CommitError(cluster, "Unfit", "no node with enough free cpu", refused=True)
        return f"{cluster}-node-0"

    async def release(
        self, cluster: str, reservation_id: str, *, timeout: float, pod: Pod | None = None
    ) -> ReleaseOutcome:
        await self._answer()
        return ReleaseOutcome(self.open.pop(reservation_id, None) is not None)

    async def bind(self, cluster: str, reservation_id: str, pod: Pod, *, timeout: float) -> None:
        await self._answer()
        self.bound.append(pod.metadata.name)
        del self.open[reservation_id]


def _hub(
    members: _SlowMembers, max_in_flight: int, pods: list[Pod]
) -> tuple[Scheduler, SimulatedCluster, VirtualClock]:
    clock = VirtualClock()
    nodes = [make_node(name).capacity(cpu="1000", memory="1000Gi", pods="1000").obj() for name in CLUSTERS]
    cluster = SimulatedCluster(clock, nodes, pods)
    services = Services()
    services.register(CLUSTER_COMMIT_SERVICE, lambda _spec: members)
    scheduler = Scheduler(
        _config(max_in_flight), in_tree_registry(), cluster, clock=clock, seed=0, services=services,
        targets=TARGET_CLUSTERS,
    )  # fmt: skip
    scheduler.max_attempts = 5
    cluster.subscribe(scheduler.event_handlers)
    return scheduler, cluster, clock


def _pods(count: int) -> list[Pod]:
    # priorities descending with the index, so the queue's order is the pods' order
    return [make_pod(f"p{i:03d}").scheduler(HUB).req(cpu="1").priority(1000 - i).obj() for i in range(count)]


@pytest.mark.parametrize(
    ("bound", "refused"),
    [
        pytest.param(1, frozenset(), id="one-at-a-time"),
        pytest.param(3, frozenset(), id="three-at-a-time"),
        pytest.param(3, frozenset({"p000", "p004", "p005", "p017"}), id="refused-commits-give-their-place-back"),
        pytest.param(16, frozenset({"p001"}), id="bound-above-the-burst's-overlap"),
    ],
)
def test_commits_in_flight_stay_within_the_bound_and_every_pod_is_committed_once(
    bound: int, refused: frozenset[str]
) -> None:
    async def main() -> None:
        members = _SlowMembers(seed=bound, refuse_first=refused)
        pods = _pods(40)
        scheduler, cluster, clock = _hub(members, bound, pods)
        popped: list[str] = []
        pop = scheduler.pop

        def recording_pop() -> Any:
            qpi = pop()
            if qpi is not None:
                popped.append(qpi.pod_info.pod.metadata.name)
            return qpi

        scheduler.pop = recording_pop  # type: ignore[method-assign]
        try:
            await scheduler.run_until_idle(clock, yield_every=1)
        finally:
            await scheduler.close()
        assert members.most <= bound
        assert sorted(members.bound) == sorted(p.metadata.name for p in pods)  # each exactly once
        assert all(cluster.pods[p.metadata.uid].spec.node_name in CLUSTERS for p in pods)
        assert scheduler.cycles.admission.in_flight == {HUB: 0}
        first_pops = list(dict.fromkeys(popped))
        assert first_pops == [p.metadata.name for p in pods]  # the queue's order: no pod overtaken

    asyncio.run(main())


def test_without_a_bound_a_burst_opens_more_commits_than_the_bound_would_allow() -> None:
    """The counterpart: the same members with ``maxCommitsInFlight: 0`` see many commits at once (so the test
    above would notice a bound that did nothing)."""

    async def main() -> None:
        members = _SlowMembers(seed=3)
        scheduler, _cluster, clock = _hub(members, 0, _pods(40))
        try:
            await scheduler.run_until_idle(clock, yield_every=1)
        finally:
            await scheduler.close()
        assert members.most > 3
        assert scheduler.cycles.admission.limits == {}
        assert len(members.bound) == 40

    asyncio.run(main())


def test_the_live_loop_is_woken_when_a_commit_ends() -> None:
    """``Scheduler.run``: with the bound reached and nothing else happening, only a commit's end can wake it."""

    async def main() -> None:
        members = _SlowMembers(seed=2)
        pods = _pods(12)
        scheduler, _cluster, _clock = _hub(members, 2, pods)
        stop = asyncio.Event()
        running = asyncio.ensure_future(scheduler.run(stop))
        try:
            async with asyncio.timeout(30):  # a hang guard, not a speed check
                while len(members.bound) < len(pods):
                    await asyncio.sleep(0)
        finally:
            stop.set()
            await running
        assert members.most <= 2
        assert sorted(members.bound) == sorted(p.metadata.name for p in pods)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("events", "admits"),
    [
        pytest.param([], True, id="empty"),
        pytest.param(["+a", "+a"], False, id="full-at-the-limit"),
        pytest.param(["+a", "+a", "-a"], True, id="room-after-one-ends"),
        pytest.param(["+a", "+b", "+b", "+b"], True, id="profile-without-a-limit-is-not-counted"),
    ],
)
def test_binding_admission_counts_per_profile(events: list[str], admits: bool) -> None:
    admission = BindingAdmission({"a": 2})
    woken: list[int] = []
    admission.on_room = lambda: woken.append(1)
    for event in events:
        (admission.started if event[0] == "+" else admission.finished)(event[1:])
    assert admission.admits() is admits
    assert woken == ([1] if events[-1:] == ["-a"] else [])
