"""One MemberCluster's endpoint in the live hub, built from its ``spec.connection`` and the Secrets it names.

Who calls it: :mod:`kubesched.live.hub`, which makes one :class:`MemberLink` per MemberCluster and hands it to
the cluster state cache (as the member's fetcher) and to the committer (as its endpoint). A link is a
:class:`~kubesched.federation.agent_client.MemberEndpoint` that builds the real one on first use:

* pull mode (``spec.connection.agent``): the bearer token is read from ``tokenSecretRef`` on the hub, the CA
  from ``caBundle`` (base64 PEM; none: the system's trust store), and an
  :class:`~kubesched.federation.agent_client.AgentClient` talks to ``url``;
* push mode (``spec.connection.kubeconfigSecretRef``): the kubeconfig in that Secret gets its own
  :class:`~kubesched.backends.kube.client.KubeClient` and an :class:`~kubesched.agent.core.Agent` behind a
  :class:`~kubesched.agent.push.PushEndpoint`. The kubeconfig must embed its credentials: an ``exec`` plugin,
  an ``auth-provider`` or a file path would run a command or read a file of the hub on the word of anyone who
  may write that Secret, so they are refused.

Why lazily: Secrets are not watched (the hub would need to list every Secret), so a Secret created or fixed
after its MemberCluster is found at the next refresh, which calls :meth:`MemberLink.state` every interval. A
problem with the connection is a :class:`ConnectionProblem` -- a reason word and the field it is about, e.g.
``SecretNotFound`` on ``spec.connection.agent.tokenSecretRef`` -- which the cache counts as a failed refresh
and the status writer shows as the member's Ready=False condition; nothing of it is fatal. A ``401`` from the
agent drops the built endpoint, so a rotated token is read again at the next call.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubesched.agent.core import Agent
from kubesched.agent.push import PushEndpoint
from kubesched.api.multicluster import ClusterConnection, SecretRef
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeConfigError, KubeTransportError
from kubesched.backends.kube.kubeconfig import load_connection
from kubesched.clock import Clock
from kubesched.clusterapi.contract import ClusterState
from kubesched.federation.agent_client import (
    AgentClient,
    AgentRefused,
    AgentUnreachable,
    BoundPod,
    HeldReservation,
    MemberEndpoint,
    Released,
)
from kubesched.federation.wire import ReservationRequest
from kubesched.net.tls import Pem, TlsError, client_context

__all__ = ["ConnectionProblem", "MemberLink"]

log = logging.getLogger(__name__)

T = TypeVar("T")

AGENT_PATH = "spec.connection.agent"
KUBECONFIG_PATH = "spec.connection.kubeconfigSecretRef"
# Kubeconfig keys that make the client run a command or read a file of the hub (module doc).
_UNSAFE_USER_KEYS = ("exec", "auth-provider", "tokenFile", "client-certificate", "client-key")
_UNSAFE_CLUSTER_KEYS = ("certificate-authority",)


class ConnectionProblem(AgentUnreachable):
    """The member's connection cannot be built: ``reason`` (a constant word) and the ``field`` it is about."""

    def __init__(self, member: str, reason: str, field: str, detail: str) -> None:
        super().__init__(f"MemberCluster {member}", f"{field}: {detail}")
        self.args = (f"{field}: {detail}",)
        self.reason = reason
        self.field = field
        self.detail = detail


class MemberLink:
    """The endpoint of MemberCluster ``name`` (module doc); ``connection`` None: the spec gives none."""

    def __init__(
        self,
        name: str,
        connection: ClusterConnection | None,
        hub: KubeClient,
        *,
        clock: Clock,
        agent_namespace: str = "kubesched-system",
        timeout: float = 2.0,
    ) -> None:
        self.name = name
        self.connection = connection
        self.hub = hub
        self.clock = clock
        self.agent_namespace = agent_namespace
        self.timeout = timeout
        self.problem: ConnectionProblem | None = None  # the last build's problem; None once built
        self._endpoint: MemberEndpoint | None = None
        self._member_client: KubeClient | None = None  # push mode's client of the member
        self._lock = asyncio.Lock()

    @property
    def mode(self) -> str:
        return "none" if self.connection is None else self.connection.mode

    # ------------------------------------------------------------------------------------------ building

    def _problem(self, reason: str, field: str, detail: str) -> ConnectionProblem:
        return ConnectionProblem(self.name, reason, field, detail)

    async def _secret_value(self, ref: SecretRef, field: str) -> bytes:
        path = f"/api/v1/namespaces/{ref.namespace}/secrets/{ref.name}"
        try:
            secret = await self.hub.request("GET", path, timeout=self.timeout, retry=False)
        except KubeApiError as error:
            if error.status == 404:
                raise self._problem("SecretNotFound", field, f"Secret {ref.namespace}/{ref.name} not found") from error
            if error.status in (401, 403):
                raise self._problem(
                    "SecretForbidden", field, f"the hub may not read Secret {ref.namespace}/{ref.name}: {error}"
                ) from error
            raise AgentUnreachable(f"MemberCluster {self.name}", f"reading {field}: {error}") from error
        except KubeTransportError as error:
            raise AgentUnreachable(f"MemberCluster {self.name}", f"reading {field}: {error}") from error
        data = secret.get("data") if isinstance(secret, Mapping) else None
        encoded = data.get(ref.key) if isinstance(data, Mapping) else None
        if not isinstance(encoded, str) or not encoded:
            raise self._problem(
                "SecretKeyMissing", f"{field}.key", f"Secret {ref.namespace}/{ref.name} has no key {ref.key!r}"
            )
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise self._problem(
                "SecretInvalid", f"{field}.key", f"Secret {ref.namespace}/{ref.name} key {ref.key!r} is not base64"
            ) from error

    async def _build(self) -> MemberEndpoint:
        connection = self.connection
        if connection is None:
            raise self._problem(
                "NoConnection", "spec.connection", "Required value: an agent (pull) or a kubeconfigSecretRef (push)"
            )
        if connection.agent is not None:
            return await self._build_agent(connection)
        return await self._build_push(connection)

    async def _build_agent(self, connection: ClusterConnection) -> MemberEndpoint:
        agent = connection.agent
        assert agent is not None
        token_field = f"{AGENT_PATH}.tokenSecretRef"
        token = (await self._secret_value(agent.token_secret_ref, token_field)).decode(errors="replace").strip()
        if not token:
            raise self._problem("SecretKeyMissing", f"{token_field}.key", "the token is empty")
        context: ssl.SSLContext | None = None
        if agent.ca_bundle:
            try:
                pem = base64.b64decode(agent.ca_bundle, validate=True)
                context = client_context(ca=Pem("caBundle", data=pem))
            except (binascii.Error, ValueError, TlsError) as error:
                raise self._problem(
                    "InvalidCABundle", f"{AGENT_PATH}.caBundle", f"must be base64 of PEM certificates: {error}"
                ) from error
        try:
            return AgentClient(agent.url, token, ssl_context=context, timeout=self.timeout)
        except ValueError as error:  # a port that is not a number passes the CRD's pattern
            raise self._problem("InvalidURL", f"{AGENT_PATH}.url", str(error)) from error

    async def _build_push(self, connection: ClusterConnection) -> MemberEndpoint:
        ref = connection.kubeconfig_secret_ref
        assert ref is not None
        text = await self._secret_value(ref, KUBECONFIG_PATH)
        self._check_embedded(text)
        # load_connection reads files: the kubeconfig goes to a private temporary directory for that read only.
        with tempfile.TemporaryDirectory(prefix="kubesched-member-") as directory:
            path = Path(directory) / "kubeconfig"
            path.write_bytes(text)
            path.chmod(0o600)
            try:
                member_connection = load_connection(str(path))
            except KubeConfigError as error:
                detail = str(error).replace(str(path), f"Secret {ref.namespace}/{ref.name}")
                raise self._problem("InvalidKubeconfig", f"{KUBECONFIG_PATH}.key", detail) from error
        client = KubeClient(member_connection, user_agent="kubesched-hub", timeout=self.timeout)
        agent = Agent(client, clock=self.clock, namespace=self.agent_namespace, cluster_name=self.name)
        try:
            await agent.ensure_namespace()
        except (KubeApiError, KubeTransportError) as error:
            await client.aclose()
            raise AgentUnreachable(f"MemberCluster {self.name}", f"the member's API: {error}") from error
        except BaseException:  # the refresh's deadline cancelled us: the client must not leak its connections
            await client.aclose()
            raise
        self._member_client = client
        return PushEndpoint(agent, timeout=self.timeout)

    def _check_embedded(self, text: bytes) -> None:
        where = f"{KUBECONFIG_PATH}.key"
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise self._problem("InvalidKubeconfig", where, f"not valid YAML: {error}") from error
        if not isinstance(document, Mapping):
            raise self._problem("InvalidKubeconfig", where, "the kubeconfig must be a mapping")
        for section, inner, keys in (
            ("users", "user", _UNSAFE_USER_KEYS),
            ("clusters", "cluster", _UNSAFE_CLUSTER_KEYS),
        ):
            for entry in document.get(section) or ():
                body = entry.get(inner) if isinstance(entry, Mapping) else None
                if not isinstance(body, Mapping):
                    continue
                for key in keys:
                    if body.get(key):
                        raise self._problem(
                            "UnsafeKubeconfig",
                            where,
                            f"{section}[{entry.get('name')}].{inner}.{key}: not allowed in a member's kubeconfig "
                            "(embed the credentials: certificate-authority-data, client-certificate-data, token)",
                        )

    async def endpoint(self) -> MemberEndpoint:
        """The built endpoint, building it now if need be; raises :class:`ConnectionProblem` (or
        :class:`~kubesched.federation.agent_client.AgentUnreachable` when the hub's API does not answer)."""
        if self._endpoint is not None:
            return self._endpoint
        async with self._lock:
            if self._endpoint is None:
                try:
                    self._endpoint = await self._build()
                except ConnectionProblem as problem:
                    if self.problem is None or str(self.problem) != str(problem):
                        log.warning("MemberCluster %s: %s", self.name, problem)
                    self.problem = problem
                    raise
                if self.problem is not None:
                    log.info("MemberCluster %s: connection built (%s mode)", self.name, self.mode)
                self.problem = None
            return self._endpoint

    async def _drop(self) -> None:
        endpoint, self._endpoint = self._endpoint, None
        client, self._member_client = self._member_client, None
        if endpoint is not None:
            await endpoint.aclose()
        if client is not None:
            await client.aclose()

    async def _call(self, work: Callable[[MemberEndpoint], Awaitable[T]]) -> T:
        endpoint = await self.endpoint()
        try:
            return await work(endpoint)
        except AgentRefused as refusal:
            if refusal.status == 401:  # a rotated token: read the Secret again at the next call
                await self._drop()
            raise

    # ------------------------------------------------------------------------------- MemberEndpoint calls

    async def state(self, name: str, *, generation: int = 0, timeout: float | None = None) -> ClusterState:
        return await self._call(lambda e: e.state(name, generation=generation, timeout=timeout))

    async def reserve(
        self, request: ReservationRequest, *, token: int = 0, timeout: float | None = None
    ) -> HeldReservation:
        return await self._call(lambda e: e.reserve(request, token=token, timeout=timeout))

    async def release(
        self,
        reservation_id: str,
        *,
        hub_pod: tuple[str, str, str] | None = None,
        token: int = 0,
        timeout: float | None = None,
    ) -> Released:
        return await self._call(lambda e: e.release(reservation_id, hub_pod=hub_pod, token=token, timeout=timeout))

    async def bind(
        self,
        reservation_id: str,
        pod: Mapping[str, Any],
        *,
        token: int = 0,
        timeout: float | None = None,
        expires_at: float | None = None,
    ) -> BoundPod:
        return await self._call(
            lambda e: e.bind(reservation_id, pod, token=token, timeout=timeout, expires_at=expires_at)
        )

    async def delete_pod(
        self, namespace: str, name: str, hub_uid: str, *, token: int = 0, timeout: float | None = None
    ) -> bool:
        return await self._call(lambda e: e.delete_pod(namespace, name, hub_uid, token=token, timeout=timeout))

    async def find_pod(self, hub_pod: tuple[str, str, str], *, timeout: float | None = None) -> BoundPod | None:
        return await self._call(lambda e: e.find_pod(hub_pod, timeout=timeout))

    async def aclose(self) -> None:
        await self._drop()
