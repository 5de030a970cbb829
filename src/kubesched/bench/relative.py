"""Workloads judged against another one of the same run (a workload's ``relativeTo``): their pods/s ratio.

The targets of the hot path are ratios (SecurityAuditChurn at least 0.7 of SchedulingBasic's pods/s), and the
machines we measure on drift by a fifth within minutes, so a ratio of two medians taken minutes apart says more
about the drift than about the code. The runner runs every selected workload once per round, each judged one right
after a run of the workload it names (an extra run of that one when needed); a ratio here is taken from such a pair
(both on nearly the same machine), one a round, and the median of those is reported, beside the same for CPU time
per pod. Called by :func:`kubesched.bench.runner.main` after the run; the
reports (:mod:`kubesched.bench.report`) print the lines or the JSON.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesched.bench.runner import BenchResult


@dataclass(frozen=True, slots=True)
class RelativeRatio:
    """``workload``'s pods/s over ``relative_to``'s, per round and their median; ``cpu_ratio`` is the same for
    CPU time per pod turned around (``relative_to``'s over ``workload``'s), so that both read "fraction of"."""

    workload: str
    relative_to: str
    rounds: tuple[float, ...]
    ratio: float
    cpu_ratio: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "relative_to": self.relative_to,
            "throughput_ratio": self.ratio,
            "throughput_ratio_per_round": list(self.rounds),
            "cpu_per_pod_ratio": self.cpu_ratio,
        }


def relative_ratio(
    workload: str, relative_to: str, adjacent: Sequence[tuple[BenchResult, BenchResult]]
) -> RelativeRatio:
    """The ratio of ``workload`` to ``relative_to`` from runs of the two next to each other, one pair a round."""
    rounds = tuple(own.throughput / other.throughput if other.throughput > 0 else 0.0 for own, other in adjacent)
    cpu = [
        other.cpu_us_per_pod / own.cpu_us_per_pod
        for own, other in adjacent
        if own.cpu_us_per_pod > 0 and other.cpu_us_per_pod > 0
    ]
    return RelativeRatio(
        workload,
        relative_to,
        rounds,
        statistics.median(rounds),
        statistics.median(cpu) if len(cpu) == len(rounds) else None,
    )


def lines(ratios: Sequence[RelativeRatio]) -> list[str]:
    """The table form: one line per workload."""
    if not ratios:
        return []
    width = max(len(f"{r.workload} / {r.relative_to}") for r in ratios)
    out = ["relative to the workload run just before (median of one ratio a round):"]
    for r in ratios:
        per_round = " ".join(f"{value:.2f}" for value in r.rounds)
        cpu = f"  CPU per pod {r.cpu_ratio:.2f}" if r.cpu_ratio is not None else ""
        out.append(f"{f'{r.workload} / {r.relative_to}'.ljust(width)}  pods/s {r.ratio:.2f} (rounds: {per_round}){cpu}")
    return out
