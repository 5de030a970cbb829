"""DefaultPreemption against kube-scheduler v1.35's default_preemption_test.go, as data: TestPostFilter,
TestDryRunPreemption and TestSelectBestCandidate (the cases whose plugins kubesched has: NodeResourcesFit and
a PreFilter plugin whose extensions fail), TestPodEligibleToPreemptOthers, plus PDB splitting, the node
choice's tie-breakers and the evictions the plugin spawns.

Each case runs a real framework (PrioritySort, NodeResourcesFit, DefaultPreemption, DefaultBinder) over a real
cache; upstream's resources carry over: small 100m/100, medium 200m/200, large 300m/300, very large 500m/500,
nodes of very large capacity and 32 pods unless the case says otherwise. Start times are whole seconds here
(upstream's are nanoseconds; only their order matters).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesched.api.objects import Node, Pod, PodDisruptionBudget
from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ApiError, Handle, PostFilterResult
from kubesched.framework.listers import ListerStores
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
from kubesched.plugins.defaultpreemption.candidates import (
    Candidate,
    pick_one_node_for_preemption,
    select_candidate,
)
from kubesched.plugins.defaultpreemption.default_preemption import CompiledPDB, filter_pods_with_pdb_violation
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, RecordingClient, make_cluster

Runner = Callable[[Coroutine[Any, Any, Any]], Any]

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD: dict[str, str | int] = {"pods": 1}
NODE_RES: dict[str, str | int] = {"cpu": "200m", "memory": "400", "pods": 32}
VIOLATING = "test.kubernetes.io/is-violating-pdb"


def at(second: int) -> str:
    return f"1970-01-01T00:00:{second:02d}Z"


def pod(name: str, priority: int = 0, node: str = "", req: Mapping[str, str] | None = None) -> PodBuilder:
    builder = make_pod(name).uid(name).priority(priority)
    if node:
        builder = builder.node_name(node)
    if req:
        builder = builder.req(dict(req))
    return builder


def node(name: str, capacity: Mapping[str, str | int] | None = None, **labels: str) -> Node:
    resources: dict[str, str | int] = dict(capacity) if capacity is not None else {**VERY_LARGE, "pods": 32}
    builder = make_node(name).capacity(resources)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder.obj()


def pdb(name: str, match: Mapping[str, str], allowed: int, disrupted: Sequence[str] = ()) -> PodDisruptionBudget:
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = {victim: "2024-01-01T00:00:00Z" for victim in disrupted}
    return PodDisruptionBudget.from_dict(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": dict(match)}},
            "status": status,
        },
        f"PodDisruptionBudget {name}",
    )


class FailingExtensions:
    """upstream's TestPlugin: PreFilter with AddPod/RemovePod that fail on nodes labelled error=true."""

    name = "test-plugin"

    def __init__(self, args: object, handle: Handle) -> None:
        del args, handle

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | None:
        return None

    def pre_filter_extensions(self) -> FailingExtensions:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.labels.get("error") == "true":
            return Status.error(f"failed to add pod: {pod.name}")
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.labels.get("error") == "true":
            return Status.error(f"failed to remove pod: {pod.name}")
        return None


def registry() -> Registry:
    return merge(in_tree_registry(), {"test-plugin": PluginRegistration.of("test-plugin", FailingExtensions)})


@dataclass
class Setup:
    handle: PluginHandle
    framework: Framework
    plugin: DefaultPreemption
    client: RecordingClient = field(default_factory=RecordingClient)
    spawned: int = 0

    def post_filter(
        self, run_async: Runner, state: CycleState, preemptor: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """PostFilter inside a running loop, then the evictions it spawned run to their end."""

        async def scenario() -> tuple[PostFilterResult | None, Status | None]:
            outcome = self.plugin.post_filter(state, preemptor, statuses)
            self.spawned = len(self.handle.context.tasks)
            while self.handle.context.tasks.busy():
                await asyncio.sleep(0)
            return outcome

        result: tuple[PostFilterResult | None, Status | None] = run_async(scenario())
        return result

    def prefilter(self, preemptor: Pod) -> tuple[CycleState, PodInfo]:
        state = CycleState()
        info = PodInfo(preemptor)
        outcome = self.framework.run_pre_filter(state, info, self.handle.snapshot().node_infos)
        assert outcome.status is None
        return state, info


def setup(
    nodes: Sequence[Node],
    pods: Sequence[Pod] = (),
    pdbs: Sequence[PodDisruptionBudget] = (),
    *,
    args: DefaultPreemptionArgs | None = None,
    extensions: bool = False,
    client: RecordingClient | None = None,
) -> Setup:
    cache, _ = make_cluster(nodes, pods)
    stores = ListerStores()
    for budget in pdbs:
        stores.pod_disruption_budgets.add(budget)
    the_client = client if client is not None else RecordingClient()
    handle = PluginHandle(cache, client=the_client, listers=stores.listers())
    pre_filter = ["NodeResourcesFit", *(["test-plugin"] if extensions else [])]
    plugins: dict[str, Any] = {
        "multiPoint": {"disabled": [{"name": "*"}]},
        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
        "preFilter": {"enabled": [{"name": name} for name in pre_filter]},
        "filter": {"enabled": [{"name": "NodeResourcesFit"}]},
        "postFilter": {"enabled": [{"name": "DefaultPreemption"}]},
        "bind": {"enabled": [{"name": "DefaultBinder"}]},
    }
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "plugins": plugins}
    if args is not None:
        profile["pluginConfig"] = [
            {
                "name": "DefaultPreemption",
                "args": {
                    "minCandidateNodesPercentage": args.min_candidate_nodes_percentage,
                    "minCandidateNodesAbsolute": args.min_candidate_nodes_absolute,
                },
            }
        ]
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }
    config = load_config_dict(document, "test", registry())
    framework = Framework(config.profiles[0], registry(), handle.context)
    plugin = framework.plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    return Setup(handle, framework, plugin, the_client)


def unschedulable(*names: str) -> dict[str, Status]:
    return {name: Status(Code.UNSCHEDULABLE) for name in names}


# ---- TestPostFilter -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PostFilterCase:
    preemptor: Pod
    pods: Sequence[Pod]
    nodes: Sequence[Node]
    statuses: Mapping[str, Status]
    result: PostFilterResult | None
    code: Code
    message: str = ""
    pdbs: Sequence[PodDisruptionBudget] = ()
    victims: Sequence[str] = ()


POST_FILTER_CASES = [
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH).obj(),
            pods=[pod("p1", node="node1").obj()],
            nodes=[node("node1", ONE_POD)],
            statuses=unschedulable("node1"),
            result=PostFilterResult("node1"),
            code=Code.SUCCESS,
            victims=["default/p1"],
        ),
        id="pod-with-higher-priority-can-be-made-schedulable",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p").obj(),
            pods=[pod("p1", node="node1").obj()],
            nodes=[node("node1", ONE_POD)],
            statuses=unschedulable("node1"),
            result=PostFilterResult(""),
            code=Code.UNSCHEDULABLE,
            message="preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
        id="pod-with-tied-priority-is-still-unschedulable",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH).obj(),
            pods=[pod("p1", node="node1").obj()],
            nodes=[node("node1", ONE_POD)],
            statuses={"node1": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)},
            result=PostFilterResult(""),
            code=Code.UNSCHEDULABLE,
            message="preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="preemption-respects-filtered-node-statuses",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH).obj(),
            pods=[pod("p1", node="node1").obj()],
            nodes=[node("node1", ONE_POD)],
            statuses={},
            result=PostFilterResult(""),
            code=Code.UNSCHEDULABLE,
            message="preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="absent-node-status-means-unschedulable-and-unresolvable",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", MID).obj(),
            pods=[pod("p1", HIGH, "node1").obj(), pod("p2", LOW, "node2").obj()],
            nodes=[node("node1", ONE_POD), node("node2", ONE_POD)],
            statuses=unschedulable("node1", "node2"),
            result=PostFilterResult("node2"),
            code=Code.SUCCESS,
            victims=["default/p2"],
        ),
        id="pod-can-be-made-schedulable-on-one-node",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", VERY_HIGH).obj(),
            pods=[
                pod("p1", HIGH, "node1").label(VIOLATING, "non-violating").obj(),
                pod("p2", LOW, "node1").label(VIOLATING, "violating").obj(),
                pod("p3", MID, "node2").label(VIOLATING, "violating").obj(),
            ],
            pdbs=[
                pdb("violating-pdb", {VIOLATING: "violating"}, 0),
                pdb("non-violating-pdb", {VIOLATING: "non-violating"}, 2**31 - 1),
            ],
            nodes=[node("node1", ONE_POD), node("node2", ONE_POD)],
            statuses=unschedulable("node1", "node2"),
            result=PostFilterResult("node2"),
            code=Code.SUCCESS,
            victims=["default/p3"],
        ),
        id="pod-can-be-made-schedulable-on-min-highest-priority-node",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod("p1", node="node1").obj(), pod("p2", node="node2").obj()],
            nodes=[node("node1", NODE_RES), node("node2", NODE_RES)],
            statuses=unschedulable("node1", "node2"),
            result=PostFilterResult(""),
            code=Code.UNSCHEDULABLE,
            message="preemption: 0/2 nodes are available: 2 Insufficient cpu.",
        ),
        id="no-candidate-not-enough-resource-after-removing-low-priority-pods",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod("p1", HIGH, "node1").obj(), pod("p2", node="node2").obj(), pod("p3", HIGH, "node3").obj()],
            nodes=[node("node1", ONE_POD), node("node2", NODE_RES), node("node3", ONE_POD)],
            statuses=unschedulable("node1", "node2", "node3"),
            result=PostFilterResult(""),
            code=Code.UNSCHEDULABLE,
            message=(
                "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
                "2 No preemption victims found for incoming pod."
            ),
        ),
        id="no-candidate-mixed-reasons-no-lower-priority-pod-and-not-enough-cpu",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod("p1", node="node1").obj(), pod("p2", node="node2").obj()],
            nodes=[node(f"node{i}", NODE_RES) for i in range(1, 5)],
            statuses={
                **unschedulable("node1", "node2"),
                "node4": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            },
            result=PostFilterResult(""),
            code=Code.UNSCHEDULABLE,
            message=(
                "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling."
            ),
        ),
        id="no-candidate-two-unresolvable-nodes-and-two-without-cpu",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod("p1", node="node1").obj()],
            nodes=[node("node1", {**LARGE, "pods": 32}, error="true")],
            statuses=unschedulable("node1"),
            result=None,
            code=Code.ERROR,
            message='preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p',
        ),
        id="only-node-fails-in-a-prefilter-extension",
    ),
    pytest.param(
        PostFilterCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod("p1", node="node1").obj(), pod("p2", node="node2", req=MEDIUM).obj()],
            nodes=[node("node1", {**LARGE, "pods": 32}, error="true"), node("node2", {**LARGE, "pods": 32})],
            statuses=unschedulable("node1", "node2"),
            result=PostFilterResult("node2"),
            code=Code.SUCCESS,
            victims=["default/p2"],
        ),
        id="one-node-fails-in-a-prefilter-extension-the-other-is-nominated",
    ),
]


@pytest.mark.parametrize("case", POST_FILTER_CASES)
def test_post_filter(case: PostFilterCase, run_async: Runner) -> None:
    env = setup(case.nodes, case.pods, case.pdbs, extensions=True)
    state, preemptor = env.prefilter(case.preemptor)
    result, status = env.post_filter(run_async, state, preemptor, case.statuses)
    assert result == case.result
    assert (status.code if status is not None else Code.SUCCESS, status.message if status else "") == (
        case.code,
        case.message,
    )
    assert [victim for victim, _ in env.client.preemptions] == list(case.victims)
    events = [event for event in env.handle.recorder.events if event[2] == "Preempted"]
    assert [(event[0], event[1], event[3]) for event in events] == [(v, "Normal", "Preempting") for v in case.victims]
    if case.victims:
        assert events[0][4] == f"Preempted by pod p on node {case.result.nominated_node_name if case.result else ''}"


# ---- TestDryRunPreemption -----------------------------------------------------------------------


@dataclass(frozen=True)
class DryRunCase:
    preemptor: Pod
    pods: Sequence[Pod]
    expected: Mapping[str, tuple[Sequence[str], int]]  # node -> (victims by name, PDB violations)
    nodes: Sequence[str] = ("node1", "node2")
    pdbs: Sequence[PodDisruptionBudget] = ()
    args: DefaultPreemptionArgs | None = None
    offset: int = 0


FOO = {"app": "foo"}

DRY_RUN_CASES = [
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod("p1", MID, "node1", LARGE).obj(), pod("p2", MID, "node2", LARGE).obj()],
            expected={"node1": (["p1"], 0), "node2": (["p2"], 0)},
        ),
        id="fits-on-both-nodes-when-lower-priority-pods-are-preempted",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", LOW, req=LARGE).obj(),
            pods=[pod("p1", MID, "node1", LARGE).obj(), pod("p2", MID, "node2", LARGE).obj()],
            expected={},
        ),
        id="other-pods-have-higher-priority-no-preemption",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[
                pod("p1.1", LOW, "node1", SMALL).obj(),
                pod("p1.2", MID, "node1", LARGE).obj(),
                pod("p2", MID, "node2", LARGE).obj(),
            ],
            expected={"node1": (["p1.2"], 0), "node2": (["p2"], 0)},
        ),
        id="medium-priority-pod-is-preempted-lower-priority-one-stays-as-it-is-small",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[
                pod("p1.1", MID, "node1", SMALL).obj(),
                pod("p1.2", LOW, "node1", SMALL).obj(),
                pod("p1.3", MID, "node1", MEDIUM).obj(),
                pod("p1.4", HIGH, "node1", SMALL).obj(),
                pod("p2", HIGH, "node2", LARGE).obj(),
            ],
            expected={"node1": (["p1.2", "p1.3"], 0)},
        ),
        id="mixed-priority-pods-are-preempted",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[
                pod("p1.1", LOW, "node1", SMALL).started(at(5)).obj(),
                pod("p1.2", LOW, "node1", SMALL).started(at(4)).obj(),
                pod("p1.3", MID, "node1", MEDIUM).started(at(3)).obj(),
                pod("p1.4", HIGH, "node1", SMALL).started(at(2)).obj(),
                pod("p2", HIGH, "node2", LARGE).started(at(1)).obj(),
            ],
            expected={"node1": (["p1.1", "p1.3"], 0)},
        ),
        id="mixed-priority-pods-preempted-later-start-time-one-when-priorities-are-equal",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=VERY_LARGE).obj(),
            pods=[
                pod("p1.1", MID, "node1", MEDIUM).labels(FOO).obj(),
                pod("p1.2", MID, "node1", MEDIUM).labels(FOO).obj(),
            ],
            nodes=("node1",),
            pdbs=[pdb("pdb", FOO, 1)],
            expected={"node1": (["p1.1", "p1.2"], 1)},
        ),
        id="preemption-with-violation-of-same-pdb",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=VERY_LARGE).obj(),
            pods=[
                pod("p1.1", MID, "node1", MEDIUM).labels(FOO).obj(),
                pod("p1.2", MID, "node1", MEDIUM).labels(FOO).obj(),
            ],
            nodes=("node1",),
            pdbs=[pdb("pdb", FOO, 1, disrupted=["p2"])],
            expected={"node1": (["p1.1", "p1.2"], 1)},
        ),
        id="pdb-with-processed-eviction-of-another-pod-still-violated",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=VERY_LARGE).obj(),
            pods=[
                pod("p1.1", MID, "node1", MEDIUM).labels(FOO).obj(),
                pod("p1.2", MID, "node1", MEDIUM).labels(FOO).obj(),
            ],
            nodes=("node1",),
            pdbs=[pdb("pdb", FOO, 1, disrupted=["p1.2"])],
            expected={"node1": (["p1.1", "p1.2"], 0)},
        ),
        id="pdb-victim-in-disrupted-pods-spends-nothing",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=VERY_LARGE).obj(),
            pods=[
                pod("p1.1", MID, "node1", MEDIUM).labels(FOO).obj(),
                pod("p1.2", MID, "node1", MEDIUM).labels(FOO).obj(),
                pod("p1.3", MID, "node1", MEDIUM).labels(FOO).obj(),
            ],
            nodes=("node1",),
            pdbs=[pdb("pdb", FOO, 1, disrupted=["p1.3"])],
            expected={"node1": (["p1.1", "p1.2", "p1.3"], 1)},
        ),
        id="pdb-victim-in-disrupted-pods-is-non-violating",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod(f"p{i}", MID, f"node{i}", LARGE).obj() for i in range(1, 6)],
            nodes=tuple(f"node{i}" for i in range(1, 6)),
            args=DefaultPreemptionArgs(min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=1),
            offset=4,
            expected={"node5": (["p5"], 0), "node1": (["p1"], 0)},
        ),
        id="all-nodes-are-candidates-but-args-limit-to-2-from-offset-4",
    ),
    pytest.param(
        DryRunCase(
            preemptor=pod("p", HIGH, req=LARGE).obj(),
            pods=[pod(f"p{i}", MID, f"node{i}", LARGE).labels(FOO).obj() for i in range(1, 6)],
            nodes=tuple(f"node{i}" for i in range(1, 6)),
            pdbs=[pdb("pdb", FOO, 2)],
            args=DefaultPreemptionArgs(min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=1),
            offset=4,
            # node5 and node1 spend the PDB's two disruptions; node2 and node3 violate it: the search goes on
            # until a non-violating one is in, with enough candidates (2 lists of at most 2).
            expected={"node5": (["p5"], 0), "node1": (["p1"], 0)},
        ),
        id="pdb-non-violating-candidates-found-first-stop-the-search",
    ),
]


@pytest.mark.parametrize("case", DRY_RUN_CASES)
def test_dry_run_preemption(case: DryRunCase) -> None:
    env = setup([node(name) for name in case.nodes], case.pods, case.pdbs, args=case.args)
    state, preemptor = env.prefilter(case.preemptor)
    infos = sorted(env.handle.snapshot().node_infos, key=lambda info: info.name)
    pdbs = [CompiledPDB.of(budget) for budget in case.pdbs]
    num_candidates = env.plugin.calculate_num_candidates(len(infos))
    candidates, _, errors = env.plugin.dry_run_preemption(state, preemptor, infos, pdbs, case.offset, num_candidates)
    assert errors == []
    got = {c.name: (sorted(v.name for v in c.victims), c.num_pdb_violations) for c in candidates}
    assert got == {name: (list(victims), violations) for name, (victims, violations) in case.expected.items()}


def test_dry_run_leaves_the_snapshot_and_the_state_untouched() -> None:
    env = setup([node("node1")], [pod("p1", MID, "node1", LARGE).obj()])
    state, preemptor = env.prefilter(pod("p", HIGH, req=LARGE).obj())
    info = env.handle.snapshot().get("node1")
    assert info is not None
    before = (dict(info.pods), info.requested.milli_cpu)
    candidates, _, _ = env.plugin.dry_run_preemption(state, preemptor, [info], [], 0, 1)
    assert [c.name for c in candidates] == ["node1"]
    assert (dict(info.pods), info.requested.milli_cpu) == before


def test_victims_are_reported_most_important_first() -> None:
    env = setup(
        [node("node1")],
        [
            pod("low-late", LOW, "node1", SMALL).started(at(9)).obj(),
            pod("mid", MID, "node1", MEDIUM).started(at(3)).obj(),
            pod("low-early", LOW, "node1", MEDIUM).started(at(1)).obj(),
        ],
    )
    state, preemptor = env.prefilter(pod("p", HIGH, req=VERY_LARGE).obj())
    info = env.handle.snapshot().get("node1")
    assert info is not None
    victims, violations, status = env.plugin.select_victims_on_node(state, preemptor, info.clone(), [])
    assert status is None and violations == 0
    assert [v.name for v in victims] == ["mid", "low-early", "low-late"]


# ---- TestSelectBestCandidate --------------------------------------------------------------------


@dataclass(frozen=True)
class SelectCase:
    preemptor: Pod
    pods: Sequence[Pod]
    nodes: Sequence[str]
    expected: Sequence[str]  # any of these


E = at(0)

SELECT_CASES = [
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=LARGE).obj(),
            [pod("p1", MID, "node1", LARGE).started(E).obj(), pod("p2", MID, "node2", LARGE).started(E).obj()],
            ("node1", "node2"),
            ("node1", "node2"),
        ),
        id="fits-on-both-nodes-when-lower-priority-pods-are-preempted",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", MEDIUM).started(E).obj(),
                pod("p1.2", MID, "node1", LARGE).started(E).obj(),
                pod("p2.1", MID, "node2", MEDIUM).started(E).obj(),
                pod("p2.2", LOW, "node2", MEDIUM).started(E).obj(),
                pod("p3.1", LOW, "node3", MEDIUM).started(E).obj(),
                pod("p3.2", LOW, "node3", MEDIUM).started(E).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node3",),
        ),
        id="node-with-min-highest-priority-pod-is-picked",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", MEDIUM).started(E).obj(),
                pod("p1.2", MID, "node1", LARGE).started(E).obj(),
                pod("p2.1", MID, "node2", LARGE).started(E).obj(),
                pod("p2.2", LOW, "node2", MEDIUM).started(E).obj(),
                pod("p3.1", MID, "node3", MEDIUM).started(E).obj(),
                pod("p3.2", MID, "node3", MEDIUM).started(E).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node2",),
        ),
        id="same-highest-priority-minimum-sum-of-priorities-is-picked",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", SMALL).started(E).obj(),
                pod("p1.2", NEG, "node1", SMALL).started(E).obj(),
                pod("p1.3", MID, "node1", SMALL).started(E).obj(),
                pod("p1.4", NEG, "node1", SMALL).started(E).obj(),
                pod("p2.1", MID, "node2", LARGE).started(E).obj(),
                pod("p2.2", NEG, "node2", MEDIUM).started(E).obj(),
                pod("p3.1", MID, "node3", MEDIUM).started(E).obj(),
                pod("p3.2", NEG, "node3", SMALL).started(E).obj(),
                pod("p3.3", LOW, "node3", SMALL).started(E).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node2",),
        ),
        id="same-highest-priority-and-sum-minimum-number-of-pods-is-picked",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", SMALL).started(E).obj(),
                pod("p1.2", NEG, "node1", SMALL).started(E).obj(),
                pod("p1.3", NEG, "node1", SMALL).started(E).obj(),
                pod("p2.1", MID, "node2", LARGE).started(E).obj(),
                pod("p2.2", NEG, "node2", MEDIUM).started(E).obj(),
                pod("p3.1", MID, "node3", MEDIUM).started(E).obj(),
                pod("p3.2", NEG, "node3", SMALL).started(E).obj(),
                pod("p3.3", LOW, "node3", SMALL).started(E).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node2",),
        ),
        id="sum-of-adjusted-priorities-is-considered",
    ),
    pytest.param(
        SelectCase(
            pod("p", VERY_HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", SMALL).started(E).obj(),
                pod("p1.2", LOW, "node1", SMALL).started(E).obj(),
                pod("p1.3", LOW, "node1", SMALL).started(E).obj(),
                pod("p2.1", HIGH, "node2", LARGE).started(E).obj(),
                pod("p3.1", MID, "node3", MEDIUM).started(E).obj(),
                pod("p3.2", LOW, "node3", SMALL).started(E).obj(),
                pod("p3.3", LOW, "node3", SMALL).started(E).obj(),
                pod("p3.4", LOW, "node3", MEDIUM).started(E).obj(),
                pod("p4.1", MID, "node4", MEDIUM).started(E).obj(),
                pod("p4.2", MID, "node4", SMALL).started(E).obj(),
                pod("p4.3", MID, "node4", SMALL).started(E).obj(),
                pod("p4.4", NEG, "node4", SMALL).started(E).obj(),
            ],
            ("node1", "node2", "node3", "node4"),
            ("node1",),
        ),
        id="non-overlapping-lowest-high-priority-sum-priorities-and-number-of-pods",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", MEDIUM).started(at(2)).obj(),
                pod("p1.2", MID, "node1", MEDIUM).started(at(2)).obj(),
                pod("p2.1", MID, "node2", MEDIUM).started(at(3)).obj(),
                pod("p2.2", MID, "node2", MEDIUM).started(at(3)).obj(),
                pod("p3.1", MID, "node3", MEDIUM).started(at(1)).obj(),
                pod("p3.2", MID, "node3", MEDIUM).started(at(1)).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node2",),
        ),
        id="same-priority-same-victims-different-start-time-for-each-nodes-pod",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", MID, "node1", MEDIUM).started(at(4)).obj(),
                pod("p1.2", MID, "node1", MEDIUM).started(at(2)).obj(),
                pod("p2.1", MID, "node2", MEDIUM).started(at(5)).obj(),
                pod("p2.2", MID, "node2", MEDIUM).started(at(1)).obj(),
                pod("p3.1", MID, "node3", MEDIUM).started(at(3)).obj(),
                pod("p3.2", MID, "node3", MEDIUM).started(at(6)).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node3",),
        ),
        id="same-priority-same-victims-different-start-time-for-all-pods",
    ),
    pytest.param(
        SelectCase(
            pod("p", HIGH, req=VERY_LARGE).obj(),
            [
                pod("p1.1", LOW, "node1", MEDIUM).started(at(4)).obj(),
                pod("p1.2", MID, "node1", MEDIUM).started(at(2)).obj(),
                pod("p2.1", MID, "node2", MEDIUM).started(at(6)).obj(),
                pod("p2.2", LOW, "node2", MEDIUM).started(at(1)).obj(),
                pod("p3.1", LOW, "node3", MEDIUM).started(at(3)).obj(),
                pod("p3.2", MID, "node3", MEDIUM).started(at(5)).obj(),
            ],
            ("node1", "node2", "node3"),
            ("node2",),
        ),
        id="different-priority-same-victims-different-start-time-for-all-pods",
    ),
]


@pytest.mark.parametrize("case", SELECT_CASES)
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_select_best_candidate(case: SelectCase, offset: int) -> None:
    env = setup([node(name) for name in case.nodes], case.pods)
    state, preemptor = env.prefilter(case.preemptor)
    infos = env.handle.snapshot().node_infos
    candidates, _, _ = env.plugin.dry_run_preemption(
        state, preemptor, infos, [], offset % len(infos), env.plugin.calculate_num_candidates(len(infos))
    )
    best = select_candidate(candidates)
    assert best is not None and best.name in case.expected


def _victim(name: str, priority: int, start: int | None = None) -> PodInfo:
    builder = pod(name, priority)
    if start is not None:
        builder = builder.started(at(start))
    return PodInfo(builder.obj())


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        pytest.param(
            [Candidate("a", (_victim("a1", LOW),), 1), Candidate("b", (_victim("b1", HIGH),), 0)],
            "b",
            id="fewest-pdb-violations-first",
        ),
        pytest.param(
            [
                Candidate("a", (_victim("a1", NEG), _victim("a2", NEG))),
                Candidate("b", (_victim("b1", NEG),)),
            ],
            "b",
            id="negative-priorities-shifted-so-more-victims-cost-more",
        ),
        pytest.param(
            [Candidate("a", (_victim("a1", MID, 5),)), Candidate("b", (_victim("b1", MID, 7),))],
            "b",
            id="latest-start-of-highest-priority-victims",
        ),
        pytest.param(
            [Candidate("a", (_victim("a1", MID),)), Candidate("b", (_victim("b1", MID),))],
            "a",
            id="full-tie-takes-the-first",
        ),
        pytest.param([], "", id="no-candidates"),
    ],
)
def test_pick_one_node_for_preemption(candidates: list[Candidate], expected: str) -> None:
    assert pick_one_node_for_preemption(candidates) == expected


# ---- TestPodEligibleToPreemptOthers -------------------------------------------------------------

TERMINATING_VICTIM = (
    pod("p1", LOW, "node1").terminating().condition("DisruptionTarget", "True", "PreemptionByScheduler").obj()
)


@pytest.mark.parametrize(
    ("preemptor", "pods", "nominated_status", "expected"),
    [
        pytest.param(
            pod("p", HIGH).nominated("node1").obj(),
            [TERMINATING_VICTIM],
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)"),
            (True, ""),
            id="nominated-node-unresolvable-now-may-preempt-again",
        ),
        pytest.param(
            pod("p", HIGH).nominated("node1").obj(),
            [TERMINATING_VICTIM],
            Status(Code.SUCCESS),
            (False, "not eligible due to a terminating pod on the nominated node."),
            id="nominated-node-without-status-and-a-terminating-victim",
        ),
        pytest.param(pod("p", HIGH).obj(), [TERMINATING_VICTIM], Status(Code.SUCCESS), (True, ""), id="no-nomination"),
        pytest.param(
            pod("p", HIGH).preemption_policy("Never").obj(),
            [],
            Status(Code.SUCCESS),
            (False, "not eligible due to preemptionPolicy=Never."),
            id="preempt-never-policy",
        ),
        pytest.param(
            pod("p", HIGH).nominated("node1").obj(),
            [pod("p1", LOW, "node1").terminating().obj()],
            Status(Code.SUCCESS),
            (True, ""),
            id="terminating-pod-not-preempted-by-the-scheduler",
        ),
        pytest.param(
            pod("p", HIGH).nominated("node1").obj(),
            [
                pod("p1", HIGH, "node1")
                .terminating()
                .condition("DisruptionTarget", "True", "PreemptionByScheduler")
                .obj()
            ],
            Status(Code.SUCCESS),
            (True, ""),
            id="terminating-victim-of-equal-priority-does-not-count",
        ),
        pytest.param(
            pod("p", HIGH).nominated("node2").obj(),
            [TERMINATING_VICTIM],
            Status(Code.SUCCESS),
            (True, ""),
            id="terminating-victim-on-another-node",
        ),
    ],
)
def test_pod_eligible_to_preempt_others(
    preemptor: Pod, pods: list[Pod], nominated_status: Status, expected: tuple[bool, str]
) -> None:
    env = setup([node("node1"), node("node2")], pods)
    assert env.plugin.pod_eligible_to_preempt_others(PodInfo(preemptor), nominated_status) == expected


def test_post_filter_reports_ineligibility_with_the_prefix_and_no_nomination(run_async: Runner) -> None:
    env = setup([node("node1", ONE_POD)], [pod("p1", node="node1").obj()])
    state, preemptor = env.prefilter(pod("p", HIGH).preemption_policy("Never").obj())
    result, status = env.post_filter(run_async, state, preemptor, unschedulable("node1"))
    assert result is None
    assert status == Status(Code.UNSCHEDULABLE, "preemption: not eligible due to preemptionPolicy=Never.")


# ---- PDBs ---------------------------------------------------------------------------------------


def test_filter_pods_with_pdb_violation_spends_budgets_in_order() -> None:
    pods = [PodInfo(pod(f"p{i}", LOW, "n").labels(FOO).obj()) for i in range(3)]
    other_namespace = PodInfo(pod("q", LOW, "n").namespace("other").labels(FOO).obj())
    unlabelled = PodInfo(pod("u", LOW, "n").obj())
    budgets = [CompiledPDB.of(pdb("foo", FOO, 1)), CompiledPDB.of(pdb("empty", {}, 0))]
    violating, non_violating = filter_pods_with_pdb_violation([*pods, other_namespace, unlabelled], budgets)
    assert [p.name for p in violating] == ["p1", "p2"]
    assert [p.name for p in non_violating] == ["p0", "q", "u"]


# ---- evictions ----------------------------------------------------------------------------------


def test_eviction_clears_lower_priority_nominations(run_async: Runner) -> None:
    env = setup([node("node1", ONE_POD)], [pod("p1", LOW, "node1").obj()])
    nominated_low = PodInfo(pod("nominated-low", LOW).nominated("node1").obj())
    nominated_high = PodInfo(pod("nominated-high", VERY_HIGH).nominated("node1").obj())
    env.handle.nominator.add_nominated_pod(nominated_low, "node1")
    env.handle.nominator.add_nominated_pod(nominated_high, "node1")
    state, preemptor = env.prefilter(pod("p", HIGH).obj())
    # The very-high nominated pod takes the only slot as far as Filter is concerned: no candidate.
    result, status = env.post_filter(run_async, state, preemptor, unschedulable("node1"))
    assert result == PostFilterResult("")
    assert status is not None and status.message == "preemption: 0/1 nodes are available: 1 Too many pods."
    env.handle.nominator.delete_nominated_pod_if_exists(nominated_high.uid)
    result, status = env.post_filter(run_async, state, preemptor, unschedulable("node1"))
    assert (result, status) == (PostFilterResult("node1"), None)
    assert env.client.cleared_nominations == ["default/nominated-low"]
    assert env.client.preemptions == [("default/p1", "default/p")]
    assert env.plugin.pre_enqueue(preemptor) is None
    assert env.handle.activated == []


def test_pre_enqueue_holds_the_preemptor_until_its_evictions_are_made(run_async: Runner) -> None:
    """With two victims the preemptor is held when the cycle's failure handler requeues it, and free when each
    eviction is made: the informer brings the deletions back after upstream's goroutine has let it go, and they
    are what requeues it (the simulated API server notifies at once, from within the call)."""

    class WatchingClient(RecordingClient):
        def __init__(self) -> None:
            super().__init__()
            self.held_at_eviction: list[Status | None] = []
            self.plugin: DefaultPreemption | None = None
            self.preemptor: PodInfo | None = None

        async def preempt(self, victim: Pod, preemptor: Pod) -> None:
            assert self.plugin is not None and self.preemptor is not None
            self.held_at_eviction.append(self.plugin.pre_enqueue(self.preemptor))
            await super().preempt(victim, preemptor)

    async def scenario() -> None:
        client = WatchingClient()
        env = setup(
            [node("node1", {"cpu": "1", "pods": 10})],
            [pod("p1", LOW, "node1", {"cpu": "500m"}).obj(), pod("p2", LOW, "node1", {"cpu": "500m"}).obj()],
            client=client,
        )
        state, preemptor = env.prefilter(pod("p", HIGH, req={"cpu": "1"}).obj())
        client.plugin, client.preemptor = env.plugin, preemptor
        nodes = {"node1": Status(Code.UNSCHEDULABLE)}
        assert env.plugin.post_filter(state, preemptor, nodes) == (PostFilterResult("node1"), None)
        waiting = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for the preemption for this pod to be finished")
        assert env.plugin.pre_enqueue(preemptor) == waiting
        while env.handle.context.tasks.busy():
            await asyncio.sleep(0)
        assert sorted(victim for victim, _ in client.preemptions) == ["default/p1", "default/p2"]
        assert client.held_at_eviction == [None, None]
        assert env.plugin.pre_enqueue(preemptor) is None

    run_async(scenario())


def test_failed_eviction_is_logged_and_the_preemptor_activated(run_async: Runner) -> None:
    client = RecordingClient(preempt_fail_with=ApiError("the server is on fire"))
    env = setup([node("node1", ONE_POD)], [pod("p1", LOW, "node1").obj()], client=client)
    state, preemptor = env.prefilter(pod("p", HIGH).obj())
    result, status = env.post_filter(run_async, state, preemptor, unschedulable("node1"))
    assert (result, status) == (PostFilterResult("node1"), None)
    assert env.handle.activated == [preemptor.uid]
    assert env.plugin.pre_enqueue(preemptor) is None
    assert [e for e in env.handle.recorder.events if e[2] == "Preempted"] == []


def test_victim_already_terminating_is_not_evicted_again(run_async: Runner) -> None:
    env = setup([node("node1", ONE_POD)], [pod("p1", LOW, "node1").terminating().obj()])
    state, preemptor = env.prefilter(pod("p", HIGH).obj())
    result, _ = env.post_filter(run_async, state, preemptor, unschedulable("node1"))
    assert result == PostFilterResult("node1")
    assert env.spawned == 0
    assert env.client.preemptions == []


def test_with_one_victim_and_no_nomination_to_clear_the_preemptor_is_not_held_back(
    run_async: Runner,
) -> None:
    """Upstream's goroutine lets the preemptor go before its last eviction; with one victim and no nomination to
    clear that is its first step, done before the scheduling cycle's failure handler requeues the pod: PreEnqueue
    admits the preemptor straight after PostFilter (two victims: see the test above)."""

    async def scenario() -> None:
        env = setup([node("node1", ONE_POD)], [pod("p1", LOW, "node1").obj()])
        state, preemptor = env.prefilter(pod("p", HIGH).obj())
        assert env.plugin.post_filter(state, preemptor, unschedulable("node1")) == (PostFilterResult("node1"), None)
        assert env.plugin.pre_enqueue(preemptor) is None, "nothing has run yet, and it is admitted"
        while env.handle.context.tasks.busy():
            await asyncio.sleep(0)
        assert env.client.preemptions == [("default/p1", "default/p")]

    run_async(scenario())
