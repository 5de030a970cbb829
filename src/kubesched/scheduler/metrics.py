"""The scheduler's Prometheus metrics, with kube-scheduler's names, labels and buckets.

Who calls it: the scheduler builds one :class:`SchedulerMetrics` when it serves metrics (``kubesched run``; tests
pass a fresh ``CollectorRegistry``). It is fed from attempt records (it is an
:class:`~kubesched.scheduler.results.AttemptObserver`), from the framework runtime (it is a
:class:`~kubesched.framework.runtime.instrumentation.FrameworkMetrics`; plugin durations in a sample of cycles, as
upstream), and at scrape time from the queue, the cache and the binding tasks it is :meth:`attached
<SchedulerMetrics.attach>` to. The histograms are plain bucket counts, observed from the event loop without a lock
and turned into Prometheus histograms when scraped (scrape from the loop too, as
:class:`~kubesched.scheduler.health.HealthServer` does). Every metric, its labels and meaning:
docs/reference/metrics.md.
"""

from __future__ import annotations

import bisect
import logging
import random
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import DecisionCacheReporter, DecisionCacheStats
from kubesched.framework.runtime.framework import Framework
from kubesched.scheduler.cache.cache import Cache
from kubesched.scheduler.queue.scheduling_queue import SchedulingQueue
from kubesched.scheduler.results import ERROR, SCHEDULED, UNSCHEDULABLE, AttemptObserver, AttemptRecord, Phase

log = logging.getLogger(__name__)

# ---- names (kube-scheduler's, subsystem "scheduler"; kubesched_* are ours) ------------------------

SCHEDULE_ATTEMPTS = "scheduler_schedule_attempts_total"
SCHEDULING_ATTEMPT_DURATION = "scheduler_scheduling_attempt_duration_seconds"
SCHEDULING_ALGORITHM_DURATION = "scheduler_scheduling_algorithm_duration_seconds"
POD_SCHEDULING_SLI_DURATION = "scheduler_pod_scheduling_sli_duration_seconds"
POD_SCHEDULING_ATTEMPTS = "scheduler_pod_scheduling_attempts"
FRAMEWORK_EXTENSION_POINT_DURATION = "scheduler_framework_extension_point_duration_seconds"
PLUGIN_EXECUTION_DURATION = "scheduler_plugin_execution_duration_seconds"
PENDING_PODS = "scheduler_pending_pods"
QUEUE_INCOMING_PODS = "scheduler_queue_incoming_pods_total"
PREEMPTION_ATTEMPTS = "scheduler_preemption_attempts_total"
PREEMPTION_VICTIMS = "scheduler_preemption_victims"
CACHE_SIZE = "scheduler_cache_size"
GOROUTINES = "scheduler_goroutines"
POLICY_DECISIONS = "kubesched_policy_decisions_total"
POLICY_DECISION_CACHE_HITS = "kubesched_policy_decision_cache_hits_total"
POLICY_DECISION_CACHE_MISSES = "kubesched_policy_decision_cache_misses_total"

# The ``result`` label of the attempt metrics.
RESULT_SCHEDULED = "scheduled"
RESULT_UNSCHEDULABLE = "unschedulable"
RESULT_ERROR = "error"
_RESULTS = {SCHEDULED: RESULT_SCHEDULED, UNSCHEDULABLE: RESULT_UNSCHEDULABLE, ERROR: RESULT_ERROR}

# kube-scheduler samples plugin durations in this share of its scheduling cycles.
PLUGIN_METRICS_SAMPLE_PERCENT = 10

# The SLI's ``attempts`` label: "1" .. "14", then "15+".
MAX_ATTEMPTS_LABEL = 15

# The cycle-state key under which a cycle's sampling decision is kept (read by every runner of the cycle).
SAMPLED_KEY = "kubesched.io/record-plugin-metrics"


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` upper bounds from ``start``, each ``factor`` times the last; computed by repeated
    multiplication, as Prometheus' Go client does, so the ``le`` labels come out the same."""
    buckets: list[float] = []
    bound = start
    for _ in range(count):
        buckets.append(bound)
        bound *= factor
    return tuple(buckets)


ATTEMPT_DURATION_BUCKETS = exponential_buckets(0.001, 2, 15)  # 1 ms .. ~16 s
SLI_DURATION_BUCKETS = exponential_buckets(0.01, 2, 20)  # 10 ms .. ~87 min
EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)  # 0.1 ms .. ~200 ms
PLUGIN_DURATION_BUCKETS = exponential_buckets(0.00001, 1.5, 20)  # 10 µs .. ~22 ms
POD_ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)  # 1 .. 16
PREEMPTION_VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)  # 1 .. 64


def attempts_label(attempts: int) -> str:
    return f"{MAX_ATTEMPTS_LABEL}+" if attempts >= MAX_ATTEMPTS_LABEL else str(attempts)


class HistogramChild:
    """One label set's bucket counts (``counts[i]``: observations in bucket i alone; the last is +Inf)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bound's bucket (le is "less or equal").
        self.counts[bisect.bisect_left(self.bounds, amount)] += 1
        self.sum += amount

    @property
    def count(self) -> int:
        return sum(self.counts)


class HistogramFamily:
    """A histogram and its label sets, exported at scrape time; children are created on first use (an
    unlabelled histogram has its one child from the start, so it is exported at zero, as upstream)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds = tuple(float(bound) for bound in buckets)
        # The le labels as prometheus_client writes them for its own histograms ("0.001", "2.0", "+Inf").
        self._les = [*(str(floatToGoString(bound)) for bound in self.bounds), "+Inf"]  # type: ignore[no-untyped-call]
        self.children: dict[tuple[str, ...], HistogramChild] = {}
        if not self.labelnames:
            self.children[()] = HistogramChild(self.bounds)

    def labels(self, *values: str) -> HistogramChild:
        child = self.children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            child = self.children[values] = HistogramChild(self.bounds)
        return child

    def observe(self, amount: float) -> None:
        self.children[()].observe(amount)

    def collect(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in sorted(tuple(self.children.items())):
            counts, total = list(child.counts), child.sum
            cumulative: list[tuple[str, float]] = []
            running = 0
            for le, count in zip(self._les, counts, strict=True):
                running += count
                cumulative.append((le, running))
            family.add_metric(list(values), cumulative, total)
        return family


@dataclass(slots=True)
class _Sources:
    """What the scrape-time collector reads: one scheduler's queue, cache, frameworks and binding tasks."""

    queue: SchedulingQueue
    cache: Cache
    frameworks: tuple[Framework, ...] = ()
    binding_tasks: Collection[object] | None = None


class SchedulerMetrics:
    """kube-scheduler's metrics for one scheduler, in ``registry``.

    One instance per registry (a second one in the same registry is a duplicate-name error);
    :meth:`close` unregisters it. ``rng`` decides which cycles' plugin calls are timed
    (``sample_percent`` of them).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = REGISTRY,
        *,
        sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT,
        rng: random.Random | None = None,
    ) -> None:
        self.registry = registry
        self.sample_percent = sample_percent
        self._rng = rng if rng is not None else random.Random()
        self._sources: _Sources | None = None
        self.schedule_attempts = Counter(
            SCHEDULE_ATTEMPTS,
            "Scheduling attempts by result: 'unschedulable' when no node fits the pod, 'error' when the "
            "scheduler itself failed.",
            ["result", "profile"],
            registry=registry,
        )
        self.scheduling_attempt_duration = HistogramFamily(
            SCHEDULING_ATTEMPT_DURATION,
            "Duration of one scheduling attempt in seconds (the scheduling algorithm, and binding when scheduled).",
            ["result", "profile"],
            ATTEMPT_DURATION_BUCKETS,
        )
        self.scheduling_algorithm_duration = HistogramFamily(
            SCHEDULING_ALGORITHM_DURATION,
            "Duration of the scheduling algorithm (snapshot, filtering, scoring) in seconds.",
            [],
            ATTEMPT_DURATION_BUCKETS,
        )
        self.pod_scheduling_sli_duration = HistogramFamily(
            POD_SCHEDULING_SLI_DURATION,
            "End-to-end scheduling latency of a pod in seconds, from its first entry into the scheduling "
            "queue until it is bound, over all its attempts.",
            ["attempts"],
            SLI_DURATION_BUCKETS,
        )
        self.pod_scheduling_attempts = HistogramFamily(
            POD_SCHEDULING_ATTEMPTS, "Attempts it took to schedule a pod.", [], POD_ATTEMPTS_BUCKETS
        )
        self.extension_point_duration = HistogramFamily(
            FRAMEWORK_EXTENSION_POINT_DURATION,
            "Duration in seconds of running every plugin of one extension point.",
            ["extension_point", "status", "profile"],
            EXTENSION_POINT_BUCKETS,
        )
        self.plugin_execution_duration = HistogramFamily(
            PLUGIN_EXECUTION_DURATION,
            "Duration in seconds of one plugin at one extension point (sampled cycles only).",
            ["plugin", "extension_point", "status"],
            PLUGIN_DURATION_BUCKETS,
        )
        self.preemption_attempts = Counter(
            PREEMPTION_ATTEMPTS,
            "Preemption attempts since the scheduler started.",
            registry=registry,
        )
        self.preemption_victims = HistogramFamily(
            PREEMPTION_VICTIMS, "Victims selected by one preemption.", [], PREEMPTION_VICTIMS_BUCKETS
        )
        self.histograms = (
            self.scheduling_attempt_duration,
            self.scheduling_algorithm_duration,
            self.pod_scheduling_sli_duration,
            self.pod_scheduling_attempts,
            self.extension_point_duration,
            self.plugin_execution_duration,
            self.preemption_victims,
        )
        self.policy_decisions = Counter(
            POLICY_DECISIONS,
            "Policy verdicts recorded with scheduling attempts (those the audit trail keeps), by engine and "
            "outcome (allow, deny, error, exempt).",
            ["engine", "outcome"],
            registry=registry,
        )
        # Counter children by label values (labels() takes a lock and checks its arguments on every call).
        self._attempts: dict[tuple[str, str], Counter] = {}
        self._collector = _ScrapeTimeCollector(self)
        if registry is not None:
            registry.register(self._collector)

    def close(self) -> None:
        """Unregister every metric from the registry (a new SchedulerMetrics may then take their names)."""
        if self.registry is None:
            return
        for collector in (self.schedule_attempts, self.preemption_attempts, self.policy_decisions, self._collector):
            self.registry.unregister(collector)
        self.registry = None

    # ---- wiring ------------------------------------------------------------------------------

    def attach(
        self,
        *,
        queue: SchedulingQueue,
        cache: Cache,
        frameworks: Iterable[Framework] = (),
        binding_tasks: Collection[object] | None = None,
    ) -> None:
        """Read these at scrape time (the scheduler calls this; a later call replaces the sources)."""
        self._sources = _Sources(queue, cache, tuple(frameworks), binding_tasks)

    def observing(self, observer: AttemptObserver | None) -> AttemptObserver:
        """An observer that feeds these metrics, then hands the record on to ``observer``."""
        return self if observer is None else _Chained(self, observer)

    # ---- attempt records ---------------------------------------------------------------------

    def on_attempt(self, record: AttemptRecord) -> None:
        try:
            self._on_attempt(record)
        except Exception:  # metrics must never cost an attempt
            log.exception("recording metrics for %s failed", record.pod.key)

    def _on_attempt(self, record: AttemptRecord) -> None:
        result = _RESULTS.get(record.result, RESULT_ERROR)
        key = (result, record.profile)
        counter = self._attempts.get(key)
        if counter is None:
            counter = self._attempts[key] = self.schedule_attempts.labels(*key)
        counter.inc()
        started = record.started_at
        if started is not None:
            self.scheduling_attempt_duration.labels(result, record.profile).observe(
                max(record.finished_at - started, 0.0)
            )
            filtered = record.phases.get(Phase.FILTERED)
            if filtered is not None:
                self.scheduling_algorithm_duration.observe(max(filtered - started, 0.0))
        if result == RESULT_SCHEDULED:
            if record.queued_at is not None:
                self.pod_scheduling_sli_duration.labels(attempts_label(record.attempts)).observe(
                    max(record.finished_at - record.queued_at, 0.0)
                )
            self.pod_scheduling_attempts.observe(record.attempts)
        for verdict in record.verdicts:
            self.policy_decisions.labels(verdict.engine, verdict.outcome).inc()

    # ---- the framework runtime (FrameworkMetrics) ----------------------------------------------

    def observe_extension_point(self, extension_point: str, status: str, profile: str, seconds: float) -> None:
        self.extension_point_duration.labels(extension_point, status, profile).observe(seconds)

    def observe_plugin(self, plugin: str, extension_point: str, status: str, seconds: float) -> None:
        self.plugin_execution_duration.labels(plugin, extension_point, status).observe(seconds)

    def sample(self) -> bool:
        return self._rng.randrange(100) < self.sample_percent

    def sampled(self, state: CycleState) -> bool:
        decided = state.get(SAMPLED_KEY, bool)
        if decided is None:
            decided = self.sample()
            state.write(SAMPLED_KEY, decided)
        return decided

    # ---- preemption (DefaultPreemption, through the framework) ---------------------------------

    def preemption_attempted(self) -> None:
        self.preemption_attempts.inc()

    def preemption_victims_selected(self, victims: int) -> None:
        self.preemption_victims.observe(victims)

    # ---- scrape time -------------------------------------------------------------------------

    def _collect(self) -> Iterator[Metric]:
        sources = self._sources
        pending = GaugeMetricFamily(
            PENDING_PODS,
            "Pending pods by queue: 'active' in activeQ, 'backoff' in backoffQ, 'unschedulable' in the "
            "unschedulable pool after a failed attempt, 'gated' held there by PreEnqueue, never attempted.",
            labels=["queue"],
        )
        incoming = CounterMetricFamily(
            QUEUE_INCOMING_PODS, "Pods added to a scheduling queue, by queue and event.", labels=["queue", "event"]
        )
        cache_size = GaugeMetricFamily(
            CACHE_SIZE, "Nodes, pods and assumed (not yet bound) pods in the scheduler cache.", labels=["type"]
        )
        goroutines = GaugeMetricFamily(
            GOROUTINES, "Tasks the scheduler runs, by what they do (binding cycles in flight).", labels=["operation"]
        )
        hits = CounterMetricFamily(
            POLICY_DECISION_CACHE_HITS,
            "Attempts whose pod found its policy decisions in a SecurityAuditFilter decision cache.",
        )
        misses = CounterMetricFamily(
            POLICY_DECISION_CACHE_MISSES,
            "Attempts whose pod had no entry in a SecurityAuditFilter decision cache yet.",
        )
        if sources is not None:
            counts = sources.queue.counts()
            pending.add_metric(["active"], counts.active)
            pending.add_metric(["backoff"], counts.backoff)
            pending.add_metric(["unschedulable"], counts.unschedulable)
            pending.add_metric(["gated"], counts.gated)
            for (queue, event), count in sorted(tuple(sources.queue.incoming.items())):
                incoming.add_metric([queue, event], count)
            cache = sources.cache
            cache_size.add_metric(["nodes"], cache.node_count)
            cache_size.add_metric(["pods"], cache.pod_count())
            cache_size.add_metric(["assumed_pods"], cache.assumed_pod_count())
            if sources.binding_tasks is not None:
                goroutines.add_metric(["binding"], len(sources.binding_tasks))
            stats = _decision_cache_stats(sources.frameworks)
            hits.add_metric([], sum(s.hits for s in stats))
            misses.add_metric([], sum(s.misses for s in stats))
        yield from (histogram.collect() for histogram in self.histograms)
        yield from (pending, incoming, cache_size, goroutines, hits, misses)


def _decision_cache_stats(frameworks: Iterable[Framework]) -> list[DecisionCacheStats]:
    """What each plugin with a decision cache reports now (a plugin serving several points is counted once)."""
    return [
        plugin.decision_cache_stats()
        for fwk in frameworks
        for plugin in fwk.plugins.values()
        if isinstance(plugin, DecisionCacheReporter)
    ]


class _ScrapeTimeCollector(Collector):
    def __init__(self, metrics: SchedulerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics._collect()


class _Chained:
    def __init__(self, metrics: SchedulerMetrics, observer: AttemptObserver) -> None:
        self.metrics = metrics
        self.observer = observer

    def on_attempt(self, record: AttemptRecord) -> None:
        self.metrics.on_attempt(record)
        self.observer.on_attempt(record)
