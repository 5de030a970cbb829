"""``kubesched bench --api``: SchedulingBasic through a real API server, kubesched against kube-scheduler.

Who calls it: ``kubesched bench --api`` (:mod:`kubesched.cli.main`). For each scheduler in turn (kubesched as
``python -m kubesched.cli.main run``, then ``$KUBEBUILDER_ASSETS/kube-scheduler``) it starts a fresh control plane,
creates the shape before the scheduler starts, gives both the same configuration, stamps every binding from a watch
of the measured pods, and reports the binding rate, the rate from process start and each process's CPU seconds.
How to run it and read it: docs/how-to/benchmark.md#against-kube-scheduler-through-a-real-api-server. A benchmark,
not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.backends.kube.kubeconfig import load_connection
from kubesched.errors import KubeschedError
from kubesched.harness.envtest import ASSETS_VARIABLE, ControlPlane, assets_directory
from kubesched.run_async import run_returning

KUBESCHED = "kubesched"
KUBE_SCHEDULER = "kube-scheduler"
SCHEDULER_NAME = "default-scheduler"
SETUP_NAMESPACE = "sched-setup"
TEST_NAMESPACE = "sched-test"
IMAGE = "registry.k8s.io/pause:3.10.1"
ZONES = ("zone-a", "zone-b", "zone-c")
NODE_IMAGES = (
    {"names": [IMAGE], "sizeBytes": 320_368},
    {"names": ["registry.k8s.io/kube-proxy:v1.34.9"], "sizeBytes": 30_846_960},
    {"names": ["registry.k8s.io/etcd:3.5.21-0"], "sizeBytes": 58_938_593},
)
CREATE_CONCURRENCY = 48
STOP_GRACE_SECONDS = 30.0
POLL_SECONDS = 0.5


class ApiBenchError(KubeschedError):
    pass


@dataclass(frozen=True, slots=True)
class Shape:
    nodes: int = 5000
    init_pods: int = 1000
    pods: int = 10000
    qps: float = 5000.0
    burst: int = 5000


@dataclass(slots=True)
class Creation:
    nodes_seconds: float = 0.0
    init_pods_seconds: float = 0.0
    pods_seconds: float = 0.0

    @property
    def seconds(self) -> float:
        return self.nodes_seconds + self.init_pods_seconds + self.pods_seconds


@dataclass(slots=True)
class SchedulerRun:
    scheduler: str
    pods: int  # measured pods created
    bound: int  # of them, bound when the run ended
    pods_per_second: float  # (bound - 1) / (last bound - first bound)
    pods_per_second_from_start: float  # bound / (last bound - process start)
    first_to_last_seconds: float
    start_to_first_seconds: float  # process start, lists, sync, first cycle and binding
    start_to_last_seconds: float
    creation_seconds: float  # nodes, init pods and pods of this run's control plane
    creation: dict[str, float] = field(default_factory=dict)
    # CPU seconds of scheduler, kube-apiserver, etcd, bench (and cores busy) from first to last binding
    cpu_first_to_last: dict[str, float] = field(default_factory=dict)
    cpu_start_to_first: dict[str, float] = field(default_factory=dict)
    events: int = 0  # Events in the measured pods' namespace once the scheduler has stopped (one Scheduled each)
    outcome: str = "complete"  # complete | stalled | exited (the process ended by itself)
    exit_code: int | None = None
    log: str = ""


@dataclass(frozen=True, slots=True)
class Options:
    shape: Shape
    assets: Path
    peer: Path | None  # None: kubesched only
    workdir: Path
    repeat: int = 1
    stall_timeout: float = 60.0
    cprofile: Path | None = None
    py_spy: Path | None = None


# ---------------------------------------------------------------------------------------------- the shape


def node_manifest(index: int) -> dict[str, Any]:
    """scheduler_perf's default node (4 CPU, 32Gi, 110 pods, Ready) with the labels and images of a real one."""
    name = f"scheduler-perf-{index}"
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": ZONES[index % len(ZONES)],
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": list(NODE_IMAGES),
            "phase": "Running",
        },
    }


def pod_manifest(name: str, namespace: str, node_name: str = "") -> dict[str, Any]:
    """scheduler_perf's default pod: one pause container, 100m / 500Mi requested and limited."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "containers": [
            {
                "name": "pause",
                "image": IMAGE,
                "ports": [{"containerPort": 80}],
                "resources": {"limits": resources, "requests": resources},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def scheduler_config(kubeconfig: Path, shape: Shape) -> dict[str, Any]:
    """The one KubeSchedulerConfiguration both schedulers read."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": shape.qps, "burst": shape.burst},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": SCHEDULER_NAME}],
    }


async def _create_all(client: KubeClient, path: str, objects: Iterable[dict[str, Any]]) -> None:
    """POST every object, :data:`CREATE_CONCURRENCY` at a time (the client retries 429 and 5xx)."""
    source = iter(objects)

    async def worker() -> None:
        for obj in source:  # one shared iterator: each object goes to one worker
            await client.request("POST", path, body=obj)

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))


async def create_shape(client: KubeClient, shape: Shape) -> Creation:
    creation = Creation()
    for namespace in (SETUP_NAMESPACE, TEST_NAMESPACE):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        await client.request("POST", "/api/v1/namespaces", body=body)
    started = time.perf_counter()
    await _create_all(client, "/api/v1/nodes", (node_manifest(i) for i in range(shape.nodes)))
    creation.nodes_seconds = time.perf_counter() - started
    started = time.perf_counter()
    init = (
        pod_manifest(f"init-pod-{i}", SETUP_NAMESPACE, f"scheduler-perf-{i % shape.nodes}")
        for i in range(shape.init_pods)
    )
    await _create_all(client, f"/api/v1/namespaces/{SETUP_NAMESPACE}/pods", init)
    creation.init_pods_seconds = time.perf_counter() - started
    started = time.perf_counter()
    measured = (pod_manifest(f"pod-{i}", TEST_NAMESPACE) for i in range(shape.pods))
    await _create_all(client, f"/api/v1/namespaces/{TEST_NAMESPACE}/pods", measured)
    creation.pods_seconds = time.perf_counter() - started
    return creation


# ---------------------------------------------------------------------------------------------- watching


class BindingWatch:
    """Stamps the arrival of every measured pod's binding: a watch on ``spec.nodeName!=``, which a pod enters when
    it is bound (one ``ADDED`` per binding)."""

    PATH = f"/api/v1/namespaces/{TEST_NAMESPACE}/pods"
    SELECTOR = "spec.nodeName!="

    def __init__(self, client: KubeClient, expected: int) -> None:
        self.client = client
        self.expected = expected
        self.bound: set[str] = set()
        self.first = 0.0
        self.last = 0.0
        self.done = asyncio.Event()
        self.resource_version = ""
        self.on_first: Callable[[], None] | None = None  # called at the first binding
        self.on_done: Callable[[], None] | None = None  # called at the last one

    def _saw(self, name: str) -> None:
        if name in self.bound:
            return
        now = time.monotonic()
        if not self.bound:
            self.first = now
            if self.on_first is not None:
                self.on_first()
        self.bound.add(name)
        self.last = now
        if len(self.bound) >= self.expected:
            if self.on_done is not None and not self.done.is_set():
                self.on_done()
            self.done.set()

    async def list(self) -> None:
        """What is bound already (nothing, before a scheduler starts) and the version to watch from."""
        query = {"fieldSelector": self.SELECTOR, "limit": "1000"}
        while True:
            page = await self.client.request("GET", self.PATH, query=query)
            for item in page.get("items") or ():
                self._saw(item["metadata"]["name"])
            meta = page.get("metadata") or {}
            self.resource_version = str(meta.get("resourceVersion", ""))
            if not meta.get("continue"):
                return
            query = {**query, "continue": str(meta["continue"])}

    async def run(self) -> None:
        """Watch until every measured pod is bound (reconnecting from the last version; 410: list again)."""
        while not self.done.is_set():
            query = {
                "fieldSelector": self.SELECTOR,
                "watch": "true",
                "allowWatchBookmarks": "true",
                "resourceVersion": self.resource_version,
                "timeoutSeconds": "600",
            }
            try:
                async with self.client.stream_lines(self.PATH, query, read_timeout=700.0) as lines:
                    async for line in lines:
                        event = json.loads(line)
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            raise KubeApiError.from_response(int(obj.get("code") or 500), obj, None)
                        meta = obj.get("metadata") or {}
                        self.resource_version = str(meta.get("resourceVersion") or self.resource_version)
                        if kind in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                            self._saw(str(meta.get("name")))
                            if self.done.is_set():
                                return
            except KubeApiError as error:
                if error.status != 410:
                    raise
                await self.list()
            except KubeTransportError:
                await asyncio.sleep(POLL_SECONDS)


async def count_events(client: KubeClient) -> int:
    """The Events of the measured pods' namespace (a list of one item and its ``remainingItemCount``)."""
    page = await client.request("GET", f"/api/v1/namespaces/{TEST_NAMESPACE}/events", query={"limit": "1"})
    return len(page.get("items") or ()) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


# ---------------------------------------------------------------------------------------------- CPU time

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> tuple[str, int, float] | None:
    """(command name, parent pid, user + system CPU seconds) of a process, from /proc (None when gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _machine_busy() -> float | None:
    """CPU seconds the whole machine has spent busy (all cores, not idle nor iowait), from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    except OSError:
        return None
    ticks = [int(value) for value in fields]
    return (sum(ticks) - ticks[3] - ticks[4]) / _CLOCK_TICKS


class CpuMeter:
    """CPU seconds of the scheduler, kube-apiserver, etcd and this process, between snapshots (Linux only).

    kube-apiserver and etcd are found as this process's children by name; the scheduler by its pid.
    ``other`` is what the rest of the machine used meanwhile (anything above a few hundredths of a core
    means something else competed for the cores, and the figures are not comparable).
    """

    def __init__(self, scheduler_pid: int) -> None:
        self.scheduler_pid = scheduler_pid
        self.snapshots: list[dict[str, float]] = []

    def snapshot(self) -> None:
        found: dict[str, float] = {"bench": time.process_time()}
        busy = _machine_busy()
        if busy is not None:
            found["machine"] = busy
        scheduler = _proc_stat(self.scheduler_pid)
        if scheduler is not None:
            found["scheduler"] = scheduler[2]
        own = os.getpid()
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                stat = _proc_stat(int(entry.name))
                if stat is not None and stat[1] == own and stat[0] in ("kube-apiserver", "etcd"):
                    found[stat[0]] = found.get(stat[0], 0.0) + stat[2]
        self.snapshots.append(found)

    def between(self, first: int, second: int, wall: float) -> dict[str, float]:
        """CPU seconds per component between two snapshots, and ``cores``: their sum over the wall time."""
        if len(self.snapshots) <= max(first, second):
            return {}
        a, b = self.snapshots[first], self.snapshots[second]
        used = {key: round(b[key] - a.get(key, 0.0), 2) for key in b}
        machine = used.pop("machine", None)
        ours = sum(used.values())
        if wall > 0:
            used["cores"] = round(ours / wall, 2)
        if machine is not None:
            used["other"] = round(max(machine - ours, 0.0), 2)
            if wall > 0:
                used["other_cores"] = round(used["other"] / wall, 2)
        return used


# ---------------------------------------------------------------------------------------------- processes


def _kubesched_command(config: Path, kubeconfig: Path, cprofile: Path | None) -> list[str]:
    run = ["-m", "kubesched.cli.main", "run", "--config", str(config), "--kubeconfig", str(kubeconfig)]
    if cprofile is not None:
        return [sys.executable, "-m", "cProfile", "-o", str(cprofile), *run]
    return [sys.executable, *run]


def _peer_command(peer: Path, config: Path) -> list[str]:
    return [str(peer), "--config", str(config), "--secure-port=0", "--leader-elect=false"]


def _stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def _py_spy_binary() -> str:
    found = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if found is None:
        raise ApiBenchError("--py-spy: py-spy is not installed (pip install py-spy)")
    return found


async def _measure(
    scheduler: str, command: list[str], options: Options, plane: ControlPlane, run_dir: Path, kubeconfig: Path
) -> SchedulerRun:
    shape = options.shape
    connection = load_connection(str(kubeconfig))
    client = KubeClient(connection, qps=-1, burst=1, user_agent="kubesched-bench")
    try:
        creation = await create_shape(client, shape)
    finally:
        await client.aclose()
    watch_client = KubeClient(connection, qps=-1, burst=1, user_agent="kubesched-bench-watch")
    watch = BindingWatch(watch_client, shape.pods)
    log_path = run_dir / f"{scheduler}.log"
    watcher: asyncio.Task[None] | None = None
    profiler: subprocess.Popen[bytes] | None = None
    try:
        await watch.list()
        watcher = asyncio.create_task(watch.run(), name="binding watch")
        gc.collect()
        with log_path.open("wb") as log:
            started = time.monotonic()
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        meter = CpuMeter(process.pid)
        meter.snapshot()
        watch.on_first = watch.on_done = meter.snapshot
        try:
            if options.py_spy is not None:
                with (run_dir / "py-spy.log").open("wb") as spy_log:
                    profiler = subprocess.Popen(
                        [_py_spy_binary(), "record", "--format", "raw", "--rate", "100", "--idle",
                         "--output", str(options.py_spy), "--pid", str(process.pid)],
                        stdin=subprocess.DEVNULL, stdout=spy_log, stderr=subprocess.STDOUT,
                    )  # fmt: skip
            outcome = "complete"
            while not watch.done.is_set():
                if watcher.done():
                    watcher.result()  # the watch failed: raise why
                if process.poll() is not None:
                    outcome = "exited"
                    break
                if time.monotonic() - max(started, watch.last) > options.stall_timeout:
                    outcome = "stalled"
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(watch.done.wait()), POLL_SECONDS)
            if len(meter.snapshots) == 2:  # stopped before the last binding: account up to now
                meter.snapshot()
        finally:
            exit_code = await asyncio.to_thread(_stop, process)
            if profiler is not None:  # py-spy writes its file when the process it samples has exited
                await asyncio.to_thread(_stop, profiler)
        events = await count_events(watch_client)
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await watch_client.aclose()
    bound = len(watch.bound)
    span = watch.last - watch.first if bound else 0.0
    from_start = watch.last - started if bound else 0.0
    return SchedulerRun(
        scheduler=scheduler,
        pods=shape.pods,
        bound=bound,
        pods_per_second=(bound - 1) / span if bound > 1 and span > 0 else 0.0,
        pods_per_second_from_start=bound / from_start if from_start > 0 else 0.0,
        first_to_last_seconds=span,
        start_to_first_seconds=watch.first - started if bound else 0.0,
        start_to_last_seconds=from_start,
        creation_seconds=creation.seconds,
        creation={
            "nodes": creation.nodes_seconds,
            "init_pods": creation.init_pods_seconds,
            "pods": creation.pods_seconds,
        },
        cpu_first_to_last=meter.between(1, 2, span),
        cpu_start_to_first=meter.between(0, 1, watch.first - started if bound else 0.0),
        events=events,
        outcome=outcome,
        exit_code=exit_code,
        log=str(log_path),
    )


def run_scheduler(scheduler: str, options: Options, run_dir: Path, *, profile: bool = False) -> SchedulerRun:
    """One scheduler on a fresh control plane holding the shape, created before the scheduler starts; the run ends
    when every pod is bound, the scheduler exits, or nothing is bound for the stall timeout."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with ControlPlane(options.assets, run_dir) as plane:
        kubeconfig = plane.write_kubeconfig(run_dir / "admin.kubeconfig", user="admin")
        config = run_dir / "scheduler-config.yaml"
        config.write_text(yaml.safe_dump(scheduler_config(kubeconfig, options.shape), sort_keys=False))
        if not profile or scheduler != KUBESCHED:
            options = dataclasses.replace(options, cprofile=None, py_spy=None)
        if scheduler == KUBESCHED:
            command = _kubesched_command(config, kubeconfig, options.cprofile)
        else:
            assert options.peer is not None
            command = _peer_command(options.peer, config)
        return run_returning(_measure(scheduler, command, options, plane, run_dir, kubeconfig))


# ---------------------------------------------------------------------------------------------- reporting


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_gib = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor() or platform.machine(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
    }


def _version(binary: Path) -> str:
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return "unknown"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else "unknown"


def summarize(runs: list[SchedulerRun]) -> dict[str, Any]:
    return {
        "runs": len(runs),
        "pods": runs[0].pods,
        "bound": min(r.bound for r in runs),
        "pods_per_second": statistics.median(r.pods_per_second for r in runs),
        "pods_per_second_from_start": statistics.median(r.pods_per_second_from_start for r in runs),
        "first_to_last_seconds": statistics.median(r.first_to_last_seconds for r in runs),
        "start_to_first_seconds": statistics.median(r.start_to_first_seconds for r in runs),
        "start_to_last_seconds": statistics.median(r.start_to_last_seconds for r in runs),
        "cpu_first_to_last": _median_keys([r.cpu_first_to_last for r in runs]),
        "cpu_start_to_first": _median_keys([r.cpu_start_to_first for r in runs]),
        "events": min(r.events for r in runs),
        "outcomes": [r.outcome for r in runs],
    }


def _median_keys(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = [key for key in samples[0] if all(key in sample for sample in samples)] if samples else []
    return {key: statistics.median(sample[key] for sample in samples) for key in keys}


def report(options: Options, runs: Mapping[str, list[SchedulerRun]]) -> dict[str, Any]:
    schedulers = {name: summarize(found) for name, found in runs.items() if found}
    ours, theirs = schedulers.get(KUBESCHED), schedulers.get(KUBE_SCHEDULER)
    ratio = ratio_from_start = None
    if ours is not None and theirs is not None:
        if theirs["pods_per_second"] > 0:
            ratio = ours["pods_per_second"] / theirs["pods_per_second"]
        if theirs["pods_per_second_from_start"] > 0:
            ratio_from_start = ours["pods_per_second_from_start"] / theirs["pods_per_second_from_start"]
    creations = [r.creation_seconds for found in runs.values() for r in found]
    objects = options.shape.nodes + options.shape.init_pods + options.shape.pods
    creation_seconds = statistics.median(creations) if creations else 0.0
    versions = {"kube-apiserver": _version(options.assets / "kube-apiserver")}
    if options.peer is not None:
        versions["kube-scheduler"] = _version(options.peer)
    return {
        "shape": asdict(options.shape),
        "repeat": options.repeat,
        "machine": machine(),
        "versions": versions,
        "creation_seconds": creation_seconds,
        "creation_objects_per_second": objects / creation_seconds if creation_seconds > 0 else 0.0,
        "schedulers": schedulers,
        "ratio": ratio,
        "ratio_from_start": ratio_from_start,
        "runs": [asdict(r) for found in runs.values() for r in found],
        "workdir": str(options.workdir),
    }


def print_table(result: Mapping[str, Any]) -> None:
    header = ("SCHEDULER", "BOUND", "PODS/S", "SECONDS", "PODS/S FROM START", "START→FIRST S", "EVENTS", "OUTCOME")
    rows = [
        (
            name,
            f"{s['bound']}/{s['pods']}",
            f"{s['pods_per_second']:.1f}",
            f"{s['first_to_last_seconds']:.2f}",
            f"{s['pods_per_second_from_start']:.1f}",
            f"{s['start_to_first_seconds']:.2f}",
            str(s["events"]),
            ",".join(s["outcomes"]),
        )
        for name, s in result["schedulers"].items()
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for name, s in result["schedulers"].items():
        cpu = s["cpu_first_to_last"]
        if cpu:
            parts = ", ".join(
                f"{key} {cpu[key]:.1f}" for key in ("scheduler", "kube-apiserver", "etcd", "bench") if key in cpu
            )
            line = f"{name}: CPU seconds from first to last binding: {parts}; {cpu.get('cores', 0):.2f} cores busy"
            if "other_cores" in cpu:
                line += f"; other processes: {cpu['other_cores']:.2f} cores"
            print(line)
    if result["ratio"] is not None:
        ratio_from_start = result["ratio_from_start"]
        print(
            f"kubesched / kube-scheduler: {result['ratio']:.2f} (first to last binding)"
            + (f", {ratio_from_start:.2f} (from process start)" if ratio_from_start is not None else "")
        )
    shape = result["shape"]
    print(
        f"shape: {shape['nodes']} nodes, {shape['init_pods']} bound + {shape['pods']} pending pods, "
        f"qps/burst {shape['qps']:g}/{shape['burst']}; created in {result['creation_seconds']:.1f} s "
        f"({result['creation_objects_per_second']:.0f} objects/s, median)"
    )
    m = result["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
    print(
        f"machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, Python {m['python']}, "
        f"{m['system']}; {versions}; medians of {result['repeat']} run(s)"
    )


# ---------------------------------------------------------------------------------------------- the command


def options_from(args: argparse.Namespace, workdir: Path) -> Options:
    assets = assets_directory()
    if assets is None:
        raise ApiBenchError(
            f"--api needs kube-apiserver and etcd in {ASSETS_VARIABLE} (envtest's binaries: "
            'export KUBEBUILDER_ASSETS="$(setup-envtest use -p path 1.34.x)")'
        )
    peer: Path | None = None
    if not args.skip_peer:
        peer = Path(args.peer) if args.peer else assets / "kube-scheduler"
        if not os.access(peer, os.X_OK):
            raise ApiBenchError(f"--peer {peer}: no kube-scheduler there (give --peer PATH, or --skip-peer)")
    return Options(
        shape=Shape(nodes=args.nodes, init_pods=args.init_pods, pods=args.pods, qps=args.qps, burst=args.burst),
        assets=assets,
        peer=peer,
        workdir=workdir,
        repeat=args.repeat,
        stall_timeout=args.stall_timeout,
        cprofile=Path(args.cprofile).resolve() if args.cprofile else None,
        py_spy=Path(args.py_spy).resolve() if args.py_spy else None,
    )


def run(options: Options) -> dict[str, Any]:
    runs: dict[str, list[SchedulerRun]] = {KUBESCHED: [], KUBE_SCHEDULER: []}
    for round_index in range(options.repeat):
        last = round_index == options.repeat - 1
        directory = options.workdir / f"round-{round_index + 1}"
        runs[KUBESCHED].append(run_scheduler(KUBESCHED, options, directory / KUBESCHED, profile=last))
        if options.peer is not None:
            runs[KUBE_SCHEDULER].append(run_scheduler(KUBE_SCHEDULER, options, directory / KUBE_SCHEDULER))
    return report(options, runs)


def main(args: argparse.Namespace) -> int:
    if args.workloads:
        raise ApiBenchError("--api runs its own SchedulingBasic shape: give no workload names")
    if args.reference:
        raise ApiBenchError("--api runs `kubesched run`, which has no per-node (--reference) path")
    temporary = not args.workdir
    workdir = Path(tempfile.mkdtemp(prefix="kubesched-bench-api-")) if temporary else Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    complete = False
    try:
        result = run(options_from(args, workdir))
        complete = all(outcome == "complete" for s in result["schedulers"].values() for outcome in s["outcomes"])
        if args.output == "json":
            json.dump(result, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print_table(result)
    finally:
        if temporary and complete:
            shutil.rmtree(workdir, ignore_errors=True)
        elif temporary:
            print(f"kept {workdir} (the schedulers' and control planes' logs)", file=sys.stderr)
    return 0 if complete else 1
