"""The kube backend: the scheduler's :class:`~kubesched.backends.base.Backend` over a real API server.

``kubesched run`` builds one per process: :meth:`KubeBackend.subscribe` (the scheduler's event handlers) then
:meth:`start` (informers and writer tasks), waits for :meth:`wait_synced`, and only then schedules. Writes:

* ``bind``: ``POST pods/NAME/binding`` with the pod's UID as precondition, as DefaultBinder does; a queued
  or in-flight status patch of the pod is settled first (:meth:`StatusWriter.supersede`). A 409 (already
  assigned, or another pod now has the name) fails the bind: the scheduler forgets the assumed pod, and the
  informer shows where the pod went.
* ``event`` and ``set_pod_condition``: queued to the writers (never awaited by the cycle).
* ``preempt`` (DefaultPreemption's evictions, awaited in its background work, never by the cycle): the
  victim's status gets the ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) by a
  strategic-merge patch, then the pod is deleted with its UID as precondition; a victim already gone (404)
  is evicted as far as the preemptor is concerned, as upstream treats NotFound.
* ``clear_nominated_node_name``: a status patch setting ``nominatedNodeName`` to null (404 ignored).

An object the informers cannot decode is reported where its owner can see it: a pod gets a Warning event
``FailedScheduling`` saying which field is wrong (it cannot be scheduled), any other object a log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.api.objects import DEFAULT_SCHEDULER_NAME, ObjectMeta, Pod, PodSpec, PodStatus
from kubesched.api.packed import pack
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim
from kubesched.backends.base import ClusterEventHandler
from kubesched.backends.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeClient
from kubesched.backends.kube.errors import KubeApiError
from kubesched.backends.kube.informers import Informers
from kubesched.backends.kube.writers import EventWriter, StatusWriter, rfc3339
from kubesched.clock import Clock
from kubesched.framework.interface import ApiError
from kubesched.framework.listers import Listers, ListerStores

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 5


class KubeBackend:
    def __init__(
        self,
        client: KubeClient,
        scheduler_names: list[str],
        *,
        clock: Clock | None = None,
        hostname: str | None = None,
        watch_timeout: tuple[int, int] | None = None,
    ) -> None:
        self.client = client
        self.scheduler_names = scheduler_names
        self._now = clock.now if clock is not None else time.time
        self.stores = ListerStores()
        self.events = EventWriter(client, hostname=hostname, clock=clock)
        self.statuses = StatusWriter(client, clock=clock)
        self._watch_timeout = watch_timeout
        self.informers: Informers | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.invalid_objects = 0

    @property
    def listers(self) -> Listers:
        return self.stores.listers()

    def subscribe(self, handler: ClusterEventHandler) -> None:
        if self.informers is not None:
            raise RuntimeError("the kube backend serves one scheduler")
        self.informers = Informers(
            self.client,
            self.scheduler_names,
            self.stores,
            handler,
            self._on_invalid,
            watch_timeout=self._watch_timeout,
        )

    def start(self) -> None:
        if self.informers is None:
            raise RuntimeError("subscribe the scheduler before starting the backend")
        self.informers.start()
        self._tasks.append(asyncio.create_task(self.events.run(), name="event writer"))
        self._tasks.append(asyncio.create_task(self.statuses.run(), name="status writer"))

    @property
    def synced(self) -> bool:
        return self.informers is not None and self.informers.synced

    async def wait_synced(self) -> None:
        if self.informers is None:
            raise RuntimeError("subscribe the scheduler before waiting for the informers")
        await self.informers.wait_synced()

    async def aclose(self, *, drain_seconds: float = 5.0) -> None:
        """Stop the informers, write what is queued (for at most ``drain_seconds``; 0 after losing the Lease:
        another replica writes now), close the client."""
        if self.informers is not None:
            await self.informers.aclose()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if drain_seconds <= 0:
            await self.statuses.abandon()
        else:
            try:
                async with asyncio.timeout(drain_seconds):
                    await self.statuses.drain()
                    await self.events.drain()
            except TimeoutError:
                log.warning("shutting down with events or pod conditions not written")
        client = self.client
        log.info(
            "API client: %d requests, %d retried, %d connections opened",
            client.requests_sent,
            client.retries,
            client.connections_opened,
        )
        await client.aclose()

    # ---- writes the scheduler makes ----------------------------------------------------------

    async def bind(self, pod: Pod, node_name: str) -> None:
        await self.statuses.supersede(pod.metadata.uid)
        namespace, name = pod.metadata.namespace, pod.metadata.name
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"namespace": namespace, "name": name, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self.client.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body)

    async def preempt(self, victim: Pod, preemptor: Pod) -> None:
        namespace, name = victim.metadata.namespace, victim.metadata.name
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        condition = disruption_target_condition(victim, preemptor, rfc3339(self._now()))
        if condition is not None:
            try:
                await self.client.request(
                    "PATCH",
                    path + "/status",
                    body={"status": {"conditions": [condition]}},
                    content_type=STRATEGIC_MERGE_PATCH,
                )
            except KubeApiError as error:
                if error.status == 404:
                    return
                raise
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.metadata.uid}}
        try:
            await self.client.request("DELETE", path, body=options)
        except KubeApiError as error:
            if error.status == 404:
                return
            raise

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        if not pod.status.nominated_node_name:
            return
        path = f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}/status"
        try:
            await self.client.request(
                "PATCH", path, body={"status": {"nominatedNodeName": None}}, content_type=STRATEGIC_MERGE_PATCH
            )
        except KubeApiError as error:
            if error.status == 404:
                return
            raise

    async def compare_and_set_annotation(self, pod: Pod, key: str, expected: str | None, value: str) -> bool:
        # Read, compare, write with the read's resourceVersion: a write in between (a status patch, another hub's
        # record) is a 409, after which the pod is read again.
        path = f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}"
        for _ in range(CAS_ATTEMPTS):
            try:
                current = await self.client.request("GET", path)
            except KubeApiError as error:
                raise ApiError(f"reading pod {pod.key}: {error}") from error
            metadata = current.get("metadata") or {}
            if metadata.get("uid") != pod.metadata.uid:
                raise ApiError(f'pods "{pod.metadata.name}" not found (uid {pod.metadata.uid})')
            if (metadata.get("annotations") or {}).get(key) != expected:
                return False
            patch = {"metadata": {"resourceVersion": metadata.get("resourceVersion"), "annotations": {key: value}}}
            try:
                await self.client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
            except KubeApiError as error:
                if error.status == 409:
                    continue
                raise ApiError(f"annotating pod {pod.key}: {error}") from error
            return True
        raise ApiError(f"annotating pod {pod.key}: it kept changing ({CAS_ATTEMPTS} conflicts)")

    async def bind_volumes(
        self,
        pod: Pod,
        node_name: str,
        bindings: Sequence[tuple[PersistentVolume, PersistentVolumeClaim]],
        provisions: Sequence[PersistentVolumeClaim],
    ) -> None:
        # Upstream updates each PV's claimRef and each claim's selected-node annotation, then polls until the
        # PV controller has bound them (bindTimeoutSeconds). kubesched does not write volumes or claims yet:
        # refuse loudly (the pod's cycle fails with this error and is retried) rather than bind the pod to a
        # node its volumes were never bound for.
        wanted = [pvc.key for _, pvc in bindings] + [pvc.key for pvc in provisions]
        raise ApiError(
            f"live volume binding is not supported by kubesched yet (pod {pod.key} needs claims "
            f"{', '.join(wanted)} bound on node {node_name!r})"
        )

    def event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        self.events.record(pod, event_type, reason, action, message)

    def set_pod_condition(self, pod: Pod, reason: str, message: str, nominated_node_name: str | None) -> None:
        self.statuses.request(pod, reason, message, nominated_node_name)

    # ---- objects that do not decode ----------------------------------------------------------

    def _on_invalid(self, kind: str, raw: Mapping[str, Any], error: Exception) -> None:
        self.invalid_objects += 1
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        log.warning("%s %s/%s cannot be read and is ignored: %s", kind, namespace, name, error)
        if kind != "pods" or not name or not meta.get("uid"):
            return
        spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        scheduler_name = spec.get("schedulerName")
        reference = Pod(
            metadata=ObjectMeta(name=name, namespace=namespace or "default", uid=str(meta["uid"])),
            spec=PodSpec(
                containers=(),
                scheduler_name=scheduler_name if isinstance(scheduler_name, str) else DEFAULT_SCHEDULER_NAME,
            ),
            status=PodStatus(),
            manifest=pack(raw),
        )
        if reference.spec.scheduler_name in self.scheduler_names and not spec.get("nodeName"):
            message = f"kubesched cannot read the pod: {error}"
            self.event(reference, "Warning", "FailedScheduling", "Scheduling", message)


def disruption_target_condition(victim: Pod, preemptor: Pod, now: str) -> dict[str, Any] | None:
    """The condition a preemption victim gets before it is deleted (upstream's message), or None when the
    victim already has it (apimachinery's UpdatePodCondition would change nothing, so nothing is sent)."""
    condition: dict[str, Any] = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{preemptor.spec.scheduler_name}: preempting to accommodate a higher priority pod",
    }
    current = next((c for c in victim.status.conditions if c.get("type") == "DisruptionTarget"), None)
    if current is not None and all(current.get(key) == value for key, value in condition.items()):
        return None
    if victim.metadata.generation:
        condition["observedGeneration"] = victim.metadata.generation
    same_status = current is not None and current.get("status") == "True"
    condition["lastProbeTime"] = None
    condition["lastTransitionTime"] = (current.get("lastTransitionTime") if same_status and current else None) or now
    return condition
