"""The typed Kubernetes objects kubesched reads: Pod, Node, Namespace, PriorityClass, PodDisruptionBudget.

Every other part reads these: the framework's PodInfo/NodeInfo (built from them when a pod or node enters the
cache), the simulated and kube backends (which decode API objects with ``from_dict``), and the CLI (through
:mod:`kubesched.api.manifests`). Quantities are canonical integers (milli-CPU, bytes, counts) from the moment
an object is built, so nothing downstream parses text again.

Parsing applies the API server's defaulting that changes scheduling (namespace "default", requests from
limits, hostPort from containerPort on host-network pods, scheduler name, preemption policy) and the
validation a scheduler relies on; it does not re-implement all of the API server's validation. Fields only
some plugins need (affinity, topology spread constraints) stay raw here and are compiled by those plugins; the
whole decoded object stays on ``raw`` for the same reason (a Pod's packed, since a cluster holds many).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from kubesched.errors import FieldError

from . import _fields as f
from .packed import pack, unpack

__all__ = [
    "CONTAINER_RESTART_POLICY_ALWAYS",
    "DEFAULT_SCHEDULER_NAME",
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "POD_PHASES",
    "PREEMPTION_POLICIES",
    "PROTOCOLS",
    "TAINT_EFFECTS",
    "TOLERATION_OPERATORS",
    "Container",
    "ContainerPort",
    "Namespace",
    "Node",
    "NodeImage",
    "ObjectMeta",
    "OwnerReference",
    "Pod",
    "PodDisruptionBudget",
    "PodSpec",
    "PodStatus",
    "PriorityClass",
    "Taint",
    "Toleration",
    "object_uid",
]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
DEFAULT_SCHEDULER_NAME = "default-scheduler"
CONTAINER_RESTART_POLICY_ALWAYS = "Always"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000

_EMPTY_KEY_NEEDS_EXISTS = 'operator must be Exists when `key` is empty, which means "match all values and all keys"'
_PORT_RANGE = "must be between 1 and 65535, inclusive"

# Fixed so that the same manifest always yields the same UIDs (audit records and tests depend on it).
_UID_NAMESPACE = uuid.UUID("6f1d3c52-3a53-5a52-9d5e-6b7562657363")


def object_uid(kind: str, namespace: str, name: str) -> str:
    """The deterministic UID given to an object whose manifest has none."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def spec_taints(spec: Mapping[str, Any], where: str) -> tuple[Taint, ...]:
    """``spec.taints`` of a Node (or of a MemberCluster, its super node's): each parsed, unique by key and effect
    as the API server validates them."""
    taints = tuple(
        Taint.from_dict(item, where, path=f"spec.taints[{i}]")
        for i, item in enumerate(f.sequence(spec, "taints", where, "spec"))
    )
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        if (taint.key, taint.effect) in seen:
            f.invalid(where, f"spec.taints[{i}]", taint.key, "taints must be unique by key and effect pair")
        seen.add((taint.key, taint.effect))
    return taints


def _top(obj: object, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        f.wrong_type(where, "", "a mapping", obj)
    return obj


@dataclass(frozen=True, slots=True)
class OwnerReference:
    kind: str
    name: str
    uid: str = ""
    controller: bool = False
    api_version: str = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "metadata.ownerReferences[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        return cls(
            kind=f.required_string(obj, "kind", where, path),
            name=f.required_string(obj, "name", where, path),
            uid=f.string(obj, "uid", where, path),
            controller=f.boolean(obj, "controller", where, path),
            api_version=f.string(obj, "apiVersion", where, path),
        )


@dataclass(slots=True)
class ObjectMeta:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None
    owner_references: list[OwnerReference] = field(default_factory=list)
    resource_version: str = ""
    generation: int = 0

    @classmethod
    def from_dict(
        cls,
        obj: Mapping[str, Any],
        where: str,
        *,
        kind: str = "",
        namespaced: bool = True,
        path: str = "metadata",
    ) -> Self:
        """Read ``metadata``; cluster-scoped objects always get namespace ""."""
        obj = f.item_mapping(obj, where, path)
        name = f.required_string(obj, "name", where, path)
        namespace = f.string(obj, "namespace", where, path)
        if not namespaced:
            namespace = ""
        elif not namespace:
            namespace = "default"
        owners = [
            OwnerReference.from_dict(item, where, path=f"{path}.ownerReferences[{i}]")
            for i, item in enumerate(f.sequence(obj, "ownerReferences", where, path))
        ]
        return cls(
            name=name,
            namespace=namespace,
            uid=f.string(obj, "uid", where, path) or object_uid(kind, namespace, name),
            labels=f.string_map(obj, "labels", where, path),
            annotations=f.string_map(obj, "annotations", where, path),
            creation_timestamp=f.timestamp(obj, "creationTimestamp", where, path),
            deletion_timestamp=f.timestamp(obj, "deletionTimestamp", where, path),
            owner_references=owners,
            resource_version=f.string(obj, "resourceVersion", where, path),
            generation=f.integer(obj, "generation", where, path),
        )

    def controller_ref(self) -> OwnerReference | None:
        """The owner with ``controller: true`` (a ReplicaSet, StatefulSet, Job, ...), if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return None


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "spec.taints[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        key = f.required_string(obj, "key", where, path)
        effect = f.required_string(obj, "effect", where, path)
        if effect not in TAINT_EFFECTS:
            f.unsupported(where, f"{path}.effect", effect, TAINT_EFFECTS)
        return cls(key=key, value=f.string(obj, "value", where, path), effect=effect)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "spec.tolerations[0]") -> Self:
        """Read one toleration with the API server's checks; a missing operator means Equal."""
        obj = f.item_mapping(obj, where, path)
        key = f.string(obj, "key", where, path)
        operator = f.string(obj, "operator", where, path) or "Equal"
        value = f.string(obj, "value", where, path)
        effect = f.string(obj, "effect", where, path)
        seconds = f.optional_integer(obj, "tolerationSeconds", where, path)
        if operator not in TOLERATION_OPERATORS:
            f.unsupported(where, f"{path}.operator", operator, TOLERATION_OPERATORS)
        if not key and operator != "Exists":
            f.invalid(where, f"{path}.operator", operator, _EMPTY_KEY_NEEDS_EXISTS)
        if operator == "Exists" and value:
            f.invalid(where, f"{path}.operator", value, "value must be empty when `operator` is 'Exists'")
        if effect and effect not in TAINT_EFFECTS:
            f.unsupported(where, f"{path}.effect", effect, TAINT_EFFECTS)
        if seconds is not None and effect != "NoExecute":
            f.invalid(where, f"{path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        return cls(key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds)

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: an empty effect matches every effect, an empty key (with Exists)
        every key; Exists ignores the value and Equal compares it."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class ContainerPort:
    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""

    @classmethod
    def from_dict(
        cls,
        obj: Mapping[str, Any],
        where: str,
        *,
        path: str = "spec.containers[0].ports[0]",
        host_network: bool = False,
    ) -> Self:
        """Read one port; on a host-network pod an unset hostPort defaults to containerPort."""
        obj = f.item_mapping(obj, where, path)
        if obj.get("containerPort") is None:
            f.reject(where, FieldError.required(f"{path}.containerPort"))
        container_port = f.integer(obj, "containerPort", where, path)
        host_port = f.integer(obj, "hostPort", where, path)
        protocol = f.string(obj, "protocol", where, path) or "TCP"
        if not 1 <= container_port <= 65535:
            f.invalid(where, f"{path}.containerPort", container_port, _PORT_RANGE)
        if not 0 <= host_port <= 65535:
            f.invalid(where, f"{path}.hostPort", host_port, _PORT_RANGE)
        if protocol not in PROTOCOLS:
            f.unsupported(where, f"{path}.protocol", protocol, PROTOCOLS)
        if host_network and host_port == 0:
            host_port = container_port
        return cls(
            container_port=container_port,
            host_port=host_port,
            protocol=protocol,
            host_ip=f.string(obj, "hostIP", where, path),
        )


@dataclass(frozen=True, slots=True)
class Container:
    """One container. ``requests`` holds only resources the manifest names (absent differs from explicit 0)
    after the API server's defaulting of missing requests from limits."""

    name: str
    image: str
    requests: dict[str, int]
    limits: dict[str, int]
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str | None = None

    @classmethod
    def from_dict(
        cls,
        obj: Mapping[str, Any],
        where: str,
        *,
        path: str = "spec.containers[0]",
        host_network: bool = False,
    ) -> Self:
        obj = f.item_mapping(obj, where, path)
        resources = f.mapping(obj, "resources", where, path)
        res_path = f"{path}.resources"
        requests = f.resource_list(resources, "requests", where, res_path)
        limits = f.resource_list(resources, "limits", where, res_path)
        raw_limits = f.mapping(resources, "limits", where, res_path)
        raw_requests = f.mapping(resources, "requests", where, res_path)
        for resource, limit in limits.items():
            request = requests.setdefault(resource, limit)
            if request > limit:
                f.invalid(
                    where,
                    f"{res_path}.requests.{resource}",
                    str(raw_requests[resource]),
                    f"must be less than or equal to {resource} limit of {raw_limits[resource]}",
                )
        ports = tuple(
            ContainerPort.from_dict(item, where, path=f"{path}.ports[{i}]", host_network=host_network)
            for i, item in enumerate(f.sequence(obj, "ports", where, path))
        )
        return cls(
            name=f.required_string(obj, "name", where, path),
            image=f.string(obj, "image", where, path),
            requests=requests,
            limits=limits,
            ports=ports,
            restart_policy=f.optional_string(obj, "restartPolicy", where, path),
        )

    @property
    def is_sidecar(self) -> bool:
        """A restartable init container: it keeps running beside the app containers."""
        return self.restart_policy == CONTAINER_RESTART_POLICY_ALWAYS


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One ``spec.resourceClaims`` entry: a name the containers refer to and the claim (or the template
    a claim is made from) it stands for. Kept only so that dynamic resource allocation is noticed: kubesched
    does not model ResourceClaims, and the DynamicResources plugin reports such pods unschedulable."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "spec.resourceClaims[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        return cls(
            name=f.required_string(obj, "name", where, path),
            resource_claim_name=f.optional_string(obj, "resourceClaimName", where, path),
            resource_claim_template_name=f.optional_string(obj, "resourceClaimTemplateName", where, path),
        )


@dataclass(slots=True)
class PodSpec:
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    node_name: str = ""
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    overhead: dict[str, int] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()
    host_network: bool = False
    affinity: Mapping[str, Any] | None = None
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    # Kept as given (each a mapping with a name): the volume plugins read the sources they care about.
    volumes: tuple[Mapping[str, Any], ...] = ()
    # Pod-level ``spec.resources.requests`` (PodLevelResources, on by default since v1.34), only the
    # resources that may be set there, after the API server's defaulting (see _pod_level_requests).
    pod_level_requests: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "spec") -> Self:
        obj = f.item_mapping(obj, where, path)
        host_network = f.boolean(obj, "hostNetwork", where, path)

        def containers(key: str) -> tuple[Container, ...]:
            return tuple(
                Container.from_dict(item, where, path=f"{path}.{key}[{i}]", host_network=host_network)
                for i, item in enumerate(f.sequence(obj, key, where, path))
            )

        app = containers("containers")
        if not app:
            f.reject(where, FieldError.required(f"{path}.containers"))
        init = containers("initContainers")
        _check_unique_names(app, init, where, path)

        preemption = f.string(obj, "preemptionPolicy", where, path) or "PreemptLowerPriority"
        if preemption not in PREEMPTION_POLICIES:
            f.unsupported(where, f"{path}.preemptionPolicy", preemption, PREEMPTION_POLICIES)
        gates: list[str] = []
        for i, item in enumerate(f.sequence(obj, "schedulingGates", where, path)):
            gate_path = f"{path}.schedulingGates[{i}]"
            gates.append(f.required_string(f.item_mapping(item, where, gate_path), "name", where, gate_path))
        affinity = obj.get("affinity")
        if affinity is not None and not isinstance(affinity, Mapping):
            f.wrong_type(where, f"{path}.affinity", "a mapping", affinity)
        spread = tuple(
            f.item_mapping(item, where, f"{path}.topologySpreadConstraints[{i}]")
            for i, item in enumerate(f.sequence(obj, "topologySpreadConstraints", where, path))
        )
        return cls(
            containers=app,
            init_containers=init,
            node_name=f.string(obj, "nodeName", where, path),
            scheduler_name=f.string(obj, "schedulerName", where, path) or DEFAULT_SCHEDULER_NAME,
            priority=f.optional_integer(obj, "priority", where, path),
            priority_class_name=f.string(obj, "priorityClassName", where, path),
            preemption_policy=preemption,
            tolerations=tuple(
                Toleration.from_dict(item, where, path=f"{path}.tolerations[{i}]")
                for i, item in enumerate(f.sequence(obj, "tolerations", where, path))
            ),
            node_selector=f.string_map(obj, "nodeSelector", where, path),
            overhead=f.resource_list(obj, "overhead", where, path),
            scheduling_gates=tuple(gates),
            host_network=host_network,
            affinity=affinity,
            topology_spread_constraints=spread,
            resource_claims=tuple(
                PodResourceClaim.from_dict(item, where, path=f"{path}.resourceClaims[{i}]")
                for i, item in enumerate(f.sequence(obj, "resourceClaims", where, path))
            ),
            pod_level_requests=_pod_level_requests(obj, app + init, where, path),
            volumes=tuple(
                f.item_mapping(item, where, f"{path}.volumes[{i}]")
                for i, item in enumerate(f.sequence(obj, "volumes", where, path))
            ),
        )


def is_pod_level_resource(name: str) -> bool:
    """The resources ``spec.resources`` may set: cpu, memory and huge pages (component-helpers)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _pod_level_requests(
    obj: Mapping[str, Any], containers: tuple[Container, ...], where: str, path: str
) -> dict[str, int]:
    """``spec.resources.requests`` as the API server stores it: a pod-level limit without a request
    defaults the request to the limit, unless a container requests that resource (the pod-level request
    is then the containers' sum, which is what the scheduler computes anyway)."""
    resources = f.mapping(obj, "resources", where, path)
    res_path = f"{path}.resources"
    requests = f.resource_list(resources, "requests", where, res_path)
    for name, limit in f.resource_list(resources, "limits", where, res_path).items():
        if name not in requests and not any(name in c.requests for c in containers):
            requests[name] = limit
    return {name: amount for name, amount in requests.items() if is_pod_level_resource(name)}


def _check_unique_names(app: tuple[Container, ...], init: tuple[Container, ...], where: str, path: str) -> None:
    seen: set[str] = set()
    for key, group in (("initContainers", init), ("containers", app)):
        for i, container in enumerate(group):
            if container.name in seen:
                f.reject(where, FieldError.duplicate(f"{path}.{key}[{i}].name", container.name))
            seen.add(container.name)


@dataclass(slots=True)
class PodStatus:
    phase: str = "Pending"
    nominated_node_name: str = ""
    conditions: list[dict[str, Any]] = field(default_factory=list)
    # When the kubelet started the pod (``status.startTime``); None until it runs. Preemption spares older pods.
    start_time: float | None = None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "status") -> Self:
        obj = f.item_mapping(obj, where, path)
        phase = f.string(obj, "phase", where, path) or "Pending"
        if phase not in POD_PHASES:
            f.unsupported(where, f"{path}.phase", phase, POD_PHASES)
        return cls(
            phase=phase,
            nominated_node_name=f.string(obj, "nominatedNodeName", where, path),
            conditions=[
                dict(f.item_mapping(item, where, f"{path}.conditions[{i}]"))
                for i, item in enumerate(f.sequence(obj, "conditions", where, path))
            ],
            start_time=f.timestamp(obj, "startTime", where, path),
        )


@dataclass(slots=True)
class Pod:
    """A pod: the parsed fields, and its whole manifest packed (:mod:`kubesched.api.packed`; read it as ``raw``)."""

    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus
    manifest: bytes = b"{}"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        return cls(
            metadata=ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind="Pod"),
            spec=PodSpec.from_dict(f.mapping(obj, "spec", where, ""), where),
            status=PodStatus.from_dict(f.mapping(obj, "status", where, ""), where),
            manifest=pack(obj),
        )

    @property
    def raw(self) -> dict[str, Any]:
        """The manifest the pod was parsed from, decoded anew on every read (changing it changes nothing)."""
        return unpack(self.manifest)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """ "namespace/name", the way kube-scheduler names a pod in logs and events."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def uid(self) -> str:
        return self.metadata.uid


@dataclass(frozen=True, slots=True)
class NodeImage:
    names: tuple[str, ...]
    size_bytes: int

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str, *, path: str = "status.images[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        names = f.sequence(obj, "names", where, path)
        for i, name in enumerate(names):
            if not isinstance(name, str):
                f.wrong_type(where, f"{path}.names[{i}]", "a string", name)
        return cls(names=tuple(names), size_bytes=f.integer(obj, "sizeBytes", where, path))


@dataclass(slots=True)
class Node:
    """A node. ``allocatable`` is ``status.allocatable``, or ``status.capacity`` when allocatable is absent.

    As in kube-scheduler, a node whose allocatable lacks ``pods`` admits no pods; manifests from
    ``kubectl get nodes -o yaml`` always carry it (the kubelet reports 110 by default).
    """

    metadata: ObjectMeta
    spec_unschedulable: bool
    taints: tuple[Taint, ...]
    allocatable: dict[str, int]
    capacity: dict[str, int]
    images: tuple[NodeImage, ...]
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind="Node", namespaced=False)
        spec = f.mapping(obj, "spec", where, "")
        status = f.mapping(obj, "status", where, "")
        taints = spec_taints(spec, where)
        capacity = f.resource_list(status, "capacity", where, "status")
        allocatable = (
            f.resource_list(status, "allocatable", where, "status")
            if status.get("allocatable") is not None
            else dict(capacity)
        )
        return cls(
            metadata=metadata,
            spec_unschedulable=f.boolean(spec, "unschedulable", where, "spec"),
            taints=taints,
            allocatable=allocatable,
            capacity=capacity,
            images=tuple(
                NodeImage.from_dict(item, where, path=f"status.images[{i}]")
                for i, item in enumerate(f.sequence(status, "images", where, "status"))
            ),
            raw=obj,
        )

    @property
    def name(self) -> str:
        return self.metadata.name


@dataclass(slots=True)
class Namespace:
    metadata: ObjectMeta
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(
            f.mapping(obj, "metadata", where, ""), where, kind="Namespace", namespaced=False
        )
        return cls(metadata=metadata, raw=obj)


@dataclass(slots=True)
class PriorityClass:
    metadata: ObjectMeta
    value: int
    global_default: bool
    preemption_policy: str
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(
            f.mapping(obj, "metadata", where, ""), where, kind="PriorityClass", namespaced=False
        )
        if obj.get("value") is None:
            f.reject(where, FieldError.required("value"))
        value = f.integer(obj, "value", where, "")
        if value > HIGHEST_USER_DEFINABLE_PRIORITY and not metadata.name.startswith("system-"):
            f.invalid(
                where,
                "value",
                value,
                f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        policy = f.string(obj, "preemptionPolicy", where, "") or "PreemptLowerPriority"
        if policy not in PREEMPTION_POLICIES:
            f.unsupported(where, "preemptionPolicy", policy, PREEMPTION_POLICIES)
        return cls(
            metadata=metadata,
            value=value,
            global_default=f.boolean(obj, "globalDefault", where, ""),
            preemption_policy=policy,
            raw=obj,
        )


@dataclass(slots=True)
class PodDisruptionBudget:
    """A PDB; ``selector`` stays a raw LabelSelector (compiled by DefaultPreemption)."""

    metadata: ObjectMeta
    selector: Mapping[str, Any] | None
    min_available: int | str | None
    max_unavailable: int | str | None
    disruptions_allowed: int
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind="PodDisruptionBudget")
        spec = f.mapping(obj, "spec", where, "")
        selector = spec.get("selector")
        if selector is not None and not isinstance(selector, Mapping):
            f.wrong_type(where, "spec.selector", "a mapping", selector)
        min_available = _int_or_percent(spec, "minAvailable", where)
        max_unavailable = _int_or_percent(spec, "maxUnavailable", where)
        if min_available is not None and max_unavailable is not None:
            f.invalid(where, "spec", "", "minAvailable and maxUnavailable cannot be both set")
        status = f.mapping(obj, "status", where, "")
        return cls(
            metadata=metadata,
            selector=selector,
            min_available=min_available,
            max_unavailable=max_unavailable,
            disruptions_allowed=f.integer(status, "disruptionsAllowed", where, "status"),
            raw=obj,
        )


def _int_or_percent(spec: Mapping[str, Any], key: str, where: str) -> int | str | None:
    raw = f.int_or_string(spec, key, where, "spec")
    path = f"spec.{key}"
    if isinstance(raw, int) and raw < 0:
        f.invalid(where, path, raw, "must be greater than or equal to 0")
    if isinstance(raw, str):
        digits = raw[:-1]
        if not raw.endswith("%") or not digits.isdigit() or not digits.isascii():
            f.invalid(where, path, raw, "a valid percent string must be a numeric string followed by an ending '%'")
        if int(digits) > 100:
            f.invalid(where, path, raw, "must not be greater than 100%")
    return raw
