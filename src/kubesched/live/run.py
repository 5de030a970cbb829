"""``kubesched run``: one scheduler process against a real API server, until SIGTERM.

Sits above the scheduler and the kube backend, as :mod:`kubesched.simulation.run` does for the in-memory
cluster. Order of work, kube-scheduler's: build the client from the kubeconfig (or the in-cluster service
account) with ``clientConnection``'s QPS and burst; subscribe the scheduler's handlers to the informers;
start them and wait until every one has listed (scheduling on a half-filled cache would overcommit);
then, with ``leaderElection.leaderElect``, stand by until this process holds the Lease, and schedule
while it does. On the way out the loop stops first (no new cycles, binding cycles cancelled), then the
writers get a few seconds to flush events and conditions — unless leadership was lost: then nothing more
is written (another replica leads) and :class:`LeadershipLost` ends the process, as kube-scheduler exits.

With cluster profiles (:mod:`kubesched.federation.profiles`) the process runs two planes: the node profiles'
scheduler over the hub's Nodes (``backend``, ``scheduler``) and the cluster profiles' over the member clusters
(``hub``, a :class:`~kubesched.live.hub.HubPlane`, whose module says how). Both sync before either schedules,
both schedule while this process leads, and each attempt of either reaches the same observers. With only
cluster profiles, ``backend`` and ``scheduler`` are the hub plane's.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from kubesched.audit.builder import AuditObserver, FanOut
from kubesched.audit.sinks.base import AuditSink
from kubesched.audit.sinks.events import EventsSink
from kubesched.backends.kube.backend import KubeBackend
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.kubeconfig import ClusterConnection
from kubesched.backends.kube.leader_election import LeaderElector, LeadershipLost, default_identity, validate_settings
from kubesched.clock import RealClock
from kubesched.config.types import SchedulerConfiguration
from kubesched.federation.profiles import split_by_plane
from kubesched.framework.runtime.registry import Registry
from kubesched.heap import freeze_steady_state
from kubesched.live.hub import HubOptions, HubPlane
from kubesched.scheduler.health import HealthServer
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.results import AttemptObserver, AttemptRecord
from kubesched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LiveOptions:
    audit_sinks: Sequence[AuditSink] = ()
    audit_events: bool = False  # also report every decision as a PolicyAudit event on the pod
    observers: Sequence[AttemptObserver] = ()
    watch_timeout: tuple[int, int] | None = None
    hostname: str | None = None
    seed: int | None = None
    identity: str | None = None  # the Lease holder identity (default: hostname_<uuid>, as kube-scheduler)
    # /metrics, /healthz, /readyz on (host, port); None: no server (port 0: any free port)
    health_address: tuple[str, int] | None = None
    registry: CollectorRegistry | None = None  # the metrics' registry (default: one of this scheduler's own)
    hub: HubOptions | None = None  # with cluster profiles: how the hub refreshes members and writes their status


class _Forward:
    """An attempt observer whose target is set once the observers are built."""

    def __init__(self) -> None:
        self.target: AttemptObserver | None = None

    def on_attempt(self, record: AttemptRecord) -> None:
        if self.target is not None:
            self.target.on_attempt(record)


class LiveScheduler:
    """The scheduler, its backend and client, built and started together; ``run`` serves until ``stop``."""

    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Registry,
        connection: ClusterConnection,
        options: LiveOptions | None = None,
    ) -> None:
        self.config = config
        self.options = options or LiveOptions()
        self.clock = RealClock()
        node_config, cluster_config = split_by_plane(config)
        sinks = list(self.options.audit_sinks)
        # Both planes' attempts reach the observers; the audit's events sink needs a backend, built below.
        forward = _Forward()
        watched = bool(self.options.observers or sinks or self.options.audit_events)
        self._observer: AttemptObserver | None = forward if watched else None
        self.registry = self.options.registry if self.options.registry is not None else CollectorRegistry()
        self.metrics = SchedulerMetrics(self.registry)
        self.hub: HubPlane | None = None
        if cluster_config is not None:
            self.hub = HubPlane(
                cluster_config,
                registry,
                connection,
                clock=self.clock,
                options=self.options.hub,
                seed=self.options.seed,
                hostname=self.options.hostname,
                watch_timeout=self.options.watch_timeout,
                observer=self._observer,
                metrics=self.metrics if node_config is None else None,
            )
        self._node_plane = node_config is not None
        if node_config is not None:
            connect = config.client_connection
            self.client = KubeClient(connection, qps=connect.qps, burst=connect.burst, user_agent="kubesched")
            names = [profile.scheduler_name for profile in node_config.profiles]
            self.backend = KubeBackend(
                self.client,
                names,
                clock=self.clock,
                hostname=self.options.hostname,
                watch_timeout=self.options.watch_timeout,
            )
        else:
            assert self.hub is not None
            self.client, self.backend = self.hub.client, self.hub.backend
        if self.options.audit_events:
            sinks.append(EventsSink(self.backend))
        self.audit = AuditObserver(*sinks) if sinks else None
        observers = [*self.options.observers, *([self.audit] if self.audit is not None else [])]
        forward.target = None if not observers else observers[0] if len(observers) == 1 else FanOut(*observers)
        if node_config is not None:
            self.scheduler = Scheduler(
                node_config,
                registry,
                self.backend,
                clock=self.clock,
                seed=self.options.seed,
                observer=self._observer,
                metrics=self.metrics,
            )
            self.backend.subscribe(self.scheduler.event_handlers)
        else:
            assert self.hub is not None
            self.scheduler = self.hub.scheduler
        self.elector: LeaderElector | None = None
        election = config.leader_election
        if election.leader_elect:
            identity = self.options.identity or default_identity(self.options.hostname)
            validate_settings(election, identity)  # bad durations fail at start, not at the first election
            self.elector = LeaderElector(self.client, election, identity)
            if (election.resource_namespace, election.resource_name) == ("kube-system", "kube-scheduler"):
                log.warning(
                    "leaderElection uses kube-system/kube-scheduler, kube-scheduler's own Lease: beside kube-scheduler "
                    "this process only stands by; set leaderElection.resourceName (and resourceNamespace)"
                )
        self.scheduling = asyncio.Event()  # set while the loop schedules (after sync; while leading)
        self.running = False  # run() is serving (informers, and standing by or scheduling)
        self.health: HealthServer | None = None
        if self.options.health_address is not None:
            host, port = self.options.health_address
            self.health = HealthServer(
                registry=self.registry, ready=self._not_ready, healthy=self._not_healthy, host=host, port=port
            )

    @property
    def backends(self) -> list[KubeBackend]:
        """The node plane's backend (when a node profile exists) and the hub plane's (when a cluster one does)."""
        found = [self.backend] if self._node_plane else []
        return [*found, *([self.hub.backend] if self.hub is not None else [])]

    @property
    def ready(self) -> bool:
        """Synced, and leading or standing by for the Lease (a standby replica is ready to take over)."""
        return all(backend.synced for backend in self.backends)

    def not_ready_reason(self) -> str:
        unsynced: list[str] = []
        for backend in self.backends:
            if backend.informers is None:
                unsynced.append("not started")
            elif not backend.synced:
                unsynced.extend(backend.informers.unsynced())
        return "informers not synced: " + ", ".join(unsynced) if unsynced else ""

    def _not_ready(self) -> str | None:
        return self.not_ready_reason() or None

    def _not_healthy(self) -> str | None:
        """/healthz fails when the process no longer serves, or leads on a renewal older than the lease."""
        if not self.running:
            return "not running"
        elector = self.elector
        if elector is not None and elector.is_leader and elector.renewed_at is not None:
            overdue = time.monotonic() - elector.renewed_at - self.config.leader_election.lease_duration
            if overdue > 0:
                return f"leader election: the Lease was last renewed {overdue:.1f} s too long ago"
        return None

    async def _schedule(self, stop: asyncio.Event) -> None:
        self.scheduling.set()
        try:
            # Each scheduler closes itself when its loop returns or is cancelled; one failing cancels the other.
            async with asyncio.TaskGroup() as planes:
                if self._node_plane:
                    planes.create_task(self.scheduler.run(stop), name="kubesched node plane")
                if self.hub is not None:
                    # Each term of leadership has its own, higher leaseTransitions: the token members fence by.
                    token = self.elector.transitions_observed if self.elector is not None else 0
                    planes.create_task(self.hub.run_leading(stop, token), name="kubesched hub plane")
        finally:
            self.scheduling.clear()

    async def _wait_synced(self) -> None:
        await asyncio.gather(*(backend.wait_synced() for backend in self.backends))

    async def _close_schedulers(self) -> None:
        await self.scheduler.close()  # idempotent
        if self.hub is not None:
            await self.hub.scheduler.close()

    async def run(self, stop: asyncio.Event) -> None:
        if self.health is not None:
            await self.health.start()  # /healthz answers while the informers sync; /readyz says why not ready
        self.running = True
        if self._node_plane:
            self.backend.start()
        if self.hub is not None:
            await self.hub.start()
        lost = False
        try:
            synced = asyncio.ensure_future(self._wait_synced())
            stopped = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                synced.cancel()
                stopped.cancel()
            if stop.is_set():
                await self._close_schedulers()
                return
            names = [name for backend in self.backends for name in backend.scheduler_names]
            log.info("informers synced; scheduling for %s", ", ".join(names))
            freeze_steady_state()  # the listed cluster: long-lived, never garbage, kept out of every collection
            if self.elector is None:
                await self._schedule(stop)
                return
            try:
                await self.elector.run(lambda: self._schedule(stop), stop)
            except LeadershipLost:
                lost = True
                raise
            finally:
                await self._close_schedulers()  # also when the Lease was never ours
        finally:
            self.running = False
            drain = 0.0 if lost else 5.0
            if self._node_plane:
                await self.backend.aclose(drain_seconds=drain)
            if self.hub is not None:
                await self.hub.aclose(drain_seconds=drain)
            if self.audit is not None:
                await self.audit.close()
            if self.health is not None:
                await self.health.close()
            self.metrics.close()


def install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
