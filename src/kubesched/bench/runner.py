"""``kubesched bench``: run workloads in-process on the simulated backend and report throughput.

Throughput is measured pods bound per wall-clock second over the measured ``createPods`` op (all of
its pods are queued first, then the scheduler drains them); latency is the wall time of each
scheduling attempt (the serial scheduling cycle, which bounds throughput). Medians over ``--repeat``
runs. A benchmark, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.workload import Op, Workload, WorkloadError, find_workloads, load_workload
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config, load_config_file
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
    cluster.subscribe(scheduler)
    nodes = 0
    measured = scheduled = 0
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
                scheduler.attempt_latencies.clear()
                scheduler.record_latencies = True
                gc.collect()
                started = time.perf_counter()
            for pod in pods:
                cluster.add_pod(pod)
            await scheduler.run_until_idle(clock)
            if op.collect_metrics:
                seconds += time.perf_counter() - started
                scheduler.record_latencies = False
                measured += op.count
                scheduled += _bound(cluster) - bound_before
    finally:
        await scheduler.close()
    latencies = sorted(scheduler.attempt_latencies)
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
    )


def _make_pods(workload: Workload, op: Op, op_index: int) -> list[Pod]:
    return [
        Pod.from_dict(_instantiate(op.template, i, op.namespace), f"{workload.source}: ops[{op_index}] pod {i}")
        for i in range(op.count)
    ]


def _bound(cluster: SimulatedCluster) -> int:
    return sum(1 for pod in cluster.pods.values() if pod.spec.node_name)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def run_workload(workload: Workload, *, use_batch: bool = True, registry: Registry | None = None) -> BenchResult:
    registry = registry if registry is not None else with_entry_points(in_tree_registry())
    config = load_config_file(workload.config, registry) if workload.config else default_config(registry)
    return asyncio.run(_run_async(workload, registry, config, use_batch))


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
    header = ("WORKLOAD", "MODE", "NODES", "PODS", "SCHEDULED", "SECONDS", "PODS/S", "P50 MS", "P99 MS")
    rows = [
        (
            r.workload,
            r.mode,
            str(r.nodes),
            str(r.measured_pods),
            str(r.scheduled),
            f"{r.seconds:.2f}",
            f"{r.throughput:.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"machine: {machine_description()}; medians of {args.repeat} run(s)")
    return 0
