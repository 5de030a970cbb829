"""Named shared services and background work: what the runtime hands plugins besides the cluster state.

:class:`Services` holds one instance per (kind, spec): every plugin asking for the policy engine of equal
args gets the same client (one connection pool or worker, one revision). The scheduler registers the
factories (it may import the implementations; plugins and the framework may not) and closes the
instances at shutdown.

:class:`BackgroundTasks` runs the work plugins spawn through the Handle (a Permit approval check, a file
reload): each task is tracked, a failure is logged and never raised into the scheduler, and sleeps go
through the injected clock so that a simulation on virtual time knows which tasks merely wait for time to
pass.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine, Hashable, Mapping
from typing import Any

from kubesched.clock import Clock

log = logging.getLogger(__name__)

ServiceFactory = Callable[[Hashable], object]


class Services:
    """Instances by (kind, spec), created on first request by the kind's factory."""

    def __init__(self, factories: Mapping[str, ServiceFactory] | None = None) -> None:
        self._factories: dict[str, ServiceFactory] = dict(factories or {})
        self._instances: dict[tuple[str, Hashable], object] = {}
        # Counts every change of the instances, so that a caller may keep what it derived from them until then.
        self.generation = 0

    def register(self, kind: str, factory: ServiceFactory) -> None:
        self._factories[kind] = factory

    def get(self, kind: str, spec: Hashable) -> object:
        key = (kind, spec)
        instance = self._instances.get(key)
        if instance is None:
            factory = self._factories.get(kind)
            if factory is None:
                known = ", ".join(sorted(self._factories)) or "none"
                raise KeyError(f"no service of kind {kind!r} is provided (provided: {known})")
            instance = self._instances[key] = factory(spec)
            self.generation += 1
        return instance

    def __len__(self) -> int:
        return len(self._instances)

    def instances(self, kind: str) -> list[tuple[Hashable, object]]:
        """The (spec, instance) pairs of ``kind`` created so far."""
        return [(spec, instance) for (found, spec), instance in self._instances.items() if found == kind]

    async def aclose(self) -> None:
        instances, self._instances = list(self._instances.items()), {}
        self.generation += 1
        for (kind, _), instance in instances:
            await close_quietly(instance, f"{kind} service {type(instance).__name__}")


async def close_quietly(resource: object, what: str) -> None:
    """``aclose()`` (awaited) or ``close()`` of ``resource`` if it has one; a failure is logged, not raised."""
    closer = getattr(resource, "aclose", None) or getattr(resource, "close", None)
    if closer is None:
        return
    try:
        outcome = closer()
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        log.exception("closing %s failed", what)


class BackgroundTasks:
    """Tracked asyncio tasks for plugins' background work; sleeps are on the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._sleeping: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str | None = None) -> asyncio.Task[None]:
        # The task runs ``work`` itself (a wrapper cancelled before its first step, at shutdown, would leave
        # ``work`` never awaited); its failure is logged when it is done.
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("background work of a plugin failed", exc_info=error)

    async def sleep(self, seconds: float) -> None:
        """Sleep on the clock; with a virtual clock the simulation jumps to the wake-up time."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        task = asyncio.current_task()

        def wake() -> None:
            # Runnable from the moment the timer fires, before the loop gets to it: a simulation must not
            # move the clock on while this task still has work to do at this time.
            if task is not None:
                self._sleeping.discard(task)
            if not woken.done():
                woken.set_result(None)

        handle = self.clock.call_later(seconds, wake)
        if task is not None:
            self._sleeping.add(task)
        try:
            await woken
        finally:
            handle.cancel()
            if task is not None:
                self._sleeping.discard(task)

    def sleeping(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` (any task, a binding cycle's too) is asleep in :meth:`sleep`, waiting on the clock."""
        return task in self._sleeping

    def busy(self) -> bool:
        """Whether some task can make progress without the clock moving (it runs, or awaits real I/O)."""
        return any(not task.done() and task not in self._sleeping for task in self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
