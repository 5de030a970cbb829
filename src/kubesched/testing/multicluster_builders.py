"""Builders for member clusters in tests: ``make_member("us-east").region("us-east").nodes(3, cpu="16").obj()``,
and a cluster plane ready for one cluster plugin (:func:`cluster_plane`).

Who calls it: the tests of the MemberCluster kind, of :mod:`kubesched.federation` and of the cluster plugins.
Like :mod:`kubesched.testing.builders`, a builder writes the manifest a user would write and ``.obj()`` parses it
with the real ``from_dict``. Defaults keep a member valid and neutral: ready, continuously reporting (no
``observedAt``), allocatable 16 CPUs, 64Gi and 110 pods, nothing allocated, no node summary, no API list, no
prices, no taints.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from kubesched.api.multicluster import GROUP, KIND, PROVIDER_LABEL, VERSION, MemberCluster
from kubesched.api.objects import Node, Pod
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import CLUSTER_STATE_SERVICE, ClusterState
from kubesched.federation.adapter import allocated_pod, super_node
from kubesched.federation.state import StaticClusterStateSource, cluster_state
from kubesched.framework.runtime.services import Services
from kubesched.framework.snapshot import Snapshot
from kubesched.policy.clients import policy_services
from kubesched.testing.framework_helpers import PluginHandle, make_cluster

__all__ = ["ClusterPlaneFixture", "MemberClusterBuilder", "cluster_plane", "make_member"]

QuantityValue = str | int | float


def _resources(named: Mapping[str, QuantityValue], extra: Mapping[str, QuantityValue] | None) -> dict[str, Any]:
    merged: dict[str, Any] = dict(extra or {})
    merged.update({key.replace("_", "-"): amount for key, amount in named.items()})
    return merged


class MemberClusterBuilder:
    """Builds a MemberCluster manifest step by step."""

    __slots__ = ("_metadata", "_spec", "_status")

    def __init__(self, name: str = "member") -> None:
        self._metadata: dict[str, Any] = {"name": name}
        self._spec: dict[str, Any] = {}
        self._status: dict[str, Any] = {"ready": True, "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}

    def label(self, key: str, value: str) -> Self:
        self._metadata.setdefault("labels", {})[key] = value
        return self

    def region(self, region: str) -> Self:
        return self.label("topology.kubernetes.io/region", region)

    def zone(self, zone: str) -> Self:
        return self.label("topology.kubernetes.io/zone", zone)

    def provider(self, provider: str) -> Self:
        return self.label(PROVIDER_LABEL, provider)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        entry = {"key": key, "effect": effect}
        if value:
            entry["value"] = value
        self._spec.setdefault("taints", []).append(entry)
        return self

    def cost(
        self, *, cpu: QuantityValue | None = None, memory: QuantityValue | None = None, **extended: QuantityValue
    ) -> Self:
        """Prices per hour: per core, per GiB, and per unit of extended resources (underscores for ``/`` or
        ``-`` are not guessed: pass ``**{"nvidia.com/gpu": "2.5"}``)."""
        cost: dict[str, Any] = self._spec.setdefault("cost", {})
        if cpu is not None:
            cost["cpuPerCoreHour"] = cpu
        if memory is not None:
            cost["memoryPerGiBHour"] = memory
        if extended:
            cost.setdefault("extendedPerUnitHour", {}).update(extended)
        return self

    def push(self, secret: str = "kubeconfig", namespace: str = "kubesched-system") -> Self:
        self._spec["connection"] = {"kubeconfigSecretRef": {"namespace": namespace, "name": secret}}
        return self

    def agent(self, url: str, token_secret: str = "agent-token", namespace: str = "kubesched-system") -> Self:
        self._spec["connection"] = {
            "agent": {"url": url, "tokenSecretRef": {"namespace": namespace, "name": token_secret}}
        }
        return self

    def ready(self, ready: bool = True) -> Self:
        self._status["ready"] = ready
        return self

    def condition(self, status: str, reason: str = "") -> Self:
        """A Ready condition instead of the ``ready`` shorthand."""
        self._status.pop("ready", None)
        condition = {"type": "Ready", "status": status}
        if reason:
            condition["reason"] = reason
        self._status.setdefault("conditions", []).append(condition)
        return self

    def observed(self, at: str) -> Self:
        self._status["observedAt"] = at
        return self

    def allocatable(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        """Replace ``status.allocatable``."""
        self._status["allocatable"] = _resources(named, resources)
        return self

    def allocated(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        self._status["allocated"] = _resources(named, resources)
        return self

    def nodes(self, count: int, resources: Mapping[str, QuantityValue] | None = None, /, **free: QuantityValue) -> Self:
        """Add a node-summary bucket: ``count`` nodes with ``free`` left each."""
        self._status.setdefault("nodeSummary", []).append({"count": count, "free": _resources(free, resources)})
        return self

    def tainted(self, key: str, value: str, effect: str) -> Self:
        """Give the last node-summary bucket one more taint."""
        self._status["nodeSummary"][-1].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def apis(self, group_version: str, *kinds: str) -> Self:
        resources = [{"kind": kind, "name": kind.lower() + "s"} for kind in kinds]
        self._status.setdefault("apiEnablements", []).append({"groupVersion": group_version, "resources": resources})
        return self

    def without_figures(self) -> Self:
        """No allocatable (for a member described by its own Nodes)."""
        self._status.pop("allocatable", None)
        return self

    def status(self, **fields: Any) -> Self:
        """Set raw status fields (for tests of bad input)."""
        self._status.update(fields)
        return self

    def spec(self, **fields: Any) -> Self:
        """Set raw spec fields (for tests of bad input)."""
        self._spec.update(fields)
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "metadata": self._metadata,
                "spec": self._spec,
                "status": self._status,
            }
        )

    def obj(self) -> MemberCluster:
        raw = self.raw()
        return MemberCluster.from_dict(raw, f"make_member: MemberCluster {raw['metadata']['name']}")


def make_member(name: str = "member") -> MemberClusterBuilder:
    return MemberClusterBuilder(name)


@dataclass(slots=True)
class ClusterPlaneFixture:
    """Super nodes in a real cache, their states, and a Handle whose scheduler provides the state source."""

    handle: PluginHandle
    snapshot: Snapshot
    states: dict[str, ClusterState]
    nodes: list[Node]
    clock: VirtualClock


def cluster_plane(
    members: Sequence[MemberCluster],
    hub_pods: Sequence[Pod] = (),
    *,
    now: float = 0.0,
    member_pods: Mapping[str, Sequence[Pod]] | None = None,
    unknown: Sequence[str] = (),
) -> ClusterPlaneFixture:
    """Each member as its super node (with its placeholder pod), ``hub_pods`` bound to the clusters their
    ``spec.nodeName`` names (in flight), and a :class:`PluginHandle` over them on a virtual clock at ``now``.
    ``member_pods``: pods running in a member (by name), which its state reports as running workloads;
    ``unknown``: members whose super node exists but whose state the source does not report."""
    running = member_pods or {}
    states = {member.name: cluster_state(member, (), running.get(member.name, ())) for member in members}
    nodes = [super_node(member, states[member.name]) for member in members]
    placeholders = [pod for pod in (allocated_pod(state) for state in states.values()) if pod is not None]
    cache, _ = make_cluster(nodes, [*placeholders, *hub_pods])
    clock = VirtualClock(now)
    source = StaticClusterStateSource(state for name, state in states.items() if name not in unknown)
    services = Services(policy_services(clock))
    services.register(CLUSTER_STATE_SERVICE, lambda spec: source)
    handle = PluginHandle(cache, clock=clock, services=services, profile_name="multicluster-scheduler")
    return ClusterPlaneFixture(handle, cache.snapshot(), states, nodes, clock)
