"""ClusterStateCache membership: members added and removed while refreshing, and the refresh listener."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import ClusterState
from kubesched.errors import KubeschedError
from kubesched.federation.cache import NOT_YET_OBSERVED, ClusterStateCache, MemberRefresh

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]


class Member:
    """A member answering with its state, or failing while ``down``."""

    def __init__(self, cpu: int = 4000) -> None:
        self.cpu = cpu
        self.down = False
        self.asked = 0

    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState:
        self.asked += 1
        if self.down:
            raise KubeschedError("connection refused")
        return ClusterState(name=name, ready=True, allocatable={"cpu": self.cpu})


def test_a_member_added_later_is_refreshed_and_one_removed_is_forgotten(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[list[str], dict[str, bool], bool, int]:
        clock = VirtualClock()
        heard: list[str] = []
        cache = ClusterStateCache([], clock=clock, on_refresh=heard.append)
        await cache.start()
        east, west = Member(), Member(cpu=8000)
        cache.add(MemberRefresh("east", east, interval=5))
        assert cache.states["east"].ready_reason == NOT_YET_OBSERVED
        await asyncio.sleep(0)  # the new refresher's first round runs at once
        cache.add(MemberRefresh("west", west, interval=5))
        await asyncio.sleep(0)
        ready = {name: state.ready for name, state in cache.states.items()}
        cache.remove("east")
        clock.advance_to(clock.now() + 5)
        await asyncio.sleep(0)
        await cache.close()
        return heard, ready, "east" in cache.states, east.asked

    heard, ready, east_known, east_asked = run_async(scenario())
    assert ready == {"east": True, "west": True}
    assert not east_known
    assert east_asked == 1  # its refresher was cancelled with it
    assert heard == ["east", "west", "west"]


def test_replacing_a_member_starts_its_state_over(run_async: RunAsync[Any]) -> None:
    async def scenario() -> tuple[bool, str, int]:
        clock = VirtualClock()
        cache = ClusterStateCache([MemberRefresh("east", Member())], clock=clock)
        await cache.refresh_all()
        broken = Member()
        broken.down = True
        cache.add(MemberRefresh("east", broken))  # its connection changed, to one that does not work
        await cache.refresh("east")
        state, health = cache.states["east"], cache.health("east")
        return state.ready, health.last_error, health.refreshes

    ready, error, refreshes = run_async(scenario())
    assert (ready, error, refreshes) == (False, "connection refused", 0)


def test_a_listener_that_fails_does_not_stop_the_refreshes(run_async: RunAsync[Any]) -> None:
    def listener(name: str) -> None:
        raise RuntimeError("bug")

    async def scenario() -> bool:
        cache = ClusterStateCache([MemberRefresh("east", Member())], clock=VirtualClock(), on_refresh=listener)
        return await cache.refresh("east")

    assert run_async(scenario()) is True
