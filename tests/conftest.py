"""Test-wide fixtures: ``run_async`` runs a coroutine and fails on asyncio tasks it leaves behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def run_checked(coro: Coroutine[Any, Any, T]) -> T:
    async def wrapper() -> T:
        result = await coro
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
        assert not leftover, f"coroutine left asyncio tasks running: {leftover}"
        return result

    return asyncio.run(wrapper())


@pytest.fixture
def run_async() -> Callable[[Coroutine[Any, Any, T]], T]:
    return run_checked
