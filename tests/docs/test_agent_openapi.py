"""docs/reference/agent-api.yaml describes the agent's HTTP API as it is: the same routes, and every answer the
server gives (over real HTTP, in front of an in-memory member) has the documented status and shape."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubesched.agent.core import Agent
from kubesched.agent.memory import InMemoryMember
from kubesched.agent.server import AgentServer
from kubesched.clock import VirtualClock

DOCUMENT_PATH = Path(__file__).resolve().parents[2] / "docs" / "reference" / "agent-api.yaml"
DOCUMENT: dict[str, Any] = yaml.safe_load(DOCUMENT_PATH.read_text())
TOKEN = "s3cret-token"
NS = "kubesched-system"


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        *_, kind, name = schema["$ref"].split("/")
        schema = DOCUMENT["components"][kind][name]
    return schema


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def problems(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """What in ``value`` the (OpenAPI 3.1, JSON Schema subset) ``schema`` does not allow; undocumented keys count."""
    schema = resolve(schema)
    if "oneOf" in schema:
        matching = [option for option in schema["oneOf"] if not problems(value, option, where)]
        return [] if len(matching) == 1 else [f"{where}: {value!r} matches {len(matching)} of oneOf, not one"]
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds is not None and not any(_is(value, kind) for kind in kinds):
        return [f"{where}: {value!r} is not {' or '.join(kinds)}"]
    found: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and "pattern" in schema and re.search(schema["pattern"], value) is None:
        found.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        found += [f"{where}.{key}: required" for key in schema.get("required", []) if key not in value]
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                found += problems(item, properties[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                found += problems(item, extra, f"{where}.{key}")
            elif properties or extra is False:
                found.append(f"{where}.{key}: not documented")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += problems(item, schema["items"], f"{where}[{i}]")
    return found


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def answer_schema(path: str, method: str, status: int) -> dict[str, Any]:
    responses = DOCUMENT["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path}: status {status} is not documented"
    answer = resolve(responses[str(status)])
    schema: dict[str, Any] = answer["content"]["application/json"]["schema"]
    return schema


def test_the_documented_routes_are_the_servers() -> None:
    server = AgentServer(Agent(InMemoryMember(), clock=VirtualClock()), token=TOKEN, ssl_context=None)
    served = {
        (route.method.lower(), re.sub(r"\{(\w+)\}", r"{\1}", route.resource.canonical))
        for route in server.app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    documented = {(method, path) for path, operations in DOCUMENT["paths"].items() for method in operations}
    assert served == documented


def test_the_validator_notices_what_the_document_does_not_allow() -> None:
    state = resolve({"$ref": "#/components/schemas/State"})
    assert "$.ready: 'yes' is not boolean" in problems({"ready": "yes"}, state)
    assert "$.name: required" in problems({"ready": "yes"}, state)
    reservation = resolve({"$ref": "#/components/schemas/Reservation"})
    valid = {"id": "r1", "node": "n1", "requests": {"cpu": 1}, "expiresAt": 1.0, "podUID": "", "createdAt": 0.5}
    assert problems(valid, reservation) == []
    assert problems({**valid, "extra": 1}, reservation) == ["$.extra: not documented"]
    assert problems({**valid, "id": "R_1"}, reservation) == [
        "$.id: 'R_1' does not match ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
    ]


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def hub_pod(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": {"requests": {"cpu": "500m"}}}]},
    }


def test_every_answer_has_the_documented_status_and_shape() -> None:
    member = InMemoryMember("m1")
    member.add_node(node("n1", "2"))
    member.add_namespace("apps")
    agent = Agent(member, clock=VirtualClock(), namespace=NS, cluster_name="m1")
    checked: list[tuple[str, str, int]] = []

    async def scenario() -> None:
        async with (
            AgentServer(agent, token=TOKEN, ssl_context=None) as server,
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as session,
        ):

            async def call(
                method: str, path: str, template: str, status: int, body: Any = None, token: int | None = None
            ) -> None:
                headers = {} if token is None else {"Kubesched-Fencing-Token": str(token)}
                async with session.request(method, server.url + path, json=body, headers=headers) as response:
                    answer = await response.json()
                assert response.status == status, answer
                assert problems(answer, answer_schema(template, method.lower(), status)) == []
                checked.append((method, template, status))

            reservation = {"id": "r-1", "requests": {"cpu": "500m"}, "ttlSeconds": 60, "podUID": "u1"}
            await call("GET", "/v1/state", "/v1/state", 200)
            await call("POST", "/v1/reservations", "/v1/reservations", 201, reservation)
            await call("POST", "/v1/reservations", "/v1/reservations", 200, reservation)
            await call("GET", "/v1/state", "/v1/state", 200)  # with the live reservation
            too_big = {"id": "r-2", "requests": {"cpu": "8"}, "ttlSeconds": 60}
            await call("POST", "/v1/reservations", "/v1/reservations", 409, too_big)
            await call("POST", "/v1/reservations", "/v1/reservations", 400, {"id": "R_2", "ttlSeconds": 60})
            bind = {"reservationId": "r-1", "pod": hub_pod("web", "u1")}
            await call("POST", "/v1/bind", "/v1/bind", 201, bind)
            await call("POST", "/v1/bind", "/v1/bind", 200, bind)
            await call("POST", "/v1/bind", "/v1/bind", 404, {"reservationId": "r-9", "pod": hub_pod("x", "u9")})
            await call("GET", "/v1/hubpods/u1", "/v1/hubpods/{uid}", 200)  # the pod made for it
            await call("GET", "/v1/hubpods/u9", "/v1/hubpods/{uid}", 200)  # none
            await call("DELETE", "/v1/reservations/r-1", "/v1/reservations/{id}", 200)  # the commit happened
            await call("DELETE", "/v1/pods/apps/web?hubPodUID=u2", "/v1/pods/{namespace}/{name}", 409)
            await call("DELETE", "/v1/pods/apps/web?hubPodUID=u1", "/v1/pods/{namespace}/{name}", 200)
            await call("DELETE", "/v1/reservations/r-3", "/v1/reservations/{id}", 200)  # none held
            fenced = {"id": "r-4", "requests": {"cpu": "100m"}, "ttlSeconds": 60}
            await call("POST", "/v1/reservations", "/v1/reservations", 201, fenced, token=5)
            await call("DELETE", "/v1/reservations/r-4", "/v1/reservations/{id}", 409, token=3)  # another hub leads
            async with aiohttp.ClientSession() as anonymous, anonymous.get(server.url + "/v1/state") as response:
                assert response.status == 401
                assert problems(await response.json(), answer_schema("/v1/state", "get", 401)) == []

    asyncio.run(scenario())
    assert len(checked) == 17


@pytest.mark.parametrize("path", sorted(DOCUMENT["paths"]))
def test_every_operation_documents_authentication_and_the_members_failures(path: str) -> None:
    for operation in DOCUMENT["paths"][path].values():
        assert {"401", "502", "503"} <= set(operation["responses"]), operation["operationId"]
