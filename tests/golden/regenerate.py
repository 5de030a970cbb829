"""Refresh the golden outputs: run kube-oracle (kube-scheduler v1.35's own code) on each scenario.

Run by hand after changing a scenario or when the oracle's version changes; the tests never run the
oracle, they read what this script commits. For every scenario directory under ``tests/golden`` (or the
ones named on the command line) it writes:

- ``oracle.json``: the exact stdout of the first ``kube-oracle simulate -f cluster.yaml [--config
  config.yaml]`` run (the shared golden format every engineer's scenarios use);
- ``oracle-nodes.json``: the nodes the oracle chose for each pod over ``--runs`` runs. kube-scheduler
  breaks equal scores at random and cannot be seeded, so a pod with more than one node here was a tie;
  the harness (``tests/integration/test_golden_oracle.py``) compares nodes exactly only where there is
  one.

The script stops with an error when the oracle's results or messages differ between runs: a scenario
whose outcome depends on a tie would make its committed messages a matter of luck. Some scenarios differ
between runs of kube-scheduler itself (its preemption and binding run off the scheduling cycle, and how soon
what they write comes back varies from run to run); for those, ``--accept-varying`` also writes
``oracle-outcomes.json``: every outcome (result, message, attempts) seen for each pod whose outcome varied,
with how many runs gave it. The harness then accepts any of them for that pod.

Usage: ``export KUBEBUILDER_ASSETS="$(/work/shared/envtest/setup.sh)"; python tests/golden/regenerate.py
[--runs 10] [--accept-varying] [scenario ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent
NODES_FILE = "oracle-nodes.json"
OUTCOMES_FILE = "oracle-outcomes.json"
DEFAULT_RUNS = 10


def oracle_binary(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if not assets:
        sys.exit('set KUBEBUILDER_ASSETS="$(/work/shared/envtest/setup.sh)" or pass --oracle')
    return Path(assets) / "kube-oracle"


ATTEMPTS = 3


def run_oracle(oracle: Path, scenario: Path) -> str:
    command = [str(oracle), "simulate", "-f", str(scenario / "cluster.yaml"), "-timeout", "60s"]
    if (scenario / "config.yaml").is_file():
        command += ["--config", str(scenario / "config.yaml")]
    error = ""
    # The oracle runs a real scheduler against an in-process API server; on a loaded machine it now and
    # then times out before the pods reach its queue. That says nothing about the scenario: try again.
    for _ in range(ATTEMPTS):
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
        if done.returncode == 0:
            return done.stdout
        error = f"({done.returncode}): {done.stderr.strip()}"
        print(f"{scenario.name}: kube-oracle failed {error}; retrying", file=sys.stderr)
    sys.exit(f"{scenario.name}: kube-oracle failed {ATTEMPTS} times, last {error}")


def pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['namespace']}/{pod['name']}"


def outcome(document: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {pod_key(pod): (pod["result"], pod["message"]) for pod in document["pods"]}


def varying_outcomes(documents: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per pod whose result, message or attempts differed between the runs: each distinct outcome, most
    frequent first, with the number of runs that gave it."""
    seen: dict[str, dict[tuple[str, str, int], int]] = {}
    for document in documents:
        for pod in document["pods"]:
            key = (pod["result"], pod["message"], pod["attempts"])
            counts = seen.setdefault(pod_key(pod), {})
            counts[key] = counts.get(key, 0) + 1
    varied: dict[str, list[dict[str, Any]]] = {}
    for name, counts in seen.items():
        if len({(result, message) for result, message, _ in counts}) > 1 or len(counts) > 1:
            ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
            varied[name] = [
                {"result": result, "message": message, "attempts": attempts, "runs": count}
                for (result, message, attempts), count in ordered
            ]
    return varied


def regenerate(oracle: Path, scenario: Path, runs: int, accept_varying: bool = False) -> None:
    first = run_oracle(oracle, scenario)
    documents = [json.loads(first)]
    documents += [json.loads(run_oracle(oracle, scenario)) for _ in range(runs - 1)]
    expected = outcome(documents[0])
    outcomes_path = scenario / OUTCOMES_FILE
    varied = varying_outcomes(documents)
    if accept_varying:
        if varied:
            outcomes_path.write_text(json.dumps({"runs": runs, "pods": varied}, indent=1, sort_keys=True) + "\n")
        else:
            outcomes_path.unlink(missing_ok=True)
    else:
        outcomes_path.unlink(missing_ok=True)
        for index, document in enumerate(documents[1:], start=2):
            if outcome(document) != expected:
                sys.exit(
                    f"{scenario.name}: run {index} gave other results or messages than run 1; break the tie "
                    "(or --accept-varying, when kube-scheduler itself varies)"
                )
    nodes: dict[str, set[str]] = {key: set() for key in expected}
    for document in documents:
        for pod in document["pods"]:
            if pod["node"] is not None:
                nodes[pod_key(pod)].add(pod["node"])
    (scenario / "oracle.json").write_text(first)
    summary = {
        "kubernetes": documents[0].get("kubernetes", ""),
        "runs": runs,
        "nodes": {key: sorted(chosen) for key, chosen in nodes.items()},
    }
    (scenario / NODES_FILE).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    ties = sorted(key for key, chosen in nodes.items() if len(chosen) > 1)
    print(
        f"{scenario.name}: {len(expected)} pods, {runs} runs"
        + (f", ties: {', '.join(ties)}" if ties else "")
        + (f", varying outcomes: {', '.join(sorted(varied))}" if accept_varying and varied else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="scenario directory names (default: all)")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"oracle runs per scenario ({DEFAULT_RUNS})")
    parser.add_argument("--oracle", help="path of kube-oracle (default: $KUBEBUILDER_ASSETS/kube-oracle)")
    parser.add_argument(
        "--accept-varying",
        action="store_true",
        help=f"record outcomes that differ between the oracle's runs in {OUTCOMES_FILE} instead of stopping",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    oracle = oracle_binary(args.oracle)
    names = args.scenarios or sorted(p.name for p in GOLDEN.iterdir() if (p / "cluster.yaml").is_file())
    for name in names:
        # A scenario that already records varying outcomes keeps doing so.
        varying = args.accept_varying or (GOLDEN / name / OUTCOMES_FILE).is_file()
        regenerate(oracle, GOLDEN / name, args.runs, varying)


if __name__ == "__main__":
    main()
