"""While a remote policy decision is pending, the scheduler's event loop keeps running (no I/O in the cycle).

A real scheduler with SecurityAuditFilter on the remote engine, against the OPA-compatible test server holding
every answer until a ticker task on the scheduler's loop has run a few times while the request waits: events,
not timings, show the loop was free.
"""

from __future__ import annotations

import asyncio
import threading
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
TURNS_WHILE_HELD = 3


def test_a_slow_opa_does_not_block_the_loop(run_async: Runner) -> None:
    with OpaTestServer({"authz.rego": ALLOW_ALL}) as server:
        # The server holds the decision until the scheduler's own loop has turned a few times while it waits
        # for it: a decision made with blocking I/O would leave the loop no turn, the answer would never come,
        # and the call would end at its deadline with the pod unscheduled.
        release = threading.Event()
        server.faults.hold = release
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

        async def scenario() -> tuple[int, list[AttemptRecord]]:
            clock = VirtualClock()
            nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(4)]
            cluster = SimulatedCluster(clock, nodes, [make_pod("web").req(cpu="100m").obj()])
            records: list[AttemptRecord] = []

            class Collect:
                def on_attempt(self, record: AttemptRecord) -> None:
                    records.append(record)

            scheduler = Scheduler(config, in_tree_registry(), cluster, clock=clock, seed=0, observer=Collect())
            cluster.subscribe(scheduler.event_handlers)
            done = asyncio.Event()
            turns_while_held = 0

            async def ticker() -> None:
                nonlocal turns_while_held
                while not done.is_set():
                    if server.requests > server.answered:  # a request is being held
                        turns_while_held += 1
                        if turns_while_held >= TURNS_WHILE_HELD:
                            release.set()
                    await asyncio.sleep(0)

            ticking = asyncio.create_task(ticker())
            try:
                await scheduler.run_until_idle(clock)
            finally:
                done.set()
                await ticking
                await scheduler.close()
            return turns_while_held, records

        turns, records = run_async(scenario())
    assert [(r.pod.name, r.result) for r in records] == [("web", "Scheduled")]
    assert turns >= TURNS_WHILE_HELD, "the loop turned while the decision was pending"
