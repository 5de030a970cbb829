"""The member-cluster contract cluster plugins program against: cluster state, one snapshot per cycle, its source.

In a multi-cluster profile every framework node is a member cluster (a "super node": its name, labels, taints
and capacity are the cluster's, see :mod:`kubesched.federation.adapter`). What a Node cannot carry -- readiness,
when the state was observed, per-node free capacity, served APIs, prices, which workloads already run there --
is a :class:`ClusterState`. Plugins never fetch it: they ask the Handle for the scheduler's
:class:`ClusterStateSource` (:func:`cluster_state_source`, service kind :data:`CLUSTER_STATE_SERVICE`) and take
one consistent :class:`ClusterSnapshot` per scheduling cycle (:func:`take_cycle_snapshot`, at PreFilter or
PreScore), which every other cluster plugin of the cycle then reads from CycleState (:func:`cycle_snapshot`).

Who implements a source: the simulation (:class:`kubesched.federation.state.StaticClusterStateSource`, from
MemberCluster manifests) now; later a cache refreshed in the background from every member's agent. Either
way ``snapshot()`` does no I/O: it hands out what was last observed, so the cycle never waits on a member.

Committing a placement (the two-phase commit at Permit and Bind) goes through the Handle too: the scheduler's
:class:`ClusterCommitter` (service kind :data:`CLUSTER_COMMIT_SERVICE`) reserves, releases and binds in a member,
and keeps a :class:`CommitLedger` of each cluster's consecutive failures, so the cluster plugins that commit
and the one that avoids suspect clusters share what happened. Its implementation (the agents' client) lives in
:mod:`kubesched.federation.commit`; plugins call it only from background work and binding cycles.

A hub pod bound to a super node is "in flight" until the member's own state counts it: plugins overlay the
pods of the super node's NodeInfo that are not in :attr:`ClusterState.accounted_pods` on the reported state
(the overcommit guard Karmada calls assume-and-deduct).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol, cast, runtime_checkable

from kubesched.api.objects import ObjectMeta, Pod, Taint, Toleration
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle

__all__ = [
    "APP_LABELS",
    "CLUSTER_COMMIT_SERVICE",
    "CLUSTER_SNAPSHOT_STATE_KEY",
    "CLUSTER_STATE_SERVICE",
    "CORE_POD_API",
    "SCHEDULING_TAINT_EFFECTS",
    "ClusterCommitter",
    "ClusterSnapshot",
    "ClusterState",
    "ClusterStateSource",
    "CommitError",
    "CommitLedger",
    "NoClusterCommitter",
    "NodeBucket",
    "PriceList",
    "ReleaseOutcome",
    "WorkloadKey",
    "app_workload_key",
    "cluster_committer",
    "cluster_state_source",
    "cycle_snapshot",
    "metadata_workload_keys",
    "policy_target_kind",
    "take_cycle_snapshot",
    "tolerates_all",
    "workload_keys",
]

CLUSTER_STATE_SERVICE = "cluster-state"
"""The service kind under which the scheduler provides the :class:`ClusterStateSource` (spec ``""``)."""

CLUSTER_SNAPSHOT_STATE_KEY = "multicluster/ClusterSnapshot"
"""Where the cycle's :class:`ClusterSnapshot` lives in CycleState."""

CORE_POD_API = "v1/Pod"
"""Every workload the hub places is created in the member as a Pod: the API every candidate must serve."""

APP_LABELS = ("app.kubernetes.io/name", "app")
"""The labels naming a pod's application, in the order looked at (the first present wins)."""

WorkloadKey = tuple[str, ...]
"""``("owner", namespace, kind, name)`` for a pod's controller, ``("app", namespace, value)`` for its app label."""


def workload_keys(pod: Pod) -> tuple[WorkloadKey, ...]:
    """What makes two pods "the same workload" for locality: the same controller (kind and name, in the same
    namespace), or the same application label; a pod with neither has no key."""
    return metadata_workload_keys(pod.metadata)


def metadata_workload_keys(metadata: ObjectMeta) -> tuple[WorkloadKey, ...]:
    """:func:`workload_keys` of the pod with ``metadata`` (they are read from it alone)."""
    keys: list[WorkloadKey] = []
    namespace = metadata.namespace
    owner = metadata.controller_ref()
    if owner is not None:
        keys.append(("owner", namespace, owner.kind, owner.name))
    app = app_workload_key(namespace, metadata.labels)
    if app is not None:
        keys.append(app)
    return tuple(keys)


def app_workload_key(namespace: str, labels: Mapping[str, str]) -> WorkloadKey | None:
    """The application key of a pod in ``namespace`` with ``labels`` (:func:`workload_keys`' second key), if any;
    the cluster agent reads it from a pod it made without parsing the pod again."""
    for label in APP_LABELS:
        value = labels.get(label)
        if value:
            return ("app", namespace, value)
    return None


@dataclass(frozen=True, slots=True)
class NodeBucket:
    """``count`` nodes of a member that each have ``free`` left (canonical units: milli-CPU, bytes, counts);
    a resource absent from ``free`` is 0 there, except ``pods``: absent means the slots are not limited.
    ``taints``: the NoSchedule and NoExecute taints those nodes carry, which a pod must tolerate, every one, to be
    placed there."""

    count: int
    free: Mapping[str, int]
    taints: tuple[Taint, ...] = ()


SCHEDULING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
"""The taint effects that keep a pod off a member node unless it tolerates them (a node bucket lists those)."""


def tolerates_all(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> bool:
    """Whether ``tolerations`` tolerate every one of ``taints`` (a bucket's: what its nodes need of a pod)."""
    return all(any(toleration.tolerates(taint) for toleration in tolerations) for taint in taints)


@dataclass(frozen=True, slots=True)
class PriceList:
    """Hourly prices on one member (see ``MemberCluster.spec.cost``)."""

    cpu_per_core_hour: Decimal = Decimal(0)
    memory_per_gib_hour: Decimal = Decimal(0)
    extended_per_unit_hour: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterState:
    """What the hub last knew of one member cluster; immutable (a new observation is a new value).

    ``observed_at`` None: the source has it fresh at every snapshot. ``allocatable``/``allocated``: the whole
    cluster, canonical units. ``nodes`` None: no per-node figures (capacity is estimated from the totals).
    ``apis`` None: served APIs not reported (every kind counts as served); otherwise ``"group/version/Kind"``
    (``"v1/Pod"`` for the core group). ``workloads``: pods already running there per :data:`WorkloadKey`.
    ``accounted_pods``: uids of pods on the super node this state already counts (the rest are in flight).
    ``pod_phases``: per hub pod the member runs a pod for (by the hub pod's uid), that pod's phase;
    ``pod_names``: that pod's ``namespace/name`` in the member (empty from an agent that does not report names).
    ``generation`` changes whenever the state does, so derived values can be cached by it.
    """

    name: str
    ready: bool
    ready_reason: str = ""
    observed_at: float | None = None
    allocatable: Mapping[str, int] = field(default_factory=dict)
    allocated: Mapping[str, int] = field(default_factory=dict)
    nodes: tuple[NodeBucket, ...] | None = None
    apis: frozenset[str] | None = None
    prices: PriceList | None = None
    workloads: Mapping[WorkloadKey, int] = field(default_factory=dict)
    accounted_pods: frozenset[str] = frozenset()
    pod_phases: Mapping[str, str] = field(default_factory=dict)
    pod_names: Mapping[str, str] = field(default_factory=dict)
    generation: int = 0


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Every member's state as one cycle sees it, taken at ``taken_at`` (the scheduler's clock)."""

    taken_at: float
    clusters: Mapping[str, ClusterState]

    def clone(self) -> ClusterSnapshot:
        return self

    def get(self, name: str) -> ClusterState | None:
        return self.clusters.get(name)

    def age(self, name: str) -> float | None:
        """Seconds since the cluster's state was observed (0 for a state observed at every snapshot); None for
        a cluster the snapshot does not know."""
        state = self.clusters.get(name)
        if state is None:
            return None
        if state.observed_at is None:
            return 0.0
        return max(self.taken_at - state.observed_at, 0.0)


@runtime_checkable
class ClusterStateSource(Protocol):
    """Where the scheduler's cluster state comes from; implementations live outside the framework."""

    def snapshot(self, now: float) -> ClusterSnapshot:
        """One consistent view of every member as last observed, stamped ``now``. Must not do I/O or wait:
        refreshing is the source's own background work."""
        ...


class NoClusterStateSource(LookupError):
    """The scheduler provides no cluster state: a cluster plugin runs in a profile that has no member clusters."""


def cluster_state_source(handle: Handle) -> ClusterStateSource:
    """The scheduler's cluster state source; :class:`NoClusterStateSource` when it has none."""
    try:
        return cast(ClusterStateSource, handle.service(CLUSTER_STATE_SERVICE, ""))
    except KeyError as exc:
        raise NoClusterStateSource(
            "this scheduler has no member-cluster state (cluster plugins need MemberClusters: "
            "kubesched simulate -f <MemberCluster manifests>)"
        ) from exc


def policy_target_kind(handle: Handle) -> str:
    """What a policy decides about in this framework: ``"cluster"`` when its nodes are member clusters (the
    scheduler provides cluster state), else ``"node"``; the decision input carries ``input.cluster`` or
    ``input.node`` accordingly."""
    try:
        handle.service(CLUSTER_STATE_SERVICE, "")
    except KeyError:
        return "node"
    return "cluster"


def take_cycle_snapshot(state: CycleState, handle: Handle) -> ClusterSnapshot:
    """The cycle's snapshot: the one an earlier plugin of this cycle took, else a new one from the source
    (written to CycleState for the rest of the cycle). Call it from PreFilter or PreScore, never from Filter
    or Score."""
    existing = state.get(CLUSTER_SNAPSHOT_STATE_KEY, ClusterSnapshot)
    if existing is not None:
        return existing
    taken = cluster_state_source(handle).snapshot(handle.clock.now())
    state.write(CLUSTER_SNAPSHOT_STATE_KEY, taken)
    return taken


def cycle_snapshot(state: CycleState) -> ClusterSnapshot | None:
    """The snapshot PreFilter/PreScore took this cycle, for Filter and Score (None if none was taken)."""
    return state.get(CLUSTER_SNAPSHOT_STATE_KEY, ClusterSnapshot)


CLUSTER_COMMIT_SERVICE = "cluster-commit"
"""The service kind under which the scheduler provides the :class:`ClusterCommitter` (spec ``""``)."""


class CommitError(Exception):
    """A reserve, release or bind in a member failed. ``refused``: the member answered no (``reason`` says why:
    ``Unfit``, ``NotFound``, ``Expired``, ``Fenced``, ...); otherwise it could not be reached in time or could not
    tell (``Unreachable``, ``Settling``, ``MemberUnavailable``), and may or may not have acted: repeating the call
    with the same reservation id is safe. ``may_have_acted``: whether the request may have reached the member
    unanswered (False when it never left: the connection was refused)."""

    def __init__(self, cluster: str, reason: str, message: str, *, refused: bool, may_have_acted: bool = True) -> None:
        super().__init__(message if message.startswith(f"cluster {cluster}: ") else f"cluster {cluster}: {message}")
        self.cluster = cluster
        self.reason = reason
        self.refused = refused
        self.may_have_acted = not refused and may_have_acted


MAX_REMEMBERED_COMMITS = 65536
"""Hub pods a :class:`CommitLedger` remembers settled commits of; forgetting one costs one more question to its
member, never a wrong answer."""


class CommitLedger:
    """What the scheduler knows of its commits (in memory): consecutive failures per cluster and when the last one
    happened; and per hub pod (by uid) the commits settled since -- a reservation known to have no pod under it
    and none to come, or the cluster known to run the pod -- and whether a settle is under way."""

    def __init__(self) -> None:
        self._failures: dict[str, tuple[int, float]] = {}
        self._settled: OrderedDict[str, str] = OrderedDict()  # hub pod uid -> reservation id with no pod
        self._made: OrderedDict[str, str] = OrderedDict()  # hub pod uid -> cluster that runs its pod
        self._settling: set[str] = set()

    def failed(self, cluster: str, now: float) -> int:
        """Count one failure; the cluster's consecutive failures now."""
        count = self._failures.get(cluster, (0, now))[0] + 1
        self._failures[cluster] = (count, now)
        return count

    def succeeded(self, cluster: str) -> None:
        self._failures.pop(cluster, None)

    def consecutive(self, cluster: str) -> tuple[int, float | None]:
        """(consecutive failures, time of the last one); (0, None) for a cluster without failures."""
        entry = self._failures.get(cluster)
        return (0, None) if entry is None else entry

    def failing(self) -> Mapping[str, tuple[int, float]]:
        """Every cluster with consecutive failures: (how many, time of the last one) by name (read-only)."""
        return self._failures

    def settled_empty(self, uid: str, reservation_id: str) -> None:
        """The member answered: no pod was made under ``reservation_id`` for hub pod ``uid``, and none can be."""
        _remember(self._settled, uid, reservation_id)
        self._made.pop(uid, None)

    def is_settled_empty(self, uid: str, reservation_id: str) -> bool:
        return self._settled.get(uid) == reservation_id

    def settled_made(self, uid: str, cluster: str) -> None:
        """``cluster`` runs a pod made for hub pod ``uid``."""
        _remember(self._made, uid, cluster)

    def made_in(self, uid: str) -> str | None:
        """The cluster a settled commit of hub pod ``uid`` made its pod in, if one did."""
        return self._made.get(uid)

    def forget(self, uid: str) -> None:
        """Hub pod ``uid`` is bound (or gone): nothing about its commits is needed any more."""
        self._settled.pop(uid, None)
        self._made.pop(uid, None)

    def begin_settle(self, uid: str) -> bool:
        """Mark a settle of hub pod ``uid``'s open commit as under way; False when one already is."""
        if uid in self._settling:
            return False
        self._settling.add(uid)
        return True

    def end_settle(self, uid: str) -> None:
        self._settling.discard(uid)


def _remember(kept: OrderedDict[str, str], uid: str, value: str) -> None:
    kept.pop(uid, None)
    kept[uid] = value
    if len(kept) > MAX_REMEMBERED_COMMITS:
        kept.popitem(last=False)


@dataclass(frozen=True, slots=True)
class ReleaseOutcome:
    """A member's answer to a release: whether it held the reservation -- or, ``made`` non-empty, the
    ``namespace/name`` of the pod it made for the hub pod: that commit happened, and nothing was released."""

    released: bool
    made: str = ""


@runtime_checkable
class ClusterCommitter(Protocol):
    """Reserve, release and bind in member clusters, by reservation id (each call idempotent for its id).
    Every call takes a deadline (``timeout`` seconds) and raises :class:`CommitError` on failure."""

    @property
    def ledger(self) -> CommitLedger: ...

    async def reserve(
        self,
        cluster: str,
        reservation_id: str,
        pod: Pod,
        requests: Mapping[str, int],
        ttl_seconds: float,
        *,
        timeout: float,
    ) -> str:
        """Hold ``requests`` for ``pod`` in ``cluster`` for ``ttl_seconds``; the member's node holding them."""
        ...

    async def release(
        self, cluster: str, reservation_id: str, *, timeout: float, pod: Pod | None = None
    ) -> ReleaseOutcome:
        """Let the reservation go, or learn that a pod was made under it (or for ``pod``). Once the member has
        answered, no bind under that id can make a pod any more: the answer settles the commit."""
        ...

    async def bind(self, cluster: str, reservation_id: str, pod: Pod, *, timeout: float) -> None:
        """Create ``pod`` in ``cluster`` under the reservation (consuming it); a member that already runs a pod for
        ``pod`` answers with that one."""
        ...


class NoClusterCommitter(LookupError):
    """The scheduler provides no way to commit to member clusters (a simulation without agents)."""


def cluster_committer(handle: Handle) -> ClusterCommitter:
    """The scheduler's cluster committer; :class:`NoClusterCommitter` when it has none."""
    try:
        return cast(ClusterCommitter, handle.service(CLUSTER_COMMIT_SERVICE, ""))
    except KeyError as exc:
        raise NoClusterCommitter(
            "this scheduler has no member-cluster committer (ClusterReservation and ClusterBind need the "
            "members' agents: a hub run with MemberClusters in pull mode)"
        ) from exc
