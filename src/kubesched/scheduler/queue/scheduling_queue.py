"""The scheduling queue: activeQ, backoffQ, the unschedulable pool, gating and requeue by events.

One queue serves all profiles (hence one QueueSort). The scheduler adds pending pods, pops the next
one for a scheduling cycle, and hands failures back with the plugins that rejected them; cluster
events move unschedulable pods back when a rejecting plugin's queueing hint says the event may help.
The pod nominator lives here too, as in kube-scheduler. Time comes from the injected clock; backoff is
flushed lazily on every pop, and the queue wakes the scheduler's run loop (``on_ready``) whenever a pod
becomes poppable, so an idle scheduler sleeps instead of polling.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.clock import Clock
from kubesched.framework.events import (
    FORCE_ACTIVATE,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    PolicyRevision,
    QueueingHint,
)
from kubesched.framework.interface import QueuedPodInfo
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.scheduler.queue.backoff import backoff_expiry
from kubesched.scheduler.queue.nominator import PodNominator

log = logging.getLogger(__name__)

POD_MAX_IN_UNSCHEDULABLE_SECONDS = 300.0

LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
SortKeyFn = Callable[[QueuedPodInfo], tuple[object, ...]]
PreEnqueueFn = Callable[[PodInfo], Status | None]
# plugin name -> registered events (None = every event), for the pod's profile
HintTable = Mapping[str, list[ClusterEventWithHint] | None]


class _LessOrder:
    """The order of an activeQ entry by the QueueSort plugin's ``less``; pods it cannot tell apart keep
    arrival order (``sequence``). Never equal to another entry's, so a heap tuple's comparison comes here."""

    __slots__ = ("less", "qpi", "sequence")

    def __init__(self, qpi: QueuedPodInfo, less: LessFn, sequence: int) -> None:
        self.qpi = qpi
        self.less = less
        self.sequence = sequence

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __lt__(self, other: _LessOrder) -> bool:
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.sequence < other.sequence


# activeQ entry: (order, arrival sequence, pod). The order is the QueueSort plugin's sort key where it has one
# (compared in C, no Python call per comparison), else a _LessOrder.
_ActiveEntry = tuple[object, int, QueuedPodInfo]
_Event = tuple[int, ClusterEvent, object, object]  # (sequence, event, old, new)
# (ordering window, 1 after an error else 0, order within the window, sequence, pod)
_BackoffEntry = tuple[float, int, Any, int, QueuedPodInfo]
# Backoff expiries are aligned to windows of this many seconds; a window's pods leave together, in activeQ's order
# (kube-scheduler's backoffQOrderingWindowDuration, SchedulerPopFromBackoffQ).
BACKOFF_ORDERING_WINDOW = 1.0


def _sequence_of(event: _Event) -> int:
    return event[0]


class _ParkedByRejectors:
    """The unschedulable pool's non-gated pods grouped by (profile, plugins that rejected them), in the order
    they were parked: an event is offered only to the groups a rejecting plugin registered it for, so a pool of
    1000 pods that a bind cannot help costs one check per group, not one hint evaluation per pod."""

    __slots__ = ("_groups", "_interest", "_key_of", "_sequence")

    def __init__(self) -> None:
        self._groups: dict[tuple[str, frozenset[str]], dict[str, int]] = {}
        self._key_of: dict[str, tuple[str, frozenset[str]]] = {}
        self._interest: dict[tuple[tuple[str, frozenset[str]], EventResource, ActionType], bool] = {}
        self._sequence = itertools.count()

    def add(self, qpi: QueuedPodInfo) -> None:
        uid = qpi.pod_info.uid
        self.remove(uid)
        key = (qpi.pod.spec.scheduler_name, frozenset(qpi.unschedulable_plugins | qpi.pending_plugins))
        self._groups.setdefault(key, {})[uid] = next(self._sequence)
        self._key_of[uid] = key

    def remove(self, uid: str) -> None:
        key = self._key_of.pop(uid, None)
        if key is None:
            return
        members = self._groups[key]
        del members[uid]
        if not members:
            del self._groups[key]

    def offered(
        self, event: ClusterEvent, interested: Callable[[str, frozenset[str], ClusterEvent], bool]
    ) -> list[str]:
        """The uids whose group ``interested`` says may care about ``event``, in parking order."""
        found: list[tuple[int, str]] = []
        for key, members in self._groups.items():
            cached = (key, event.resource, event.action)
            verdict = self._interest.get(cached)
            if verdict is None:
                verdict = self._interest[cached] = interested(key[0], key[1], event)
            if verdict:
                found.extend((sequence, uid) for uid, sequence in members.items())
        found.sort()
        return [uid for _, uid in found]


@dataclass(slots=True)
class QueueCounts:
    active: int
    backoff: int
    unschedulable: int
    gated: int


class SchedulingQueue:
    """Priority queue of pending pods with backoff and event-driven requeueing."""

    def __init__(
        self,
        less: LessFn,
        clock: Clock,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        pre_enqueue: Callable[[PodInfo], Status | None] | None = None,
        hints_for: Callable[[Pod], HintTable] | None = None,
        nominator: PodNominator | None = None,
        sort_key: SortKeyFn | None = None,
    ) -> None:
        self._less = less
        # Must order pods exactly as ``less`` does (a test holds PrioritySort's two equal).
        self._sort_key = sort_key
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._pre_enqueue = pre_enqueue
        self._hints_for = hints_for
        self._active: list[_ActiveEntry] = []
        self._active_uids: dict[str, QueuedPodInfo] = {}
        self._active_sequence: dict[str, int] = {}  # which of a pod's heap entries is live (the last pushed)
        self._backoff: list[_BackoffEntry] = []
        self._backoff_uids: dict[str, QueuedPodInfo] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._parked = _ParkedByRejectors()
        # A profile's hint table, by scheduler name (the registrations never change once built).
        self._tables: dict[str, HintTable] = {}
        self._gated: set[str] = set()
        # Gated pods PreEnqueue held back after an attempt (not on arrival): parked, so events reach them.
        self._held_after_attempt: set[str] = set()
        self._in_flight: dict[str, int] = {}
        self._events: list[_Event] = []
        self._sequence = itertools.count(1)
        self._tiebreak = itertools.count()
        self._stamps = itertools.count(1)
        self.scheduling_cycle = 0
        self.incoming: dict[tuple[str, str], int] = {}
        self.nominator = nominator if nominator is not None else PodNominator()
        # Called whenever a pod enters activeQ or backoffQ: the run loop's wake-up.
        self.on_ready: Callable[[], None] | None = None

    # ---- adding pods -------------------------------------------------------------------------

    def add(self, pod_info: PodInfo) -> None:
        """A new pending pod (informer add); gated pods wait in the unschedulable pool."""
        qpi = QueuedPodInfo(pod_info, timestamp=self._clock.now(), stamp_order=next(self._stamps))
        self._enqueue_fresh(qpi, "PodAdd")

    def _enqueue_fresh(self, qpi: QueuedPodInfo, event: str) -> None:
        if self._run_pre_enqueue(qpi):
            self._push_active(qpi, event)
        else:
            self._unschedulable[qpi.pod_info.uid] = qpi
            self._gated.add(qpi.pod_info.uid)
            self._count("unschedulable", event)

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> bool:
        if self._pre_enqueue is None:
            return True
        status = self._pre_enqueue(qpi.pod_info)
        if status is None:
            qpi.gating_plugin = ""
            return True
        qpi.gating_plugin = status.plugin
        qpi.unschedulable_plugins = {status.plugin}
        return False

    def _passes_pre_enqueue_on_move(self, qpi: QueuedPodInfo) -> bool:
        """PreEnqueue for a pod moving into activeQ or backoffQ after an attempt (upstream's moveToActiveQ and
        moveToBackoffQ run the plugins; only a backoff's completion skips them). A pod held back keeps the
        plugins that rejected it besides the gating one: their hints decide when it is tried again, the gating
        plugin's PreEnqueue whether it may leave."""
        if self._pre_enqueue is None:
            return True
        status = self._pre_enqueue(qpi.pod_info)
        if status is None:
            qpi.gating_plugin = ""
            return True
        qpi.gating_plugin = status.plugin
        qpi.unschedulable_plugins = qpi.unschedulable_plugins | {status.plugin}
        return False

    def _park_gated(self, qpi: QueuedPodInfo, event: str) -> None:
        """A pod PreEnqueue held back on its way out of the unschedulable pool: parked there again, gated."""
        uid = qpi.pod_info.uid
        self._unschedulable[uid] = qpi
        self._gated.add(uid)
        self._held_after_attempt.add(uid)
        self._table(qpi.pod)
        self._parked.add(qpi)
        self._count("unschedulable", event)

    def _push_active(self, qpi: QueuedPodInfo, event: str) -> None:
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock.now()
        uid = qpi.pod_info.uid
        self._active_uids[uid] = qpi
        self._heap_push(qpi)
        self._count("active", event)
        if self.on_ready is not None:
            self.on_ready()

    def _heap_push(self, qpi: QueuedPodInfo) -> None:
        sequence = next(self._tiebreak)
        order = self._sort_key(qpi) if self._sort_key is not None else _LessOrder(qpi, self._less, sequence)
        self._active_sequence[qpi.pod_info.uid] = sequence
        heapq.heappush(self._active, (order, sequence, qpi))

    def _backoff_window(self, qpi: QueuedPodInfo) -> float:
        """The ordering window the pod's backoff ends in: its expiry truncated to the window (upstream's
        alignToWindow, with SchedulerPopFromBackoffQ)."""
        expiry = backoff_expiry(qpi, self._initial_backoff, self._max_backoff)
        return math.floor(expiry / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW

    def _backing_off(self, qpi: QueuedPodInfo) -> bool:
        """Upstream's isPodBackingoff: until the window after the one its backoff ends in has begun."""
        now_window = math.floor(self._clock.now() / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW
        return self._backoff_window(qpi) >= now_window

    def _push_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        sequence = next(self._tiebreak)
        error = 1 if qpi.consecutive_errors_count else 0
        # Within a window, pods leave in activeQ's order (upstream's lessBackoffCompletedWithPriority); pods
        # backing off after an error keep the order of their backoff times.
        order: object = sequence
        if not error:
            order = self._sort_key(qpi) if self._sort_key is not None else _LessOrder(qpi, self._less, sequence)
        self._backoff_uids[qpi.pod_info.uid] = qpi
        heapq.heappush(self._backoff, (self._backoff_window(qpi), error, order, sequence, qpi))
        self._count("backoff", event)
        if self.on_ready is not None:
            self.on_ready()

    def _count(self, queue: str, event: str) -> None:
        key = (queue, event)
        self.incoming[key] = self.incoming.get(key, 0) + 1

    # ---- popping -----------------------------------------------------------------------------

    def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, or None. Takes from backoffQ when activeQ is empty (1.33+)."""
        self.flush_backoff_completed()
        qpi = self._pop_active()
        if qpi is None:
            qpi = self._pop_backoff_head()
        if qpi is None:
            return None
        qpi.attempts += 1
        self.scheduling_cycle += 1
        uid = qpi.pod_info.uid
        # Re-inserted, never overwritten: the dict stays in ascending order of sequence, so its first value is
        # the oldest attempt in flight (read on every completion, see _trim_events).
        self._in_flight.pop(uid, None)
        self._in_flight[uid] = next(self._sequence)
        return qpi

    def _pop_active(self) -> QueuedPodInfo | None:
        while self._active:
            _, sequence, qpi = heapq.heappop(self._active)
            uid = qpi.pod_info.uid
            if self._active_uids.get(uid) is qpi and self._active_sequence.get(uid) == sequence:
                del self._active_uids[uid]
                del self._active_sequence[uid]
                return qpi
        return None

    def _pop_backoff_head(self) -> QueuedPodInfo | None:
        """The first pod in backoffQ's order among pods not backing off after an error."""
        skipped: list[_BackoffEntry] = []
        found: QueuedPodInfo | None = None
        while self._backoff:
            item = heapq.heappop(self._backoff)
            qpi = item[4]
            uid = qpi.pod_info.uid
            if self._backoff_uids.get(uid) is not qpi:
                continue
            if qpi.consecutive_errors_count:
                skipped.append(item)
                continue
            del self._backoff_uids[uid]
            found = qpi
            break
        for item in skipped:
            heapq.heappush(self._backoff, item)
        return found

    def flush_backoff_completed(self) -> None:
        while self._backoff and not self._backing_off(self._backoff[0][4]):
            qpi = heapq.heappop(self._backoff)[4]
            uid = qpi.pod_info.uid
            if self._backoff_uids.get(uid) is qpi:
                del self._backoff_uids[uid]
                self._push_active(qpi, "BackoffComplete")

    def flush_unschedulable_left_over(self) -> None:
        """Move pods unschedulable for more than 5 minutes (the UnschedulableTimeout event)."""
        now = self._clock.now()
        stale = [
            qpi
            for uid, qpi in self._unschedulable.items()
            if (uid not in self._gated or uid in self._held_after_attempt)
            and now - qpi.timestamp > POD_MAX_IN_UNSCHEDULABLE_SECONDS
        ]
        for qpi in stale:
            self._requeue(qpi, immediately=False, event=UNSCHEDULABLE_TIMEOUT.label)

    def next_backoff_expiry(self) -> float | None:
        """When the first backoff completes: the start of the window after the one it ends in."""
        live = [entry[0] for entry in self._backoff if self._backoff_uids.get(entry[4].pod_info.uid) is entry[4]]
        return min(live) + BACKOFF_ORDERING_WINDOW if live else None

    def next_error_backoff_expiry(self) -> float | None:
        """When the first pod backing off after an error may be popped (others are poppable at once)."""
        live = [
            entry[0]
            for entry in self._backoff
            if entry[4].consecutive_errors_count and self._backoff_uids.get(entry[4].pod_info.uid) is entry[4]
        ]
        return min(live) + BACKOFF_ORDERING_WINDOW if live else None

    # ---- failures and completion -------------------------------------------------------------

    def add_unschedulable_if_not_present(
        self, qpi: QueuedPodInfo, *, rejected_by: Iterable[str], pending: Iterable[str], error: bool
    ) -> None:
        """Requeue a pod whose attempt failed; events seen while it was in flight are replayed."""
        uid = qpi.pod_info.uid
        if uid in self._active_uids or uid in self._backoff_uids or uid in self._unschedulable:
            return
        # Pods failing in one virtual instant keep the order they failed in (QueuedPodInfo.stamp_order), as they
        # do in kube-scheduler whatever order events move them back in.
        qpi.timestamp, qpi.stamp_order = self._clock.now(), next(self._stamps)
        qpi.unschedulable_plugins = set(rejected_by)
        qpi.pending_plugins = set(pending)
        if error:
            qpi.consecutive_errors_count += 1
        else:
            qpi.consecutive_errors_count = 0
            qpi.unschedulable_count += 1
        started = self._in_flight.pop(uid, None)
        if error or not (qpi.unschedulable_plugins or qpi.pending_plugins):
            self._trim_events()
            if self._passes_pre_enqueue_on_move(qpi):
                self._push_backoff(qpi, "ScheduleAttemptFailure")
            else:
                self._park_gated(qpi, "ScheduleAttemptFailure")
            return
        hint = QueueingHint.SKIP
        immediately = False
        if started is not None:
            for sequence, event, old, new in self._events:
                if sequence > started:
                    decision, now = self._evaluate_hints(qpi, event, old, new)
                    if decision is QueueingHint.QUEUE:
                        hint = decision
                        immediately = immediately or now
        self._trim_events()
        if hint is QueueingHint.QUEUE:
            self._requeue(qpi, immediately=immediately, event="ScheduleAttemptFailure", fresh=True)
        else:
            self._unschedulable[uid] = qpi
            self._table(qpi.pod)  # looked up now, so events can be matched against it
            self._parked.add(qpi)
            self._count("unschedulable", "ScheduleAttemptFailure")

    def done(self, uid: str) -> None:
        """The pod's attempt ended (bound, or handed back through add_unschedulable_if_not_present)."""
        self._in_flight.pop(uid, None)
        self._trim_events()

    def _trim_events(self) -> None:
        if not self._in_flight:
            self._events.clear()
            return
        oldest = next(iter(self._in_flight.values()))
        events = self._events
        if events and events[0][0] <= oldest:
            # Events are appended in sequence order: the ones no attempt in flight can still need are a prefix.
            del events[: bisect.bisect_right(events, oldest, key=_sequence_of)]

    # ---- events ------------------------------------------------------------------------------

    def on_event(self, event: ClusterEvent, old: object = None, new: object = None) -> None:
        """A cluster event: requeue unschedulable pods whose rejecting plugins' hints say QUEUE. Only pods one of
        whose rejecting plugins registered the event are looked at (upstream's ``isEventOfInterest``, per
        group of pods rejected alike); the others' hints would all say SKIP."""
        if self._in_flight:
            self._events.append((next(self._sequence), event, old, new))
        for uid in self._parked.offered(event, self._may_requeue):
            qpi = self._unschedulable.get(uid)
            if qpi is None or (uid in self._gated and uid not in self._held_after_attempt):
                continue
            decision, immediately = self._evaluate_hints(qpi, event, old, new)
            if decision is QueueingHint.QUEUE:
                self._requeue(qpi, immediately=immediately, event=event.label)

    def _table(self, pod: Pod) -> HintTable:
        if self._hints_for is None:
            return {}
        name = pod.spec.scheduler_name
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = self._hints_for(pod)
        return table

    def _may_requeue(self, scheduler_name: str, rejectors: frozenset[str], event: ClusterEvent) -> bool:
        """Whether :meth:`_evaluate_hints` can say QUEUE for a pod of ``scheduler_name`` rejected by
        ``rejectors`` on ``event``: some rejector registered it (or registered nothing, i.e. everything)."""
        if event.resource is EventResource.WILDCARD or not rejectors:
            return True
        table = self._tables.get(scheduler_name)
        if table is None:
            return True  # not looked up yet: let the hints decide
        for plugin in rejectors:
            registrations = table.get(plugin)
            if registrations is None or any(r.event.matches(event) for r in registrations):
                return True
        return False

    def _evaluate_hints(
        self, qpi: QueuedPodInfo, event: ClusterEvent, old: object, new: object
    ) -> tuple[QueueingHint, bool]:
        """(decision, immediately): Queue from a Pending plugin skips backoff."""
        if event.resource is EventResource.WILDCARD:
            return QueueingHint.QUEUE, False
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors:
            return QueueingHint.QUEUE, False
        table = self._table(qpi.pod)
        queue_after_backoff = False
        for plugin in rejectors:
            registrations = table.get(plugin)
            if registrations is None:
                if plugin in qpi.pending_plugins:
                    return QueueingHint.QUEUE, True
                queue_after_backoff = True
                continue
            for registration in registrations:
                if not registration.event.matches(event):
                    continue
                hint = QueueingHint.QUEUE
                if registration.hint is not None:
                    try:
                        hint = registration.hint(qpi.pod, _as_obj(old), _as_obj(new))
                    except Exception:
                        log.exception("queueing hint of %s failed; requeueing %s", plugin, qpi.pod_info.key)
                        hint = QueueingHint.QUEUE
                if hint is QueueingHint.QUEUE:
                    if plugin in qpi.pending_plugins:
                        return QueueingHint.QUEUE, True
                    queue_after_backoff = True
        return (QueueingHint.QUEUE, False) if queue_after_backoff else (QueueingHint.SKIP, False)

    def _requeue(self, qpi: QueuedPodInfo, *, immediately: bool, event: str, fresh: bool = False) -> None:
        uid = qpi.pod_info.uid
        if not fresh:
            self._unschedulable.pop(uid, None)
            self._parked.remove(uid)
        if not self._passes_pre_enqueue_on_move(qpi):
            self._park_gated(qpi, event)
            return
        self._gated.discard(uid)
        self._held_after_attempt.discard(uid)
        if immediately or not self._backing_off(qpi):
            self._push_active(qpi, event)
        else:
            self._push_backoff(qpi, event)

    def activate(self, uids: Iterable[str]) -> None:
        """Move the named pods from the unschedulable pool or backoffQ straight to activeQ."""
        for uid in uids:
            qpi = self._unschedulable.pop(uid, None) or self._backoff_uids.pop(uid, None)
            if qpi is None:
                continue
            if uid in self._gated and uid not in self._held_after_attempt:
                self._unschedulable[uid] = qpi  # held since it arrived: only its own update frees it
                continue
            self._parked.remove(uid)
            # As moveToActiveQ: PreEnqueue decides whether it may leave.
            if not self._passes_pre_enqueue_on_move(qpi):
                self._park_gated(qpi, FORCE_ACTIVATE.label)
                continue
            self._gated.discard(uid)
            self._held_after_attempt.discard(uid)
            self._push_active(qpi, FORCE_ACTIVATE.label)

    # ---- pod updates and deletes -------------------------------------------------------------

    def update(self, pod_info: PodInfo, action: ActionType = ActionType.UPDATE) -> None:
        """A pending pod changed (``action``: what changed): refresh it where it waits; gated pods re-run
        PreEnqueue; an unschedulable pod moves if a rejecting plugin's hint says the change may help. No action (0)
        is a change no plugin can depend on (a status patch, the scheduler's own included): the pod is refreshed
        and stays where it is."""
        uid = pod_info.uid
        active = self._active_uids.get(uid)
        if active is not None:
            key_of = self._sort_key
            before = key_of(active) if key_of is not None else None
            active.pod_info = pod_info
            if key_of is not None and key_of(active) != before:
                self._heap_push(active)  # its old entry, out of order now, is skipped when popped
            return
        if uid in self._backoff_uids:
            self._backoff_uids[uid].pod_info = pod_info
            return
        qpi = self._unschedulable.get(uid)
        if qpi is None:
            if uid not in self._in_flight:
                self.add(pod_info)
            return
        old_pod = qpi.pod
        qpi.pod_info = pod_info
        if uid in self._gated:
            if self._run_pre_enqueue(qpi):
                self._gated.discard(uid)
                del self._unschedulable[uid]
                self._push_active(qpi, "UnscheduledPodUpdate")
            return
        if not action:
            return
        decision, immediately = self._evaluate_hints(
            qpi,
            ClusterEvent(EventResource.UNSCHEDULED_POD, action, "UnscheduledPodUpdate"),
            old_pod,
            pod_info.pod,
        )
        if decision is QueueingHint.QUEUE:
            self._requeue(qpi, immediately=immediately, event="UnscheduledPodUpdate")

    def delete(self, uid: str) -> None:
        self._active_uids.pop(uid, None)
        self._active_sequence.pop(uid, None)
        self._backoff_uids.pop(uid, None)
        self._unschedulable.pop(uid, None)
        self._parked.remove(uid)
        self._gated.discard(uid)
        self._held_after_attempt.discard(uid)
        self._in_flight.pop(uid, None)

    def is_gated(self, uid: str) -> bool:
        """Whether the pod waits in the unschedulable pool because a PreEnqueue plugin holds it back."""
        return uid in self._gated

    def __contains__(self, uid: object) -> bool:
        return uid in self._active_uids or uid in self._backoff_uids or uid in self._unschedulable

    def counts(self) -> QueueCounts:
        gated = len(self._gated)
        return QueueCounts(
            active=len(self._active_uids),
            backoff=len(self._backoff_uids),
            unschedulable=len(self._unschedulable) - gated,
            gated=gated,
        )

    def has_ready_work(self) -> bool:
        """Pods that a pop would return right now."""
        return bool(self._active_uids) or any(not qpi.consecutive_errors_count for qpi in self._backoff_uids.values())


def _as_obj(value: object) -> Pod | Node | PolicyRevision | None:
    return value if isinstance(value, Pod | Node | PolicyRevision) else None
