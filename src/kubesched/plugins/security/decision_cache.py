"""Decision cache: the policy's answers per (policy revision, pod key, time bucket, operation).

OPA keeps no decisions between queries, so the scheduler keeps them: a pod retried after backoff, or a
pod whose policy-visible facts equal another's, reuses what was decided. The pod key is what the policy of
that revision reads of the pod (:mod:`~kubesched.plugins.security.policy_keys`; the whole pod input when the
engine cannot say), with the node classes it is decided per; each entry holds per-node-class decisions (so a
node whose read facts changed is decided again, and one whose status changed is not); an entry can never
answer for another policy revision; entries of an older revision are dropped as soon as a newer revision
is seen. Used by SecurityAuditFilter.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, NamedTuple, TypeVar

V = TypeVar("V")


class CacheKey(NamedTuple):
    """What a cached decision is for. A tuple (hashed and compared in C): one is made per attempt, and its pod
    part is a long string."""

    revision: str
    pod_digest: str
    time: str
    operation: str


class DecisionCache(Generic[V]):
    """A bounded LRU map from CacheKey to an evaluation result."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._max = max_entries
        self._entries: OrderedDict[CacheKey, V] = OrderedDict()
        self._revision: str | None = None
        self.hits = 0
        self.misses = 0

    def _observe_revision(self, revision: str) -> None:
        if revision != self._revision:
            self._entries.clear()
            self._revision = revision

    def get(self, key: CacheKey) -> V | None:
        self._observe_revision(key.revision)
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: CacheKey, value: V) -> None:
        self._observe_revision(key.revision)
        if self._max <= 0:
            return
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
