"""``python -m tests.differential.run``: many seeded random clusters through kubesched and kube-oracle.

Prints one line per cluster and a summary (clusters, pods, identical, ties, mismatches by kind); ``--json``
also writes every cluster's findings to a file. With ``--minimize`` each cluster that differs is shrunk to a
small case (:mod:`.minimize`) and, with ``--golden``, written as a golden scenario under ``tests/golden``.
Run from the repository root with ``KUBEBUILDER_ASSETS`` set (docs/reference/compatibility.md)::

    export KUBEBUILDER_ASSETS="$(/work/shared/envtest/setup.sh)"
    python -m tests.differential.run --seeds 1000-1199 --jobs 2
    python -m tests.differential.run --seeds 7 --mode profiles --minimize --keep /tmp/case
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .generator import MODES, generate, write_files
from .minimize import minimize, write_golden
from .runner import DEFAULT_CONFIRM_RUNS, Outcome, check, find_oracle


@dataclass
class ClusterResult:
    """What one seed gave, in the summary's terms."""

    seed: int
    mode: str
    pods: int
    identical: int
    ties: int
    mismatched_pods: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    oracle_runs: int = 1
    oracle_varied: bool = False
    # Pods whose differences came after kube-oracle stopped seeing kube-scheduler's own status updates.
    set_aside_pods: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)
    artifact: str = ""
    features: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def parse_seeds(text: str) -> list[int]:
    """``"5"``, ``"1000-1199"`` or a comma-separated list of either."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            low, high = part.split("-", 1)
            seeds.extend(range(int(low), int(high) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def run_seed(seed: int, mode: str, confirm_runs: int) -> ClusterResult:
    oracle = find_oracle()
    if oracle is None:
        raise SystemExit("kube-oracle not found: set KUBEBUILDER_ASSETS (docs/reference/compatibility.md)")
    started = time.perf_counter()
    scenario = generate(seed, mode)
    outcome = check(scenario.objects, scenario.config, oracle, confirm_runs=confirm_runs)
    return summarize(seed, mode, outcome, scenario.features, time.perf_counter() - started)


def summarize(seed: int, mode: str, outcome: Outcome, features: dict[str, int], seconds: float) -> ClusterResult:
    found = outcome.comparison
    kinds = Counter(problem.kind for problem in found.problems)
    return ClusterResult(
        seed=seed,
        mode=mode,
        pods=found.pods,
        identical=found.identical,
        ties=found.nodes_tied,
        mismatched_pods=found.mismatched_pods(),
        kinds=dict(kinds),
        problems=found.texts,
        oracle_runs=outcome.oracle_runs,
        oracle_varied=outcome.oracle_varied,
        set_aside_pods=list(dict.fromkeys(problem.key for problem in found.set_aside_problems)),
        set_aside=[problem.text for problem in found.set_aside_problems],
        artifact=(
            f"cycle {outcome.artifact.cycle}: {outcome.artifact.reason} ({outcome.artifact.pod})"
            if outcome.artifact is not None
            else ""
        ),
        features=features,
        seconds=seconds,
    )


def _results(seeds: Sequence[int], mode: str, jobs: int, confirm_runs: int) -> Iterator[ClusterResult]:
    if jobs <= 1:
        for seed in seeds:
            yield run_seed(seed, mode, confirm_runs)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(run_seed, seeds, [mode] * len(seeds), [confirm_runs] * len(seeds))


def report_line(result: ClusterResult) -> str:
    verdict = "ok" if not result.mismatched_pods else f"MISMATCH {len(result.mismatched_pods)} pod(s)"
    varied = f", the oracle varied over {result.oracle_runs} runs" if result.oracle_varied else ""
    aside = f", {len(result.set_aside_pods)} set aside after a kube-oracle artifact" if result.set_aside_pods else ""
    return (
        f"{result.mode}-{result.seed}: {result.pods} pods, {result.identical} identical, {result.ties} ties: "
        f"{verdict}{varied}{aside} ({result.seconds:.1f} s)"
    )


def summary_table(results: Sequence[ClusterResult]) -> str:
    pods = sum(result.pods for result in results)
    identical = sum(result.identical for result in results)
    ties = sum(result.ties for result in results)
    mismatched = sum(len(result.mismatched_pods) for result in results)
    kinds: Counter[str] = Counter()
    for result in results:
        kinds.update(result.kinds)
    differing = sum(1 for result in results if result.mismatched_pods)
    varied = sum(1 for result in results if result.oracle_varied)
    aside = sum(len(result.set_aside_pods) for result in results)
    aside_clusters = sum(1 for result in results if result.set_aside_pods)
    with_artifact = sum(1 for result in results if result.artifact)
    share = f"{100 * identical / pods:.1f} %" if pods else "-"
    lines = [
        "| clusters | pods | identical | ties | mismatched pods | clusters with mismatches |",
        "|---|---|---|---|---|---|",
        f"| {len(results)} | {pods} | {identical} ({share}) | {ties} | {mismatched} | {differing} |",
        "",
        "mismatches by kind: " + (", ".join(f"{kind} {count}" for kind, count in kinds.most_common()) or "none"),
        f"clusters on which kube-oracle's own runs differed (any outcome it gave a pod is accepted): {varied}",
        f"clusters where kube-oracle stops seeing kube-scheduler's own pod status updates: {with_artifact}; "
        f"pods differing after that point, set aside: {aside} (in {aside_clusters} clusters)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", required=True, help='seeds: "7", "1000-1199" or a comma-separated list of both')
    parser.add_argument("--mode", choices=MODES, default="default", help="default profile alone, or several")
    parser.add_argument("--jobs", type=int, default=1, help="clusters compared at once (default 1)")
    parser.add_argument(
        "--confirm-runs",
        type=int,
        default=DEFAULT_CONFIRM_RUNS,
        help=f"oracle re-runs before a difference counts (default {DEFAULT_CONFIRM_RUNS})",
    )
    parser.add_argument("--json", type=Path, help="write every cluster's findings to this file")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each problem")
    parser.add_argument("--minimize", action="store_true", help="shrink each cluster that differs")
    parser.add_argument("--keep", type=Path, help="with --minimize: write the minimized cases under this directory")
    parser.add_argument("--golden", action="store_true", help="with --minimize: write them as tests/golden scenarios")
    parser.add_argument("--write", type=Path, help="only write the seeds' scenarios under this directory and stop")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)

    if args.write is not None:
        for seed in seeds:
            scenario = generate(seed, args.mode)
            write_files(args.write / scenario.name, scenario.objects, scenario.config)
        print(f"wrote {len(seeds)} scenario(s) under {args.write}")
        return 0
    if find_oracle() is None:
        print("kube-oracle not found: set KUBEBUILDER_ASSETS (docs/reference/compatibility.md)", file=sys.stderr)
        return 2

    results: list[ClusterResult] = []
    for result in _results(seeds, args.mode, args.jobs, args.confirm_runs):
        results.append(result)
        print(report_line(result), flush=True)
        if args.verbose:
            for problem in result.problems:
                print("    " + problem.replace("\n", "\n    "), flush=True)
            for problem in result.set_aside:
                print("    set aside (" + result.artifact + "): " + problem.replace("\n", "\n    "), flush=True)
        if result.mismatched_pods and args.minimize:
            _minimize(result, args.keep, args.golden)
    print()
    print(summary_table(results))
    if args.json is not None:
        args.json.write_text(json.dumps([_as_json(result) for result in results], indent=1) + "\n")
    return 1 if any(result.mismatched_pods for result in results) else 0


def _minimize(result: ClusterResult, keep: Path | None, golden: bool) -> None:
    oracle = find_oracle()
    assert oracle is not None
    scenario = generate(result.seed, result.mode)
    small = minimize(scenario.objects, scenario.config, oracle, log=lambda line: print("    " + line, flush=True))
    if small is None:
        print("    not reproduced: the oracle agreed on the re-run", flush=True)
        return
    objects, config, target = small
    name = f"differential-{scenario.name}"
    print(f"    minimized to {len(objects)} objects; diverging pod {target.key} ({target.kind})", flush=True)
    if keep is not None:
        write_files(keep / name, objects, config)
        print(f"    written to {keep / name}", flush=True)
    if golden:
        print(f"    golden scenario: {write_golden(name, objects, config)}", flush=True)


def _as_json(result: ClusterResult) -> dict[str, Any]:
    return result.__dict__.copy()


if __name__ == "__main__":
    sys.exit(main())
