"""What the cluster agent does in its member: report state, hold and release reservations, bind pods, expire.

Who calls it: :mod:`kubesched.agent.server` (one :class:`Agent` per process, behind the HTTPS endpoints), push mode
(:mod:`kubesched.agent.push`) and tests. Everything goes to the member's API server through a
:class:`~kubesched.agent.api.MemberApi` (our :class:`~kubesched.backends.kube.client.KubeClient`, or the in-memory
member of the benchmark and unit tests). State is read from the agent's :class:`~kubesched.agent.view.MemberView`;
a reservation is a ConfigMap ``kubesched-reservation-<id>`` in the agent's namespace, so the member itself stores it;
a reservation past ``expiresAt`` (on the agent's clock) holds nothing and is swept; a bind creates the pod on the
reserved node. The member pod is the commit record: a bind, release or sweep that finds the pod made for a hub pod
answers with it, and a release whose pod create may still land (no answer, or a ``5xx``: the member's own timeout
passed, its write may still be done) answers ``503 Settling``
(docs/explanation/cross-cluster-commit.md#the-agent-tells-the-truth). Every mutating call carries the hub's fencing
token; an older one than the member has seen is refused (docs/explanation/cross-cluster-commit.md#fencing).
Mutations are serialised by one lock per agent: "does it fit" and "hold it" must not interleave. What the member pod
keeps of the hub pod, and why: docs/explanation/cross-cluster.md#the-cluster-agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.agent.api import MemberApi
from kubesched.agent.reservations import (
    CONFIGMAP_PREFIX,
    FENCE_PREFIX,
    Reservation,
    fence_configmap,
    held_by_node,
    reservation_configmap,
    stored_reservation,
)
from kubesched.agent.view import MemberPod, MemberView, running_on
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError, is_status
from kubesched.clock import Clock
from kubesched.clusterapi.contract import ClusterState, app_workload_key
from kubesched.errors import KubeschedError
from kubesched.federation.state import count_workloads, placed_capacity
from kubesched.federation.wire import (
    FENCED_REASON,
    HUB_POD_UID_ANNOTATION,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    RESERVATION_ANNOTATION,
    RESERVATION_ID_PATTERN,
    ReservationRequest,
)

__all__ = ["DEFAULT_NAMESPACE", "Agent", "HubPodRef", "Refused", "Reservation"]

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "kubesched-system"
DISCOVERY_TTL_SECONDS = 300.0
# A pod create the member was told to give up on after the agent's request timeout (its ``timeout`` parameter) may
# still be written a moment later; past this margin it never is.
IN_FLIGHT_MARGIN_SECONDS = 5.0
# Fields of the hub pod that were about the hub's choice of cluster, or that the member would refuse next to a
# nodeName: a nodeSelector or node affinity on cluster labels would make the member's kubelet reject the pod, a
# priority the member's Priority admission computes itself, scheduling gates are forbidden with a nodeName.
_HUB_ONLY_SPEC = frozenset({"nodeName", "nodeSelector", "priority", "schedulingGates", "nominatedNodeName"})


class Refused(KubeschedError):
    """The agent will not do what was asked; ``status`` is the HTTP status it answers with, ``reason`` a
    constant word (``Unfit``, ``Conflict``, ``NotFound``, ``Expired``, ``Invalid``, ``MemberRejected``,
    ``Fenced``, ``Settling``); ``retry_after`` seconds, when asking again later can help."""

    def __init__(self, status: int, reason: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class HubPodRef:
    """The hub pod a release is about: the agent looks for the member pod made for it (same namespace and name)."""

    uid: str
    namespace: str = ""
    name: str = ""


@dataclass
class _Discovery:
    apis: frozenset[str] | None = None
    fetched_at: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Agent:
    """One member cluster's agent (see the module doc). ``client`` talks to the member's API server; the
    caller owns it (and closes it)."""

    def __init__(
        self,
        client: MemberApi,
        *,
        clock: Clock,
        namespace: str = DEFAULT_NAMESPACE,
        cluster_name: str = "",
        request_timeout: float = 10.0,
        in_flight_seconds: float | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.namespace = namespace
        self.cluster_name = cluster_name
        self.request_timeout = request_timeout
        self.in_flight_seconds = (
            request_timeout + IN_FLIGHT_MARGIN_SECONDS if in_flight_seconds is None else in_flight_seconds
        )
        # A predecessor process (killed mid-bind) may have sent a create that lands after this one started.
        self.started_at = clock.now()
        # Since when another agent process may have sent a create this one knows nothing of: its start (a
        # predecessor's), then each newer fencing token it recorded (an older hub's agent -- in push mode, one runs
        # in each hub replica -- may have sent one just before).
        self._others_since = self.started_at
        self._unknown_creates: dict[str, float] = {}  # reservation id -> when a create with no answer was sent
        # The reservations this process made (and has not deleted): any other may be a predecessor's, with a create
        # of that predecessor in flight -- whatever the clock read when it was made.
        self._made_here: set[str] = set()
        self._fence_written = 0
        self._lock = asyncio.Lock()
        self._discovery = _Discovery()
        self._view = MemberView(client, namespace, sync_timeout=request_timeout)

    async def aclose(self) -> None:
        """Stop watching the member (the client stays the caller's to close)."""
        await self._view.aclose()

    # ------------------------------------------------------------------------------------------ member I/O

    async def _get(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        return await self.client.request("GET", path, query=query, timeout=self.request_timeout)

    async def _together(self, *calls: Callable[[], Awaitable[Any]]) -> list[Any]:
        """The calls' answers, in order: concurrently where the member's API overlaps requests (a remote server's
        round trips do), else one after another -- a gather there would only add tasks and event-loop turns, and a
        commit's latency in the in-process benchmark is counted in those turns."""
        if self.client.overlaps_requests:
            return list(await asyncio.gather(*(call() for call in calls)))
        return [await call() for call in calls]

    @property
    def _configmaps(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/configmaps"

    async def ensure_namespace(self) -> None:
        """Create the agent's namespace when it is missing (a member without it cannot store reservations)."""
        try:
            await self._get(f"/api/v1/namespaces/{self.namespace}")
        except KubeApiError as error:
            if error.status != 404:
                raise
            try:
                await self.client.request(
                    "POST", "/api/v1/namespaces", body={"metadata": {"name": self.namespace}}, retry=False
                )
            except KubeApiError as create_error:
                if create_error.status != 409:
                    raise

    async def reservations(self) -> list[Reservation]:
        """Every reservation stored in the member, expired ones included."""
        await self._view.current()
        return self._view.reservations()

    async def _apis(self) -> frozenset[str] | None:
        """Served kinds as ``group/version/Kind`` (``v1/Pod`` for the core group), from discovery, refreshed
        every :data:`DISCOVERY_TTL_SECONDS`; None (unreported: every kind counts as served) when discovery fails."""
        discovery = self._discovery
        async with discovery.lock:
            if self.clock.now() - discovery.fetched_at < DISCOVERY_TTL_SECONDS:
                return discovery.apis
            try:
                core, groups = await self._together(lambda: self._get("/api/v1"), lambda: self._get("/apis"))
                versions = [
                    str(version["groupVersion"])
                    for group in groups.get("groups", [])
                    for version in group.get("versions", [])
                ]
                lists = [core, *await self._together(*(functools.partial(self._get, f"/apis/{gv}") for gv in versions))]
                discovery.apis = frozenset(
                    f"{listed['groupVersion']}/{resource['kind']}"
                    for listed in lists
                    for resource in listed.get("resources", [])
                    if "/" not in str(resource.get("name", ""))
                )
            except (KubeschedError, KeyError, TypeError, AttributeError) as error:
                log.warning("API discovery failed (served APIs unreported until the next try): %s", error)
                discovery.apis = None
            discovery.fetched_at = self.clock.now()
            return discovery.apis

    # ---------------------------------------------------------------------------------------------- state

    async def state(self) -> tuple[ClusterState, list[Reservation]]:
        """The member's state with its live reservations counted, and those reservations."""
        behind, apis = await self._together(self._view.current, self._apis)
        now = self.clock.now()
        view = self._view
        nodes, pods = view.nodes(), view.running_pods()
        live = self._live_reservations(now)
        made = view.hub_pods()
        allocatable, allocated, buckets = placed_capacity(
            nodes,
            [(pod.node, pod.requests) for pod in pods],
            held_by_node(live),
            view.takes_new_pods,
            view.scheduling_taints,
        )
        accounted = {r.pod_uid for r in live if r.pod_uid}
        accounted.update(pod.hub_uid for pod in pods if pod.hub_uid)
        state = ClusterState(
            name=self.cluster_name,
            ready=bool(nodes),
            ready_reason="" if nodes else "the member has no nodes",
            observed_at=now - behind,
            allocatable=allocatable,
            allocated=allocated,
            nodes=buckets,
            apis=apis,
            workloads=count_workloads(pod.workloads for pod in pods),
            accounted_pods=frozenset(accounted),
            pod_phases={pod.hub_uid: pod.phase for pod in made},
            pod_names={pod.hub_uid: f"{pod.namespace}/{pod.name}" for pod in made},
        )
        return state, live

    def _live_reservations(self, now: float) -> list[Reservation]:
        """The reservations that hold capacity: not expired -- or expired while a pod create under them may still
        take effect, which would need that capacity --, and no pod made under them yet (a bind whose agent was
        killed before it deleted the reservation leaves one behind, and its pod already counts)."""
        view = self._view
        return [
            r
            for r in view.reservations()
            if (r.expires_at > now or self._create_may_land(r.id, r) > 0)
            and not (r.pod_uid and view.hub_pod(r.pod_uid))
        ]

    # --------------------------------------------------------------------------------------- reservations

    async def _stored(self, rid: str) -> Reservation | None:
        try:
            obj = await self._get(f"{self._configmaps}/{CONFIGMAP_PREFIX}{rid}")
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise
        return stored_reservation(obj)

    async def reserve(self, request: ReservationRequest, token: int = 0) -> tuple[Reservation, bool]:
        """Hold ``request``'s capacity on one node; (the reservation, whether it is new). Raises :class:`Refused`."""
        async with self._lock:
            await self._fenced(token)
            now = self.clock.now()
            existing = self._view.reservation(request.id)
            if existing is not None and existing.expires_at > now:
                if dict(existing.requests) != dict(request.requests):
                    raise Refused(409, "Conflict", f"reservation {request.id} exists with other requests")
                return existing, False
            if existing is not None:  # expired but not swept yet: replace it, once no create under it can land
                wait = self._create_may_land(request.id, existing)
                if wait > 0:
                    raise Refused(
                        503,
                        "Settling",
                        f"a pod create under the expired reservation {request.id} may still take effect",
                        retry_after=wait,
                    )
                await self._delete_configmap(request.id)
            live = self._live_reservations(now)
            node = self._view.first_fit(request.requests, held_by_node(live), request.tolerations)
            if node is None:
                raise Refused(
                    409, "Unfit", f"no node of the member the pod may use has room for {dict(request.requests)}"
                )
            reservation = Reservation(
                request.id, node.name, dict(request.requests), now + request.ttl_seconds, request.pod_uid, now
            )
            body = reservation_configmap(reservation, self.namespace)
            try:
                stored = await self.client.request("POST", self._configmaps, body=body, retry=False)
            except KubeApiError as error:
                if error.status != 409:
                    raise
                raise Refused(409, "Conflict", f"reservation {request.id} was created concurrently") from error
            self._view.made(reservation, stored)
            self._made_here.add(request.id)
            log.info("reserved %s on node %s until %.3f", request.id, node.name, reservation.expires_at)
            return reservation, True

    async def _delete_configmap(self, rid: str) -> bool:
        try:
            await self.client.request("DELETE", f"{self._configmaps}/{CONFIGMAP_PREFIX}{rid}", retry=False)
        except KubeApiError as error:
            if error.status == 404:
                self._view.dropped(rid)
                self._made_here.discard(rid)
                return False
            raise
        self._view.dropped(rid)
        self._made_here.discard(rid)
        return True

    async def release(
        self, rid: str, token: int = 0, hub_pod: HubPodRef | None = None
    ) -> tuple[bool, dict[str, str] | None]:
        """Drop reservation ``rid``: (whether the member held it, None) -- or (False, the member pod) when a pod was
        made under it, or for ``hub_pod``: the commit happened, and nothing is released. Releasing twice is fine.
        Raises :class:`Refused` ``Settling`` while a create under ``rid`` may still take effect
        (docs/explanation/cross-cluster-commit.md#the-agent-tells-the-truth)."""
        if not RESERVATION_ID_PATTERN.match(rid):
            raise Refused(400, "Invalid", "id: must be a DNS label (lower-case letters, digits and '-')")
        async with self._lock:
            await self._fenced(token)
            reservation = self._view.reservation(rid) or await self._stored(rid)
            hub_uid = (hub_pod.uid if hub_pod is not None else "") or (reservation.pod_uid if reservation else "")
            made = await self._made_for(hub_uid, hub_pod, rid)
            if made is not None:
                if reservation is not None:
                    await self._delete_configmap(rid)  # the pod holds the capacity now
                log.info("release of %s: pod %s/%s was made under it (bound)", rid, made["namespace"], made["name"])
                return False, made
            wait = self._create_may_land(rid, reservation)
            if wait > 0:
                raise Refused(
                    503,
                    "Settling",
                    f"a pod create under reservation {rid} may still take effect in the member for {wait:.0f} s",
                    retry_after=wait,
                )
            return await self._delete_configmap(rid), None

    async def find(self, hub_pod: HubPodRef) -> dict[str, str] | None:
        """The member pod made for ``hub_pod`` (finished or not), or None: the view's, else the member's own answer
        for the hub pod's name. One being deleted is None: it is no copy another member's may be deleted for."""
        await self._view.current()
        seen = self._view.hub_pod(hub_pod.uid)
        if seen is not None:
            return None if seen.deleting else seen.summary()
        if not hub_pod.name:
            return None
        namespace = hub_pod.namespace or "default"
        pod = await self._earlier_bind(f"/api/v1/namespaces/{namespace}/pods", hub_pod.name, "", hub_pod.uid)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return None
        return member_pod_summary(pod)

    async def _made_for(self, hub_uid: str, hub_pod: HubPodRef | None, rid: str) -> dict[str, str] | None:
        """The member pod made for hub pod ``hub_uid`` (or under ``rid``), from the view or -- with the hub pod's name
        -- from the member itself, so a pod the watch has not brought yet is found too."""
        if hub_uid:
            seen = self._view.hub_pod(hub_uid)
            if seen is not None:
                return seen.summary()
        if hub_pod is None or not hub_pod.name:
            return None
        path = f"/api/v1/namespaces/{hub_pod.namespace or 'default'}/pods/{hub_pod.name}"
        pod = await self._earlier_bind(path.rsplit("/", 1)[0], hub_pod.name, rid, hub_uid)
        return None if pod is None else member_pod_summary(pod)

    def _create_may_land(self, rid: str, reservation: Reservation | None) -> float:
        """Seconds during which a pod create under ``rid`` may still take effect in the member (0: none can): one
        this process sent without an answer, or one another agent process (a predecessor, or an older hub's) sent
        for a reservation this process did not make (known by id, not by its timestamps: the clock may read the
        same, or less, after a restart)."""
        now = self.clock.now()
        horizon = now - self.in_flight_seconds
        if any(sent <= horizon for sent in self._unknown_creates.values()):
            self._unknown_creates = {r: sent for r, sent in self._unknown_creates.items() if sent > horizon}
        sent = self._unknown_creates.get(rid)
        wait = 0.0 if sent is None else sent + self.in_flight_seconds - now
        if reservation is not None and reservation.id not in self._made_here:
            wait = max(wait, self._others_since + self.in_flight_seconds - now)
        return max(wait, 0.0)

    async def sweep_expired(self) -> list[str]:
        """Delete every reservation past its ``expiresAt``; the ids released. One under which a pod was made is
        deleted as bound (its pod holds the capacity); one whose create may still land is left for a later sweep."""
        released: list[str] = []
        async with self._lock:
            now = self.clock.now()
            stored = await self.reservations()
            self._made_here.intersection_update(r.id for r in stored)  # those another process deleted
            for reservation in stored:
                if reservation.expires_at > now:
                    continue
                made = self._view.hub_pod(reservation.pod_uid) if reservation.pod_uid else None
                if made is not None:
                    if await self._delete_configmap(reservation.id):
                        log.info(
                            "reservation %s expired: its pod %s/%s was made (bound)",
                            reservation.id,
                            made.namespace,
                            made.name,
                        )
                    continue
                if self._create_may_land(reservation.id, reservation) > 0:
                    continue
                if await self._delete_configmap(reservation.id):
                    released.append(reservation.id)
        for rid in released:
            log.info("reservation %s expired unconfirmed: released", rid)
        return released

    # ------------------------------------------------------------------------------------------------ fencing

    async def _fenced(self, token: int) -> None:
        """Refuse a hub whose fencing token is older than the newest the member has seen; record a newer one in the
        member before acting on it. Call with the lock held (it also brings the view up to date)."""
        await self._view.current()
        newest = max(self._view.fence, self._fence_written)
        if token < newest:
            raise Refused(
                409,
                FENCED_REASON,
                f"fencing token {token} is older than {newest}, the newest this member has seen: another hub leads",
            )
        if token == newest:
            return
        fence = fence_configmap(token, self.namespace)
        try:
            await self.client.request("POST", self._configmaps, body=fence, retry=False)
        except KubeApiError as error:
            if error.status != 409:
                raise
        self._fence_written = token
        self._others_since = self.clock.now()
        if newest:
            with contextlib.suppress(KubeApiError):  # left behind: only the newest token counts
                await self.client.request("DELETE", f"{self._configmaps}/{FENCE_PREFIX}{newest}", retry=False)
        log.info("fencing token raised to %d: older hubs are refused", token)

    # ---------------------------------------------------------------------------------------------- bind

    def _member_pod(self, manifest: Mapping[str, Any], reservation: Reservation) -> dict[str, Any]:
        metadata = manifest.get("metadata") or {}
        labels = dict(metadata.get("labels") or {})
        labels[MANAGED_BY_LABEL] = MANAGED_BY_VALUE
        annotations = dict(metadata.get("annotations") or {})
        annotations[RESERVATION_ANNOTATION] = reservation.id
        hub_uid = reservation.pod_uid or str(metadata.get("uid") or "")
        if hub_uid:
            annotations[HUB_POD_UID_ANNOTATION] = hub_uid
        spec = {key: value for key, value in (manifest.get("spec") or {}).items() if key not in _HUB_ONLY_SPEC}
        affinity = {key: value for key, value in (spec.get("affinity") or {}).items() if key != "nodeAffinity"}
        if affinity:
            spec["affinity"] = affinity
        else:
            spec.pop("affinity", None)
        spec["nodeName"] = reservation.node
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": metadata.get("name"),
                "namespace": metadata.get("namespace") or "default",
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }

    async def bind(
        self, rid: str, manifest: Mapping[str, Any], token: int = 0, expires_at: float | None = None
    ) -> tuple[dict[str, str], bool]:
        """Create ``manifest``'s pod under reservation ``rid``; (the member's pod, whether it is new). A hub pod that
        already has a pod in the member gets that pod, whatever the reservation
        (docs/explanation/cross-cluster-commit.md#the-agent-tells-the-truth). ``expires_at``: the reservation as
        the hub's reserve was answered; another one under the same id (made again by a reserve that arrived after
        a release) is not it: NotFound."""
        metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
            raise Refused(400, "Invalid", "pod.metadata.name: required")
        namespace = str(metadata.get("namespace") or "default")
        name = str(metadata["name"])
        pod_path = f"/api/v1/namespaces/{namespace}/pods"
        async with self._lock:
            await self._fenced(token)
            # The view has every reservation this agent made; one another agent process made a moment ago may
            # not have reached it yet, so a miss is asked of the member.
            reservation = self._view.reservation(rid) or await self._stored(rid)
            hub_uid = str(metadata.get("uid") or "") or (reservation.pod_uid if reservation is not None else "")
            existing = self._view.hub_pod(hub_uid) if hub_uid else None
            if existing is not None:
                if reservation is not None:
                    await self._delete_configmap(rid)  # its pod was made by an earlier bind: nothing more to hold
                return existing.summary(), False
            if reservation is None:
                earlier = await self._earlier_bind(pod_path, name, rid, hub_uid)
                if earlier is not None:
                    return member_pod_summary(earlier), False
                raise Refused(404, "NotFound", f"reservation {rid} does not exist (expired, released or never made)")
            if expires_at is not None and reservation.expires_at != expires_at:
                raise Refused(
                    404,
                    "NotFound",
                    f"reservation {rid} the hub holds (until {expires_at!r}) was released; the one under that id now "
                    f"(until {reservation.expires_at!r}) was made by a later reserve",
                )
            wait = self._create_may_land(rid, reservation)
            if wait > 0:
                # An earlier bind's create may still land: a second create would make the pod now, and the first
                # bring it back once it was deleted. Neither a pod nor "none" is certain yet.
                raise Refused(503, "Settling", f"an earlier create under {rid} may still take effect", retry_after=wait)
            if reservation.expires_at <= self.clock.now():
                await self._delete_configmap(rid)
                raise Refused(410, "Expired", f"reservation {rid} expired before the bind")
            try:
                wanted = self._view.reader.requests(dict(manifest), "pod")
            except KubeschedError as error:
                raise Refused(400, "Invalid", str(error)) from error
            over = {k: v for k, v in wanted.items() if v > reservation.requests.get(k, 0)}
            if over:
                raise Refused(409, "Conflict", f"the pod requests more than reservation {rid} holds: {over}")
            body = self._member_pod(manifest, reservation)
            created = True
            try:
                pod = await self.client.request(
                    "POST",
                    pod_path,
                    query={"timeout": f"{max(int(self.request_timeout), 1)}s"},  # the member gives up on it then
                    body=body,
                    retry=False,
                    timeout=self.request_timeout,
                )
            except KubeTransportError:
                self._unknown_creates[rid] = self.clock.now()  # it may still be written: a release must wait
                raise
            except KubeApiError as error:
                if error.status >= 500:  # 504: its own timeout passed, the write may still land -- as if unanswered
                    self._unknown_creates[rid] = self.clock.now()
                    raise
                if error.status != 409:
                    raise Refused(422, "MemberRejected", f"the member: {error}") from error
                earlier = await self._earlier_bind(pod_path, name, rid, hub_uid)
                if earlier is None:
                    taken = f"pod {namespace}/{name} exists in the member"
                    raise Refused(409, "Conflict", taken) from error
                pod, created = earlier, False
            self._unknown_creates.pop(rid, None)
            if created:
                made = _as_sent(pod, body, wanted)
                if made is None:  # the member changed what it was sent: what it answered is parsed in full
                    try:
                        made = self._view.reader.member_pod(pod, "the member's pod")
                    except KubeschedError as error:  # the member's own answer: counted once its watch brings it
                        log.warning("the member's answer to the bind of %s does not parse: %s", rid, error)
                if made is not None:
                    self._view.bound(made, pod)
            await self._delete_configmap(rid)
            log.info("bound %s/%s to node %s under %s", namespace, name, reservation.node, rid)
            return member_pod_summary(pod), created

    async def _earlier_bind(self, pod_path: str, name: str, rid: str, hub_uid: str = "") -> dict[str, Any] | None:
        """The member pod ``name`` if an earlier bind made it: under ``rid``, or -- with ``hub_uid`` -- for the same
        hub pod under an earlier attempt's reservation (whose answer the hub never got)."""
        try:
            pod = await self._get(f"{pod_path}/{name}")
        except KubeApiError as error:
            if is_status(error, 404):
                return None
            raise
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        same_hub_pod = bool(hub_uid) and annotations.get(HUB_POD_UID_ANNOTATION) == hub_uid
        same_reservation = bool(rid) and annotations.get(RESERVATION_ANNOTATION) == rid
        return dict(pod) if same_reservation or same_hub_pod else None

    async def delete_pod(self, namespace: str, name: str, hub_uid: str, token: int = 0) -> bool:
        """Delete the member pod ``namespace/name`` that stands for hub pod ``hub_uid`` (its hub pod was deleted);
        whether this call deleted it (False: there is none, or it is being deleted already). A pod of that name for
        another hub pod is refused as ``Conflict``: the agent deletes only what it made for this hub pod."""
        if not hub_uid:
            raise Refused(400, "Invalid", "hubPodUID: required")
        async with self._lock:
            await self._fenced(token)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            pod = await self._get(path)
        except KubeApiError as error:
            if is_status(error, 404):
                return False
            raise
        metadata = pod.get("metadata") or {}
        if (metadata.get("annotations") or {}).get(HUB_POD_UID_ANNOTATION) != hub_uid:
            raise Refused(409, "Conflict", f"pod {namespace}/{name} in the member is not hub pod {hub_uid}'s")
        if metadata.get("deletionTimestamp"):
            return False  # its kubelet is stopping it: deleting again would only say so twice
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": metadata.get("uid")}}
        try:
            await self.client.request("DELETE", path, body=options, retry=False, timeout=self.request_timeout)
        except KubeApiError as error:
            if is_status(error, 404):
                return False
            raise
        log.info("deleted %s/%s, made for hub pod %s", namespace, name, hub_uid)
        return True


def _same_requests(answered: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """Whether the pod spec the member answered has the request fields of the one the agent sent: what
    :func:`~kubesched.api.resources.pod_requests` reads (each container's and init container's resources and
    restart policy, the pod's overhead and pod-level resources). A real API server defaults other container
    fields, so the containers are compared field by field when they differ as wholes."""
    if answered.get("overhead") != sent.get("overhead") or answered.get("resources") != sent.get("resources"):
        return False
    for key in ("containers", "initContainers"):
        mine, theirs = sent.get(key) or [], answered.get(key) or []
        if mine == theirs:
            continue
        if not isinstance(theirs, list) or len(theirs) != len(mine):
            return False
        for ours, made in zip(mine, theirs, strict=True):
            if not isinstance(made, Mapping) or not isinstance(ours, Mapping):
                return False
            if made.get("resources") != ours.get("resources") or made.get("restartPolicy") != ours.get("restartPolicy"):
                return False
    return True


def _as_sent(answer: Mapping[str, Any], sent: Mapping[str, Any], requests: Mapping[str, int]) -> MemberPod | None:
    """The view's record of the pod the member created, read from its answer without parsing it again: its
    requests are the hub manifest's (``requests``) when the answer's request fields are the ones the agent sent,
    its workload key is its app label when it has no owner (the agent sends none). None when the member changed any
    of that (an admission plugin defaulting requests, say), or answered fields of another shape: the caller then
    parses the answer in full."""
    metadata, spec, status = answer.get("metadata"), answer.get("spec"), answer.get("status") or {}
    sent_spec = sent["spec"]
    if not (isinstance(metadata, Mapping) and isinstance(spec, Mapping) and isinstance(status, Mapping)):
        return None
    if metadata.get("ownerReferences") or not _same_requests(spec, sent_spec):
        return None
    uid, namespace, node = metadata.get("uid"), metadata.get("namespace"), spec.get("nodeName")
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    phase = status.get("phase") or ""
    if not (
        isinstance(uid, str)
        and isinstance(namespace, str)
        and isinstance(node, str)
        and isinstance(phase, str)
        and isinstance(labels, Mapping)
        and isinstance(annotations, Mapping)
    ):
        return None
    app = app_workload_key(namespace, labels)
    hub_uid = annotations.get(HUB_POD_UID_ANNOTATION) or ""
    if not isinstance(hub_uid, str) or (app is not None and not isinstance(app[2], str)):
        return None
    workloads = (app,) if app is not None else ()
    reservation = annotations.get(RESERVATION_ANNOTATION) or ""
    name = metadata.get("name")
    if not isinstance(reservation, str) or not isinstance(name, str):
        return None
    return MemberPod(
        uid, node, phase, running_on(node, phase), requests, hub_uid, workloads, namespace, name, reservation
    )


def member_pod_summary(pod: Mapping[str, Any]) -> dict[str, str]:
    """A member pod manifest as the agent's answers name it."""
    metadata = pod.get("metadata") or {}
    return {
        "namespace": str(metadata.get("namespace") or ""),
        "name": str(metadata.get("name") or ""),
        "uid": str(metadata.get("uid") or ""),
        "node": str((pod.get("spec") or {}).get("nodeName") or ""),
    }
