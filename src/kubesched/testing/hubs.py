"""A hub scheduler over member clusters for the end-to-end tests: agents in front of envtest members on
loopback HTTPS (or push-mode endpoints on their kubeconfigs), the cluster state cache and the committer over
them, and a hub Scheduler on an in-memory cluster whose nodes are the members' super nodes; plus readers of
a member's pods and reservations straight from its API server. Used by test_two_phase_commit and test_burst."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.agent.core import Agent
from kubesched.agent.push import PushEndpoint
from kubesched.api.objects import Pod
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.kubeconfig import load_connection
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import CLUSTER_COMMIT_SERVICE, CLUSTER_STATE_SERVICE
from kubesched.config.loader import load_config_dict
from kubesched.federation.adapter import allocated_pod, super_node
from kubesched.federation.agent_client import AgentClient, MemberEndpoint
from kubesched.federation.cache import ClusterStateCache, MemberRefresh
from kubesched.federation.commit import AgentCommitter
from kubesched.framework.runtime.services import Services
from kubesched.harness.envtest import ControlPlane
from kubesched.plugins.multicluster.reservation import APPROVAL_ANNOTATION_KEY
from kubesched.plugins.registry import in_tree_registry
from kubesched.policyapi.verdicts import PolicyVerdict
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.agents import RunningAgent
from kubesched.testing.builders import make_pod
from kubesched.testing.multicluster_builders import make_member

HUB = "hub-scheduler"
REGION_LABEL = "topology.kubernetes.io/region"
_names = itertools.count()


# The hub profile's plugins: clusters filtered by readiness and per-node capacity, spread by balance, committed
# by the two-phase reservation and bound by the member's agent (every default plugin disabled).
HUB_PLUGINS: dict[str, Any] = {
    "multiPoint": {
        "disabled": [{"name": "*"}],
        "enabled": [
            {"name": name}
            for name in (
                "PrioritySort",
                "NodeAffinity",
                "ClusterReadiness",
                "ClusterCapacity",
                "ClusterBalance",
                "ClusterReservation",
                "ClusterBind",
            )
        ],
    }
}


def hub_config(
    approval: str = "Automatic",
    suspect_after: int = 3,
    permit_timeout: float = 20,
    ttl: float = 30,
    call_seconds: float = 2,
) -> Any:
    """The hub profile; ``call_seconds`` bounds each reserve and bind call to an agent."""
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": HUB,
                "plugins": HUB_PLUGINS,
                "pluginConfig": [
                    {
                        "name": "ClusterReservation",
                        "args": {
                            "ttlSeconds": ttl,
                            "permitTimeoutSeconds": permit_timeout,
                            "reserveTimeoutSeconds": call_seconds,
                            "approval": approval,
                            "suspectAfterFailures": suspect_after,
                        },
                    },
                    {"name": "ClusterBind", "args": {"bindTimeoutSeconds": call_seconds}},
                ],
            }
        ],
    }
    return load_config_dict(document, "hub config", in_tree_registry())


@dataclass
class Hub:
    scheduler: Scheduler
    cluster: SimulatedCluster
    clock: VirtualClock
    agents: dict[str, RunningAgent]
    agent_clock: VirtualClock
    records: list[AttemptRecord] = field(default_factory=list)

    def verdicts(self, pod: Pod) -> list[PolicyVerdict]:
        return [v for r in self.records if r.pod.uid == pod.metadata.uid for v in r.verdicts]

    def placed(self, pod: Pod) -> str:
        return self.cluster.pods[pod.metadata.uid].spec.node_name

    def messages(self, pod: Pod) -> list[str]:
        return [event.message for event in self.cluster.events_for(pod.metadata.namespace, pod.metadata.name)]


@dataclass
class _Collector:
    records: list[AttemptRecord]

    def on_attempt(self, record: AttemptRecord) -> None:
        self.records.append(record)


@asynccontextmanager
async def running_hub(
    planes: dict[str, ControlPlane],
    workdir: Path,
    namespace: str,
    pods: list[Pod],
    config: Any,
    push: frozenset[str] = frozenset(),
) -> AsyncIterator[Hub]:
    """Agents for ``planes`` (on their own virtual clock: expiry is the test's to trigger) -- or, for the members
    in ``push``, the agent's logic in the hub on the member's kubeconfig --, the state cache and the committer
    over them, and a hub scheduler whose nodes are the members' super nodes."""
    agent_clock = VirtualClock()
    clock = VirtualClock()
    agents = {
        name: RunningAgent(plane, workdir / name, clock=agent_clock, namespace=namespace, cluster_name=name)
        for name, plane in planes.items()
        if name not in push
    }
    for agent in agents.values():
        await agent.start()
    clients: dict[str, MemberEndpoint] = {
        name: AgentClient(agent.url, agent.token, ssl_context=agent.client_ssl_context())
        for name, agent in agents.items()
    }
    kube_clients: list[KubeClient] = []
    for name in sorted(push):
        kubeconfig = planes[name].write_kubeconfig(workdir / f"{name}.kubeconfig")
        kube_clients.append(KubeClient(load_connection(str(kubeconfig))))
        in_hub = Agent(kube_clients[-1], clock=agent_clock, namespace=namespace, cluster_name=name)
        await in_hub.ensure_namespace()
        clients[name] = PushEndpoint(in_hub)
    cache = ClusterStateCache([MemberRefresh(name, client) for name, client in clients.items()], clock=clock)
    await cache.refresh_all()  # one round before the hub starts; refreshing on is the live scheduler's job
    nodes, placeholders = [], []
    for name, state in cache.states.items():
        nodes.append(super_node(make_member(name).region(name).obj(), state))
        placeholder = allocated_pod(state)
        if placeholder is not None:
            placeholders.append(placeholder)
    hub = SimulatedCluster(clock, nodes, [*placeholders, *pods])
    services = Services()
    services.register(CLUSTER_STATE_SERVICE, lambda spec: cache)
    services.register(CLUSTER_COMMIT_SERVICE, lambda spec: AgentCommitter(clients))
    records: list[AttemptRecord] = []
    observer = _Collector(records)
    scheduler = Scheduler(
        config,
        in_tree_registry(),
        hub,
        clock=clock,
        seed=0,
        services=services,
        targets=TARGET_CLUSTERS,
        observer=observer,
    )
    scheduler.max_attempts = 4
    hub.subscribe(scheduler.event_handlers)
    try:
        yield Hub(scheduler, hub, clock, agents, agent_clock, records)
    finally:
        await scheduler.close()
        for client in clients.values():
            await client.aclose()
        for kube_client in kube_clients:
            await kube_client.aclose()
        for agent in agents.values():
            await agent.__aexit__(None, None, None)


def hub_pod(name: str, namespace: str, cpu: str, approval: str = "", region: str = "", memory: str = "") -> Pod:
    builder = make_pod(f"{name}-{next(_names)}").namespace(namespace).scheduler(HUB).req(cpu=cpu)
    if memory:
        builder = builder.req(memory=memory)
    if region:
        builder = builder.node_selector({REGION_LABEL: region})
    if approval:
        builder = builder.annotation(APPROVAL_ANNOTATION_KEY, approval)
    return builder.obj()


def member_pods(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    status, listed = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200
    return list(listed["items"])


def reservations(plane: ControlPlane, namespace: str) -> list[str]:
    status, listed = plane.request(
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps",
        query={"labelSelector": "multicluster.kubesched.io/reservation=true"},
    )
    assert status == 200
    return [item["metadata"]["name"] for item in listed["items"]]
