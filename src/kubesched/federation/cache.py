"""The hub's cluster state cache: every member's state refreshed in the background, served without I/O.

Who calls it: a live multi-cluster scheduler provides it as the Handle service
:data:`~kubesched.clusterapi.contract.CLUSTER_STATE_SERVICE` (a
:class:`~kubesched.clusterapi.contract.ClusterStateSource`); cluster plugins take one
:meth:`ClusterStateCache.snapshot` per cycle; the live hub adds and removes members as MemberClusters come and go;
tests drive it on a virtual clock. One task per member asks its agent every ``interval`` within ``deadline`` on the
injectable clock; a state is stamped with the hub's clock when its request was sent; a member whose refresh fails
keeps its last state and stamp, so ClusterReadiness judges its age; ``on_refresh`` hears of every refresh. Why:
docs/explanation/cross-cluster.md#cluster-state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType, TracebackType
from typing import Protocol

from kubesched.clock import Clock, sleep
from kubesched.clusterapi.contract import ClusterSnapshot, ClusterState
from kubesched.errors import KubeschedError
from kubesched.federation.state import placeholder_uid

__all__ = ["ClusterStateCache", "MemberHealth", "MemberRefresh", "StateFetcher"]

log = logging.getLogger(__name__)

NOT_YET_OBSERVED = "not yet observed"


class StateFetcher(Protocol):
    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState: ...


@dataclass(frozen=True, slots=True)
class MemberRefresh:
    """How to refresh one member: its name, where its state comes from, how often and within what deadline."""

    name: str
    fetcher: StateFetcher
    interval: float = 5.0
    deadline: float = 2.0

    def __post_init__(self) -> None:
        if not self.interval > 0 or not self.deadline > 0:
            raise ValueError(f"member {self.name}: interval and deadline must be positive")


@dataclass(frozen=True, slots=True)
class MemberHealth:
    """How refreshing one member has gone: successes, failures (and the current run of them), the last error."""

    refreshes: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_error: str = ""
    last_success_at: float | None = None


class ClusterStateCache:
    """Member states refreshed in the background (module doc). ``async with`` starts and stops the refreshers."""

    def __init__(
        self,
        members: Iterable[MemberRefresh],
        *,
        clock: Clock,
        on_refresh: Callable[[str], None] | None = None,
    ) -> None:
        self.clock = clock
        self._members = {member.name: member for member in members}
        self._states: dict[str, ClusterState] = {name: self._unobserved(name) for name in self._members}
        self._view: Mapping[str, ClusterState] = MappingProxyType(dict(self._states))
        self._health = {name: MemberHealth() for name in self._members}
        self._generation = 0
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._retired: set[asyncio.Task[None]] = set()  # refreshers of removed members, awaited at close
        self._started = False
        self._on_refresh = on_refresh

    def _unobserved(self, name: str) -> ClusterState:
        return ClusterState(name=name, ready=False, ready_reason=NOT_YET_OBSERVED, observed_at=self.clock.now())

    def _publish(self) -> None:
        self._view = MappingProxyType(dict(self._states))  # copy on write: snapshots share it, no copy per cycle

    # ------------------------------------------------------------------------------------------- reading

    def snapshot(self, now: float) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=now, clusters=self._view)

    @property
    def states(self) -> Mapping[str, ClusterState]:
        return self._view

    def health(self, name: str) -> MemberHealth:
        return self._health[name]

    def __contains__(self, name: object) -> bool:
        return name in self._members

    # ------------------------------------------------------------------------------------------ membership

    def add(self, member: MemberRefresh) -> None:
        """Add ``member``, or replace the member of that name (its connection changed): its state starts over
        as not yet observed; once :meth:`start` has run, its refresher starts at once."""
        self._retire(member.name)
        self._members[member.name] = member
        self._states[member.name] = self._unobserved(member.name)
        self._health[member.name] = MemberHealth()
        self._publish()
        if self._started:
            self._spawn(member.name)

    def remove(self, name: str) -> None:
        """Forget ``name`` (its refresher is cancelled); unknown names are ignored."""
        self._retire(name)
        if self._members.pop(name, None) is None:
            return
        self._states.pop(name, None)
        self._health.pop(name, None)
        self._publish()

    def _retire(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)

    # ----------------------------------------------------------------------------------------- refreshing

    async def refresh(self, name: str) -> bool:
        """Refresh one member now; whether it answered. Never raises for the member's failure."""
        try:
            return await self._refresh(name)
        finally:
            if self._on_refresh is not None and name in self._members:
                try:
                    self._on_refresh(name)
                except Exception:  # the listener's bug must not stop this member's refreshes
                    log.exception("member %s: the refresh listener failed", name)

    async def _refresh(self, name: str) -> bool:
        member = self._members[name]
        asked_at = self.clock.now()
        self._generation += 1
        try:
            async with asyncio.timeout(member.deadline):
                state = await member.fetcher.state(name, generation=self._generation, timeout=member.deadline)
        except Exception as error:  # our errors and the deadline; anything else is counted, not fatal, too
            if not isinstance(error, KubeschedError | TimeoutError):
                log.exception("member %s: refreshing its state failed unexpectedly", name)
            message = str(error) or "no answer within the deadline"
            if self._members.get(name) is not member:
                return False  # removed or replaced while we waited: this answer is about a member that is gone
            health = self._health[name]
            self._health[name] = replace(
                health,
                failures=health.failures + 1,
                consecutive_failures=health.consecutive_failures + 1,
                last_error=message,
            )
            failed = health.consecutive_failures + 1
            # A member that stays broken (a missing Secret) would log every interval: say it when it starts or
            # changes, and every 60th time after.
            repeated = health.consecutive_failures > 0 and health.last_error == message and failed % 60
            level = logging.DEBUG if repeated else logging.WARNING
            log.log(level, "member %s: refreshing its state failed (%d in a row): %s", name, failed, message)
            return False
        if self._members.get(name) is not member:
            return False
        health = self._health[name]
        self._states[name] = replace(
            state,
            name=name,
            observed_at=asked_at,
            accounted_pods=state.accounted_pods | {placeholder_uid(name)},
            generation=self._generation,
        )
        self._publish()
        self._health[name] = replace(
            health, refreshes=health.refreshes + 1, consecutive_failures=0, last_success_at=asked_at
        )
        return True

    async def refresh_all(self) -> dict[str, bool]:
        """One round over every member, concurrently (what each background task does every interval)."""
        names = list(self._members)
        results = await asyncio.gather(*(self.refresh(name) for name in names))
        return dict(zip(names, results, strict=True))

    async def _refresh_forever(self, name: str) -> None:
        interval = self._members[name].interval
        while True:
            await self.refresh(name)
            await sleep(self.clock, interval)

    def _spawn(self, name: str) -> None:
        self._tasks[name] = asyncio.create_task(self._refresh_forever(name), name=f"kubesched-cluster-state-{name}")

    async def start(self) -> None:
        """Start one refresher per member (and one for each member added later); the first refresh of each
        begins at once."""
        if self._started:
            return
        self._started = True
        for name in self._members:
            self._spawn(name)

    async def close(self) -> None:
        self._started = False
        tasks = [*self._tasks.values(), *self._retired]
        self._tasks = {}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> ClusterStateCache:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
