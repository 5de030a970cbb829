"""DefaultPreemption (PostFilter, PreEnqueue): when no node fits a pod, evict lower-priority pods to make room.

The framework runs PostFilter after a cycle in which every node failed Filter, with each node's status. As
kube-scheduler v1.35's DefaultPreemption, :meth:`DefaultPreemption.post_filter`

1. checks the preemptor may preempt (:meth:`~DefaultPreemption.pod_eligible_to_preempt_others`): not with
   ``preemptionPolicy: Never``, nor while a lower-priority pod on its nominated node is still terminating
   because of an earlier preemption (unless that node is now UnschedulableAndUnresolvable for it);
2. dry-runs :meth:`~DefaultPreemption.select_victims_on_node` on the nodes whose status is Unschedulable,
   from a random offset, until it has enough candidates (``DefaultPreemptionArgs``): on a copy of the node
   and of the cycle state it removes every lower-priority pod (through the PreFilter extensions of whichever
   plugins have them), checks the pod fits with the nominated pods, then reprieves victims, most important
   first and PDB-violating ones before the others, keeping every one the pod still fits beside. That per-node
   path is the reference; in the common cycles where only NodeResourcesFit can change its answer,
   :mod:`.columnar` gives the same answers from NodeTable columns without copying nodes or cycle state;
3. picks one candidate (:mod:`.candidates`) and has :mod:`.executor` evict its victims off the cycle;
4. returns the chosen node as the pod's nomination; the cycle still fails, and the pod binds there on a
   later attempt, once the victims are gone.

Without a candidate it returns Unschedulable with a FitError-like message and clears the pod's nomination.
Messages are prefixed ``preemption: `` as upstream, and end up after the cycle's own FitError message.
PreEnqueue holds a preemptor back while its evictions are being sent. Every call counts in
``scheduler_preemption_attempts_total``; every eviction batch is one ``scheduler_preemption_victims``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod, PodDisruptionBudget
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ASSIGNED_POD_DELETE, AnyObject, ClusterEventWithHint, QueueingHint
from kubesched.framework.interface import NodeToStatus, PostFilterResult
from kubesched.framework.preemption_report import PreemptionCandidate, PreemptionReport, record_preemption
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from kubesched.plugins.defaultpreemption.candidates import (
    EvaluateNode,
    importance_key,
    potential_nodes,
    preemption_fit_error,
    search_candidates,
    select_candidate,
    status_of,
)
from kubesched.plugins.defaultpreemption.columnar import LowerPriorityRequests, NominatedRequests, columnar_evaluator
from kubesched.plugins.defaultpreemption.executor import Executor
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.label_selector import LabelSelector, compile_label_selector

if TYPE_CHECKING:
    from kubesched.framework.interface import EnqueueExtensions, Handle, PostFilterPlugin, PreEnqueuePlugin
    from kubesched.plugins.defaultpreemption.candidates import Candidate

log = logging.getLogger(__name__)

MESSAGE_PREFIX = "preemption: "
NOT_ELIGIBLE_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NO_CANDIDATE_NODE = "no candidate node for preemption"
WAITING_FOR_PREEMPTION = "waiting for the preemption for this pod to be finished"
PREEMPT_NEVER = "Never"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class CompiledPDB:
    """A PodDisruptionBudget as victim selection reads it: selector compiled once per preemption."""

    namespace: str
    selector: LabelSelector | None  # None: nil, empty or invalid, which matches no pod
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def of(cls, pdb: PodDisruptionBudget) -> CompiledPDB:
        selector: LabelSelector | None = None
        if pdb.selector is not None:
            compiled, errors = compile_label_selector(pdb.selector)
            # An invalid selector matches nothing; a nil or empty one neither (PDB semantics, not a Service's).
            selector = None if errors or compiled.is_empty else compiled
        status = pdb.raw.get("status")
        disrupted = status.get("disruptedPods") if isinstance(status, Mapping) else None
        return cls(
            namespace=pdb.metadata.namespace,
            selector=selector,
            disruptions_allowed=pdb.disruptions_allowed,
            disrupted_pods=frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset(),
        )


def filter_pods_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[CompiledPDB]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split ``pods`` (order kept) into those whose eviction would violate a PDB and the others: each matching
    PDB's allowed disruptions are spent pod by pod, and a pod that takes one below zero violates it. Pods the
    API server already counts as disrupted (``status.disruptedPods``) spend nothing."""
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod_info in pods:
        labels = pod_info.pod.metadata.labels
        violated = False
        if labels:  # a pod without labels matches no PDB
            for i, pdb in enumerate(pdbs):
                if pdb.namespace != pod_info.namespace or pdb.selector is None or not pdb.selector.matches(labels):
                    continue
                if pod_info.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod_info)
    return violating, non_violating


def pod_terminating_by_preemption(pod: Pod) -> bool:
    """Being deleted, with the DisruptionTarget condition a scheduler's preemption puts on its victims."""
    if pod.metadata.deletion_timestamp is None:
        return False
    for condition in pod.status.conditions:
        if condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    return False


class DefaultPreemption:
    """PostFilter: preempt lower-priority pods so that an unschedulable pod fits on a node (module doc)."""

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        self.args = validated(args, DefaultPreemptionArgs)
        self.handle = handle
        self.executor = Executor(handle, names.DEFAULT_PREEMPTION)
        # Upstream draws the offset at random; seeded here so that a simulation repeats itself.
        self.rng = random.Random(0)
        # The dry run's columnar path (:mod:`.columnar`) where it is exact; False: always the per-node reference.
        self.use_columnar = True
        self._lower_requests = LowerPriorityRequests()
        self._nominated_requests = NominatedRequests()

    @property
    def name(self) -> str:
        return names.DEFAULT_PREEMPTION

    # ---- PreEnqueue --------------------------------------------------------------------------

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        if self.executor.is_pod_running_preemption(pod_info.uid):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, WAITING_FOR_PREEMPTION)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # A victim's deletion may end the wait PreEnqueue imposes, but whether the pod then fits is for the
        # plugins that rejected it to say: this plugin's hint always skips (upstream's).
        return [ClusterEventWithHint(ASSIGNED_POD_DELETE, self.is_schedulable_after_assigned_pod_delete)]

    def is_schedulable_after_assigned_pod_delete(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        del pod, old, new
        return QueueingHint.SKIP

    # ---- PostFilter --------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered_node_status: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status | None]:
        try:
            result, status = self.preempt(state, pod, filtered_node_status)
        finally:
            self.handle.observe_preemption_attempt()
        if status is not None and status.message:
            return result, Status(status.code, MESSAGE_PREFIX + status.message)
        return result, status

    def preempt(
        self, state: CycleState, pod: PodInfo, node_to_status: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Upstream's ``Evaluator.Preempt`` for this plugin: (nomination, status), None status = preempted."""
        # The pod as this attempt has it: the scheduler keeps its nomination there (upstream re-reads the
        # informer's copy, which carries the same nomination once its status patch is back).
        nominated = pod.pod.status.nominated_node_name
        eligible, reason = self.pod_eligible_to_preempt_others(pod, status_of(node_to_status, nominated))
        if not eligible:
            return None, Status(Code.UNSCHEDULABLE, reason)

        all_nodes = self.handle.snapshot().node_infos
        if not all_nodes:
            return None, Status.error("no nodes available")
        candidates, statuses, errors = self.find_candidates(state, pod, all_nodes, node_to_status)
        best = select_candidate(candidates)
        _report(state, candidates, best, statuses)
        if not candidates:
            if errors:
                return None, _aggregate(errors)
            # Empty nomination: the pod's old one, if any, did not help either.
            return PostFilterResult(""), Status(Code.UNSCHEDULABLE, preemption_fit_error(len(all_nodes), statuses))

        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, NO_CANDIDATE_NODE)
        log.debug("the target node for the preemption is determined", extra={"node": best.name, "pod": pod.key})
        self.executor.prepare_candidate_async(best, pod)
        return PostFilterResult(best.name), None

    def find_candidates(
        self, state: CycleState, pod: PodInfo, all_nodes: Sequence[NodeInfo], node_to_status: NodeToStatus
    ) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
        """Dry-run preemption on the nodes where it may help: (candidates, statuses of the others, errors)."""
        nodes = potential_nodes(all_nodes, node_to_status)
        if not nodes:
            return [], {}, []
        pdbs = [CompiledPDB.of(pdb) for pdb in self.handle.listers.pod_disruption_budgets.list()]
        offset, num_candidates = self.get_offset_and_num_candidates(len(nodes))
        return self.dry_run_preemption(state, pod, nodes, pdbs, offset, num_candidates, node_to_status)

    def dry_run_preemption(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        pdbs: Sequence[CompiledPDB],
        offset: int,
        num_candidates: int,
        node_to_status: NodeToStatus | None = None,
    ) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
        """:func:`~.candidates.search_candidates` over ``nodes`` with :meth:`select_victims_on_node` on copies
        of each node and of ``state`` (the reference), or, given this cycle's Filter statuses and when it is
        exact, with the columnar path of :mod:`.columnar` (``use_columnar``)."""

        def reference(index: int) -> tuple[list[PodInfo], int, Status | None]:
            return self.select_victims_on_node(state.clone(), pod, nodes[index].clone(), pdbs)

        evaluate: EvaluateNode | None = None
        if node_to_status is not None and self._columnar_applies():

            def split(pods: Sequence[PodInfo]) -> tuple[list[PodInfo], list[PodInfo]]:
                return filter_pods_with_pdb_violation(pods, pdbs)

            evaluate = columnar_evaluator(
                self.handle,
                state,
                pod,
                nodes,
                node_to_status,
                self._lower_requests,
                self._nominated_requests,
                split,
                reference,
                Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS),
            )
        return search_candidates(evaluate if evaluate is not None else reference, nodes, offset, num_candidates)

    def _columnar_applies(self) -> bool:
        # The columnar path reproduces this class's victim selection; a subclass that changes it gets the
        # reference path.
        cls = type(self)
        return (
            self.use_columnar
            and cls.select_victims_on_node is DefaultPreemption.select_victims_on_node
            and cls.is_preemption_allowed is DefaultPreemption.is_preemption_allowed
        )

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """``max(nodes * percentage // 100, absolute)``, at most ``num_nodes``."""
        count = num_nodes * self.args.min_candidate_nodes_percentage // 100
        count = max(count, self.args.min_candidate_nodes_absolute)
        return min(count, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """A random start among the potential nodes, and how many candidates to look for."""
        return self.rng.randrange(num_nodes), self.calculate_num_candidates(num_nodes)

    # ---- the pieces --------------------------------------------------------------------------

    def is_preemption_allowed(self, victim: PodInfo, preemptor: PodInfo) -> bool:
        """Only pods of lower priority may be preempted (upstream's default IsEligiblePod adds nothing)."""
        return victim.priority < preemptor.priority

    def pod_eligible_to_preempt_others(self, pod: PodInfo, nominated_node_status: Status) -> tuple[bool, str]:
        """(eligible, why not): never with ``preemptionPolicy: Never``; not while the nominated node still has a
        lower-priority pod terminating by preemption, unless that node is now unresolvable for the pod."""
        if pod.pod.spec.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_POLICY_NEVER
        nominated = pod.pod.status.nominated_node_name
        if nominated:
            if nominated_node_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            node = self.handle.snapshot().get(nominated)
            if node is not None:
                for other in node.pods.values():
                    if self.is_preemption_allowed(other, pod) and pod_terminating_by_preemption(other.pod):
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, pdbs: Sequence[CompiledPDB]
    ) -> tuple[list[PodInfo], int, Status | None]:
        """The fewest pods to evict from ``node_info`` for ``pod`` to fit: (victims most important first, how
        many of them violate a PDB, None) or ([], 0, why not). ``state`` and ``node_info`` are copies and are
        changed."""
        handle = self.handle

        def remove(victim: PodInfo) -> Status | None:
            node_info.remove_pod(victim.uid)
            return handle.run_pre_filter_extension_remove_pod(state, pod, victim, node_info)

        def add(victim: PodInfo) -> Status | None:
            node_info.add_pod(victim)
            return handle.run_pre_filter_extension_add_pod(state, pod, victim, node_info)

        potential = [other for other in node_info.pods.values() if self.is_preemption_allowed(other, pod)]
        for victim in potential:
            status = remove(victim)
            if status is not None:
                return [], 0, _as_error(status)
        if not potential:
            # The node is as it was: nothing more to check.
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
        # Even with every lower-priority pod gone the pod does not fit: not a candidate. (Affinity of the pod
        # to its would-be victims is not looked into, as upstream.)
        status = handle.run_filter_plugins_with_nominated_pods(state, pod, node_info)
        if status is not None:
            return [], 0, status

        potential.sort(key=importance_key)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(candidate: PodInfo) -> bool:
            """Put ``candidate`` back; keep it if the pod still fits, else it is a victim. Raises on Error."""
            failure = add(candidate)
            if failure is not None:
                raise _ExtensionError(failure)
            fits = handle.run_filter_plugins_with_nominated_pods(state, pod, node_info) is None
            if not fits:
                failure = remove(candidate)
                if failure is not None:
                    raise _ExtensionError(failure)
                victims.append(candidate)
            return fits

        violations = 0
        try:
            for candidate in violating:
                if not reprieve(candidate):
                    violations += 1
            for candidate in non_violating:
                reprieve(candidate)
        except _ExtensionError as error:
            return [], 0, _as_error(error.status)
        if violating and non_violating:
            # Reprieving went group by group; victims are reported most important first.
            victims.sort(key=importance_key)
        return victims, violations, None


def _report(
    state: CycleState, candidates: Sequence[Candidate], best: Candidate | None, statuses: Mapping[str, Status]
) -> None:
    """Leave what the dry run found in the cycle state for the attempt record (``kubesched explain``)."""
    record_preemption(
        state,
        PreemptionReport(
            plugin=names.DEFAULT_PREEMPTION,
            candidates=tuple(
                PreemptionCandidate(c.name, tuple(v.key for v in c.victims), c.num_pdb_violations) for c in candidates
            ),
            chosen=best.name if best is not None and best.name else None,
            not_candidates={node: status.message for node, status in statuses.items()},
        ),
    )


class _ExtensionError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


def _as_error(status: Status) -> Status:
    return status if status.code is Code.ERROR else Status(Code.ERROR, status.message, plugin=status.plugin)


def _aggregate(errors: Sequence[Status]) -> Status:
    """apimachinery's error aggregate: one message as it is, several as "[a, b]"."""
    if len(errors) == 1:
        return Status(Code.ERROR, errors[0].message)
    return Status(Code.ERROR, "[" + ", ".join(error.message for error in errors) + "]")


if TYPE_CHECKING:

    def _conforms(plugin: DefaultPreemption) -> tuple[PostFilterPlugin, PreEnqueuePlugin, EnqueueExtensions]:
        return plugin, plugin, plugin
