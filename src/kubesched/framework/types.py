"""PodInfo, NodeInfo and Resource: the pre-parsed, integer views of pods and nodes plugins read.

Quantities are parsed to integers (milli-CPU, bytes) once, when a pod or node enters the queue or the
cache, never in Filter or Score. NodeInfo aggregates are updated incrementally when pods are added or
removed; the scheduler cache mirrors them into the columnar :class:`~kubesched.framework.node_table.NodeTable`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from kubesched.api.evolve import evolve, slot_copier
from kubesched.api.objects import Node, Pod, Taint, Toleration
from kubesched.api.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, pod_requests_with_non_zero
from kubesched.framework.pod_map import PodMap

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
_BASIC = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, PODS})

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
_LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
_LEGACY_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"


@dataclass(slots=True)
class Resource:
    """Integer resource amounts: milli-CPU, bytes, a pod count and extended (scalar) resources."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, amounts: Mapping[str, int]) -> Resource:
        # Slot by slot rather than through __init__ (whose default scalar dict would be made and replaced):
        # every pod entering the queue and the cache comes through here.
        res = object.__new__(cls)
        res.milli_cpu = amounts.get(CPU, 0)
        res.memory = amounts.get(MEMORY, 0)
        res.ephemeral_storage = amounts.get(EPHEMERAL_STORAGE, 0)
        res.allowed_pod_number = amounts.get(PODS, 0)
        res.scalar = {k: v for k, v in amounts.items() if k not in _BASIC}
        return res

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        for name, amount in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + amount

    def subtract(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        for name, amount in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) - amount

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pod_number
        return self.scalar.get(name, 0)

    def is_zero(self) -> bool:
        return (
            self.milli_cpu == 0 and self.memory == 0 and self.ephemeral_storage == 0 and not any(self.scalar.values())
        )

    def copy(self) -> Resource:
        # Slot by slot rather than through __init__ (its default-factory handling): every snapshot copy of a
        # changed node copies two Resources, twice a cycle.
        copy = object.__new__(Resource)
        copy.milli_cpu = self.milli_cpu
        copy.memory = self.memory
        copy.ephemeral_storage = self.ephemeral_storage
        copy.allowed_pod_number = self.allowed_pod_number
        copy.scalar = dict(self.scalar)
        return copy


HostPort = tuple[str, str, int]
"""(hostIP, protocol, hostPort) of one container port with a host port."""

ALL_IPS = "0.0.0.0"


def pod_host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The host ports a pod holds while it runs: app containers and restartable (sidecar) init containers.

    A regular init container has finished by then, so its ports are free again.
    """
    ports: list[HostPort] = []
    spec = pod.spec
    # Most pods have no init containers: their app containers are what runs, without building a tuple.
    running = spec.containers
    if spec.init_containers:
        running = (*(c for c in spec.init_containers if c.is_sidecar), *spec.containers)
    for container in running:
        for port in container.ports:
            if port.host_port > 0:
                ports.append((port.host_ip or ALL_IPS, port.protocol or "TCP", port.host_port))
    return tuple(ports)


def ports_conflict(wanted: Iterable[HostPort], used: Mapping[str, set[tuple[str, int]]]) -> bool:
    """Whether any wanted port is taken in ``used`` (hostIP → {(protocol, port)}); 0.0.0.0 clashes with all."""
    for ip, protocol, port in wanted:
        entry = (protocol, port)
        if ip == ALL_IPS:
            if any(entry in ports for ports in used.values()):
                return True
        elif entry in used.get(ip, ()) or entry in used.get(ALL_IPS, ()):
            return True
    return False


class PodShape(enum.IntFlag):
    """Which optional parts of a spec a pod has: the features a plugin's PreFilter or PreScore looks at before
    it decides it has nothing to do (Skip). A plugin that can tell from these bits alone that it would skip
    offers ``pre_filter_skip`` / ``pre_score_skip`` (:mod:`kubesched.framework.interface`), and the runtime then
    does not call it for pods of that shape. A bit is set whenever the part is present at all (an empty
    ``nodeAffinity: {}`` counts), so an unset bit is a guarantee, a set one only a maybe."""

    HOST_PORTS = 1
    """A running container (app or sidecar) has a ``hostPort``: ``PodInfo.host_ports`` is not empty."""
    VOLUMES = 2
    """``spec.volumes`` is not empty."""
    RESOURCE_CLAIMS = 4
    """``spec.resourceClaims`` is not empty."""
    NODE_SELECTOR = 8
    """``spec.nodeSelector`` is not empty."""
    NODE_AFFINITY = 16
    """``spec.affinity.nodeAffinity`` is present."""
    POD_AFFINITY = 32
    """``spec.affinity`` has ``podAffinity`` or ``podAntiAffinity``."""
    SPREAD_CONSTRAINTS = 64
    """``spec.topologySpreadConstraints`` is not empty."""


# The bits as plain ints: PodInfo combines them for every pod, and int operations are cheaper than IntFlag's.
_HOST_PORTS = PodShape.HOST_PORTS.value
_VOLUMES = PodShape.VOLUMES.value
_RESOURCE_CLAIMS = PodShape.RESOURCE_CLAIMS.value
_NODE_SELECTOR = PodShape.NODE_SELECTOR.value
_NODE_AFFINITY = PodShape.NODE_AFFINITY.value
_POD_AFFINITY = PodShape.POD_AFFINITY.value
_SPREAD_CONSTRAINTS = PodShape.SPREAD_CONSTRAINTS.value


def pod_shape(pod: Pod, host_ports: tuple[HostPort, ...], has_pod_affinity: bool) -> int:
    """The :class:`PodShape` bits of ``pod``, as a plain int (PodInfo computes it once per pod)."""
    spec = pod.spec
    shape = 0
    if host_ports:
        shape |= _HOST_PORTS
    if spec.volumes:
        shape |= _VOLUMES
    if spec.resource_claims:
        shape |= _RESOURCE_CLAIMS
    if spec.node_selector:
        shape |= _NODE_SELECTOR
    affinity = spec.affinity
    if affinity is not None and affinity.get("nodeAffinity") is not None:
        shape |= _NODE_AFFINITY
    if has_pod_affinity:
        shape |= _POD_AFFINITY
    if spec.topology_spread_constraints:
        shape |= _SPREAD_CONSTRAINTS
    return shape


class PodInfo:
    """A pod plus everything the framework derives from it once: requests, priority, host ports, shape."""

    __slots__ = (
        "has_pod_affinity",
        "host_ports",
        "key",
        "name",
        "namespace",
        "non_zero_memory",
        "non_zero_milli_cpu",
        "pod",
        "priority",
        "request",
        "shape",
        "tolerations",
        "uid",
    )

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.name = pod.metadata.name
        self.namespace = pod.metadata.namespace
        self.key = f"{self.namespace}/{self.name}"
        self.uid = pod.metadata.uid
        self.priority = pod.spec.priority if pod.spec.priority is not None else 0
        requests, non_zero = pod_requests_with_non_zero(pod)
        self.request = Resource.from_mapping(requests)
        self.non_zero_milli_cpu = non_zero.get(CPU, DEFAULT_MILLI_CPU_REQUEST)
        self.non_zero_memory = non_zero.get(MEMORY, DEFAULT_MEMORY_REQUEST)
        self.tolerations: tuple[Toleration, ...] = tuple(pod.spec.tolerations)
        self.host_ports: tuple[HostPort, ...] = pod_host_ports(pod)
        affinity = pod.spec.affinity
        # Upstream's PodsWithAffinity test: a pod with pod (anti-)affinity of any kind, required or preferred.
        self.has_pod_affinity = affinity is not None and (
            affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None
        )
        self.shape = pod_shape(pod, self.host_ports, self.has_pod_affinity)

    @property
    def node_name(self) -> str:
        return self.pod.spec.node_name

    def with_node(self, node_name: str) -> PodInfo:
        """A copy bound to ``node_name`` (the assumed pod); derived fields are shared, not recomputed."""
        clone = _copy_pod_info(self)
        clone.pod = evolve(self.pod, spec=evolve(self.pod.spec, node_name=node_name))
        return clone

    def rebound(self, pod: Pod) -> PodInfo | None:
        """This PodInfo for ``pod``, a later version of the same pod, without deriving anything again -- or
        None when ``pod`` differs in a field the derived ones come from. The cache confirms an assumed pod
        with it: the bound version the informer delivers differs from the assumed one in its node name and
        status only (unchanged fields are usually the very same objects, so the comparison is by identity)."""
        meta = pod.metadata
        if meta.uid != self.uid or meta.name != self.name or meta.namespace != self.namespace:
            return None
        # Tuples compare item by item, identity first: unchanged fields cost no deep comparison.
        if _derived_from_spec(self.pod.spec) != _derived_from_spec(pod.spec):
            return None
        clone = _copy_pod_info(self)
        clone.pod = pod
        return clone

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


# PodInfo is copied twice per pod (assumed, then confirmed): slot by slot, written out.
_copy_pod_info = slot_copier(PodInfo, PodInfo.__slots__, frozen=False)


# The PodSpec fields PodInfo's derived fields are computed from (requests, priority, tolerations, ports,
# affinity, shape); a test holds a rebound PodInfo equal to a fresh one.
_DERIVED_FROM_SPEC = (
    "containers",
    "init_containers",
    "overhead",
    "pod_level_requests",
    "priority",
    "tolerations",
    "affinity",
    "volumes",
    "resource_claims",
    "node_selector",
    "topology_spread_constraints",
)
_derived_from_spec = attrgetter(*_DERIVED_FROM_SPEC)


@dataclass(slots=True)
class ImageState:
    size_bytes: int
    num_nodes: int = 0


def zone_key(labels: Mapping[str, str]) -> str:
    """The node-tree zone key (region + zone, with the legacy label fallbacks)."""
    region = labels.get(REGION_LABEL) or labels.get(_LEGACY_REGION_LABEL, "")
    zone = labels.get(ZONE_LABEL) or labels.get(_LEGACY_ZONE_LABEL, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeInfo:
    """A node and the aggregate of the pods on it (incl. assumed ones), kept by the scheduler cache."""

    __slots__ = (
        "allocatable",
        "generation",
        "image_sizes",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "pods_with_affinity",
        "requested",
        "slot",
        "used_ports",
    )

    def __init__(self, node: Node, slot: int = -1) -> None:
        self.name = node.metadata.name
        self.node = node
        self.slot = slot
        self.pods = PodMap()
        # How many of ``pods`` have pod (anti-)affinity terms: InterPodAffinity skips nodes without any.
        self.pods_with_affinity = 0
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.used_ports: dict[str, set[tuple[str, int]]] = {}
        self.generation = 0
        self.allocatable = Resource.from_mapping(node.allocatable)
        self.image_sizes: dict[str, int] = _image_sizes(node)

    def set_node(self, node: Node) -> None:
        self.node = node
        self.allocatable = Resource.from_mapping(node.allocatable)
        self.image_sizes = _image_sizes(node)

    @property
    def labels(self) -> Mapping[str, str]:
        return self.node.metadata.labels

    @property
    def taints(self) -> tuple[Taint, ...]:
        return self.node.taints

    @property
    def unschedulable(self) -> bool:
        return self.node.spec_unschedulable

    def add_pod(self, pod_info: PodInfo) -> None:
        self.pods.put(pod_info.uid, pod_info)
        self.pods_with_affinity += pod_info.has_pod_affinity
        self.requested.add(pod_info.request)
        self.non_zero_requested.milli_cpu += pod_info.non_zero_milli_cpu
        self.non_zero_requested.memory += pod_info.non_zero_memory
        for ip, protocol, port in pod_info.host_ports:
            self.used_ports.setdefault(ip, set()).add((protocol, port))

    def remove_pod(self, uid: str) -> PodInfo | None:
        pod_info = self.pods.pop(uid)
        if pod_info is None:
            return None
        self.pods_with_affinity -= pod_info.has_pod_affinity
        self.requested.subtract(pod_info.request)
        self.non_zero_requested.milli_cpu -= pod_info.non_zero_milli_cpu
        self.non_zero_requested.memory -= pod_info.non_zero_memory
        if pod_info.host_ports:
            self.used_ports = {}
            for other in self.pods.values():
                for ip, protocol, port in other.host_ports:
                    self.used_ports.setdefault(ip, set()).add((protocol, port))
        return pod_info

    def replace_pod(self, pod_info: PodInfo) -> bool:
        """Put ``pod_info`` in the place of the PodInfo with its uid, which must hold the same derived fields (a
        :meth:`PodInfo.rebound` copy): the pod moves to the end, as :meth:`remove_pod` then :meth:`add_pod`
        would move it, and the aggregates, equal before and after, are left alone. False (nothing done) when the
        uid is not here or the pod holds host ports (their sets are rebuilt by the remove-and-add instead)."""
        if pod_info.host_ports or self.pods.pop(pod_info.uid) is None:
            return False
        self.pods.put(pod_info.uid, pod_info)
        return True

    def clone(self) -> NodeInfo:
        """A copy whose pod aggregates can be changed without touching the cache (nominated pods)."""
        copy = self._sharing(self.pods.copy())
        copy.requested = self.requested.copy()
        copy.non_zero_requested = self.non_zero_requested.copy()
        copy.used_ports = {ip: set(ports) for ip, ports in self.used_ports.items()}
        return copy

    def with_pods_of(self, source: NodeInfo) -> NodeInfo:
        """This snapshot copy with ``source``'s pods, for a node whose PodInfos were swapped for equivalent ones
        (a confirmed bind) since the copy was made, so that its aggregates are still ``source``'s. The two copies
        share the aggregates: a snapshot's NodeInfo is never written (a caller that adds pods clones it)."""
        return self._sharing(source.pods.copy())

    def _sharing(self, pods: PodMap) -> NodeInfo:
        """A NodeInfo with ``pods`` and every other field this one's, aggregates included (shared, not copied)."""
        copy = NodeInfo.__new__(NodeInfo)
        copy.name = self.name
        copy.node = self.node
        copy.slot = self.slot
        copy.pods = pods
        copy.pods_with_affinity = self.pods_with_affinity
        copy.requested = self.requested
        copy.non_zero_requested = self.non_zero_requested
        copy.used_ports = self.used_ports
        copy.generation = self.generation
        copy.allocatable = self.allocatable
        copy.image_sizes = self.image_sizes
        return copy

    def ports_conflict(self, wanted: Iterable[HostPort]) -> bool:
        return ports_conflict(wanted, self.used_ports)

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


def _image_sizes(node: Node) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for image in node.images:
        for name in image.names:
            sizes[name] = image.size_bytes
    return sizes


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Node names a PreFilter plugin restricts the search to; ``None`` means all nodes."""

    node_names: frozenset[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)

    def all_nodes(self) -> bool:
        return self.node_names is None
