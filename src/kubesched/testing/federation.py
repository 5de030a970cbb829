"""A hub and its members as the crash tests run them: envtest API servers, ``kubesched agent`` per member and
``kubesched run`` as the hub, all separate processes, with fault proxies on both sides of every agent.

Who calls it: ``tests/e2e/test_commit_crashes.py``. A :class:`Federation` takes the hub's control plane (with the
MemberCluster CRD) and one control plane per member, and sets up one test's corner of them: a namespace on the
hub (its pods, the agents' token Secrets, the hubs' Lease), MemberClusters labelled with the test's tag (the hub
pods select them by it), labelled Nodes and the pods' namespace in every member, and an agent namespace of the
test's own in each member (so no reservation or fencing token of another test is seen). For each member::

    hub ──HTTPS── agent_proxy ──HTTPS── kubesched agent ──HTTP── api_proxy ──HTTPS── member kube-apiserver

so a test can drop the agent's answers or SIGKILL the hub when an answer passes (``agent_proxy``), and SIGKILL the
agent at an exact step of its work on the member (``api_proxy``). The proxies run in a
:class:`~kubesched.testing.processes.ProxyLoop`.

:meth:`Federation.snapshot` reads everything the invariant of docs/explanation/cross-cluster-commit.md is about,
and :func:`commit_violations` says what in it breaks the invariant.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.objects import Pod
from kubesched.api.quantity import to_canonical
from kubesched.api.resources import pod_requests
from kubesched.federation.wire import HUB_POD_UID_ANNOTATION, RESERVATION_LABEL
from kubesched.harness.envtest import ControlPlane
from kubesched.testing.fault_proxy import FaultProxy
from kubesched.testing.hubs import HUB_PLUGINS
from kubesched.testing.live_cluster import Scenario
from kubesched.testing.processes import AgentProcess, HubProcess, ProxyLoop

__all__ = [
    "CRD_PATH",
    "MC_PATH",
    "CommitSettings",
    "Federation",
    "FederationSnapshot",
    "Member",
    "MemberSnapshot",
    "apply_member_crd",
    "commit_violations",
]

CRD_PATH = Path(__file__).parents[3] / "deploy" / "crds" / "memberclusters.yaml"
MC_PATH = "/apis/multicluster.kubesched.io/v1alpha1/memberclusters"
TERMINAL = ("Succeeded", "Failed")


def apply_member_crd(plane: ControlPlane, crd: Path = CRD_PATH) -> None:
    """Install the MemberCluster CRD on ``plane`` (already there: fine) and wait until it is served."""
    status, answer = plane.request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(crd.read_text())
    )
    if status not in (201, 409):
        raise RuntimeError(f"installing the MemberCluster CRD: {status} {answer}")
    deadline = time.monotonic() + 30
    while plane.request("GET", MC_PATH)[0] != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("the MemberCluster CRD was not served within 30 s")
        time.sleep(0.1)


@dataclass(frozen=True, slots=True)
class CommitSettings:
    """The timeouts of one test's hub and agents: short, so crashes settle in seconds."""

    ttl_seconds: float = 8.0
    permit_timeout_seconds: float = 15.0
    reserve_timeout_seconds: float = 2.0
    bind_timeout_seconds: float = 2.0
    bind_attempts: int = 2
    suspect_seconds: float = 3.0
    request_timeout: float = 2.0  # the agents' calls to their members
    in_flight_seconds: float = 4.0
    sweep_interval: float = 1.0
    refresh_interval: float = 0.5  # the hub's refresh of every member
    leader_elect: bool = False
    lease_duration: str = "3s"
    renew_deadline: str = "2s"
    retry_period: str = "500ms"
    max_backoff_seconds: int = 2

    @property
    def reservation_grace(self) -> float:
        """How long past its ``expiresAt`` a reservation may still be stored while its agent runs: the in-flight
        window (a create may still land) plus two sweeps."""
        return self.in_flight_seconds + 2 * self.sweep_interval


@dataclass
class Member:
    """One member cluster of the federation and everything in front of it."""

    name: str  # the MemberCluster's name
    plane: ControlPlane
    agent: AgentProcess
    api_proxy: FaultProxy  # between the agent and the member's API server
    agent_proxy: FaultProxy  # between the hub and the agent


@dataclass(frozen=True, slots=True)
class HubPodView:
    uid: str
    name: str
    node: str  # spec.nodeName: the cluster it is bound to ("" pending)
    terminating: bool
    annotations: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class MemberPodView:
    name: str
    hub_uid: str
    node: str
    requests: Mapping[str, int]
    terminating: bool  # deletionTimestamp set (envtest has no kubelet to finish it)
    finished: bool  # Succeeded or Failed

    @property
    def copy(self) -> bool:
        """A running copy of a hub pod: made for one, neither being deleted nor finished."""
        return bool(self.hub_uid) and not self.terminating and not self.finished


@dataclass(frozen=True, slots=True)
class ReservationView:
    name: str
    node: str
    pod_uid: str
    requests: Mapping[str, int]
    expires_at: float


@dataclass
class MemberSnapshot:
    pods: list[MemberPodView] = field(default_factory=list)
    allocatable: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> canonical amounts
    reservations: list[ReservationView] = field(default_factory=list)


@dataclass
class FederationSnapshot:
    """The hub's pods and every member as read at ``taken_at`` (wall clock: the agents' clock too)."""

    hub_pods: dict[str, HubPodView]  # by uid
    members: dict[str, MemberSnapshot]
    taken_at: float


def commit_violations(
    snapshot: FederationSnapshot, *, settled: bool, reservation_grace: float = 0.0, deleted: Iterable[str] = ()
) -> list[str]:
    """What in ``snapshot`` breaks the invariant (docs/explanation/cross-cluster-commit.md#the-invariant); empty
    when nothing does.

    At any moment: no hub pod has running copies in two members, and no member node holds more than its
    allocatable (its unfinished pods, being deleted or not, and its live reservations under which no pod was
    made). Once ``settled`` (every process up, every commit given time to end): every hub pod is bound, each
    bound one has exactly one copy, in the member its ``spec.nodeName`` names; no copy is left of a hub pod that
    no longer exists (``deleted`` names uids known to be deleted, the snapshot's missing uids count too); and no
    reservation is stored more than ``reservation_grace`` seconds past its expiry."""
    problems: list[str] = []
    copies: dict[str, list[tuple[str, MemberPodView]]] = {}
    for cluster, member in sorted(snapshot.members.items()):
        for pod in member.pods:
            if pod.copy:
                copies.setdefault(pod.hub_uid, []).append((cluster, pod))
    for uid, found in sorted(copies.items()):
        if len({cluster for cluster, _ in found}) > 1:
            hub = snapshot.hub_pods.get(uid)
            where = ", ".join(f"{cluster}:{pod.name}" for cluster, pod in found)
            problems.append(f"hub pod {hub.name if hub else uid} runs in more than one member: {where}")
    for cluster, member in sorted(snapshot.members.items()):
        problems.extend(_overcommitted(cluster, member, snapshot.taken_at))
    if not settled:
        return problems
    gone = set(deleted)
    for uid, hub in sorted(snapshot.hub_pods.items(), key=lambda item: item[1].name):
        if hub.terminating:
            continue
        found = copies.get(uid, [])
        if not hub.node:
            problems.append(f"hub pod {hub.name} is not bound")
        elif [cluster for cluster, _ in found] != [hub.node]:
            where = ", ".join(f"{cluster}:{pod.name}" for cluster, pod in found) or "none"
            problems.append(f"hub pod {hub.name} is bound to {hub.node}; its copies: {where}")
    for uid, found in sorted(copies.items()):
        hub = snapshot.hub_pods.get(uid)
        if hub is None or uid in gone or hub.terminating:
            where = ", ".join(f"{cluster}:{pod.name}" for cluster, pod in found)
            problems.append(f"a copy of deleted hub pod {uid} is left: {where}")
    for cluster, member in sorted(snapshot.members.items()):
        for reservation in member.reservations:
            late = snapshot.taken_at - reservation.expires_at
            if late > reservation_grace:
                problems.append(f"reservation {reservation.name} in {cluster} is stored {late:.1f} s past its expiry")
    return problems


def _overcommitted(cluster: str, member: MemberSnapshot, now: float) -> list[str]:
    used: dict[str, dict[str, int]] = {}
    made = {pod.hub_uid for pod in member.pods if pod.hub_uid and not pod.finished}
    for pod in member.pods:
        if pod.finished or not pod.node:
            continue
        total = used.setdefault(pod.node, {})
        for name, amount in {**pod.requests, "pods": 1}.items():
            total[name] = total.get(name, 0) + amount
    for reservation in member.reservations:
        if reservation.expires_at <= now or reservation.pod_uid in made:
            continue  # expired, or its pod holds the capacity now
        total = used.setdefault(reservation.node, {})
        for name, amount in {**reservation.requests, "pods": 1}.items():
            total[name] = total.get(name, 0) + amount
    problems = []
    for node, total in sorted(used.items()):
        allocatable = member.allocatable.get(node, {})
        over = {
            name: (amount, allocatable.get(name, 0))
            for name, amount in total.items()
            if amount > allocatable.get(name, 0)
        }
        if over:
            problems.append(f"node {node} of {cluster} holds more than its allocatable: {over} (held, allocatable)")
    return problems


class Federation:
    """One test's hub corner and members (module doc); :meth:`start` sets it up, :meth:`close` removes it."""

    def __init__(
        self,
        hub_plane: ControlPlane,
        planes: Mapping[str, ControlPlane],
        workdir: Path,
        proxies: ProxyLoop,
        settings: CommitSettings | None = None,
        *,
        node_cpu: str = "8",
        nodes_per_member: int = 1,
        node_pods: int = 110,
    ) -> None:
        self.hub_plane = hub_plane
        self.corner = Scenario(hub_plane, workdir)
        self.tag = self.corner.tag
        self.namespace = self.corner.namespace
        self.scheduler_name = f"hub-{self.tag}"
        self.agent_namespace = f"kubesched-{self.tag}"
        self.workdir = workdir
        self.proxies = proxies
        self.settings = settings or CommitSettings()
        self.planes = dict(planes)
        self.node_cpu = node_cpu
        self.nodes_per_member = nodes_per_member
        self.node_pods = node_pods
        self.members: dict[str, Member] = {}
        self.hubs: list[HubProcess] = []
        self.config_path = workdir / "hub-config.yaml"
        self.hub_kubeconfig = workdir / "hub.kubeconfig"
        self.deleted: set[str] = set()  # uids of hub pods the test deleted

    def cluster(self, member: str) -> str:
        """The MemberCluster name of member ``member``."""
        return f"{member}-{self.tag}"

    # ------------------------------------------------------------------------------------------------- setup

    def start(self) -> None:
        apply_member_crd(self.hub_plane)
        self.corner.create_namespace()
        self.hub_plane.write_kubeconfig(self.hub_kubeconfig)
        self.config_path.write_text(yaml.safe_dump(self.hub_config(), sort_keys=False))
        settings = self.settings
        for short, plane in sorted(self.planes.items()):
            name = self.cluster(short)
            status, answer = plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": self.namespace}})
            if status != 201:
                raise RuntimeError(f"creating namespace {self.namespace} in {name}: {status} {answer}")
            for index in range(self.nodes_per_member):
                self._make_node(plane, f"{short}-n{index}-{self.tag}")
            api_proxy = self.proxies.start(FaultProxy(plane))
            kubeconfig = api_proxy.write_kubeconfig(self.workdir / name / "member.kubeconfig", user="admin")
            agent = AgentProcess(
                name,
                kubeconfig,
                self.workdir / name,
                namespace=self.agent_namespace,
                request_timeout=settings.request_timeout,
                in_flight_seconds=settings.in_flight_seconds,
                sweep_interval=settings.sweep_interval,
            )
            agent.start()
            agent_proxy = self.proxies.start(
                FaultProxy(upstream=agent.url, upstream_ca=agent.ca_file, server_ssl=agent.server_ssl())
            )
            self.members[short] = Member(name, plane, agent, api_proxy, agent_proxy)
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"agent-{name}", "namespace": self.namespace},
                "data": {"token": base64.b64encode(agent.token.encode()).decode()},
            }
            self._create(f"/api/v1/namespaces/{self.namespace}/secrets", secret)
            connection = {
                "agent": {
                    "url": agent_proxy.url,
                    "caBundle": base64.b64encode(agent.ca_file.read_bytes()).decode(),
                    "tokenSecretRef": {"namespace": self.namespace, "name": f"agent-{name}"},
                }
            }
            member_cluster = {
                "apiVersion": "multicluster.kubesched.io/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {"name": name, "labels": {"e2e": self.tag}},
                "spec": {"connection": connection},
            }
            self._create(MC_PATH, member_cluster)

    def _create(self, path: str, obj: Mapping[str, Any]) -> None:
        status, answer = self.hub_plane.request("POST", path, obj)
        if status != 201:
            raise RuntimeError(f"creating {obj['kind']} {obj['metadata']['name']}: {status} {answer}")

    def _make_node(self, plane: ControlPlane, name: str) -> None:
        capacity = {"cpu": self.node_cpu, "memory": "64Gi", "pods": str(self.node_pods)}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"e2e": self.tag}},
            "status": {"capacity": capacity, "allocatable": capacity},
        }
        status, answer = plane.request("POST", "/api/v1/nodes", node)
        if status != 201:
            raise RuntimeError(f"creating node {name}: {status} {answer}")

    def hub_config(self) -> dict[str, Any]:
        settings = self.settings
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"qps": 500, "burst": 1000},
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": settings.max_backoff_seconds,
            "leaderElection": {
                "leaderElect": settings.leader_elect,
                "leaseDuration": settings.lease_duration,
                "renewDeadline": settings.renew_deadline,
                "retryPeriod": settings.retry_period,
                "resourceName": "kubesched-hub",
                "resourceNamespace": self.namespace,
            },
            "profiles": [
                {
                    "schedulerName": self.scheduler_name,
                    "plugins": HUB_PLUGINS,
                    "pluginConfig": [
                        {
                            "name": "ClusterReservation",
                            "args": {
                                "ttlSeconds": settings.ttl_seconds,
                                "permitTimeoutSeconds": settings.permit_timeout_seconds,
                                "reserveTimeoutSeconds": settings.reserve_timeout_seconds,
                                "suspectSeconds": settings.suspect_seconds,
                            },
                        },
                        {
                            "name": "ClusterBind",
                            "args": {
                                "bindTimeoutSeconds": settings.bind_timeout_seconds,
                                "bindAttempts": settings.bind_attempts,
                            },
                        },
                    ],
                }
            ],
        }

    def hub(self, hostname: str, *, audit: bool = True) -> HubProcess:
        """A hub replica (not started); its audit log is ``audit-<hostname>.jsonl`` in the workdir."""
        process = HubProcess(
            hostname,
            self.config_path,
            self.hub_kubeconfig,
            self.workdir,
            refresh_interval=self.settings.refresh_interval,
            audit_log=self.workdir / f"audit-{hostname}.jsonl" if audit else None,
        )
        self.hubs.append(process)
        return process

    def close(self) -> None:
        """Stop every process this federation started and remove what it made in the control planes."""
        for hub in self.hubs:
            hub.terminate()
        for member in self.members.values():
            member.agent.terminate()
        for member in self.members.values():
            plane = member.plane
            try:
                plane.request("DELETE", f"/api/v1/namespaces/{self.namespace}/pods", query={"gracePeriodSeconds": "0"})
                plane.request("DELETE", f"/api/v1/namespaces/{self.namespace}")
                plane.request("DELETE", f"/api/v1/namespaces/{self.agent_namespace}")
                plane.request("DELETE", "/api/v1/nodes", query={"labelSelector": f"e2e={self.tag}"})
            except OSError:  # a member left stopped by its test has nothing to clean
                continue
        self.hub_plane.request("DELETE", MC_PATH, query={"labelSelector": f"e2e={self.tag}"})
        self.corner.cleanup()

    # ------------------------------------------------------------------------------------------------ pods

    def pod(self, name: str, cpu: str = "100m") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "schedulerName": self.scheduler_name,
                "nodeSelector": {"e2e": self.tag},
                "containers": [
                    {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        }

    def create_pod(self, name: str, cpu: str = "100m") -> str:
        """Create hub pod ``name``; its uid."""
        status, answer = self.hub_plane.request(
            "POST", f"/api/v1/namespaces/{self.namespace}/pods", self.pod(name, cpu)
        )
        if status != 201:
            raise RuntimeError(f"creating hub pod {name}: {status} {answer}")
        return str(answer["metadata"]["uid"])

    def delete_pod(self, name: str) -> None:
        """Delete hub pod ``name`` as a user would (gracefully); its uid counts as deleted."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
        status, answer = self.hub_plane.request("GET", path)
        if status != 200:
            return
        self.deleted.add(str(answer["metadata"]["uid"]))
        self.hub_plane.request("DELETE", path)

    def hub_pods(self) -> dict[str, HubPodView]:
        status, answer = self.hub_plane.request("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        if status != 200:
            raise RuntimeError(f"listing hub pods: {status} {answer}")
        found = {}
        for item in answer["items"]:
            metadata = item["metadata"]
            found[metadata["uid"]] = HubPodView(
                metadata["uid"],
                metadata["name"],
                str(item["spec"].get("nodeName") or ""),
                bool(metadata.get("deletionTimestamp")),
                dict(metadata.get("annotations") or {}),
            )
        return found

    def bound(self) -> dict[str, str]:
        """Hub pod name -> the cluster it is bound to, for the bound ones."""
        return {pod.name: pod.node for pod in self.hub_pods().values() if pod.node}

    # ------------------------------------------------------------------------------------------- members

    def member_pods(self, short: str) -> list[MemberPodView]:
        plane = self.members[short].plane
        status, answer = plane.request("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        if status != 200:
            raise RuntimeError(f"listing the pods of {short}: {status} {answer}")
        found = []
        for item in answer["items"]:
            metadata = item["metadata"]
            requests = pod_requests(Pod.from_dict(item, f"member pod {metadata['name']}"))
            found.append(
                MemberPodView(
                    metadata["name"],
                    str((metadata.get("annotations") or {}).get(HUB_POD_UID_ANNOTATION) or ""),
                    str(item["spec"].get("nodeName") or ""),
                    requests,
                    bool(metadata.get("deletionTimestamp")),
                    (item.get("status") or {}).get("phase") in TERMINAL,
                )
            )
        return found

    def reservations(self, short: str) -> list[ReservationView]:
        plane = self.members[short].plane
        status, answer = plane.request(
            "GET",
            f"/api/v1/namespaces/{self.agent_namespace}/configmaps",
            query={"labelSelector": f"{RESERVATION_LABEL}=true"},
        )
        if status == 404:
            return []
        if status != 200:
            raise RuntimeError(f"listing the reservations of {short}: {status} {answer}")
        found = []
        for item in answer["items"]:
            data = item.get("data") or {}
            found.append(
                ReservationView(
                    item["metadata"]["name"],
                    str(data.get("node", "")),
                    str(data.get("podUID", "")),
                    {str(k): int(v) for k, v in json.loads(data.get("requests") or "{}").items()},
                    float(data.get("expiresAt") or 0.0),
                )
            )
        return found

    def allocatable(self, short: str) -> dict[str, dict[str, int]]:
        plane = self.members[short].plane
        status, answer = plane.request("GET", "/api/v1/nodes", query={"labelSelector": f"e2e={self.tag}"})
        if status != 200:
            raise RuntimeError(f"listing the nodes of {short}: {status} {answer}")
        return {
            item["metadata"]["name"]: {
                name: to_canonical(name, str(amount))
                for name, amount in (item.get("status") or {}).get("allocatable", {}).items()
            }
            for item in answer["items"]
        }

    def cordon(self, short: str) -> None:
        """Mark every node of member ``short`` unschedulable: it takes no new pod (its pods stay)."""
        plane = self.members[short].plane
        for node in self.allocatable(short):
            status, answer = plane.request(
                "PATCH",
                f"/api/v1/nodes/{node}",
                {"spec": {"unschedulable": True}},
                content_type="application/merge-patch+json",
            )
            if status != 200:
                raise RuntimeError(f"cordoning node {node} of {short}: {status} {answer}")

    def snapshot(self) -> FederationSnapshot:
        """Members first (pods, then reservations: a bind between the two reads is counted once at most), then
        the hub."""
        members = {}
        for short, member in sorted(self.members.items()):
            pods = self.member_pods(short)
            members[member.name] = MemberSnapshot(pods, self.allocatable(short), self.reservations(short))
        taken_at = time.time()
        return FederationSnapshot(self.hub_pods(), members, taken_at)

    def violations(self, *, settled: bool) -> list[str]:
        return commit_violations(
            self.snapshot(), settled=settled, reservation_grace=self.settings.reservation_grace, deleted=self.deleted
        )

    def logs(self) -> str:
        parts = [hub.output() for hub in self.hubs]
        parts += [member.agent.output() for member in self.members.values()]
        return "\n".join(parts)

    def wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``check`` until it holds; else fail saying ``what``, with the processes' logs."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout:g} s\n{self.logs()}")
            time.sleep(0.2)

    def audit_records(self, hub: HubProcess) -> list[dict[str, Any]]:
        """The audit records ``hub`` wrote (a line cut short by a SIGKILL is left out)."""
        if hub.audit_log is None or not hub.audit_log.exists():
            return []
        records = []
        for line in hub.audit_log.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records
