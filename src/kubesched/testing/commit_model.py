"""An in-memory hub and member clusters, with the crashes and lost answers the cross-cluster commit must survive.

Who calls it: the model-based test of the commit protocol (tests/unit/federation/test_commit_model.py). What
runs is the live hub's path on one event loop and one virtual clock (docs/explanation/cross-cluster-commit.md is
the protocol):

* **Durable**: the hub API server, a :class:`~kubesched.backends.simulated.cluster.SimulatedCluster` of the hub
  pods (their commit records and bindings survive any crash), and each member's API server, an
  :class:`~kubesched.agent.memory.InMemoryMember`.
* **Processes** that can die at any await: each member's agent (:class:`AgentProcess`: an
  :class:`~kubesched.agent.core.Agent` and its sweeper; a restart is a new Agent over the same member, its
  ``started_at`` later) and the hub (:class:`HubProcess`: a Scheduler over the hub API server with a
  ClusterStateCache, an AgentCommitter, the live hub's super nodes and Reconciler, and the reaping of deleted
  hub pods). A member is in pull mode (its agent a process of its own: it goes on with a call whose hub died) or
  push mode (its agent inside the hub: it dies with the hub). A failover starts a hub with a newer fencing token
  while the old one goes on for a while, as a leader that has not noticed it lost its Lease.
* **Faults**, each armed for the next call of a kind or drawn at random at a rate (seeded: a run repeats).
  Between hub and agent (:class:`Link`): a call dropped before it reaches the agent, an answer lost after the
  agent acted, a call delivered late (after the hub gave up on it), a partition. Between an agent and its
  member's API server (:class:`MemberApiFaults`): the agent killed at a call (before or after the call took
  effect: mid-bind, after the pod was created and before the reservation was deleted, is one of them), the
  member API unavailable, a pod create answered with no answer that lands in the member later.

:func:`safety_violations` is what must hold at every moment, :func:`settled_violations` what must hold once
everything is healed and has run long enough (:meth:`World.settle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import random
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubesched.agent.core import Agent
from kubesched.agent.memory import InMemoryMember
from kubesched.agent.push import PushEndpoint
from kubesched.agent.reservations import CONFIGMAP_PREFIX, Reservation, stored_reservation
from kubesched.api.multicluster import MemberCluster
from kubesched.api.objects import Node, Pod, object_uid
from kubesched.api.resources import pod_requests
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock, sleep
from kubesched.clusterapi.contract import CLUSTER_COMMIT_SERVICE, CLUSTER_STATE_SERVICE, ClusterState
from kubesched.errors import KubeschedError
from kubesched.federation.agent_client import (
    AgentError,
    AgentRefused,
    AgentUnreachable,
    BoundPod,
    HeldReservation,
    Released,
)
from kubesched.federation.cache import ClusterStateCache, MemberRefresh
from kubesched.federation.commit import AgentCommitter
from kubesched.federation.state import TERMINAL_PHASES
from kubesched.federation.wire import HUB_POD_UID_ANNOTATION, ReservationRequest
from kubesched.framework.events import ActionType, EventResource
from kubesched.framework.runtime.services import Services
from kubesched.live.hub_backend import SuperNodes
from kubesched.live.reconcile import Reconciler
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_pod
from kubesched.testing.hubs import HUB, hub_config
from kubesched.testing.multicluster_builders import make_member

__all__ = [
    "AGENT_NAMESPACE",
    "HUB",
    "IN_FLIGHT_SECONDS",
    "NAMESPACE",
    "TTL_SECONDS",
    "AgentKilled",
    "World",
    "safety_violations",
    "settled_violations",
]

T = TypeVar("T")

NAMESPACE = "apps"
AGENT_NAMESPACE = "kubesched-system"
TTL_SECONDS = 30.0
REQUEST_TIMEOUT = 10.0  # the agent's timeout on its member's API
IN_FLIGHT_SECONDS = REQUEST_TIMEOUT + 5.0
SWEEP_INTERVAL = 5.0
REFRESH_INTERVAL = 5.0
AGENT_CALL_SECONDS = 2.0  # the hub's deadline on a call to an agent (wall time: in memory, calls answer at once)
REAP_ATTEMPTS = 5
FLUSH_INTERVAL = 30.0
SPINS = 25  # event-loop turns given to background work after each step of the clock
MAX_ROUNDS_AT_ONE_TIME = 2000

NODE_CAPACITY = {"cpu": "2", "memory": "8Gi", "pods": "4"}


class AgentKilled(BaseException):
    """The agent process died here (a BaseException: no handler of the agent's may catch it)."""


async def spin(turns: int = SPINS) -> None:
    """Let work that needs no time (the agents' in-memory calls, their watches) run."""
    for _ in range(turns):
        await asyncio.sleep(0)


# ------------------------------------------------------------------------------------------ the member side


class MemberApiFaults:
    """The member's API server as its agent reaches it, with faults (module doc). The agent view's lists and
    watches pass untouched (a real watch outlives a short outage; a failed list would cost real-time backoff)."""

    def __init__(self, member: InMemoryMember, clock: VirtualClock, rng: random.Random) -> None:
        self.member = member
        self.clock = clock
        self.rng = rng
        self.kill_rate = 0.0  # each call of the agent kills it with this probability (landed or not, evenly)
        self.slow_rate = 0.0  # each pod create is slow (lands up to the agent's request timeout later) so often
        self.server = member.server
        self.overlaps_requests = False
        self.down = False
        self.kill_at: str | None = None  # the agent dies at its next call "METHOD resource" (e.g. "POST pods")
        self.kill_lands = False  # ... after that call reached the member
        self.slow_create: float | None = None  # the next pod create gets no answer and lands this much later
        self.landing: set[asyncio.Task[None]] = set()
        self.fired: Counter[str] = Counter()  # the faults that happened, by kind

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        retry: bool = True,
    ) -> Any:
        call = functools.partial(self.member.request, method, path, query=query, body=body)
        if method == "GET" and query is not None and "limit" in query:
            return await call()
        kind = _call_kind(method, path)
        if self.kill_rate and self.rng.random() < self.kill_rate:
            self.kill_at, self.kill_lands = kind, self.rng.random() < 0.5
        if self.kill_at is not None and self.kill_at == kind:
            self.fired[f"agent killed at {self.kill_at} ({'landed' if self.kill_lands else 'not sent'})"] += 1
            self.kill_at = None
            if self.kill_lands:
                with contextlib.suppress(KubeApiError):
                    await call()
            raise AgentKilled(f"the agent died at {method} {path}")
        if self.down:
            self.fired["member API down"] += 1
            raise KubeTransportError(f"{method} {path}: connection refused (the member's API server is down)")
        if kind == "POST pods" and self.slow_rate and self.rng.random() < self.slow_rate:
            self.slow_create = self.rng.choice([0.0, 1.0, REQUEST_TIMEOUT])
        if kind == "POST pods" and self.slow_create is not None:
            delay, self.slow_create = self.slow_create, None
            self.fired["slow create"] += 1
            task = asyncio.get_running_loop().create_task(self._land_later(delay, call))
            self.landing.add(task)
            task.add_done_callback(self.landing.discard)
            raise KubeTransportError(f"{method} {path}: timed out (the member may still carry it out)")
        return await call()

    async def _land_later(self, delay: float, call: Callable[[], Awaitable[Any]]) -> None:
        await sleep(self.clock, delay)
        with contextlib.suppress(KubeApiError):
            await call()

    def stream_lines(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self.member.stream_lines(path, query, read_timeout=read_timeout)


def _call_kind(method: str, path: str) -> str:
    """``"METHOD resource"`` of a call to a member's API: ``POST pods``, ``DELETE configmaps``, ``GET other``."""
    resource = next((part for part in reversed(path.split("/")) if part in ("pods", "configmaps")), "other")
    return f"{method} {resource}"


class AgentProcess:
    """One run of a member's agent: the Agent, the endpoint logic over it, the work it is doing (module doc).
    ``on_death`` is told when a fault killed it (its caller decides what else dies: in push mode, the hub)."""

    def __init__(
        self,
        name: str,
        faults: MemberApiFaults,
        clock: VirtualClock,
        *,
        sweeps: bool,
        on_death: Callable[[AgentProcess], None],
    ) -> None:
        self.clock = clock
        self.on_death = on_death
        self.agent = Agent(
            faults,
            clock=clock,
            namespace=AGENT_NAMESPACE,
            cluster_name=name,
            request_timeout=REQUEST_TIMEOUT,
        )
        self.endpoint = PushEndpoint(self.agent, timeout=AGENT_CALL_SECONDS)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.alive = True
        if sweeps:  # an agent server sweeps by itself; a push endpoint sweeps at every state
            self.run(self._sweep_forever())

    def run(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and isinstance(task.exception(), AgentKilled) and self.alive:
            self.alive = False
            self.on_death(self)

    async def _sweep_forever(self) -> None:
        while True:
            await sleep(self.clock, SWEEP_INTERVAL)
            with contextlib.suppress(KubeschedError):
                await self.agent.sweep_expired()

    async def kill(self) -> None:
        """Every task of the process stops where it is (the calling one excepted)."""
        self.alive = False
        current = asyncio.current_task()
        tasks = [task for task in self.tasks if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.agent.aclose()


class Link:
    """The hub's endpoint of one member (a :class:`~kubesched.federation.agent_client.MemberEndpoint`) over the
    agent process ``process()`` names (None: down), with the faults of the network between them (module doc; a
    push-mode link has no network, and no faults). The agent's work runs in its own process: a hub that gives up
    does not stop it."""

    def __init__(self, name: str, process: Callable[[], AgentProcess | None], rng: random.Random) -> None:
        self.where = f"model://{name}"
        self.process = process
        self.rng = rng
        self.fault_rate = 0.0  # each call (state refreshes excepted) fails so often: dropped, lost or late, evenly
        # (call, fault, delay): the next call named (``bind``, ``reserve``, ``release``, ``delete_pod``, ``find_pod``,
        # ``state``, or ``any``) is dropped, has its answer lost, is delivered ``delay`` seconds late, or (``ok``)
        # goes through
        self.faults: deque[tuple[str, str, float]] = deque()
        self.partitioned = False
        self.fired: Counter[str] = Counter()

    def _fault(self, op: str) -> tuple[str, float]:
        for i, (wanted, fault, delay) in enumerate(self.faults):
            if wanted in (op, "any"):
                del self.faults[i]
                self.fired[f"{op} {fault}"] += 1
                return fault, delay
        if op != "state" and self.fault_rate and self.rng.random() < self.fault_rate:
            fault = self.rng.choice(["drop", "lose", "late"])
            self.fired[f"{op} {fault}"] += 1
            return fault, self.rng.choice([1.0, 5.0, 20.0, 45.0])
        return "", 0.0

    async def _call(self, op: str, work: Callable[[PushEndpoint], Coroutine[Any, Any, T]]) -> T:
        if self.partitioned:
            self.fired["partitioned"] += 1
            raise AgentUnreachable(self.where, "connection refused (partitioned)", delivered=False)
        process = self.process()
        if process is None or not process.alive:
            raise AgentUnreachable(self.where, "connection refused (the agent is down)", delivered=False)
        fault, delay = self._fault(op)
        if fault == "drop":
            raise AgentUnreachable(self.where, "connection reset before the request was sent", delivered=False)
        if fault == "late":
            process.run(self._later(process, delay, work))
            raise AgentUnreachable(self.where, "no answer within the deadline")
        task = process.run(work(process.endpoint))
        await asyncio.wait({task})
        if task.cancelled() or isinstance(task.exception(), AgentKilled):
            raise AgentUnreachable(self.where, "the connection was reset (the agent died)")
        error = task.exception()
        if error is not None:
            raise error
        if fault == "lose":
            raise AgentUnreachable(self.where, "the answer was lost")
        return task.result()

    async def _later(self, process: AgentProcess, delay: float, work: Callable[[PushEndpoint], Awaitable[T]]) -> None:
        await sleep(process.clock, delay)
        with contextlib.suppress(AgentError):
            await work(process.endpoint)

    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState:
        return await self._call("state", lambda e: e.state(name, generation=generation, timeout=timeout))

    async def reserve(
        self, request: ReservationRequest, *, token: int = 0, timeout: float | None = None
    ) -> HeldReservation:
        return await self._call("reserve", lambda e: e.reserve(request, token=token, timeout=timeout))

    async def release(
        self,
        reservation_id: str,
        *,
        hub_pod: tuple[str, str, str] | None = None,
        token: int = 0,
        timeout: float | None = None,
    ) -> Released:
        return await self._call(
            "release", lambda e: e.release(reservation_id, hub_pod=hub_pod, token=token, timeout=timeout)
        )

    async def bind(
        self,
        reservation_id: str,
        pod: Mapping[str, Any],
        *,
        token: int = 0,
        timeout: float | None = None,
        expires_at: float | None = None,
    ) -> BoundPod:
        return await self._call(
            "bind", lambda e: e.bind(reservation_id, pod, token=token, timeout=timeout, expires_at=expires_at)
        )

    async def delete_pod(
        self, namespace: str, name: str, hub_uid: str, *, token: int = 0, timeout: float | None = None
    ) -> bool:
        return await self._call(
            "delete_pod", lambda e: e.delete_pod(namespace, name, hub_uid, token=token, timeout=timeout)
        )

    async def find_pod(self, hub_pod: tuple[str, str, str], *, timeout: float | None = None) -> BoundPod | None:
        return await self._call("find_pod", lambda e: e.find_pod(hub_pod, timeout=timeout))

    async def aclose(self) -> None:
        """The link outlives the hub processes that use it: nothing to close."""


@dataclass
class MemberSide:
    """One member cluster: its API server (durable) and the faults between it and its agents; in pull mode also
    its agent process (None while down) and the hub's link to it. A push-mode member's agents belong to the hubs."""

    name: str
    api: InMemoryMember
    faults: MemberApiFaults
    push: bool
    cluster: MemberCluster
    clock: VirtualClock
    process: AgentProcess | None = None
    link: Link = field(init=False)
    dying: set[asyncio.Task[None]] = field(default_factory=set)
    copies: tuple[int, list[tuple[str, Copy]]] | None = None  # the truth's last reading, by resourceVersion

    def __post_init__(self) -> None:
        self.link = Link(self.name, lambda: self.process, self.faults.rng)

    def start_agent(self) -> None:
        if not self.push and self.process is None:
            self.process = AgentProcess(self.name, self.faults, self.clock, sweeps=True, on_death=self._died)

    def _died(self, process: AgentProcess) -> None:
        if self.process is process:
            self.process = None
        task = asyncio.get_running_loop().create_task(process.kill())
        self.dying.add(task)
        task.add_done_callback(self.dying.discard)

    async def crash_agent(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            await process.kill()


# --------------------------------------------------------------------------------------------- the hub side


def _process(agent: AgentProcess) -> AgentProcess:
    return agent


class _SimulatedHubPods:
    """:class:`~kubesched.live.reconcile.HubPodReader` over the hub API server of the model."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster

    async def hub_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        for pod in self.cluster.pods.values():
            if pod.metadata.namespace == namespace and pod.metadata.name == name:
                return {
                    "metadata": {"namespace": namespace, "name": name, "uid": pod.metadata.uid},
                    "spec": {"nodeName": pod.spec.node_name},
                }
        return None


class _SuperNodesInto:
    """The live hub's super nodes, written into the hub API server of the model (placeholders are left out: no
    plugin of the model's profile reads them)."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster

    def on_node_add(self, node: Node) -> None:
        if node.metadata.name in self.cluster.nodes:
            self.on_node_update(self.cluster.nodes[node.metadata.name], node)
        else:
            self.cluster.add_node(node)

    def on_node_update(self, old: Node, new: Node) -> None:
        current = self.cluster.nodes.get(new.metadata.name)
        if current is None or current.raw != new.raw:
            self.cluster.update_node(new)

    def on_node_delete(self, node: Node) -> None:
        self.cluster.delete_node(node.metadata.name)

    def on_pod_add(self, pod: Pod) -> None:
        pass

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        pass

    def on_pod_delete(self, pod: Pod) -> None:
        pass

    def on_object_event(self, resource: EventResource, action: ActionType, old: object, new: object) -> None:
        pass


class HubProcess:
    """One run of the hub (module doc); ``token`` is its fencing token."""

    def __init__(self, world: World, token: int) -> None:
        self.world = world
        self.token = token
        self.alive = False
        self.agents: dict[str, AgentProcess] = {}  # the push-mode members' agents, in this process
        links: dict[str, Link] = {}
        for name, side in world.members.items():
            if side.push:
                agent = self.agents[name] = AgentProcess(
                    name, side.faults, world.clock, sweeps=False, on_death=self._agent_died
                )
                links[name] = Link(name, functools.partial(_process, agent), side.faults.rng)
            else:
                links[name] = side.link
        self.links = links
        self.committer = AgentCommitter(links)
        self.committer.fencing_token = token
        self.cache = ClusterStateCache(
            [
                MemberRefresh(name, link, interval=REFRESH_INTERVAL, deadline=AGENT_CALL_SECONDS)
                for name, link in links.items()
            ],
            clock=world.clock,
            on_refresh=self._refreshed,
        )
        services = Services()
        services.register(CLUSTER_STATE_SERVICE, lambda spec: self.cache)
        services.register(CLUSTER_COMMIT_SERVICE, lambda spec: self.committer)
        self.scheduler = Scheduler(
            world.config,
            world.registry,
            world.hub_api,
            clock=world.clock,
            seed=0,
            services=services,
            targets=TARGET_CLUSTERS,
        )
        self.reconciler = Reconciler(
            _SimulatedHubPods(world.hub_api),
            links,
            self.cache,
            world.hub_api.pods,
            clock=world.clock,
            profile=HUB,
            token=lambda: self.committer.fencing_token,
            timeout=AGENT_CALL_SECONDS,
        )
        self.super_nodes = SuperNodes(self.cache)
        self.reapers: set[asyncio.Task[None]] = set()
        self.last_flush = world.clock.now()
        self.dying: set[asyncio.Task[None]] = set()

    def _agent_died(self, agent: AgentProcess) -> None:
        """An agent inside this process was killed: so is the process."""
        task = asyncio.get_running_loop().create_task(self.crash())
        self.dying.add(task)
        task.add_done_callback(self.dying.discard)

    async def start(self) -> None:
        world = self.world
        self.alive = True
        self.reconciler.leading = True
        self.super_nodes.attach(_SuperNodesInto(world.hub_api))
        for side in world.members.values():
            self.super_nodes.member_changed(side.cluster)
        world.hub_api.subscribe(self.scheduler.event_handlers)
        await self.cache.refresh_all()
        if self.alive:  # an in-hub agent may have died (and the hub with it) while it answered
            await self.cache.start()

    def _refreshed(self, name: str) -> None:
        if not self.alive:
            return
        self.super_nodes.recompute(name)
        self.reconciler.offer(name)

    def hub_pod_deleted(self, pod: Pod) -> None:
        """The live hub's reaping of a deleted hub pod bound to a cluster (as HubPlane does for a pod deleted at
        once)."""
        if not self.alive or not pod.spec.node_name:
            return
        task = asyncio.get_running_loop().create_task(self._reap(pod))
        self.reapers.add(task)
        task.add_done_callback(self.reapers.discard)

    async def _reap(self, pod: Pod) -> None:
        link = self.links[pod.spec.node_name]
        for attempt in range(REAP_ATTEMPTS):
            if attempt:
                await sleep(self.world.clock, 2.0 ** (attempt - 1))
            try:
                await link.delete_pod(
                    pod.metadata.namespace,
                    pod.metadata.name,
                    pod.metadata.uid,
                    token=self.committer.fencing_token,
                    timeout=AGENT_CALL_SECONDS,
                )
            except AgentRefused as refusal:
                if refusal.status < 500:
                    return
            except AgentError:
                continue
            else:
                return

    async def schedule(self) -> None:
        """Every scheduling cycle that is ready, and the binding work they start, as far as it goes without time."""
        if not self.alive:
            return
        scheduler = self.scheduler
        while self.alive and await scheduler.schedule_next():
            await asyncio.sleep(0)
        if not self.alive:  # it died meanwhile (an agent inside it was killed)
            return
        now = self.world.clock.now()
        if now - self.last_flush >= FLUSH_INTERVAL:
            scheduler.queue.flush_unschedulable_left_over()
            self.last_flush = now
        await scheduler.settle()

    def ready(self) -> bool:
        return self.alive and self.scheduler.queue.has_ready_work()

    def next_wakeup(self) -> float | None:
        if not self.alive:
            return None
        times = [self.last_flush + FLUSH_INTERVAL]
        backoff = self.scheduler.queue.next_backoff_expiry()
        if backoff is not None:
            times.append(backoff)
        return min(times)

    async def crash(self) -> None:
        """The process dies: its binding cycles, background work, refreshers, reconciliation and reaping stop
        wherever they are; what it wrote to the hub API server and the members stays."""
        if not self.alive:
            return
        self.alive = False
        self.reconciler.leading = False
        for task in self.reapers:
            task.cancel()
        self.world.hub_api.unsubscribe(self.scheduler.event_handlers)
        await self.scheduler.close()
        await self.cache.close()
        await self.reconciler.aclose()
        await asyncio.gather(*self.reapers, return_exceptions=True)
        for agent in self.agents.values():
            await agent.kill()


# ----------------------------------------------------------------------------------------------- the world


class World:
    """The hub API server, the members, the processes; the model's rules act on it (module doc)."""

    def __init__(
        self, members: Mapping[str, bool], *, nodes_per_member: int = 2, seed: int = 0, ttl: float = TTL_SECONDS
    ) -> None:
        """``members``: name -> whether the member is in push mode; ``seed``: of the faults drawn at random;
        ``ttl``: of the hub's reservations (one shorter than the agent's in-flight window makes a pod create that
        lands after its reservation expired likelier)."""
        self.clock = VirtualClock()
        self.rng = random.Random(seed)
        self.config = hub_config(ttl=ttl, call_seconds=AGENT_CALL_SECONDS)
        self.registry = in_tree_registry()
        self.hub_api = SimulatedCluster(self.clock)
        self.members: dict[str, MemberSide] = {}
        for name, push in members.items():
            api = InMemoryMember(name, clock=self.clock.now)
            for i in range(nodes_per_member):
                node_name = f"{name}-node-{i}"
                api.add_node(
                    {
                        "metadata": {"name": node_name, "labels": {"kubernetes.io/hostname": node_name}},
                        "status": {
                            "capacity": NODE_CAPACITY,
                            "allocatable": NODE_CAPACITY,
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    }
                )
            api.add_namespace(NAMESPACE)
            api.add_namespace(AGENT_NAMESPACE)
            faults = MemberApiFaults(api, self.clock, self.rng)
            self.members[name] = MemberSide(name, api, faults, push, make_member(name).obj(), self.clock)
        self.hubs: list[HubProcess] = []  # every hub process so far, the leader last; an earlier live one is deposed
        self.watch: Callable[[], None] | None = None  # called after every step of the clock (safety checks)
        self.token = 0
        self.deleted: dict[str, Pod] = {}
        self._names = itertools.count()

    # ---------------------------------------------------------------------------------------- processes

    @property
    def leader(self) -> HubProcess | None:
        return self.hubs[-1] if self.hubs and self.hubs[-1].alive else None

    @property
    def deposed(self) -> HubProcess | None:
        alive = [hub for hub in self.hubs[:-1] if hub.alive]
        return alive[0] if alive else None

    async def start(self) -> None:
        for side in self.members.values():
            side.start_agent()
        await self.start_hub()

    async def start_hub(self, *, failover: bool = False) -> None:
        """A new hub process; ``failover``: with a newer fencing token, the old leader still running."""
        if self.leader is not None and not failover:
            return
        if failover:
            self.token += 1
        hub = HubProcess(self, self.token)
        self.hubs.append(hub)
        await hub.start()
        await spin()

    async def crash_hub(self, hub: HubProcess | None = None) -> None:
        """A hub (the leader by default) dies, and the push-mode agents in it with it."""
        hub = hub if hub is not None else self.leader
        if hub is not None:
            await hub.crash()

    # ------------------------------------------------------------------------------------------- hub pods

    def create_pod(self, cpu: str) -> Pod:
        """A hub pod asking ``cpu``, with its uid in its manifest as the API server gives it."""
        name = f"p{next(self._names)}"
        pod = (
            make_pod(name)
            .uid(object_uid("Pod", NAMESPACE, name))
            .namespace(NAMESPACE)
            .scheduler(HUB)
            .req(cpu=cpu)
            .obj()
        )
        self.hub_api.add_pod(pod)
        return pod

    def delete_pod(self, uid: str) -> None:
        """The hub pod is deleted at once (``--grace-period=0 --force``); the hubs reap its member pod."""
        pod = self.hub_api.pods[uid]
        self.hub_api.delete_pod(uid)
        self.deleted[uid] = pod
        for hub in self.hubs:
            hub.hub_pod_deleted(pod)

    def hub_pods(self) -> list[Pod]:
        return list(self.hub_api.pods.values())

    # ------------------------------------------------------------------------------------------- running

    async def run_for(self, seconds: float) -> None:
        """Run every live process for ``seconds`` of virtual time: scheduling whenever something is ready, the
        clock moved to the next timer (refreshes, sweeps, backoffs, late calls) whenever nothing is."""
        end = self.clock.now() + seconds
        rounds, last = 0, self.clock.now()
        while True:
            rounds = rounds + 1 if self.clock.now() == last else 0
            last = self.clock.now()
            if rounds > MAX_ROUNDS_AT_ONE_TIME:
                raise RuntimeError(f"no progress in {rounds} rounds at {last}: work that never waits on the clock")
            for hub in list(self.hubs):
                await hub.schedule()
            await spin()
            if self.watch is not None:
                self.watch()
            if any(hub.ready() for hub in self.hubs):
                continue
            times = [t for t in (self.clock.next_deadline(), *(h.next_wakeup() for h in self.hubs)) if t is not None]
            when = min(times) if times else end
            if when >= end:
                self.clock.advance_to(end)
                await spin()
                for hub in list(self.hubs):
                    await hub.schedule()
                if self.watch is not None:
                    self.watch()
                return
            self.clock.advance_to(max(when, self.clock.now()))
            await spin()

    async def heal(self) -> None:
        """Every fault cleared, every process running again, the deposed leader gone."""
        for side in self.members.values():
            side.link.partitioned = False
            side.link.faults.clear()
            side.faults.down = False
            side.faults.kill_at = None
            side.faults.slow_create = None
            side.faults.kill_rate = side.faults.slow_rate = side.link.fault_rate = 0.0
        deposed = self.deposed
        if deposed is not None:
            await deposed.crash()
        if self.leader is None:
            await self.start_hub()
        for side in self.members.values():
            side.start_agent()

    async def settle(self, *, rounds: int = 30, seconds: float = 30.0) -> list[str]:
        """Heal, then run until the settled invariants hold (checked every ``seconds``), at most ``rounds`` times;
        what is still violated then."""
        await self.heal()
        violations: list[str] = []
        for _ in range(rounds):
            await self.run_for(seconds)
            violations = settled_violations(self)
            if not violations:
                return []
        return violations

    def fired(self) -> Counter[str]:
        """The faults that happened, by kind."""
        total: Counter[str] = Counter()
        for side in self.members.values():
            total.update(side.faults.fired)
            total.update(side.link.fired)
        return total

    async def aclose(self) -> None:
        for hub in self.hubs:
            await hub.crash()
        for side in self.members.values():
            await side.crash_agent()
            for task in side.faults.landing:
                task.cancel()
            await asyncio.gather(*side.faults.landing, *side.dying, return_exceptions=True)
        for hub in self.hubs:
            await asyncio.gather(*hub.dying, return_exceptions=True)
        # Whatever a process started while it was dying (a cycle that spawned work after its tasks were cancelled)
        # ends with the world.
        current = asyncio.current_task()
        left = [task for task in asyncio.all_tasks() if task is not current]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)


# ----------------------------------------------------------------------------------------------- the truth


@dataclass(frozen=True, slots=True)
class Copy:
    """A member pod made for a hub pod, as the member's API server has it."""

    member: str
    node: str
    name: str
    requests: Mapping[str, int]


def copies(world: World) -> dict[str, list[Copy]]:
    """Hub pod uid -> its running copies in the members (not finished)."""
    found: dict[str, list[Copy]] = {}
    for side in world.members.values():
        for uid, copy in _member_copies(side):
            found.setdefault(uid, []).append(copy)
    return found


def _member_copies(side: MemberSide) -> list[tuple[str, Copy]]:
    """The running copies in one member, read again only after the member changed."""
    version = side.api.resource_version
    if side.copies is not None and side.copies[0] == version:
        return side.copies[1]
    found: list[tuple[str, Copy]] = []
    name = side.name
    for raw in side.api.pods():
        phase = (raw.get("status") or {}).get("phase") or ""
        uid = ((raw.get("metadata") or {}).get("annotations") or {}).get(HUB_POD_UID_ANNOTATION, "")
        if not uid or phase in TERMINAL_PHASES:
            continue
        pod = Pod.from_dict(raw, f"member {name}'s pod")
        found.append((uid, Copy(name, pod.spec.node_name, pod.key, pod_requests(pod))))
    side.copies = (version, found)
    return found


def reservations(world: World, name: str) -> list[Reservation]:
    found = []
    for obj in world.members[name].api.configmaps(AGENT_NAMESPACE):
        if not str(obj["metadata"]["name"]).startswith(CONFIGMAP_PREFIX):
            continue  # a fence
        reservation = stored_reservation(obj)
        if reservation is not None:
            found.append(reservation)
    return found


def _node_use(world: World, with_reservations: bool) -> dict[tuple[str, str], dict[str, int]]:
    """(member, node) -> what its running copies (and, ``with_reservations``, its live reservations) take."""
    used: dict[tuple[str, str], dict[str, int]] = {}
    made: set[str] = set()
    for uid, placed in copies(world).items():
        made.add(uid)
        for copy in placed:
            total = used.setdefault((copy.member, copy.node), {})
            for resource, amount in copy.requests.items():
                total[resource] = total.get(resource, 0) + amount
            total["pods"] = total.get("pods", 0) + 1
    if with_reservations:
        now = world.clock.now()
        for name in world.members:
            for reservation in reservations(world, name):
                if reservation.expires_at <= now or reservation.pod_uid in made:
                    continue
                total = used.setdefault((name, reservation.node), {})
                for resource, amount in reservation.requests.items():
                    total[resource] = total.get(resource, 0) + amount
                total["pods"] = total.get("pods", 0) + 1
    return used


def _allocatable(world: World) -> dict[tuple[str, str], Mapping[str, int]]:
    return {
        (name, raw["metadata"]["name"]): Node.from_dict(raw, f"member {name}'s node").allocatable
        for name, side in world.members.items()
        for raw in side.api.nodes()
    }


def _over(world: World, with_reservations: bool) -> list[str]:
    allocatable = _allocatable(world)
    found = []
    for key, used in sorted(_node_use(world, with_reservations).items()):
        over = {r: a for r, a in used.items() if a > allocatable.get(key, {}).get(r, 0)}
        if over:
            what = "pods and live reservations" if with_reservations else "running pods"
            found.append(f"node {key[1]} of {key[0]}: its {what} take {over}, more than its allocatable")
    return found


def safety_violations(world: World) -> list[str]:
    """What must hold at every moment (docs/explanation/cross-cluster-commit.md#the-invariant): no hub pod has
    running copies in two members; a hub pod bound to a member has its copy there (a copy is deleted only once
    another is confirmed, and the hub binds only to a member that made one); no member node runs more than its
    allocatable."""
    found: list[str] = []
    placed = copies(world)
    for uid, where in sorted(placed.items()):
        if len(where) > 1:
            found.append(f"hub pod {uid} runs in {len(where)} places: {[(c.member, c.node) for c in where]}")
    for pod in world.hub_pods():
        bound = pod.spec.node_name
        if bound and bound not in {c.member for c in placed.get(pod.metadata.uid, [])}:
            found.append(f"hub pod {pod.key} is bound to {bound}, which runs no copy of it")
    found.extend(_over(world, with_reservations=False))
    return found


def settled_violations(world: World) -> list[str]:
    """What must hold once everything was healed and has run: the safety invariants; exactly one copy per bound
    hub pod, in its member; none for a deleted or pending hub pod; a pending hub pod fits in no member node;
    no node over its allocatable with the live reservations counted; no reservation held past its TTL and the
    agent's in-flight window."""
    found = safety_violations(world)
    placed = copies(world)
    live = {pod.metadata.uid: pod for pod in world.hub_pods()}
    for uid, pod in world.deleted.items():
        if uid in placed:
            found.append(f"deleted hub pod {pod.key} still runs in {[c.member for c in placed[uid]]}")
    for uid in placed:
        if uid not in live and uid not in world.deleted:
            found.append(f"a member runs a copy of {uid}, which was never a hub pod")
    allocatable = _allocatable(world)
    used = _node_use(world, with_reservations=True)
    for uid, pod in live.items():
        if pod.spec.node_name:
            continue
        if uid in placed:
            found.append(f"pending hub pod {pod.key} runs in {[c.member for c in placed[uid]]} but is not adopted")
        wanted = pod_requests(pod)
        for key, room in allocatable.items():
            taken = used.get(key, {})
            if taken.get("pods", 0) + 1 <= room.get("pods", 0) and all(
                amount <= room.get(r, 0) - taken.get(r, 0) for r, amount in wanted.items() if amount
            ):
                found.append(f"pending hub pod {pod.key} fits on node {key[1]} of {key[0]}")
                break
    found.extend(_over(world, with_reservations=True))
    now = world.clock.now()
    for name in world.members:
        for reservation in reservations(world, name):
            if reservation.expires_at + IN_FLIGHT_SECONDS + SWEEP_INTERVAL < now:
                found.append(f"reservation {reservation.id} in {name} held past its TTL ({reservation.expires_at})")
    return found
