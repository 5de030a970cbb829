"""kube-scheduler's ``DefaultNormalizeScore``, in place over a plugin's score array.

Who calls it: the ``normalize_score`` of TaintToleration (reverse) and NodeAffinity. The maximum starts at
0, as upstream's does, so an array of only non-positive scores counts as "all zero".
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.node_table import IntArray
from kubesched.plugins.helper.gomath import trunc_div_array

# The ufunc's reduction itself: ndarray.max wraps it in Python, a cost per call larger than the work here.
_highest = np.maximum.reduce


def default_normalize_score(max_priority: int, reverse: bool, scores: IntArray) -> None:
    """Scale ``scores`` to [0, max_priority] relative to the highest; ``reverse`` flips them."""
    if scores.shape[0] == 0:
        return
    highest = max(int(_highest(scores)), 0)
    if highest == 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = trunc_div_array(scores * max_priority, highest)
    if reverse:
        scaled = max_priority - scaled
    scores[:] = scaled
