"""kube-scheduler's metrics from real simulations: attempts per profile, durations, the queue, the cache.

Every test schedules pods with a real scheduler over the simulated cluster (virtual clock) and reads the
numbers back from a fresh registry, so counts are exact.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.config.types import SchedulerConfiguration
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import DecisionCacheStats, Handle
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.metrics import (
    ATTEMPT_DURATION_BUCKETS,
    EXTENSION_POINT_BUCKETS,
    PLUGIN_DURATION_BUCKETS,
    PREEMPTION_VICTIMS_BUCKETS,
    SLI_DURATION_BUCKETS,
    SchedulerMetrics,
    attempts_label,
)
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "examples" / "policies"
DEFAULT = "default-scheduler"
BIN_PACKING = "bin-packing-scheduler"


class Boom:
    """A Filter that raises for pods labelled boom=yes: every attempt of such a pod is an Error."""

    name = "Boom"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if pod.pod.metadata.labels.get("boom") == "yes":
            raise RuntimeError("kaboom")
        return None


class Remembering:
    """A Filter that remembers the pods it saw and reports its lookups as a decision cache's: the first call
    for a pod misses, every later one hits."""

    name = "Remembering"

    def __init__(self, args: object, handle: Handle) -> None:
        self.seen: set[str] = set()
        self.hits = 0

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if pod.uid in self.seen:
            self.hits += 1
        self.seen.add(pod.uid)
        return None

    def decision_cache_stats(self) -> DecisionCacheStats:
        return DecisionCacheStats(hits=self.hits, misses=len(self.seen))


def registry() -> Registry:
    return merge(
        in_tree_registry(),
        {"Boom": PluginRegistration.of("Boom", Boom), "Remembering": PluginRegistration.of("Remembering", Remembering)},
    )


def two_profiles() -> SchedulerConfiguration:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": DEFAULT, "plugins": {"filter": {"enabled": [{"name": "Boom"}]}}},
            {
                "schedulerName": BIN_PACKING,
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
            },
        ],
    }
    return load_config_dict(document, "test", registry())


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def node(name: str, cpu: str = "2") -> Any:
    return make_node(name).capacity(cpu=cpu, memory="8Gi", pods=10).obj()


def workload() -> list[Pod]:
    """5 pods that fit, 1 too big for any node, 1 that makes its Filter raise, 1 gated: two profiles."""
    return [
        *(make_pod(f"a{i}").req(cpu="500m").obj() for i in range(3)),
        *(make_pod(f"b{i}").req(cpu="500m").scheduler(BIN_PACKING).obj() for i in range(2)),
        make_pod("big").req(cpu="4").obj(),
        make_pod("boom").label("boom", "yes").req(cpu="100m").obj(),
        make_pod("gated").gates("example.com/hold").obj(),
    ]


START = 1_700_000_000.0  # VirtualClock's default start, a whole second


async def simulate(
    metrics: SchedulerMetrics, pods: list[Pod], nodes: list[Any], config: SchedulerConfiguration | None = None
) -> tuple[Scheduler, SimulatedCluster, VirtualClock, Records]:
    clock = VirtualClock(START)
    cluster = SimulatedCluster(clock, nodes, pods)
    records = Records()
    cfg = config if config is not None else two_profiles()
    scheduler = Scheduler(cfg, registry(), cluster, clock=clock, seed=1, observer=records, metrics=metrics)
    scheduler.max_attempts = 4
    cluster.subscribe(scheduler.event_handlers)
    await scheduler.run_until_idle(clock)
    return scheduler, cluster, clock, records


def test_attempts_queue_and_cache_from_a_simulation(run_async: Runner) -> None:
    async def scenario() -> None:
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg, sample_percent=100)
        scheduler, cluster, clock, records = await simulate(metrics, workload(), [node("n1"), node("n2")])
        try:
            assert len(records.all) == 10, "the observer passed to the scheduler still sees every attempt"

            def attempts(result: str, profile: str) -> float:
                return value(reg, "scheduler_schedule_attempts_total", result=result, profile=profile)

            assert attempts("scheduled", DEFAULT) == 3
            assert attempts("scheduled", BIN_PACKING) == 2
            assert attempts("unschedulable", DEFAULT) == 1, "big waits for an event that could help"
            assert attempts("error", DEFAULT) == 4, "boom is retried up to the simulation's cap of 4"
            assert attempts("unschedulable", BIN_PACKING) == 0 and attempts("error", BIN_PACKING) == 0

            # Durations on the virtual clock: nothing takes time but waiting, so every attempt is 0 s.
            duration = "scheduler_scheduling_attempt_duration_seconds"
            assert value(reg, f"{duration}_count", result="scheduled", profile=DEFAULT) == 3
            assert value(reg, f"{duration}_count", result="error", profile=DEFAULT) == 4
            assert value(reg, f"{duration}_sum", result="error", profile=DEFAULT) == 0.0
            assert value(reg, f"{duration}_bucket", result="scheduled", profile=BIN_PACKING, le="0.001") == 2
            assert value(reg, "scheduler_scheduling_algorithm_duration_seconds_count") == 5, "successful searches"
            sli = "scheduler_pod_scheduling_sli_duration_seconds"
            assert value(reg, f"{sli}_count", attempts="1") == 5
            assert value(reg, f"{sli}_bucket", attempts="1", le="0.01") == 5
            assert value(reg, "scheduler_pod_scheduling_attempts_count") == 5
            assert value(reg, "scheduler_pod_scheduling_attempts_sum") == 5

            def pending(queue: str) -> float:
                return value(reg, "scheduler_pending_pods", queue=queue)

            assert [pending(q) for q in ("active", "backoff", "unschedulable", "gated")] == [0, 0, 1, 1]

            def incoming(queue: str, event: str) -> float:
                return value(reg, "scheduler_queue_incoming_pods_total", queue=queue, event=event)

            assert incoming("active", "PodAdd") == 7
            assert incoming("unschedulable", "PodAdd") == 1, "the gated pod"
            assert incoming("unschedulable", "ScheduleAttemptFailure") == 1, "big"
            assert incoming("backoff", "ScheduleAttemptFailure") == 3, "boom, before its 4th and last attempt"
            assert incoming("active", "BackoffComplete") == 3

            assert value(reg, "scheduler_cache_size", type="nodes") == 2
            assert value(reg, "scheduler_cache_size", type="pods") == 5
            assert value(reg, "scheduler_cache_size", type="assumed_pods") == 0
            assert value(reg, "scheduler_goroutines", operation="binding") == 0

            # A node big fits on: NodeAdd moves it to activeQ (its 1 s backoff is long over) and it binds
            # on its 2nd attempt, 100 virtual seconds after it first entered the queue. boom's error backoffs
            # (1, 2 and 4 s) each ended with the next 1 s ordering window: the run so far took 10 s.
            assert clock.now() == START + 10
            clock.advance_to(clock.now() + 90)
            cluster.add_node(node("n3", cpu="8"))
            await scheduler.run_until_idle(clock)
            assert attempts("scheduled", DEFAULT) == 4
            assert value(reg, f"{sli}_count", attempts="2") == 1
            assert value(reg, f"{sli}_sum", attempts="2") == 100.0
            assert value(reg, f"{sli}_bucket", attempts="2", le="81.92") == 0
            assert value(reg, f"{sli}_bucket", attempts="2", le="163.84") == 1
            assert value(reg, "scheduler_pod_scheduling_attempts_bucket", le="2.0") == 6
            assert incoming("active", "NodeAdd") == 1
            assert [pending(q) for q in ("active", "backoff", "unschedulable", "gated")] == [0, 0, 0, 1]
            assert value(reg, "scheduler_cache_size", type="nodes") == 3
            assert value(reg, "scheduler_cache_size", type="pods") == 6
        finally:
            await scheduler.close()

    run_async(scenario())


def test_extension_point_and_plugin_durations(run_async: Runner) -> None:
    async def scenario() -> None:
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg, sample_percent=100)
        scheduler, *_ = await simulate(metrics, workload(), [node("n1"), node("n2")])
        await scheduler.close()
        replaced = [name for fwk in scheduler.frameworks.values() for name in vars(fwk) if name.startswith("run_")]
        assert replaced == [], "runners are observed by the class's own code, never swapped on the instance"
        point = "scheduler_framework_extension_point_duration_seconds_count"

        def points(extension_point: str, status: str, profile: str = DEFAULT) -> float:
            return value(reg, point, extension_point=extension_point, status=status, profile=profile)

        # PreEnqueue: every pod added, by its profile, and every move into backoffQ (boom's 3 error retries, as
        # upstream's moveToBackoffQ runs the plugins); SchedulingGates holds the gated one.
        assert points("PreEnqueue", "Success") == 5 + 3 and points("PreEnqueue", "Success", BIN_PACKING) == 2
        assert points("PreEnqueue", "UnschedulableAndUnresolvable") == 1
        # Filter: once per cycle (3 a's, big, 4 x boom), Error only when the search ends in one.
        assert points("PreFilter", "Success") == 8
        assert points("Filter", "Success") == 4 and points("Filter", "Error") == 4
        assert points("Filter", "Success", BIN_PACKING) == 2
        # Scoring, Reserve .. PostBind: the 3 cycles that found nodes (big fit nowhere, boom raised).
        for extension_point in ("PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind", "PostBind"):
            assert points(extension_point, "Success") == 3, extension_point
            assert points(extension_point, "Success", BIN_PACKING) == 2, extension_point
        # PostFilter for "big", which fits nowhere: DynamicResources (no claims) then DefaultPreemption (no victims).
        assert points("PostFilter", "Unschedulable") == 1
        assert value(reg, "scheduler_preemption_attempts_total") == 1
        assert points("Unreserve", "Success") == 0
        bind_buckets = {"extension_point": "Bind", "status": "Success", "profile": DEFAULT, "le": "+Inf"}
        assert value(reg, point.replace("_count", "_bucket"), **bind_buckets) == 3

        plugin = "scheduler_plugin_execution_duration_seconds_count"

        def plugins(name: str, extension_point: str, status: str) -> float:
            return value(reg, plugin, plugin=name, extension_point=extension_point, status=status)

        # Every cycle sampled: one observation per plugin call. Boom answers per node (the a's on both
        # nodes; boom raises on its first), NodeResourcesFit per batch, labelled by its first rejection:
        # big (both nodes; it asks for more than a whole node, so since v1.34 UnschedulableAndUnresolvable)
        # and boom's 4 attempts (bin packing had filled n1 by then).
        assert plugins("Boom", "Filter", "Error") == 4
        assert plugins("Boom", "Filter", "Success") == 3 * 2
        assert plugins("NodeResourcesFit", "Filter", "UnschedulableAndUnresolvable") == 1
        assert plugins("NodeResourcesFit", "Filter", "Unschedulable") == 4
        assert plugins("NodeResourcesFit", "Filter", "Success") == 3 + 2
        assert plugins("DefaultBinder", "Bind", "Success") == 5, "both profiles"
        assert plugins("SchedulingGates", "PreEnqueue", "UnschedulableAndUnresolvable") == 1
        assert plugins("NodeAffinity", "PreFilter", "Skip") == 8 + 2
        assert plugins("TaintToleration", "ScoreExtensionNormalize", "Success") == 5
        assert plugins("DefaultPreemption", "PostFilter", "Unschedulable") == 1

    run_async(scenario())


class Answers(random.Random):
    """randrange answers from a list: which cycles are sampled is then known."""

    def __init__(self, answers: list[int]) -> None:
        super().__init__(0)
        self.answers = answers

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return self.answers.pop(0)


def test_plugin_durations_are_sampled_once_per_cycle(run_async: Runner) -> None:
    async def scenario() -> None:
        # Three pods: PreEnqueue asks once per pod, then each scheduling cycle asks once (its first runner)
        # and keeps the answer for all its plugins, binding cycle included. 0..9 of 100 is "sampled".
        rng = Answers([50, 50, 50, 3, 99, 9])
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg, rng=rng)
        pods = [make_pod(f"p{i}").req(cpu="100m").obj() for i in range(3)]
        scheduler, *_ = await simulate(metrics, pods, [node("n1")])
        await scheduler.close()
        assert rng.answers == []
        plugin = "scheduler_plugin_execution_duration_seconds_count"
        assert value(reg, plugin, plugin="SchedulingGates", extension_point="PreEnqueue", status="Success") == 0
        assert value(reg, plugin, plugin="DefaultBinder", extension_point="Bind", status="Success") == 2
        assert value(reg, plugin, plugin="NodeResourcesFit", extension_point="PreFilter", status="Success") == 2
        point = "scheduler_framework_extension_point_duration_seconds_count"
        assert value(reg, point, extension_point="Bind", status="Success", profile=DEFAULT) == 3, "never sampled"

    run_async(scenario())


def test_no_plugin_durations_at_zero_percent_and_nothing_without_metrics(run_async: Runner) -> None:
    async def scenario() -> None:
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg, sample_percent=0)
        scheduler, *_ = await simulate(metrics, workload(), [node("n1"), node("n2")])
        await scheduler.close()
        names = {metric.name for metric in reg.collect() for sample in metric.samples}
        assert "scheduler_plugin_execution_duration_seconds" not in names
        assert value(reg, "scheduler_schedule_attempts_total", result="scheduled", profile=DEFAULT) == 3

        plain, *_ = await simulate_without_metrics()
        fwk = plain.frameworks[DEFAULT]
        assert fwk.metrics is None
        assert "run_bind" not in vars(fwk), "a framework without metrics keeps its plain runners"
        await plain.close()

    run_async(scenario())


async def simulate_without_metrics() -> tuple[Scheduler, SimulatedCluster, VirtualClock]:
    clock = VirtualClock()
    cluster = SimulatedCluster(clock, [node("n1")], [make_pod("p").obj()])
    scheduler = Scheduler(two_profiles(), registry(), cluster, clock=clock, seed=1)
    cluster.subscribe(scheduler.event_handlers)
    await scheduler.run_until_idle(clock)
    return scheduler, cluster, clock


def test_permit_wait_counts_in_the_attempt_and_the_sli(run_async: Runner) -> None:
    async def scenario() -> None:
        # SecurityAuditPermit is not needed: a plugin that waits at Permit and is never allowed times out
        # after 30 virtual seconds; the attempt then failed on the one node it had reserved.
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg, sample_percent=100)
        cfg = load_config_dict(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": DEFAULT, "plugins": {"permit": {"enabled": [{"name": "Waits"}]}}}],
            },
            "test",
            merge(registry(), {"Waits": PluginRegistration.of("Waits", Waits)}),
        )
        clock = VirtualClock()
        cluster = SimulatedCluster(clock, [node("n1")], [make_pod("w").obj()])
        waits = merge(registry(), {"Waits": PluginRegistration.of("Waits", Waits)})
        scheduler = Scheduler(cfg, waits, cluster, clock=clock, metrics=metrics)
        scheduler.max_attempts = 1
        cluster.subscribe(scheduler.event_handlers)
        await scheduler.run_until_idle(clock)
        await scheduler.close()
        duration = "scheduler_scheduling_attempt_duration_seconds"
        assert value(reg, f"{duration}_sum", result="unschedulable", profile=DEFAULT) == 30.0
        assert value(reg, f"{duration}_bucket", result="unschedulable", profile=DEFAULT, le="16.384") == 0
        assert value(reg, f"{duration}_bucket", result="unschedulable", profile=DEFAULT, le="+Inf") == 1
        point = "scheduler_framework_extension_point_duration_seconds_count"
        assert value(reg, point, extension_point="Permit", status="Wait", profile=DEFAULT) == 1
        assert value(reg, point, extension_point="Unreserve", status="Success", profile=DEFAULT) == 1
        plugin = "scheduler_plugin_execution_duration_seconds_count"
        assert value(reg, plugin, plugin="Waits", extension_point="Permit", status="Wait") == 1

    run_async(scenario())


class Waits:
    name = "Waits"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), 30.0


def test_policy_decisions_and_decision_cache(run_async: Runner) -> None:
    async def scenario() -> None:
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg)
        args = {"policies": [str(POLICIES)], "data": [str(POLICIES / "data.json")]}
        cfg = load_config_dict(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": DEFAULT,
                        "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                        "pluginConfig": [{"name": "SecurityAuditFilter", "args": args}],
                    }
                ],
            },
            "test",
            registry(),
        )
        replicas = [policy_pod(f"web-{i}", app="web") for i in range(5)]
        miner = policy_pod("miner", image="evil.example.com/miner:1")
        nodes = [make_node(n).capacity(cpu="4", memory="8Gi", pods=20).obj() for n in ("node-a", "node-b", "node-x")]
        scheduler, *_ = await simulate(metrics, [*replicas, miner], nodes, cfg)
        await scheduler.close()
        assert value(reg, "scheduler_schedule_attempts_total", result="scheduled", profile=DEFAULT) == 5
        assert value(reg, "scheduler_schedule_attempts_total", result="unschedulable", profile=DEFAULT) == 1
        # One verdict per record about the node that matters: the chosen one for each replica, every
        # node for the miner (all three deny it).
        assert value(reg, "kubesched_policy_decisions_total", engine="embedded", outcome="allow") == 5
        assert value(reg, "kubesched_policy_decisions_total", engine="embedded", outcome="deny") == 3
        # Replicas share one cache entry: the first and the miner missed, the other four hit.
        assert value(reg, "kubesched_policy_decision_cache_hits_total") == 4
        assert value(reg, "kubesched_policy_decision_cache_misses_total") == 2

    run_async(scenario())


def test_decision_cache_counts_are_what_plugins_report_summed_over_profiles(run_async: Runner) -> None:
    """Any plugin that is a DecisionCacheReporter counts, in every profile; nothing is read from its attributes."""

    async def scenario() -> None:
        reg = CollectorRegistry()
        metrics = SchedulerMetrics(reg)
        remembering = {"filter": {"enabled": [{"name": "Remembering"}]}}
        cfg = load_config_dict(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {"schedulerName": DEFAULT, "plugins": remembering},
                    {"schedulerName": BIN_PACKING, "plugins": remembering},
                ],
            },
            "test",
            registry(),
        )
        pods = [
            *(make_pod(f"a{i}").req(cpu="100m").obj() for i in range(3)),
            *(make_pod(f"b{i}").req(cpu="100m").scheduler(BIN_PACKING).obj() for i in range(2)),
        ]
        scheduler, *_ = await simulate(metrics, pods, [node("n1"), node("n2"), node("n3")], cfg)
        await scheduler.close()
        assert value(reg, "scheduler_schedule_attempts_total", result="scheduled", profile=DEFAULT) == 3
        # Each pod is filtered on three nodes: one miss, then two hits.
        assert value(reg, "kubesched_policy_decision_cache_misses_total") == 5
        assert value(reg, "kubesched_policy_decision_cache_hits_total") == 10

    run_async(scenario())


def policy_pod(name: str, *, app: str = "", image: str = "nginx:1.27") -> Pod:
    raw = make_pod(name).req(cpu="100m").raw()
    raw["spec"]["containers"][0]["image"] = image
    if app:
        raw["metadata"]["labels"] = {"app": app}
    return Pod.from_dict(raw, "test")


def test_preemption_metrics_are_registered_before_preemption_exists() -> None:
    reg = CollectorRegistry()
    metrics = SchedulerMetrics(reg)
    assert value(reg, "scheduler_preemption_attempts_total") == 0
    assert reg.get_sample_value("scheduler_preemption_victims_count") == 0
    metrics.preemption_attempted()
    metrics.preemption_victims_selected(3)
    assert value(reg, "scheduler_preemption_attempts_total") == 1
    assert value(reg, "scheduler_preemption_victims_bucket", le="2.0") == 0
    assert value(reg, "scheduler_preemption_victims_bucket", le="4.0") == 1
    metrics.preemption_victims_selected(4)  # a bound belongs to its own bucket: le is "less or equal"
    metrics.preemption_victims_selected(100)
    assert value(reg, "scheduler_preemption_victims_bucket", le="4.0") == 2
    assert value(reg, "scheduler_preemption_victims_bucket", le="64.0") == 2
    assert value(reg, "scheduler_preemption_victims_bucket", le="+Inf") == 3
    assert value(reg, "scheduler_preemption_victims_count") == 3
    assert value(reg, "scheduler_preemption_victims_sum") == 107
    # Nothing attached yet: the scrape-time metrics have no samples rather than made-up zeros.
    assert reg.get_sample_value("scheduler_pending_pods", {"queue": "active"}) is None


def test_one_set_per_registry_and_close_unregisters() -> None:
    reg = CollectorRegistry()
    metrics = SchedulerMetrics(reg)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        SchedulerMetrics(reg)
    metrics.close()
    again = SchedulerMetrics(reg)
    again.preemption_attempted()
    assert value(reg, "scheduler_preemption_attempts_total") == 1


@pytest.mark.parametrize(
    ("buckets", "first", "last", "count"),
    [
        pytest.param(ATTEMPT_DURATION_BUCKETS, 0.001, 16.384, 15, id="attempt-duration-1ms-x2"),
        pytest.param(SLI_DURATION_BUCKETS, 0.01, 5242.88, 20, id="sli-10ms-x2"),
        pytest.param(EXTENSION_POINT_BUCKETS, 0.0001, 0.2048, 12, id="extension-point-0.1ms-x2"),
        pytest.param(PLUGIN_DURATION_BUCKETS, 0.00001, 0.00001 * 1.5**19, 20, id="plugin-10us-x1.5"),
        pytest.param(PREEMPTION_VICTIMS_BUCKETS, 1, 64, 7, id="preemption-victims-1-to-64"),
    ],
)
def test_upstream_bucket_boundaries(buckets: tuple[float, ...], first: float, last: float, count: int) -> None:
    assert len(buckets) == count
    assert buckets[0] == first
    assert buckets[-1] == pytest.approx(last, rel=1e-12)


@pytest.mark.parametrize(("attempts", "label"), [(1, "1"), (14, "14"), (15, "15+"), (40, "15+")])
def test_sli_attempts_label(attempts: int, label: str) -> None:
    assert attempts_label(attempts) == label
