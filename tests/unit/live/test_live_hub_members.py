"""The live hub's members without an API server: the status it writes, the super node events, bad connections."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from kubesched.api.multicluster import MemberClusterStatus
from kubesched.api.objects import Node, Pod, Taint
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.kubeconfig import ClusterConnection
from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import ClusterState, NodeBucket
from kubesched.federation.cache import ClusterStateCache, MemberHealth, MemberRefresh
from kubesched.framework.events import EventResource
from kubesched.live.hub_backend import SuperNodes
from kubesched.live.member_status import member_status
from kubesched.live.members import ConnectionProblem, MemberLink
from kubesched.testing.multicluster_builders import make_member

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]

STATE = ClusterState(
    name="east",
    ready=True,
    allocatable={"cpu": 4000, "memory": 8 * 2**30, "pods": 110},
    allocated={"cpu": 1000, "pods": 1},
    nodes=(NodeBucket(2, {"cpu": 1500, "pods": 54}), NodeBucket(1, {"cpu": 500}, (Taint("gpu", "", "NoSchedule"),))),
    apis=frozenset({"v1/Pod", "apps/v1/Deployment"}),
)
OK = MemberHealth(refreshes=3, last_success_at=100.0)
FAILING = MemberHealth(refreshes=3, failures=2, consecutive_failures=2, last_error="agent x: refused")


@pytest.mark.parametrize(
    ("state", "health", "problem", "expected"),
    [
        pytest.param(STATE, OK, None, ("True", "MemberReady"), id="answering-and-ready"),
        pytest.param(STATE, FAILING, None, ("Unknown", "MemberUnreachable"), id="failing-after-answering"),
        pytest.param(
            STATE, MemberHealth(failures=1, consecutive_failures=1), None, ("False", "MemberUnreachable"), id="never"
        ),
        pytest.param(None, MemberHealth(), None, ("False", "NotYetObserved"), id="not-yet-asked"),
        pytest.param(
            ClusterState(name="east", ready=False, ready_reason="no nodes"),
            OK,
            None,
            ("False", "MemberNotReady"),
            id="member-not-ready",
        ),
        pytest.param(None, None, ("SecretNotFound", "spec.connection.x: gone"), ("False", "SecretNotFound"), id="bad"),
    ],
)
def test_the_status_reads_back_as_the_loader_reads_it(
    state: ClusterState | None, health: MemberHealth | None, problem: tuple[str, str] | None, expected: tuple[str, str]
) -> None:
    body = member_status(state, health, problem=problem)
    condition = body["conditions"][0]
    assert (condition["status"], condition["reason"]) == expected
    # What the hub writes, its own informer must read (else the member would vanish from the hub).
    read = MemberClusterStatus.from_dict({k: v for k, v in body.items() if v is not None}, "written status")
    assert read.ready is (expected[0] == "True")


def test_the_status_gives_the_member_figures_in_the_crd_shapes() -> None:
    body = member_status(STATE, OK)
    assert body["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert body["allocated"] == {"cpu": "1", "pods": "1"}
    assert body["nodeSummary"] == [
        {"count": 2, "free": {"cpu": "1500m", "pods": "54"}},
        {"count": 1, "free": {"cpu": "500m"}, "taints": [{"key": "gpu", "value": "", "effect": "NoSchedule"}]},
    ]
    read = MemberClusterStatus.from_dict({k: v for k, v in body.items() if v is not None}, "written status")
    assert read.node_summary is not None and read.node_summary[1].taints == (Taint("gpu", "", "NoSchedule"),)
    assert body["apiEnablements"] == [
        {"groupVersion": "apps/v1", "resources": [{"kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [{"kind": "Pod"}]},
    ]
    read = MemberClusterStatus.from_dict({k: v for k, v in body.items() if v is not None}, "written status")
    assert read.allocatable == STATE.allocatable


class Recorder:
    """The scheduler's event handler, as a log of calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_node_add(self, node: Node) -> None:
        self.calls.append(("node add", node.metadata.name))

    def on_node_update(self, old: Node, new: Node) -> None:
        self.calls.append(("node update", new.metadata.name))

    def on_node_delete(self, node: Node) -> None:
        self.calls.append(("node delete", node.metadata.name))

    def on_pod_add(self, pod: Pod) -> None:
        self.calls.append(("pod add", pod.metadata.name))

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.calls.append(("pod update", new.metadata.name))

    def on_pod_delete(self, pod: Pod) -> None:
        self.calls.append(("pod delete", pod.metadata.name))

    def on_object_event(self, resource: EventResource, action: Any, old: object, new: object) -> None:
        self.calls.append(("object", resource.value))


class Answers:
    def __init__(self) -> None:
        self.state = STATE


def test_super_nodes_tell_the_scheduler_only_what_changed(run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[tuple[str, str]]:
        answers = Answers()

        class Fetcher:
            async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState:
                return answers.state

        cache = ClusterStateCache([], clock=VirtualClock())
        nodes = SuperNodes(cache)
        recorder = Recorder()
        nodes.attach(recorder)
        cache.add(MemberRefresh("east", Fetcher()))
        nodes.member_changed(make_member("east").region("east").obj())  # not yet observed: no capacity
        await cache.refresh("east")
        nodes.recompute("east")  # observed: its capacity, and the placeholder of its allocated capacity
        await cache.refresh("east")
        nodes.recompute("east")  # the same state again: nothing to tell
        answers.state = ClusterState(name="east", ready=True, allocatable=dict(STATE.allocatable))
        await cache.refresh("east")
        nodes.recompute("east")  # nothing allocated: the placeholder goes (the free pod slots are the same)
        nodes.member_removed("east")
        return recorder.calls

    assert run_async(scenario()) == [
        ("node add", "east"),
        ("node update", "east"),
        ("pod add", "east-allocated"),
        ("pod delete", "east-allocated"),
        ("node delete", "east"),
    ]


@pytest.mark.parametrize(
    ("kubeconfig", "field"),
    [
        pytest.param(b"users: [{name: u, user: {exec: {command: sh}}}]", "users[u].user.exec", id="exec-plugin"),
        pytest.param(b"users: [{name: u, user: {tokenFile: /etc/t}}]", "users[u].user.tokenFile", id="token-file"),
        pytest.param(
            b"clusters: [{name: c, cluster: {certificate-authority: /ca}}]",
            "clusters[c].cluster.certificate-authority",
            id="ca-file",
        ),
    ],
)
def test_a_kubeconfig_secret_must_embed_its_credentials(kubeconfig: bytes, field: str) -> None:
    link = MemberLink.__new__(MemberLink)  # only the check: no client needed
    link.name = "west"
    with pytest.raises(ConnectionProblem) as caught:
        link._check_embedded(kubeconfig)
    assert caught.value.reason == "UnsafeKubeconfig"
    assert str(caught.value).startswith(f"spec.connection.kubeconfigSecretRef.key: {field}: not allowed")


def test_a_member_without_a_connection_says_which_field_is_missing(run_async: RunAsync[Any]) -> None:
    async def scenario() -> ConnectionProblem:
        hub = KubeClient(ClusterConnection(server="https://127.0.0.1:1", source="test"))
        link = MemberLink("east", None, hub, clock=VirtualClock())
        try:
            with pytest.raises(ConnectionProblem) as caught:
                await link.state("east")
            return caught.value
        finally:
            await link.aclose()
            await hub.aclose()

    problem = run_async(scenario())
    assert (problem.reason, problem.field) == ("NoConnection", "spec.connection")
