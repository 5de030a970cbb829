"""The cluster agent's view of its member: Nodes, bound Pods and reservations, kept by list and watch.

Who calls it: :class:`~kubesched.agent.core.Agent`, for every state, reservation, bind and sweep. Three
:class:`~kubesched.backends.kube.reflector.Reflector` s (Nodes, Pods bound to a node, the reservation ConfigMaps)
list once and then follow the member, as kube-scheduler's informers do. The agent's own writes count at once, each
matched to its later watch event by uid (:meth:`MemberView.made`, :meth:`MemberView.dropped`,
:meth:`MemberView.bound`); a watched pod is kept as a small :class:`MemberPod`, each distinct spec parsed once
(:class:`PodReader`). :meth:`MemberView.current` raises
:class:`~kubesched.backends.kube.errors.KubeTransportError` rather than report stale capacity as current. Why:
docs/explanation/cross-cluster.md#the-cluster-agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from kubesched.agent.reservations import Reservation, stored_fence, stored_reservation
from kubesched.api import jsonwire
from kubesched.api.objects import Node, ObjectMeta, Pod, PodStatus, Taint, Toleration
from kubesched.api.resources import pod_requests
from kubesched.backends.kube.errors import KubeTransportError
from kubesched.backends.kube.reflector import Reflector, ResourceKind, WatchableApi
from kubesched.clusterapi.contract import WorkloadKey, metadata_workload_keys, tolerates_all
from kubesched.federation.state import TERMINAL_PHASES, scheduling_taints, takes_new_pods
from kubesched.federation.wire import HUB_POD_UID_ANNOTATION, RESERVATION_ANNOTATION, RESERVATION_LABEL

__all__ = ["LOST_GRACE_SECONDS", "OWN_WRITE_SECONDS", "MemberPod", "MemberView", "member_pod"]

log = logging.getLogger(__name__)

T = TypeVar("T")

LOST_GRACE_SECONDS = 10.0
OWN_WRITE_SECONDS = 60.0
PODS = "pods"


@dataclass(frozen=True, slots=True)
class _StoredReservation:
    """One of the agent's ConfigMaps as watched: its uid, and the reservation (None for a damaged one) or the
    fencing token it records."""

    uid: str
    reservation: Reservation | None
    fence: int | None = None


def _decode_reservation(raw: Mapping[str, Any], where: str) -> _StoredReservation:
    uid = str((raw.get("metadata") or {}).get("uid") or "")
    fence = stored_fence(raw)
    if fence is not None:
        return _StoredReservation(uid, None, fence)
    return _StoredReservation(uid, stored_reservation(raw))


@dataclass(frozen=True, slots=True)
class MemberPod:
    """A pod bound in the member, as the view keeps it: what the agent's state and reservations read of it."""

    uid: str
    node: str
    phase: str
    running: bool
    """Bound to a node and not Succeeded or Failed: it holds capacity there."""
    requests: Mapping[str, int]
    """:func:`~kubesched.api.resources.pod_requests` of the pod."""
    hub_uid: str
    """The hub pod it was made for (its :data:`~kubesched.federation.wire.HUB_POD_UID_ANNOTATION`), or ``""``."""
    workloads: tuple[WorkloadKey, ...]
    """:func:`~kubesched.clusterapi.contract.workload_keys` of the pod."""
    namespace: str = ""
    name: str = ""
    reservation: str = ""
    """The reservation a bind made it under (its :data:`~kubesched.federation.wire.RESERVATION_ANNOTATION`)."""
    deleting: bool = False
    """It has a ``deletionTimestamp``: its kubelet is stopping it (it still holds its capacity meanwhile)."""

    def summary(self) -> dict[str, str]:
        """The pod as the agent's answers name it."""
        return {"namespace": self.namespace, "name": self.name, "uid": self.uid, "node": self.node}


def running_on(node: str, phase: str) -> bool:
    """Whether a pod bound to ``node`` (``""``: not bound) in ``phase`` holds capacity there."""
    return bool(node) and phase not in TERMINAL_PHASES


def member_pod(metadata: ObjectMeta, node: str, phase: str, requests: Mapping[str, int]) -> MemberPod:
    """What the view keeps of the pod with ``metadata``, bound to ``node``, in ``phase``, asking ``requests``."""
    return MemberPod(
        metadata.uid,
        node,
        phase,
        running_on(node, phase),
        requests,
        metadata.annotations.get(HUB_POD_UID_ANNOTATION, ""),
        metadata_workload_keys(metadata),
        metadata.namespace,
        metadata.name,
        metadata.annotations.get(RESERVATION_ANNOTATION, ""),
        metadata.deletion_timestamp is not None,
    )


SPEC_CACHE_SIZE = 256
"""Distinct pod specs a :class:`PodReader` keeps the parse of (a member runs a few templates on a few nodes)."""


class PodReader:
    """Pod manifests read as :meth:`~kubesched.api.objects.Pod.from_dict` reads them, each distinct ``spec`` parsed
    once. Who calls it: the view (every watched pod) and the agent's bind (the hub's manifest, and a member's answer
    that is not what was sent).

    A member's pods repeat a few specs (a workload's template, on each of a few nodes), and the spec is most of a
    pod's parse. Its node name and requests are kept by the spec's JSON text: a pod whose spec was read before has
    its metadata and status parsed in full and its spec's known reading reused. That is the full parse's result
    and its errors too: a spec's parse depends on the spec alone, metadata is checked before the spec and status
    after it (a known spec cannot fail between them), and a spec that failed is never kept."""

    def __init__(self, size: int = SPEC_CACHE_SIZE) -> None:
        self._size = size
        self._specs: OrderedDict[bytes, tuple[str, Mapping[str, int]]] = OrderedDict()

    def read(self, raw: Mapping[str, Any], where: str) -> tuple[ObjectMeta, str, str, Mapping[str, int]]:
        """(metadata, node name, phase, requests) of pod manifest ``raw``; raises as ``Pod.from_dict`` does."""
        key = None
        if isinstance(raw, Mapping):
            metadata, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status")
            if isinstance(metadata, Mapping) and isinstance(spec, Mapping) and isinstance(status, Mapping | None):
                with contextlib.suppress(TypeError, ValueError):  # not JSON's values: parsed in full (refused there)
                    key = jsonwire.dumps(spec)
                known = self._specs.get(key) if key is not None else None
                if key is not None and known is not None:
                    self._specs.move_to_end(key)
                    read = ObjectMeta.from_dict(metadata, where, kind="Pod")
                    phase = PodStatus.from_dict(status or {}, where).phase
                    return read, known[0], phase, known[1]
        pod = Pod.from_dict(raw, where)
        requests: Mapping[str, int] = MappingProxyType(pod_requests(pod))  # shared by every pod of the spec
        if key is not None:
            self._specs[key] = (pod.spec.node_name, requests)
            if len(self._specs) > self._size:
                self._specs.popitem(last=False)
        return pod.metadata, pod.spec.node_name, pod.status.phase, requests

    def requests(self, raw: Mapping[str, Any], where: str) -> Mapping[str, int]:
        """The requests of pod manifest ``raw``: a known spec's without reading the rest of the pod (the agent's
        bind, which needs only them: the member checks the pod it is sent), else as :meth:`read` gives them."""
        spec = raw.get("spec") if isinstance(raw, Mapping) else None
        if isinstance(spec, Mapping):
            with contextlib.suppress(TypeError, ValueError):
                known = self._specs.get(jsonwire.dumps(spec))
                if known is not None:
                    return known[1]
        return self.read(raw, where)[3]

    def member_pod(self, raw: Mapping[str, Any], where: str) -> MemberPod:
        """What the view keeps of pod manifest ``raw``; raises as ``Pod.from_dict`` does."""
        return member_pod(*self.read(raw, where))


NODES_KIND = ResourceKind("nodes", "/api/v1/nodes", Node.from_dict)


class _Feed(Generic[T]):
    """A reflector's handler: every change as (old or None, new or None); undecodable objects logged."""

    def __init__(self, change: Callable[[T | None, T | None], None], what: str) -> None:
        self.change = change
        self.what = what

    def on_add(self, obj: T) -> None:
        self.change(None, obj)

    def on_update(self, old: T, new: T) -> None:
        self.change(old, new)

    def on_delete(self, obj: T) -> None:
        self.change(obj, None)

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None:
        log.warning("member %s left out of the agent's view: %s", self.what, error)


class MemberView:
    """One member as of its watches, with the agent's own writes applied at once (module doc)."""

    def __init__(self, client: WatchableApi, namespace: str, *, sync_timeout: float) -> None:
        self.client = client
        self.namespace = namespace
        self.sync_timeout = sync_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reader = PodReader()
        self._reflectors: list[Reflector[Any]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._reset()
        # The agent's own writes not yet seen in the watches (module doc), with the loop time of the write.
        self._made: dict[str, tuple[str, Reservation, float]] = {}  # id -> (ConfigMap uid, reservation, when)
        self._dropped: dict[str, float] = {}  # ConfigMap uid -> when
        self._bound: dict[str, tuple[MemberPod, float]] = {}  # pod uid -> (pod, when)
        # What the view keeps of each own write, by the member's (uid, resourceVersion) of it, for its watch event
        # to reuse instead of parsing the same object again: the same uid and version are the same object.
        self._records: dict[tuple[str, str], tuple[MemberPod | _StoredReservation, float]] = {}

    def _reset(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._node_order: list[Node] | None = None  # by name, made on first read after a change
        self._open: dict[str, bool] = {}  # node -> takes_new_pods(node), read once per change of the node
        self._taints: dict[str, tuple[Taint, ...]] = {}  # node -> scheduling_taints(node), likewise
        self._pods: dict[str, MemberPod] = {}  # uid -> bound pod
        self._counted: dict[str, tuple[str, Mapping[str, int]]] = {}  # running pod uid -> (node, requests)
        self._requested: dict[str, dict[str, int]] = {}  # node -> running pods' requests summed, and "pods"
        self._stored: dict[str, _StoredReservation] = {}  # reservation id -> as watched
        self._hub: dict[str, str] = {}  # hub pod uid -> uid of the watched member pod made for it
        self._watched_fence = 0  # the newest fencing token among the watched fence ConfigMaps

    # ------------------------------------------------------------------------------------------ lifecycle

    async def current(self) -> float:
        """Seconds the view may be behind its member (0 while every watch is open); raises KubeTransportError
        when its first list failed or has not come within the agent's request timeout, or a watch was lost more
        than :data:`LOST_GRACE_SECONDS` ago, naming the resource and the last error."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._start(loop)
        unsynced = [r for r in self._reflectors if not r.synced.is_set()]
        if unsynced:
            try:
                async with asyncio.timeout(self.sync_timeout):
                    for reflector in unsynced:
                        await reflector.wait_listed()
            except KubeTransportError as error:
                raise KubeTransportError(f"the member's {error}") from None
            except TimeoutError:
                failing = ", ".join(f"{r.kind.name} ({r.last_error or 'no answer'})" for r in unsynced)
                raise KubeTransportError(
                    f"the member's {failing} did not list within {self.sync_timeout:g} s"
                ) from None
        now = loop.time()
        oldest = min(self._reflectors, key=lambda r: r.current_as_of(now))
        behind = now - oldest.current_as_of(now)
        if behind > LOST_GRACE_SECONDS:
            raise KubeTransportError(
                f"the agent's watch of the member's {oldest.kind.name} was lost {behind:.0f} s ago: "
                f"{oldest.last_error or 'reconnecting'}"
            )
        return behind

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch afresh on ``loop`` (an earlier loop's watches ended with it); own writes are kept."""
        self._loop = loop
        self._reset()
        pods = ResourceKind("pods", "/api/v1/pods", self._decode_pod)
        configmaps = ResourceKind(
            "reservation configmaps", f"/api/v1/namespaces/{self.namespace}/configmaps", self._decode_configmap
        )
        self._reflectors = [
            Reflector(self.client, NODES_KIND, _Feed(self._node_changed, "Node")),
            Reflector(self.client, pods, _Feed(self._pod_changed, "Pod"), field_selector="spec.nodeName!="),
            Reflector(
                self.client,
                configmaps,
                _Feed(self._reservation_changed, "reservation"),
                label_selector=RESERVATION_LABEL,
            ),
        ]
        self._tasks = [
            loop.create_task(reflector.run(), name=f"kubesched-agent-watch-{reflector.kind.name}")
            for reflector in self._reflectors
        ]

    async def aclose(self) -> None:
        """Stop watching (the view starts again on the next :meth:`current`)."""
        tasks, self._tasks, self._loop = self._tasks, [], None
        for task in tasks:
            task.cancel()
        with contextlib.suppress(RuntimeError):  # tasks of a loop that has ended cannot be awaited here
            await asyncio.gather(*tasks, return_exceptions=True)

    # ---------------------------------------------------------------------------------------- the watches

    def _written(self, raw: Mapping[str, Any]) -> object | None:
        """The record of ``raw`` if it is an own write's answer, exactly (same uid and resourceVersion)."""
        metadata = raw.get("metadata") if self._records and isinstance(raw, Mapping) else None
        if not isinstance(metadata, Mapping):
            return None
        uid, version = metadata.get("uid"), metadata.get("resourceVersion")
        if not (isinstance(uid, str) and isinstance(version, str) and uid and version):
            return None
        kept = self._records.pop((uid, version), None)
        return kept[0] if kept is not None else None

    def _decode_pod(self, raw: Mapping[str, Any], where: str) -> MemberPod:
        written = self._written(raw)
        return written if isinstance(written, MemberPod) else self.reader.member_pod(raw, where)

    def _decode_configmap(self, raw: Mapping[str, Any], where: str) -> _StoredReservation:
        written = self._written(raw)
        return written if isinstance(written, _StoredReservation) else _decode_reservation(raw, where)

    def _node_changed(self, old: Node | None, new: Node | None) -> None:
        if old is not None and (new is None or new.name != old.name):
            self._nodes.pop(old.name, None)
            self._open.pop(old.name, None)
            self._taints.pop(old.name, None)
        if new is not None:
            self._nodes[new.name] = new
            self._open[new.name] = takes_new_pods(new)
            self._taints[new.name] = scheduling_taints(new)
        self._node_order = None

    def _pod_changed(self, old: MemberPod | None, new: MemberPod | None) -> None:
        if old is not None:
            self._pods.pop(old.uid, None)
            self._uncount(old.uid)
            if old.hub_uid and self._hub.get(old.hub_uid) == old.uid:
                del self._hub[old.hub_uid]
        if new is not None:
            uid = new.uid
            self._pods[uid] = new
            self._bound.pop(uid, None)
            if new.running:
                self._count(uid, new.node, new.requests)
            if new.hub_uid:
                self._hub[new.hub_uid] = uid

    def _count(self, uid: str, node: str, requests: Mapping[str, int]) -> None:
        self._counted[uid] = (node, requests)
        total = self._requested.setdefault(node, {})
        for name, amount in requests.items():
            total[name] = total.get(name, 0) + amount
        total[PODS] = total.get(PODS, 0) + 1

    def _uncount(self, uid: str) -> None:
        counted = self._counted.pop(uid, None)
        if counted is None:
            return
        node, requests = counted
        total = self._requested[node]
        for name, amount in requests.items():
            total[name] -= amount
        total[PODS] -= 1

    def _reservation_changed(self, old: _StoredReservation | None, new: _StoredReservation | None) -> None:
        if new is not None and new.fence is not None:
            self._watched_fence = max(self._watched_fence, new.fence)  # tokens only rise: a deleted one was older
        if old is not None and old.reservation is not None:
            if self._stored.get(old.reservation.id) == old:
                del self._stored[old.reservation.id]
            self._dropped.pop(old.uid, None)
        if new is not None and new.reservation is not None:
            rid = new.reservation.id
            self._stored[rid] = new
            made = self._made.get(rid)
            if made is not None and made[0] == new.uid:
                del self._made[rid]

    # ------------------------------------------------------------------------------------ the agent's writes

    def made(self, reservation: Reservation, configmap: Mapping[str, Any]) -> None:
        """The agent stored ``reservation`` as ``configmap`` (the member's answer to the create)."""
        metadata = configmap.get("metadata") or {}
        uid = str(metadata.get("uid") or "")
        seen = self._stored.get(reservation.id)
        if seen is None or seen.uid != uid:
            self._made[reservation.id] = (uid, reservation, self._now())
            self._record(metadata, _StoredReservation(uid, reservation))

    def dropped(self, rid: str) -> None:
        """The agent deleted reservation ``rid`` (or found it gone)."""
        made = self._made.pop(rid, None)
        if made is not None:
            self._dropped[made[0]] = self._now()
        seen = self._stored.get(rid)
        if seen is not None:
            self._dropped[seen.uid] = self._now()

    def bound(self, pod: MemberPod, answer: Mapping[str, Any]) -> None:
        """The agent created ``pod`` in the member (read from ``answer``, the member's answer to the create)."""
        if pod.uid not in self._pods and pod.running:
            self._bound[pod.uid] = (pod, self._now())
            self._record(answer.get("metadata") or {}, pod)

    def _record(self, metadata: Mapping[str, Any], record: MemberPod | _StoredReservation) -> None:
        version = metadata.get("resourceVersion")
        if record.uid and isinstance(version, str) and version:
            self._records[(record.uid, version)] = (record, self._now())

    def _now(self) -> float:
        return self._loop.time() if self._loop is not None else 0.0

    def _forget_old_writes(self) -> None:
        """Drop own writes whose events never came (module doc): the watch has relisted since, or will."""
        horizon = self._now() - OWN_WRITE_SECONDS
        if any(when < horizon for _, _, when in self._made.values()):
            self._made = {rid: made for rid, made in self._made.items() if made[2] >= horizon}
        if any(when < horizon for when in self._dropped.values()):
            self._dropped = {uid: when for uid, when in self._dropped.items() if when >= horizon}
        if any(when < horizon for _, when in self._bound.values()):
            self._bound = {uid: bound for uid, bound in self._bound.items() if bound[1] >= horizon}
        if any(when < horizon for _, when in self._records.values()):
            self._records = {key: kept for key, kept in self._records.items() if kept[1] >= horizon}

    # ---------------------------------------------------------------------------------------------- reads

    def takes_new_pods(self, node: Node) -> bool:
        """:func:`~kubesched.federation.state.takes_new_pods` of one of :meth:`nodes` (kept since its last change)."""
        return self._open[node.name]

    def scheduling_taints(self, node: Node) -> tuple[Taint, ...]:
        """:func:`~kubesched.federation.state.scheduling_taints` of one of :meth:`nodes` (kept likewise)."""
        return self._taints[node.name]

    def nodes(self) -> list[Node]:
        """The member's Nodes, by name."""
        if self._node_order is None:
            self._node_order = sorted(self._nodes.values(), key=lambda node: node.name)
        return self._node_order

    def running_pods(self) -> list[MemberPod]:
        """The running pods: watched, and bound by the agent but not seen yet."""
        self._forget_old_writes()
        watched = [self._pods[uid] for uid in self._counted]
        return watched + [pod for pod, _ in self._bound.values()]

    def hub_pod(self, hub_uid: str) -> MemberPod | None:
        """The member pod made for hub pod ``hub_uid`` (finished or not): watched, or bound by the agent but not
        seen yet; None when the view has none."""
        uid = self._hub.get(hub_uid)
        if uid is not None:
            return self._pods[uid]
        for pod, _ in self._bound.values():
            if pod.hub_uid == hub_uid:
                return pod
        return None

    def hub_pods(self) -> list[MemberPod]:
        """Every member pod made for a hub pod (finished ones too): watched, and bound by the agent but not seen
        yet."""
        self._forget_old_writes()
        found = [self._pods[uid] for uid in self._hub.values()]
        return found + [pod for pod, _ in self._bound.values() if pod.hub_uid]

    @property
    def fence(self) -> int:
        """The newest fencing token among the member's fence ConfigMaps as watched."""
        return self._watched_fence

    def reservations(self) -> list[Reservation]:
        """Every reservation stored in the member, expired ones included, as of the view and the own writes."""
        self._forget_old_writes()
        found = {
            rid: stored.reservation
            for rid, stored in self._stored.items()
            if stored.reservation is not None and stored.uid not in self._dropped
        }
        found.update((rid, reservation) for rid, (_, reservation, _) in self._made.items())
        return list(found.values())

    def reservation(self, rid: str) -> Reservation | None:
        made = self._made.get(rid)
        if made is not None:
            return made[1]
        stored = self._stored.get(rid)
        if stored is None or stored.uid in self._dropped:
            return None
        return stored.reservation

    def first_fit(
        self,
        requests: Mapping[str, int],
        held: Mapping[str, list[Mapping[str, int]]],
        tolerations: Sequence[Toleration] = (),
    ) -> Node | None:
        """The first node by name that takes new pods, whose scheduling taints ``tolerations`` all tolerate, and
        that has room for ``requests`` and one more pod, counting the running pods, the pods bound but not seen
        yet and the ``held`` reservations on it."""
        self._forget_old_writes()
        unseen: dict[str, list[Mapping[str, int]]] = {}
        for pod, _ in self._bound.values():
            unseen.setdefault(pod.node, []).append(pod.requests)
        wanted = [(name, amount) for name, amount in requests.items() if amount > 0 and name != PODS]
        empty: dict[str, int] = {}
        for node in self.nodes():
            if not self._open[node.name]:
                continue
            taints = self._taints[node.name]
            if taints and not tolerates_all(tolerations, taints):
                continue
            used = self._requested.get(node.name, empty)
            extra = [*unseen.get(node.name, ()), *held.get(node.name, ())]
            allocatable = node.allocatable
            if allocatable.get(PODS, 0) - used.get(PODS, 0) - len(extra) < 1:
                continue
            if all(
                amount <= allocatable.get(name, 0) - used.get(name, 0) - sum(e.get(name, 0) for e in extra)
                for name, amount in wanted
            ):
                return node
        return None
