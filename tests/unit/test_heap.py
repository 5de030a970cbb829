"""The collector settings of kubesched.heap: tuned thresholds, a frozen steady state, thawed again."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kubesched.heap import YOUNG_THRESHOLD, freeze_steady_state, thaw, tune_collector


@pytest.fixture(autouse=True)
def _restore_the_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tuning_makes_young_collections_rare() -> None:
    tune_collector()
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD > 700


def test_a_frozen_steady_state_is_out_of_the_collectors_sight_until_thawed() -> None:
    kept = [object() for _ in range(1000)]
    freeze_steady_state()
    assert gc.get_freeze_count() >= len(kept)
    thaw()
    assert gc.get_freeze_count() == 0


def test_a_cycle_dropped_after_the_freeze_is_still_collected() -> None:
    freeze_steady_state()

    class Node:
        other: object = None

    first, second = Node(), Node()
    first.other, second.other = second, first
    del first, second
    assert gc.collect() >= 2
