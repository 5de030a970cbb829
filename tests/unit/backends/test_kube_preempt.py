"""KubeBackend's evictions against the scripted API server: the DisruptionTarget status patch (skipped when the
victim says so already), then the UID-preconditioned DELETE; a victim that is gone (404) at either step is
evicted as far as the preemptor is concerned; any other answer is an ApiError; clearing a nomination."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from aiohttp import web
from kubetest_apiserver import ApiServer, FakeTime, Seen, ok, pod, status

from kubesched.api.objects import Pod
from kubesched.backends.kube.backend import KubeBackend, disruption_target_condition
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.errors import KubeApiError
from kubesched.clock import VirtualClock

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]

START = 1_700_000_000.0  # 2023-11-14T22:13:20Z
VICTIM_PATH = "/api/v1/namespaces/apps/pods/batch-1"


def victim(**status: Any) -> Pod:
    raw = pod("batch-1", "3", namespace="apps", node="node-a")
    raw["status"].update(status)
    return Pod.from_dict(raw, "pods apps/batch-1")


PREEMPTOR = Pod.from_dict(pod("urgent", "4", namespace="apps", schedulerName="kubesched"), "pods apps/urgent")
CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "kubesched: preempting to accommodate a higher priority pod",
    "lastProbeTime": None,
    "lastTransitionTime": "2023-11-14T22:13:20Z",
}


async def evict(answers: dict[str, int], target: Pod) -> list[tuple[str, str, Any]]:
    """Run KubeBackend.preempt against a server answering ``answers`` (method -> code, 0 = success)."""

    async def handle(request: web.Request, seen: Seen) -> web.StreamResponse:
        code = answers.get(seen.method, 0)
        if code:
            return status(code, f"answered {code}", "NotFound" if code == 404 else "")
        return ok({})

    async with ApiServer(handle) as server:
        client = KubeClient(server.connection(), max_retries=0, sleep=FakeTime().sleep)
        try:
            backend = KubeBackend(client, ["kubesched"], clock=VirtualClock(START))
            await backend.preempt(target, PREEMPTOR)
        finally:
            await client.aclose()
        return [(s.method, s.path, s.body) for s in server.seen]


def test_preempt_patches_the_condition_then_deletes_with_the_uid(run_async: RunAsync[Any]) -> None:
    seen = run_async(evict({}, victim()))
    assert seen == [
        ("PATCH", VICTIM_PATH + "/status", {"status": {"conditions": [CONDITION]}}),
        (
            "DELETE",
            VICTIM_PATH,
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "uid-batch-1"}},
        ),
    ]


def test_a_victim_that_has_the_condition_already_is_only_deleted(run_async: RunAsync[Any]) -> None:
    marked = victim(conditions=[{k: v for k, v in CONDITION.items() if not k.startswith("last")}])
    seen = run_async(evict({}, marked))
    assert [method for method, _, _ in seen] == ["DELETE"]


@pytest.mark.parametrize(
    ("answers", "methods"),
    [
        pytest.param({"PATCH": 404}, ["PATCH"], id="gone-before-the-patch"),
        pytest.param({"DELETE": 404}, ["PATCH", "DELETE"], id="gone-before-the-delete"),
    ],
)
def test_a_victim_already_gone_is_evicted(
    answers: dict[str, int], methods: list[str], run_async: RunAsync[Any]
) -> None:
    assert [method for method, _, _ in run_async(evict(answers, victim()))] == methods


@pytest.mark.parametrize("answers", [{"PATCH": 403}, {"DELETE": 409}], ids=["forbidden-patch", "uid-conflict"])
def test_other_failures_raise_api_errors(answers: dict[str, int], run_async: RunAsync[Any]) -> None:
    with pytest.raises(KubeApiError):
        run_async(evict(answers, victim()))


def test_the_condition_keeps_its_transition_time_and_names_the_generation() -> None:
    earlier = {**CONDITION, "status": "True", "message": "other", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    raw = pod("batch-1", "3", namespace="apps", node="node-a")
    raw["metadata"]["generation"] = 4
    raw["status"]["conditions"] = [earlier]
    condition = disruption_target_condition(Pod.from_dict(raw, "pod"), PREEMPTOR, "2023-11-14T22:13:20Z")
    assert condition is not None
    assert condition["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert condition["observedGeneration"] == 4
    assert condition["message"] == CONDITION["message"]


def test_clear_nominated_node_name_patches_only_a_nominated_pod(run_async: RunAsync[Any]) -> None:
    async def scenario() -> list[tuple[str, str, Any]]:
        async def handle(request: web.Request, seen: Seen) -> web.StreamResponse:
            return ok({})

        async with ApiServer(handle) as server:
            client = KubeClient(server.connection(), max_retries=0, sleep=FakeTime().sleep)
            try:
                backend = KubeBackend(client, ["kubesched"])
                nominated = pod("waiting", "5", namespace="apps")
                nominated["status"]["nominatedNodeName"] = "node-a"
                await backend.clear_nominated_node_name(Pod.from_dict(nominated, "pod"))
                await backend.clear_nominated_node_name(PREEMPTOR)
            finally:
                await client.aclose()
            return [(s.method, s.path, s.body) for s in server.seen]

    assert run_async(scenario()) == [
        ("PATCH", "/api/v1/namespaces/apps/pods/waiting/status", {"status": {"nominatedNodeName": None}})
    ]
