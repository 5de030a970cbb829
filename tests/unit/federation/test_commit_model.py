"""A model-based test of the cross-cluster commit (docs/explanation/cross-cluster-commit.md): hypothesis drives an
in-memory hub and two or three members (:mod:`kubesched.testing.commit_model`) through hub pods created and
deleted, scheduling, and a crash or a lost answer at any step, and checks the invariant.

* At every step -- after every round of the event loop at every time the virtual clock stops at, not only
  between rules (``no_pod_runs_twice``) --: no hub pod has running copies in two members (reconciliation is only
  ever needed after an operator placed a pod again, which the model does not do, so not even a copy about to be
  reconciled is allowed); a hub pod bound to a member has its copy there (a copy is deleted only once another is
  confirmed, and the hub binds only to a member that made one); no member node runs more than its allocatable.
* After healing every fault and running until quiet (the ``settle`` rule, and at the end of every run): exactly
  one copy per bound hub pod, in its member; none for a deleted or pending hub pod; a pending hub pod fits
  nowhere; no node over its allocatable with live reservations counted; no reservation held past its TTL and the
  agent's in-flight window.

The faults, by rule or drawn at random per member (``weather``, also at the start of every run): the hub killed
(and restarted), a failover (a newer hub while the deposed one goes on), an agent killed at once or at a call to
its member API (the call carried out or not: mid-bind after the pod was created is one of them; a push-mode
agent takes its hub with it), a call to an agent dropped, its answer lost, or delivered late, a member
partitioned away and back, its API server down, a pod create that lands after the agent gave up on it.

CI runs a fixed, derandomized set of examples. To search longer, with fresh random examples:
``KUBESCHED_MODEL_EXAMPLES=2000 python -m pytest tests/unit/federation/test_commit_model.py`` (and
``KUBESCHED_MODEL_STEPS`` for longer runs than 30 steps). The system's logs are off while it runs (thousands of
runs would keep gigabytes of them); ``KUBESCHED_MODEL_LOGS=1`` keeps them, to read a failing run's.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kubesched.testing.commit_model import REQUEST_TIMEOUT, World, safety_violations

EXAMPLES = int(os.environ.get("KUBESCHED_MODEL_EXAMPLES", "0") or 0)
STEPS = int(os.environ.get("KUBESCHED_MODEL_STEPS", "0") or 0)
LOGS = bool(os.environ.get("KUBESCHED_MODEL_LOGS"))
MEMBERS = ("m0", "m1", "m2")

member_index = st.integers(min_value=0, max_value=len(MEMBERS) - 1)
then = st.sampled_from([0.0, 0.0, 1.0, 3.0, 10.0])  # how long the system runs after a rule's action
calls = st.sampled_from([0.0, 0.1, 0.3, 0.5])  # how often a call to an agent is dropped, loses its answer or is late
kills = st.sampled_from([0.0, 0.05, 0.15])  # how often an agent dies at a call to its member API
slow = st.sampled_from([0.0, 0.2])  # how often a pod create lands after the agent gave up on it


class CommitModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.world: World | None = None
        self.violations: list[str] = []  # the safety invariants' violations seen at any step of the clock
        self.healthy = True  # False once a step failed: teardown then only cleans up
        self.steps = 0
        # Every run logs hundreds of warnings (refreshes failing by design); kept by pytest for the whole test,
        # thousands of runs would hold gigabytes. KUBESCHED_MODEL_LOGS=1 keeps them (to read a failing run's).
        self._logger = logging.getLogger("kubesched")
        self._log_level = self._logger.level
        if not LOGS:
            self._logger.setLevel(logging.CRITICAL)

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def act(self, action: Any, seconds: float) -> None:
        """``action()`` on the event loop (it may start tasks), then the system runs for ``seconds``."""

        async def call() -> None:
            action()
            await self.w.run_for(seconds)

        self.steps += 1
        self.healthy = False
        self.run(call())
        self.healthy = True

    def act_async(self, action: Any, seconds: float) -> None:
        async def call() -> None:
            await action()
            await self.w.run_for(seconds)

        self.healthy = False
        self.run(call())
        self.healthy = True

    @property
    def w(self) -> World:
        assert self.world is not None
        return self.world

    def member(self, index: int, *, pull: bool = False) -> str | None:
        names = list(self.w.members)
        name = names[index % len(names)]
        if pull and self.w.members[name].push:
            return None
        return name

    def check(self) -> None:
        if self.world is not None and not self.violations:
            self.violations = safety_violations(self.world)

    @initialize(
        members=st.integers(min_value=2, max_value=3),
        push=st.lists(st.booleans(), min_size=3, max_size=3),
        cpus=st.lists(st.sampled_from(["500m", "1", "2"]), min_size=1, max_size=8),
        weather=st.lists(st.tuples(calls, kills, slow), min_size=3, max_size=3),
        seed=st.integers(min_value=0, max_value=2**32 - 1),
        ttl=st.sampled_from([30.0, 10.0]),
    )
    def start(
        self,
        members: int,
        push: list[bool],
        cpus: list[str],
        weather: list[tuple[float, float, float]],
        seed: int,
        ttl: float,
    ) -> None:
        self.healthy = False
        self.world = World({MEMBERS[i]: push[i] for i in range(members)}, seed=seed, ttl=ttl)
        self.world.watch = self.check
        for side, (call_faults, kill_faults, slow_creates) in zip(self.world.members.values(), weather, strict=False):
            side.link.fault_rate = 0.0 if side.push else call_faults
            side.faults.kill_rate, side.faults.slow_rate = kill_faults, slow_creates
        self.run(self.w.start())
        self.act(lambda: [self.w.create_pod(cpu) for cpu in cpus], 0.0)

    # --------------------------------------------------------------------------------------------- hub pods

    @rule(cpus=st.lists(st.sampled_from(["500m", "1", "2"]), min_size=1, max_size=3), seconds=then)
    def create_pods(self, cpus: list[str], seconds: float) -> None:
        self.act(lambda: [self.w.create_pod(cpu) for cpu in cpus], seconds)

    @rule(index=st.integers(min_value=0, max_value=1000), seconds=then)
    def delete_pod(self, index: int, seconds: float) -> None:
        pods = sorted(self.w.hub_pods(), key=lambda pod: pod.metadata.name)
        if pods:
            uid = pods[index % len(pods)].metadata.uid
            self.act(lambda: self.w.delete_pod(uid), seconds)

    @rule(seconds=st.sampled_from([0.0, 1.0, 3.0, 10.0, 40.0]))
    def run_for(self, seconds: float) -> None:
        self.act(lambda: None, seconds)

    # ------------------------------------------------------------------------------------------------ hubs

    @rule(seconds=then)
    def crash_hub(self, seconds: float) -> None:
        self.act_async(self.w.crash_hub, seconds)

    @rule(seconds=then)
    def start_hub(self, seconds: float) -> None:
        self.act_async(self.w.start_hub, seconds)

    @precondition(lambda self: self.world is not None and self.world.leader is not None)
    @rule(seconds=then)
    def failover(self, seconds: float) -> None:
        """A newer hub takes over while the old one goes on (it has not noticed it lost the Lease)."""

        async def take_over() -> None:
            deposed = self.w.deposed
            if deposed is not None:
                await self.w.crash_hub(deposed)
            await self.w.start_hub(failover=True)

        self.act_async(take_over, seconds)

    @precondition(lambda self: self.world is not None and self.world.deposed is not None)
    @rule(seconds=then)
    def deposed_hub_stops(self, seconds: float) -> None:
        self.act_async(lambda: self.w.crash_hub(self.w.deposed), seconds)

    # ---------------------------------------------------------------------------------------------- agents

    @rule(index=member_index, seconds=then)
    def crash_agent(self, index: int, seconds: float) -> None:
        name = self.member(index, pull=True)
        if name is not None:
            self.act_async(self.w.members[name].crash_agent, seconds)

    @rule(index=member_index, seconds=then)
    def restart_agent(self, index: int, seconds: float) -> None:
        name = self.member(index, pull=True)
        if name is not None:
            self.act(self.w.members[name].start_agent, seconds)

    @rule(
        index=member_index,
        at=st.sampled_from(["POST pods", "DELETE configmaps", "POST configmaps", "DELETE pods", "GET pods"]),
        lands=st.booleans(),
        seconds=then,
    )
    def kill_agent_at_call(self, index: int, at: str, lands: bool, seconds: float) -> None:
        """The member's agent (in push mode: the hub it runs in) dies at its next call ``at`` to its member API, the
        call carried out (``lands``) or not: at ``POST pods`` landed, mid-bind with the pod made and its reservation
        left."""
        name = self.member(index)
        assert name is not None
        faults = self.w.members[name].faults

        def arm() -> None:
            faults.kill_at, faults.kill_lands = at, lands

        self.act(arm, seconds)

    @rule(index=member_index, down=st.booleans(), seconds=then)
    def member_api(self, index: int, down: bool, seconds: float) -> None:
        name = self.member(index)
        assert name is not None
        faults = self.w.members[name].faults
        self.act(lambda: setattr(faults, "down", down), seconds)

    @rule(index=member_index, delay=st.sampled_from([0.0, 1.0, REQUEST_TIMEOUT]), seconds=then)
    def slow_create(self, index: int, delay: float, seconds: float) -> None:
        name = self.member(index)
        assert name is not None
        faults = self.w.members[name].faults
        self.act(lambda: setattr(faults, "slow_create", delay), seconds)

    # ----------------------------------------------------------------------------------------- the network

    @rule(
        index=member_index,
        call=st.sampled_from(["bind", "reserve", "release", "delete_pod", "any"]),
        fault=st.sampled_from(["drop", "lose", "late"]),
        delay=st.sampled_from([1.0, 5.0, 20.0, 45.0]),
        seconds=then,
    )
    def next_call_fails(self, index: int, call: str, fault: str, delay: float, seconds: float) -> None:
        """The hub's next ``call`` to the member's agent is dropped, its answer lost, or delivered ``delay`` late."""
        name = self.member(index, pull=True)
        if name is not None:
            link = self.w.members[name].link
            self.act(lambda: link.faults.append((call, fault, delay)), seconds)

    @rule(index=member_index, call_faults=calls, kill_faults=kills, slow_creates=slow, seconds=then)
    def weather(self, index: int, call_faults: float, kill_faults: float, slow_creates: float, seconds: float) -> None:
        """From now until healed, faults at random: the hub's calls to the member's agent fail so often (dropped,
        lost or late), its agent dies at a call to the member's API so often, its pod creates land late so often."""
        name = self.member(index)
        assert name is not None
        side = self.w.members[name]

        def set_weather() -> None:
            side.link.fault_rate = 0.0 if side.push else call_faults
            side.faults.kill_rate, side.faults.slow_rate = kill_faults, slow_creates

        self.act(set_weather, seconds)

    @rule(index=member_index, partitioned=st.booleans(), seconds=then)
    def partition(self, index: int, partitioned: bool, seconds: float) -> None:
        name = self.member(index, pull=True)
        if name is not None:
            link = self.w.members[name].link
            self.act(lambda: setattr(link, "partitioned", partitioned), seconds)

    # ------------------------------------------------------------------------------------------- settling

    @rule()
    def settle(self) -> None:
        self.healthy = False
        violations = self.run(self.w.settle())
        assert not violations, violations
        self.healthy = True

    @invariant()
    def no_pod_runs_twice(self) -> None:
        self.check()
        if self.violations:
            self.healthy = False
        assert not self.violations, self.violations

    def teardown(self) -> None:
        if self.world is not None:
            for kind in sorted(self.world.fired()):
                event(kind)
            event(f"hub pods bound: {sum(1 for pod in self.world.hub_pods() if pod.spec.node_name)}")
            event(f"steps: {self.steps // 5 * 5}+")
            event(f"pods made: {len(self.world.hub_pods()) + len(self.world.deleted)}")
        try:
            if self.world is not None and self.healthy:
                violations = self.run(self.world.settle())
                assert not violations, violations
                assert not self.violations, self.violations
        finally:
            if self.world is not None:
                self.run(self.world.aclose())
            self.loop.close()
            self._logger.setLevel(self._log_level)


CommitModel.TestCase.settings = settings(
    max_examples=EXAMPLES or 60,
    stateful_step_count=STEPS or 30,
    deadline=None,
    database=None,
    derandomize=not EXAMPLES,
    phases=[phase for phase in Phase if phase is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_commit_protocol = CommitModel.TestCase
