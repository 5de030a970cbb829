"""While a remote policy decision is pending, the scheduler's event loop keeps running (no I/O in the cycle).

A real scheduler with SecurityAuditFilter on the remote engine, against the OPA-compatible test server
answering every request after 0.4 s: a ticker task on the same loop must never wait more than 50 ms between
ticks while the pod is being decided and bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.harness.opa_server import OpaTestServer
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]

ALLOW_ALL = """package kubernetes.authz

import rego.v1

decision := {"allow": true}
"""
DELAY_SECONDS = 0.4
MAX_GAP_SECONDS = 0.05


def test_a_slow_opa_does_not_block_the_loop(run_async: Runner) -> None:
    with OpaTestServer({"authz.rego": ALLOW_ALL}) as server:
        server.faults.delay_seconds = DELAY_SECONDS
        document = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                    "pluginConfig": [
                        {
                            "name": "SecurityAuditFilter",
                            "args": {
                                "opaEndpoint": f"{server.url}/v1/data/kubernetes/authz/decision",
                                "timeoutSeconds": 5,
                            },
                        }
                    ],
                }
            ],
        }
        config = load_config_dict(document, "test", in_tree_registry())

        async def scenario() -> tuple[float, float, list[AttemptRecord]]:
            clock = VirtualClock()
            nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(4)]
            cluster = SimulatedCluster(clock, nodes, [make_pod("web").req(cpu="100m").obj()])
            records: list[AttemptRecord] = []

            class Collect:
                def on_attempt(self, record: AttemptRecord) -> None:
                    records.append(record)

            scheduler = Scheduler(config, in_tree_registry(), cluster, clock=clock, seed=0, observer=Collect())
            cluster.subscribe(scheduler.event_handlers)
            gaps: list[float] = []
            done = asyncio.Event()

            async def ticker() -> None:
                last = time.perf_counter()
                while not done.is_set():
                    await asyncio.sleep(0.005)
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now

            ticking = asyncio.create_task(ticker())
            await asyncio.sleep(0.02)  # the ticker is running before the cycle starts
            started = time.perf_counter()
            try:
                await scheduler.run_until_idle(clock)
            finally:
                elapsed = time.perf_counter() - started
                done.set()
                await ticking
                await scheduler.close()
            return elapsed, max(gaps), records

        elapsed, worst_gap, records = run_async(scenario())
    assert [(r.pod.name, r.result) for r in records] == [("web", "Scheduled")]
    assert elapsed >= DELAY_SECONDS, "the decision really waited on the slow server"
    assert worst_gap < MAX_GAP_SECONDS, f"the event loop stalled for {worst_gap * 1000:.0f} ms"
