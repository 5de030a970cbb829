"""The agent's wire format: a ClusterState survives the trip through JSON; bad answers name their field."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.objects import Taint, Toleration
from kubesched.clusterapi.contract import ClusterState, NodeBucket
from kubesched.federation.wire import (
    ReservationRequest,
    WireError,
    parse_requests,
    reservation_request_from_json,
    state_from_json,
    state_to_json,
)

FULL = ClusterState(
    name="eu-1",
    ready=True,
    observed_at=1_800_000_000.5,
    allocatable={"cpu": 8000, "memory": 2**34, "pods": 220},
    allocated={"cpu": 1000, "pods": 3},
    nodes=(
        NodeBucket(2, {"cpu": 3500, "pods": 108}),
        NodeBucket(1, {"cpu": 8000}, (Taint("nvidia.com/gpu", "true", "NoSchedule"), Taint("drain", "", "NoExecute"))),
    ),
    apis=frozenset({"v1/Pod", "apps/v1/Deployment"}),
    workloads={("owner", "ns", "ReplicaSet", "web"): 2, ("app", "ns", "web"): 2},
    accounted_pods=frozenset({"u1", "u2"}),
    pod_phases={"u1": "Running", "u2": "Pending"},
)


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(FULL, id="everything-reported"),
        pytest.param(ClusterState(name="eu-1", ready=False, ready_reason="no nodes"), id="nothing-reported"),
    ],
)
def test_a_state_survives_the_wire(state: ClusterState) -> None:
    assert state_from_json(state_to_json(state), "eu-1") == state


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"ready": "yes"}, "state.ready", id="ready-not-a-boolean"),
        pytest.param({"observedAt": "now"}, "state.observedAt", id="observed-at-not-a-number"),
        pytest.param({"allocated": {"cpu": "1"}}, "state.allocated.cpu", id="amount-not-an-integer"),
        pytest.param({"nodes": [{"free": {}}]}, "state.nodes[0].count", id="bucket-without-count"),
        pytest.param({"workloads": [{"key": ["x"], "count": 1}]}, "state.workloads[0].key", id="bad-workload-key"),
        pytest.param({"apis": "v1/Pod"}, "state.apis", id="apis-not-a-list"),
        pytest.param({"podPhases": ["Running"]}, "state.podPhases", id="phases-not-an-object"),
        pytest.param(
            {"nodes": [{"count": 1, "taints": [{"key": "k", "effect": "PreferNoSchedule"}]}]},
            "state.nodes[0].taints[0]",
            id="a-taint-that-keeps-no-pod-off",
        ),
        pytest.param({"podPhases": {"u1": 1}}, "state.podPhases", id="phase-not-a-string"),
    ],
)
def test_a_malformed_state_names_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        state_from_json({**state_to_json(FULL), **change}, "eu-1")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param({"cpu": "500m", "memory": "1Gi"}, {"cpu": 500, "memory": 2**30}, id="quantities"),
        pytest.param({"cpu": 500, "nvidia.com/gpu": 1}, {"cpu": 500, "nvidia.com/gpu": 1}, id="canonical-integers"),
    ],
)
def test_requests_are_canonical(given: dict[str, Any], expected: dict[str, int]) -> None:
    assert parse_requests(given) == expected


def test_an_agent_that_reports_no_phases_reports_none() -> None:
    body = state_to_json(FULL)
    del body["podPhases"]
    assert state_from_json(body, "eu-1").pod_phases == {}


def test_a_reservation_request_carries_the_pods_tolerations() -> None:
    tolerations = (
        Toleration(key="nvidia.com/gpu", operator="Equal", value="true", effect="NoSchedule"),
        Toleration(key="drain", operator="Exists", effect="NoExecute", toleration_seconds=30),
        Toleration(operator="Exists"),
    )
    request = ReservationRequest("r-1", {"cpu": 500}, 30.0, "hub-uid", tolerations)
    assert reservation_request_from_json(request.to_json()) == request
    with pytest.raises(WireError, match=r"tolerations\[0\]"):
        reservation_request_from_json({**request.to_json(), "tolerations": [{"operator": "Sometimes"}]})
