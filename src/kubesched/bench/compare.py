"""``kubesched bench --compare BASELINE.json``: this run's figures against a previous run's, per workload.

The baseline is a document ``kubesched bench -o json`` wrote (its ``results``). After the run, each workload's
pods/s, p50 attempt latency and CPU time per pod are given as ratios new / baseline (pods/s above 1 is
faster; p50 and CPU per pod below 1 are), so a change can be judged in one run; a workload the baseline does
not have is said to be missing, and a baseline from before CPU time was reported gives no CPU ratio.
A baseline that cannot be read, is not JSON or is not a bench document is one :class:`BaselineError`
naming the file, raised before anything runs. Called by :func:`kubesched.bench.runner.main`; the reports
(:mod:`kubesched.bench.report`) print the comparison.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.bounded_input import InputTooLarge, read_text
from kubesched.errors import KubeschedError

if TYPE_CHECKING:
    from kubesched.bench.runner import BenchResult

NOT_A_BENCH_DOCUMENT = "not a `kubesched bench -o json` document"


class BaselineError(KubeschedError):
    """A ``--compare`` file that cannot serve as a baseline; the message names the file."""


@dataclass(frozen=True, slots=True)
class BaselineRow:
    """What the comparison reads of one baseline result."""

    workload: str
    mode: str
    throughput: float
    p50_ms: float
    cpu_us_per_pod: float | None  # None: the baseline predates the CPU column


@dataclass(frozen=True, slots=True)
class Baseline:
    path: str
    rows: Mapping[str, BaselineRow]


@dataclass(frozen=True, slots=True)
class WorkloadComparison:
    """One workload of this run against its baseline row (``baseline`` None: missing from the baseline)."""

    workload: str
    mode: str
    baseline: BaselineRow | None
    throughput_ratio: float | None = None
    p50_ratio: float | None = None
    cpu_per_pod_ratio: float | None = None

    def as_json(self) -> dict[str, Any]:
        if self.baseline is None:
            return {"workload": self.workload, "missing": True}
        return {
            "workload": self.workload,
            "missing": False,
            "baseline_mode": self.baseline.mode,
            "throughput_ratio": self.throughput_ratio,
            "p50_ratio": self.p50_ratio,
            "cpu_per_pod_ratio": self.cpu_per_pod_ratio,
            "baseline": {
                "throughput": self.baseline.throughput,
                "p50_ms": self.baseline.p50_ms,
                "cpu_us_per_pod": self.baseline.cpu_us_per_pod,
            },
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    baseline: str  # the file
    workloads: tuple[WorkloadComparison, ...]

    def as_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "workloads": [w.as_json() for w in self.workloads]}

    def lines(self) -> list[str]:
        """The table form: one line per workload."""
        width = max([len("WORKLOAD"), *(len(w.workload) for w in self.workloads)])
        out = [f"compared with {self.baseline} (new / baseline):"]
        out.append(f"{'WORKLOAD'.ljust(width)}  {'PODS/S':<22}  {'P50':<22}  CPU/POD")
        for w in self.workloads:
            if w.baseline is None:
                out.append(f"{w.workload.ljust(width)}  missing from the baseline")
                continue
            base = w.baseline
            cells = [
                _cell(w.throughput_ratio, base.throughput, "/s"),
                _cell(w.p50_ratio, base.p50_ms, " ms"),
                _cell(w.cpu_per_pod_ratio, base.cpu_us_per_pod, " us"),
            ]
            mode = f"  (baseline mode {base.mode})" if base.mode != w.mode else ""
            out.append(f"{w.workload.ljust(width)}  {cells[0]:<22}  {cells[1]:<22}  {cells[2]}{mode}".rstrip())
        return out


def _cell(ratio: float | None, base: float | None, unit: str) -> str:
    if ratio is None:
        return "n/a" if base is None else f"n/a (was {base:.4g}{unit})"
    return f"{ratio:.2f}x (was {base:.4g}{unit})"


def _ratio(new: float, old: float | None) -> float | None:
    return new / old if old is not None and old > 0 else None


def compare(baseline: Baseline, results: Sequence[BenchResult]) -> Comparison:
    rows: list[WorkloadComparison] = []
    for result in results:
        base = baseline.rows.get(result.workload)
        if base is None:
            rows.append(WorkloadComparison(result.workload, result.mode, None))
            continue
        rows.append(
            WorkloadComparison(
                result.workload,
                result.mode,
                base,
                throughput_ratio=_ratio(result.throughput, base.throughput),
                p50_ratio=_ratio(result.p50_ms, base.p50_ms),
                cpu_per_pod_ratio=_ratio(result.cpu_us_per_pod, base.cpu_us_per_pod),
            )
        )
    return Comparison(baseline.path, tuple(rows))


def load_baseline(path: Path) -> Baseline:
    """Read a ``kubesched bench -o json`` document; every problem is a one-line :class:`BaselineError`."""
    where = str(path)
    try:
        text = read_text(path)
    except InputTooLarge as exc:
        raise BaselineError(str(exc)) from None
    except OSError as exc:
        raise BaselineError(f"{where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{where}: not UTF-8 text ({exc.reason}): {NOT_A_BENCH_DOCUMENT}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{where}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}): {NOT_A_BENCH_DOCUMENT}"
        ) from None
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list):
        raise BaselineError(f"{where}: {NOT_A_BENCH_DOCUMENT} (no results list)")
    rows: dict[str, BaselineRow] = {}
    for index, raw in enumerate(results):
        row = _row(raw, f"{where}: results[{index}]")
        rows.setdefault(row.workload, row)
    return Baseline(where, rows)


def _row(raw: object, where: str) -> BaselineRow:
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: must be an object ({NOT_A_BENCH_DOCUMENT})")
    workload = raw.get("workload")
    if not isinstance(workload, str) or not workload:
        raise BaselineError(f"{where}.workload: Required value ({NOT_A_BENCH_DOCUMENT})")
    mode = raw.get("mode", "")
    cpu = raw.get("cpu_us_per_pod")
    return BaselineRow(
        workload=workload,
        mode=mode if isinstance(mode, str) else "",
        throughput=_number(raw, "throughput", where),
        p50_ms=_number(raw, "p50_ms", where),
        cpu_us_per_pod=None if cpu is None else _number(raw, "cpu_us_per_pod", where),
    )


def _number(raw: Mapping[str, Any], key: str, where: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise BaselineError(f"{where}.{key}: must be a non-negative number, got {value!r} ({NOT_A_BENCH_DOCUMENT})")
    return float(value)
