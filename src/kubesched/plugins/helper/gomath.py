"""Go's integer and rounding semantics, for scalars and int64 arrays.

Who calls it: score plugins whose formulas are carried over from kube-scheduler. Go's ``/`` on int64
truncates toward zero and ``math.Round`` rounds half away from zero, while Python's ``//`` floors and
``round`` rounds half to even; a plugin that used the Python operators would give different scores for
negative slopes (RequestedToCapacityRatio shapes) and for .5 averages.
"""

from __future__ import annotations

import math

import numpy as np

from kubesched.framework.node_table import IntArray

FloatArray = np.ndarray[tuple[int], np.dtype[np.float64]]


def trunc_div(a: int, b: int) -> int:
    """``a / b`` as Go computes it for int64 (toward zero); ``b`` must not be 0."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def trunc_div_array(a: IntArray, b: IntArray | int) -> IntArray:
    """Element-wise Go int64 division; entries where ``b`` is 0 give 0 (callers mask them out)."""
    divisor = np.asarray(b, dtype=np.int64)
    safe = np.where(divisor == 0, 1, divisor)
    q = np.abs(a) // np.abs(safe)
    return np.where((a >= 0) == (safe > 0), q, -q).astype(np.int64)


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero."""
    if x < 0:
        return -go_round(-x)
    whole = math.floor(x)
    return int(whole + 1) if x - whole >= 0.5 else int(whole)


def go_round_array(x: FloatArray) -> IntArray:
    """Element-wise :func:`go_round` with the same float operations, so results are bit-identical."""
    magnitude = np.abs(x)
    whole = np.floor(magnitude)
    rounded = np.where(magnitude - whole >= 0.5, whole + 1.0, whole)
    return np.where(x < 0, -rounded, rounded).astype(np.int64)
