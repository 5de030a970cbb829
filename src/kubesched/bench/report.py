"""How ``kubesched bench`` reports: a table streamed row by row, or one JSON document at the end.

A bench run can take an hour; the table prints its header before the first workload and then one row the
moment each workload finishes (flushed, so ``| tee`` shows it too). Column widths are therefore fixed up
front, from the headers and the names of the workloads about to run, not from the numbers. JSON stays a
single document written at the end, the one thing a program reading it can parse. Each row carries CPU time
per measured pod and the process's peak RSS beside throughput and latency, and a hub workload's p99 from queue pop
to the member's bind (``-`` for the others). Workloads judged against another (``relativeTo``) get their ratios
after the table (:mod:`kubesched.bench.relative`; ``relative`` in JSON). With ``--compare`` the table
ends with the ratios to the baseline (:mod:`kubesched.bench.compare`), and the JSON document has them as
``comparison``. Failures (a workload
file that cannot be read, a workload that cannot run) are one line each on stderr as they happen, and are
listed in the JSON document as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

from kubesched.bench.relative import RelativeRatio
from kubesched.bench.relative import lines as relative_lines

if TYPE_CHECKING:
    from kubesched.bench.compare import Comparison
    from kubesched.bench.runner import BenchResult

HEADER = (
    "WORKLOAD",
    "MODE",
    "NODES",
    "PODS",
    "SCHEDULED",
    "SECONDS",
    "PODS/S",
    "P50 MS",
    "P99 MS",
    "COMMIT P99 MS",
    "CPU US/POD",
    "PEAK RSS MB",
    "POLICY CALLS",
    "PENDING",
    "PREEMPTED",
    "CHECK",
)
_NUMBER_WIDTH = 7  # "12345.6" pods/s, "1234.56" seconds: wider cells push the rest of their row right
_MODE_WIDTH = len("per-node")
_VIOLATIONS_SHOWN = 10


@dataclass(frozen=True, slots=True)
class Failure:
    """A workload that gave no result: ``source`` is its file, ``message`` the one-line error."""

    source: str
    message: str


class Report(Protocol):
    def start(self, workload_names: Sequence[str]) -> None: ...

    def result(self, result: BenchResult) -> None: ...

    def failure(self, failure: Failure) -> None: ...

    def finish(
        self,
        machine: str,
        params: Mapping[str, int],
        repeat: int,
        comparison: Comparison | None = None,
        relative: Sequence[RelativeRatio] = (),
    ) -> None: ...


def _row(result: BenchResult) -> tuple[str, ...]:
    return (
        result.workload,
        result.mode,
        str(result.nodes),
        str(result.measured_pods),
        str(result.scheduled),
        f"{result.seconds:.2f}",
        f"{result.throughput:.1f}",
        f"{result.p50_ms:.2f}",
        f"{result.p99_ms:.2f}",
        f"{result.commit_p99_ms:.2f}" if result.commit_p99_ms else "-",
        f"{result.cpu_us_per_pod:.0f}",
        f"{result.peak_rss_mb:.0f}",
        str(result.policy_calls),
        str(result.pending),
        str(result.preempted),
        result.check,
    )


class TableReport:
    """Header first, then a row per finished workload; violations and the machine line at the end."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.widths: list[int] = []
        self.results: list[BenchResult] = []

    def start(self, workload_names: Sequence[str]) -> None:
        first = max([len(HEADER[0]), *(len(name) for name in workload_names)])
        self.widths = [first, _MODE_WIDTH, *(max(len(h), _NUMBER_WIDTH) for h in HEADER[2:])]
        self._print(HEADER)

    def _print(self, row: tuple[str, ...]) -> None:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, self.widths, strict=True)).rstrip()
        self.out.write(line + "\n")
        self.out.flush()

    def result(self, result: BenchResult) -> None:
        self.results.append(result)
        self._print(_row(result))

    def failure(self, failure: Failure) -> None:
        self.err.write(f"error: {failure.message}\n")
        self.err.flush()

    def finish(
        self,
        machine: str,
        params: Mapping[str, int],
        repeat: int,
        comparison: Comparison | None = None,
        relative: Sequence[RelativeRatio] = (),
    ) -> None:
        overrides = f"; params overridden: {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""
        self.out.write(f"machine: {machine}; medians of {repeat} run(s){overrides}\n")
        self.out.write("".join(line + "\n" for line in relative_lines(relative)))
        if comparison is not None:
            self.out.write("".join(line + "\n" for line in comparison.lines()))
        self.out.flush()
        for result in self.results:
            for violation in result.violations[:_VIOLATIONS_SHOWN]:
                self.err.write(f"{result.workload}: {violation}\n")
        self.err.flush()


class JsonReport:
    """One document at the end: ``machine``, ``params``, ``results`` and ``failures``."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.results: list[BenchResult] = []
        self.failures: list[Failure] = []

    def start(self, workload_names: Sequence[str]) -> None:
        pass

    def result(self, result: BenchResult) -> None:
        self.results.append(result)

    def failure(self, failure: Failure) -> None:
        # Also on stderr at once: the document only comes at the end, and a person may be watching.
        self.failures.append(failure)
        self.err.write(f"error: {failure.message}\n")
        self.err.flush()

    def finish(
        self,
        machine: str,
        params: Mapping[str, int],
        repeat: int,
        comparison: Comparison | None = None,
        relative: Sequence[RelativeRatio] = (),
    ) -> None:
        document: dict[str, object] = {
            "machine": machine,
            "params": dict(params),
            "results": [{**asdict(r), "check": r.check} for r in self.results],
            "failures": [{"file": f.source, "error": f.message} for f in self.failures],
            "relative": [ratio.as_json() for ratio in relative],
        }
        if comparison is not None:
            document["comparison"] = comparison.as_json()
        json.dump(document, self.out, indent=2)
        self.out.write("\n")
        self.out.flush()
