"""How the framework's runners are measured: the extension-point labels, what they report to, and the helpers
that time a runner or a plugin call and label it with its status.

Who uses it: :mod:`kubesched.framework.runtime.framework` (every runner, when a metrics recorder is given) and
:mod:`kubesched.scheduler.metrics` (which implements :class:`FrameworkMetrics` under kube-scheduler's metric names).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import BatchFilterResult, IntArray, NodeBatch
from kubesched.framework.runtime.outcomes import PreFilterOutcome
from kubesched.framework.runtime.score_kernel import ScorePluginEntry
from kubesched.framework.status import CODE_NAMES, Code, Status
from kubesched.framework.types import PodInfo

R = TypeVar("R")
P = ParamSpec("P")

# The ``status`` label of the duration metrics is CODE_NAMES (kube-scheduler's ``Code.String()``);
# the ``extension_point`` label values (kube-scheduler's; FilterPrefetch is ours: a prefetch_filter call).
PRE_ENQUEUE = "PreEnqueue"
PRE_FILTER = "PreFilter"
PRE_FILTER_EXTENSION_ADD_POD = "PreFilterExtensionAddPod"
PRE_FILTER_EXTENSION_REMOVE_POD = "PreFilterExtensionRemovePod"
FILTER = "Filter"
FILTER_PREFETCH = "FilterPrefetch"
POST_FILTER = "PostFilter"
PRE_SCORE = "PreScore"
SCORE = "Score"
SCORE_EXTENSION_NORMALIZE = "ScoreExtensionNormalize"
RESERVE = "Reserve"
UNRESERVE = "Unreserve"
PERMIT = "Permit"
PRE_BIND = "PreBind"
BIND = "Bind"
POST_BIND = "PostBind"


class FrameworkMetrics(Protocol):
    """What the runtime reports to when metrics are on (:class:`kubesched.scheduler.metrics.SchedulerMetrics`)."""

    def observe_extension_point(self, extension_point: str, status: str, profile: str, seconds: float) -> None: ...

    def observe_plugin(self, plugin: str, extension_point: str, status: str, seconds: float) -> None: ...

    def sampled(self, state: CycleState) -> bool:
        """Whether this cycle's plugin calls are timed: decided on the cycle's first call, kept in its state."""
        ...

    def sample(self) -> bool:
        """The same decision for a call outside any cycle (PreEnqueue)."""
        ...

    def preemption_attempted(self) -> None:
        """``scheduler_preemption_attempts_total`` + 1 (DefaultPreemption, through its Handle)."""
        ...

    def preemption_victims_selected(self, victims: int) -> None:
        """One observation of ``scheduler_preemption_victims``."""
        ...


def status_label(result: object) -> str:
    """The ``status`` label of a runner's or a plugin's return value (None and plain values are Success)."""
    if result is None:
        return CODE_NAMES[Code.SUCCESS]
    if isinstance(result, Status):
        return CODE_NAMES[result.code]
    if isinstance(result, PreFilterOutcome):
        return status_label(result.status)
    if isinstance(result, BatchFilterResult):
        rejected = np.flatnonzero(result.codes)
        if not len(rejected):
            return CODE_NAMES[Code.SUCCESS]
        return CODE_NAMES[result.statuses[int(result.codes[rejected[0]]) - 1].code]
    if isinstance(result, tuple):  # Permit's (status, timeout), PostFilter's (result, status)
        for item in result:
            if isinstance(item, Status):
                return CODE_NAMES[item.code]
    return CODE_NAMES[Code.SUCCESS]


Record = Callable[[str, float], None]  # (status label, seconds) -> an observation


def measure(record: Record, call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``call(*args)``, timed and recorded with its status label (an exception is recorded as Error, re-raised)."""
    started = time.perf_counter()
    status = CODE_NAMES[Code.ERROR]
    try:
        result = call(*args, **kwargs)
        status = status_label(result)
        return result
    finally:
        record(status, time.perf_counter() - started)


async def measure_async(record: Record, call: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
    started = time.perf_counter()
    status = CODE_NAMES[Code.ERROR]
    try:
        result = await call(*args, **kwargs)
        status = status_label(result)
        return result
    finally:
        record(status, time.perf_counter() - started)


def timed(metrics: FrameworkMetrics, plugin: str, point: str, call: Callable[..., R], *args: Any) -> R:
    """One plugin call of a sampled cycle, observed (an exception is observed as Error and re-raised)."""
    return measure(functools.partial(metrics.observe_plugin, plugin, point), call, *args)


async def timed_async(metrics: FrameworkMetrics, plugin: str, point: str, call: Callable[..., Any], *args: Any) -> Any:
    return await measure_async(functools.partial(metrics.observe_plugin, plugin, point), call, *args)


def timed_scores(
    metrics: FrameworkMetrics,
    entry: ScorePluginEntry,
    state: CycleState,
    pod: PodInfo,
    batch: NodeBatch,
    use_batch: bool,
) -> IntArray:
    """Score of a sampled cycle: one observation per ``score_batch`` call, else one per node."""
    if use_batch and entry.batch is not None:
        scores = timed(metrics, entry.name, SCORE, entry.batch.score_batch, state, pod, batch)
        return np.asarray(scores, dtype=np.int64).copy()
    score = entry.plugin.score
    return np.fromiter(
        (timed(metrics, entry.name, SCORE, score, state, pod, info) for info in batch.infos),
        dtype=np.int64,
        count=len(batch),
    )
