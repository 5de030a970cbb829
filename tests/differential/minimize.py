"""Shrink a cluster on which kubesched and kube-oracle differ, and write it as a golden scenario.

Called by ``python -m tests.differential.run --minimize``. The target is the first pod (in kubesched's
scheduling order) with a difference, and the difference's kind; a smaller cluster is kept while the same pod
still differs in the same way, confirmed on a second oracle run. The steps:

1. pin: every other pod the oracle placed becomes a pod already running on its node (``nodeName``), so that the
   case no longer depends on how the earlier pods were scheduled; kept only if the difference stays;
2. drop objects (delta debugging over nodes with their pods, pods, PodDisruptionBudgets, then objects nothing
   refers to any more);
3. drop parts of the remaining objects (affinity, spread, tolerations, taints, images, containers, ...).

:func:`write_golden` writes the result under ``tests/golden/<name>/`` and runs ``tests/golden/regenerate.py``
on it, which records the oracle's output over ten runs (and refuses a case whose outcome is a matter of luck).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .compare import ATTEMPTS, Problem
from .generator import Manifest, dump_manifests, write_files
from .runner import OracleUnavailable, Outcome, check, oracle_view

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REGENERATE = GOLDEN / "regenerate.py"
# Fields of a pod or node whose removal keeps the object valid; tried one at a time.
POD_PARTS = (
    ("spec", "affinity", "nodeAffinity"),
    ("spec", "affinity", "podAffinity"),
    ("spec", "affinity", "podAntiAffinity"),
    ("spec", "affinity"),
    ("spec", "topologySpreadConstraints"),
    ("spec", "tolerations"),
    ("spec", "nodeSelector"),
    ("spec", "initContainers"),
    ("spec", "overhead"),
    ("spec", "resources"),
    ("spec", "volumes"),
    ("spec", "hostNetwork"),
    ("spec", "priorityClassName"),
    ("spec", "schedulingGates"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "labels", "version"),
    ("status", "startTime"),
)
NODE_PARTS = (
    ("spec", "taints"),
    ("spec", "unschedulable"),
    ("status", "images"),
    ("metadata", "labels", "gpu"),
    ("metadata", "labels", "disk"),
    ("metadata", "labels", "gen"),
)
Log = Callable[[str], None]


def _first_problem(outcome: Outcome) -> Problem:
    order = {f"{pod['namespace']}/{pod['name']}": index for index, pod in enumerate(outcome.ours)}
    problems = [problem for problem in outcome.comparison.problems if problem.kind != ATTEMPTS] or list(
        outcome.comparison.problems
    )
    return min(problems, key=lambda problem: order.get(problem.key, len(order)))


def minimize(
    objects: Sequence[Manifest], config: Manifest, oracle: Path, log: Log = print
) -> tuple[list[Manifest], Manifest, Problem] | None:
    """The smallest cluster found on which the first differing pod still differs in the same way: (objects,
    config, the difference), or None when the difference does not show again."""
    first = check(objects, config, oracle, confirm_runs=1)
    if first.agrees:
        return None
    target = _first_problem(first)
    log(f"target: {target.key} ({target.kind}); {len(objects)} objects")

    def still_differs(candidate: Sequence[Manifest]) -> bool:
        # kube-oracle waits for ever on a cluster without nodes.
        if not any(_pod_key(obj) == target.key for obj in candidate) or not any(
            obj.get("kind") == "Node" for obj in candidate
        ):
            return False
        try:
            outcome = check(candidate, config, oracle, confirm_runs=1)
        except OracleUnavailable as error:
            # A cut the oracle cannot run (it never settles) is not a smaller case.
            log(f"oracle failed on a candidate: {str(error).splitlines()[0][:200]}")
            return False
        return any(problem.key == target.key and problem.kind == target.kind for problem in outcome.comparison.problems)

    current = list(objects)
    pinned = _pin(current, first, target.key)
    if pinned != current and still_differs(pinned):
        current = pinned
        log(f"pinned the pods placed before it: still differs ({len(current)} objects)")
    current = _drop_units(current, still_differs, log)
    current = _drop_unreferenced(current, still_differs)
    current = _drop_parts(current, still_differs, log)
    log(f"done: {len(current)} objects")
    return current, config, target


def _pod_key(obj: Manifest) -> str | None:
    if obj.get("kind") != "Pod":
        return None
    return f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"


def _pin(objects: Sequence[Manifest], outcome: Outcome, target: str) -> list[Manifest]:
    """Pods both placed alike, scheduled before the target by kubesched, become running pods on that node."""
    ours = {f"{pod['namespace']}/{pod['name']}": pod for pod in outcome.ours}
    order = list(ours)
    before = set(order[: order.index(target)]) if target in order else set()
    placed = {
        f"{pod['namespace']}/{pod['name']}": pod["node"]
        for pod in outcome.oracle_pods
        if pod["node"] is not None and ours.get(f"{pod['namespace']}/{pod['name']}", {}).get("node") == pod["node"]
    }
    pinned: list[Manifest] = []
    for obj in objects:
        key = _pod_key(obj)
        if key is not None and key in before and key in placed and not obj["spec"].get("nodeName"):
            obj = copy.deepcopy(obj)
            obj["spec"]["nodeName"] = placed[key]
            obj["status"] = {"phase": "Running"}
            # Running pods precede pending ones in the file, as the generator writes them.
        pinned.append(obj)
    running = [obj for obj in pinned if obj.get("kind") != "Pod" or obj["spec"].get("nodeName")]
    pending = [obj for obj in pinned if obj.get("kind") == "Pod" and not obj["spec"].get("nodeName")]
    return running + pending


def _units(objects: Sequence[Manifest]) -> list[list[int]]:
    """Groups of object indexes dropped together: a node with the pods bound to it; each other pod; each PDB."""
    nodes = {obj["metadata"]["name"]: i for i, obj in enumerate(objects) if obj.get("kind") == "Node"}
    groups: dict[int, list[int]] = {i: [i] for i in nodes.values()}
    units: list[list[int]] = []
    for i, obj in enumerate(objects):
        kind = obj.get("kind")
        if kind == "Pod":
            bound = obj["spec"].get("nodeName")
            if bound in nodes:
                groups[nodes[bound]].append(i)
            units.append([i])
        elif kind == "PodDisruptionBudget":
            units.append([i])
    return list(groups.values()) + units


def _without(objects: Sequence[Manifest], dropped: set[int]) -> list[Manifest]:
    return [obj for i, obj in enumerate(objects) if i not in dropped]


def _drop_units(
    objects: list[Manifest], still_differs: Callable[[Sequence[Manifest]], bool], log: Log
) -> list[Manifest]:
    """Delta debugging (ddmin) over :func:`_units`: chunks first, then ever smaller ones."""
    current = objects
    chunks = 2
    while True:
        units = _units(current)
        if len(units) < 1:
            return current
        chunks = min(chunks, len(units))
        size = -(-len(units) // chunks)
        reduced = False
        for start in range(0, len(units), size):
            dropped = {index for unit in units[start : start + size] for index in unit}
            candidate = _without(current, dropped)
            if len(candidate) < len(current) and still_differs(candidate):
                current = candidate
                log(f"dropped {len(dropped)} object(s): {len(current)} left")
                chunks = max(chunks - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunks >= len(units):
                return current
            chunks = min(chunks * 2, len(units))


def _drop_unreferenced(objects: list[Manifest], still_differs: Callable[[Sequence[Manifest]], bool]) -> list[Manifest]:
    text = dump_manifests([obj for obj in objects if obj.get("kind") in ("Pod", "PodDisruptionBudget")])
    kept = [
        obj
        for obj in objects
        if obj.get("kind") not in ("PriorityClass", "Namespace", "RuntimeClass")
        or f"priorityClassName: {obj['metadata']['name']}" in text
        or f"runtimeClassName: {obj['metadata']['name']}" in text
        or f"namespace: {obj['metadata']['name']}" in text
        or obj["metadata"]["name"] in text
    ]
    return kept if len(kept) < len(objects) and still_differs(kept) else objects


def _drop_parts(
    objects: list[Manifest], still_differs: Callable[[Sequence[Manifest]], bool], log: Log
) -> list[Manifest]:
    current = objects
    for index in range(len(current)):
        kind = current[index].get("kind")
        parts = POD_PARTS if kind == "Pod" else NODE_PARTS if kind == "Node" else ()
        for path in parts:
            candidate_object = _dropped_part(current[index], path)
            if candidate_object is None:
                continue
            candidate = [*current[:index], candidate_object, *current[index + 1 :]]
            if still_differs(candidate):
                current = candidate
                log(f"dropped {'.'.join(path)} of {kind} {current[index]['metadata']['name']}")
        if kind == "Pod":
            containers = current[index]["spec"]["containers"]
            for position in range(len(containers) - 1, 0, -1):
                candidate_object = copy.deepcopy(current[index])
                del candidate_object["spec"]["containers"][position]
                candidate = [*current[:index], candidate_object, *current[index + 1 :]]
                if still_differs(candidate):
                    current = candidate
    return current


def _dropped_part(obj: Manifest, path: Sequence[str]) -> Manifest | None:
    parent = obj
    for key in path[:-1]:
        child = parent.get(key)
        if not isinstance(child, dict):
            return None
        parent = child
    if path[-1] not in parent:
        return None
    changed = copy.deepcopy(obj)
    target = changed
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    if tuple(path) == ("spec", "overhead"):
        # The overhead is the named RuntimeClass's: without one the API server would set it again.
        changed["spec"].pop("runtimeClassName", None)
    return changed


def write_golden(name: str, objects: Sequence[Manifest], config: Manifest, header: str = "") -> Path:
    """``tests/golden/<name>/`` with the case and the oracle's answers (``regenerate.py``); returns the path."""
    directory = GOLDEN / name
    # regenerate.py feeds cluster.yaml to the oracle as it is: only what kube-scheduler's informers would list.
    cluster, _ = write_files(directory, oracle_view(objects), config)
    if header:
        lines = "".join(f"# {line}\n" for line in header.splitlines())
        cluster.write_text(lines + cluster.read_text())
    subprocess.run([sys.executable, str(REGENERATE), name], check=True)
    return directory
