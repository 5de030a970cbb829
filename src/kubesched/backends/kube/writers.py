"""The writes kube-scheduler makes besides the binding: Events and the pod's PodScheduled condition.

The scheduler calls :class:`~kubesched.backends.kube.backend.KubeBackend`'s ``event`` and
``set_pod_condition`` synchronously from its cycles; they only queue here, and the writer tasks make the
calls, so the cycle never waits for the API server (docs/explanation/cycle-boundary.md#inside-the-cycle).

Events (:class:`EventWriter`) are events.k8s.io/v1, as kube-scheduler's recorder writes them: the profile's
scheduler name is ``reportingController``, ``<controller>-<hostname>`` the ``reportingInstance``, the note at
most 1024 characters; up to :data:`EVENT_WRITERS` are written at once, those of one key in order. Repeats
are aggregated into a series the way client-go's event broadcaster does: the first event with a key
(regarding object, reason, action, reporting controller) is created; the second turns it into a series with
``count: 2`` at once; later ones only count, and every
:data:`SERIES_REFRESH_SECONDS` the series that grew are patched; a key not seen for
:data:`SERIES_FINISH_SECONDS` starts afresh. At most :data:`EVENT_QUEUE_LIMIT` events wait; more are dropped
and counted (kube-scheduler's broadcaster drops too), never blocking scheduling.

Conditions (:class:`StatusWriter`): ``PodScheduled=False`` with the reason and message, and
``status.nominatedNodeName``, by a strategic-merge patch of ``pods/NAME/status``, skipped when the pod already
says exactly that. Only the latest wanted status of a pod is kept (a newer failure replaces an older one not
yet written), and a binding supersedes it: :meth:`StatusWriter.supersede` drops the pod's queued patch and
waits for one in flight, so a patch never lands on a pod after its binding.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod
from kubesched.backends.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.clock import Clock
from kubesched.framework.interface import truncate_event_message

log = logging.getLogger(__name__)

SERIES_REFRESH_SECONDS = 30.0
SERIES_FINISH_SECONDS = 360.0
EVENT_QUEUE_LIMIT = 1000
# Events written at once: one at a time could not keep up with the bindings (~70 % of Scheduled events were
# dropped at 170 pods/s through a real API server); kube-scheduler's broadcaster writes each in a goroutine.
EVENT_WRITERS = 16


def micro_time(stamp: float) -> str:
    """A metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_reference(pod: Pod) -> dict[str, str]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": pod.metadata.namespace,
        "name": pod.metadata.name,
        "uid": pod.metadata.uid,
    }


@dataclass(slots=True)
class _Series:
    body: dict[str, Any]  # the Event as created
    name: str
    count: int
    last_observed: float
    patched_count: int  # the count the server has


class EventWriter:
    """Queues Events and writes them with series aggregation (module doc). ``clock`` is seconds since epoch."""

    def __init__(self, client: KubeClient, *, hostname: str | None = None, clock: Clock | None = None) -> None:
        self.client = client
        self.hostname = hostname or socket.gethostname()
        self._now = clock.now if clock is not None else time.time
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(EVENT_QUEUE_LIMIT)
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        # One lock per series key: events of one key are written in order (a create before its series patch),
        # events of different keys at once.
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}
        self.dropped = 0
        self.written = 0
        self.failed = 0

    def record(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        controller = pod.spec.scheduler_name
        now = self._now()
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{pod.metadata.name}.{int(now * 1e9):x}", "namespace": pod.metadata.namespace},
            "eventTime": micro_time(now),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{self.hostname}",
            "action": action,
            "reason": reason,
            "regarding": pod_reference(pod),
            "note": truncate_event_message(message),
            "type": event_type,
        }
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    @staticmethod
    def _key(event: Mapping[str, Any]) -> tuple[str, ...]:
        regarding = event["regarding"]
        return (
            event["action"],
            event["reason"],
            event["reportingController"],
            regarding["namespace"],
            regarding["name"],
            regarding["uid"],
        )

    async def run(self) -> None:
        """Write queued events until cancelled, :data:`EVENT_WRITERS` at a time (events of one key in order);
        patch grown series every SERIES_REFRESH_SECONDS."""
        workers = [asyncio.create_task(self._work(), name=f"event writer {i}") for i in range(EVENT_WRITERS)]
        try:
            while True:
                await asyncio.sleep(SERIES_REFRESH_SECONDS)
                await self.refresh()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            await self._write(await self._queue.get())

    async def drain(self) -> None:
        """Write what is queued now and the series not yet patched (on shutdown, and in tests)."""
        queued = []
        while not self._queue.empty():
            queued.append(self._queue.get_nowait())
        await asyncio.gather(*(self._write(event) for event in queued))  # the locks keep each key's order
        await self.refresh()

    def _lock(self, key: tuple[str, ...]) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _write(self, event: dict[str, Any]) -> None:
        key = self._key(event)
        lock = self._lock(key)
        async with lock:
            await self._write_now(event, key)
        if key not in self._series and not lock.locked():
            self._locks.pop(key, None)  # the create failed: nothing to serialise any more

    async def _write_now(self, event: dict[str, Any], key: tuple[str, ...]) -> None:
        now = self._now()
        self._finish_old_series(now)
        series = self._series.get(key)
        if series is None:
            if await self._create(event):
                self._series[key] = _Series(event, event["metadata"]["name"], 1, now, 1)
            return
        series.count += 1
        series.last_observed = now
        self._series.move_to_end(key)
        if series.count == 2:
            await self._patch_series(series)

    def _finish_old_series(self, now: float) -> None:
        while self._series:
            key, oldest = next(iter(self._series.items()))
            if now - oldest.last_observed < SERIES_FINISH_SECONDS:
                break
            del self._series[key]
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]

    async def refresh(self) -> None:
        for key, series in list(self._series.items()):
            if series.count > 1 and series.count != series.patched_count:
                async with self._lock(key):
                    if series.count != series.patched_count:
                        await self._patch_series(series)

    async def _create(self, event: dict[str, Any]) -> bool:
        namespace = event["metadata"]["namespace"]
        try:
            await self.client.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=event)
        except (KubeApiError, KubeTransportError) as error:
            if isinstance(error, KubeApiError) and error.status == 409 and error.reason == "AlreadyExists":
                # Our names are unique: it is our own create, whose answer was lost and the client sent again.
                self.written += 1
                return True
            self.failed += 1
            log.warning("event %s/%s not written: %s", namespace, event["metadata"]["name"], error)
            return False
        self.written += 1
        return True

    async def _patch_series(self, series: _Series) -> None:
        namespace = series.body["metadata"]["namespace"]
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(series.last_observed)}}
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{series.name}"
        try:
            await self.client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        except KubeApiError as error:
            if error.status == 404:  # the event expired on the server: start the series again
                body = {**series.body, "series": patch["series"]}
                if await self._create(body):
                    series.patched_count = series.count
                return
            self.failed += 1
            log.warning("event series %s/%s not updated: %s", namespace, series.name, error)
            return
        except KubeTransportError as error:
            self.failed += 1
            log.warning("event series %s/%s not updated: %s", namespace, series.name, error)
            return
        series.patched_count = series.count
        self.written += 1


@dataclass(slots=True)
class _WantedStatus:
    pod: Pod
    reason: str
    message: str
    nominated_node_name: str | None


class StatusWriter:
    """Queues PodScheduled=False conditions and writes the latest one per pod (module doc)."""

    def __init__(self, client: KubeClient, *, clock: Clock | None = None) -> None:
        self.client = client
        self._now = clock.now if clock is not None else time.time
        self._wanted: OrderedDict[str, _WantedStatus] = OrderedDict()
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self.written = 0
        self.skipped = 0
        self.failed = 0

    def request(self, pod: Pod, reason: str, message: str, nominated_node_name: str | None) -> None:
        self._wanted[pod.metadata.uid] = _WantedStatus(pod, reason, message, nominated_node_name)
        self._wanted.move_to_end(pod.metadata.uid)
        self._wake.set()

    async def supersede(self, uid: str) -> None:
        """A binding is about to be sent: forget the pod's queued status; wait for one being written."""
        self._wanted.pop(uid, None)
        task = self._in_flight.get(uid)
        if task is not None:
            await asyncio.wait({task})

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._wanted:
                uid, wanted = self._wanted.popitem(last=False)
                task = asyncio.create_task(self._write(wanted))
                self._in_flight[uid] = task
                try:
                    await asyncio.shield(task)
                finally:
                    self._in_flight.pop(uid, None)

    async def abandon(self) -> None:
        """Forget what is queued and cancel what is being written (leadership was lost: another replica writes)."""
        self._wanted.clear()
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def drain(self) -> None:
        await asyncio.gather(*self._in_flight.values(), return_exceptions=True)
        while self._wanted:
            _, wanted = self._wanted.popitem(last=False)
            await self._write(wanted)

    def patch_for(self, wanted: _WantedStatus) -> dict[str, Any] | None:
        """The strategic-merge patch that makes the pod say ``wanted``; None when it already does."""
        pod = wanted.pod
        current = next((c for c in pod.status.conditions if c.get("type") == "PodScheduled"), None)
        condition: dict[str, Any] = {
            "type": "PodScheduled",
            "status": "False",
            "reason": wanted.reason,
            "message": wanted.message,
        }
        nominated_changes = (
            wanted.nominated_node_name is not None and wanted.nominated_node_name != pod.status.nominated_node_name
        )
        unchanged = current is not None and all(current.get(k) == v for k, v in condition.items())
        if unchanged and not nominated_changes:
            return None
        same_status = current is not None and current.get("status") == "False"
        condition["lastProbeTime"] = None
        condition["lastTransitionTime"] = (
            current.get("lastTransitionTime") if same_status and current else None
        ) or rfc3339(self._now())
        status: dict[str, Any] = {"conditions": [condition]}
        if nominated_changes:
            status["nominatedNodeName"] = wanted.nominated_node_name or None
        return {"status": status}

    async def _write(self, wanted: _WantedStatus) -> None:
        patch = self.patch_for(wanted)
        pod = wanted.pod
        if patch is None:
            self.skipped += 1
            return
        path = f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}/status"
        try:
            await self.client.request("PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
        except KubeApiError as error:
            if error.status != 404:  # a pod deleted meanwhile needs no condition
                self.failed += 1
                log.warning("status of pod %s not updated: %s", pod.key, error)
            return
        except KubeTransportError as error:
            self.failed += 1
            log.warning("status of pod %s not updated: %s", pod.key, error)
            return
        self.written += 1
