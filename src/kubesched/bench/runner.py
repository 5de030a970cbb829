"""``kubesched bench``: run workloads in-process on the simulated backend and report throughput.

Throughput is measured pods bound per wall-clock second over the measured ``createPods`` op (all of
its pods are queued first, then the scheduler drains them); latency is the wall time of each
scheduling attempt (the serial scheduling cycle, which bounds throughput). Medians over ``--repeat``
runs. A benchmark, not a test: nothing here asserts a speed.

``main`` runs every selected workload in turn, ``--repeat`` rounds of them, and reports each as its last run
finishes (a table row, flushed; JSON is one document at the end), then the ratios of workloads judged against
another of the run (``relativeTo``, :mod:`kubesched.bench.relative`): each runs right after a run of the other.
A workload that cannot be read or run is one error line naming its file, and the others still run; the exit code
is 1 when any failed or any placement check did. ``--compare BASELINE.json``
reads the baseline before anything runs (a bad file: one line, exit code 2) and ends the report with the
ratios (:mod:`kubesched.bench.compare`). A ``multiCluster`` workload runs a hub over
member clusters and their agents instead (:mod:`kubesched.bench.multicluster`), and adds the latency from queue pop
to the member's bind. Each result also carries CPU time per measured pod (this process's
CPU time over the measured ops plus its helper processes': the embedded engine's worker, the loopback OPA
server) and this process's peak RSS.
On a terminal, stderr carries a progress line (``SchedulingBasic: 3000/10000 pods``); nothing is written there
otherwise, and no progress hook is installed at all, so measured runs are the same with or without one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import functools
import json
import multiprocessing
import os
import platform
import random
import resource
import statistics
import string
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

from kubesched.api.objects import Node, Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.checks import check_placements
from kubesched.bench.compare import BaselineError, compare, load_baseline
from kubesched.bench.relative import relative_ratio
from kubesched.bench.report import JsonReport, Report, TableReport
from kubesched.bench.selection import failure, list_workloads, parse_params, select
from kubesched.bench.workload import (
    HOSTNAME_LABEL,
    ImageSpec,
    Op,
    OpaServerSpec,
    Workload,
    WorkloadError,
    bundled_workloads,
)
from kubesched.bounded_input import InputTooLarge, read_text
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config, load_config_dict, parse_yaml
from kubesched.config.types import SchedulerConfiguration
from kubesched.errors import KubeschedError
from kubesched.framework.events import ActionType, EventResource
from kubesched.framework.runtime.registry import Registry, with_entry_points
from kubesched.heap import freeze_steady_state, thaw
from kubesched.plugins.registry import in_tree_registry
from kubesched.progress import Progress
from kubesched.run_async import run_returning
from kubesched.scheduler.scheduler import Scheduler

BENCH_INDEX = "kubesched.io/bench-index"  # the per-pod label or annotation of uniqueLabels / uniqueAnnotations
HEARTBEAT_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: heartbeat n is stamped n seconds later

OnProgress = Callable[[int, int, str], None]
"""``(done, total, what)``: ``what`` is ``"nodes"``, ``"setup pods"`` or ``"pods"`` (the measured ones); each
op starts with ``done == 0``."""


@dataclass(slots=True)
class BenchResult:
    workload: str
    nodes: int
    measured_pods: int
    scheduled: int
    seconds: float
    throughput: float
    p50_ms: float
    p99_ms: float
    mode: str
    policy_calls: int = 0  # policy engine evaluations (batch or per node) during the measured pods
    pending: int = 0  # pods left unbound at the end (all of them expected: expectUnschedulable or churned)
    preempted: int = 0  # pods evicted by preemption
    violations: list[str] = field(default_factory=list)  # what check_placements found wrong; empty is good
    cpu_seconds: float = 0.0  # this process's CPU time (user + system) over the measured ops
    helper_cpu_seconds: float = 0.0  # its live descendants' (policy worker, OPA server) over the same ops
    cpu_us_per_pod: float = 0.0  # (cpu_seconds + helper_cpu_seconds) per measured pod, in microseconds
    peak_rss_mb: float = 0.0  # the process's peak RSS so far (ru_maxrss): earlier workloads of the run count too
    # multiCluster only: from a pod's last pop off the queue to its bind returning from the member (0: not a hub run)
    commit_p50_ms: float = 0.0
    commit_p99_ms: float = 0.0

    @property
    def check(self) -> str:
        return "ok" if not self.violations else f"FAILED ({len(self.violations)})"


def _instantiate(template: Mapping[str, Any], index: int, namespace: str | None) -> dict[str, Any]:
    obj = copy.deepcopy(dict(template))
    metadata = dict(obj.get("metadata") or {})
    prefix = metadata.pop("generateName", None) or "obj-"
    metadata.setdefault("name", f"{prefix}{index}")
    if namespace is not None:
        metadata["namespace"] = namespace
    obj["metadata"] = metadata
    return obj


class _PodFactory:
    """Pods from templates, named ``<generateName><n>`` with ``n`` counting per (namespace, prefix), so two
    ops with one template never collide (as generateName never does)."""

    def __init__(self, workload: Workload) -> None:
        self._workload = workload
        self._next: dict[tuple[str, str], int] = {}

    def make(self, op: Op, op_index: int, i: int) -> Pod:
        template = op.template_for(i)
        prefix = str((template.get("metadata") or {}).get("generateName") or "obj-")
        key = (op.namespace, prefix)
        index = self._next.get(key, 0)
        self._next[key] = index + 1
        raw = _instantiate(template, index, op.namespace)
        if op.unique_labels:
            raw["metadata"].setdefault("labels", {})[BENCH_INDEX] = str(i)
        if op.unique_annotations:
            raw["metadata"]["annotations"] = {**(raw["metadata"].get("annotations") or {}), BENCH_INDEX: str(i)}
        if op.unique_token_mounts:
            _mount_own_token(raw, f"kube-api-access-{i:05x}")
        return Pod.from_dict(raw, f"{self._workload.source}: ops[{op_index}] pod {i}")


def _mount_own_token(raw: dict[str, Any], volume: str) -> None:
    """What the ServiceAccount admission plugin adds to a pod: its own projected token volume, in every container."""
    spec = raw.setdefault("spec", {})
    sources = [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": volume, "projected": {"sources": sources}}]
    mount = {"name": volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            container["volumeMounts"] = [*(container.get("volumeMounts") or []), dict(mount)]


def _make_node(workload: Workload, op: Op, op_index: int, index: int, i: int) -> Node:
    raw = _instantiate(op.template, index, None)
    if op.node_labels or op.hostname_label:
        labels = dict(raw["metadata"].get("labels") or {})
        for key, values in op.node_labels:
            labels[key] = values[i % len(values)]
        if op.hostname_label:
            labels.setdefault(HOSTNAME_LABEL, raw["metadata"]["name"])
        raw["metadata"]["labels"] = labels
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in op.taints if i % t.every == 0]
    if taints:
        spec = raw["spec"] = dict(raw.get("spec") or {})
        spec["taints"] = [*(spec.get("taints") or []), *taints]
    if op.images is not None:
        status = raw["status"] = dict(raw.get("status") or {})
        status["images"] = [*(status.get("images") or []), *node_images(op.images, index)]
    return Node.from_dict(raw, f"{workload.source}: ops[{op_index}] node {i}")


@functools.lru_cache(maxsize=8)
def image_sizes(spec: ImageSpec) -> tuple[int, ...]:
    """The size of each pool image, in bytes: one draw per image from ``spec.seed``."""
    draw = random.Random(f"images:{spec.seed}")
    return tuple(draw.randint(spec.min_bytes, spec.max_bytes) for _ in range(spec.pool_size))


def node_images(spec: ImageSpec, node_index: int) -> list[dict[str, Any]]:
    """``status.images`` of the workload's node ``node_index``: ``spec.per_node`` pool images, drawn from the
    seed and the index (so nodes differ, and every run gives each node the same images)."""
    sizes = image_sizes(spec)
    chosen = random.Random(f"images:{spec.seed}:node:{node_index}").sample(range(spec.pool_size), spec.per_node)
    return [{"names": [spec.name(k)], "sizeBytes": sizes[k]} for k in sorted(chosen)]


class _PodUpdateHandler:
    """A cluster event handler that cares only about pod updates (bindings): every other event is ignored."""

    def on_node_add(self, node: Node) -> None:
        pass

    def on_node_update(self, old: Node, new: Node) -> None:
        pass

    def on_node_delete(self, node: Node) -> None:
        pass

    def on_pod_add(self, pod: Pod) -> None:
        pass

    def on_pod_delete(self, pod: Pod) -> None:
        pass

    def on_object_event(self, resource: EventResource, action: ActionType, old: object, new: object) -> None:
        pass

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        pass


class _Heartbeat(_PodUpdateHandler):
    """A cluster event handler playing the kubelets' status heartbeat: after every ``every`` bindings it
    updates the next node in turn through :meth:`SimulatedCluster.update_node` (its Ready condition's
    ``lastHeartbeatTime`` and its ``resourceVersion``), from the event loop's next turn, not from inside the
    binding's own event dispatch. ``every == 0`` turns it off (ops without ``nodeHeartbeatEveryPods``)."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.every = 0
        self.bindings = 0
        self.beats = 0
        self.names: list[str] = []

    def start(self, every: int) -> None:
        """Beat every ``every`` bindings from now on, over the nodes there are now (0: stop)."""
        self.every = every
        self.bindings = 0
        self.names = list(self.cluster.nodes) if every else []  # insertion order: node 0, 1, ... in turn

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if not self.every or not new.spec.node_name or old.spec.node_name:
            return
        self.bindings += 1
        if self.bindings % self.every == 0:
            asyncio.get_running_loop().call_soon(self.beat)

    def beat(self) -> None:
        if not self.names:
            return
        node = self.cluster.nodes.get(self.names[self.beats % len(self.names)])
        self.beats += 1
        if node is None:
            return
        self.cluster.update_node(heartbeat(node, self.beats))


def heartbeat(node: Node, beat: int) -> Node:
    """``node`` after a kubelet status heartbeat: Ready's ``lastHeartbeatTime`` moved on, ``resourceVersion``
    one higher; labels, taints, allocatable and images unchanged."""
    raw = dict(node.raw)
    metadata = raw["metadata"] = dict(raw.get("metadata") or {})
    metadata["resourceVersion"] = str(int(node.metadata.resource_version or "0") + 1)
    status = raw["status"] = dict(raw.get("status") or {})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(HEARTBEAT_EPOCH + beat))
    conditions = [dict(c) for c in status.get("conditions") or []]
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        ready = {"type": "Ready", "status": "True"}
        conditions.append(ready)
    ready["lastHeartbeatTime"] = stamp
    status["conditions"] = conditions
    return Node.from_dict(raw, f"node {node.metadata.name} heartbeat {beat}")


class _BindCounter(_PodUpdateHandler):
    """A cluster event handler that counts the bindings of the pods being drained and reports them.

    Subscribed only when progress is shown: it then costs one set lookup per binding."""

    def __init__(self, on_progress: OnProgress) -> None:
        self.on_progress = on_progress
        self.watched: frozenset[str] = frozenset()
        self.what = "pods"
        self.bound = 0

    def watch(self, pods: list[Pod], what: str) -> None:
        self.watched = frozenset(pod.metadata.uid for pod in pods)
        self.what = what
        self.bound = 0
        self.on_progress(0, len(self.watched), what)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if new.spec.node_name and not old.spec.node_name and new.metadata.uid in self.watched:
            self.bound += 1
            self.on_progress(self.bound, len(self.watched), self.what)


async def _churn(cluster: SimulatedCluster, factory: _PodFactory, op: Op, op_index: int, created: set[str]) -> None:
    """One pod per ``op.interval_seconds`` of wall time until cancelled (scheduler_perf's churn, create mode).

    The scheduling loop hands the event loop over only every few cycles (and while bindings settle), so this
    polls the wall clock at each hand-over and creates every pod that has come due since the last one: the
    rate is upstream's on average, each pod at most a few cycles late."""
    started = time.perf_counter()
    made = 0
    while True:
        due = int((time.perf_counter() - started) / op.interval_seconds)
        while made < due:
            pod = factory.make(op, op_index, made)
            created.add(pod.metadata.uid)
            cluster.add_pod(pod)
            made += 1
        await asyncio.sleep(0)


async def _run_async(
    workload: Workload,
    registry: Registry,
    config: SchedulerConfiguration,
    use_batch: bool,
    inspect: Callable[[SimulatedCluster], None] | None,
    on_progress: OnProgress | None,
) -> BenchResult:
    clock = VirtualClock()
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(config, registry, cluster, clock=clock, seed=0, use_batch=use_batch)
    cluster.subscribe(scheduler.event_handlers)
    counter = _BindCounter(on_progress) if on_progress is not None else None
    heartbeats = _Heartbeat(cluster)
    cluster.subscribe(heartbeats)
    if counter is not None:
        cluster.subscribe(counter)
    factory = _PodFactory(workload)
    nodes = 0
    measured = scheduled = policy_calls = 0
    latencies: list[float] = []
    meter = Meter()
    created: set[str] = set()  # uids of pods that must end up bound (or preempted)
    expected_pending: set[str] = set()  # uids of pods that must stay pending
    churn: tuple[Op, int] | None = None
    try:
        for op_index, op in enumerate(workload.ops):
            if op.opcode == "createNodes":
                if on_progress is not None:
                    on_progress(0, op.count, "nodes")
                for i in range(op.count):
                    cluster.add_node(_make_node(workload, op, op_index, nodes + i, i))
                    if on_progress is not None:
                        on_progress(i + 1, op.count, "nodes")
                nodes += op.count
                continue
            if op.opcode == "churn":
                churn = (op, op_index)
                continue
            pods = [factory.make(op, op_index, i) for i in range(op.count)]
            (expected_pending if op.expect_unschedulable else created).update(p.metadata.uid for p in pods)
            if counter is not None:
                counter.watch(pods, "pods" if op.collect_metrics else "setup pods")
            if op.collect_metrics:
                calls_before = _policy_calls(scheduler)
                scheduler.cycles.attempt_latencies = latencies
                meter.start()
            heartbeats.start(op.heartbeat_every)
            churner = None
            if churn is not None:
                churner = asyncio.ensure_future(_churn(cluster, factory, churn[0], churn[1], expected_pending))
                churn = None
            for pod in pods:
                cluster.add_pod(pod)
            try:
                await scheduler.run_until_idle(clock)
            finally:
                if churner is not None:
                    churner.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await churner
                heartbeats.start(0)
            if op.collect_metrics:
                meter.stop()
                scheduler.cycles.attempt_latencies = None
                measured += op.count
                scheduled += _bound(cluster, pods)
                policy_calls += _policy_calls(scheduler) - calls_before
        if churn is not None:
            raise WorkloadError(f"{workload.source}: ops[{churn[1]}]: a churn op must come before a createPods op")
        # Pods churned after the last drain (a timer that fired as the loop went idle) get their attempts too.
        await scheduler.run_until_idle(clock)
        report = check_placements(cluster, created, expected_pending)
        if inspect is not None:
            inspect(cluster)
    finally:
        await scheduler.close()
    latencies.sort()
    return BenchResult(
        workload=workload.name,
        nodes=nodes,
        measured_pods=measured,
        scheduled=scheduled,
        seconds=meter.seconds,
        throughput=scheduled / meter.seconds if meter.seconds > 0 else 0.0,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        mode="batch" if use_batch else "per-node",
        policy_calls=policy_calls,
        pending=report.pending,
        preempted=sum(len(victims) for victims in cluster.preempted.values()),
        violations=list(report.violations),
        cpu_seconds=meter.cpu_seconds,
        helper_cpu_seconds=meter.helper_cpu_seconds,
        cpu_us_per_pod=meter.per_pod_us(measured),
        peak_rss_mb=peak_rss_mb(),
    )


class Meter:
    """Wall, CPU and helper-process CPU time over the measured ops of a workload run (summed over ops); also
    freezes the heap before each, so collections walk only what the op allocates. Used by both runners."""

    def __init__(self) -> None:
        self.seconds = self.cpu_seconds = self.helper_cpu_seconds = 0.0
        self._started = (0.0, 0.0, dict[int, float]())

    def start(self) -> None:
        freeze_steady_state()
        self._started = (time.perf_counter(), time.process_time(), descendant_cpu_seconds())

    def stop(self) -> None:
        wall, cpu, helpers = self._started
        self.seconds += time.perf_counter() - wall
        self.cpu_seconds += time.process_time() - cpu
        now = descendant_cpu_seconds()
        self.helper_cpu_seconds += sum(seconds - helpers.get(pid, 0.0) for pid, seconds in now.items())

    def per_pod_us(self, pods: int) -> float:
        """CPU time of this process and its helpers per measured pod, in microseconds."""
        return (self.cpu_seconds + self.helper_cpu_seconds) / pods * 1e6 if pods else 0.0


def descendant_cpu_seconds() -> dict[int, float]:
    """CPU time (user + system) of every live descendant process, by pid: the embedded policy engine's worker
    (a grandchild, through multiprocessing's fork server) and the loopback OPA server do the policy work of
    the SecurityAudit workloads. Linux only (``/proc/<pid>/task/<tid>/children``); elsewhere empty. A process
    that ends during the measured ops takes its CPU time with it."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    cpu: dict[int, float] = {}
    stack = [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    children = [int(child) for child in handle.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                try:
                    with open(f"/proc/{child}/stat") as handle:
                        fields = handle.read().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                cpu[child] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15)
                stack.append(child)
    return cpu


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MB (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _policy_calls(scheduler: Scheduler) -> int:
    """Evaluations counted by policy plugins (their ``calls`` attribute)."""
    return sum(
        int(getattr(plugin, "calls", 0)) for fwk in scheduler.frameworks.values() for plugin in fwk.plugins.values()
    )


def _bound(cluster: SimulatedCluster, pods: list[Pod]) -> int:
    """How many of ``pods`` are bound now (preemption may have deleted other pods meanwhile)."""
    current = cluster.pods
    return sum(1 for pod in pods if (now := current.get(pod.metadata.uid)) is not None and now.spec.node_name)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def run_workload(
    workload: Workload,
    *,
    use_batch: bool = True,
    registry: Registry | None = None,
    inspect: Callable[[SimulatedCluster], None] | None = None,
    on_progress: OnProgress | None = None,
) -> BenchResult:
    """Run one workload; ``inspect`` is handed the final simulated cluster (tests look at the placements);
    ``on_progress`` hears of every node created and every pod bound (it should throttle itself)."""
    registry = registry if registry is not None else with_entry_points(in_tree_registry())
    with contextlib.ExitStack() as stack:
        substitutions = {"WORKLOAD_DIR": str(Path(workload.source).resolve().parent)}
        if workload.opa_server is not None:
            _check_files(workload, workload.opa_server)
            substitutions["OPA_URL"] = stack.enter_context(opa_server_process(workload.opa_server))
        config = _load_config(workload, registry, substitutions)
        try:
            if workload.multi_cluster is not None:
                # imported here: kubesched.bench.multicluster builds on this module's pieces (results, pod factory)
                from kubesched.bench.multicluster import run_multicluster

                return run_returning(run_multicluster(workload, registry, config, use_batch, on_progress))
            return run_returning(_run_async(workload, registry, config, use_batch, inspect, on_progress))
        finally:
            thaw()


def _check_files(workload: Workload, spec: OpaServerSpec) -> None:
    """A missing policy would otherwise surface as a server that never starts, a minute later."""
    for key, paths in (("policies", spec.policies), ("data", spec.data)):
        for index, path in enumerate(paths):
            if not Path(path).is_file():
                raise WorkloadError(f"{workload.source}: opaServer.{key}[{index}]: {path}: no such file")


def _load_config(workload: Workload, registry: Registry, substitutions: Mapping[str, str]) -> SchedulerConfiguration:
    """The workload's config file with ``${NAME}`` replaced in its strings; placeholders are substituted
    after parsing, so a value (a path with a ``#`` or a quote) can never change the YAML's structure."""
    if not workload.config:
        return default_config(registry)
    path = workload.config
    try:
        text = read_text(path)
    except InputTooLarge as exc:
        raise WorkloadError(f"{workload.source}: config: {exc}") from None
    except OSError as exc:
        raise WorkloadError(f"{workload.source}: config: {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{workload.source}: config: {path}: not UTF-8 text ({exc.reason})") from None
    document = _substitute(parse_yaml(text, path), substitutions)
    return load_config_dict(document, path, registry, base_dir=os.path.dirname(path))


def _substitute(value: Any, substitutions: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).safe_substitute(substitutions)
    if isinstance(value, list):
        return [_substitute(item, substitutions) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, substitutions) for key, item in value.items()}
    return value


def _serve(spec: OpaServerSpec, port_out: Connection, stop_in: Connection) -> None:
    """Child process: an OPA-compatible server with the workload's policy and data (its own core and GIL)."""
    from kubesched.harness.opa_server import OpaTestServer

    policies = {path: Path(path).read_text() for path in spec.policies}
    data: dict[str, Any] = {}
    for path in spec.data:
        data.update(json.loads(Path(path).read_text()))
    with OpaTestServer(policies, data) as server:
        port_out.send(server.port)
        stop_in.recv()


@contextlib.contextmanager
def opa_server_process(spec: OpaServerSpec) -> Iterator[str]:
    """Start the loopback OPA-compatible server in another process; yields its URL."""
    context = multiprocessing.get_context("spawn")
    port_parent, port_child = context.Pipe()
    stop_parent, stop_child = context.Pipe()
    process = context.Process(target=_serve, args=(spec, port_child, stop_child), daemon=True)
    process.start()
    try:
        if not port_parent.poll(60):
            raise WorkloadError("the OPA test server did not start within 60 s")
        yield f"http://127.0.0.1:{port_parent.recv()}"
    finally:
        stop_parent.send(True)
        process.join(timeout=30)
        if process.is_alive():
            process.kill()


def median_result(results: list[BenchResult]) -> BenchResult:
    first = results[0]
    return BenchResult(
        workload=first.workload,
        nodes=first.nodes,
        measured_pods=first.measured_pods,
        scheduled=int(statistics.median(r.scheduled for r in results)),
        seconds=statistics.median(r.seconds for r in results),
        throughput=statistics.median(r.throughput for r in results),
        p50_ms=statistics.median(r.p50_ms for r in results),
        p99_ms=statistics.median(r.p99_ms for r in results),
        mode=first.mode,
        policy_calls=int(statistics.median(r.policy_calls for r in results)),
        pending=int(statistics.median(r.pending for r in results)),
        preempted=int(statistics.median(r.preempted for r in results)),
        # A check that failed in any run fails the median too.
        violations=[v for r in results for v in r.violations],
        cpu_seconds=statistics.median(r.cpu_seconds for r in results),
        helper_cpu_seconds=statistics.median(r.helper_cpu_seconds for r in results),
        cpu_us_per_pod=statistics.median(r.cpu_us_per_pod for r in results),
        peak_rss_mb=max(r.peak_rss_mb for r in results),
        commit_p50_ms=statistics.median(r.commit_p50_ms for r in results),
        commit_p99_ms=statistics.median(r.commit_p99_ms for r in results),
    )


def machine_description() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    params = parse_params(list(getattr(args, "param", []) or []))
    baseline = None
    if getattr(args, "compare", None):
        try:
            baseline = load_baseline(Path(args.compare))
        except BaselineError as exc:
            err.write(f"error: --compare: {exc}\n")
            return 2
    with contextlib.ExitStack() as stack:
        if args.workload_dir:
            directory, bundled = Path(args.workload_dir), False
        else:
            directory, bundled = stack.enter_context(bundled_workloads()), True
        selection = select(list(args.workloads), directory, params, bundled=bundled)
        if getattr(args, "list", False):
            return list_workloads(selection, args.output, out, err)
        progress = stack.enter_context(Progress(err))
        report: Report = JsonReport(out, err) if args.output == "json" else TableReport(out, err)
        report.start([workload.name for workload in selection.workloads])
        failed = len(selection.failures)
        results: list[BenchResult] = []
        for broken in selection.failures:
            report.failure(broken)
        # Round by round, every workload once per round; a workload judged against another (relativeTo) right after
        # a run of that other one (an extra run when the one before was not it): the machine drifts by a fifth within
        # minutes, so only runs next to each other compare.
        runs: dict[str, list[BenchResult]] = {}
        pairs: dict[str, list[tuple[BenchResult, BenchResult]]] = {}
        running = list(selection.workloads)
        by_name = {workload.name: workload for workload in running}

        def run_once(workload: Workload, run: int) -> BenchResult | None:
            nonlocal failed
            if workload not in running:
                return None
            try:
                return run_workload(
                    workload,
                    use_batch=not args.reference,
                    on_progress=_progress_line(progress, workload.name, run, args.repeat),
                )
            except KubeschedError as exc:
                progress.clear()
                report.failure(failure(exc, workload.source))
                failed += 1
                running.remove(workload)
                runs.pop(workload.name, None)
                return None

        for run in range(args.repeat):
            previous: BenchResult | None = None
            for workload in list(running):
                other = by_name.get(workload.relative_to or "")
                if other is not None and other in running and (previous is None or previous.workload != other.name):
                    previous = run_once(other, run)
                result = run_once(workload, run)
                if result is None:
                    continue
                if other is not None and previous is not None and previous.workload == other.name:
                    pairs.setdefault(workload.name, []).append((result, previous))
                previous = result
                runs.setdefault(workload.name, []).append(result)
                if run == args.repeat - 1:
                    progress.clear()
                    median = median_result(runs[workload.name])
                    results.append(median)
                    report.result(median)
                    failed += bool(median.violations)
        comparison = compare(baseline, results) if baseline is not None else None
        relative = [
            relative_ratio(name, by_name[name].relative_to or "", adjacent)
            for name, adjacent in pairs.items()
            if name in runs and len(adjacent) == len(runs[name])
        ]
        report.finish(machine_description(), params, args.repeat, comparison, relative)
    return 1 if failed else 0


def _progress_line(progress: Progress, name: str, run: int, repeat: int) -> OnProgress | None:
    """The runner's hook writing ``SchedulingBasic: 3000/10000 pods``; None (no hook) when not a terminal."""
    if not progress.enabled:
        return None
    label = f"{name} (run {run + 1}/{repeat})" if repeat > 1 else name

    def on_progress(done: int, total: int, what: str) -> None:
        if done == 0:  # a new op: shown at once, whatever the throttle (a few lines per workload)
            progress.update(f"{label}: 0/{total} {what}", force=True)
        else:
            progress.count(label, done, total, what)

    return on_progress
