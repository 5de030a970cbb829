"""Pods held at Permit: one future per pod, one timer per plugin that asked it to wait.

The scheduling cycle registers a waiting pod when a Permit plugin returns WAIT; the binding cycle
awaits its future (WaitOnPermit). Plugins allow or reject it through the Handle, from anywhere on the
event loop; a plugin's timer expiring rejects it with kube-scheduler's timeout message.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator, Mapping

from kubesched.clock import Clock, TimerHandle
from kubesched.durations import format_seconds
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo


class WaitingPodEntry:
    """A pod waiting at Permit until every waiting plugin allows it, one rejects it, or a timer fires."""

    def __init__(self, pod: PodInfo, node_name: str, timeouts: Mapping[str, float], clock: Clock) -> None:
        self._pod = pod
        self._node_name = node_name
        self._future: asyncio.Future[Status | None] = asyncio.get_running_loop().create_future()
        self._timers: dict[str, TimerHandle] = {}
        for plugin, timeout in timeouts.items():
            self._timers[plugin] = clock.call_later(timeout, functools.partial(self._timed_out, plugin, timeout))

    @property
    def pod(self) -> PodInfo:
        return self._pod

    @property
    def node_name(self) -> str:
        return self._node_name

    @property
    def done(self) -> bool:
        return self._future.done()

    def pending_plugins(self) -> list[str]:
        return list(self._timers)

    def allow(self, plugin: str) -> None:
        timer = self._timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if not self._timers and not self._future.done():
            self._future.set_result(None)

    def _timed_out(self, plugin: str, timeout: float) -> None:
        # The message is made here, not with the timer: most waits end before their timeout.
        self.reject(plugin, f"rejected due to timeout after waiting {format_seconds(timeout)} at plugin {plugin}")

    def reject(self, plugin: str, message: str) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not self._future.done():
            self._future.set_result(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    async def wait(self) -> Status | None:
        return await self._future


class WaitingPods:
    """The waiting-pod map, keyed by pod UID."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPodEntry] = {}

    def add(self, entry: WaitingPodEntry) -> None:
        self._pods[entry.pod.uid] = entry

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPodEntry | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPodEntry]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods
