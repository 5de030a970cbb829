"""Injectable time: a real clock for live runs and a virtual clock for simulation and tests.

Queue backoff, the unschedulable-pool flush, Permit timeouts and refreshers all ask a :class:`Clock`
for the time and schedule their timers on it. The virtual clock never sleeps: the simulation advances
it to the next timer when nothing else can make progress, so a 15-minute Permit timeout is instant.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (virtual or real)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


class RealClock:
    """Wall-clock time; timers run on the running asyncio loop."""

    def now(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)


class _VirtualTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """Time that moves only when told to; timers fire in order as it is advanced."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _VirtualTimer]] = []
        self._sequence = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _VirtualTimer(self._now + max(delay, 0.0), callback)
        heapq.heappush(self._timers, (timer.when, next(self._sequence), timer))
        return timer

    def next_deadline(self) -> float | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def advance_to(self, when: float) -> int:
        """Move time to ``when``, firing every timer due by then; returns how many fired."""
        fired = 0
        while self._timers and self._timers[0][0] <= when:
            _, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, timer.when)
            timer.callback()
            fired += 1
        self._now = max(self._now, when)
        return fired

    def advance(self, seconds: float) -> int:
        return self.advance_to(self._now + seconds)


async def sleep(clock: Clock, seconds: float) -> None:
    """Sleep ``seconds`` on ``clock``: a real clock sleeps, a virtual one wakes the sleeper when it is advanced
    past the end (background refreshers and sweepers wait this way, so tests run them on virtual time)."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    timer = clock.call_later(seconds, wake)
    try:
        await future
    finally:
        timer.cancel()
