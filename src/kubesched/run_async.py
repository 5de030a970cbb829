"""``asyncio.run`` for coroutines that return large objects: the result is handed back outside the task.

Who calls it: the simulation (:func:`kubesched.simulation.run.simulate`) and the benchmark runners. Why:
when ``asyncio.run`` restores the SIGINT handler at exit, Python 3.11's ``signal`` module passes the handler
it installed — a ``functools.partial`` holding the main task — to ``Signals(...)``, whose failure message is
built with ``repr()`` of it, and a finished task's repr includes its result's. For a simulation report of
3000 pods (numpy score arrays in every record) that repr took 39 s, twice. A task that returns None costs
nothing there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_returning(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``, with ``work``'s result kept out of the main task (see the module docstring)."""
    results: list[T] = []

    async def main() -> None:
        results.append(await work)

    asyncio.run(main())
    return results[0]
