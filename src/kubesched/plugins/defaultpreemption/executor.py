"""Carrying out a preemption: evicting the victims off the scheduling cycle, and knowing while it runs.

DefaultPreemption's PostFilter chooses a node and hands the candidate here (kube-scheduler's async preemption,
``SchedulerAsyncPreemption``, on by default since v1.33): :meth:`Executor.prepare_candidate_async` spawns the
work through the Handle and returns at once, so the cycle does no I/O. The spawned work

1. clears the nomination of the lower-priority pods nominated to that node (they may no longer fit there);
2. evicts every victim but the last at once, then the last one: a victim waiting at Permit is rejected
   there, any other is evicted through the Handle's client (DisruptionTarget condition, then delete), and
   gets a ``Preempted`` event;
3. on any failure logs it and activates the preemptor, so that it is retried at once rather than waiting
   in the unschedulable pool for an event that will not come. Nothing is raised into the scheduler.

While the work runs the preemptor is "preempting": DefaultPreemption's PreEnqueue keeps it out of activeQ and
backoffQ (upstream's ``IsPodRunningPreemption``) until its evictions are about to be made, so that their deletions
find it free and requeue it; with one victim and no nomination to clear that is at once, as upstream's goroutine
starts with it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kubesched.framework.types import PodInfo
from kubesched.plugins.defaultpreemption.candidates import Candidate

if TYPE_CHECKING:
    from kubesched.framework.interface import Handle

log = logging.getLogger(__name__)

PREEMPTED_REASON = "Preempted"
PREEMPTING_ACTION = "Preempting"
WAITING_POD_REJECTION = "preempted"


def preempted_message(preemptor_uid: str, node_name: str) -> str:
    """The ``Preempted`` event's note on a victim, as kube-scheduler writes it."""
    return f"Preempted by pod {preemptor_uid} on node {node_name}"


class Executor:
    """Evicts the victims of chosen candidates in background work, and tracks which preemptors wait on it."""

    def __init__(self, handle: Handle, plugin_name: str) -> None:
        self.handle = handle
        self.plugin_name = plugin_name
        # Preemptors whose eviction work is running; those of them no longer held back.
        self._preempting: set[str] = set()
        self._let_go: set[str] = set()

    def is_pod_running_preemption(self, uid: str) -> bool:
        """Whether the pod's preemption is still under way: started and its evictions not yet being made."""
        return uid in self._preempting and uid not in self._let_go

    def prepare_candidate_async(self, candidate: Candidate, preemptor: PodInfo) -> None:
        """Start evicting ``candidate``'s victims for ``preemptor`` (module doc); returns at once."""
        # A victim already terminating needs no second call.
        victims = [victim for victim in candidate.victims if victim.pod.metadata.deletion_timestamp is None]
        if not victims:
            return
        self.handle.observe_preemption_victims(len(candidate.victims))
        lower = [
            other
            for other in self.handle.nominator.nominated_pods_for_node(candidate.name)
            if other.priority < preemptor.priority
        ]
        self._preempting.add(preemptor.uid)
        if not lower and len(victims) == 1:
            # Upstream's goroutine stops holding the preemptor back before the last eviction, and here that is
            # its first step: done before the cycle's failure handler requeues the pod, as it is there.
            self._let_go.add(preemptor.uid)
        self.handle.spawn(self._evict(candidate.name, preemptor, victims, lower))

    async def _evict(self, node_name: str, preemptor: PodInfo, victims: list[PodInfo], lower: list[PodInfo]) -> None:
        failed = False
        try:
            for pod in lower:
                try:
                    await self.handle.client.clear_nominated_node_name(pod.pod)
                except Exception as error:  # an API error (or a client bug) costs the nomination, not the run
                    # Not critical for this preemption: the pod keeps a nomination it may not fit.
                    log.warning("cannot clear the nominated node of %s on %s: %s", pod.key, node_name, error)
                    failed = True
            # An informer brings an eviction back after its call returned, and upstream's goroutine stops holding
            # the preemptor as the first calls return: the preemptor is free by the time their deletions reach the
            # queue, which requeues it (kube-scheduler relies on that for the last victim, and in practice gets it
            # for all). A client may notify before its call returns (the simulated cluster's does), so the hold
            # ends before the calls are made.
            self._let_go.add(preemptor.uid)
            *first, last = victims
            if first:
                outcomes = await asyncio.gather(
                    *(self._preempt_pod(node_name, preemptor, victim) for victim in first), return_exceptions=True
                )
                failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
                for failure in failures:
                    log.error("preemption by %s on %s failed: %s", preemptor.key, node_name, failure)
                if failures:
                    # Retrying sooner beats evicting the last victim for a node that is not freed anyway.
                    failed = True
                    return
            try:
                await self._preempt_pod(node_name, preemptor, last)
            except Exception as error:  # any failure costs this preemption, never the scheduler
                log.error("preemption by %s of its last victim on %s failed: %s", preemptor.key, node_name, error)
                failed = True
        finally:
            self._preempting.discard(preemptor.uid)
            self._let_go.discard(preemptor.uid)
            if failed:
                self.handle.activate([preemptor.pod])

    async def _preempt_pod(self, node_name: str, preemptor: PodInfo, victim: PodInfo) -> None:
        waiting = self.handle.get_waiting_pod(victim.uid)
        if waiting is not None:
            # Held at Permit, not bound: rejecting it there frees its reservation.
            waiting.reject(self.plugin_name, WAITING_POD_REJECTION)
        else:
            await self.handle.client.preempt(victim.pod, preemptor.pod)
        self.handle.event_recorder.event(
            victim.pod, "Normal", PREEMPTED_REASON, PREEMPTING_ACTION, preempted_message(preemptor.uid, node_name)
        )
