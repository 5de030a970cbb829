"""Run a whole simulation: manifests + configuration → which pod went where, and why.

Called by ``kubesched simulate`` and by tests. It sits above the scheduler and the in-memory backend
(``backends/`` only provides clusters; it never drives a scheduler). Builds a scheduler over a
:class:`SimulatedCluster` on a virtual clock, schedules until nothing can make progress, and collects the
last attempt of every pod the configuration's profiles are responsible for. With member clusters a second
scheduler places the cluster profiles' pods onto them (:func:`simulate_async`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kubesched.api.manifests import LoadedManifests
from kubesched.audit.builder import FanOut
from kubesched.backends.simulated.cluster import RecordedEvent, SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import CLUSTER_STATE_SERVICE
from kubesched.config.types import SchedulerConfiguration
from kubesched.federation.plane import split_planes
from kubesched.federation.profiles import cluster_profiles
from kubesched.framework.listers import Listers
from kubesched.framework.runtime.registry import Registry
from kubesched.framework.runtime.services import Services
from kubesched.framework.types import PodInfo
from kubesched.policy.clients import policy_services
from kubesched.run_async import run_returning
from kubesched.scheduler.algorithm import TieBreaker
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS
from kubesched.scheduler.results import (
    SCHEDULING_GATED,
    SCHEDULING_GATED_MESSAGE,
    UNSCHEDULABLE,
    AttemptObserver,
    AttemptRecord,
)
from kubesched.scheduler.scheduler import Scheduler

# Pods failing with errors are retried with backoff forever in a live scheduler; a simulation stops
# retrying a pod after this many attempts so that it ends.
DEFAULT_MAX_ATTEMPTS = 10


@dataclass(slots=True)
class SimulationReport:
    """``cluster``: the node plane's simulated cluster (None when no node profile ran); ``hub``: the cluster
    plane's, whose nodes are the member clusters (None when no cluster profile ran); ``cluster_profiles``: the
    profiles that placed pods onto clusters; ``warnings``: what the run noticed (members no profile uses)."""

    records: list[AttemptRecord]
    ignored_pods: list[str] = field(default_factory=list)
    cluster: SimulatedCluster | None = None
    hub: SimulatedCluster | None = None
    cluster_profiles: frozenset[str] = frozenset()
    warnings: list[str] = field(default_factory=list)

    @property
    def events(self) -> list[RecordedEvent]:
        """Every event of both planes, in the order emitted (the node plane ran first)."""
        return [*(self.cluster.events if self.cluster else ()), *(self.hub.events if self.hub else ())]

    @property
    def preempted(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for plane in (self.cluster, self.hub):
            if plane is not None:
                found.update(plane.preempted)
        return found


class _LastAttempts:
    """Keeps each pod's latest attempt."""

    def __init__(self) -> None:
        self.latest: dict[str, AttemptRecord] = {}

    def on_attempt(self, record: AttemptRecord) -> None:
        self.latest[record.pod.uid] = record


def simulate(
    manifests: LoadedManifests,
    config: SchedulerConfiguration,
    registry: Registry,
    *,
    seed: int | None = 0,
    use_batch: bool = True,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    observers: Sequence[AttemptObserver] = (),
    start_time: float | None = None,
    tie_breaker: TieBreaker | None = None,
) -> SimulationReport:
    return run_returning(
        simulate_async(
            manifests,
            config,
            registry,
            seed=seed,
            use_batch=use_batch,
            max_attempts=max_attempts,
            observers=observers,
            start_time=start_time,
            tie_breaker=tie_breaker,
        )
    )


async def simulate_async(
    manifests: LoadedManifests,
    config: SchedulerConfiguration,
    registry: Registry,
    *,
    seed: int | None = 0,
    use_batch: bool = True,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    observers: Sequence[AttemptObserver] = (),
    start_time: float | None = None,
    tie_breaker: TieBreaker | None = None,
) -> SimulationReport:
    """``observers`` (the audit trail) see every attempt too, after the report's own collector. Virtual time
    starts at ``start_time`` (seconds since the epoch), by default now: audit records, events and the
    policies' ``input.time`` then carry the dates a live run would.

    With MemberClusters or cluster profiles (:mod:`kubesched.federation.plane`) the run has two planes, each
    its own scheduler on its own virtual clock from the same start: the node plane (the node profiles, the
    hub's nodes) first, then the cluster plane (the cluster profiles, one super node per member).

    ``tie_breaker`` chooses the node plane's node among equally-scored ones instead of the seeded random
    source (:data:`~kubesched.scheduler.algorithm.TieBreaker`)."""
    start = time.time() if start_time is None else start_time
    cluster_names = cluster_profiles(config)
    node_manifests, plane = split_planes(manifests, cluster_names)
    node_config = _with_profiles(config, lambda name: name not in cluster_names)
    hub_config = _with_profiles(config, lambda name: name in cluster_names)
    collector = _LastAttempts()
    observer: AttemptObserver = FanOut(collector, *observers) if observers else collector
    report = SimulationReport([], cluster_profiles=cluster_names)
    responsible: set[str] = set()
    if plane.members and hub_config is None:
        report.warnings.append(
            f"{len(plane.members)} MemberCluster(s) loaded, but no profile of this configuration enables a "
            "cluster plugin; nothing is placed onto them"
        )

    if node_config is not None:
        clock = VirtualClock(start)
        cluster = SimulatedCluster(
            clock, node_manifests.nodes, node_manifests.pods, listers=Listers.from_objects(node_manifests)
        )
        scheduler = Scheduler(
            node_config,
            registry,
            cluster,
            clock=clock,
            seed=seed,
            use_batch=use_batch,
            observer=observer,
            tie_breaker=tie_breaker,
        )
        await _run_plane(scheduler, cluster, clock, collector, max_attempts)
        report.cluster = cluster
        responsible.update(scheduler.frameworks)
    if hub_config is not None:
        clock = VirtualClock(start)
        hub = SimulatedCluster(clock, plane.nodes, plane.pods, listers=Listers.from_objects(manifests))
        services = Services(policy_services(clock))
        services.register(CLUSTER_STATE_SERVICE, lambda spec: plane.source)
        scheduler = Scheduler(
            hub_config,
            registry,
            hub,
            clock=clock,
            seed=seed,
            use_batch=use_batch,
            observer=observer,
            services=services,
            targets=TARGET_CLUSTERS,
        )
        await _run_plane(scheduler, hub, clock, collector, max_attempts)
        report.hub = hub
        responsible.update(scheduler.frameworks)

    report.ignored_pods = [
        pod.key
        for pod in node_manifests.pods
        if not pod.spec.node_name and pod.spec.scheduler_name not in responsible and pod.status.phase == "Pending"
    ]
    # Ordered by plane, then by the scheduling cycle of each pod's last attempt; never-attempted pods last.
    hub_pods = {pod.metadata.uid for pod in plane.pods}
    report.records = sorted(
        collector.latest.values(),
        key=lambda record: (record.pod.uid in hub_pods, record.attempts == 0, record.cycle),
    )
    return report


def _with_profiles(config: SchedulerConfiguration, keep: Callable[[str], bool]) -> SchedulerConfiguration | None:
    profiles = tuple(p for p in config.profiles if keep(p.scheduler_name))
    if not profiles:
        return None
    return config if len(profiles) == len(config.profiles) else replace(config, profiles=profiles)


async def _run_plane(
    scheduler: Scheduler, cluster: SimulatedCluster, clock: VirtualClock, collector: _LastAttempts, max_attempts: int
) -> None:
    scheduler.max_attempts = max_attempts
    cluster.subscribe(scheduler.event_handlers)
    try:
        await scheduler.run_until_idle(clock)
    finally:
        await scheduler.close()
    # Pods held at PreEnqueue never get an attempt; report why they wait. A pod with scheduling gates reads
    # as the API server's PodScheduled condition says (SchedulingGated), the gates themselves stay in the
    # record's PreEnqueue status; one another PreEnqueue plugin holds back stays Unschedulable, with its message.
    for uid, pod in scheduler.pending_pods().items():
        if uid in collector.latest:
            continue
        fwk = scheduler.frameworks[pod.spec.scheduler_name]
        pod_info = PodInfo(pod)
        status = fwk.run_pre_enqueue(pod_info)
        if pod.spec.scheduling_gates:
            result, message = SCHEDULING_GATED, SCHEDULING_GATED_MESSAGE
        else:
            result, message = UNSCHEDULABLE, status.message if status is not None else "not attempted"
        collector.on_attempt(
            AttemptRecord(
                pod=pod_info,
                profile=fwk.profile_name,
                result=result,
                attempts=0,
                message=message,
                finished_at=clock.now(),
                pre_enqueue_status=status,
            )
        )


def build_every_plugin(config: SchedulerConfiguration, registry: Registry) -> None:
    """Build every profile's plugins as start-up does (policies compiled and their ``decisionPath`` checked,
    compliance files read, engines started), then close them: ``kubesched config validate``. A failure raises
    the error start-up would, naming the file and the profile, with one line per plugin that failed."""

    async def build() -> None:
        clock = VirtualClock(time.time())
        # Ours to close, also when a plugin fails after others started their engines.
        services = Services(policy_services(clock))
        try:
            cluster = SimulatedCluster(clock, [], [], listers=Listers.empty())
            scheduler = Scheduler(config, registry, cluster, clock=clock, services=services)
            await scheduler.close()
        finally:
            await services.aclose()

    asyncio.run(build())
