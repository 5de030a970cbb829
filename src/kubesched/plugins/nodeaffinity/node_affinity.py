"""NodeAffinity (PreFilter, Filter, PreScore, Score, NormalizeScore), kube-scheduler v1.35 behaviour.

- PreFilter: Skip when the pod has no nodeSelector, no required node affinity and the profile adds none.
  When every required term restricts ``metadata.name`` with In, the union over terms of each term's
  intersection is returned as a PreFilterResult; an empty union fails with UnschedulableAndUnresolvable
  "pod affinity terms conflict".
- Filter: the profile's ``addedAffinity`` first ("node(s) didn't match scheduler-enforced node
  affinity"), then nodeSelector AND required terms ("node(s) didn't match Pod's node affinity/selector"),
  both UnschedulableAndUnresolvable.
- PreScore: Skip when there are no preferred terms (pod or added); Score sums the weights of matching
  preferred terms; NormalizeScore is DefaultNormalizeScore (not reversed).

Batch forms answer each selector requirement for the whole batch from the class column of the one label
it reads (:mod:`kubesched.plugins.helper.node_selector_batch`), so a unique hostname label on every node
costs nothing; matchFields compares the batch's node names. The per-node methods are the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.errors import FieldError
from kubesched.framework.cycle_state import CycleState, no_writes
from kubesched.framework.events import (
    ActionType,
    AnyObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import BatchFilterResult, IntArray, NodeBatch
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PodShape, PreFilterResult
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.hints import as_nodes
from kubesched.plugins.helper.node_selector import (
    IN,
    OBJECT_NAME_FIELD,
    NodeSelector,
    PreferredTerms,
    RequiredNodeAffinity,
    aggregate_message,
    compile_node_selector,
    compile_preferred_terms,
)
from kubesched.plugins.helper.node_selector_batch import SelectorColumns
from kubesched.plugins.helper.normalize_score import default_normalize_score

if TYPE_CHECKING:
    from kubesched.framework.interface import (
        BatchFilterPlugin,
        BatchScorePlugin,
        EnqueueExtensions,
        Handle,
        NodeOnlyFilter,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
        ScoreNormalizer,
        SkipWrites,
    )

PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_AFFINITY
PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_AFFINITY
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

_POD_MISMATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
_ENFORCED_MISMATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
# filter_batch's status ids: 1 the enforced affinity, 2 the pod's own.
_FILTER_STATUSES = (_ENFORCED_MISMATCH, _POD_MISMATCH)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeAffinityArgs:
    """``NodeAffinityArgs``: ``addedAffinity`` is a NodeAffinity (required and/or preferred terms) that the
    profile applies to every pod on top of the pod's own."""

    added_affinity: dict[str, Any] | None = None

    def validate(self, path: str) -> list[FieldError]:
        if self.added_affinity is None:
            return []
        base = f"{path}.addedAffinity" if path else "addedAffinity"
        errors: list[FieldError] = []
        required = self.added_affinity.get(REQUIRED)
        if required is not None:
            errors.extend(compile_node_selector(required, f"{base}.{REQUIRED}").errors)
        preferred = self.added_affinity.get(PREFERRED)
        if preferred:
            errors.extend(compile_preferred_terms(preferred, f"{base}.{PREFERRED}")[1])
        return errors


def _node_affinity(pod: Pod) -> Mapping[str, Any]:
    affinity = pod.spec.affinity
    if not isinstance(affinity, Mapping):
        return {}
    node_affinity = affinity.get("nodeAffinity")
    return node_affinity if isinstance(node_affinity, Mapping) else {}


def required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    """component-helpers' GetRequiredNodeAffinity: nodeSelector plus the lazily parsed required terms."""
    required = _node_affinity(pod).get(REQUIRED)
    return RequiredNodeAffinity(
        tuple(sorted(pod.spec.node_selector.items())),
        compile_node_selector(required) if required is not None else None,
    )


def _pod_preferred_terms(pod: Pod) -> PreferredTerms | None:
    """The pod's preferred terms, None when it has none; raises ValueError on terms that do not parse."""
    preferred = _node_affinity(pod).get(PREFERRED)
    if preferred is None:
        return None
    terms, errors = compile_preferred_terms(preferred)
    if errors:
        raise ValueError(aggregate_message(errors))
    return terms


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: PreferredTerms | None

    def clone(self) -> _PreScoreState:
        return self


class NodeAffinity:
    """Filter on nodeSelector / required node affinity; score by preferred node affinity."""

    def __init__(self, args: NodeAffinityArgs | None, handle: Handle) -> None:
        del handle
        args = validated(args, NodeAffinityArgs)
        self.args = args
        self.added_selector: NodeSelector | None = None
        self.added_preferred: PreferredTerms | None = None
        added = args.added_affinity or {}
        if added.get(REQUIRED) is not None:
            self.added_selector = compile_node_selector(added[REQUIRED])
        if added.get(PREFERRED):
            self.added_preferred = compile_preferred_terms(added[PREFERRED])[0]
        self._columns = SelectorColumns()

    @property
    def name(self) -> str:
        return names.NODE_AFFINITY

    # ---- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        required = _node_affinity(pod.pod).get(REQUIRED)
        if required is None and self.added_selector is None and not pod.pod.spec.node_selector:
            return Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, required_node_affinity(pod.pod))
        terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
        if not isinstance(terms, list) or not terms:
            return None
        node_names: set[str] = set()
        for term in terms:
            term_names: set[str] | None = None
            fields = term.get("matchFields") if isinstance(term, Mapping) else None
            for requirement in fields if isinstance(fields, list) else ():
                if not isinstance(requirement, Mapping):
                    continue
                if requirement.get("key") == OBJECT_NAME_FIELD and requirement.get("operator") == IN:
                    values = requirement.get("values")
                    wanted = {v for v in values if isinstance(v, str)} if isinstance(values, list) else set()
                    term_names = wanted if term_names is None else term_names & wanted
            if term_names is None:
                # A term without a node-name requirement admits every node; terms are ORed.
                return None
            node_names |= term_names
        if not node_names:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return PreFilterResult(frozenset(node_names))

    def pre_filter_skip(self, shape: PodShape) -> SkipWrites | None:
        # Skip, writing nothing, when neither the pod nor the profile's addedAffinity requires anything.
        if self.added_selector is not None or shape & (PodShape.NODE_AFFINITY | PodShape.NODE_SELECTOR):
            return None
        return no_writes

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # ---- Filter --------------------------------------------------------------------------------

    def _required(self, state: CycleState, pod: PodInfo) -> RequiredNodeAffinity:
        found = state.get(PRE_FILTER_STATE_KEY, RequiredNodeAffinity)
        # Without PreFilter (disabled in the profile) compute it here, as upstream does.
        return found if found is not None else required_node_affinity(pod.pod)

    def _filter(self, required: RequiredNodeAffinity, labels: Mapping[str, str], name: str) -> Status | None:
        if self.added_selector is not None and not self.added_selector.matches(labels, name):
            return _ENFORCED_MISMATCH
        if not required.matches(labels, name):
            return _POD_MISMATCH
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._filter(self._required(state, pod), node_info.labels, node_info.name)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> BatchFilterResult | None:
        required = self._required(state, pod)
        columns = self._columns
        matched = columns.required(nodes, required)
        # Status ids as in _filter: the enforced affinity is checked first, so a node failing both reports it.
        if self.added_selector is None:
            if matched.all():
                return None
            return BatchFilterResult(np.where(matched, 0, 2), _FILTER_STATUSES)
        enforced = columns.selector(nodes, self.added_selector)
        if enforced.all() and matched.all():
            return None
        return BatchFilterResult(np.where(enforced, np.where(matched, 0, 2), 1), _FILTER_STATUSES)

    # ---- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        try:
            preferred = _pod_preferred_terms(pod.pod)
        except ValueError as exc:
            return Status(Code.ERROR, str(exc))
        if preferred is None and self.added_preferred is None:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(preferred))
        return None

    def pre_score_skip(self, shape: PodShape) -> SkipWrites | None:
        # Skip, writing nothing, when neither the pod nor the profile's addedAffinity prefers anything.
        if self.added_preferred is not None or shape & PodShape.NODE_AFFINITY:
            return None
        return no_writes

    def _preferred(self, state: CycleState, pod: PodInfo) -> PreferredTerms | None:
        found = state.get(PRE_SCORE_STATE_KEY, _PreScoreState)
        return found.preferred if found is not None else _pod_preferred_terms(pod.pod)

    def _score(self, preferred: PreferredTerms | None, labels: Mapping[str, str], name: str) -> int:
        count = 0
        if self.added_preferred is not None:
            count += self.added_preferred.score(labels, name)
        if preferred is not None:
            count += preferred.score(labels, name)
        return count

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return self._score(self._preferred(state, pod), node_info.labels, node_info.name)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        preferred = self._preferred(state, pod)
        scores = np.zeros(len(nodes), dtype=np.int64)
        if self.added_preferred is not None:
            scores += self._columns.preferred_scores(nodes, self.added_preferred)
        if preferred is not None:
            scores += self._columns.preferred_scores(nodes, preferred)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    def filter_ignores_node_pods(self) -> bool:
        return True

    # ---- Queueing hints ------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeAdd|NodeLabelChange"
                ),
                self.is_schedulable_after_node_change,
            )
        ]

    def is_schedulable_after_node_change(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue for a new matching node, or a node whose labels changed from not matching to matching."""
        try:
            original, modified = as_nodes(old, new)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        labels, name = modified.metadata.labels, modified.metadata.name
        if self.added_selector is not None and not self.added_selector.matches(labels, name):
            return QueueingHint.SKIP
        required = required_node_affinity(pod)
        matched, had_errors = required.match(labels, name)
        if had_errors:
            return QueueingHint.QUEUE
        if not matched:
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        was_matched, had_errors = required.match(original.metadata.labels, original.metadata.name)
        if had_errors:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP if was_matched else QueueingHint.QUEUE


if TYPE_CHECKING:

    def _conforms(
        plugin: NodeAffinity,
    ) -> tuple[
        PreFilterPlugin,
        BatchFilterPlugin,
        NodeOnlyFilter,
        PreScorePlugin,
        BatchScorePlugin,
        ScoreNormalizer,
        EnqueueExtensions,
    ]:
        return plugin, plugin, plugin, plugin, plugin, plugin, plugin
