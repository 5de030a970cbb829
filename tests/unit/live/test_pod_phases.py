"""The live hub's phase mirror without an API server: which hub pods are written, once, and again after a failure."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.api.objects import Pod
from kubesched.backends.kube.errors import KubeApiError
from kubesched.clusterapi.contract import ClusterState
from kubesched.live.pod_phases import PhaseMirror
from kubesched.testing.builders import make_pod


class Patches:
    """A stand-in API server that records each PATCH, or fails the next ones with ``failing``."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.failing: list[KubeApiError] = []

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str = "", retry: bool = True
    ) -> Any:
        assert (method, content_type) == ("PATCH", "application/merge-patch+json")
        if self.failing:
            raise self.failing.pop(0)
        self.sent.append((path, body))
        return {}


def hub_pod(name: str, phase: str = "Pending") -> Pod:
    pod = make_pod(name).namespace("apps").node_name("east").obj()
    return Pod.from_dict({**pod.raw, "status": {"phase": phase}}, name)


def state(**phases: str) -> ClusterState:
    return ClusterState(
        name="east", ready=True, pod_phases={hub_pod(name).metadata.uid: p for name, p in phases.items()}
    )


def offered(mirror: PhaseMirror, member: ClusterState, pods: list[Pod]) -> None:
    async def offer() -> None:
        mirror.offer(member, pods)
        await asyncio.sleep(0)  # the writes run
        await asyncio.sleep(0)

    asyncio.run(offer())


def test_a_hub_pod_takes_a_later_member_phase_once_and_never_leaves_a_terminal_one() -> None:
    client = Patches()
    mirror = PhaseMirror(client)
    member = state(web="Running", job="Succeeded", new="Pending", odd="Unknown", done="Running")
    pods = [hub_pod("web"), hub_pod("job", "Running"), hub_pod("new"), hub_pod("odd"), hub_pod("done", "Failed")]
    offered(mirror, member, pods)
    assert client.sent == []  # not leading: no write
    mirror.leading = True
    offered(mirror, member, pods)
    web, job = pods[0].metadata.uid, pods[1].metadata.uid
    assert sorted(client.sent) == [
        ("/api/v1/namespaces/apps/pods/job/status", {"metadata": {"uid": job}, "status": {"phase": "Succeeded"}}),
        ("/api/v1/namespaces/apps/pods/web/status", {"metadata": {"uid": web}, "status": {"phase": "Running"}}),
    ]
    offered(mirror, member, pods)  # refreshed before the watch brought the writes: nothing again
    assert len(client.sent) == 2
    offered(mirror, member, [hub_pod("web", "Running"), hub_pod("job", "Succeeded")])
    offered(mirror, state(web="Succeeded"), [hub_pod("web", "Running")])  # and on to the next phase
    assert client.sent[-1][1]["status"] == {"phase": "Succeeded"}
    assert (mirror.written, mirror.failed) == (3, 0)


def test_a_failed_write_is_tried_again_at_the_next_refresh() -> None:
    client = Patches()
    client.failing = [KubeApiError(500, "InternalError", "etcd timed out")]
    mirror = PhaseMirror(client)
    mirror.leading = True
    offered(mirror, state(web="Running"), [hub_pod("web")])
    assert (client.sent, mirror.failed) == ([], 1)
    offered(mirror, state(web="Running"), [hub_pod("web")])
    assert [body["status"] for _, body in client.sent] == [{"phase": "Running"}]
