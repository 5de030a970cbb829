"""Preemption through the whole scheduler, in simulation: the default profile's DefaultPreemption evicts a
lower-priority pod through the simulated cluster, the preemptor is nominated, fails this attempt with
kube-scheduler's message, and binds on a later one; PodDisruptionBudgets steer the choice of node; a failed
eviction is retried; the metrics count it all."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from kubesched.api.objects import Pod, PodDisruptionBudget
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config
from kubesched.framework.listers import ListerStores
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def of(self, name: str) -> list[AttemptRecord]:
        return [record for record in self.all if record.pod.name == name]


def guard(app: str, allowed: int) -> PodDisruptionBudget:
    return PodDisruptionBudget.from_dict(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed},
        },
        "test PDB",
    )


def build(
    pods: list[Pod], pdbs: Sequence[PodDisruptionBudget] = (), *, metrics: SchedulerMetrics | None = None
) -> tuple[Scheduler, SimulatedCluster, VirtualClock, Records]:
    clock = VirtualClock()
    nodes = [make_node(name).capacity(cpu="2", memory="4Gi", pods=10).obj() for name in ("node-a", "node-b")]
    stores = ListerStores()
    for budget in pdbs:
        stores.pod_disruption_budgets.add(budget)
    cluster = SimulatedCluster(clock, nodes, pods, listers=stores.listers())
    records = Records()
    registry = in_tree_registry()
    scheduler = Scheduler(
        default_config(registry), registry, cluster, clock=clock, seed=0, observer=records, metrics=metrics
    )
    cluster.subscribe(scheduler.event_handlers)
    return scheduler, cluster, clock, records


def running(name: str, node: str, priority: int, app: str = "") -> Pod:
    builder = make_pod(name).uid(name).node_name(node).priority(priority).req(cpu="1500m")
    if app:
        builder = builder.label("app", app)
    return builder.obj()


def test_high_priority_pod_preempts_then_binds_on_a_later_attempt_sparing_the_pdb(run_async: Runner) -> None:
    async def scenario() -> None:
        reg = CollectorRegistry()
        pods = [
            running("guarded", "node-a", 100, app="db"),
            running("plain", "node-b", 100),
            make_pod("urgent").uid("urgent").priority(1000).req(cpu="1").obj(),
        ]
        scheduler, cluster, clock, records = build(
            pods, [guard("db", 0)], metrics=SchedulerMetrics(reg, sample_percent=100)
        )
        try:
            await scheduler.run_until_idle(clock)
            first, last = records.of("urgent")
            assert (first.result, first.attempts) == ("Unschedulable", 1)
            assert first.message == "0/2 nodes are available: 2 Insufficient cpu."
            assert (last.result, last.node, last.attempts) == ("Scheduled", "node-b", 2)
            # node-a's victim is guarded by a PDB that allows no disruption: node-b's is evicted instead.
            assert "plain" not in cluster.pods and "guarded" in cluster.pods
            assert cluster.preempted == {"urgent": ["default/plain"]}
            assert cluster.disruption_conditions["plain"]["reason"] == "PreemptionByScheduler"
            assert cluster.disruption_conditions["plain"]["message"] == (
                "default-scheduler: preempting to accommodate a higher priority pod"
            )
            preempted = [e for e in cluster.events if e.reason == "Preempted"]
            assert [(e.name, e.type, e.action, e.message) for e in preempted] == [
                ("plain", "Normal", "Preempting", "Preempted by pod urgent on node node-b")
            ]
            # The failed attempt recorded the nomination on the pod; binding cleared the nominator.
            assert cluster.pods["urgent"].status.nominated_node_name == "node-b"
            assert scheduler.queue.nominator.node_of("urgent") is None
            assert reg.get_sample_value("scheduler_preemption_attempts_total") == 1
            assert reg.get_sample_value("scheduler_preemption_victims_bucket", {"le": "1.0"}) == 1
        finally:
            await scheduler.close()

    run_async(scenario())


def test_without_victims_the_message_says_so_and_nothing_is_evicted(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [
            running("a", "node-a", 1000),
            running("b", "node-b", 1000),
            make_pod("low").uid("low").priority(10).req(cpu="1").obj(),
        ]
        scheduler, cluster, clock, records = build(pods)
        scheduler.max_attempts = 1
        try:
            await scheduler.run_until_idle(clock)
            (only,) = records.of("low")
            assert only.message == (
                "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
                "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
            )
            assert cluster.preempted == {}
            assert {"a", "b"} <= set(cluster.pods)
            assert cluster.conditions["low"]["message"] == only.message
        finally:
            await scheduler.close()

    run_async(scenario())


def test_failed_eviction_is_retried_and_never_crashes_the_scheduler(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [running("victim", "node-a", 100), running("other", "node-b", 2000)]
        pods.append(make_pod("urgent").uid("urgent").priority(1000).req(cpu="1").obj())
        scheduler, cluster, clock, records = build(pods)
        cluster.preempt_failures["victim"] = "etcd is unhappy"
        try:
            assert await scheduler.schedule_next()
            await scheduler.settle()
            # The eviction failed (logged): the preemptor is activated to try again at once, the victim stays.
            assert "victim" in cluster.pods
            assert scheduler.queue.counts().active == 1
            assert [record.result for record in records.of("urgent")] == ["Unschedulable"]
            del cluster.preempt_failures["victim"]
            await scheduler.run_until_idle(clock)
            assert [(record.result, record.node) for record in records.of("urgent")] == [
                ("Unschedulable", None),
                ("Unschedulable", None),
                ("Scheduled", "node-a"),
            ]
            assert cluster.preempted == {"urgent": ["default/victim"]}
        finally:
            await scheduler.close()

    run_async(scenario())


def test_preemption_clears_the_nomination_of_lower_priority_pods_on_the_node(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [
            running("victim", "node-a", 100),
            running("other", "node-b", 5000),
            # Nominated to node-a from an earlier preemption, but only priority 50: it loses that room.
            make_pod("waiting").uid("waiting").priority(50).req(cpu="2").nominated("node-a").obj(),
            make_pod("urgent").uid("urgent").priority(1000).req(cpu="1500m").obj(),
        ]
        scheduler, cluster, clock, records = build(pods)
        scheduler.max_attempts = 2
        try:
            await scheduler.run_until_idle(clock)
            assert cluster.preempted == {"urgent": ["default/victim"]}
            assert cluster.pods["waiting"].status.nominated_node_name == ""
            assert records.of("urgent")[-1].node == "node-a"
        finally:
            await scheduler.close()

    run_async(scenario())
