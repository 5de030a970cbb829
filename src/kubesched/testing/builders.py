"""Fluent builders for test pods and nodes: ``make_pod().name("p").req(cpu="2").obj()``.

Who calls it: unit and integration tests of every layer, and benchmark workload generators. A builder writes
the manifest a user would write (``.raw()``) and ``.obj()`` parses it with the real ``from_dict``, so tests get
the same defaulting and validation as objects read from files.

Resource keyword arguments use underscores for hyphens (``ephemeral_storage="1Gi"``); names that are not
identifiers go in the positional mapping (``.req({"nvidia.com/gpu": 1}, cpu="2")``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Self

from kubesched.api.objects import Node, Pod

__all__ = ["NodeBuilder", "PodBuilder", "make_node", "make_pod"]

QuantityValue = str | int | float

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def _resources(positional: Mapping[str, QuantityValue] | None, named: Mapping[str, QuantityValue]) -> dict[str, Any]:
    merged: dict[str, Any] = dict(positional or {})
    merged.update({key.replace("_", "-"): amount for key, amount in named.items()})
    return merged


class PodBuilder:
    """Builds a Pod manifest step by step; containers are added on demand (a pod always gets at least one)."""

    __slots__ = ("_metadata", "_spec", "_status")

    def __init__(self, name: str = "pod") -> None:
        self._metadata: dict[str, Any] = {"name": name, "namespace": "default"}
        self._spec: dict[str, Any] = {"containers": []}
        self._status: dict[str, Any] = {}

    # metadata
    def name(self, name: str) -> Self:
        self._metadata["name"] = name
        return self

    def namespace(self, namespace: str) -> Self:
        self._metadata["namespace"] = namespace
        return self

    def uid(self, uid: str) -> Self:
        self._metadata["uid"] = uid
        return self

    def label(self, key: str, value: str) -> Self:
        self._metadata.setdefault("labels", {})[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._metadata.setdefault("labels", {}).update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._metadata.setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str, *, uid: str = "", controller: bool = True) -> Self:
        ref = {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": controller}
        self._metadata.setdefault("ownerReferences", []).append(ref)
        return self

    def terminating(self, at: str = "2024-01-01T00:00:00Z") -> Self:
        self._metadata["deletionTimestamp"] = at
        return self

    # containers and resources
    def _first_container(self) -> dict[str, Any]:
        containers: list[dict[str, Any]] = self._spec["containers"]
        if not containers:
            containers.append({"name": "c0", "image": PAUSE_IMAGE})
        return containers[0]

    def req(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        """Set requests on the first container."""
        res = self._first_container().setdefault("resources", {})
        res.setdefault("requests", {}).update(_resources(resources, named))
        return self

    def lim(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        """Set limits on the first container."""
        res = self._first_container().setdefault("resources", {})
        res.setdefault("limits", {}).update(_resources(resources, named))
        return self

    def _add_container(
        self,
        key: str,
        prefix: str,
        requests: dict[str, Any],
        limits: Mapping[str, QuantityValue] | None,
        name: str | None,
        image: str,
        restart_policy: str | None = None,
    ) -> Self:
        group: list[dict[str, Any]] = self._spec.setdefault(key, [])
        container: dict[str, Any] = {"name": name or f"{prefix}{len(group)}", "image": image}
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = requests
        if limits:
            resources["limits"] = dict(limits)
        if resources:
            container["resources"] = resources
        if restart_policy is not None:
            container["restartPolicy"] = restart_policy
        group.append(container)
        return self

    def container(
        self,
        requests: Mapping[str, QuantityValue] | None = None,
        /,
        *,
        name: str | None = None,
        image: str = PAUSE_IMAGE,
        limits: Mapping[str, QuantityValue] | None = None,
        **named: QuantityValue,
    ) -> Self:
        """Add an app container with these requests."""
        return self._add_container("containers", "c", _resources(requests, named), limits, name, image)

    def init_container(
        self,
        requests: Mapping[str, QuantityValue] | None = None,
        /,
        *,
        name: str | None = None,
        image: str = PAUSE_IMAGE,
        limits: Mapping[str, QuantityValue] | None = None,
        **named: QuantityValue,
    ) -> Self:
        """Add a regular init container (runs to completion before the app containers)."""
        return self._add_container("initContainers", "init", _resources(requests, named), limits, name, image)

    def sidecar(
        self,
        requests: Mapping[str, QuantityValue] | None = None,
        /,
        *,
        name: str | None = None,
        image: str = PAUSE_IMAGE,
        limits: Mapping[str, QuantityValue] | None = None,
        **named: QuantityValue,
    ) -> Self:
        """Add a restartable init container (``restartPolicy: Always``)."""
        return self._add_container(
            "initContainers", "sidecar", _resources(requests, named), limits, name, image, "Always"
        )

    def overhead(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        self._spec.setdefault("overhead", {}).update(_resources(resources, named))
        return self

    def host_port(
        self, port: int, *, protocol: str = "TCP", host_ip: str = "", container_port: int | None = None
    ) -> Self:
        """Expose ``port`` on the node from the first container."""
        entry: dict[str, Any] = {"containerPort": container_port or port, "hostPort": port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        self._first_container().setdefault("ports", []).append(entry)
        return self

    def host_network(self, enabled: bool = True) -> Self:
        self._spec["hostNetwork"] = enabled
        return self

    # placement
    def toleration(
        self,
        key: str = "",
        operator: str = "Equal",
        value: str = "",
        effect: str = "",
        seconds: int | None = None,
    ) -> Self:
        entry: dict[str, Any] = {"operator": operator}
        if key:
            entry["key"] = key
        if value:
            entry["value"] = value
        if effect:
            entry["effect"] = effect
        if seconds is not None:
            entry["tolerationSeconds"] = seconds
        self._spec.setdefault("tolerations", []).append(entry)
        return self

    def node_selector(self, selector: Mapping[str, str]) -> Self:
        self._spec.setdefault("nodeSelector", {}).update(selector)
        return self

    def affinity(self, affinity: Mapping[str, Any]) -> Self:
        """Set ``spec.affinity`` verbatim (nodeAffinity / podAffinity / podAntiAffinity)."""
        self._spec["affinity"] = copy.deepcopy(dict(affinity))
        return self

    def pod_affinity_term(self, term: Mapping[str, Any], *, anti: bool = False, weight: int | None = None) -> Self:
        """Append one PodAffinityTerm verbatim: required, or preferred with ``weight``; ``anti`` for podAntiAffinity."""
        affinity = self._spec.setdefault("affinity", {})
        section = affinity.setdefault("podAntiAffinity" if anti else "podAffinity", {})
        if weight is None:
            section.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(copy.deepcopy(dict(term)))
        else:
            entry = {"weight": weight, "podAffinityTerm": copy.deepcopy(dict(term))}
            section.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(entry)
        return self

    def pod_affinity(
        self,
        key: str,
        operator: str,
        values: Sequence[str] = (),
        *,
        topology_key: str,
        anti: bool = False,
        weight: int | None = None,
    ) -> Self:
        """A term selecting pods by one ``key operator values`` requirement (kube's st ``PodAffinityIn`` & co)."""
        requirement: dict[str, Any] = {"key": key, "operator": operator}
        if values:
            requirement["values"] = list(values)
        term = {"labelSelector": {"matchExpressions": [requirement]}, "topologyKey": topology_key}
        return self.pod_affinity_term(term, anti=anti, weight=weight)

    def spread(self, constraint: Mapping[str, Any]) -> Self:
        """Append one ``topologySpreadConstraints`` entry verbatim."""
        self._spec.setdefault("topologySpreadConstraints", []).append(copy.deepcopy(dict(constraint)))
        return self

    def priority(self, value: int) -> Self:
        self._spec["priority"] = value
        return self

    def priority_class(self, name: str) -> Self:
        self._spec["priorityClassName"] = name
        return self

    def preemption_policy(self, policy: str) -> Self:
        self._spec["preemptionPolicy"] = policy
        return self

    def scheduler(self, name: str) -> Self:
        self._spec["schedulerName"] = name
        return self

    def node_name(self, name: str) -> Self:
        self._spec["nodeName"] = name
        return self

    def gates(self, *names: str) -> Self:
        self._spec.setdefault("schedulingGates", []).extend({"name": n} for n in names)
        return self

    def resource_claim(self, name: str, *, claim: str | None = None, template: str | None = None) -> Self:
        """Append one ``spec.resourceClaims`` entry naming a ResourceClaim or a ResourceClaimTemplate."""
        entry: dict[str, str] = {"name": name}
        if claim is not None:
            entry["resourceClaimName"] = claim
        if template is not None:
            entry["resourceClaimTemplateName"] = template
        self._spec.setdefault("resourceClaims", []).append(entry)
        return self

    def volume(self, volume: Mapping[str, Any]) -> Self:
        """Append one ``spec.volumes`` entry as written (e.g. ``{"name": "v", "gcePersistentDisk": {...}}``)."""
        self._spec.setdefault("volumes", []).append(copy.deepcopy(dict(volume)))
        return self

    def pvc(self, claim_name: str, *, name: str | None = None) -> Self:
        """Append a ``persistentVolumeClaim`` volume (named after the claim unless ``name`` is given)."""
        return self.volume({"name": name or claim_name, "persistentVolumeClaim": {"claimName": claim_name}})

    def ephemeral_volume(self, name: str, *, storage: str = "1Gi") -> Self:
        """A generic ephemeral volume; its claim is ``<pod>-<name>``."""
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}
        return self.volume({"name": name, "ephemeral": {"volumeClaimTemplate": template}})

    # status
    def nominated(self, node_name: str) -> Self:
        self._status["nominatedNodeName"] = node_name
        return self

    def started(self, at: str) -> Self:
        """``status.startTime`` (RFC 3339): when the kubelet started the pod."""
        self._status["startTime"] = at
        return self

    def condition(self, kind: str, status: str = "True", reason: str = "", message: str = "") -> Self:
        """A ``status.conditions`` entry (e.g. ``DisruptionTarget`` with reason ``PreemptionByScheduler``)."""
        entry = {"type": kind, "status": status}
        if reason:
            entry["reason"] = reason
        if message:
            entry["message"] = message
        self._status.setdefault("conditions", []).append(entry)
        return self

    def phase(self, phase: str) -> Self:
        self._status["phase"] = phase
        return self

    # results
    def raw(self) -> dict[str, Any]:
        """The manifest as a fresh dict (later builder calls do not change it)."""
        self._first_container()
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self._metadata,
            "spec": self._spec,
        }
        if self._status:
            manifest["status"] = self._status
        return copy.deepcopy(manifest)

    def obj(self) -> Pod:
        raw = self.raw()
        return Pod.from_dict(raw, f"make_pod: Pod {raw['metadata']['namespace']}/{raw['metadata']['name']}")


class NodeBuilder:
    """Builds a Node manifest; it starts with ``capacity: {pods: 110}``, the kubelet's default."""

    __slots__ = ("_metadata", "_spec", "_status")

    def __init__(self, name: str = "node") -> None:
        self._metadata: dict[str, Any] = {"name": name}
        self._spec: dict[str, Any] = {}
        self._status: dict[str, Any] = {"capacity": {"pods": 110}}

    def name(self, name: str) -> Self:
        self._metadata["name"] = name
        return self

    def label(self, key: str, value: str) -> Self:
        self._metadata.setdefault("labels", {})[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._metadata.setdefault("labels", {}).update(labels)
        return self

    def zone(self, zone: str) -> Self:
        return self.label("topology.kubernetes.io/zone", zone)

    def capacity(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        """Merge into ``status.capacity`` (which is also the allocatable unless :meth:`allocatable` is used)."""
        self._status["capacity"].update(_resources(resources, named))
        return self

    def allocatable(self, resources: Mapping[str, QuantityValue] | None = None, /, **named: QuantityValue) -> Self:
        """Merge into ``status.allocatable``; once set, it alone decides what the node can hold."""
        self._status.setdefault("allocatable", {}).update(_resources(resources, named))
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        entry = {"key": key, "effect": effect}
        if value:
            entry["value"] = value
        self._spec.setdefault("taints", []).append(entry)
        return self

    def unschedulable(self, enabled: bool = True) -> Self:
        self._spec["unschedulable"] = enabled
        return self

    def condition(self, kind: str, status: str = "True") -> Self:
        """A ``status.conditions`` entry, as a kubelet reports it (``Ready``, ``MemoryPressure``, ...)."""
        self._status.setdefault("conditions", []).append({"type": kind, "status": status})
        return self

    def image(self, name: str, *, size: int, aliases: Sequence[str] = ()) -> Self:
        self._status.setdefault("images", []).append({"names": [name, *aliases], "sizeBytes": size})
        return self

    def raw(self) -> dict[str, Any]:
        """The manifest as a fresh dict (later builder calls do not change it)."""
        return copy.deepcopy(
            {"apiVersion": "v1", "kind": "Node", "metadata": self._metadata, "spec": self._spec, "status": self._status}
        )

    def obj(self) -> Node:
        raw = self.raw()
        return Node.from_dict(raw, f"make_node: Node {raw['metadata']['name']}")


def make_pod(name: str = "pod") -> PodBuilder:
    return PodBuilder(name)


def make_node(name: str = "node") -> NodeBuilder:
    return NodeBuilder(name)
