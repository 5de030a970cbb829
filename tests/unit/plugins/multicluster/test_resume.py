"""ClusterReservation resumes commits instead of starting over: a pod whose commit record is open waits until its
member has answered whether it made the pod; a pod a member runs is adopted there (search restricted, nothing
reserved, the audit verdict says so); attempt numbers continue from the record's."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.api.objects import Pod
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import (
    CLUSTER_COMMIT_SERVICE,
    CLUSTER_STATE_SERVICE,
    ClusterSnapshot,
    ClusterState,
    CommitError,
    CommitLedger,
    ReleaseOutcome,
)
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime.services import Services
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo, PreFilterResult
from kubesched.plugins.multicluster import ClusterCapacity, ClusterReservation
from kubesched.plugins.multicluster.intent import COMMIT_ANNOTATION, CommitIntent
from kubesched.plugins.multicluster.reservation import (
    RESERVATION_STATE_KEY,
    SETTLING_PREFIX,
    HeldReservation,
    reservation_id,
)
from kubesched.policyapi.verdicts import verdicts_of
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle


class _Members:
    """A committer whose releases answer from a script: "lost" (no answer), "made", or whether it was held."""

    def __init__(self, releases: list[object]) -> None:
        self.ledger = CommitLedger()
        self.releases = releases
        self.asked: list[tuple[str, str]] = []

    async def reserve(self, *args: Any, **kwargs: Any) -> str:
        return "node-1"

    async def release(self, cluster: str, reservation_id: str, *, timeout: float, pod: Any = None) -> ReleaseOutcome:
        self.asked.append((cluster, reservation_id))
        answer = self.releases.pop(0) if self.releases else "lost"
        if answer == "lost":
            raise CommitError(cluster, "Unreachable", "no answer", refused=False)
        return ReleaseOutcome(False, "apps/web") if answer == "made" else ReleaseOutcome(bool(answer))

    async def bind(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("not bound here")


class _States:
    def __init__(self, states: dict[str, ClusterState]) -> None:
        self.states = states

    def snapshot(self, now: float) -> ClusterSnapshot:
        return ClusterSnapshot(now, self.states)


def _setup(
    members: _Members, states: dict[str, ClusterState] | None = None
) -> tuple[ClusterReservation, PluginHandle, VirtualClock]:
    clock = VirtualClock()
    services = Services()
    services.register(CLUSTER_COMMIT_SERVICE, lambda spec: members)
    source = _States(states or {})
    services.register(CLUSTER_STATE_SERVICE, lambda spec: source)
    handle = PluginHandle(clock=clock, services=services)
    return ClusterReservation(None, handle), handle, clock


def _pod(record: CommitIntent | None = None) -> Pod:
    builder = make_pod("web").uid("web-uid").req(cpu="1")
    if record is not None:
        builder = builder.annotation(COMMIT_ANNOTATION, record.text())
    return builder.obj()


def _pre_filter(plugin: ClusterReservation, pod: Pod) -> tuple[CycleState, PreFilterResult | Status | None]:
    state = CycleState()
    return state, plugin.pre_filter(state, PodInfo(pod), [])


def test_an_open_record_holds_the_pod_until_its_member_answers_then_adopts_what_it_made() -> None:
    members = _Members(["lost", "lost", "made"])
    plugin, handle, clock = _setup(members)
    pod = _pod(CommitIntent("east", "r-east-3", 3))
    handle.pods[pod.metadata.uid] = pod
    start = clock.now()

    _, held = _pre_filter(plugin, pod)
    assert isinstance(held, Status) and held.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert held.message.startswith(SETTLING_PREFIX + "east")
    _, again = _pre_filter(plugin, pod)  # asked again while settling: one settle in the background, not two
    assert isinstance(again, Status) and len(handle.spawned) == 1
    asyncio.run(handle.run_spawned())
    assert members.asked == [("east", "r-east-3")] * 3
    assert clock.now() - start == 1 + 2  # backoff between the unanswered asks, on the scheduler's clock
    assert handle.activated == [pod.metadata.uid]  # back to the queue once settled

    state, result = _pre_filter(plugin, pod)
    assert result == PreFilterResult(frozenset({"east"}))
    status, _ = plugin.permit(state, PodInfo(pod), "east")
    assert status is None  # nothing to reserve: the member runs it
    held_state = state.get(RESERVATION_STATE_KEY, HeldReservation)
    assert held_state is not None and (held_state.adopted, held_state.reservation_id) == (True, "r-east-3")
    [verdict] = verdicts_of(state)
    assert verdict.allowed and verdict.reasons[0].startswith("adopted: cluster east already runs")
    assert handle.spawned == []  # no reservation was sent for


def test_a_commit_settled_as_empty_lets_the_pod_go_anywhere_with_its_next_attempt_number() -> None:
    members = _Members([True])
    plugin, handle, _ = _setup(members)
    pod = _pod(CommitIntent("east", reservation_id("web-uid", 3), 3))
    handle.pods[pod.metadata.uid] = pod
    _pre_filter(plugin, pod)
    asyncio.run(handle.run_spawned())
    state, result = _pre_filter(plugin, pod)
    assert result is None  # every cluster may be searched
    status, _ = plugin.permit(state, PodInfo(pod), "west")
    assert status is not None and status.code is Code.WAIT
    held = state.get(RESERVATION_STATE_KEY, HeldReservation)
    # a restarted hub continues the record's attempts: its reservation ids are new ones
    assert held is not None and (held.attempt, held.reservation_id) == (4, reservation_id("web-uid", 4))
    for work in handle.spawned:
        work.close()


def test_a_pod_a_member_reports_running_is_adopted_there_and_capacity_stands_aside() -> None:
    states = {
        "east": ClusterState("east", True, pod_phases={"web-uid": "Running"}),
        "west": ClusterState("west", True),
    }
    plugin, _, _ = _setup(_Members([]), states)
    pod = _pod()  # no record at all (made by an older hub, say): the members' own reports are enough
    state, result = _pre_filter(plugin, pod)
    assert result == PreFilterResult(frozenset({"east"}))
    capacity = ClusterCapacity(None, plugin.handle)
    skipped = capacity.pre_filter(state, PodInfo(pod), [])
    assert isinstance(skipped, Status) and skipped.code is Code.SKIP
    other_state, other = _pre_filter(plugin, make_pod("api").uid("api-uid").req(cpu="1").obj())
    assert other is None and capacity.pre_filter(other_state, PodInfo(make_pod("api").obj()), []) is None
