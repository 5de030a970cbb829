"""Run a simulation and explain one pod of it: find the pod, watch its attempts, build the explanation.

Called by ``kubesched explain`` (:mod:`kubesched.cli.explain`). The simulation is the one ``simulate``
runs (same seed, same paths), with one more observer that keeps every attempt of the pod asked about.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from kubesched.api.manifests import LoadedManifests
from kubesched.api.multicluster import CLUSTER_LABEL
from kubesched.api.objects import Pod
from kubesched.config.types import SchedulerConfiguration
from kubesched.errors import KubeschedError
from kubesched.explain.model import PodExplanation, explain_pod, profile_plugins
from kubesched.federation.profiles import is_cluster_profile
from kubesched.framework.runtime.registry import Registry
from kubesched.scheduler.results import AttemptRecord
from kubesched.simulation.run import DEFAULT_MAX_ATTEMPTS, simulate


class ExplainError(KubeschedError):
    """The pod asked about is not in the manifests, is ambiguous, or no profile schedules it."""


class AttemptHistory:
    """An observer that keeps every attempt of every pod (or of one pod: ``uid``), in order, by pod uid.
    ``simulate -o html`` uses it to show what earlier attempts (a preemption) found."""

    def __init__(self, uid: str | None = None) -> None:
        self.uid = uid
        self.attempts: dict[str, list[AttemptRecord]] = {}

    def on_attempt(self, record: AttemptRecord) -> None:
        if self.uid is None or record.pod.uid == self.uid:
            self.attempts.setdefault(record.pod.uid, []).append(record)


def find_pod(manifests: LoadedManifests, query: str) -> Pod:
    """``namespace/name``, or a bare name when only one namespace has a pod of that name."""
    keys = {pod.key: pod for pod in manifests.pods}
    if "/" in query:
        found = keys.get(query)
        if found is not None:
            return found
    else:
        named = [pod for pod in manifests.pods if pod.metadata.name == query]
        if len(named) == 1:
            return named[0]
        if len(named) > 1:
            listed = ", ".join(sorted(pod.key for pod in named))
            raise ExplainError(f'pod name "{query}" is in several namespaces; write one of: {listed}')
    # Near matches: whole keys that look alike, then pods whose name looks like the name asked for.
    near = difflib.get_close_matches(query, list(keys), n=5, cutoff=0.8)
    by_name: dict[str, list[str]] = {}
    for pod in manifests.pods:
        by_name.setdefault(pod.metadata.name, []).append(pod.key)
    wanted = query.rsplit("/", 1)[-1]
    for name in difflib.get_close_matches(wanted, list(by_name), n=5, cutoff=0.6):
        near += [key for key in by_name[name] if key not in near]
    near += [key for key in keys if wanted in key and key not in near]
    near = near[:5]
    hint = f"; did you mean: {', '.join(near)}?" if near else ""
    known = f" ({len(keys)} pods in the manifests)" if keys else " (the manifests have no pods)"
    raise ExplainError(f'pod "{query}" not found{known}{hint}')


def explain(
    manifests: LoadedManifests,
    config: SchedulerConfiguration,
    registry: Registry,
    query: str,
    *,
    seed: int | None = 0,
    use_batch: bool = True,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    start_time: float | None = None,
) -> PodExplanation:
    """``start_time``: the simulated clock's start (``--time``), as for ``simulate``."""
    pod = find_pod(manifests, query)
    profiles = {profile.scheduler_name: profile for profile in config.profiles}
    profile = profiles.get(pod.spec.scheduler_name)
    # A cluster profile's nodes are the member clusters (kubesched.federation): the explanation lists them.
    target = "cluster" if profile is not None and is_cluster_profile(profile) else "node"
    if target == "cluster":
        node_names = [member.name for member in manifests.member_clusters]
    else:
        node_names = [node.metadata.name for node in manifests.nodes if CLUSTER_LABEL not in node.metadata.labels]
    if pod.spec.node_name:
        name = profile.scheduler_name if profile is not None else pod.spec.scheduler_name
        filters, scores = profile_plugins(profile) if profile is not None else ((), ())
        return PodExplanation(
            pod.metadata.namespace,
            pod.metadata.name,
            pod.metadata.uid,
            name,
            filters,
            scores,
            [],
            bound_in_manifests=pod.spec.node_name,
            target=target,
        )
    if profile is None:
        names = ", ".join(sorted(profiles))
        raise ExplainError(
            f'pod "{pod.key}" asks for schedulerName "{pod.spec.scheduler_name}", '
            f"which no profile of this configuration has (profiles: {names})"
        )
    if pod.status.phase not in ("", "Pending"):
        raise ExplainError(f'pod "{pod.key}" is {pod.status.phase} and not bound: nothing schedules it')
    watcher = AttemptHistory(pod.metadata.uid)
    report = simulate(
        manifests,
        config,
        registry,
        seed=seed,
        use_batch=use_batch,
        max_attempts=max_attempts,
        observers=[watcher],
        start_time=start_time,
    )
    records: Sequence[AttemptRecord] = watcher.attempts.get(pod.metadata.uid, [])
    if not records:
        # Never attempted (held at PreEnqueue): the report has a record of why.
        records = [record for record in report.records if record.pod.uid == pod.metadata.uid]
    if not records:
        raise ExplainError(f'pod "{pod.key}" was never considered by the scheduler')
    preempted = report.preempted.get(pod.metadata.uid, [])
    return explain_pod(records, profile, node_names, preempted=preempted, target=target)
