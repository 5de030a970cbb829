"""Reconciliation: after a member is heard from, any copy of a hub pod it should not run is deleted -- never the
only one.

Who calls it: :class:`~kubesched.live.hub.HubPlane`, after every state refresh of a member (:meth:`Reconciler.offer`),
while the process leads. The member's state names, by hub pod uid, every pod an agent made there
(``podPhases``, ``podNames``). For each (docs/explanation/cross-cluster-commit.md#reconciliation):

* its hub pod is bound to this member, or not bound at all: it is kept (an unbound one is adopted by the
  scheduler, :mod:`~kubesched.plugins.multicluster.reservation`);
* its hub pod is bound to another member: the copy here is deleted only once the hub API server confirms that
  binding (same uid) **and** the other member's agent confirms its own copy exists (one being deleted is no
  confirmation); otherwise it is kept and looked at again after the next refresh;
* its hub pod does not exist: deleted once the hub API server answers that no pod of that name has that uid
  (a finished hub pod, which the informers no longer list, still exists: its copy is kept);
* a copy deleted -- or found being deleted already, its kubelet stopping it -- is not looked at again for
  :data:`DELETED_RECHECK_SECONDS`: the member still reports it meanwhile, and it is not deleted (nor recorded) twice.

Each deletion goes through the member's agent (which deletes only the pod made for that hub pod) with the hub's
fencing token, and is an audit record: result ``Deleted``, the member as target, the reason as message.

The hub API server is read through a :class:`HubPodReader` (the live hub's is :class:`ApiHubPods`, a GET through
its client), and members are reached through their :class:`~kubesched.federation.agent_client.MemberEndpoint`, so
the model-based test of the commit protocol runs the same reconciliation over an in-memory hub.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.api.objects import Pod
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.clock import Clock
from kubesched.federation.agent_client import AgentError, MemberEndpoint
from kubesched.federation.cache import ClusterStateCache
from kubesched.framework.types import PodInfo
from kubesched.scheduler.results import AttemptObserver, AttemptRecord

__all__ = ["DELETED", "ApiHubPods", "Deletion", "HubPodReader", "Reconciler"]

log = logging.getLogger(__name__)

DELETED = "Deleted"
"""The audit record's result for a copy reconciliation deleted."""
ALIVE_RECHECK_SECONDS = 300.0  # a hub pod found to exist (finished, so not listed) is not asked about again before
DELETED_RECHECK_SECONDS = 300.0  # nor a copy deleted (or found being deleted): its kubelet stops it meanwhile


class HubPodReader(Protocol):
    """The hub API server's current copy of a hub pod, read past any informer."""

    async def hub_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The pod ``namespace/name`` as the hub API server has it now; None when there is none of that name."""
        ...


class ApiHubPods:
    """:class:`HubPodReader` over the hub's API client (a GET of the pod)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def hub_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            found = await self.client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise
        return dict(found)


@dataclass(frozen=True, slots=True)
class Deletion:
    """One copy deleted: in ``member``, the pod ``namespace/name`` made for hub pod ``hub_uid``, and why."""

    member: str
    namespace: str
    name: str
    hub_uid: str
    reason: str


class Reconciler:
    """Deletes the copies a member should not run (module doc)."""

    def __init__(
        self,
        hub: HubPodReader,
        links: Mapping[str, MemberEndpoint],
        cache: ClusterStateCache,
        hub_pods: Mapping[str, Pod],
        *,
        clock: Clock,
        profile: str,
        token: Callable[[], int],
        timeout: float,
        observer: AttemptObserver | None = None,
    ) -> None:
        self.hub = hub
        self.links = links
        self.cache = cache
        self.hub_pods = hub_pods
        self.clock = clock
        self.profile = profile
        self.token = token
        self.timeout = timeout
        self.observer = observer
        self.leading = False
        self.deleted: list[Deletion] = []
        self._running: dict[str, asyncio.Task[None]] = {}
        self._alive: dict[str, float] = {}  # hub pod uid -> until when it is known to exist though not listed
        self._deleting: dict[tuple[str, str], float] = {}  # (member, hub pod uid) -> until when its copy is left be

    def offer(self, member: str) -> None:
        """Look at ``member``'s copies in the background (one pass at a time per member)."""
        if not self.leading or member in self._running:
            return
        state = self.cache.states.get(member)
        if state is None or not self._suspects(member, state.pod_phases):
            return
        task = asyncio.get_running_loop().create_task(self._pass(member), name=f"reconcile {member}")
        self._running[member] = task
        task.add_done_callback(lambda _: self._running.pop(member, None))

    def _suspects(self, member: str, phases: Mapping[str, str]) -> list[str]:
        """The hub pod uids of ``member``'s copies that may have to go: bound elsewhere, or not listed."""
        now = self.clock.now()
        if any(until < now for until in self._deleting.values()):
            self._deleting = {key: until for key, until in self._deleting.items() if until >= now}
        found = []
        for uid in phases:
            if (member, uid) in self._deleting:
                continue
            pod = self.hub_pods.get(uid)
            if pod is None:
                if self._alive.get(uid, float("-inf")) < now:
                    found.append(uid)
            elif pod.spec.node_name and pod.spec.node_name != member:
                found.append(uid)
        return found

    async def _pass(self, member: str) -> None:
        state = self.cache.states.get(member)
        if state is None:
            return
        for uid in self._suspects(member, state.pod_phases):
            try:
                await self._settle_copy(member, uid, state.pod_names.get(uid, ""))
            except (AgentError, KubeApiError, KubeTransportError) as error:  # looked at again after a refresh
                log.warning("reconciling the copy of hub pod %s in %s: %s", uid, member, error)

    async def _settle_copy(self, member: str, uid: str, where: str) -> None:
        listed = self.hub_pods.get(uid)
        namespace, _, name = where.partition("/")
        if not name and listed is not None:
            namespace, name = listed.metadata.namespace, listed.metadata.name
        if not name:
            log.warning("member %s runs a copy of hub pod %s but does not say its name: left alone", member, uid)
            return
        hub = await self.hub.hub_pod(namespace, name)
        if hub is None or (hub.get("metadata") or {}).get("uid") != uid:
            await self._delete(member, uid, namespace, name, f"its hub pod {namespace}/{name} ({uid}) no longer exists")
            return
        bound_to = str((hub.get("spec") or {}).get("nodeName") or "")
        if not bound_to:
            return  # pending: the scheduler adopts a copy
        if bound_to == member:
            self._alive[uid] = self.clock.now() + ALIVE_RECHECK_SECONDS
            return
        other = self.links.get(bound_to)
        if other is None:
            return
        found = await other.find_pod((uid, namespace, name), timeout=self.timeout)
        if found is None:
            log.warning(
                "hub pod %s/%s is bound to %s, which runs no copy of it; the copy in %s is kept",
                namespace, name, bound_to, member,
            )  # fmt: skip
            return
        reason = f"hub pod {namespace}/{name} is bound to cluster {bound_to}, which runs its copy {found.uid}"
        await self._delete(member, uid, namespace, name, reason)

    async def _delete(self, member: str, uid: str, namespace: str, name: str, reason: str) -> None:
        link = self.links.get(member)
        if link is None:
            return
        deleted = await link.delete_pod(namespace, name, uid, token=self.token(), timeout=self.timeout)
        self._deleting[(member, uid)] = self.clock.now() + DELETED_RECHECK_SECONDS
        if not deleted:  # gone, or being deleted already (by the hub when its hub pod was deleted, say)
            return
        deletion = Deletion(member, namespace, name, uid, reason)
        self.deleted.append(deletion)
        log.info("deleted the copy of %s/%s in %s: %s", namespace, name, member, reason)
        self._record(deletion)

    def _record(self, deletion: Deletion) -> None:
        if self.observer is None:
            return
        listed = self.hub_pods.get(deletion.hub_uid)
        pod = listed or Pod.from_dict(  # the hub pod is gone: the record names it as the member's copy does
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"namespace": deletion.namespace, "name": deletion.name, "uid": deletion.hub_uid},
                "spec": {"schedulerName": self.profile, "containers": [{"name": "gone", "image": "unknown"}]},
            },
            f"the hub pod of the copy in {deletion.member}",
        )
        now = self.clock.now()
        record = AttemptRecord(
            pod=PodInfo(pod),
            profile=pod.spec.scheduler_name or self.profile,
            result=DELETED,
            attempts=0,
            chosen_node=deletion.member,
            message=f"deleted the copy in cluster {deletion.member}: {deletion.reason}",
            target_kind="cluster",
            finished_at=now,
        )
        try:
            self.observer.on_attempt(record)
        except Exception:  # the deletion happened; a sink that fails counts its own loss
            log.exception("the audit record of the deletion in %s could not be written", deletion.member)

    async def aclose(self) -> None:
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
