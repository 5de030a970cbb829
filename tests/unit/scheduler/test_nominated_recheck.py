"""The nominated-pods pass over many nodes at once (Framework.run_filter_batch_with_added_pods, used by the node
search) equals the per-node two-pass filter, and the whole node search agrees with the reference path, on random
clusters with random nominations: resources, pod counts, host ports, taints, a nominated pod already on its node.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ActionType, EventResource
from kubesched.framework.interface import EnqueueExtensions, NodeOnlyFilter, PreFilterPlugin
from kubesched.framework.node_table import NodeBatch
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.algorithm import FitError, ScheduleAlgorithm
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster

REGISTRY = in_tree_registry()
DEFAULT_PROFILE = load_config_dict(
    {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler"}],
    },
    "test",
    REGISTRY,
).profiles[0]

NODE = st.tuples(st.integers(1, 4), st.integers(1, 5), st.booleans())  # cpu cores, max pods, tainted
POD = st.tuples(st.integers(0, 3), st.integers(0, 2500), st.integers(0, 4), st.sampled_from([0, 8080]))
# (node index, cpu millis, priority, host port)


def _pod(name: str, cpu: int, priority: int, port: int, *, node: str = "", tolerate: bool = False) -> PodInfo:
    builder = make_pod(name).uid(name).priority(priority)
    if cpu:
        builder.req(cpu=f"{cpu}m")
    if port:
        builder.host_port(port)
    if node:
        builder.node_name(node)
    if tolerate:
        builder.toleration("dedicated", "Equal", "x", "NoSchedule")
    return PodInfo(builder.obj())


def _setup(
    nodes: list[tuple[int, int, bool]],
    running: list[tuple[int, int, int, int]],
    nominated: list[tuple[int, int, int, int]],
    nominated_running: bool,
    *,
    use_batch: bool = True,
) -> tuple[Framework, Any]:
    node_objs = []
    for i, (cpu, pods, tainted) in enumerate(nodes):
        builder = make_node(f"n{i}").capacity(cpu=str(cpu), memory="8Gi", pods=pods)
        if tainted:
            builder.taint("dedicated", "x", "NoSchedule")
        node_objs.append(builder.obj())
    count = len(nodes)
    placed = [
        _pod(f"r{j}", cpu, prio, port, node=f"n{index % count}", tolerate=True).pod
        for j, (index, cpu, prio, port) in enumerate(running)
    ]
    cache, snapshot = make_cluster(node_objs, placed)
    handle = PluginHandle(cache)
    fwk = Framework(DEFAULT_PROFILE, REGISTRY, handle.context, use_batch=use_batch)
    for j, (index, cpu, prio, port) in enumerate(nominated):
        handle.nominator.add_nominated_pod(_pod(f"m{j}", cpu, prio, port, tolerate=True), f"n{index % count}")
    if nominated_running and placed:
        # A pod both running on its node and nominated there: a NodeInfo clone replaces it, counting it once.
        first = placed[0]
        handle.nominator.add_nominated_pod(PodInfo(first), first.spec.node_name)
    return fwk, snapshot


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(NODE, min_size=1, max_size=4),
    running=st.lists(POD, max_size=6),
    nominated=st.lists(POD, max_size=6),
    nominated_running=st.booleans(),
    incoming=POD,
    tolerate=st.booleans(),
)
# A running pod nominated to its own node is counted once: 1 pod + the incoming one fit a 2-pod node.
@example(nodes=[(4, 2, False)], running=[(0, 100, 4, 0)], nominated=[], nominated_running=True, incoming=(0, 100, 0, 0),
         tolerate=False)  # fmt: skip
def test_batch_nominated_pass_equals_the_per_node_two_pass_filter(
    nodes: list[tuple[int, int, bool]],
    running: list[tuple[int, int, int, int]],
    nominated: list[tuple[int, int, int, int]],
    nominated_running: bool,
    incoming: tuple[int, int, int, int],
    tolerate: bool,
) -> None:
    fwk, snapshot = _setup(nodes, running, nominated, nominated_running)
    pod = _pod("incoming", incoming[1], incoming[2], incoming[3], tolerate=tolerate)
    state = CycleState()
    pre = fwk.run_pre_filter(state, pod, snapshot.node_infos)
    assert pre.status is None
    # The batch pass is asked about nodes that pass as they are, each with its pods to add.
    passing = [info for info in snapshot.node_infos if fwk.run_filter(state, pod, info) is None]
    with_added = [(info, fwk.nominated_pods_to_add(pod, info.name)) for info in passing]
    with_added = [(info, pods) for info, pods in with_added if pods]
    batch = NodeBatch(snapshot.table, np.asarray([info.slot for info, _ in with_added], dtype=np.int64))
    verdicts = fwk.run_filter_batch_with_added_pods(state, pod, batch, [pods for _, pods in with_added])
    expected = [fwk.run_filter_plugins_with_nominated_pods(state, pod, info) for info, _ in with_added]
    if incoming[3]:
        # NodePorts reads the node's pods and has no batch form for added pods: node by node instead.
        assert verdicts is None
    else:
        assert verdicts == expected


@settings(max_examples=80, deadline=None)
@given(
    nodes=st.lists(NODE, min_size=1, max_size=5),
    running=st.lists(POD, max_size=8),
    nominated=st.lists(POD, max_size=8),
    nominated_running=st.booleans(),
    incoming=POD,
)
def test_node_search_with_nominations_agrees_with_the_reference_path(
    nodes: list[tuple[int, int, bool]],
    running: list[tuple[int, int, int, int]],
    nominated: list[tuple[int, int, int, int]],
    nominated_running: bool,
    incoming: tuple[int, int, int, int],
) -> None:
    outcomes: list[tuple[object, dict[str, Status]]] = []
    for use_batch in (True, False):
        fwk, snapshot = _setup(nodes, running, nominated, nominated_running, use_batch=use_batch)
        pod = _pod("incoming", incoming[1], incoming[2], incoming[3])
        nominated_nodes = frozenset(f"n{index % len(nodes)}" for index, *_ in nominated)
        algorithm = ScheduleAlgorithm(0, random.Random(0))
        try:
            result = asyncio.run(algorithm.schedule_pod(fwk, CycleState(), pod, snapshot, nominated_nodes))
        except FitError as err:
            outcomes.append(("unschedulable", dict(err.diagnosis.node_to_status)))
        else:
            outcomes.append((sorted(result.scored_nodes or [result.node]), dict(result.node_to_status)))
    assert outcomes[0] == outcomes[1]


def test_plugins_that_ignore_node_pods_register_no_pod_event_and_no_prefilter_extension() -> None:
    """What upstream's queue relies on holds for them: a plugin whose Filter read the node's pods would have to
    requeue pods when pods come or go, and its AddPod extension would have to see the nominated pods."""
    fwk, _ = _setup([(1, 1, False)], [], [], False)
    ignoring = [
        (name, plugin)
        for name, plugin in fwk.filter_plugins
        if isinstance(plugin, NodeOnlyFilter) and plugin.filter_ignores_node_pods()
    ]
    assert {name for name, _ in ignoring} == {"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity"}
    pod_resources = {EventResource.POD, EventResource.ASSIGNED_POD, EventResource.WILDCARD}
    for name, plugin in ignoring:
        assert isinstance(plugin, EnqueueExtensions), name
        for registration in plugin.events_to_register():
            event = registration.event
            assert not (event.resource in pod_resources and event.action & (ActionType.ADD | ActionType.DELETE)), name
        if isinstance(plugin, PreFilterPlugin):
            assert plugin.pre_filter_extensions() is None, name


@settings(max_examples=120, deadline=None)
@given(
    nodes=st.lists(NODE, min_size=1, max_size=5),
    running=st.lists(POD, max_size=8),
    nominated=st.lists(POD, max_size=8),
    incoming=POD,
    use_batch=st.booleans(),
)
# The node fails as it is (too little cpu for 2500m: 2000m taken of 4 cores); with the nominated 1500m pod
# added it fails for pods too. kube-scheduler reports the first pass's status: both reasons.
@example(nodes=[(4, 2, False)], running=[(0, 2000, 0, 0)], nominated=[(0, 1500, 4, 0)], incoming=(0, 2500, 0, 0),
         use_batch=True)  # fmt: skip
def test_a_node_with_nominated_pods_has_the_status_of_upstreams_two_pass_filter(
    nodes: list[tuple[int, int, bool]],
    running: list[tuple[int, int, int, int]],
    nominated: list[tuple[int, int, int, int]],
    incoming: tuple[int, int, int, int],
    use_batch: bool,
) -> None:
    """Every node's status in the node search is what the per-node two-pass filter gives it (the first pass, with
    the nominated pods of at least the pod's priority, decides whenever it rejects), also for nodes that fail as
    they are: a nominated pod can add a reason to theirs."""
    fwk, snapshot = _setup(nodes, running, nominated, False, use_batch=use_batch)
    pod = _pod("incoming", incoming[1], incoming[2], incoming[3])
    nominated_nodes = frozenset(f"n{index % len(nodes)}" for index, *_ in nominated)
    state = CycleState()
    assert fwk.run_pre_filter(state, pod, snapshot.node_infos).status is None
    expected = {}
    for info in snapshot.node_infos:
        status = fwk.run_filter_plugins_with_nominated_pods(state, pod, info)
        if status is not None:
            expected[info.name] = (status.plugin, status.code, status.reasons)
    algorithm = ScheduleAlgorithm(100, random.Random(0))
    try:
        result = asyncio.run(algorithm.schedule_pod(fwk, CycleState(), pod, snapshot, nominated_nodes))
        statuses = dict(result.node_to_status)
    except FitError as err:
        statuses = dict(err.diagnosis.node_to_status)
    assert {name: (s.plugin, s.code, s.reasons) for name, s in statuses.items()} == expected
