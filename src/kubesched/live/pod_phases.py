"""The live hub's hub pods take their member pods' phase: Running, Succeeded or Failed, as the member reports it.

Who calls it: :class:`kubesched.live.hub.HubPlane`, after every refresh of a member's state, with the hub pods
bound to that member as its informer has them. A hub pod bound to a cluster has no kubelet to report on it; the
agent that made its member pod reports that pod's phase in the member's state (``podPhases``, by hub pod uid),
and the hub writes it to the hub pod's ``status.phase`` -- what Karmada's status aggregation gives its users, so
``kubectl get pods`` on the hub says where the work stands. Why this shape:

* **Only forward.** Pending stays as the binding left it; a hub pod already Succeeded or Failed is never written
  again (the API server refuses to take a pod out of a terminal phase anyway). A hub pod that finishes leaves the
  assigned-pod watch, so the scheduler frees its capacity on the super node as the member frees it.
* **One write per change.** A phase written is remembered until the informer shows it, so a refresh before the
  watch event does not write it again; a write that failed is forgotten, so the next refresh (every few seconds)
  tries again: that is the retry and its backoff.
* **This hub pod only.** The patch carries the hub pod's uid, which the API server takes as a precondition: a
  pod deleted and created again under the name is never given the old one's phase.
* Only while this process leads, as every other write of the scheduler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from kubesched.api.objects import Pod
from kubesched.backends.kube.client import MERGE_PATCH
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.clusterapi.contract import ClusterState
from kubesched.federation.state import TERMINAL_PHASES

__all__ = ["MIRRORED_PHASES", "PhaseMirror"]

log = logging.getLogger(__name__)

MIRRORED_PHASES = frozenset({"Running", *TERMINAL_PHASES})
"""The member phases a hub pod takes (Pending is what a bound hub pod has already)."""


class PatchingClient(Protocol):
    """What the mirror needs of :class:`~kubesched.backends.kube.client.KubeClient`."""

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str = ..., retry: bool = True
    ) -> Any: ...


class PhaseMirror:
    """Writes member pods' phases to their hub pods (module doc). ``leading`` gates every write."""

    def __init__(self, client: PatchingClient) -> None:
        self.client = client
        self.leading = False
        self._sent: dict[str, str] = {}  # hub pod uid -> the phase written, until the informer shows it
        self._tasks: set[asyncio.Task[None]] = set()
        self.written = 0
        self.failed = 0

    def offer(self, state: ClusterState, hub_pods: Iterable[Pod]) -> None:
        """Write the phase of every pod of ``hub_pods`` (bound to ``state``'s cluster) that its member pod has
        moved on to."""
        if not self.leading or not state.pod_phases:
            return
        for pod in hub_pods:
            uid, current = pod.metadata.uid, pod.status.phase
            wanted = state.pod_phases.get(uid)
            if self._sent.get(uid) == current:
                del self._sent[uid]  # the informer shows what was written
            if wanted not in MIRRORED_PHASES or wanted == current or current in TERMINAL_PHASES:
                continue
            if self._sent.get(uid) == wanted:
                continue  # written; its watch event has not come yet
            self._sent[uid] = wanted
            task = asyncio.get_running_loop().create_task(self._write(pod, wanted), name=f"phase of {pod.key}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def forget(self, uid: str) -> None:
        """The hub pod ``uid`` left the hub's view (deleted, or finished)."""
        self._sent.pop(uid, None)

    async def _write(self, pod: Pod, phase: str) -> None:
        path = f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}/status"
        body = {"metadata": {"uid": pod.metadata.uid}, "status": {"phase": phase}}
        try:
            await self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH, retry=False)
        except (KubeApiError, KubeTransportError) as error:
            self.failed += 1
            self._sent.pop(pod.metadata.uid, None)  # the next refresh tries again
            if isinstance(error, KubeApiError) and error.status in (404, 409):
                return  # gone, or another pod of that name now: nothing to mirror to
            log.warning("hub pod %s: writing its member pod's phase %s failed: %s", pod.key, phase, error)
            return
        self.written += 1
        log.info("hub pod %s: %s in its member cluster", pod.key, phase)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
