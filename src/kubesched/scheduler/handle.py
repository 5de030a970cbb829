"""The Handle each profile's plugins receive: a narrow window onto the scheduler's services.

Plugins never import the scheduler, its queue or cache (DESIGN rule 1); they reach the snapshot,
waiting pods, activation, events, the API client and the clock through this object.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from kubesched.api.objects import Pod
from kubesched.clock import Clock
from kubesched.framework.interface import ClusterClient, EventRecorder, WaitingPod
from kubesched.framework.snapshot import Snapshot

if TYPE_CHECKING:
    from kubesched.scheduler.scheduler import Scheduler


class ProfileHandle:
    def __init__(self, scheduler: Scheduler, profile_name: str) -> None:
        self._scheduler = scheduler
        self._profile_name = profile_name

    @property
    def profile_name(self) -> str:
        return self._profile_name

    @property
    def clock(self) -> Clock:
        return self._scheduler.clock

    @property
    def client(self) -> ClusterClient:
        return self._scheduler.backend

    @property
    def event_recorder(self) -> EventRecorder:
        return self._scheduler.backend

    def snapshot(self) -> Snapshot:
        return self._scheduler.cache.snapshot()

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]:
        return iter(self._scheduler.waiting_pods)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._scheduler.waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        entry = self._scheduler.waiting_pods.get(uid)
        if entry is None:
            return False
        entry.reject("", "removed")
        return True

    def activate(self, pods: Iterable[Pod]) -> None:
        self._scheduler.queue.activate(pod.metadata.uid for pod in pods)

    def get_pod(self, uid: str) -> Pod | None:
        return self._scheduler.pending_pod(uid)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._scheduler.spawn(work)

    async def sleep(self, seconds: float) -> None:
        await self._scheduler.sleep(seconds)
