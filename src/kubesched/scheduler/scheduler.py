"""The scheduler: profiles' frameworks, the queue, the cache, the scheduling loop and binding cycles.

Built from a validated configuration, a plugin registry and a backend. The backend's informer events
feed the cache and the queue (``on_node_add`` ...); :meth:`Scheduler.schedule_next` runs one serial
scheduling cycle and starts that pod's binding cycle as an asyncio task, so binding never holds up the
next pod. :meth:`run_until_idle` drives a simulation on a virtual clock; :meth:`run` serves a live
cluster until stopped.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.backends.base import Backend
from kubesched.clock import Clock, VirtualClock
from kubesched.config.types import SchedulerConfiguration
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    ActionType,
    ClusterEvent,
    EventResource,
)
from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.registry import Registry
from kubesched.framework.runtime.waiting_pods import WaitingPods
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.scheduler.cache.cache import Cache
from kubesched.scheduler.diagnosis import Diagnosis, fit_error_message, truncate_event_message
from kubesched.scheduler.handle import ProfileHandle
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue
from kubesched.scheduler.results import ERROR, SCHEDULED, UNSCHEDULABLE, AttemptObserver, AttemptRecord
from kubesched.scheduler.schedule_one import FitError, ScheduleAlgorithm, ScheduleResult, SchedulingError

log = logging.getLogger(__name__)

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0


@dataclass(slots=True)
class _Attempt:
    """Bookkeeping of a pod's current attempt, for the observer's record."""

    cycle: int
    state: CycleState
    phases: dict[str, float]


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
    ) -> None:
        self.config = config
        self.clock = clock
        self.backend = backend
        self.observer = observer
        self.cache = Cache()
        self.waiting_pods = WaitingPods()
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            handle = ProfileHandle(self, profile.scheduler_name)
            self.frameworks[profile.scheduler_name] = Framework(
                profile, registry, handle, self.waiting_pods, use_batch=use_batch
            )
        first = next(iter(self.frameworks.values()))
        self._hints = {name: fwk.events_to_register() for name, fwk in self.frameworks.items()}
        self.queue = SchedulingQueue(
            first.less,
            clock,
            initial_backoff=float(config.pod_initial_backoff_seconds),
            max_backoff=float(config.pod_max_backoff_seconds),
            pre_enqueue=self._pre_enqueue,
            hints_for=lambda pod: self._hints.get(pod.spec.scheduler_name, {}),
        )
        self.algorithm = ScheduleAlgorithm(config.percentage_of_nodes_to_score, random.Random(seed))
        self._pending: dict[str, Pod] = {}
        self._nominated: dict[str, dict[str, PodInfo]] = {}
        self._nominated_node_of: dict[str, str] = {}
        self._binding_tasks: set[asyncio.Task[None]] = set()
        self._background_tasks: set[asyncio.Task[None]] = set()
        self._sleeping: set[asyncio.Task[Any]] = set()
        self._attempts: dict[str, _Attempt] = {}
        self.attempt_latencies: list[float] = []
        # A simulation has to end: after this many attempts a pod is left where it is (None = never give up).
        self.max_attempts: int | None = None
        self.record_latencies = False

    # ---- informer callbacks ------------------------------------------------------------------

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.frameworks

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.on_event(NODE_ADD, None, node)

    def on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(new)
        action = _node_update_action(old, new)
        if action:
            self.queue.on_event(ClusterEvent(EventResource.NODE, action, "NodeUpdate"), old, new)

    def on_node_delete(self, node: Node) -> None:
        self.cache.remove_node(node.metadata.name)
        self.queue.on_event(NODE_DELETE, node, None)

    def on_pod_add(self, pod: Pod) -> None:
        if pod.spec.node_name:
            self.cache.add_pod(pod)
            self.queue.on_event(ASSIGNED_POD_ADD, None, pod)
            return
        if not self.responsible_for(pod) or pod.status.phase in _TERMINAL_PHASES:
            return
        pod_info = PodInfo(pod)
        self._pending[pod_info.uid] = pod
        if pod.status.nominated_node_name:
            self._nominate(pod_info, pod.status.nominated_node_name)
        self.queue.add(pod_info)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        uid = new.metadata.uid
        if new.spec.node_name:
            self._pending.pop(uid, None)
            self._unnominate(uid)
            self.queue.delete(uid)
            self.cache.add_pod(new)
            event = (
                ASSIGNED_POD_ADD
                if not old.spec.node_name
                else ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE, "AssignedPodUpdate")
            )
            self.queue.on_event(event, old if old.spec.node_name else None, new)
            return
        if not self.responsible_for(new):
            return
        self._pending[uid] = new
        self.queue.update(PodInfo(new))

    def on_pod_delete(self, pod: Pod) -> None:
        uid = pod.metadata.uid
        self._unnominate(uid)
        if self._pending.pop(uid, None) is not None:
            self.queue.delete(uid)
            waiting = self.waiting_pods.get(uid)
            if waiting is not None:
                waiting.reject("", "pod was deleted")
        if self.cache.remove_pod(pod) is not None:
            self.queue.on_event(ASSIGNED_POD_DELETE, pod, None)

    def _nominate(self, pod_info: PodInfo, node_name: str) -> None:
        self._unnominate(pod_info.uid)
        self._nominated.setdefault(node_name, {})[pod_info.uid] = pod_info
        self._nominated_node_of[pod_info.uid] = node_name

    def _unnominate(self, uid: str) -> None:
        node_name = self._nominated_node_of.pop(uid, None)
        if node_name is not None:
            pods = self._nominated.get(node_name, {})
            pods.pop(uid, None)
            if not pods:
                self._nominated.pop(node_name, None)

    def _pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        fwk = self.frameworks.get(pod_info.pod.spec.scheduler_name)
        return None if fwk is None else fwk.run_pre_enqueue(pod_info)

    # ---- the scheduling cycle ----------------------------------------------------------------

    def schedule_next(self) -> bool:
        """Pop one pod and run its scheduling cycle; False when nothing is ready."""
        qpi = self.queue.pop()
        if qpi is None:
            return False
        started = time.perf_counter()
        self._schedule(qpi)
        if self.record_latencies:
            self.attempt_latencies.append(time.perf_counter() - started)
        return True

    def _schedule(self, qpi: QueuedPodInfo) -> None:
        pod_info = qpi.pod_info
        pod = pod_info.pod
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        if fwk is None or pod_info.uid not in self._pending:
            self.queue.done(pod_info.uid)
            return
        if pod.metadata.deletion_timestamp is not None:
            self.backend.event(
                pod, "Warning", "FailedScheduling", "Scheduling", f"skip schedule deleting pod: {pod_info.key}"
            )
            self.queue.done(pod_info.uid)
            return
        if self.cache.is_assumed(pod_info.uid):
            self.queue.done(pod_info.uid)
            return
        state = CycleState()
        attempt = _Attempt(self.queue.scheduling_cycle, state, {"queued": qpi.timestamp})
        self._attempts[pod_info.uid] = attempt
        try:
            result = self.algorithm.schedule_pod(
                fwk,
                state,
                pod_info,
                self.cache.snapshot(),
                self._filter_with_nominated if self._nominated else None,
                frozenset(self._nominated),
            )
        except FitError as err:
            self._handle_fit_error(fwk, state, qpi, err)
            return
        except SchedulingError as err:
            self._fail(fwk, qpi, err.status, Diagnosis())
            return
        except Exception as exc:  # a bug in a plugin must cost one attempt, not the scheduler
            log.exception("scheduling cycle for %s failed", pod_info.key)
            self._fail(fwk, qpi, Status.error(exc), Diagnosis())
            return

        node = result.node
        attempt.phases["filtered"] = self.clock.now()
        assumed = self.cache.assume_pod(pod_info, node)
        self._unnominate(pod_info.uid)
        status = fwk.run_reserve(state, assumed, node)
        if status is None:
            attempt.phases["reserved"] = self.clock.now()
            status = fwk.run_permit(state, assumed, node)
        if status is not None and status.code is not Code.WAIT:
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget_pod(pod_info.uid)
            self._fail_on_node(fwk, qpi, node, status, result)
            return
        task = asyncio.get_running_loop().create_task(
            self._binding_cycle(fwk, state, qpi, assumed, result), name=pod_info.uid
        )
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    def _filter_with_nominated(self, fwk: Framework, state: CycleState, pod: PodInfo, info: NodeInfo) -> Status | None:
        """Two-pass filtering: with nominated pods of priority ≥ the pod's, then without them."""
        nominated = [
            other
            for other in self._nominated.get(info.name, {}).values()
            if other.uid != pod.uid and other.priority >= pod.priority
        ]
        if nominated:
            state_with = state.clone()
            info_with = info.clone()
            for other in nominated:
                info_with.add_pod(other)
                status = fwk.run_pre_filter_add_pod(state_with, pod, other, info_with)
                if status is not None:
                    return status
            status = fwk.run_filter(state_with, pod, info_with)
            if status is not None:
                return status
        return fwk.run_filter(state, pod, info)

    def _handle_fit_error(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, err: FitError) -> None:
        diagnosis = err.diagnosis
        nominated: str | None = None
        if fwk.post_filter_plugins and err.num_all_nodes:
            post_result, post_status = fwk.run_post_filter(state, qpi.pod_info, diagnosis.node_to_status)
            if post_status.code is Code.ERROR:
                log.error("PostFilter for %s failed: %s", qpi.pod_info.key, post_status.message)
            elif post_status.message and post_status.code is not Code.SUCCESS:
                diagnosis.post_filter_msg = post_status.message
            if post_result is not None:
                nominated = post_result.nominated_node_name
        code = Code.PENDING if diagnosis.pending_plugins else Code.UNSCHEDULABLE
        status = Status(code, fit_error_message(err.num_all_nodes, diagnosis))
        self._fail(fwk, qpi, status, diagnosis, nominated_node=nominated)

    def _fail_on_node(
        self, fwk: Framework, qpi: QueuedPodInfo, node: str, status: Status, result: ScheduleResult | None
    ) -> None:
        """Reserve/Permit/binding failure: kube-scheduler reports it as a FitError over one node."""
        if status.code is Code.ERROR:
            self._fail(fwk, qpi, status, Diagnosis())
            return
        diagnosis = Diagnosis(node_to_status={node: status})
        (diagnosis.pending_plugins if status.code is Code.PENDING else diagnosis.unschedulable_plugins).add(
            status.plugin
        )
        failure = Status(status.code, fit_error_message(1, diagnosis))
        self._fail(fwk, qpi, failure, diagnosis)

    def _fail(
        self,
        fwk: Framework,
        qpi: QueuedPodInfo,
        status: Status,
        diagnosis: Diagnosis,
        *,
        nominated_node: str | None = None,
    ) -> None:
        pod_info = qpi.pod_info
        pod = pod_info.pod
        message = status.message
        is_error = status.code is Code.ERROR
        reason = "SchedulerError" if is_error else "Unschedulable"
        self.backend.event(pod, "Warning", "FailedScheduling", "Scheduling", truncate_event_message(message))
        self.backend.set_pod_condition(pod, reason, message, nominated_node)
        if nominated_node:
            self._nominate(pod_info, nominated_node)
        gave_up = self.max_attempts is not None and qpi.attempts >= self.max_attempts
        if pod_info.uid in self._pending and not gave_up:
            self.queue.add_unschedulable_if_not_present(
                qpi,
                rejected_by=diagnosis.unschedulable_plugins,
                pending=diagnosis.pending_plugins,
                error=is_error,
            )
        else:
            self.queue.done(pod_info.uid)
        attempt = self._attempts.pop(pod_info.uid, None)
        if self.observer is not None:
            self.observer.on_attempt(
                AttemptRecord(
                    pod=pod_info,
                    profile=fwk.profile_name,
                    result=ERROR if is_error else UNSCHEDULABLE,
                    attempts=qpi.attempts,
                    cycle=attempt.cycle if attempt else 0,
                    phases=attempt.phases if attempt else {},
                    state=attempt.state if attempt else None,
                    message=message,
                    node_to_status=diagnosis.node_to_status,
                    queued_at=qpi.initial_attempt_timestamp,
                    finished_at=self.clock.now(),
                )
            )

    # ---- the binding cycle -------------------------------------------------------------------

    async def _binding_cycle(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo, result: ScheduleResult
    ) -> None:
        node = result.node
        uid = assumed.uid
        attempt = self._attempts.get(uid)
        phases = attempt.phases if attempt is not None else {}
        status = await fwk.wait_on_permit(assumed)
        if status is None:
            phases["permitted"] = self.clock.now()
            status = await fwk.run_pre_bind(state, assumed, node)
        if status is None:
            status = await fwk.run_bind(state, assumed, node)
        self.cache.finish_binding(uid)
        if status is None:
            phases["bound"] = self.clock.now()
            self._attempts.pop(uid, None)
            self.queue.done(uid)
            self.backend.event(
                assumed.pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {assumed.key} to {node}"
            )
            await fwk.run_post_bind(state, assumed, node)
            if self.observer is not None:
                self.observer.on_attempt(
                    AttemptRecord(
                        pod=assumed,
                        profile=fwk.profile_name,
                        result=SCHEDULED,
                        attempts=qpi.attempts,
                        cycle=attempt.cycle if attempt else 0,
                        phases=phases,
                        state=state,
                        node=node,
                        node_to_status=result.node_to_status,
                        scored_nodes=result.scored_nodes,
                        plugin_scores=result.plugin_scores,
                        totals=result.totals,
                        evaluated_nodes=result.evaluated_nodes,
                        feasible_nodes=result.feasible_nodes,
                        queued_at=qpi.initial_attempt_timestamp,
                        finished_at=self.clock.now(),
                    )
                )
            return
        fwk.run_unreserve(state, assumed, node)
        self.cache.forget_pod(uid)
        # Releasing the node's resources is an AssignedPodDelete for every other waiting pod.
        self.queue.done(uid)
        self.queue.on_event(ASSIGNED_POD_DELETE, assumed.pod, None)
        self._fail_on_node(fwk, qpi, node, status, result)

    # ---- loops -------------------------------------------------------------------------------

    def _binding_runnable(self, task: asyncio.Task[None]) -> bool:
        if task.done():
            return False
        entry = self.waiting_pods.get(task.get_name())
        return entry is None or entry.done

    async def _settle_bindings(self) -> None:
        """Let binding and background tasks run until each has finished or waits on the clock/Permit."""
        spins = 0
        while any(self._binding_runnable(task) for task in self._binding_tasks) or any(
            not task.done() and task not in self._sleeping for task in self._background_tasks
        ):
            spins += 1
            # Work waiting on real I/O (a remote policy call in a worker thread) needs real time to pass:
            # after a burst of yields, wait a millisecond rather than spin.
            await asyncio.sleep(0 if spins < 100 else 0.001)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Background work for plugins; a failure is logged, never raised into the scheduler."""
        task = asyncio.get_running_loop().create_task(self._guarded(work))
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)

    @staticmethod
    async def _guarded(work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background work of a plugin failed")

    async def sleep(self, seconds: float) -> None:
        """Sleep on the injected clock; with a virtual clock the simulation jumps to the wake-up time."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        handle = self.clock.call_later(seconds, wake)
        task = asyncio.current_task()
        if task is not None:
            self._sleeping.add(task)
        try:
            await woken
        finally:
            handle.cancel()
            if task is not None:
                self._sleeping.discard(task)

    def pending_pod(self, uid: str) -> Pod | None:
        return self._pending.get(uid)

    async def run_until_idle(self, clock: VirtualClock, *, yield_every: int = 64) -> None:
        """Simulation: schedule until nothing can make progress, jumping virtual time to the next timer."""
        while True:
            count = 0
            while self.schedule_next():
                count += 1
                if count % yield_every == 0:
                    await asyncio.sleep(0)
            await self._settle_bindings()
            if self.queue.has_ready_work():
                continue
            deadlines = [d for d in (clock.next_deadline(), self.queue.next_backoff_expiry()) if d is not None]
            if not deadlines:
                break
            clock.advance_to(min(deadlines))
            await asyncio.sleep(0)
        await self._settle_bindings()

    async def run(self, stop: asyncio.Event, *, idle_sleep: float = 0.01) -> None:
        """Live mode: schedule as pods arrive until ``stop`` is set; flush the queue periodically."""
        last_flush = self.clock.now()
        while not stop.is_set():
            if not self.schedule_next():
                await asyncio.sleep(idle_sleep)
            else:
                await asyncio.sleep(0)
            now = self.clock.now()
            if now - last_flush >= UNSCHEDULABLE_FLUSH_INTERVAL:
                self.queue.flush_unschedulable_left_over()
                last_flush = now
        await self.close()

    async def close(self) -> None:
        tasks = [*self._binding_tasks, *self._background_tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for fwk in self.frameworks.values():
            await fwk.close()

    def pending_pods(self) -> dict[str, Pod]:
        return dict(self._pending)


def _node_update_action(old: Node, new: Node) -> ActionType:
    action = ActionType(0)
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.metadata.labels != new.metadata.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.spec_unschedulable != new.spec_unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.raw.get("status", {}).get("conditions") != new.raw.get("status", {}).get("conditions"):
        action |= ActionType.UPDATE_NODE_CONDITION
    if old.metadata.annotations != new.metadata.annotations:
        action |= ActionType.UPDATE_NODE_ANNOTATION
    return action
