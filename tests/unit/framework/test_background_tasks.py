"""BackgroundTasks: plugins' background work is tracked, its failures logged (never raised), and closing the
scheduler cancels it -- also work spawned a moment before that never got to run."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings

import pytest

from kubesched.clock import VirtualClock
from kubesched.framework.runtime.services import BackgroundTasks


def test_work_cancelled_before_it_ran_leaves_no_coroutine_unawaited() -> None:
    ran: list[str] = []

    async def work() -> None:
        ran.append("ran")

    async def scenario() -> None:
        tasks = BackgroundTasks(VirtualClock())
        tasks.spawn(work())
        await tasks.aclose()  # the scheduler closes before the loop ever ran the work

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(scenario())
        gc.collect()
    assert ran == []
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []


def test_a_failure_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def work() -> None:
        raise ValueError("the member said no")

    async def scenario() -> int:
        tasks = BackgroundTasks(VirtualClock())
        tasks.spawn(work())
        for _ in range(3):
            await asyncio.sleep(0)
        return len(tasks)

    with caplog.at_level(logging.ERROR):
        assert asyncio.run(scenario()) == 0
    [record] = [r for r in caplog.records if r.message == "background work of a plugin failed"]
    assert record.exc_info is not None and str(record.exc_info[1]) == "the member said no"
