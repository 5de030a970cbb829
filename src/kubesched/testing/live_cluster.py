"""Pieces of the live-mode end-to-end tests: one test's objects, a scheduler run in the test's loop, waiting.

Who calls it: ``tests/e2e`` (over :class:`~kubesched.harness.envtest.ControlPlane`). Every test names its own
scheduler profile and labels its own nodes, and its pods select those nodes, so tests sharing the session's API
server never schedule each other's pods.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.backends.kube.kubeconfig import ClusterConnection, load_connection
from kubesched.config.loader import load_config_dict
from kubesched.config.types import SchedulerConfiguration
from kubesched.harness.envtest import ControlPlane
from kubesched.live.run import LiveOptions, LiveScheduler
from kubesched.plugins.registry import in_tree_registry


@dataclass
class Scenario:
    """One test's corner of the shared cluster: a scheduler name, a node label, a namespace."""

    plane: ControlPlane
    workdir: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def scheduler_name(self) -> str:
        return f"kubesched-{self.tag}"

    @property
    def namespace(self) -> str:
        return f"ns-{self.tag}"

    def node(self, name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> dict[str, Any]:
        capacity = {"cpu": cpu, "memory": memory, "pods": pods}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"{name}-{self.tag}", "labels": {"e2e": self.tag, "kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": capacity},
        }

    def pod(self, name: str, *, cpu: str = "1", scheduler: str | None = None) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "schedulerName": scheduler or self.scheduler_name,
                "nodeSelector": {"e2e": self.tag},
                "containers": [
                    {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        }

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = obj["kind"]
        path = "/api/v1/nodes" if kind == "Node" else f"/api/v1/namespaces/{self.namespace}/pods"
        status, answer = self.plane.request("POST", path, obj)
        assert status == 201, answer
        assert isinstance(answer, dict)
        return answer

    def create_namespace(self) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        status, answer = self.plane.request("POST", "/api/v1/namespaces", namespace)
        assert status == 201, answer

    def pods(self) -> dict[str, dict[str, Any]]:
        status, answer = self.plane.request("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        assert status == 200, answer
        return {item["metadata"]["name"]: item for item in answer["items"]}

    def events(self) -> list[dict[str, Any]]:
        status, answer = self.plane.request("GET", f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events")
        assert status == 200, answer
        return list(answer["items"])

    def config(self, **overrides: Any) -> SchedulerConfiguration:
        document: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"qps": 500, "burst": 1000},
            "profiles": [{"schedulerName": self.scheduler_name}],
            **overrides,
        }
        return load_config_dict(document, "e2e config", in_tree_registry())

    def kubeconfig(self, user: str = "scheduler") -> Path:
        return self.plane.write_kubeconfig(self.workdir / f"kubeconfig-{user}", user=user)

    def cleanup(self) -> None:
        self.plane.request("DELETE", f"/api/v1/namespaces/{self.namespace}")
        self.plane.request("DELETE", "/api/v1/nodes", query={"labelSelector": f"e2e={self.tag}"})


@contextmanager
def scenario(plane: ControlPlane, workdir: Path) -> Iterator[Scenario]:
    corner = Scenario(plane, workdir)
    corner.create_namespace()
    try:
        yield corner
    finally:
        corner.cleanup()


class RunningScheduler:
    """A LiveScheduler running as a task of the test's event loop."""

    def __init__(
        self,
        corner: Scenario,
        config: SchedulerConfiguration | None = None,
        *,
        user: str = "scheduler",
        connection: ClusterConnection | None = None,
        **options: Any,
    ) -> None:
        """``user``: "scheduler" (the built-in kube-scheduler role) or "admin" (e.g. for a Lease of the test's);
        ``connection`` replaces the user's kubeconfig (a fault proxy's, say)."""
        connection = connection or load_connection(str(corner.kubeconfig(user)))
        options.setdefault("hostname", "e2e")
        self.live = LiveScheduler(config or corner.config(), in_tree_registry(), connection, LiveOptions(**options))
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveScheduler:
        self.task = asyncio.create_task(self.live.run(self.stop))
        await wait_async(lambda: self.live.scheduling.is_set() or (self.task is not None and self.task.done()), 30)
        assert self.task is not None
        if self.task.done():
            await self.task  # raises what stopped it
        return self.live

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 30)


async def wait_async(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        await asyncio.sleep(interval)


async def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.2) -> None:
    """Poll a synchronous check (an API read) from the loop without blocking the scheduler under test."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        await asyncio.sleep(interval)
