"""The scheduler's cycles with real frameworks and test plugins: errors, Reserve, Permit, Bind, requeue.

Test plugins are ordinary plugins registered next to the in-tree ones, the way an out-of-tree plugin
joins; the cluster is the simulated backend on a virtual clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo, PreFilterResult
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


class Journal:
    """What the test plugins saw, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.handles: dict[str, Handle] = {}


JOURNAL = Journal()


class Boom:
    """Filter that raises for pods labelled boom=yes."""

    name = "Boom"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if pod.pod.metadata.labels.get("boom") == "yes":
            raise RuntimeError("kaboom")
        return None


class AuditFilter:
    """The seed's plugin shape: a name and a filter."""

    name = "AuditFilter"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.labels.get("compliance") != "pci":
            return Status(Code.UNSCHEDULABLE, "Denied by security policy: node is not PCI compliant")
        return None


class Gate:
    """Reserve + Permit: rejects at Reserve for pods labelled reserve=no, waits at Permit for approve=wait."""

    name = "Gate"

    def __init__(self, args: object, handle: Handle) -> None:
        JOURNAL.handles[self.name] = handle

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        JOURNAL.calls.append(f"reserve {pod.name} {node_name}")
        if pod.pod.metadata.labels.get("reserve") == "no":
            return Status(Code.UNSCHEDULABLE, "reservation refused")
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        JOURNAL.calls.append(f"unreserve {pod.name} {node_name}")

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        if pod.pod.metadata.labels.get("approve") == "wait":
            return Status(Code.WAIT), 30.0
        return None, 0.0


class OnlyA:
    """PreFilter narrowing the search to node a (a PreFilterResult)."""

    name = "OnlyA"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreFilterResult | Status | None:
        return PreFilterResult(frozenset({"a", "ghost"}))

    def pre_filter_extensions(self) -> None:
        return None


class MarkThenFail:
    """PreBind that writes an annotation on the pod it binds (as ClusterBind writes its commit record), then fails
    the binding once; the annotation each attempt's pod carried is journalled."""

    name = "MarkThenFail"

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        seen = pod.pod.metadata.annotations.get("example.com/mark")
        JOURNAL.calls.append(f"pre-bind {pod.name} mark={seen}")
        if seen is not None:
            return None
        latest = self.handle.get_pod(pod.uid) or pod.pod
        await self.handle.client.compare_and_set_annotation(latest, "example.com/mark", None, "written")
        return Status.error("failed after writing the mark")

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo) -> Status | None:
        return None


def registry() -> Registry:
    extra = {cls.name: PluginRegistration.of(cls.name, cls) for cls in (Boom, AuditFilter, Gate, OnlyA, MarkThenFail)}
    return merge(in_tree_registry(), extra)


def config(**points: list[str]) -> Any:
    plugins = {point: {"enabled": [{"name": n} for n in names]} for point, names in points.items()}
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "plugins": plugins}],
    }
    return load_config_dict(document, "test", registry())


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def last(self, name: str) -> AttemptRecord:
        return [r for r in self.all if r.pod.name == name][-1]


def nodes(*names: str, cpu: str = "4") -> list[Any]:
    return [make_node(n).capacity(cpu=cpu, memory="8Gi", pods=10).obj() for n in names]


def build(cfg: Any, node_objs: list[Any], pods: list[Pod]) -> tuple[Scheduler, SimulatedCluster, VirtualClock, Records]:
    clock = VirtualClock()
    cluster = SimulatedCluster(clock, node_objs, pods)
    records = Records()
    scheduler = Scheduler(cfg, registry(), cluster, clock=clock, seed=1, observer=records)
    scheduler.max_attempts = 4
    cluster.subscribe(scheduler.event_handlers)
    return scheduler, cluster, clock, records


def test_plugin_that_raises_gives_error_and_retries_with_backoff(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [make_pod("bad").label("boom", "yes").obj(), make_pod("good").obj()]
        scheduler, cluster, clock, records = build(config(filter=["Boom"]), nodes("a"), pods)
        start = clock.now()
        await scheduler.run_until_idle(clock)
        bad = records.last("bad")
        assert bad.result == "Error"
        assert bad.message == 'running "Boom" filter plugin: kaboom'
        assert bad.attempts == 4, "retried until the simulation's attempt cap"
        # Error backoff 1, 2, 4 s between the four attempts, all in virtual time; each ends when the 1 s ordering
        # window after the one it expires in begins (the clock starts on a whole second): 2 + 3 + 5 s.
        assert clock.now() - start == 10.0
        assert records.last("good").result == "Scheduled"
        condition = cluster.conditions[bad.pod.uid]
        assert condition["reason"] == "SchedulerError"
        await scheduler.close()

    run_async(scenario())


def test_seed_style_filter_plugin_rejects_with_its_reason(run_async: Runner) -> None:
    async def scenario() -> None:
        node_objs = [make_node("a").label("compliance", "pci").obj(), make_node("b").obj(), make_node("c").obj()]
        scheduler, _cluster, clock, records = build(config(filter=["AuditFilter"]), node_objs, [make_pod("p").obj()])
        await scheduler.run_until_idle(clock)
        assert records.last("p").node == "a"
        scheduler2, cluster2, clock2, records2 = build(
            config(filter=["AuditFilter"]), [make_node("b").obj(), make_node("c").obj()], [make_pod("p").obj()]
        )
        await scheduler2.run_until_idle(clock2)
        record = records2.last("p")
        assert record.message == (
            "0/2 nodes are available: 2 Denied by security policy: node is not PCI compliant. "
            # DynamicResources' PostFilter, then DefaultPreemption's, in v1.35's default profile
            "no new claims to deallocate, "
            "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        )
        assert record.attempts == 1, "no event can help, so the pod waits in the unschedulable pool"
        events = cluster2.events_for("default", "p")
        assert [(e.type, e.reason) for e in events] == [("Warning", "FailedScheduling")]
        await scheduler.close()
        await scheduler2.close()

    run_async(scenario())


def test_reserve_rejection_unreserves_and_reports_one_node(run_async: Runner) -> None:
    async def scenario() -> None:
        JOURNAL.calls.clear()
        pods = [make_pod("r").label("reserve", "no").obj()]
        scheduler, _cluster, clock, records = build(config(reserve=["Gate"]), nodes("a"), pods)
        scheduler.max_attempts = 1
        await scheduler.run_until_idle(clock)
        record = records.last("r")
        assert record.result == "Unschedulable"
        assert record.message == "0/1 nodes are available: 1 reservation refused."
        assert JOURNAL.calls == ["reserve r a", "unreserve r a"]
        assert scheduler.cache.node("a") is not None and not scheduler.cache.node("a").pods  # type: ignore[union-attr]
        await scheduler.close()

    run_async(scenario())


def test_permit_wait_allowed_through_handle_binds(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [make_pod("w").label("approve", "wait").obj(), make_pod("other").obj()]
        scheduler, cluster, clock, records = build(config(reserve=["Gate"], permit=["Gate"]), nodes("a"), pods)
        for _ in range(3):
            await scheduler.schedule_next()
        await scheduler.settle()
        handle = JOURNAL.handles["Gate"]
        waiting = list(handle.iterate_waiting_pods())
        assert [w.pod.name for w in waiting] == ["w"]
        assert records.last("other").result == "Scheduled", "a waiting pod does not block the next one"
        assert scheduler.cache.node("a").pods  # type: ignore[union-attr]
        waiting[0].allow("Gate")
        await scheduler.run_until_idle(clock)
        assert records.last("w").result == "Scheduled" and records.last("w").node == "a"
        assert cluster.pods[records.last("w").pod.uid].spec.node_name == "a"
        await scheduler.close()

    run_async(scenario())


def test_permit_timeout_rejects_unreserves_and_requeues(run_async: Runner) -> None:
    async def scenario() -> None:
        JOURNAL.calls.clear()
        pods = [make_pod("w").label("approve", "wait").obj()]
        scheduler, _cluster, clock, records = build(config(reserve=["Gate"], permit=["Gate"]), nodes("a"), pods)
        scheduler.max_attempts = 1
        start = clock.now()
        await scheduler.run_until_idle(clock)
        record = records.last("w")
        assert record.result == "Unschedulable"
        assert record.message == "0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin Gate."
        assert clock.now() - start == 30.0
        assert JOURNAL.calls == ["reserve w a", "unreserve w a"]
        assert not scheduler.cache.node("a").pods  # type: ignore[union-attr]
        await scheduler.close()

    run_async(scenario())


def test_bind_failure_forgets_and_retries(run_async: Runner) -> None:
    async def scenario() -> None:
        pod = make_pod("p").obj()
        scheduler, cluster, clock, records = build(config(), nodes("a"), [pod])
        cluster.bind_failures[pod.metadata.uid] = "etcd is sad"
        await scheduler.schedule_next()
        await scheduler.settle()
        first = records.last("p")
        assert first.result == "Error"
        assert first.message == 'running Bind plugin "DefaultBinder": etcd is sad'
        assert not scheduler.cache.is_assumed(pod.metadata.uid)
        del cluster.bind_failures[pod.metadata.uid]
        await scheduler.run_until_idle(clock)
        assert records.last("p").result == "Scheduled" and records.last("p").attempts == 2
        await scheduler.close()

    run_async(scenario())


def test_a_pod_changed_while_assumed_is_retried_as_changed(run_async: Runner) -> None:
    """The queue skips updates of an assumed pod; after a failed binding cycle the next attempt must read the pod's
    latest version (a commit record written while binding), not the one the failed attempt started from."""

    async def scenario() -> None:
        JOURNAL.calls.clear()
        scheduler, _cluster, clock, records = build(config(preBind=["MarkThenFail"]), nodes("a"), [make_pod("p").obj()])
        await scheduler.run_until_idle(clock)
        assert JOURNAL.calls == ["pre-bind p mark=None", "pre-bind p mark=written"]
        assert records.last("p").result == "Scheduled"
        assert records.last("p").pod.pod.metadata.annotations == {"example.com/mark": "written"}
        await scheduler.close()

    run_async(scenario())


def test_unschedulable_pod_requeued_when_a_pod_is_deleted(run_async: Runner) -> None:
    async def scenario() -> None:
        running = make_pod("hog").node_name("a").req(cpu="3").obj()
        waiting = make_pod("needs-2").req(cpu="2").obj()
        scheduler, cluster, clock, records = build(config(), nodes("a"), [running, waiting])
        await scheduler.run_until_idle(clock)
        assert records.last("needs-2").message == (
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
        assert scheduler.queue.counts().unschedulable == 1
        cluster.add_node(make_node("tiny").capacity(cpu="1", memory="1Gi", pods=10).obj())
        await scheduler.run_until_idle(clock)
        # NodeResourcesFit's hint: a new node too small for the pod cannot help, so no retry.
        assert records.last("needs-2").attempts == 1
        assert scheduler.queue.counts().unschedulable == 1
        cluster.delete_pod(running.metadata.uid)
        await scheduler.run_until_idle(clock)
        assert records.last("needs-2").result == "Scheduled"
        assert records.last("needs-2").node == "a"
        await scheduler.close()

    run_async(scenario())


def test_prefilter_result_narrows_and_absent_nodes_reported(run_async: Runner) -> None:
    async def scenario() -> None:
        pod = make_pod("p").req(cpu="8").obj()
        scheduler, cluster, clock, records = build(config(preFilter=["OnlyA"]), nodes("a", "b", "c"), [pod])
        scheduler.max_attempts = 1
        await scheduler.run_until_idle(clock)
        assert records.last("p").message == (
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [OnlyA]. "
            # 8 CPUs exceed node a's whole allocatable, the others are absent: preemption cannot help anywhere.
            "no new claims to deallocate, "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )
        ok = make_pod("q").obj()
        cluster.add_pod(ok)
        await scheduler.run_until_idle(clock)
        assert records.last("q").node == "a"
        await scheduler.close()

    run_async(scenario())


def test_plugin_that_narrowed_the_nodes_is_a_rejector(run_async: Runner) -> None:
    """v1.35 records the PreFilter plugins that narrowed the nodes among the pod's unschedulable plugins,
    so an event none of them registers (a pod bound elsewhere) does not retry the pod (kube-oracle: 1 attempt)."""

    async def scenario() -> None:
        only_ghost = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["ghost"]}]}
                    ]
                }
            }
        }
        pod = make_pod("p").affinity(only_ghost).obj()
        scheduler, cluster, clock, records = build(config(), nodes("a", "b"), [pod])
        await scheduler.run_until_idle(clock)
        assert records.last("p").message == (
            "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. no new claims to deallocate, "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
        cluster.add_pod(make_pod("q").obj())
        await scheduler.run_until_idle(clock)
        assert records.last("q").result == "Scheduled"
        assert records.last("p").attempts == 1
        await scheduler.close()

    run_async(scenario())


def test_nominated_node_is_tried_first(run_async: Runner) -> None:
    async def scenario() -> None:
        pod = make_pod("p").nominated("c").obj()
        scheduler, _cluster, clock, records = build(config(), nodes("a", "b", "c", "d"), [pod])
        await scheduler.run_until_idle(clock)
        record = records.last("p")
        assert record.node == "c" and record.evaluated_nodes == 1 and record.totals is None
        await scheduler.close()

    run_async(scenario())


def test_deleted_pending_pod_is_not_scheduled(run_async: Runner) -> None:
    async def scenario() -> None:
        pod = make_pod("gone").obj()
        scheduler, cluster, clock, records = build(config(), nodes("a"), [pod])
        cluster.delete_pod(pod.metadata.uid)
        await scheduler.run_until_idle(clock)
        assert records.all == []
        await scheduler.close()

    run_async(scenario())


def test_live_loop_sleeps_until_the_queue_wakes_it_and_stops_when_told(run_async: Runner) -> None:
    async def scenario() -> None:
        scheduler, cluster, _, records = build(config(), nodes("a"), [])
        pops = 0
        pop = scheduler.queue.pop

        def counting_pop() -> Any:
            nonlocal pops
            pops += 1
            return pop()

        scheduler.queue.pop = counting_pop  # type: ignore[method-assign]
        stop = asyncio.Event()
        loop = asyncio.create_task(scheduler.run(stop))
        for _ in range(50):
            await asyncio.sleep(0)
        idle_pops = pops
        assert idle_pops <= 2, "an idle scheduler waits for the queue instead of polling it"
        cluster.add_pod(make_pod("late").obj())
        for _ in range(20):
            await asyncio.sleep(0)
        assert records.last("late").result == "Scheduled" and records.last("late").node == "a"
        stop.set()
        await asyncio.wait_for(loop, timeout=5)

    run_async(scenario())
