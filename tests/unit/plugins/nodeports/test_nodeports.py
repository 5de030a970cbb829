"""NodePorts against node_ports_test.go (TestNodePorts, TestPreFilterDisabled,
Test_isSchedulableAfterPodDeleted), per node and in batch."""

from __future__ import annotations

import pytest

from kubesched.api.objects import Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.nodeports import NodePorts
from kubesched.plugins.nodeports.node_ports import ERR_REASON
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch, make_cluster

CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON)


def port_pod(*ports: str, name: str = "pod", node: str = "") -> Pod:
    """upstream newPod(host, "PROTO/IP/PORT", ...)."""
    builder = make_pod(name)
    for spec in ports:
        protocol, ip, port = spec.split("/")
        builder.host_port(int(port), protocol=protocol, host_ip=ip)
    if node:
        builder.node_name(node)
    return builder.obj()


def test_prefilter_skips_pods_without_host_ports() -> None:
    assert NodePorts(None, PluginHandle()).pre_filter(CycleState(), PodInfo(make_pod().obj()), ()) == Status(Code.SKIP)


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(port_pod("UDP/127.0.0.1/8080"), ["UDP/127.0.0.1/9090"], None, id="other-port"),
        pytest.param(port_pod("UDP/127.0.0.1/8080"), ["UDP/127.0.0.1/8080"], CONFLICT, id="same-udp-port"),
        pytest.param(port_pod("TCP/127.0.0.1/8080"), ["TCP/127.0.0.1/8080"], CONFLICT, id="same-tcp-port"),
        pytest.param(port_pod("TCP/127.0.0.1/8080"), ["TCP/127.0.0.2/8080"], None, id="different-host-ip"),
        pytest.param(port_pod("UDP/127.0.0.1/8080"), ["TCP/127.0.0.1/8080"], None, id="different-protocol"),
        pytest.param(
            port_pod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
            ["UDP/127.0.0.1/8080"],
            CONFLICT,
            id="second-udp-port-conflict",
        ),
        pytest.param(
            port_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
            CONFLICT,
            id="first-tcp-port-conflict",
        ),
        pytest.param(
            port_pod("TCP/0.0.0.0/8001"), ["TCP/127.0.0.1/8001"], CONFLICT, id="conflict-due-to-0.0.0.0-host-ip"
        ),
        pytest.param(
            port_pod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
            ["TCP/127.0.0.1/8001"],
            CONFLICT,
            id="tcp-host-port-conflict-due-to-0.0.0.0-host-ip",
        ),
        pytest.param(
            port_pod("TCP/127.0.0.1/8001"), ["TCP/0.0.0.0/8001"], CONFLICT, id="second-tcp-port-conflict-to-0.0.0.0"
        ),
        pytest.param(port_pod("UDP/127.0.0.1/8001"), ["TCP/0.0.0.0/8001"], None, id="second-different-protocol"),
        pytest.param(
            port_pod("UDP/127.0.0.1/8001"),
            ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
            CONFLICT,
            id="udp-host-port-conflict-due-to-0.0.0.0-host-ip",
        ),
    ],
)
def test_node_ports(pod: Pod, existing: list[str], want: Status | None) -> None:
    cache, snapshot = make_cluster([make_node("m1").obj()], [port_pod(*existing, name="existing", node="m1")])
    plugin = NodePorts(None, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(pod)
    assert plugin.pre_filter(state, info, snapshot.node_infos) is None
    assert filter_nodes(plugin, state, info, snapshot) == [want]
    assert filter_nodes_batch(plugin, state, info, snapshot) == [want]


def test_filter_without_prefilter_is_an_error_on_both_paths() -> None:
    cache, snapshot = make_cluster([make_node().obj()])
    plugin = NodePorts(None, PluginHandle(cache))
    info = PodInfo(port_pod("TCP/127.0.0.1/80"))
    (per_node,) = filter_nodes(plugin, CycleState(), info, snapshot)
    (batch,) = filter_nodes_batch(plugin, CycleState(), info, snapshot)
    assert per_node is not None and per_node.code is Code.ERROR
    assert batch == per_node


WANTS_8080 = make_pod("target").host_port(8080).obj()


@pytest.mark.parametrize(
    ("old", "want"),
    [
        pytest.param("not-a-pod", QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(make_pod("p").obj(), QueueingHint.SKIP, id="skip-queue-on-unscheduled"),
        pytest.param(make_pod("p").node_name("fake-node").obj(), QueueingHint.SKIP, id="skip-queue-on-non-hostport"),
        pytest.param(
            make_pod("p").node_name("fake-node").host_port(8081).obj(),
            QueueingHint.SKIP,
            id="skip-queue-on-unrelated-hostport",
        ),
        pytest.param(
            make_pod("p").node_name("fake-node").host_port(8080).obj(),
            QueueingHint.QUEUE,
            id="queue-on-released-hostport",
        ),
        pytest.param(
            make_pod("p").nominated("fake-node").host_port(8080).obj(),
            QueueingHint.QUEUE,
            id="queue-on-released-hostport-of-nominated-pod",
        ),
    ],
)
def test_is_schedulable_after_pod_deleted(old: object, want: QueueingHint) -> None:
    plugin = NodePorts(None, PluginHandle())
    assert plugin.is_schedulable_after_pod_deleted(WANTS_8080, old, None) is want  # type: ignore[arg-type]


def _with_init_port(*, sidecar: bool) -> Pod:
    raw = make_pod("p").raw()
    init: dict[str, object] = {"name": "init", "image": "x", "ports": [{"containerPort": 53, "hostPort": 53}]}
    if sidecar:
        init["restartPolicy"] = "Always"
    raw["spec"]["initContainers"] = [init]
    return Pod.from_dict(raw, "test")


def test_regular_init_container_host_ports_are_not_wanted() -> None:
    state = CycleState()
    assert NodePorts(None, PluginHandle()).pre_filter(state, PodInfo(_with_init_port(sidecar=False)), ()) == Status(
        Code.SKIP
    )


def test_sidecar_host_ports_are_wanted() -> None:
    cache, snapshot = make_cluster([make_node("m1").obj()], [port_pod("TCP/0.0.0.0/53", name="dns", node="m1")])
    plugin = NodePorts(None, PluginHandle(cache))
    state = CycleState()
    info = PodInfo(_with_init_port(sidecar=True))
    assert plugin.pre_filter(state, info, snapshot.node_infos) is None
    assert filter_nodes(plugin, state, info, snapshot) == [CONFLICT]
    assert filter_nodes_batch(plugin, state, info, snapshot) == [CONFLICT]
