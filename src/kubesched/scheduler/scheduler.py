"""The scheduler: one framework per profile, the queue, the cache, and the loop that drives them.

Built from a validated configuration, a plugin registry and a backend. The pieces follow
kube-scheduler's split: :mod:`~kubesched.scheduler.event_handlers` turns the backend's informer events
into cache, queue and nominator updates; :mod:`~kubesched.scheduler.schedule_one` runs one pod's
scheduling cycle, starts its binding cycle and handles failures; each profile's
:class:`~kubesched.framework.runtime.framework.Framework` runs the plugins and is their Handle. This
module wires them together and runs the loop: :meth:`Scheduler.run` serves a live cluster, woken by the
queue when a pod becomes ready (never polling); :meth:`Scheduler.run_until_idle` drives a simulation on
a virtual clock.

Services shared by the plugins of every profile (the policy engine clients) are created through
:class:`~kubesched.framework.runtime.services.Services`, with the factories from
:func:`kubesched.policy.clients.policy_services` unless the caller passes its own. A policy client's new revision
is the ``PolicyRevisionChange`` cluster event: seen after every cycle (an attempt asked the engine), and in live
mode asked of every engine each ``refresh_seconds`` of its spec (docs/explanation/policy-freshness.md).

With ``metrics`` (a :class:`~kubesched.scheduler.metrics.SchedulerMetrics`), the frameworks observe their
runners, every attempt record feeds the metrics before it reaches ``observer``, and the queue, the cache
and the binding tasks are read when the metrics are scraped. Without, nothing of it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.backends.base import Backend
from kubesched.clock import Clock, VirtualClock
from kubesched.config.types import SchedulerConfiguration
from kubesched.framework.events import POLICY_REVISION_CHANGE, PolicyRevision
from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.runtime.framework import Framework, FrameworkBuildError
from kubesched.framework.runtime.handle import FrameworkContext
from kubesched.framework.runtime.registry import Registry
from kubesched.framework.runtime.services import BackgroundTasks, Services
from kubesched.framework.runtime.waiting_pods import WaitingPods
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.policy.clients import policy_services
from kubesched.policyapi.contract import POLICY_ENGINE_SERVICE, PolicyClient, PolicyEngineSpec, PolicyError
from kubesched.scheduler.admission import BindingAdmission
from kubesched.scheduler.algorithm import ScheduleAlgorithm, TieBreaker
from kubesched.scheduler.cache.cache import Cache
from kubesched.scheduler.diagnosis import TARGET_NODES
from kubesched.scheduler.event_handlers import EventHandlers
from kubesched.scheduler.queue.nominator import PodNominator
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue
from kubesched.scheduler.results import AttemptObserver
from kubesched.scheduler.schedule_one import ScheduleOne

if TYPE_CHECKING:
    from kubesched.scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

UNSCHEDULABLE_FLUSH_INTERVAL = 30.0
ROOM_RECHECK_SECONDS = 0.001


class Scheduler:
    """One scheduler process: every profile of the configuration shares the queue and the cache."""

    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Registry,
        backend: Backend,
        *,
        clock: Clock,
        seed: int | None = None,
        use_batch: bool = True,
        observer: AttemptObserver | None = None,
        services: Services | None = None,
        metrics: SchedulerMetrics | None = None,
        targets: str = TARGET_NODES,
        tie_breaker: TieBreaker | None = None,
    ) -> None:
        """``targets``: :data:`~kubesched.scheduler.diagnosis.TARGET_CLUSTERS` when the backend's nodes are
        member clusters (the messages then say "0/3 clusters are available"); ``tie_breaker``: chooses among
        equally-scored nodes instead of the seeded random source (:data:`~kubesched.scheduler.algorithm.TieBreaker`)."""
        self.config = config
        self.metrics = metrics
        if metrics is not None:
            observer = metrics.observing(observer)
        self.clock = clock
        self.backend = backend
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.waiting_pods = WaitingPods()
        self.tasks = BackgroundTasks(clock)
        self.services = services if services is not None else Services(policy_services(clock))
        self.pending: dict[str, Pod] = {}
        self._closed = False
        # The revision each policy client reported last, by its spec (see note_policy_revisions).
        self._policy_revisions: dict[PolicyEngineSpec, str] = {}
        # The policy clients among the services, found again only when the services change: an isinstance check
        # against the runtime-checkable protocol after every cycle costs more than the cycle's policy work.
        self._policy_clients_seen: tuple[int, list[tuple[PolicyEngineSpec, PolicyClient]]] = (-1, [])
        nominator = PodNominator()
        context = FrameworkContext(
            clock=clock,
            client=backend,
            event_recorder=backend,
            nominator=nominator,
            waiting_pods=self.waiting_pods,
            snapshot=lambda: self.snapshot,
            get_pod=self.pending.get,
            activate=lambda uids: self.queue.activate(uids),
            tasks=self.tasks,
            services=self.services,
            listers=backend.listers,
        )
        self.frameworks: dict[str, Framework] = {}
        problems: list[str] = []  # of every profile, so that config validate lists them all
        for profile in config.profiles:
            try:
                built = Framework(profile, registry, context, use_batch=use_batch, metrics=metrics)
            except FrameworkBuildError as exc:
                where = f'{config.source}: profile "{profile.scheduler_name}"'
                problems.extend(f"{where}: {problem}" for problem in exc.problems or (str(exc),))
                continue
            self.frameworks[profile.scheduler_name] = built
        if problems:
            raise FrameworkBuildError(*problems)
        first = next(iter(self.frameworks.values()))
        hints = {name: fwk.events_to_register() for name, fwk in self.frameworks.items()}
        self.queue = SchedulingQueue(
            first.less,
            clock,
            initial_backoff=float(config.pod_initial_backoff_seconds),
            max_backoff=float(config.pod_max_backoff_seconds),
            pre_enqueue=self._pre_enqueue,
            hints_for=lambda pod: hints.get(pod.spec.scheduler_name, {}),
            nominator=nominator,
            sort_key=first.sort_key,
        )
        self.event_handlers = EventHandlers(
            self.cache, self.queue, self.waiting_pods, self.responsible_for, self.pending
        )
        self.cycles = ScheduleOne(
            cache=self.cache,
            queue=self.queue,
            snapshot=self.snapshot,
            frameworks=self.frameworks,
            backend=backend,
            clock=clock,
            algorithm=ScheduleAlgorithm(config.percentage_of_nodes_to_score, random.Random(seed), tie_breaker),
            pending=self.pending,
            waiting_pods=self.waiting_pods,
            observer=observer,
            targets=targets,
            admission=BindingAdmission(
                {
                    name: fwk.max_bindings_in_flight
                    for name, fwk in self.frameworks.items()
                    if fwk.max_bindings_in_flight is not None
                }
            ),
        )
        self.note_policy_revisions()  # what the engines answer with now: a later revision is a change
        if metrics is not None:
            metrics.attach(
                queue=self.queue,
                cache=self.cache,
                frameworks=self.frameworks.values(),
                binding_tasks=self.cycles.binding_tasks,
            )

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.frameworks

    def _pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        fwk = self.frameworks.get(pod_info.pod.spec.scheduler_name)
        return None if fwk is None else fwk.run_pre_enqueue(pod_info)

    @property
    def max_attempts(self) -> int | None:
        return self.cycles.max_attempts

    @max_attempts.setter
    def max_attempts(self, value: int | None) -> None:
        self.cycles.max_attempts = value

    # ---- the loop ----------------------------------------------------------------------------

    async def schedule_next(self) -> bool:
        """Pop one pod and run its scheduling cycle; False when nothing is ready or admitted."""
        qpi = self.pop()
        if qpi is None:
            return False
        await self.cycles.schedule_one(qpi)
        self.note_policy_revisions()  # the attempt may have seen a new revision: requeue what the old one rejected
        return True

    # ---- policy revisions --------------------------------------------------------------------

    def _policy_clients(self) -> list[tuple[PolicyEngineSpec, PolicyClient]]:
        count, clients = self._policy_clients_seen
        if count != self.services.generation:
            clients = [
                (spec, client)
                for spec, client in self.services.instances(POLICY_ENGINE_SERVICE)
                if isinstance(spec, PolicyEngineSpec) and isinstance(client, PolicyClient)
            ]
            self._policy_clients_seen = (self.services.generation, clients)
        return clients

    def _observe_revision(self, spec: PolicyEngineSpec, revision: str) -> bool:
        before = self._policy_revisions.get(spec)
        self._policy_revisions[spec] = revision
        if before is None or before == revision:
            return False
        log.info("policy revision %s is in force (was %s): requeueing the pods it may now admit", revision, before)
        self.queue.on_event(POLICY_REVISION_CHANGE, PolicyRevision(spec, before), PolicyRevision(spec, revision))
        return True

    def note_policy_revisions(self) -> bool:
        """Compare every policy client's revision as last seen (no I/O) with the one noted before; a change is the
        ``PolicyRevisionChange`` event. True when a revision changed."""
        changed = False
        for spec, client in self._policy_clients():
            changed = self._observe_revision(spec, client.revision()) or changed
        return changed

    async def check_policy_revisions(self) -> bool:
        """Ask every policy engine for the revision in force (:meth:`PolicyClient.refresh`, which asks its source
        only when its bound requires) and raise ``PolicyRevisionChange`` for each that changed; an engine that
        cannot answer is skipped until the next check. True when a revision changed."""
        changed = False
        for spec, client in self._policy_clients():
            try:
                revision = await client.refresh()
            except PolicyError as exc:
                log.debug("policy revision check skipped for %s: %s", spec.endpoint or spec.policies, exc)
                continue
            changed = self._observe_revision(spec, revision) or changed
        return changed

    async def _check_in_background(self) -> None:
        await self.check_policy_revisions()

    def _policy_check_interval(self) -> float:
        """How often live mode asks the engines for their revision: the shortest bound of their specs."""
        intervals = [spec.refresh_seconds for spec, _ in self._policy_clients() if spec.refresh_seconds > 0]
        return min(intervals) if intervals else math.inf

    def pop(self) -> QueuedPodInfo | None:
        """The next pod off the queue, or None: nothing ready, or a profile at its bound of binding cycles (the
        pod then stays in the queue, in its place, until a binding cycle ends)."""
        if not self.cycles.admission.admits():
            return None
        return self.queue.pop()

    def _held_back(self) -> bool:
        """Pods are ready but the admission bound keeps them in the queue."""
        return not self.cycles.admission.admits() and self.queue.has_ready_work()

    def _busy(self) -> bool:
        return (
            any(
                self.cycles.binding_runnable(task) and not self.tasks.sleeping(task)
                for task in self.cycles.binding_tasks
            )
            or self.tasks.busy()
        )

    async def settle(self) -> None:
        """Let binding and background tasks run until each has finished or waits on the clock or at Permit."""
        await asyncio.sleep(0)  # callbacks already due (a timer that fired) run first
        spins = 0
        while self._busy():
            spins += 1
            # Work waiting on real I/O (a policy engine answering) needs real time to pass: after a burst of
            # yields, wait a millisecond rather than spin.
            await asyncio.sleep(0 if spins < 100 else 0.001)

    async def _await_room(self) -> None:
        """While the admission bound holds pods back: until one binding cycle ends (woken by its end, so the next
        pod is popped at once; waiting for all, or polling, would leave the members idle meanwhile), or until
        nothing can run without the clock moving (then the caller moves it)."""
        room = asyncio.Event()
        self.cycles.admission.on_room = room.set
        try:
            await asyncio.sleep(0)
            while not self.cycles.admission.admits() and self._busy():
                # the timeout only re-checks _busy(): work parked on the clock sets no event
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(ROOM_RECHECK_SECONDS):
                        await room.wait()
        finally:
            self.cycles.admission.on_room = None

    async def run_until_idle(self, clock: VirtualClock, *, yield_every: int = 64) -> None:
        """Simulation: schedule until nothing can make progress, jumping virtual time to the next timer.

        The binding cycles and preemptions each scheduling cycle starts run while the next cycle is in flight,
        after its snapshot was taken (:attr:`ScheduleOne.after_snapshot`): that cycle does not see what they
        write, the one after does, and their events meet the next pod in flight, as kube-scheduler's API calls
        and informers take about one cycle to come back (docs/reference/compatibility.md). Not so in the cluster
        plane (``targets`` clusters): member clusters answer a commit in their own time, several at once."""
        if self.cycles.targets == TARGET_NODES:
            self.cycles.after_snapshot = self.settle
        try:
            await self._run_until_idle(clock, yield_every)
        finally:
            self.cycles.after_snapshot = None

    async def _run_until_idle(self, clock: VirtualClock, yield_every: int) -> None:
        while True:
            count = 0
            while await self.schedule_next():
                count += 1
                if count % yield_every == 0:
                    await asyncio.sleep(0)
            if self._held_back():
                await self._await_room()
                if self.cycles.admission.admits():
                    continue
            await self.settle()
            if self.queue.has_ready_work() and self.cycles.admission.admits():
                continue
            deadlines = [d for d in (clock.next_deadline(), self.queue.next_backoff_expiry()) if d is not None]
            if not deadlines:
                break
            clock.advance_to(min(deadlines))
            await asyncio.sleep(0)
        await self.settle()

    async def run(self, stop: asyncio.Event) -> None:
        """Live mode: schedule pods as they become ready until ``stop`` is set.

        When nothing is ready the loop sleeps until the queue wakes it (a pod entered activeQ or backoffQ),
        the first error backoff expires, or the unschedulable pool is due for its flush.
        """
        wake = asyncio.Event()
        self.queue.on_ready = wake.set
        self.cycles.admission.on_room = wake.set
        stopped = asyncio.ensure_future(stop.wait())
        last_flush = last_policy_check = self.clock.now()
        policy_interval = self._policy_check_interval()
        # The engines are asked in the background: a remote one that does not answer holds up no cycle.
        policy_check: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                if await self.schedule_next():
                    await asyncio.sleep(0)  # informers and binding tasks run between cycles
                    continue
                now = self.clock.now()
                if now - last_flush >= UNSCHEDULABLE_FLUSH_INTERVAL:
                    self.queue.flush_unschedulable_left_over()
                    last_flush = now
                    continue
                checking = policy_check is not None and not policy_check.done()
                if not checking and now - last_policy_check >= policy_interval:
                    last_policy_check = now
                    policy_check = self.tasks.spawn(self._check_in_background(), name="kubesched-policy-revisions")
                    policy_check.add_done_callback(lambda _: wake.set())
                    continue
                wake.clear()
                if self.queue.has_ready_work() and self.cycles.admission.admits():
                    continue
                policy_due = math.inf if checking else last_policy_check + policy_interval
                deadline = min(last_flush + UNSCHEDULABLE_FLUSH_INTERVAL, policy_due)
                backoff = self.queue.next_error_backoff_expiry()
                if backoff is not None:
                    deadline = min(deadline, backoff)
                timer = self.clock.call_later(max(deadline - now, 0.0), wake.set)
                woken = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait({woken, stopped}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    timer.cancel()
                    woken.cancel()
        finally:
            stopped.cancel()
            self.queue.on_ready = None
            self.cycles.admission.on_room = None
            await self.close()

    async def close(self) -> None:
        """Cancel binding cycles and close plugins and services; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        tasks = list(self.cycles.binding_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.tasks.aclose()
        for fwk in self.frameworks.values():
            await fwk.close()
        await self.services.aclose()

    def pending_pods(self) -> dict[str, Pod]:
        return dict(self.pending)
