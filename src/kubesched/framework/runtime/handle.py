"""The Handle's accessors over what the scheduler provides, shared by the framework runtime and any other handle.

:class:`FrameworkContext` is what the scheduler gives every framework it builds (one per scheduler, shared
by all profiles): clock, API client, event recorder, nominator, waiting pods, the cycle's snapshot, the
latest version of pending pods, the activator, background tasks, named services and the listers.
:class:`ContextHandle` implements the Handle's accessors over a context;
:class:`~kubesched.framework.runtime.framework.Framework` adds the plugin runners. A handle for a plugin
alone (a test's, say) subclasses :class:`ContextHandle` over a context of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod
from kubesched.clock import Clock
from kubesched.framework.interface import ClusterClient, EventRecorder, PodNominator, WaitingPod
from kubesched.framework.listers import Listers
from kubesched.framework.runtime.services import BackgroundTasks, Services
from kubesched.framework.runtime.waiting_pods import WaitingPods
from kubesched.framework.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class FrameworkContext:
    """What the scheduler gives every framework it builds: shared by all profiles of one scheduler."""

    clock: Clock
    client: ClusterClient
    event_recorder: EventRecorder
    nominator: PodNominator
    waiting_pods: WaitingPods
    snapshot: Callable[[], Snapshot]
    get_pod: Callable[[str], Pod | None]
    activate: Callable[[Iterable[str]], None]
    tasks: BackgroundTasks
    services: Services
    listers: Listers


class ContextHandle:
    """The Handle's accessors (everything but the plugin runners) over a :class:`FrameworkContext`."""

    def __init__(self, context: FrameworkContext, profile_name: str) -> None:
        self.context = context
        self.profile_name = profile_name
        self.waiting_pods = context.waiting_pods

    @property
    def clock(self) -> Clock:
        return self.context.clock

    @property
    def client(self) -> ClusterClient:
        return self.context.client

    @property
    def event_recorder(self) -> EventRecorder:
        return self.context.event_recorder

    @property
    def nominator(self) -> PodNominator:
        return self.context.nominator

    def snapshot(self) -> Snapshot:
        return self.context.snapshot()

    @property
    def listers(self) -> Listers:
        return self.context.listers

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]:
        return iter(self.waiting_pods)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        entry = self.waiting_pods.get(uid)
        if entry is None:
            return False
        entry.reject("", "removed")
        return True

    def activate(self, pods: Iterable[Pod]) -> None:
        self.context.activate(pod.metadata.uid for pod in pods)

    def get_pod(self, uid: str) -> Pod | None:
        return self.context.get_pod(uid)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self.context.tasks.spawn(work)

    async def sleep(self, seconds: float) -> None:
        await self.context.tasks.sleep(seconds)

    def service(self, kind: str, spec: Hashable) -> object:
        return self.context.services.get(kind, spec)

    def observe_preemption_attempt(self) -> None:
        """No metrics here; the framework runtime overrides this when it has a recorder."""

    def observe_preemption_victims(self, victims: int) -> None:
        """No metrics here; the framework runtime overrides this when it has a recorder."""
