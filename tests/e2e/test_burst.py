"""A burst of 1000 hub pods across 10 member clusters -- ten real kube-apiservers (on one shared etcd, each under
its own key prefix), each behind its own agent on loopback HTTPS -- must over-commit no member.

The hub reads the members' state once, before the burst, and never again while it lasts: whatever keeps a
member from being over-committed is the hub counting its in-flight pods on the super nodes and the agent's
own fit check when it reserves. Everything is checked by reading the members' API servers directly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.api.quantity import milli_value, parse_quantity
from kubesched.harness.envtest import ControlPlane
from kubesched.testing.agents import make_node
from kubesched.testing.hubs import hub_config, hub_pod, member_pods, reservations, running_hub

pytestmark = pytest.mark.e2e

NAMESPACE = "burst"
MEMBERS = [f"member-{i}" for i in range(10)]
# Per member, its nodes' CPUs: 2 to 4 nodes, 4 to 32 CPUs each -- 314 CPUs in all, for 1125 CPUs of requests.
NODE_CPUS = [
    [16, 8],
    [24, 4, 4],
    [8, 8, 8, 8],
    [12, 20],
    [6, 6, 6],
    [24, 24],
    [4, 8, 12],
    [16, 16, 4],
    [10, 10],
    [32, 8, 4, 4],
]
NODE_MEMORY_GI = 32
PODS_PER_NODE = 60
# In turn: 1 CPU, 2 CPUs, 1 CPU, 500m with 6Gi (memory binds before CPU on a node full of these).
POD_SHAPES = [("1", ""), ("2", ""), ("1", ""), ("500m", "6Gi")]
BURST = 1000


@pytest.fixture(scope="module")
def planes(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ControlPlane]]:
    """Ten members, started concurrently; the first one's etcd holds all ten under their own prefixes."""
    root = tmp_path_factory.mktemp("burst-members")
    first = ControlPlane(assets, _workdir(root, MEMBERS[0]))
    first.start()
    others = [ControlPlane(assets, _workdir(root, name), etcd_of=first, etcd_prefix=f"/{name}") for name in MEMBERS[1:]]
    try:
        with concurrent.futures.ThreadPoolExecutor(len(others)) as pool:
            list(pool.map(ControlPlane.start, others))
        yield dict(zip(MEMBERS, [first, *others], strict=True))
    finally:
        for plane in others:
            plane.stop()
        first.stop()


def _workdir(root: Path, name: str) -> Path:
    directory = root / name
    directory.mkdir()
    return directory


def _amount(resource: str, quantity: object) -> int:
    parsed = parse_quantity(str(quantity))
    return milli_value(parsed) if resource == "cpu" else math.ceil(parsed)


def _requests(pod: dict[str, Any]) -> Counter[str]:
    """What the member pod asks for (its containers' requests, no init containers here) and its pod slot."""
    total: Counter[str] = Counter(pods=1)
    for container in pod["spec"]["containers"]:
        for resource, quantity in (container.get("resources", {}).get("requests") or {}).items():
            total[resource] += _amount(resource, quantity)
    return total


def _allocatable(node: dict[str, Any]) -> dict[str, int]:
    status = node["status"]
    amounts = status.get("allocatable") or status["capacity"]
    return {name: _amount(name, amounts[name]) for name in ("cpu", "memory", "pods")}


def test_a_burst_of_1000_pods_over_10_members_overcommits_none(planes: dict[str, ControlPlane], tmp_path: Path) -> None:
    for name, cpus in zip(MEMBERS, NODE_CPUS, strict=True):
        plane = planes[name]
        assert plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})[0] == 201
        for index, cpu in enumerate(cpus):
            make_node(
                plane, f"{name}-node-{index}", cpu=str(cpu), memory=f"{NODE_MEMORY_GI}Gi", pods=str(PODS_PER_NODE)
            )
    shapes = itertools.cycle(POD_SHAPES)
    pods = []
    for i in range(BURST):
        cpu_request, memory_request = next(shapes)
        pods.append(hub_pod(f"burst{i}", NAMESPACE, cpu=cpu_request, memory=memory_request))
    placed: dict[str, str] = {}

    async def run() -> None:
        async with running_hub(planes, tmp_path, NAMESPACE, pods, hub_config()) as hub:
            await hub.scheduler.run_until_idle(hub.clock)
            placed.update((pod.metadata.name, hub.placed(pod)) for pod in pods)

    asyncio.run(run())

    where: dict[str, list[str]] = {}
    used_cpu = total_cpu = 0
    for name in MEMBERS:
        plane = planes[name]
        status, listed = plane.request("GET", "/api/v1/nodes")
        assert status == 200
        nodes = {node["metadata"]["name"]: _allocatable(node) for node in listed["items"]}
        on_node: dict[str, Counter[str]] = {node: Counter() for node in nodes}
        for pod in member_pods(plane, NAMESPACE):
            where.setdefault(pod["metadata"]["name"], []).append(name)
            on_node[pod["spec"]["nodeName"]] += _requests(pod)
        for node, allocatable in nodes.items():
            for resource, amount in allocatable.items():
                assert on_node[node][resource] <= amount, f"{name}/{node} over-committed in {resource}"
            total_cpu += allocatable["cpu"]
            used_cpu += on_node[node]["cpu"]
        assert reservations(plane, NAMESPACE) == []  # every reservation bound or released
    for pod_name, cluster in placed.items():
        assert where.get(pod_name, []) == ([cluster] if cluster else []), pod_name  # once, where the hub says
    assert set(where) <= set(placed)
    assert used_cpu >= 0.9 * total_cpu, f"only {used_cpu}m of {total_cpu}m CPU used: the burst must fill the members"
    assert sum(1 for cluster in placed.values() if cluster) >= 250
