"""The preemption search shared by every preemption plugin: candidate nodes, the dry run, the choice of one.

kube-scheduler keeps this in ``framework/preemption`` (its ``Evaluator``); here it is a set of functions that
DefaultPreemption (:mod:`.default_preemption`) calls with its own victim selection, so a plugin with another
selection can reuse them. Nothing here writes to the cluster: eviction is :mod:`.executor`'s.

- :func:`potential_nodes`: the nodes whose Filter status is Unschedulable, i.e. where removing pods may help;
- :func:`dry_run_preemption`: victim selection on those nodes from an offset, wrapping around, until enough
  candidates are found (at least one that violates no PodDisruptionBudget); :func:`search_candidates` is that
  search for any way of evaluating a node (DefaultPreemption's columnar path uses it too);
- :func:`select_candidate` / :func:`pick_one_node_for_preemption`: upstream's ordered tie-breakers;
- :func:`preemption_fit_error`: the "0/N nodes are available: ..." text when no node is a candidate.

Upstream dry-runs nodes in parallel and stops the others once enough candidates are in; the same nodes in
the same order one after the other give the same candidates (parallel workers may find a few more), and
candidates keep the order in which they were found, which is also how ties are finally broken here (upstream
breaks them by Go map order, i.e. at random).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo

NOT_HELPFUL = "Preemption is not helpful for scheduling"
"""The status of every node the dry run did not evaluate (those preemption cannot help on)."""

MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the preemptor fits on once ``victims`` (most important first) are evicted."""

    name: str
    victims: tuple[PodInfo, ...]
    num_pdb_violations: int = 0


SelectVictims = Callable[[CycleState, PodInfo, NodeInfo], tuple[list[PodInfo], int, Status | None]]
"""(state copy, preemptor, node copy) -> (victims most important first, PDB violations, status: None = found)."""


def status_of(node_to_status: Mapping[str, Status], name: str) -> Status:
    """A node's Filter status; a node the map does not name was not evaluated: UnschedulableAndUnresolvable,
    as upstream's NodeToStatus reports absent nodes by default."""
    status = node_to_status.get(name)
    return status if status is not None else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def potential_nodes(all_nodes: Sequence[NodeInfo], node_to_status: Mapping[str, Status]) -> list[NodeInfo]:
    """The nodes, in snapshot order, that failed with Unschedulable: removing pods may make room there."""
    return [info for info in all_nodes if status_of(node_to_status, info.name).code is Code.UNSCHEDULABLE]


EvaluateNode = Callable[[int], tuple[list[PodInfo], int, Status | None]]
"""index among the nodes dry-run -> (victims most important first, PDB violations, status: None = found)."""


def dry_run_preemption(
    select_victims: SelectVictims,
    state: CycleState,
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    offset: int,
    num_candidates: int,
) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
    """Select victims on ``nodes`` starting at ``offset`` (wrapping), each on a copy of the node and of
    ``state``, until there are ``num_candidates`` candidates of which at least one violates no PDB (see
    :func:`search_candidates`)."""

    def evaluate(index: int) -> tuple[list[PodInfo], int, Status | None]:
        return select_victims(state.clone(), pod, nodes[index].clone())

    return search_candidates(evaluate, nodes, offset, num_candidates)


def search_candidates(
    evaluate: EvaluateNode, nodes: Sequence[NodeInfo], offset: int, num_candidates: int
) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
    """Evaluate ``nodes`` starting at ``offset`` (wrapping) until there are ``num_candidates`` candidates of
    which at least one violates no PDB: the search order and stop of every dry run, whichever way it
    evaluates a node (per node on copies, or DefaultPreemption's columnar path).

    Returns the candidates (those violating no PDB first, each group in the order found, each capped at
    ``num_candidates`` as upstream's lists are), the status of every node that is not a candidate, and the
    Error statuses among them.
    """
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    errors: list[Status] = []
    count = len(nodes)
    for i in range(count):
        index = (offset + i) % count
        name = nodes[index].name
        victims, violations, status = evaluate(index)
        if status is None and victims:
            group = non_violating if violations == 0 else violating
            if len(group) < num_candidates:
                group.append(Candidate(name, tuple(victims), violations))
            if non_violating and len(non_violating) + len(violating) >= num_candidates:
                break
            continue
        if status is None:
            status = Status.error(f'expected at least one victim pod on node "{name}"')
        if status.code is Code.ERROR:
            errors.append(status)
        statuses[name] = status
    return non_violating + violating, statuses, errors


def preemption_fit_error(num_all_nodes: int, statuses: Mapping[str, Status]) -> str:
    """kube-scheduler's FitError text for a preemption that found no candidate: the reasons of the nodes it
    tried, and "Preemption is not helpful for scheduling" for every other node."""
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    absent = num_all_nodes - len(statuses)
    if absent > 0:
        counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + absent
    message = f"0/{num_all_nodes} nodes are available:"
    if counts:
        # Sorted as strings, as Go's sort.Strings does ("10 x" before "2 x").
        message += " " + ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items())) + "."
    return message


def select_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
    """The candidate :func:`pick_one_node_for_preemption` prefers (None when there is none)."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    by_name = {candidate.name: candidate for candidate in candidates}
    return by_name[pick_one_node_for_preemption(candidates)]


def _start_time(pod: PodInfo) -> float:
    # A pod with no start time has not started yet; upstream takes "now" for it, later than every real start.
    start = pod.pod.status.start_time
    return start if start is not None else float("inf")


def more_important_pod(a: PodInfo, b: PodInfo) -> bool:
    """Upstream's MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return _start_time(a) < _start_time(b)


def importance_key(pod: PodInfo) -> tuple[int, float]:
    """Sort key putting the most important pod first (the order :func:`more_important_pod` defines)."""
    return (-pod.priority, _start_time(pod))


def earliest_start_of_highest_priority(victims: Sequence[PodInfo]) -> float:
    """The earliest start time among the victims of the highest priority (upstream's GetEarliestPodStartTime)."""
    highest = max(victim.priority for victim in victims)
    return min(_start_time(victim) for victim in victims if victim.priority == highest)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> str:
    """The node to preempt on, by kube-scheduler's criteria, each applied only to the nodes tied on the ones
    before: fewest PDB violations; lowest priority of the most important victim; smallest sum of victim
    priorities (each shifted by 2^31 so that more negative-priority victims never look cheaper); fewest
    victims; latest start of the highest-priority victims; then the first candidate. Victims must be sorted
    most important first. ``""`` when there are no candidates."""
    if not candidates:
        return ""
    scores: tuple[Callable[[Candidate], float], ...] = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(victim.priority + MAX_INT32 + 1 for victim in c.victims),
        lambda c: -len(c.victims),
        lambda c: earliest_start_of_highest_priority(c.victims),
    )
    remaining = list(candidates)
    for score in scores:
        values = [score(candidate) for candidate in remaining]
        best = max(values)
        remaining = [candidate for candidate, value in zip(remaining, values, strict=True) if value == best]
        if len(remaining) == 1:
            break
    return remaining[0].name
