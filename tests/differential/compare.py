"""Pod by pod: kubesched's ``simulate`` entries against kube-oracle's (kube-scheduler v1.35's own code).

Used by the golden harness (``tests/integration/test_golden_oracle.py``, on committed oracle outputs) and by the
differential runner (:mod:`.runner`, on fresh ones). For every pod the oracle reports, kubesched must report the
same result and the same FailedScheduling message, character for character, and no pod the oracle does not;
where the oracle needed at most one attempt, the same number of attempts.

Nodes are compared where the oracle's choice is unambiguous. kube-scheduler breaks equal scores at random, so a
choice is a tie when the oracle chose different nodes over several runs (``seen``) or when kubesched's own totals
tie among nodes that include the oracle's. A pod whose outcome differed between the oracle's own runs (its
``alternatives``: kube-scheduler's preemption and binding run off the cycle, and how soon what they write comes
back varies) may have any outcome the oracle gave it. Where the two then choose differently, the clusters they go on to
schedule differ, so nodes of later pods are not compared (results and messages still are). The differential
runner avoids that by having kubesched replay the oracle's choice among its tied nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RESULT = "result"
MESSAGE = "message"
NODE = "node"
ATTEMPTS = "attempts"
MISSING = "missing"
EXTRA = "extra"


@dataclass(frozen=True)
class Problem:
    """One difference: the pod ("namespace/name", empty for the run as a whole), its kind and the words."""

    key: str
    kind: str
    text: str


@dataclass
class Comparison:
    """What one run's comparison found; ``problems`` empty means kubesched agrees. ``identical`` pods had the
    same result, message and node (or no node); ``nodes_tied`` pods were placed where a tie allowed."""

    pods: int = 0
    identical: int = 0
    nodes_exact: int = 0
    nodes_tied: int = 0
    nodes_unchecked: int = 0
    problems: list[Problem] = field(default_factory=list)
    # Differences of pods kube-oracle cannot judge (tests/differential/oracle_artifacts.py): reported apart.
    set_aside_problems: list[Problem] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [problem.text for problem in self.problems]

    def set_aside(self, unjudged: Callable[[str], bool]) -> None:
        """Move the problems of the pods ``unjudged`` names from :attr:`problems` to :attr:`set_aside_problems`."""
        kept = [problem for problem in self.problems if not (problem.key and unjudged(problem.key))]
        self.set_aside_problems += [problem for problem in self.problems if problem not in kept]
        self.problems = kept

    def mismatched_pods(self) -> list[str]:
        """The pods with at least one problem, in the order found (the run's own problems left out)."""
        return list(dict.fromkeys(problem.key for problem in self.problems if problem.key))


def key_of(pod: Mapping[str, Any]) -> str:
    return f"{pod['namespace']}/{pod['name']}"


def tied_best(pod: Mapping[str, Any]) -> set[str]:
    """The nodes sharing kubesched's highest total (empty when it did not score: one feasible node)."""
    totals: Mapping[str, int] = pod.get("totals") or {}
    if not totals:
        return set()
    best = max(totals.values())
    return {node for node, total in totals.items() if total == best}


def as_oracle_reports(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """Our entry as kube-oracle words it. kube-oracle reports a pod held at PreEnqueue as Unschedulable with the
    PreEnqueue plugin's message; kubesched reports a gated pod as its PodScheduled condition reads (the API
    server's SchedulingGated) and keeps that message under ``preEnqueue``, which is what is compared."""
    if pod["result"] != "SchedulingGated":
        return pod
    return {**pod, "result": "Unschedulable", "message": ", ".join(pod["preEnqueue"]["reasons"])}


def compare_pods(
    oracle_pods: Sequence[Mapping[str, Any]],
    ours: Sequence[Mapping[str, Any]],
    seen: Mapping[str, Sequence[str]] | None = None,
    alternatives: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Comparison:
    """``oracle_pods``: kube-oracle's ``pods``; ``ours``: kubesched's JSON entries (``record_to_json``);
    ``seen``: the nodes the oracle chose for each pod over several runs, when known; ``alternatives``: for the pods
    whose outcome varied over those runs, each outcome seen (``result``, ``message``, ``attempts``)."""
    by_key = {key_of(pod): pod for pod in ours}
    found = Comparison(pods=len(oracle_pods))
    extra = sorted(set(by_key) - {key_of(pod) for pod in oracle_pods})
    for key in extra:
        found.problems.append(Problem(key, EXTRA, f"kubesched reports a pod the oracle does not: {key}"))
    diverged = False
    # Walked in kubesched's scheduling order, so that "later" means scheduled after a differing tie.
    position = {key: index for index, key in enumerate(by_key)}
    for expected in sorted(oracle_pods, key=lambda pod: position.get(key_of(pod), len(position))):
        key = key_of(expected)
        got = by_key.get(key)
        if got is None:
            found.problems.append(Problem(key, MISSING, f"{key}: missing from kubesched's report"))
            continue
        got = as_oracle_reports(got)
        before = len(found.problems)
        accepted = (alternatives or {}).get(key, ())
        if any(_same_outcome(got, other) for other in accepted):
            expected = {**expected, "result": got["result"], "message": got["message"], "attempts": got["attempts"]}
        if got["result"] != expected["result"]:
            found.problems.append(
                Problem(key, RESULT, f"{key}: result {got['result']!r}, oracle {expected['result']!r}")
            )
        if got["message"] != expected["message"]:
            text = f"{key}: message\n  kubesched: {got['message']!r}\n  oracle:    {expected['message']!r}"
            found.problems.append(Problem(key, MESSAGE, text))
        # One attempt (or none, for a gated pod) leaves nothing to timing; more depend on backoff against the
        # oracle's wall clock and are not compared.
        if expected["attempts"] <= 1 and got["attempts"] != expected["attempts"]:
            text = f"{key}: {got['attempts']} attempts, oracle {expected['attempts']}"
            found.problems.append(Problem(key, ATTEMPTS, text))
        tied = False
        if expected["node"] is not None and got["node"] is not None and not diverged:
            oracle_choices = set(seen.get(key, ())) if seen is not None else set()
            oracle_choices.add(expected["node"])
            ours_tied = tied_best(got)
            ambiguous = len(oracle_choices) > 1 or (len(ours_tied) > 1 and expected["node"] in ours_tied)
            if got["node"] == expected["node"]:
                if ambiguous:
                    found.nodes_tied += 1
                    tied = True
                else:
                    found.nodes_exact += 1
            elif ambiguous and got["node"] in oracle_choices | ours_tied:
                found.nodes_tied += 1
                tied = True
                diverged = True
            else:
                text = (
                    f"{key}: node {got['node']!r}, oracle {sorted(oracle_choices)} (kubesched totals {got['totals']})"
                )
                found.problems.append(Problem(key, NODE, text))
        elif expected["node"] is not None and got["node"] is not None:
            found.nodes_unchecked += 1
        if len(found.problems) == before and not tied:
            found.identical += 1
    return found


def _same_outcome(got: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """The outcome matches: result and message, and attempts where the oracle needed at most one."""
    if (got["result"], got["message"]) != (other["result"], other["message"]):
        return False
    return bool(other["attempts"] > 1 or got["attempts"] == other["attempts"])


def varying_outcomes(runs: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Over several oracle runs' ``pods``: for each pod whose result, message or attempts differed, every
    outcome seen (the form of ``tests/golden/<scenario>/oracle-outcomes.json``)."""
    seen: dict[str, dict[tuple[str, str, int], int]] = {}
    for pods in runs:
        for pod in pods:
            counts = seen.setdefault(key_of(pod), {})
            outcome = (pod["result"], pod["message"], pod["attempts"])
            counts[outcome] = counts.get(outcome, 0) + 1
    return {
        key: [
            {"result": result, "message": message, "attempts": attempts, "runs": count}
            for (result, message, attempts), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        ]
        for key, counts in seen.items()
        if len(counts) > 1
    }


def nodes_seen(runs: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Over several oracle runs' ``pods``: the nodes each pod was placed on."""
    seen: dict[str, set[str]] = {}
    for pods in runs:
        for pod in pods:
            if pod.get("node"):
                seen.setdefault(key_of(pod), set()).add(pod["node"])
    return {key: sorted(nodes) for key, nodes in seen.items()}
