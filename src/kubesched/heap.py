"""Garbage-collector settings for a scheduler's long-lived heap.

Who calls it: the CLI once per process (:func:`tune_collector`, before any subcommand runs), the live scheduler
once its informers have listed and the bench before each measured op (:func:`freeze_steady_state`), the bench
again after each workload (:func:`thaw`).

A scheduler holds a large, long-lived heap (every node, pod and their parsed forms) and allocates many
short-lived objects per cycle. With CPython's default thresholds (a young collection every 700 allocations,
a full one every 100 young ones) the full collections walk that whole heap again and again, though nothing in
it is garbage: about a tenth of SchedulingBasic's CPU time. Raising the young threshold makes collections rare
(cycles among short-lived objects are still found, a little later), and freezing the heap built by the
initial sync takes it out of every later collection. Reference counting frees almost everything the scheduler
drops either way; only reference cycles wait for the collector.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "freeze_steady_state", "thaw", "tune_collector"]

YOUNG_THRESHOLD = 50_000
"""Allocations (minus deallocations) between young collections; CPython's default is 700."""
_OLDER_THRESHOLDS = (20, 100)


def tune_collector() -> None:
    gc.set_threshold(YOUNG_THRESHOLD, *_OLDER_THRESHOLDS)


def freeze_steady_state() -> None:
    """Collect once, then move every surviving object out of the collector's sight (``gc.freeze``)."""
    gc.collect()
    gc.freeze()


def thaw() -> None:
    """Give the frozen objects back to the collector (what was frozen for one workload is garbage after it)."""
    gc.unfreeze()
