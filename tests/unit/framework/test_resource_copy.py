"""Resource.copy (slot by slot, for the snapshot's copies of changed nodes) makes an equal, independent Resource,
and uniform_scores the array np.full makes."""

from __future__ import annotations

import dataclasses

import numpy as np

from kubesched.framework.types import Resource
from kubesched.plugins.helper.classes import uniform_scores


def test_copy_is_equal_and_independent() -> None:
    original = Resource(1500, 2**30, 7, 110, {"example.com/gpu": 2})
    copy = original.copy()
    assert copy == original and copy is not original
    # every field carried (a field added later and missed here would be unset, and this would raise)
    assert all(getattr(copy, f.name) == getattr(original, f.name) for f in dataclasses.fields(Resource))
    copy.scalar["example.com/gpu"] = 3
    copy.milli_cpu += 1
    assert original == Resource(1500, 2**30, 7, 110, {"example.com/gpu": 2})


def test_uniform_scores_is_np_full() -> None:
    for size, value in ((0, 5), (1, 0), (657, 100)):
        got = uniform_scores(size, value)
        expected = np.full(size, value, dtype=np.int64)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
