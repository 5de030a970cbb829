"""The live cross-cluster hub: ``kubesched run`` with cluster profiles places their pods onto member clusters.

Who calls it: :class:`kubesched.live.run.LiveScheduler` builds one :class:`HubPlane` when the configuration has
cluster profiles (:func:`kubesched.federation.profiles.cluster_profiles`), beside the node plane that schedules the
node profiles onto the hub's own Nodes. The plane is a second scheduler whose nodes are the members' super nodes,
over :class:`~kubesched.live.hub_backend.HubBackend` (the kube backend watching MemberClusters instead of Nodes,
with its own API client), one :class:`~kubesched.live.members.MemberLink` per member registered in the state cache
and the committer, and, while this process leads, the writers of MemberCluster status and hub pod phases and the
:class:`~kubesched.live.reconcile.Reconciler` that deletes copies a member should not run. What it does for
operators (bind to the cluster's name, mirror the member pod's phase, delete member pods, write status, the
``podgc`` requirement) and why: docs/explanation/cross-cluster.md#the-live-hub; the commit protocol:
docs/explanation/cross-cluster-commit.md. Only the leading process deletes member pods (with its fencing token); a
new leader deletes those of the terminating hub pods it lists, and a deletion that failed is tried again after the
member's next refresh.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.api.multicluster import GROUP, VERSION, MemberCluster
from kubesched.api.objects import Pod
from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.backends.kube.kubeconfig import ClusterConnection
from kubesched.backends.kube.reflector import Reflector, ResourceKind, object_key
from kubesched.clock import Clock, sleep
from kubesched.clusterapi.contract import CLUSTER_COMMIT_SERVICE, CLUSTER_STATE_SERVICE
from kubesched.config.types import SchedulerConfiguration
from kubesched.federation.agent_client import AgentError, AgentRefused
from kubesched.federation.cache import ClusterStateCache, MemberRefresh
from kubesched.federation.commit import AgentCommitter
from kubesched.federation.wire import FENCED_REASON
from kubesched.framework.runtime.registry import Registry
from kubesched.framework.runtime.services import Services
from kubesched.live.hub_backend import HubBackend, SuperNodes
from kubesched.live.member_status import MemberStatusWriter, member_status
from kubesched.live.members import MemberLink
from kubesched.live.pod_phases import PhaseMirror
from kubesched.live.reconcile import ApiHubPods, Reconciler
from kubesched.policy.clients import policy_services
from kubesched.scheduler.diagnosis import TARGET_CLUSTERS
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.results import AttemptObserver
from kubesched.scheduler.scheduler import Scheduler

__all__ = ["MEMBER_CLUSTERS", "HubOptions", "HubPlane"]

log = logging.getLogger(__name__)

REAP_ATTEMPTS = 5
REAP_BACKOFF_SECONDS = 1.0  # doubling: 1, 2, 4, 8 s between the attempts to delete a member pod
MEMBER_CLUSTERS = ResourceKind("memberclusters", f"/apis/{GROUP}/{VERSION}/memberclusters", MemberCluster.from_dict)


@dataclass(frozen=True, slots=True)
class HubOptions:
    """How the hub treats its members (defaults for production; tests shorten them)."""

    refresh_interval: float = 5.0  # seconds between two state refreshes of a member
    refresh_deadline: float = 2.0  # a refresh (and each agent call) gets this long
    status_min_interval: float = 2.0  # a changed status is written at most this often per member
    status_resync_interval: float = 30.0  # an unchanged one this often (observedAt stays current)
    agent_namespace: str = "kubesched-system"  # push mode: where the in-hub agent keeps reservations


class _MemberFeed:
    """The MemberCluster reflector's handler: every change goes to the plane."""

    def __init__(self, plane: HubPlane) -> None:
        self.plane = plane

    def on_add(self, obj: MemberCluster) -> None:
        self.plane.member_seen(obj)

    def on_update(self, old: MemberCluster, new: MemberCluster) -> None:
        self.plane.member_seen(new)

    def on_delete(self, obj: MemberCluster) -> None:
        self.plane.member_gone(obj.name)

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        self.plane.member_invalid(object_key(raw), error)


class HubPlane:
    """The cluster profiles' scheduler over the members. ``start``, ``run_leading``, ``aclose``."""

    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Registry,
        connection: ClusterConnection,
        *,
        clock: Clock,
        options: HubOptions | None = None,
        seed: int | None = None,
        observer: AttemptObserver | None = None,
        hostname: str | None = None,
        watch_timeout: tuple[int, int] | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.options = options or HubOptions()
        self.clock = clock
        connect = config.client_connection
        self.client = KubeClient(connection, qps=connect.qps, burst=connect.burst, user_agent="kubesched-hub")
        self.links: dict[str, MemberLink] = {}
        self.members: dict[str, MemberCluster] = {}
        self.invalid: dict[str, str] = {}  # MemberClusters that do not decode: name -> the error
        self.cache = ClusterStateCache([], clock=clock, on_refresh=self._refreshed)
        self.committer = AgentCommitter({})
        self.super_nodes = SuperNodes(self.cache)
        self.statuses = MemberStatusWriter(
            self.client,
            clock,
            min_interval=self.options.status_min_interval,
            resync_interval=self.options.status_resync_interval,
        )
        self.backend = HubBackend(
            self.client,
            [profile.scheduler_name for profile in config.profiles],
            self.super_nodes,
            extra=self._member_reflector,
            clock=clock,
            hostname=hostname,
            watch_timeout=watch_timeout,
            on_hub_pod_gone=self._hub_pod_gone,
        )
        services = Services(policy_services(clock))
        services.register(CLUSTER_STATE_SERVICE, lambda spec: self.cache)
        services.register(CLUSTER_COMMIT_SERVICE, lambda spec: self.committer)
        self.scheduler = Scheduler(
            config,
            registry,
            self.backend,
            clock=clock,
            seed=seed,
            observer=observer,
            services=services,
            targets=TARGET_CLUSTERS,
            metrics=metrics,
        )
        self.backend.subscribe(self.scheduler.event_handlers)
        self.phases = PhaseMirror(self.client)
        self.reconciler = Reconciler(
            ApiHubPods(self.client),
            self.links,
            self.cache,
            self.backend.hub_pods,
            clock=clock,
            profile=config.profiles[0].scheduler_name,
            token=lambda: self.committer.fencing_token,
            timeout=self.options.refresh_deadline,
            observer=observer,
        )
        self._closers: set[asyncio.Task[None]] = set()
        self._reapers: dict[str, asyncio.Task[None]] = {}  # hub pod uid -> the task deleting its member pod
        self._to_reap: dict[str, Pod] = {}  # deleted hub pods whose member pod is not deleted yet, by uid (leading)
        self._reaping: set[str] = set()  # uids of terminating hub pods whose member pod was deleted
        self._leading = False
        self.reaped: list[tuple[str, str, bool]] = []  # (cluster, hub pod key, whether a member pod was deleted)

    def _member_reflector(self, options: dict[str, Any]) -> Sequence[Reflector[Any]]:
        return [Reflector(self.client, MEMBER_CLUSTERS, _MemberFeed(self), **options)]

    # ---------------------------------------------------------------------------------- member changes

    def member_seen(self, member: MemberCluster) -> None:
        name = member.name
        self.invalid.pop(name, None)
        known = self.members.get(name)
        self.members[name] = member
        link = self.links.get(name)
        if link is None or known is None or known.connection != member.connection:
            if link is not None:
                self._close_later(link)
            link = MemberLink(
                name,
                member.connection,
                self.client,
                clock=self.clock,
                agent_namespace=self.options.agent_namespace,
                timeout=self.options.refresh_deadline,
            )
            self.links[name] = link
            self.committer.set_endpoint(name, link)
            self.cache.add(
                MemberRefresh(
                    name, link, interval=self.options.refresh_interval, deadline=self.options.refresh_deadline
                )
            )
            log.info("MemberCluster %s: %s mode", name, link.mode)
        self.super_nodes.member_changed(member)
        self._offer_status(name)

    def member_gone(self, name: str) -> None:
        self._drop(name)
        self.statuses.forget(name)
        log.info("MemberCluster %s: removed", name)

    def _drop(self, name: str) -> None:
        self.members.pop(name, None)
        self.invalid.pop(name, None)
        link = self.links.pop(name, None)
        if link is not None:
            self._close_later(link)
        self.committer.remove_endpoint(name)
        self.cache.remove(name)
        self.super_nodes.member_removed(name)

    def member_invalid(self, name: str, error: Exception) -> None:
        """A MemberCluster that does not decode is no member (the reflector has already said it is gone, if it
        was one); its status says why."""
        if self.invalid.get(name) != str(error):
            log.warning("MemberCluster %s cannot be read and is not used: %s", name, error)
        self._drop(name)  # its written status is kept: writing it again would be a change of the object again
        self.invalid[name] = str(error)
        self.statuses.offer(name, member_status(None, None, problem=("Invalid", str(error))), None)

    def _refreshed(self, name: str) -> None:
        self.super_nodes.recompute(name)
        self._offer_status(name)
        self._mirror_phases(name)
        self.reconciler.offer(name)
        for uid, pod in list(self._to_reap.items()):  # a deletion that failed is tried again once the member answers
            if pod.spec.node_name == name:
                self._start_reap(uid)

    def _mirror_phases(self, name: str) -> None:
        state, info = self.cache.states.get(name), self.scheduler.cache.node(name)
        if state is None or info is None:
            return
        cache = self.scheduler.cache
        self.phases.offer(state, [pod.pod for uid, pod in info.pods.items() if not cache.is_assumed(uid)])

    def _offer_status(self, name: str) -> None:
        link = self.links.get(name)
        if link is None or name not in self.cache:
            return
        health = self.cache.health(name)
        problem = (link.problem.reason, str(link.problem)) if link.problem is not None else None
        status = member_status(self.cache.states.get(name), health, problem=problem, mode=link.mode)
        self.statuses.offer(name, status, health.last_success_at)

    def _hub_pod_gone(self, pod: Pod, deleted: bool) -> None:
        uid = pod.metadata.uid
        self.phases.forget(uid)
        if uid in self._reaping:
            if deleted:  # the DELETED after the hub's own final delete (or someone's force): nothing more comes
                self._reaping.discard(uid)
            return
        if not self._leading:
            return  # the leader deletes its copy; should this process take over, it finds what is left (module doc)
        self._to_reap[uid] = pod
        self._start_reap(uid)

    def _start_reap(self, uid: str) -> None:
        """Delete the member pod of hub pod ``uid`` in the background (while this process leads)."""
        pod = self._to_reap.get(uid)
        if pod is None or not self._leading or uid in self._reapers:
            return
        task = asyncio.get_running_loop().create_task(self._reap(pod), name=f"delete member pod of {pod.key}")
        self._reapers[uid] = task
        task.add_done_callback(lambda _: self._reapers.pop(uid, None))

    def _reap_waiting(self) -> None:
        """Start deleting the member pods of the hub pods that were being deleted before this process led: every
        terminating hub pod bound to a member (those gone meanwhile are reconciliation's: their hub pod no longer
        exists)."""
        for uid, pod in list(self.backend.hub_pods.items()):
            if pod.metadata.deletion_timestamp is not None and pod.spec.node_name in self.links:
                self._to_reap.setdefault(uid, pod)
        for uid in list(self._to_reap):
            self._start_reap(uid)

    def _hub_path(self, pod: Pod) -> str:
        return f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}"

    async def _hub_pod_now(self, pod: Pod) -> str:
        """``"gone"``, ``"terminating"`` or ``"live"`` (it only left the watch's selector): the hub pod as the
        API server has it now."""
        try:
            current = await self.client.request("GET", self._hub_path(pod))
        except KubeApiError as error:
            if error.status == 404:
                return "gone"
            raise
        metadata = current.get("metadata") or {}
        if metadata.get("uid") != pod.metadata.uid:
            return "gone"
        return "terminating" if metadata.get("deletionTimestamp") else "live"

    async def _finish(self, pod: Pod) -> None:
        """Remove the terminating hub pod, as its kubelet would once the containers stopped."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        options["preconditions"] = {"uid": pod.metadata.uid}
        try:
            await self.client.request("DELETE", self._hub_path(pod), body=options)
        except KubeApiError as error:
            if error.status not in (404, 409):  # gone already, or another pod of that name now
                raise

    async def _reap(self, pod: Pod) -> None:
        """Delete the member pod of the deleted hub pod ``pod`` (module doc); never raises. One that does not succeed
        stays to do: tried again after the member's next refresh, or by this process when it leads again."""
        cluster, uid = pod.spec.node_name, pod.metadata.uid
        for attempt in range(REAP_ATTEMPTS):
            if attempt:
                await sleep(self.clock, REAP_BACKOFF_SECONDS * 2 ** (attempt - 1))
            link = self.links.get(cluster)
            if link is None:
                self._to_reap.pop(uid, None)
                return  # the MemberCluster is gone too: nothing to reach it by
            try:
                now = await self._hub_pod_now(pod)
                if now == "live":
                    self._to_reap.pop(uid, None)
                    return  # it left the watch's selector (terminated), it was not deleted
                deleted = await link.delete_pod(
                    pod.metadata.namespace,
                    pod.metadata.name,
                    uid,
                    token=self.committer.fencing_token,
                    timeout=self.options.refresh_deadline,
                )
                if now == "terminating":
                    self._reaping.add(uid)  # its DELETED comes after _finish and must not start a second deletion
                    await self._finish(pod)
            except AgentRefused as refusal:
                if refusal.reason == FENCED_REASON:  # another hub leads: it deletes it (this one, should it lead)
                    log.info(
                        "hub pod %s deleted; its pod in %s is left to the leading hub: %s", pod.key, cluster, refusal
                    )
                    return
                if refusal.status < 500:  # Conflict: the member's pod of that name is not this hub pod's
                    self._to_reap.pop(uid, None)
                    log.warning("hub pod %s deleted; its pod in %s is left: %s", pod.key, cluster, refusal)
                    return
                error: Exception = refusal
            except (AgentError, KubeApiError, KubeTransportError) as failure:
                error = failure
            else:
                self._to_reap.pop(uid, None)
                self.reaped.append((cluster, pod.key, deleted))
                log.info("hub pod %s deleted; its pod in %s %s", pod.key, cluster, "too" if deleted else "was gone")
                return
            log.warning("hub pod %s deleted; deleting its pod in %s failed: %s", pod.key, cluster, error)
        log.warning(
            "hub pod %s deleted; deleting its pod in %s is tried again after its next refresh", pod.key, cluster
        )

    def _close_later(self, link: MemberLink) -> None:
        task = asyncio.get_running_loop().create_task(link.aclose(), name=f"close member link {link.name}")
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    # -------------------------------------------------------------------------------------------- running

    @property
    def synced(self) -> bool:
        return self.backend.synced

    async def start(self) -> None:
        """Informers (the MemberCluster watch among them), writers, and the members' refreshers."""
        await self._check_crd()
        self.backend.start()
        await self.cache.start()

    async def _check_crd(self) -> None:
        """Say plainly when the hub does not serve MemberClusters: the watch would only retry (the CRD may be
        installed later, so this is not fatal; /readyz names the unsynced watch meanwhile)."""
        try:
            await self.client.request("GET", MEMBER_CLUSTERS.path, query={"limit": "1"}, retry=False)
        except KubeApiError as error:
            if error.status == 404:
                log.error(
                    "the hub API server does not serve %s (the MemberCluster CRD is not installed: kubectl apply -f "
                    "deploy/crds/memberclusters.yaml); the cluster profiles wait for it",
                    MEMBER_CLUSTERS.path,
                )
            else:
                log.warning("listing MemberClusters failed: %s", error)
        except KubeTransportError as error:
            log.warning("listing MemberClusters failed: %s", error)

    async def run_leading(self, stop: asyncio.Event, fencing_token: int = 0) -> None:
        """Schedule the cluster profiles' pods and write the members' statuses until ``stop``; every call to a
        member carries ``fencing_token`` (docs/explanation/cross-cluster-commit.md#fencing)."""
        self.committer.fencing_token = fencing_token
        writer = asyncio.create_task(self.statuses.run(), name="kubesched-member-status")
        self.phases.leading = self.reconciler.leading = self._leading = True
        self._reap_waiting()
        try:
            await self.scheduler.run(stop)
        finally:
            self.phases.leading = self.reconciler.leading = self._leading = False
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    async def aclose(self, *, drain_seconds: float = 5.0) -> None:
        reapers = list(self._reapers.values())
        for task in reapers:
            task.cancel()
        await asyncio.gather(*reapers, return_exceptions=True)
        await self.phases.aclose()
        await self.reconciler.aclose()
        await self.scheduler.close()
        await self.cache.close()
        for link in list(self.links.values()):
            await link.aclose()
        self.links.clear()
        await asyncio.gather(*self._closers, return_exceptions=True)
        await self.backend.aclose(drain_seconds=drain_seconds)
