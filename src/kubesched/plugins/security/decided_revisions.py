"""The policy revision each pod was last decided under, and the queueing hint of the PolicyRevisionChange event.

SecurityAuditFilter and SecurityAuditPermit record, per pod, the revision of their engine that decided its last
attempt; when the scheduler reports that the engine's revision changed, the hint requeues a pod they rejected unless
it was decided under that very revision already (the attempt that noticed the change), so a new revision costs each
rejected pod one attempt, and a pod decided after the change none.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from kubesched.api.objects import Pod
from kubesched.framework.events import AnyObject, PolicyRevision, QueueingHint

# Pods remembered per plugin: a pod forgotten is requeued by any new revision, which is only one attempt more.
DEFAULT_REMEMBERED_PODS = 16384


class DecidedRevisions:
    """Per pod uid, the revision of one engine (``engine``: its spec) that decided the pod's last attempt."""

    def __init__(self, engine: Hashable, limit: int = DEFAULT_REMEMBERED_PODS) -> None:
        self.engine = engine
        self._limit = limit
        self._by_pod: OrderedDict[str, str] = OrderedDict()

    def record(self, uid: str, revision: str) -> None:
        self._by_pod[uid] = revision
        self._by_pod.move_to_end(uid)
        while len(self._by_pod) > self._limit:
            self._by_pod.popitem(last=False)

    def get(self, uid: str) -> str | None:
        return self._by_pod.get(uid)

    def hint(self, pod: Pod, old: AnyObject, new: AnyObject) -> QueueingHint:
        """Queue a pod this engine rejected when the engine's revision is now another than the one that decided it."""
        if not isinstance(new, PolicyRevision) or new.engine != self.engine:
            return QueueingHint.SKIP  # another engine changed: it did not decide this rejection
        if self._by_pod.get(pod.metadata.uid) == new.revision:
            return QueueingHint.SKIP  # already decided under the new revision
        return QueueingHint.QUEUE
