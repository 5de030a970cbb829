"""One pod's attempt: the scheduling cycle, the binding cycle and the failure handler.

:meth:`ScheduleOne.schedule_one` is called by the scheduler's run loop for each popped pod, one at a
time (kube-scheduler's ``scheduleOne``): it brings the cycle's snapshot up to date, runs the algorithm
(:mod:`kubesched.scheduler.algorithm`, which awaits the framework's prefetchers between Filter batches),
assumes the pod on the chosen node, runs Reserve and Permit, and starts the binding cycle as its own
asyncio task, so binding never holds up the next pod. Failures go through one handler that writes the
FailedScheduling event and condition, records a nomination and requeues the pod. At the end of every
attempt the observer gets an :class:`~kubesched.scheduler.results.AttemptRecord` of plain values: the
policy verdicts are sealed when the scheduling cycle ends (:func:`~kubesched.policyapi.verdicts.seal_verdicts`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

from kubesched.api.objects import Pod
from kubesched.backends.base import Backend
from kubesched.clock import Clock
from kubesched.clusterapi.contract import cycle_snapshot
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ASSIGNED_POD_DELETE
from kubesched.framework.interface import QueuedPodInfo, truncate_event_message
from kubesched.framework.preemption_report import preemption_report_of
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.waiting_pods import WaitingPods
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.policyapi.verdicts import seal_verdicts, verdicts_of
from kubesched.scheduler.admission import BindingAdmission
from kubesched.scheduler.algorithm import FitError, ScheduleAlgorithm, ScheduleResult, SchedulingError
from kubesched.scheduler.cache.cache import Cache
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS, TARGET_NODES, Diagnosis, RejectedNodes, fit_error_message
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue
from kubesched.scheduler.results import ERROR, SCHEDULED, UNSCHEDULABLE, AttemptObserver, AttemptRecord, Phase

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Attempt:
    """One pod's attempt in progress."""

    qpi: QueuedPodInfo
    fwk: Framework
    cycle: int
    state: CycleState
    phases: dict[Phase, float]
    started_at: float = 0.0
    chosen_node: str | None = None
    result: ScheduleResult | None = None
    node_to_status: Mapping[str, Status] = field(default_factory=dict)


class ScheduleOne:
    """The cycles of one scheduler; stateful only through the algorithm and the in-flight binding tasks."""

    def __init__(
        self,
        *,
        cache: Cache,
        queue: SchedulingQueue,
        snapshot: Snapshot,
        frameworks: Mapping[str, Framework],
        backend: Backend,
        clock: Clock,
        algorithm: ScheduleAlgorithm,
        pending: Mapping[str, Pod],
        waiting_pods: WaitingPods,
        observer: AttemptObserver | None,
        targets: str = TARGET_NODES,
        admission: BindingAdmission | None = None,
    ) -> None:
        self.cache = cache
        # Counts the binding cycles of the profiles that bound them (none: an admission with no limits).
        self.admission = admission if admission is not None else BindingAdmission({})
        # What the FailedScheduling message calls the nodes: "nodes", or "clusters" in the cluster plane.
        self.targets = targets
        self.queue = queue
        self.nominator = queue.nominator
        self.snapshot = snapshot
        self.frameworks = frameworks
        self.backend = backend
        self.clock = clock
        self.algorithm = algorithm
        self.pending = pending
        self.waiting_pods = waiting_pods
        self.observer = observer
        self.binding_tasks: set[asyncio.Task[None]] = set()
        # A simulation has to end: after this many attempts a pod is left where it is (None = never give up).
        self.max_attempts: int | None = None
        self.attempt_latencies: list[float] | None = None  # wall time of each scheduling cycle, when measured
        # Awaited once the cycle's snapshot is taken: a simulation lets the background work of earlier cycles
        # (binding, evicting preemption victims) finish there. kube-scheduler's informers deliver what that work
        # writes while the next pods are being scheduled: the cycle does not see it, but its events count as
        # having happened while the pod was in flight (Scheduler.run_until_idle).
        self.after_snapshot: Callable[[], Awaitable[None]] | None = None

    # ---- the scheduling cycle ----------------------------------------------------------------

    async def schedule_one(self, qpi: QueuedPodInfo) -> None:
        started = time.perf_counter()
        try:
            await self._scheduling_cycle(qpi)
        finally:
            if self.attempt_latencies is not None:
                self.attempt_latencies.append(time.perf_counter() - started)

    async def _scheduling_cycle(self, qpi: QueuedPodInfo) -> None:
        started_at = self.clock.now()
        pod_info = qpi.pod_info
        pod = pod_info.pod
        uid = pod_info.uid
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        if fwk is None or uid not in self.pending:
            self.queue.done(uid)
            return
        if pod.metadata.deletion_timestamp is not None:
            self.backend.event(
                pod, "Warning", "FailedScheduling", "Scheduling", f"skip schedule deleting pod: {pod_info.key}"
            )
            self.queue.done(uid)
            return
        if self.cache.is_assumed(uid):
            self.queue.done(uid)
            return
        self.cache.update_snapshot(self.snapshot)
        if self.after_snapshot is not None:
            await self.after_snapshot()
        state = CycleState()
        attempt = _Attempt(
            qpi, fwk, self.queue.scheduling_cycle, state, {Phase.QUEUED: qpi.timestamp}, started_at=started_at
        )
        try:
            result = await self.algorithm.schedule_pod(
                fwk,
                state,
                pod_info,
                self.snapshot,
                self.nominator.nominated_node_names() if self.nominator else frozenset(),
            )
        except FitError as err:
            self._handle_fit_error(attempt, err)
            return
        except SchedulingError as err:
            self._fail(attempt, err.status, Diagnosis())
            return
        except Exception as exc:  # a bug in the algorithm or a plugin must cost one attempt, not the scheduler
            log.exception("scheduling cycle for %s failed", pod_info.key)
            self._fail(attempt, Status.error(exc), Diagnosis())
            return

        node = result.node
        attempt.chosen_node = node
        attempt.result = result
        attempt.node_to_status = result.node_to_status
        attempt.phases[Phase.FILTERED] = self.clock.now()
        if self.observer is not None:
            seal_verdicts(state, [node])
        if uid not in self.pending:
            # Deleted (or bound by someone else) while the cycle awaited a policy decision.
            self.queue.done(uid)
            return
        assumed = self.cache.assume_pod(pod_info, node)
        self.nominator.delete_nominated_pod_if_exists(uid)
        status = fwk.run_reserve(state, assumed, node)
        if status is None:
            attempt.phases[Phase.RESERVED] = self.clock.now()
            status = fwk.run_permit(state, assumed, node)
        if status is not None and status.code is not Code.WAIT:
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget_pod(uid)
            self._fail_on_node(attempt, node, status)
            return
        task = asyncio.get_running_loop().create_task(self._binding_cycle(attempt, assumed, node), name=uid)
        self.binding_tasks.add(task)
        task.add_done_callback(self.binding_tasks.discard)
        profile = fwk.profile_name
        if profile in self.admission.limits:
            # counted until the task is done, however it ends: the count cannot drift from the tasks
            self.admission.started(profile)
            task.add_done_callback(lambda _task: self.admission.finished(profile))

    def binding_runnable(self, task: asyncio.Task[None]) -> bool:
        """Whether a binding task can progress without the clock moving (not parked at Permit)."""
        if task.done():
            return False
        entry = self.waiting_pods.get(task.get_name())
        return entry is None or entry.done

    # ---- failures ----------------------------------------------------------------------------

    def _handle_fit_error(self, attempt: _Attempt, err: FitError) -> None:
        fwk = attempt.fwk
        diagnosis = err.diagnosis
        nominated: str | None = None
        if fwk.post_filter_plugins and err.num_all_nodes:
            post_result, post_status = fwk.run_post_filter(
                attempt.state, attempt.qpi.pod_info, diagnosis.node_to_status
            )
            if post_status.code is Code.ERROR:
                log.error("PostFilter for %s failed: %s", attempt.qpi.pod_info.key, post_status.message)
            # Upstream keeps the PostFilter message whatever its code, an error's text included.
            if post_status.message and post_status.code is not Code.SUCCESS:
                diagnosis.post_filter_msg = post_status.message
            if post_result is not None:
                nominated = post_result.nominated_node_name
        code = Code.PENDING if diagnosis.pending_plugins else Code.UNSCHEDULABLE
        status = Status(code, fit_error_message(err.num_all_nodes, diagnosis, self.targets))
        self._fail(attempt, status, diagnosis, nominated_node=nominated)

    def _fail_on_node(self, attempt: _Attempt, node: str, status: Status) -> None:
        """Reserve/Permit/binding failure: kube-scheduler reports it as a FitError over one node."""
        if status.code is Code.ERROR:
            self._fail(attempt, status, Diagnosis())
            return
        diagnosis = Diagnosis(node_to_status=RejectedNodes({node: status}))
        (diagnosis.pending_plugins if status.code is Code.PENDING else diagnosis.unschedulable_plugins).add(
            status.plugin
        )
        self._fail(attempt, Status(status.code, fit_error_message(1, diagnosis, self.targets)), diagnosis)

    def _fail(
        self, attempt: _Attempt, status: Status, diagnosis: Diagnosis, *, nominated_node: str | None = None
    ) -> None:
        """kube-scheduler's FailureHandler: event, condition, nomination, requeue (with backoff), record."""
        qpi = attempt.qpi
        latest = self.pending.get(qpi.pod_info.uid)
        if latest is not None and latest is not qpi.pod_info.pod:
            # Changed while it was assumed (the queue skips updates then, a plugin's own write among them): the
            # next attempt reads the informer's latest version, as kube-scheduler's failure handler does.
            qpi.pod_info = PodInfo(latest)
        pod_info = qpi.pod_info
        pod = pod_info.pod
        message = status.message
        is_error = status.code is Code.ERROR
        reason = "SchedulerError" if is_error else "Unschedulable"
        self.backend.event(pod, "Warning", "FailedScheduling", "Scheduling", truncate_event_message(message))
        self.backend.set_pod_condition(pod, reason, message, nominated_node)
        log.debug(
            "Unable to schedule pod; no fit; waiting" if not is_error else "Error scheduling pod; retrying",
            extra={"pod": pod_info.key, "profile": pod.spec.scheduler_name, "err": message},
        )
        if nominated_node is not None and nominated_node != pod.status.nominated_node_name:
            # The next attempt reads the nomination from the pod (the nominated node is tried first), as
            # kube-scheduler's does once its status patch comes back through the informer.
            pod = replace(pod, status=replace(pod.status, nominated_node_name=nominated_node))
            pod_info = qpi.pod_info = PodInfo(pod)
        if nominated_node:
            self.nominator.add_nominated_pod(pod_info, nominated_node)
        elif nominated_node is not None:
            self.nominator.delete_nominated_pod_if_exists(pod_info.uid)
        gave_up = self.max_attempts is not None and qpi.attempts >= self.max_attempts
        if pod_info.uid in self.pending and not gave_up:
            self.queue.add_unschedulable_if_not_present(
                qpi,
                rejected_by=diagnosis.unschedulable_plugins,
                pending=diagnosis.pending_plugins,
                error=is_error,
            )
        else:
            self.queue.done(pod_info.uid)
        if self.observer is None:
            return
        node_to_status = diagnosis.node_to_status
        targets = [attempt.chosen_node] if attempt.chosen_node else sorted(node_to_status)
        seal_verdicts(attempt.state, targets)
        self.observer.on_attempt(
            self._record(
                attempt,
                ERROR if is_error else UNSCHEDULABLE,
                message=message,
                node_to_status=node_to_status,
                pre_filter_status=diagnosis.pre_filter_status,
            )
        )

    def _record(
        self,
        attempt: _Attempt,
        outcome: str,
        *,
        message: str = "",
        node_to_status: Mapping[str, Status] | None = None,
        bound_to: str | None = None,
        pod: PodInfo | None = None,
        pre_filter_status: Status | None = None,
    ) -> AttemptRecord:
        result = attempt.result
        qpi = attempt.qpi
        return AttemptRecord(
            pod=pod if pod is not None else qpi.pod_info,
            profile=attempt.fwk.profile_name,
            result=outcome,
            attempts=qpi.attempts,
            cycle=attempt.cycle,
            chosen_node=attempt.chosen_node,
            node=bound_to,
            message=message,
            node_to_status=node_to_status if node_to_status is not None else attempt.node_to_status,
            target_kind="cluster" if self.targets == TARGET_CLUSTERS else "node",
            scored_nodes=result.scored_nodes if result is not None else (),
            plugin_scores=result.plugin_scores if result is not None else {},
            totals=result.totals if result is not None else None,
            evaluated_nodes=result.evaluated_nodes if result is not None else 0,
            feasible_nodes=result.feasible_nodes if result is not None else 0,
            queued_at=qpi.initial_attempt_timestamp,
            started_at=attempt.started_at,
            finished_at=self.clock.now(),
            phases=dict(attempt.phases),
            verdicts=verdicts_of(attempt.state),
            raw_scores=result.raw_scores if result is not None else {},
            skipped_filter_plugins=frozenset(attempt.state.skip_filter_plugins),
            skipped_score_plugins=frozenset(attempt.state.skip_score_plugins),
            pre_filter_status=pre_filter_status,
            preemption=preemption_report_of(attempt.state),
            cluster_snapshot=cycle_snapshot(attempt.state),
        )

    # ---- the binding cycle -------------------------------------------------------------------

    async def _binding_cycle(self, attempt: _Attempt, assumed: PodInfo, node: str) -> None:
        fwk = attempt.fwk
        state = attempt.state
        uid = assumed.uid
        status = await fwk.wait_on_permit(assumed)
        if status is None:
            attempt.phases[Phase.PERMITTED] = self.clock.now()
            status = await fwk.run_pre_bind(state, assumed, node)
        if status is None:
            status = await fwk.run_bind(state, assumed, node)
        self.cache.finish_binding(uid)
        if status is None:
            attempt.phases[Phase.BOUND] = self.clock.now()
            self.queue.done(uid)
            self.backend.event(
                assumed.pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {assumed.key} to {node}"
            )
            if log.isEnabledFor(logging.DEBUG):  # its extra fields are built for nothing otherwise (every pod)
                log.debug(
                    "Successfully bound pod to node",
                    extra={
                        "pod": assumed.key,
                        "node": node,
                        "profile": assumed.pod.spec.scheduler_name,
                        "evaluatedNodes": attempt.result.evaluated_nodes if attempt.result is not None else 0,
                        "feasibleNodes": attempt.result.feasible_nodes if attempt.result is not None else 0,
                    },
                )
            await fwk.run_post_bind(state, assumed, node)
            if self.observer is not None:
                self.observer.on_attempt(self._record(attempt, SCHEDULED, bound_to=node, pod=assumed))
            return
        fwk.run_unreserve(state, assumed, node)
        self.cache.forget_pod(uid)
        # Releasing the node's resources is an AssignedPodDelete for every other waiting pod.
        self.queue.done(uid)
        self.queue.on_event(ASSIGNED_POD_DELETE, assumed.pod, None)
        self._fail_on_node(attempt, node, status)
