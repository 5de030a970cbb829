"""The MemberClusters' ``status`` as the live hub writes it: what the cluster state cache last knew, for people.

Who calls it: :class:`kubesched.live.hub.HubPlane`, which :meth:`offers <MemberStatusWriter.offer>` each
member's status (built by :func:`member_status`) after every refresh and every change of the MemberCluster,
and runs :meth:`MemberStatusWriter.run` while it leads (a standby replica writes nothing). ``kubectl get mc``
then shows Ready and Observed, ``kubectl describe mc`` the reason.

What is written, through the status subresource (a JSON merge patch of the whole status, so a figure the
member stopped reporting is removed): ``ready`` and the ``Ready`` condition (they always agree, as the loader
requires), ``observedAt`` (the hub's clock when the member last answered), ``allocatable``, ``allocated``,
``nodeSummary`` and ``apiEnablements`` from the member's last state. The Ready condition's reason is a constant
word and its message says what is wrong, naming the field when it is the MemberCluster's: ``SecretNotFound``
(``spec.connection.agent.tokenSecretRef: Secret ns/name not found``), ``InvalidURL``, ``Invalid`` (the object
does not decode), ``MemberUnreachable``, ``MemberNotReady``, ``MemberReady``.

Rate limit: a member's status is written when it changed (``observedAt`` aside), at most once every
``min_interval`` seconds, and otherwise every ``resync_interval`` seconds so that ``observedAt`` stays current;
a failed write is tried again at the next tick. ``lastTransitionTime`` changes only with the condition's status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.multicluster import GROUP, VERSION
from kubesched.api.quantity import format_quantity
from kubesched.backends.kube.client import MERGE_PATCH, KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.backends.kube.writers import rfc3339
from kubesched.clock import Clock, sleep
from kubesched.clusterapi.contract import ClusterState, NodeBucket
from kubesched.federation.cache import MemberHealth
from kubesched.federation.wire import taint_to_json

__all__ = ["MemberStatusWriter", "member_status", "status_path"]

log = logging.getLogger(__name__)

TICK_SECONDS = 0.5


def status_path(name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/memberclusters/{name}/status"


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in sorted(amounts.items())}


def _api_enablements(apis: frozenset[str]) -> list[dict[str, Any]]:
    by_group_version: dict[str, list[str]] = {}
    for api in sorted(apis):
        group_version, _, kind = api.rpartition("/")
        if group_version and kind:
            by_group_version.setdefault(group_version, []).append(kind)
    return [
        {"groupVersion": gv, "resources": [{"kind": kind} for kind in kinds]}
        for gv, kinds in sorted(by_group_version.items())
    ]


def member_status(
    state: ClusterState | None,
    health: MemberHealth | None,
    *,
    problem: tuple[str, str] | None = None,
    mode: str = "pull",
) -> dict[str, Any]:
    """The status to write (without ``observedAt`` and ``lastTransitionTime``, which the writer adds).
    ``problem``: (reason, message) of a connection that cannot be built or an object that does not decode."""
    observed = health is not None and health.refreshes > 0
    if problem is not None:
        condition_status, (reason, message) = "False", problem
    elif health is not None and health.consecutive_failures > 0:
        condition_status, reason = ("Unknown" if observed else "False"), "MemberUnreachable"
        message = f"{health.consecutive_failures} refresh(es) in a row failed: {health.last_error}"
    elif state is None or not observed:
        condition_status, reason, message = "False", "NotYetObserved", "the hub has not heard from the member yet"
    elif not state.ready:
        condition_status, reason = "False", "MemberNotReady"
        message = state.ready_reason or "the member reports it is not ready"
    else:
        condition_status, reason = "True", "MemberReady"
        message = "the member's agent answered" if mode == "pull" else "the member's API server answered"
    body: dict[str, Any] = {
        "ready": condition_status == "True",
        "conditions": [{"type": "Ready", "status": condition_status, "reason": reason, "message": message}],
        "allocatable": None,
        "allocated": None,
        "nodeSummary": None,
        "apiEnablements": None,
    }
    if state is not None and observed:
        body["allocatable"] = _quantities(state.allocatable)
        body["allocated"] = _quantities(state.allocated)
        if state.nodes is not None:
            body["nodeSummary"] = [_bucket(bucket) for bucket in state.nodes]
        if state.apis is not None:
            body["apiEnablements"] = _api_enablements(state.apis)
    return body


def _bucket(bucket: NodeBucket) -> dict[str, Any]:
    written: dict[str, Any] = {"count": bucket.count, "free": _quantities(bucket.free)}
    if bucket.taints:
        written["taints"] = [taint_to_json(taint) for taint in bucket.taints]
    return written


@dataclass(slots=True)
class _Member:
    wanted: dict[str, Any]
    observed_at: float | None
    written: dict[str, Any] | None = None
    written_at: float | None = None
    transition: tuple[str, float] | None = None  # (condition status, since)


class MemberStatusWriter:
    """Writes the offered statuses (module doc); ``run`` until cancelled."""

    def __init__(
        self, client: KubeClient, clock: Clock, *, min_interval: float = 2.0, resync_interval: float = 30.0
    ) -> None:
        self.client = client
        self.clock = clock
        self.min_interval = min_interval
        self.resync_interval = resync_interval
        self._members: dict[str, _Member] = {}
        self.written = 0
        self.failed = 0

    def offer(self, name: str, status: dict[str, Any], observed_at: float | None) -> None:
        member = self._members.get(name)
        if member is None:
            self._members[name] = _Member(status, observed_at)
        else:
            member.wanted, member.observed_at = status, observed_at

    def forget(self, name: str) -> None:
        self._members.pop(name, None)

    def _due(self, member: _Member, now: float) -> bool:
        if member.written_at is None:
            return True
        since = now - member.written_at
        if member.wanted != member.written:
            return since >= self.min_interval
        return since >= self.resync_interval

    async def write_due(self) -> int:
        """Write every status that is due now; how many were written."""
        now = self.clock.now()
        count = 0
        for name, member in list(self._members.items()):
            if self._due(member, now) and await self._write(name, member, now):
                count += 1
        return count

    async def _write(self, name: str, member: _Member, now: float) -> bool:
        wanted = member.wanted
        condition = dict(wanted["conditions"][0])
        if member.transition is None or member.transition[0] != condition["status"]:
            member.transition = (condition["status"], now)
        condition["lastTransitionTime"] = rfc3339(member.transition[1])
        status = {**wanted, "conditions": [condition]}
        status["observedAt"] = rfc3339(member.observed_at) if member.observed_at is not None else None
        try:
            await self.client.request(
                "PATCH", status_path(name), body={"status": status}, content_type=MERGE_PATCH, retry=False
            )
        except KubeApiError as error:
            self.failed += 1
            if error.status == 404:  # deleted meanwhile: the watch will tell
                self._members.pop(name, None)
                return False
            log.warning("MemberCluster %s: writing its status failed: %s", name, error)
            member.written_at = now  # tried: wait min_interval before the next attempt
            return False
        except KubeTransportError as error:
            self.failed += 1
            log.warning("MemberCluster %s: writing its status failed: %s", name, error)
            member.written_at = now
            return False
        member.written, member.written_at = wanted, now
        self.written += 1
        return True

    async def run(self) -> None:
        while True:
            try:
                await self.write_due()
            except Exception:  # a bug here must not end the status writes (nor the scheduler)
                log.exception("writing MemberCluster statuses failed")
            await sleep(self.clock, TICK_SECONDS)
