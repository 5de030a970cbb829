"""Run one scenario through kubesched and kube-oracle (kube-scheduler v1.35's own code) and compare them.

Called by ``python -m tests.differential.run``, by the CI test and by :mod:`.minimize`. The same two files go to
``kube-oracle simulate`` (a subprocess) and to ``kubesched simulate`` (in-process, as the CLI runs it, JSON
entries as ``--output json`` writes them). kubesched replays the oracle's choice wherever its own totals tie
(:data:`kubesched.scheduler.algorithm.TieBreaker`), so that both go on scheduling the same cluster and every later
pod stays comparable; then :func:`.compare.compare_pods` judges each pod.

kube-scheduler runs its preemption and binding off the scheduling cycle, against a clock it does not let anyone
seed: now and then two runs of the oracle on the same files differ (a victim's deletion reaches the cache a few
cycles sooner or later). When kubesched differs from the oracle's run, :func:`check_files` asks the oracle again
(up to ``confirm_runs`` times, until the difference is gone) and accepts, for each pod, any outcome
and node the oracle itself gave it, as the golden harness does with ``oracle-outcomes.json``; the outcome says
whether the oracle varied. Differences of pods attempted after kube-oracle stopped seeing kube-scheduler's own
pod status updates (:mod:`.oracle_artifacts`) are set aside in the comparison, not counted as mismatches.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.api.manifests import load_manifests
from kubesched.cli.report import record_to_json
from kubesched.config.loader import load_config_file
from kubesched.framework.types import PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate

from .compare import Comparison, Problem, compare_pods, nodes_seen, varying_outcomes
from .generator import Manifest, dump_manifests, write_files
from .oracle_artifacts import Artifact, AttemptLog, first_artifact

ORACLE_ATTEMPTS = 3
ORACLE_TIMEOUT = "20s"
ORACLE_TIMEOUT_SECONDS = 120
CRASH = "crash"
# kube-scheduler gives some pods an outcome only one run in fifteen or twenty: seen in 60 runs at least once with a
# chance of 95 % or more. A cluster kubesched agrees with costs one run; only a difference asks for more.
DEFAULT_CONFIRM_RUNS = 60


class OracleUnavailable(RuntimeError):
    """kube-oracle is not where ``KUBEBUILDER_ASSETS`` says, or failed every attempt."""


def find_oracle() -> Path | None:
    """``$KUBEBUILDER_ASSETS/kube-oracle`` when it exists (see docs/reference/compatibility.md)."""
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if not assets:
        return None
    oracle = Path(assets) / "kube-oracle"
    return oracle if oracle.is_file() and os.access(oracle, os.X_OK) else None


def run_oracle(oracle: Path, cluster: Path, config: Path) -> list[dict[str, Any]]:
    """kube-oracle's ``pods`` for the two files. The oracle starts a scheduler against an in-process API server;
    on a loaded machine it now and then gives up before the pods reach its queue, which says nothing about the
    scenario: it is tried again."""
    command = [str(oracle), "simulate", "-f", str(cluster), "--config", str(config), "-timeout", ORACLE_TIMEOUT]
    error = ""
    for _ in range(ORACLE_ATTEMPTS):
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=ORACLE_TIMEOUT_SECONDS)
        if done.returncode == 0:
            pods: list[dict[str, Any]] = json.loads(done.stdout)["pods"]
            return pods
        error = f"exit {done.returncode}: {done.stderr.strip()[-2000:]}"
    raise OracleUnavailable(f"kube-oracle failed {ORACLE_ATTEMPTS} times on {cluster}: {error}")


@dataclass
class KubeschedRun:
    """kubesched's JSON entries, the scheduling cycle of each pod's last attempt, and where kube-oracle may stop
    answering as kube-scheduler (:mod:`.oracle_artifacts`)."""

    entries: list[dict[str, Any]]
    last_cycle: dict[str, int]
    artifact: Artifact | None


def run_kubesched(cluster: Path, config: Path, follow: Mapping[str, str] | None = None) -> KubeschedRun:
    """kubesched on the two files; where its totals tie, the node ``follow`` names for the pod ("namespace/name"
    -> node) when it is among the tied ones."""
    registry = in_tree_registry()
    loaded = load_config_file(str(config), registry)
    choices = dict(follow or {})

    def tie_breaker(pod: PodInfo, tied: Sequence[str]) -> str | None:
        return choices.get(pod.key)

    manifests = load_manifests([str(cluster)])
    log = AttemptLog()
    # What the scheduler logs (a PostFilter's error, as kube-scheduler logs it) is in the entries already; the
    # level is given back, so that the tests run after this one in the same process still see their logs.
    logger = logging.getLogger("kubesched")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        report = simulate(manifests, loaded, registry, seed=0, tie_breaker=tie_breaker, observers=[log])
    finally:
        logger.setLevel(level)
    preempted = report.preempted
    entries = [record_to_json(record, preempted.get(record.pod.uid, ())) for record in report.records]
    initial = {pod.key: pod.status.nominated_node_name for pod in manifests.pods if not pod.spec.node_name}
    return KubeschedRun(
        entries,
        {record.pod.key: record.cycle for record in report.records},
        first_artifact(log.records, initial),
    )


def oracle_nodes(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {f"{pod['namespace']}/{pod['name']}": pod["node"] for pod in pods if pod.get("node")}


@dataclass
class Outcome:
    """One scenario's verdict: the comparison, the first oracle run's pods (whose ties kubesched replayed),
    kubesched's entries, how many oracle runs it took and whether they differed among themselves."""

    comparison: Comparison
    oracle_pods: list[dict[str, Any]] = field(default_factory=list)
    ours: list[dict[str, Any]] = field(default_factory=list)
    oracle_runs: int = 1
    oracle_varied: bool = False
    artifact: Artifact | None = None

    @property
    def agrees(self) -> bool:
        return not self.comparison.problems


def check_files(
    oracle: Path,
    cluster: Path,
    config: Path,
    confirm_runs: int = DEFAULT_CONFIRM_RUNS,
    oracle_cluster: Path | None = None,
) -> Outcome:
    """Compare kubesched with one oracle run; on a difference ask the oracle up to ``confirm_runs`` more times,
    accepting for each pod any outcome and node the oracle itself gave it (module doc). ``oracle_cluster``: what
    the oracle reads instead of ``cluster`` (:func:`oracle_view`)."""
    cluster_for_oracle = oracle_cluster if oracle_cluster is not None else cluster
    first = run_oracle(oracle, cluster_for_oracle, config)
    try:
        run = run_kubesched(cluster, config, oracle_nodes(first))
    except Exception:  # a crash is a finding like any other; the traceback says where
        crashed = Comparison(pods=len(first), problems=[Problem("", CRASH, traceback.format_exc())])
        return Outcome(crashed, first)
    ours = run.entries
    runs = [first]

    from_cycle = run.artifact.cycle if run.artifact is not None else None

    def judged(comparison: Comparison) -> Comparison:
        if from_cycle is not None:
            comparison.set_aside(lambda key: run.last_cycle.get(key, -1) >= from_cycle)
        return comparison

    def oracle_varied() -> bool:
        return bool(varying_outcomes(runs)) or any(len(nodes) > 1 for nodes in nodes_seen(runs).values())

    comparison = judged(compare_pods(first, ours))
    while comparison.problems and len(runs) <= confirm_runs:
        runs.append(run_oracle(oracle, cluster_for_oracle, config))
        comparison = judged(compare_pods(first, ours, nodes_seen(runs), varying_outcomes(runs)))
    varied = oracle_varied()
    return Outcome(comparison, first, ours, len(runs), varied, run.artifact)


def oracle_view(objects: Sequence[Manifest]) -> list[Manifest]:
    """The objects kube-scheduler's informers would give it. Its pod informer lists no finished pods (field
    selector ``status.phase!=Succeeded,status.phase!=Failed``), but kube-oracle's fake clientset ignores field
    selectors and would count them on their nodes; they are left out of what the oracle reads
    (docs/reference/compatibility.md)."""
    return [obj for obj in objects if not _finished(obj)]


def _finished(obj: Manifest) -> bool:
    return obj.get("kind") == "Pod" and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def check(
    objects: Sequence[Manifest],
    config: Manifest,
    oracle: Path,
    *,
    confirm_runs: int = DEFAULT_CONFIRM_RUNS,
    directory: Path | None = None,
) -> Outcome:
    """:func:`check_files` on manifests written to ``directory`` (a temporary one by default): kubesched reads
    them all, the oracle their :func:`oracle_view`."""
    with tempfile.TemporaryDirectory(prefix="kubesched-differential-") as temporary:
        where = directory if directory is not None else Path(temporary)
        cluster, config_path = write_files(where, objects, config)
        oracle_cluster = where / "cluster-oracle.yaml"
        oracle_cluster.write_text(dump_manifests(oracle_view(objects)))
        return check_files(oracle, cluster, config_path, confirm_runs, oracle_cluster)
