from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from kubesched.clock import VirtualClock
from kubesched.framework.runtime.waiting_pods import WaitingPodEntry, WaitingPods
from kubesched.framework.status import Code
from kubesched.framework.types import PodInfo
from kubesched.testing.builders import make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


def test_allowed_by_every_plugin_succeeds(run_async: Runner) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        entry = WaitingPodEntry(PodInfo(make_pod("p").obj()), "n", {"A": 10, "B": 10}, clock)
        entry.allow("A")
        assert not entry.done
        entry.allow("B")
        assert await entry.wait() is None

    run_async(scenario())


def test_timeout_rejects_with_kube_scheduler_message(run_async: Runner) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        pods = WaitingPods()
        entry = WaitingPodEntry(PodInfo(make_pod("p").obj()), "n", {"Approval": 30}, clock)
        pods.add(entry)
        clock.advance(29)
        assert not entry.done
        clock.advance(1)
        status = await entry.wait()
        assert status is not None and status.code is Code.UNSCHEDULABLE
        assert status.plugin == "Approval"
        assert status.message == "rejected due to timeout after waiting 30s at plugin Approval"

    run_async(scenario())


def test_reject_cancels_other_timers(run_async: Runner) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        entry = WaitingPodEntry(PodInfo(make_pod("p").obj()), "n", {"A": 5, "B": 50}, clock)
        entry.reject("B", "denied")
        status = await entry.wait()
        assert status is not None and status.message == "denied" and status.plugin == "B"
        assert clock.next_deadline() is None

    run_async(scenario())
