"""``kubesched bench``: run workloads in-process on the simulated backend and report throughput.

Throughput is measured pods bound per wall-clock second over the measured ``createPods`` op (all of
its pods are queued first, then the scheduler drains them); latency is the wall time of each
scheduling attempt (the serial scheduling cycle, which bounds throughput). Medians over ``--repeat``
runs. A benchmark, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import json
import multiprocessing
import platform
import statistics
import string
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.objects import Node, Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.workload import Op, OpaServerSpec, Workload, WorkloadError, find_workloads, load_workload
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config, load_config_dict, load_config_file
from kubesched.config.types import SchedulerConfiguration
from kubesched.framework.runtime.registry import Registry, with_entry_points
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler

DEFAULT_WORKLOAD_DIR = Path("bench/workloads")


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


def _instantiate(template: Mapping[str, Any], index: int, namespace: str | None) -> dict[str, Any]:
    obj = copy.deepcopy(dict(template))
    metadata = dict(obj.get("metadata") or {})
    prefix = metadata.pop("generateName", None) or "obj-"
    metadata.setdefault("name", f"{prefix}{index}")
    if namespace is not None:
        metadata["namespace"] = namespace
    obj["metadata"] = metadata
    return obj


async def _run_async(
    workload: Workload, registry: Registry, config: SchedulerConfiguration, use_batch: bool
) -> BenchResult:
    clock = VirtualClock()
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(config, registry, cluster, clock=clock, seed=0, use_batch=use_batch)
    cluster.subscribe(scheduler.event_handlers)
    nodes = 0
    measured = scheduled = policy_calls = 0
    latencies: list[float] = []
    seconds = 0.0
    try:
        for op_index, op in enumerate(workload.ops):
            if op.opcode == "createNodes":
                for i in range(op.count):
                    raw = _instantiate(op.template, nodes + i, None)
                    cluster.add_node(Node.from_dict(raw, f"{workload.source}: ops[{op_index}] node {i}"))
                nodes += op.count
                continue
            pods = _make_pods(workload, op, op_index)
            bound_before = _bound(cluster)
            if op.collect_metrics:
                calls_before = _policy_calls(scheduler)
                scheduler.cycles.attempt_latencies = latencies
                gc.collect()
                started = time.perf_counter()
            for pod in pods:
                cluster.add_pod(pod)
            await scheduler.run_until_idle(clock)
            if op.collect_metrics:
                seconds += time.perf_counter() - started
                scheduler.cycles.attempt_latencies = None
                measured += op.count
                scheduled += _bound(cluster) - bound_before
                policy_calls += _policy_calls(scheduler) - calls_before
    finally:
        await scheduler.close()
    latencies.sort()
    return BenchResult(
        workload=workload.name,
        nodes=nodes,
        measured_pods=measured,
        scheduled=scheduled,
        seconds=seconds,
        throughput=scheduled / seconds if seconds > 0 else 0.0,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        mode="batch" if use_batch else "per-node",
        policy_calls=policy_calls,
    )


def _policy_calls(scheduler: Scheduler) -> int:
    """Evaluations counted by policy plugins (their ``calls`` attribute)."""
    return sum(
        int(getattr(plugin, "calls", 0)) for fwk in scheduler.frameworks.values() for plugin in fwk.plugins.values()
    )


def _make_pods(workload: Workload, op: Op, op_index: int) -> list[Pod]:
    pods = []
    for i in range(op.count):
        raw = _instantiate(op.template, i, op.namespace)
        if op.unique_labels:
            raw["metadata"].setdefault("labels", {})["kubesched.io/bench-index"] = str(i)
        pods.append(Pod.from_dict(raw, f"{workload.source}: ops[{op_index}] pod {i}"))
    return pods


def _bound(cluster: SimulatedCluster) -> int:
    return sum(1 for pod in cluster.pods.values() if pod.spec.node_name)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def run_workload(workload: Workload, *, use_batch: bool = True, registry: Registry | None = None) -> BenchResult:
    registry = registry if registry is not None else with_entry_points(in_tree_registry())
    with contextlib.ExitStack() as stack:
        substitutions: dict[str, str] = {}
        if workload.opa_server is not None:
            substitutions["OPA_URL"] = stack.enter_context(opa_server_process(workload.opa_server))
        config = _load_config(workload, registry, substitutions)
        return asyncio.run(_run_async(workload, registry, config, use_batch))


def _load_config(workload: Workload, registry: Registry, substitutions: Mapping[str, str]) -> SchedulerConfiguration:
    if not workload.config:
        return default_config(registry)
    if not substitutions:
        return load_config_file(workload.config, registry)
    try:
        text = Path(workload.config).read_text()
    except OSError as exc:
        raise WorkloadError(f"{workload.config}: {exc.strerror}") from exc
    text = string.Template(text).safe_substitute(substitutions)
    return load_config_dict(yaml.safe_load(text), workload.config, registry)


def _serve(spec: OpaServerSpec, port_out: Connection, stop_in: Connection) -> None:
    """Child process: an OPA-compatible server with the workload's policy and data (its own core and GIL)."""
    from kubesched.testing.opa_server import OpaTestServer

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
    )


def _select(names: list[str], directory: Path) -> list[Workload]:
    available = find_workloads(directory) if directory.is_dir() else {}
    if not names:
        if not available:
            raise WorkloadError(
                f"{directory}: no workloads found (run from the repository root or pass --workload-dir)"
            )
        return list(available.values())
    chosen: list[Workload] = []
    for name in names:
        if name in available:
            chosen.append(available[name])
        elif Path(name).is_file():
            chosen.append(load_workload(Path(name)))
        else:
            known = ", ".join(sorted(available)) or "none"
            raise WorkloadError(f"unknown workload {name!r} (known in {directory}: {known})")
    return chosen


def machine_description() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def main(args: argparse.Namespace) -> int:
    directory = Path(args.workload_dir) if args.workload_dir else DEFAULT_WORKLOAD_DIR
    workloads = _select(list(args.workloads), directory)
    results = []
    for workload in workloads:
        runs = [run_workload(workload, use_batch=not args.reference) for _ in range(args.repeat)]
        results.append(median_result(runs))
    if args.output == "json":
        json.dump({"machine": machine_description(), "results": [asdict(r) for r in results]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    header = ("WORKLOAD", "MODE", "NODES", "PODS", "SCHEDULED", "SECONDS", "PODS/S", "P50 MS", "P99 MS", "POLICY CALLS")
    rows = [
        (
            r.workload,
            r.mode,
            str(r.nodes),
            str(r.measured_pods),
            str(r.scheduled),
            f"{r.seconds:.2f}",
            f"{r.throughput:.1f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            str(r.policy_calls),
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"machine: {machine_description()}; medians of {args.repeat} run(s)")
    return 0
