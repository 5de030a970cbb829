"""Run a whole simulation: manifests + configuration → which pod went where, and why.

Called by ``kubesched simulate`` and by tests. It sits above the scheduler and the in-memory backend
(``backends/`` only provides clusters; it never drives a scheduler). Builds a scheduler over a
:class:`SimulatedCluster` on a virtual clock, schedules until nothing can make progress, and collects the
last attempt of every pod the configuration's profiles are responsible for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kubesched.api.manifests import LoadedManifests
from kubesched.audit.builder import FanOut
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.types import SchedulerConfiguration
from kubesched.framework.listers import Listers
from kubesched.framework.runtime.registry import Registry
from kubesched.framework.types import PodInfo
from kubesched.run_async import run_returning
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
    records: list[AttemptRecord]
    ignored_pods: list[str] = field(default_factory=list)
    cluster: SimulatedCluster | None = None


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
) -> SimulationReport:
    """``observers`` (the audit trail) see every attempt too, after the report's own collector. Virtual time
    starts at ``start_time`` (seconds since the epoch), by default now: audit records, events and the
    policies' ``input.time`` then carry the dates a live run would."""
    clock = VirtualClock(time.time() if start_time is None else start_time)
    cluster = SimulatedCluster(clock, manifests.nodes, manifests.pods, listers=Listers.from_objects(manifests))
    collector = _LastAttempts()
    observer: AttemptObserver = FanOut(collector, *observers) if observers else collector
    scheduler = Scheduler(config, registry, cluster, clock=clock, seed=seed, use_batch=use_batch, observer=observer)
    scheduler.max_attempts = max_attempts
    cluster.subscribe(scheduler.event_handlers)
    try:
        await scheduler.run_until_idle(clock)
    finally:
        await scheduler.close()
    ignored = [
        pod.key
        for pod in manifests.pods
        if not pod.spec.node_name and not scheduler.responsible_for(pod) and pod.status.phase == "Pending"
    ]
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
    # Ordered by the scheduling cycle of each pod's last attempt; never-attempted pods last.
    ordered = sorted(collector.latest.values(), key=lambda record: (record.attempts == 0, record.cycle))
    return SimulationReport(ordered, ignored, cluster)


def build_every_plugin(config: SchedulerConfiguration, registry: Registry) -> None:
    """Build every profile's plugins as start-up does (policies compiled and their ``decisionPath`` checked,
    compliance files read, engines started), then close them: ``kubesched config validate``. A failure raises
    the error start-up would, naming the file and the profile."""

    async def build() -> None:
        clock = VirtualClock(time.time())
        scheduler = Scheduler(config, registry, SimulatedCluster(clock, [], [], listers=Listers.empty()), clock=clock)
        await scheduler.close()

    asyncio.run(build())
