"""The fused Score phase: every plugin's scores, NormalizeScore, the range check and the weights in one pass.

Called by :meth:`kubesched.framework.runtime.framework.Framework.run_score` on the batch path, for cycles whose
plugin calls are not being timed. The per-plugin loop in ``run_score`` stays the reference; this computes the
same :class:`ScoreOutcome` with a fixed number of array operations per cycle instead of five or six per plugin:

- each plugin's scores are written into one row of a ``(plugins, nodes)`` int64 matrix, and NormalizeScore
  rewrites that row in place (the plugin's own array is never written, as on the reference path, where it is
  copied first);
- one reduction checks every row against ``[MIN_NODE_SCORE, MAX_NODE_SCORE]`` (the scores viewed as unsigned:
  a negative score becomes larger than any valid one);
- one integer matrix product applies the weights, as upstream's ``totalScore += score * weight``: the sums are
  the same int64 sums in another order, so they are equal, overflow included.

Anything unusual (a plugin that raises, a NormalizeScore that fails, a score out of range, an array of the
wrong length) makes :func:`fused_scores` return ``None``; the caller then runs the reference loop, which
produces that case's exact status or exception. Score plugins are pure, so running them again changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE, BatchScorePlugin, ScoreNormalizer, ScorePlugin
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.status import Code
from kubesched.framework.types import PodInfo

# One unsigned comparison checks both ends of the range only because the lowest valid score is 0: a negative
# score viewed as unsigned is larger than any valid one.
_HIGHEST = np.uint64(MAX_NODE_SCORE)
# The ufunc's reduction itself (ndarray.max wraps it in Python, a cost per call that is most of this one's).
_highest = np.maximum.reduce
if MIN_NODE_SCORE != 0:  # pragma: no cover - a guard for whoever changes the range
    raise ImportError("score_kernel's range check assumes MIN_NODE_SCORE == 0")


@dataclass(frozen=True, slots=True)
class ScorePluginEntry:
    """One configured Score plugin: its weight, and the plugin itself again where it has ``score_batch`` or
    ``normalize_score``."""

    name: str
    plugin: ScorePlugin
    weight: int
    batch: BatchScorePlugin | None
    normalizer: ScoreNormalizer | None


@dataclass(frozen=True, slots=True)
class ScorePlan:
    """The plugins a cycle scores with (the profile's, less those PreScore skipped), with their weights as an
    array; the runtime keeps one per set of skipped plugins."""

    rows: tuple[ScorePluginEntry, ...]
    weights: IntArray


def make_plan(entries: Sequence[ScorePluginEntry], skipped: Collection[str]) -> ScorePlan:
    rows = tuple(entry for entry in entries if entry.name not in skipped)
    return ScorePlan(rows, np.asarray([entry.weight for entry in rows], dtype=np.int64))


@dataclass(frozen=True, slots=True)
class FusedScores:
    """Normalized scores per plugin (rows of one matrix), their weighted totals, and each plugin's scores as it
    returned them (before NormalizeScore; the same values as ``per_plugin`` for a plugin without one)."""

    per_plugin: dict[str, IntArray]
    totals: IntArray
    raw: dict[str, IntArray]


def fused_scores(plan: ScorePlan, state: CycleState, pod: PodInfo, batch: NodeBatch) -> FusedScores | None:
    """The Score phase over ``batch`` for ``plan``, or ``None`` when the reference loop must decide."""
    n = len(batch)
    rows = plan.rows
    if n == 0 or not rows:
        return None
    returned_rows: list[IntArray] = []
    for row in rows:
        try:
            if row.batch is not None:
                returned = np.asarray(row.batch.score_batch(state, pod, batch), dtype=np.int64)
            else:
                score = row.plugin.score
                returned = np.fromiter((score(state, pod, info) for info in batch.infos), dtype=np.int64, count=n)
        except Exception:
            return None
        if returned.shape != (n,):
            return None
        returned_rows.append(returned)
    # One copy of every row into the matrix (the plugins' own arrays are never written).
    matrix = np.array(returned_rows, dtype=np.int64)
    per_plugin: dict[str, IntArray] = {}
    raw: dict[str, IntArray] = {}
    for index, row in enumerate(rows):
        scores = matrix[index]
        if row.normalizer is not None:
            try:
                status = row.normalizer.normalize_score(state, pod, scores)
            except Exception:
                return None
            if status is not None and status.code is not Code.SUCCESS:
                return None
            raw[row.name] = returned_rows[index]
        else:
            raw[row.name] = scores
        per_plugin[row.name] = scores
    if _highest(matrix.view(np.uint64), axis=None) > _HIGHEST:
        return None
    return FusedScores(per_plugin, plan.weights @ matrix, raw)
