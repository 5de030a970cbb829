"""Why a pod went where it went: every node, every Filter and Score plugin, the choice, preemption.

Built from the scheduler's :class:`~kubesched.scheduler.results.AttemptRecord` values (the same records
``simulate -o json`` and the audit trail read; nothing is recorded twice) and the profile's plugin lists
and weights. Called by ``kubesched explain`` (:mod:`kubesched.cli.explain`) and by the HTML report
(:mod:`kubesched.explain.html`); :mod:`kubesched.explain.render` turns the result into text and JSON.

What the records allow us to say, and how (kube-scheduler v1.35's cycle):

- Filter plugins run in the profile's order and a node stops at its first rejection: for a rejected node
  the plugins before the rejecting one passed, the rejecting one says why, the ones after did not run.
  Plugins PreFilter skipped did not run on any node. A node that passed every filter is feasible.
- A node with no verdict was not evaluated: PreFilter narrowed the nodes, the pod's nominated node was
  tried first and fitted, or enough feasible nodes were found (``percentageOfNodesToScore``).
- A PreFilter rejection (or a PreEnqueue one: the pod was never attempted) stops the cycle before any
  Filter ran: no node has a Filter verdict.
- Score: each plugin's raw score, the score after NormalizeScore, its weight and the weighted value; the
  total is their sum. With one feasible node kube-scheduler does not score at all. The highest total wins;
  ties are broken uniformly at random (kube-scheduler's reservoir sampling; seeded in a simulation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubesched.config.types import ProfileConfig
from kubesched.framework.preemption_report import PreemptionReport
from kubesched.framework.status import CODE_NAMES, Status
from kubesched.scheduler.results import AttemptRecord

PASSED = "passed"
REJECTED = "rejected"
NOT_RUN = "not-run"
SKIPPED = "skipped"

# A node's outcome in one attempt.
CHOSEN = "chosen"
FEASIBLE = "feasible"
NODE_REJECTED = "rejected"
NOT_EVALUATED = "not-evaluated"


NOT_EVALUATED_REASON = (
    "PreFilter narrowed the nodes, the nominated node was tried first and fitted, "
    "or enough feasible nodes were found first"
)


@dataclass(frozen=True, slots=True)
class StatusView:
    plugin: str
    code: str
    reasons: tuple[str, ...]

    @classmethod
    def of(cls, status: Status) -> StatusView:
        return cls(status.plugin, CODE_NAMES[status.code], status.reasons)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)


@dataclass(frozen=True, slots=True)
class FilterVerdict:
    plugin: str
    verdict: str  # passed | rejected | not-run | skipped
    code: str = ""  # for rejected
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoreEntry:
    plugin: str
    raw: int | None  # None: PreScore told the plugin to skip
    normalized: int | None
    weight: int
    weighted: int | None


@dataclass(slots=True)
class NodeExplanation:
    name: str
    outcome: str  # chosen | feasible | rejected | not-evaluated
    filters: list[FilterVerdict] = field(default_factory=list)
    reason: str = ""  # why it was rejected (or not evaluated)
    # A rejection after Filter: Reserve, Permit or binding refused the chosen node.
    later_rejection: StatusView | None = None
    scores: list[ScoreEntry] = field(default_factory=list)
    total: int | None = None


@dataclass(slots=True)
class Selection:
    """How the node was picked: ``rule`` is highest-total, single-feasible-node or none."""

    rule: str
    chosen: str | None
    highest_total: int | None = None
    tied: tuple[str, ...] = ()
    explanation: str = ""


@dataclass(slots=True)
class AttemptExplanation:
    attempt: int
    result: str
    message: str
    chosen_node: str | None
    node: str | None
    pre_enqueue: StatusView | None
    pre_filter: StatusView | None
    skipped_filter: tuple[str, ...]
    skipped_score: tuple[str, ...]
    evaluated_nodes: int
    feasible_nodes: int
    nodes: list[NodeExplanation]
    selection: Selection
    preemption: PreemptionReport | None


@dataclass(slots=True)
class PodExplanation:
    namespace: str
    name: str
    uid: str
    profile: str
    filter_plugins: tuple[str, ...]
    score_plugins: tuple[tuple[str, int], ...]  # (name, weight)
    attempts: list[AttemptExplanation]
    preempted: tuple[str, ...] = ()  # pods evicted for this one
    bound_in_manifests: str | None = None  # spec.nodeName was already set: nothing was scheduled
    target: str = "node"  # what the profile's nodes are: "node", or "cluster" for a cluster profile

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def last(self) -> AttemptExplanation | None:
        return self.attempts[-1] if self.attempts else None


def profile_plugins(profile: ProfileConfig) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """The profile's Filter plugins in the order they run, and its Score plugins with their weights."""
    filters = tuple(ref.name for ref in profile.plugins.get("filter", ()))
    scores = tuple((ref.name, ref.weight or 1) for ref in profile.plugins.get("score", ()))
    return filters, scores


def explain_attempt(record: AttemptRecord, profile: ProfileConfig, node_names: Sequence[str]) -> AttemptExplanation:
    """One attempt, node by node (``node_names``: every node of the cluster, in the order to show them)."""
    filters, scores = profile_plugins(profile)
    skipped_filter = record.skipped_filter_plugins
    pre_enqueue = StatusView.of(record.pre_enqueue_status) if record.pre_enqueue_status is not None else None
    pre_filter = StatusView.of(record.pre_filter_status) if record.pre_filter_status is not None else None
    passing = set(record.scored_nodes)
    if not passing and record.chosen_node is not None:
        passing = {record.chosen_node}  # one feasible node: kube-scheduler skips scoring
    index = {name: i for i, name in enumerate(record.scored_nodes)}
    nodes: list[NodeExplanation] = []
    for name in node_names:
        stopped = pre_enqueue is not None or pre_filter is not None
        nodes.append(_node(name, record, filters, scores, skipped_filter, passing, index, stopped=stopped))
    return AttemptExplanation(
        attempt=record.attempts,
        result=record.result,
        message=record.message,
        chosen_node=record.chosen_node,
        node=record.node,
        pre_enqueue=pre_enqueue,
        pre_filter=pre_filter,
        skipped_filter=tuple(name for name in filters if name in skipped_filter),
        skipped_score=tuple(name for name, _ in scores if name in record.skipped_score_plugins),
        evaluated_nodes=record.evaluated_nodes,
        feasible_nodes=record.feasible_nodes,
        nodes=nodes,
        selection=_selection(record),
        preemption=record.preemption,
    )


def _node(
    name: str,
    record: AttemptRecord,
    filters: Sequence[str],
    scores: Sequence[tuple[str, int]],
    skipped: frozenset[str],
    passing: set[str],
    index: Mapping[str, int],
    *,
    stopped: bool,
) -> NodeExplanation:
    if stopped:
        # Rejected before any node was looked at: no Filter ran anywhere.
        status = record.pre_filter_status or record.pre_enqueue_status
        reason = status.message if status is not None else ""
        return NodeExplanation(name, NODE_REJECTED, [FilterVerdict(p, NOT_RUN) for p in filters], reason=reason)
    status = record.node_to_status.get(name)
    if status is not None and status.plugin in filters and name not in passing:
        verdicts: list[FilterVerdict] = []
        reached = False
        for plugin in filters:
            if plugin in skipped:
                verdicts.append(FilterVerdict(plugin, SKIPPED))
            elif reached:
                verdicts.append(FilterVerdict(plugin, NOT_RUN))
            elif plugin == status.plugin:
                verdicts.append(FilterVerdict(plugin, REJECTED, CODE_NAMES[status.code], status.reasons))
                reached = True
            else:
                verdicts.append(FilterVerdict(plugin, PASSED))
        return NodeExplanation(name, NODE_REJECTED, verdicts, reason=f"{status.plugin}: {status.message}")
    if name in passing or (status is not None and name == record.chosen_node):
        verdicts = [FilterVerdict(p, SKIPPED if p in skipped else PASSED) for p in filters]
        outcome = CHOSEN if name == record.chosen_node else FEASIBLE
        node = NodeExplanation(name, outcome, verdicts)
        if status is not None:
            # The chosen node passed Filter, then Reserve, Permit or binding refused it.
            node.outcome = NODE_REJECTED
            node.later_rejection = StatusView.of(status)
            node.reason = f"{status.plugin or 'binding'}: {status.message}"
        if name in index:
            node.scores, node.total = _scores(record, index[name], scores)
        return node
    if status is not None:
        # A status from no Filter plugin of this profile (e.g. an Error): say what it was.
        return NodeExplanation(name, NODE_REJECTED, [FilterVerdict(p, NOT_RUN) for p in filters], reason=status.message)
    nominated = record.pod.pod.status.nominated_node_name
    if nominated and nominated == record.chosen_node and record.evaluated_nodes == 1:
        reason = f"the pod's nominated node {nominated} was tried first and fitted"
    else:
        reason = NOT_EVALUATED_REASON
    return NodeExplanation(name, NOT_EVALUATED, [FilterVerdict(p, NOT_RUN) for p in filters], reason=reason)


def _scores(record: AttemptRecord, i: int, scores: Sequence[tuple[str, int]]) -> tuple[list[ScoreEntry], int | None]:
    entries: list[ScoreEntry] = []
    for plugin, weight in scores:
        normalized_values = record.plugin_scores.get(plugin)
        if normalized_values is None:
            entries.append(ScoreEntry(plugin, None, None, weight, None))
            continue
        normalized = int(normalized_values[i])
        raw_values = record.raw_scores.get(plugin)
        raw = int(raw_values[i]) if raw_values is not None else normalized
        entries.append(ScoreEntry(plugin, raw, normalized, weight, normalized * weight))
    total = int(record.totals[i]) if record.totals is not None else None
    return entries, total


def _selection(record: AttemptRecord) -> Selection:
    chosen = record.chosen_node
    if chosen is None:
        return Selection("none", None, explanation="no node was chosen")
    if record.totals is None or not record.scored_nodes:
        return Selection(
            "single-feasible-node",
            chosen,
            explanation=f"{chosen} was the only feasible node evaluated, so no Score plugin ran (as kube-scheduler)",
        )
    totals = [int(value) for value in record.totals.tolist()]
    best = max(totals)
    tied = tuple(name for name, total in zip(record.scored_nodes, totals, strict=True) if total == best)
    if len(tied) == 1:
        text = f"{chosen} has the highest total score ({best})"
    else:
        others = ", ".join(name for name in tied if name != chosen)
        text = (
            f"{chosen} has the highest total score ({best}), tied with {others}; ties are broken uniformly at "
            "random, as kube-scheduler does (this simulation's random source is seeded: --seed)"
        )
    return Selection("highest-total", chosen, best, tied, text)


def explain_pod(
    records: Sequence[AttemptRecord],
    profile: ProfileConfig,
    node_names: Sequence[str],
    *,
    preempted: Sequence[str] = (),
    target: str = "node",
) -> PodExplanation:
    """Every attempt of one pod (``records`` in the order they happened; at least one); ``target`` "cluster"
    when the profile's nodes are member clusters."""
    pod = records[-1].pod
    filters, scores = profile_plugins(profile)
    return PodExplanation(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        profile=profile.scheduler_name,
        filter_plugins=filters,
        score_plugins=scores,
        attempts=[explain_attempt(record, profile, node_names) for record in records],
        preempted=tuple(preempted),
        target=target,
    )
