"""``kubesched bench`` for a hub: pods placed across member clusters through their agents, with the two-phase commit.

Who calls it: :func:`kubesched.bench.runner.run_workload`, for a workload with a ``multiCluster`` section
(:class:`~kubesched.bench.workload.MultiClusterSpec`). What runs is the live hub's path without the member API
servers: each member is an :class:`~kubesched.agent.memory.InMemoryMember` with its own
:class:`~kubesched.agent.core.Agent`, reached in process (:class:`~kubesched.agent.push.PushEndpoint`) or over
loopback HTTPS (:class:`~kubesched.federation.agent_client.AgentClient` to real
:class:`~kubesched.agent.server.AgentServer` endpoints, in a child process or on the hub's loop); the hub's state
cache is refreshed in the background on wall time while pods drain, and the
:class:`~kubesched.federation.commit.AgentCommitter` commits. Besides the usual figures it reports commit latency
(pop to the member's bind) and reads every member back (:func:`~kubesched.bench.checks.check_members`). The
format: docs/reference/bench-workloads.md#multicluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kubesched.agent.core import Agent
from kubesched.agent.memory import InMemoryMember
from kubesched.agent.push import PushEndpoint
from kubesched.agent.server import AgentServer, server_ssl_context
from kubesched.api.multicluster import MemberCluster
from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.checks import MemberContents, check_members, check_placements
from kubesched.bench.runner import (
    BenchResult,
    Meter,
    OnProgress,
    _BindCounter,
    _percentile,
    _PodFactory,
    peak_rss_mb,
)
from kubesched.bench.workload import HOSTNAME_LABEL, MultiClusterSpec, Workload, WorkloadError
from kubesched.clock import RealClock, VirtualClock
from kubesched.clusterapi.contract import CLUSTER_COMMIT_SERVICE, CLUSTER_STATE_SERVICE, CommitLedger, ReleaseOutcome
from kubesched.config.types import SchedulerConfiguration
from kubesched.federation.adapter import allocated_pod, super_node
from kubesched.federation.agent_client import AgentClient, MemberEndpoint
from kubesched.federation.cache import ClusterStateCache, MemberRefresh
from kubesched.federation.commit import AgentCommitter
from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.runtime.registry import Registry
from kubesched.framework.runtime.services import Services
from kubesched.net.tls import Pem, client_context
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS
from kubesched.scheduler.scheduler import Scheduler

__all__ = ["REGION_LABEL", "cluster_name", "member_nodes", "run_multicluster"]

REGION_LABEL = "topology.kubernetes.io/region"
AGENT_NAMESPACE = "kubesched-system"
MAX_ATTEMPTS = 8  # a pod still unplaced after this many attempts is left pending (the check then fails the run)
AGENTS_START_SECONDS = 120.0
WARM_CONNECTIONS = 4  # per agent, before the pods (HTTPS): more than a member's usual in-flight calls


def cluster_name(index: int) -> str:
    return f"member-{index:03d}"


def member_nodes(spec: MultiClusterSpec, index: int) -> list[dict[str, Any]]:
    """The Node manifests of member ``index``: Ready, its region's label, the spec's capacity."""
    capacity = dict(spec.node_capacity)
    region = spec.regions[index % len(spec.regions)]
    nodes = []
    for j in range(spec.nodes_per_cluster):
        name = f"{cluster_name(index)}-node-{j:03d}"
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, REGION_LABEL: region}},
                "spec": {},
                "status": {
                    "capacity": capacity,
                    "allocatable": capacity,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return nodes


def _member(spec: MultiClusterSpec, index: int, namespaces: Sequence[str]) -> InMemoryMember:
    member = InMemoryMember(cluster_name(index))
    for node in member_nodes(spec, index):
        member.add_node(node)
    for namespace in namespaces:  # a member must have a pod's namespace before the agent can create the pod
        member.add_namespace(namespace)
    return member


def _contents(members: Mapping[str, InMemoryMember]) -> dict[str, MemberContents]:
    return {name: MemberContents(member.nodes(), member.pods()) for name, member in members.items()}


# --------------------------------------------------------------------------------------------- the hub's side


class _TimedCommitter:
    """The hub's committer, noting when each pod's bind came back from its member (for the commit latency)."""

    def __init__(self, inner: AgentCommitter, popped: Mapping[str, float], latencies: list[float]) -> None:
        self.inner = inner
        self.popped = popped
        self.latencies = latencies
        self.measuring = False

    @property
    def ledger(self) -> CommitLedger:
        return self.inner.ledger

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
        return await self.inner.reserve(cluster, reservation_id, pod, requests, ttl_seconds, timeout=timeout)

    async def release(
        self, cluster: str, reservation_id: str, *, timeout: float, pod: Pod | None = None
    ) -> ReleaseOutcome:
        return await self.inner.release(cluster, reservation_id, timeout=timeout, pod=pod)

    async def bind(self, cluster: str, reservation_id: str, pod: Pod, *, timeout: float) -> None:
        await self.inner.bind(cluster, reservation_id, pod, timeout=timeout)
        popped = self.popped.get(pod.metadata.uid)
        if self.measuring and popped is not None:
            self.latencies.append(time.perf_counter() - popped)


class _TimedScheduler(Scheduler):
    """The scheduler, noting when each pod was last popped off the queue."""

    popped: dict[str, float]

    def pop(self) -> QueuedPodInfo | None:
        qpi = super().pop()
        if qpi is not None:
            self.popped[qpi.pod_info.uid] = time.perf_counter()
        return qpi


async def _refresh_every(cache: ClusterStateCache, names: Sequence[str], seconds: int) -> None:
    """Every member refreshed once per ``seconds`` of wall time, one after another at even spacing: a live hub's
    refreshers each sleep their interval after their own refresh, so they drift apart; refreshing all at once would
    instead be a burst of a hundred state computations (in one agents' process, in the HTTPS variant)."""
    spacing = seconds / len(names)
    while True:
        for name in names:
            await asyncio.sleep(spacing)
            await cache.refresh(name)


@dataclass(slots=True)
class _Members:
    """The endpoints the hub talks to, and how to read the members back at the end."""

    endpoints: dict[str, MemberEndpoint]
    contents: Callable[[], Awaitable[dict[str, MemberContents]]]


@contextlib.asynccontextmanager
async def _in_process(spec: MultiClusterSpec, namespaces: Sequence[str]) -> AsyncIterator[_Members]:
    members = {cluster_name(i): _member(spec, i, namespaces) for i in range(spec.clusters)}
    endpoints: dict[str, MemberEndpoint] = {}
    for name, member in members.items():
        agent = Agent(member, clock=RealClock(), namespace=AGENT_NAMESPACE, cluster_name=name)
        await agent.ensure_namespace()
        endpoints[name] = PushEndpoint(agent)

    async def contents() -> dict[str, MemberContents]:
        return _contents(members)

    try:
        yield _Members(endpoints, contents)
    finally:
        for endpoint in endpoints.values():
            await endpoint.aclose()


@contextlib.asynccontextmanager
async def _over_https(spec: MultiClusterSpec, namespaces: Sequence[str]) -> AsyncIterator[_Members]:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    with tempfile.TemporaryDirectory(prefix="kubesched-bench-agents-") as workdir:
        process = context.Process(target=_serve_agents, args=(spec, list(namespaces), workdir, child), daemon=True)
        process.start()
        endpoints: dict[str, MemberEndpoint] = {}
        try:
            deadline = time.monotonic() + AGENTS_START_SECONDS
            while not await asyncio.to_thread(parent.poll, 0.5):
                if not process.is_alive():
                    raise WorkloadError(f"the agents' process ended before serving (exit code {process.exitcode})")
                if time.monotonic() > deadline:
                    raise WorkloadError(f"the agents' process did not start within {AGENTS_START_SECONDS:g} s")
            started = parent.recv()
            trust = client_context(ca=Pem("the agents' CA", path=started["ca"]))
            for name, port in started["ports"].items():
                endpoints[name] = AgentClient(f"https://127.0.0.1:{port}", started["token"], ssl_context=trust)

            await _warm(endpoints)

            async def contents() -> dict[str, MemberContents]:
                parent.send("contents")
                answer: dict[str, MemberContents] = await asyncio.to_thread(parent.recv)
                return answer

            yield _Members(endpoints, contents)
        finally:
            for endpoint in endpoints.values():
                await endpoint.aclose()
            with contextlib.suppress(OSError):
                parent.send("stop")
            await asyncio.to_thread(process.join, 30)
            if process.is_alive():
                process.kill()


async def _warm(endpoints: Mapping[str, MemberEndpoint]) -> None:
    """Open :data:`WARM_CONNECTIONS` keep-alive connections to every agent (concurrent state calls, a member at a
    time): a live hub has had its connections open since long before a burst, so the TLS handshakes of a cold pool
    are not what the run should measure."""
    for endpoint in endpoints.values():
        await asyncio.gather(*(endpoint.state("warm-up") for _ in range(WARM_CONNECTIONS)))


@contextlib.asynccontextmanager
async def _over_https_in_hub(spec: MultiClusterSpec, namespaces: Sequence[str]) -> AsyncIterator[_Members]:
    """The agents' HTTPS servers on the hub's own event loop (as the tests' RunningAgent runs one)."""
    with tempfile.TemporaryDirectory(prefix="kubesched-bench-agents-") as workdir:
        ca, servers, members, token = await _start_agents(spec, namespaces, Path(workdir))
        trust = client_context(ca=Pem("the agents' CA", path=str(ca)))
        endpoints: dict[str, MemberEndpoint] = {
            name: AgentClient(f"https://127.0.0.1:{server.port}", token, ssl_context=trust) for name, server in servers
        }
        try:
            await _warm(endpoints)

            async def contents() -> dict[str, MemberContents]:
                return _contents(members)

            yield _Members(endpoints, contents)
        finally:
            for endpoint in endpoints.values():
                await endpoint.aclose()
            for _, server in servers:
                await server.close()


async def _start_agents(
    spec: MultiClusterSpec, namespaces: Sequence[str], workdir: Path
) -> tuple[Path, list[tuple[str, AgentServer]], dict[str, InMemoryMember], str]:
    """Every member with its agent behind its HTTPS server on loopback: (the CA file, the servers by member name,
    the members, the bearer token)."""
    from kubesched.harness.certificates import write_server_certificates

    ca, cert, key = write_server_certificates(workdir / "agent-pki")
    token = secrets.token_urlsafe(24)
    members = {cluster_name(i): _member(spec, i, namespaces) for i in range(spec.clusters)}
    servers = []
    for name, member in members.items():
        agent = Agent(member, clock=RealClock(), namespace=AGENT_NAMESPACE, cluster_name=name)
        server = AgentServer(agent, token=token, ssl_context=server_ssl_context(cert, key))
        await server.start()
        servers.append((name, server))
    return ca, servers, members, token


def _serve_agents(spec: MultiClusterSpec, namespaces: list[str], workdir: str, pipe: Connection) -> None:
    """Child process: every member with its agent behind its HTTPS server on loopback, until told to stop."""
    asyncio.run(_agents_main(spec, namespaces, Path(workdir), pipe))


async def _agents_main(spec: MultiClusterSpec, namespaces: list[str], workdir: Path, pipe: Connection) -> None:
    ca, servers, members, token = await _start_agents(spec, namespaces, workdir)
    try:
        pipe.send({"ca": str(ca), "token": token, "ports": {name: server.port for name, server in servers}})
        while (command := await asyncio.to_thread(pipe.recv)) != "stop":
            if command == "contents":
                pipe.send(_contents(members))
    except EOFError:
        pass  # the hub is gone
    finally:
        for _, server in servers:
            await server.close()


# ------------------------------------------------------------------------------------------------- the run


async def run_multicluster(
    workload: Workload,
    registry: Registry,
    config: SchedulerConfiguration,
    use_batch: bool,
    on_progress: OnProgress | None,
) -> BenchResult:
    """Run ``workload`` (it has a ``multiCluster`` section) as the module doc says."""
    spec = workload.multi_cluster
    if spec is None:
        raise WorkloadError(f"{workload.source}: not a multiCluster workload")
    namespaces = sorted({op.namespace for op in workload.ops})
    connect = _in_process
    if spec.transport == "https":
        connect = _over_https_in_hub if spec.agent_process == "hub" else _over_https
    async with connect(spec, namespaces) as members:
        return await _run_hub(workload, spec, registry, config, use_batch, on_progress, members)


async def _run_hub(
    workload: Workload,
    spec: MultiClusterSpec,
    registry: Registry,
    config: SchedulerConfiguration,
    use_batch: bool,
    on_progress: OnProgress | None,
    members: _Members,
) -> BenchResult:
    clock = VirtualClock()
    cache = ClusterStateCache(
        [MemberRefresh(name, endpoint) for name, endpoint in members.endpoints.items()], clock=clock
    )
    answered = await cache.refresh_all()
    silent = sorted(name for name, ok in answered.items() if not ok)
    if silent:
        raise WorkloadError(f"{workload.source}: member(s) did not answer the first state refresh: {silent[:5]}")
    nodes, placeholders = [], []
    for i, (name, state) in enumerate(cache.states.items()):
        member = MemberCluster.from_dict(
            {
                "apiVersion": "multicluster.kubesched.io/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {"name": name, "labels": {REGION_LABEL: spec.regions[i % len(spec.regions)]}},
                "spec": {},
            },
            f"{workload.source}: multiCluster member {name}",
        )
        nodes.append(super_node(member, state))
        placeholder = allocated_pod(state)
        if placeholder is not None:
            placeholders.append(placeholder)
    hub = SimulatedCluster(clock, nodes, placeholders)
    popped: dict[str, float] = {}
    commit_latencies: list[float] = []
    committer = _TimedCommitter(AgentCommitter(members.endpoints), popped, commit_latencies)
    services = Services()
    services.register(CLUSTER_STATE_SERVICE, lambda _spec: cache)
    services.register(CLUSTER_COMMIT_SERVICE, lambda _spec: committer)
    scheduler = _TimedScheduler(
        config, registry, hub, clock=clock, seed=0, use_batch=use_batch, services=services, targets=TARGET_CLUSTERS
    )
    scheduler.popped = popped
    scheduler.max_attempts = MAX_ATTEMPTS
    hub.subscribe(scheduler.event_handlers)
    counter = _BindCounter(on_progress) if on_progress is not None else None
    if counter is not None:
        hub.subscribe(counter)
    factory = _PodFactory(workload)
    latencies: list[float] = []
    created: set[str] = set()
    measured = scheduled = 0
    meter = Meter()
    try:
        for op_index, op in enumerate(workload.ops):
            pods = [factory.make(op, op_index, i) for i in range(op.count)]
            created.update(pod.metadata.uid for pod in pods)
            if counter is not None:
                counter.watch(pods, "pods" if op.collect_metrics else "setup pods")
            refresher = (
                asyncio.ensure_future(_refresh_every(cache, list(members.endpoints), spec.refresh_seconds))
                if spec.refresh_seconds
                else None
            )
            if op.collect_metrics:
                scheduler.cycles.attempt_latencies = latencies
                committer.measuring = True
                meter.start()
            for pod in pods:
                hub.add_pod(pod)
            try:
                await scheduler.run_until_idle(clock, yield_every=1)
            finally:
                if refresher is not None:
                    refresher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await refresher
            if op.collect_metrics:
                meter.stop()
                scheduler.cycles.attempt_latencies = None
                committer.measuring = False
                measured += op.count
                current = hub.pods
                scheduled += sum(1 for p in pods if (now := current.get(p.metadata.uid)) and now.spec.node_name)
        report = check_placements(hub, created, set())
        member_violations = check_members(await members.contents(), created)
    finally:
        await scheduler.close()
    latencies.sort()
    commit_latencies.sort()
    return BenchResult(
        workload=workload.name,
        nodes=spec.clusters,
        measured_pods=measured,
        scheduled=scheduled,
        seconds=meter.seconds,
        throughput=scheduled / meter.seconds if meter.seconds > 0 else 0.0,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        mode=f"{'batch' if use_batch else 'per-node'}",
        pending=report.pending,
        violations=[*report.violations, *member_violations],
        cpu_seconds=meter.cpu_seconds,
        helper_cpu_seconds=meter.helper_cpu_seconds,
        cpu_us_per_pod=meter.per_pod_us(measured),
        peak_rss_mb=peak_rss_mb(),
        commit_p50_ms=_percentile(commit_latencies, 0.50) * 1000,
        commit_p99_ms=_percentile(commit_latencies, 0.99) * 1000,
    )
