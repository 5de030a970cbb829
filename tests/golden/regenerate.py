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
whose outcome depends on a tie would make its committed messages a matter of luck.

Usage: ``export KUBEBUILDER_ASSETS="$(/work/shared/envtest/setup.sh)"; python tests/golden/regenerate.py
[--runs 10] [scenario ...]``.
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


def regenerate(oracle: Path, scenario: Path, runs: int) -> None:
    first = run_oracle(oracle, scenario)
    documents = [json.loads(first)]
    documents += [json.loads(run_oracle(oracle, scenario)) for _ in range(runs - 1)]
    expected = outcome(documents[0])
    for index, document in enumerate(documents[1:], start=2):
        if outcome(document) != expected:
            sys.exit(f"{scenario.name}: run {index} gave other results or messages than run 1; break the tie")
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
    print(f"{scenario.name}: {len(expected)} pods, {runs} runs" + (f", ties: {', '.join(ties)}" if ties else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="scenario directory names (default: all)")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"oracle runs per scenario ({DEFAULT_RUNS})")
    parser.add_argument("--oracle", help="path of kube-oracle (default: $KUBEBUILDER_ASSETS/kube-oracle)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    oracle = oracle_binary(args.oracle)
    names = args.scenarios or sorted(p.name for p in GOLDEN.iterdir() if (p / "cluster.yaml").is_file())
    for name in names:
        regenerate(oracle, GOLDEN / name, args.runs)


if __name__ == "__main__":
    main()
