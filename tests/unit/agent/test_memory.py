"""The in-memory member API (the API server's semantics the agent relies on), and the cluster agent on it:
reserving, binding and expiring as tests/e2e/test_agent.py sees it do against a real kube-apiserver."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.agent.core import Agent, Refused
from kubesched.agent.memory import InMemoryMember
from kubesched.api.objects import Toleration
from kubesched.backends.kube.errors import KubeApiError
from kubesched.clock import VirtualClock
from kubesched.federation.wire import ReservationRequest

NS = "kubesched-system"
CM = f"/api/v1/namespaces/{NS}/configmaps"


def node(name: str, cpu: str = "2", pods: str = "10", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {"capacity": {"cpu": cpu, "memory": "4Gi", "pods": pods}},
    }


def hub_pod(name: str, cpu: str = "1", uid: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": uid or f"hub-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
            "nodeSelector": {"topology.kubernetes.io/region": "eu"},
        },
    }


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def status_of(error: pytest.ExceptionInfo[KubeApiError]) -> tuple[int, str]:
    return error.value.status, error.value.reason


# ------------------------------------------------------------------------------------------------ the API


def test_create_stamps_uid_and_a_rising_resource_version_and_refuses_an_existing_name() -> None:
    member = InMemoryMember()
    member.add_namespace(NS)
    first = run(member.request("POST", CM, body={"metadata": {"name": "a"}, "data": {}}))
    second = run(member.request("POST", CM, body={"metadata": {"name": "b"}}))
    assert first["metadata"]["uid"] and first["metadata"]["uid"] != second["metadata"]["uid"]
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert (first["metadata"]["namespace"], first["kind"]) == (NS, "ConfigMap")
    with pytest.raises(KubeApiError) as exists:
        run(member.request("POST", CM, body={"metadata": {"name": "a"}}))
    assert status_of(exists) == (409, "AlreadyExists")


def test_the_stored_object_is_a_copy_of_the_body() -> None:
    member = InMemoryMember()
    member.add_namespace(NS)
    body: dict[str, Any] = {"metadata": {"name": "a"}, "data": {"k": "v"}}
    run(member.request("POST", CM, body=body))
    body["data"]["k"] = "changed"
    assert run(member.request("GET", f"{CM}/a"))["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", f"{CM}/missing", id="get-missing"),
        pytest.param("DELETE", f"{CM}/missing", id="delete-missing"),
        pytest.param("POST", "/api/v1/namespaces/nowhere/configmaps", id="create-in-a-missing-namespace"),
        pytest.param("GET", "/api/v1/namespaces/nowhere", id="get-a-missing-namespace"),
        pytest.param("GET", "/api/v1/secrets", id="a-kind-it-does-not-serve"),
        pytest.param("GET", "/apis/apps/v1", id="a-group-it-does-not-serve"),
    ],
)
def test_what_is_not_there_is_404(method: str, path: str) -> None:
    member = InMemoryMember()
    member.add_namespace(NS)
    with pytest.raises(KubeApiError) as missing:
        run(member.request(method, path, body={"metadata": {"name": "x"}}))
    assert status_of(missing) == (404, "NotFound")


def test_delete_removes_and_bumps_the_resource_version() -> None:
    member = InMemoryMember()
    member.add_namespace(NS)
    run(member.request("POST", CM, body={"metadata": {"name": "a"}}))
    before = member.resource_version
    run(member.request("DELETE", f"{CM}/a"))
    assert member.resource_version == before + 1
    assert run(member.request("GET", CM))["items"] == []


def test_a_delete_with_a_uid_precondition_that_does_not_hold_is_409() -> None:
    member = InMemoryMember()
    member.add_namespace(NS)
    created = run(member.request("POST", CM, body={"metadata": {"name": "a"}}))
    with pytest.raises(KubeApiError) as stale:
        run(member.request("DELETE", f"{CM}/a", body={"preconditions": {"uid": "someone-else"}}))
    assert status_of(stale) == (409, "Conflict")
    run(member.request("DELETE", f"{CM}/a", body={"preconditions": {"uid": created["metadata"]["uid"]}}))
    assert member.configmaps(NS) == []


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        pytest.param("role=hold", ["a"], id="equals"),
        pytest.param("role==hold", ["a"], id="double-equals"),
        pytest.param("role!=hold", ["b", "c"], id="not-equals-includes-unlabelled"),
        pytest.param("role", ["a", "b"], id="exists"),
        pytest.param("!role", ["c"], id="does-not-exist"),
        pytest.param("role=hold,tier=x", [], id="all-terms-must-hold"),
        pytest.param("", ["a", "b", "c"], id="empty-selects-all"),
    ],
)
def test_label_selector_lists(selector: str, names: list[str]) -> None:
    member = InMemoryMember()
    member.add_namespace(NS)
    for name, labels in (("a", {"role": "hold"}), ("b", {"role": "other"}), ("c", {})):
        run(member.request("POST", CM, body={"metadata": {"name": name, "labels": labels}}))
    listed = run(member.request("GET", CM, query={"labelSelector": selector}))
    assert [item["metadata"]["name"] for item in listed["items"]] == names


def test_pods_listed_across_namespaces_by_node_name_field() -> None:
    member = InMemoryMember()
    for ns in ("a", "b"):
        member.add_namespace(ns)
    run(
        member.request("POST", "/api/v1/namespaces/a/pods", body={"metadata": {"name": "p"}, "spec": {"nodeName": "n"}})
    )
    run(member.request("POST", "/api/v1/namespaces/b/pods", body={"metadata": {"name": "q"}, "spec": {}}))
    bound = run(member.request("GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName!="}))
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in bound["items"]] == [("a", "p")]
    assert bound["items"][0]["status"]["phase"] == "Pending"  # as the API server defaults a new pod
    with pytest.raises(KubeApiError) as bad:
        run(member.request("GET", "/api/v1/pods", query={"fieldSelector": "spec.schedulerName=x"}))
    assert status_of(bad) == (400, "BadRequest")


# ------------------------------------------------------------------------------------------- the agent on it


def agent_on(*nodes: dict[str, Any]) -> tuple[Agent, InMemoryMember, VirtualClock]:
    member = InMemoryMember("m1")
    for spec in nodes:
        member.add_node(spec)
    member.add_namespace("apps")
    clock = VirtualClock()
    agent = Agent(member, clock=clock, namespace=NS, cluster_name="m1")
    run(agent.ensure_namespace())
    run(agent.ensure_namespace())  # a second time: the namespace exists (409 on create is taken as done)
    return agent, member, clock


def test_the_agent_reserves_first_fit_by_node_name_idempotently_and_refuses_what_does_not_fit() -> None:
    agent, member, _ = agent_on(node("n2", cpu="4"), node("n1", cpu="1"), node("n0", cpu="8", unschedulable=True))

    async def scenario() -> None:
        held, created = await agent.reserve(ReservationRequest("r1", {"cpu": 2000}, 60, "p1"))
        assert (held.node, created) == ("n2", True)  # n0 is cordoned, n1 too small
        again, created = await agent.reserve(ReservationRequest("r1", {"cpu": 2000}, 60, "p1"))
        assert (again, created) == (held, False)
        with pytest.raises(Refused) as conflict:
            await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 60, "p1"))
        assert conflict.value.reason == "Conflict"
        with pytest.raises(Refused) as unfit:
            await agent.reserve(ReservationRequest("r2", {"cpu": 3000}, 60))
        assert (unfit.value.status, unfit.value.reason) == (409, "Unfit")
        state, live = await agent.state()
        assert state.allocated == {"cpu": 2000, "pods": 1}
        assert state.accounted_pods == frozenset({"p1"})
        assert [r.id for r in live] == ["r1"]

    run(scenario())
    assert [cm["metadata"]["name"] for cm in member.configmaps(NS)] == ["kubesched-reservation-r1"]


def test_a_tainted_node_holds_a_reservation_only_for_a_pod_that_tolerates_each_of_its_taints() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    drain = {"key": "drain", "effect": "NoExecute"}
    agent, _, _ = agent_on(node("a-gpu", cpu="8", taints=[gpu]), node("b-both", cpu="8", taints=[gpu, drain]))
    tolerates_gpu = (Toleration(key="nvidia.com/gpu", operator="Equal", value="true", effect="NoSchedule"),)

    async def scenario() -> None:
        with pytest.raises(Refused) as unfit:
            await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 60))
        assert unfit.value.reason == "Unfit"
        held, _ = await agent.reserve(ReservationRequest("r2", {"cpu": 1000}, 60, "", tolerates_gpu))
        assert held.node == "a-gpu"
        with pytest.raises(Refused):  # b-both's drain taint is not tolerated; a-gpu has 1 CPU left
            await agent.reserve(ReservationRequest("r3", {"cpu": 7500}, 60, "", tolerates_gpu))
        everything = (Toleration(operator="Exists"),)
        held, _ = await agent.reserve(ReservationRequest("r4", {"cpu": 7500}, 60, "", everything))
        assert held.node == "b-both"
        state, _ = await agent.state()
        assert {tuple(t.key for t in bucket.taints) for bucket in state.nodes or ()} == {
            ("nvidia.com/gpu",),
            ("nvidia.com/gpu", "drain"),
        }

    run(scenario())


def test_the_agent_binds_one_pod_on_the_reserved_node_and_consumes_the_reservation() -> None:
    agent, member, _ = agent_on(node("n1", cpu="1"), node("n2", cpu="4"))

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 2000}, 60, "hub-web"))
        pod, created = await agent.bind("r1", hub_pod("web", cpu="2"))
        assert (pod["node"], created) == ("n2", True)
        again, created = await agent.bind("r1", hub_pod("web", cpu="2"))
        assert (again, created) == (pod, False)
        with pytest.raises(Refused) as missing:
            await agent.bind("nope", hub_pod("other"))
        assert (missing.value.status, missing.value.reason) == (404, "NotFound")
        state, live = await agent.state()
        assert (state.allocated, live) == ({"cpu": 2000, "pods": 1}, [])  # counted once: as a pod now

    run(scenario())
    [pod] = member.pods()
    assert "nodeSelector" not in pod["spec"]
    assert pod["metadata"]["annotations"]["multicluster.kubesched.io/hub-pod-uid"] == "hub-web"
    assert member.configmaps(NS) == []


def test_an_unconfirmed_reservation_expires_and_a_late_bind_places_nothing() -> None:
    agent, member, clock = agent_on(node("n1", cpu="1"))

    async def scenario() -> None:
        await agent.reserve(ReservationRequest("r1", {"cpu": 1000}, 30))
        clock.advance(31)
        state, live = await agent.state()
        assert (state.nodes or ())[0].free["cpu"] == 1000 and live == []  # expired: holds nothing, not swept yet
        with pytest.raises(Refused) as expired:
            await agent.bind("r1", hub_pod("late"))
        assert (expired.value.status, expired.value.reason) == (410, "Expired")
        await agent.reserve(ReservationRequest("r2", {"cpu": 1000}, 30))
        clock.advance(31)
        assert await agent.sweep_expired() == ["r2"]
        with pytest.raises(Refused) as gone:
            await agent.bind("r2", hub_pod("later"))
        assert gone.value.reason == "NotFound"

    run(scenario())
    assert (member.pods(), member.configmaps(NS)) == ([], [])
