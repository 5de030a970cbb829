"""The /metrics, /healthz and /readyz server over real HTTP, serving a real simulation's metrics."""

from __future__ import annotations

import socket
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.health import HealthServer, all_of
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


async def get(url: str, **headers: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def scheduled_cluster(metrics: SchedulerMetrics) -> Scheduler:
    clock = VirtualClock()
    nodes = [make_node(f"n{i}").capacity(cpu="2", memory="8Gi", pods=10).obj() for i in range(2)]
    pods = [make_pod(f"p{i}").req(cpu="500m").obj() for i in range(3)] + [make_pod("huge").req(cpu="16").obj()]
    config = load_config_dict(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
        "test",
        in_tree_registry(),
    )
    cluster = SimulatedCluster(clock, nodes, pods)
    scheduler = Scheduler(config, in_tree_registry(), cluster, clock=clock, seed=0, metrics=metrics)
    cluster.subscribe(scheduler.event_handlers)
    await scheduler.run_until_idle(clock)
    return scheduler


def test_metrics_endpoint_serves_upstream_names_and_labels(run_async: Runner) -> None:
    async def scenario() -> None:
        registry = CollectorRegistry()
        scheduler = await scheduled_cluster(SchedulerMetrics(registry, sample_percent=100))
        try:
            async with HealthServer(registry=registry, port=0) as server:
                assert server.port > 0
                status, content_type, text = await get(f"{server.url}/metrics")
        finally:
            await scheduler.close()
        assert status == 200
        assert content_type.startswith("text/plain") and "version=0.0.4" in content_type
        lines = set(text.splitlines())
        expected = [
            "# TYPE scheduler_schedule_attempts_total counter",
            'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 3.0',
            'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1.0',
            "# TYPE scheduler_scheduling_attempt_duration_seconds histogram",
            'scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="default-scheduler",'
            'result="scheduled"} 3.0',
            'scheduler_scheduling_attempt_duration_seconds_bucket{le="16.384",profile="default-scheduler",'
            'result="scheduled"} 3.0',
            'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 3.0',
            'scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="5242.88"} 3.0',
            'scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",'
            'profile="default-scheduler",status="Success"} 4.0',
            'scheduler_framework_extension_point_duration_seconds_bucket{extension_point="Bind",le="0.2048",'
            'profile="default-scheduler",status="Success"} 3.0',
            'scheduler_plugin_execution_duration_seconds_count{extension_point="Bind",plugin="DefaultBinder",'
            'status="Success"} 3.0',
            "# TYPE scheduler_pending_pods gauge",
            'scheduler_pending_pods{queue="active"} 0.0',
            'scheduler_pending_pods{queue="backoff"} 0.0',
            'scheduler_pending_pods{queue="unschedulable"} 1.0',
            'scheduler_pending_pods{queue="gated"} 0.0',
            "# TYPE scheduler_queue_incoming_pods_total counter",
            'scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 4.0',
            'scheduler_queue_incoming_pods_total{event="ScheduleAttemptFailure",queue="unschedulable"} 1.0',
            "scheduler_preemption_attempts_total 1.0",
            'scheduler_preemption_victims_bucket{le="64.0"} 0.0',
            'scheduler_cache_size{type="nodes"} 2.0',
            'scheduler_cache_size{type="pods"} 3.0',
            'scheduler_cache_size{type="assumed_pods"} 0.0',
            "kubesched_policy_decision_cache_hits_total 0.0",
        ]
        assert [line for line in expected if line not in lines] == []

    run_async(scenario())


def test_metrics_endpoint_speaks_openmetrics_when_asked(run_async: Runner) -> None:
    async def scenario() -> None:
        registry = CollectorRegistry()
        SchedulerMetrics(registry).preemption_attempted()
        async with HealthServer(registry=registry, port=0) as server:
            status, content_type, text = await get(
                f"{server.url}/metrics", Accept="application/openmetrics-text; version=1.0.0"
            )
        assert status == 200 and content_type.startswith("application/openmetrics-text")
        assert "scheduler_preemption_attempts_total 1.0" in text.splitlines()
        assert text.endswith("# EOF\n")

    run_async(scenario())


def test_readyz_flips_from_503_with_the_reason_to_200(run_async: Runner) -> None:
    async def scenario() -> None:
        state = {"synced": False, "leading": False}

        def synced() -> str | None:
            return None if state["synced"] else "informers not synced"

        def leading() -> str | None:
            return None if state["leading"] else "not leading"

        async with HealthServer(registry=CollectorRegistry(), ready=all_of(synced, leading), port=0) as server:
            answers = [await get(f"{server.url}/readyz")]
            state["synced"] = True
            answers.append(await get(f"{server.url}/readyz"))
            state["leading"] = True
            answers.append(await get(f"{server.url}/readyz"))
            health = await get(f"{server.url}/healthz")
            live = await get(f"{server.url}/livez")
        assert [(status, text) for status, _, text in answers] == [
            (503, "informers not synced\n"),
            (503, "not leading\n"),
            (200, "ok"),
        ]
        assert health[0] == 200 and health[2] == "ok"
        assert live[0] == 200 and live[2] == "ok"

    run_async(scenario())


def test_healthz_fails_with_the_check_reason_and_a_raising_check_fails(run_async: Runner) -> None:
    async def scenario() -> None:
        def loop_stopped() -> str | None:
            return "scheduling loop stopped"

        def broken() -> str | None:
            raise RuntimeError("lease store unreachable")

        async with HealthServer(registry=CollectorRegistry(), healthy=loop_stopped, ready=broken, port=0) as server:
            health = await get(f"{server.url}/healthz")
            ready = await get(f"{server.url}/readyz")
            missing = await get(f"{server.url}/nothing")
        assert (health[0], health[2]) == (503, "scheduling loop stopped\n")
        assert (ready[0], ready[2]) == (503, "check failed: RuntimeError: lease store unreachable\n")
        assert missing[0] == 404

    run_async(scenario())


def test_close_frees_the_port_and_start_close_pair_works(run_async: Runner) -> None:
    async def scenario() -> None:
        server = HealthServer(registry=CollectorRegistry(), host="127.0.0.1", port=0)
        with pytest.raises(RuntimeError, match="not started"):
            _ = server.port
        await server.start()
        port = server.port
        assert (await get(f"http://127.0.0.1:{port}/healthz"))[0] == 200
        await server.close()
        await server.close()  # idempotent
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))  # free again
        # A fixed port: a second server on it is refused while the first holds it.
        async with HealthServer(registry=CollectorRegistry(), port=port) as first:
            assert first.port == port
            with pytest.raises(OSError):
                await HealthServer(registry=CollectorRegistry(), port=port).start()

    run_async(scenario())
