"""Cluster agents for tests: one in front of an envtest member on loopback HTTPS, and a raw caller for it.

Who calls it: the agent's end-to-end tests and those of the hub's agent client and state cache. A
:class:`RunningAgent` owns the member's API client, the :class:`~kubesched.agent.core.Agent` and its
:class:`~kubesched.agent.server.AgentServer` (a serving certificate from :mod:`kubesched.harness.certificates`,
a random token), and can be stopped and started again on the same port (an agent restart).
:meth:`RunningAgent.call` is a plain HTTPS request with aiohttp -- deliberately not our agent client, so the
agent's tests do not depend on it.
"""

from __future__ import annotations

import json
import secrets
import ssl
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from kubesched.agent.core import Agent
from kubesched.agent.server import AgentServer, server_ssl_context
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.kubeconfig import load_connection
from kubesched.clock import Clock
from kubesched.harness.certificates import write_server_certificates
from kubesched.harness.envtest import ControlPlane

__all__ = ["RunningAgent", "make_node"]


class RunningAgent:
    """``async with RunningAgent(plane, workdir, clock=...) as agent:`` -- an agent on ``agent.url``."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        *,
        clock: Clock,
        namespace: str = "kubesched-system",
        cluster_name: str = "member",
        sweep_interval: float = 5.0,
        kubeconfig: Path | None = None,
    ) -> None:
        """``kubeconfig``: the agent's credentials for the member (default: the plane's admin)."""
        self.plane = plane
        self.workdir = workdir
        self.clock = clock
        self.namespace = namespace
        self.cluster_name = cluster_name
        self.sweep_interval = sweep_interval
        self.token = secrets.token_urlsafe(24)
        workdir.mkdir(parents=True, exist_ok=True)
        self.ca_file, self.cert_file, self.key_file = write_server_certificates(workdir / "agent-pki")
        self.kubeconfig = kubeconfig or plane.write_kubeconfig(workdir / "member.kubeconfig")
        self.port = 0
        self._client: KubeClient | None = None
        self._server: AgentServer | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def agent(self) -> Agent:
        if self._server is None:
            raise RuntimeError("the agent is not running")
        return self._server.agent

    def client_ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    async def start(self) -> None:
        """Start (or start again, on the same port once it has one) with a fresh client and agent."""
        self._client = KubeClient(load_connection(str(self.kubeconfig)), user_agent="kubesched-agent-test")
        agent = Agent(self._client, clock=self.clock, namespace=self.namespace, cluster_name=self.cluster_name)
        self._server = AgentServer(
            agent,
            token=self.token,
            ssl_context=server_ssl_context(self.cert_file, self.key_file),
            port=self.port,
            sweep_interval=self.sweep_interval,
        )
        await self._server.start()
        self.port = self._server.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        client, self._client = self._client, None
        if server is not None:
            await server.close()
        if client is not None:
            await client.aclose()

    async def call(self, method: str, path: str, body: Any = None, *, token: str | None = None) -> tuple[int, Any]:
        """One request to the agent: (status, decoded JSON answer)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.client_ssl_context()))
        headers = {"Authorization": f"Bearer {self.token if token is None else token}"}
        data = None if body is None else json.dumps(body)
        if data is not None:
            headers["Content-Type"] = "application/json"
        async with self._session.request(method, self.url + path, data=data, headers=headers) as response:
            raw = await response.read()
            return response.status, json.loads(raw) if raw else None

    async def __aenter__(self) -> RunningAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def make_node(plane: ControlPlane, name: str, cpu: str = "2", memory: str = "4Gi", pods: str = "10") -> None:
    """Create Node ``name`` in the member ``plane`` with that capacity (no kubelet: it stays as created)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    status, answer = plane.request(
        "POST", "/api/v1/nodes", {"metadata": {"name": name}, "status": {"capacity": capacity}}
    )
    if status != 201:
        raise RuntimeError(f"creating node {name}: {status} {answer}")
