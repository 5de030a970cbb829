"""Seeded random clusters and workloads for the differential tests against kube-scheduler.

Called by :mod:`.runner` (and through it by ``python -m tests.differential.run`` and the CI test). One seed gives
one :class:`Scenario`: the manifests ``kubesched simulate`` and ``kube-oracle simulate`` both read (Namespaces,
PriorityClasses, Nodes, running pods, PodDisruptionBudgets, pending pods, in that order) and a
KubeSchedulerConfiguration with ``percentageOfNodesToScore: 100``. The same seed and mode always give the same
files (``random.Random`` seeded with a string is stable across Python runs).

What a scenario draws from is every input kube-scheduler's default plugins read and kube-oracle loads:

- nodes: cpu, memory, pods, ephemeral-storage, huge pages and an extended resource; nodes with only
  ``capacity``; unschedulable and tainted nodes (every effect); zone, disk and generation labels, some nodes
  without a zone; images with one or two names;
- running pods: over-committing their node, terminating (``deletionTimestamp``), finished (Succeeded/Failed),
  with host ports, inline disks, labels the pending pods' affinity and spread terms select, start times;
- pending pods: requests and limits (limits alone too), init and sidecar containers, pod overhead, pod-level
  resources, host ports (protocols, host IPs, ``hostNetwork``), images, ``nodeSelector``, node affinity
  (required and preferred, every operator, ``matchFields``), inter-pod affinity and anti-affinity (required and
  preferred; ``namespaces``, ``namespaceSelector``, ``matchLabelKeys``/``mismatchLabelKeys``), topology spread
  (``minDomains``, ``nodeAffinityPolicy``, ``nodeTaintsPolicy``, ``matchLabelKeys``, both
  ``whenUnsatisfiable``), tolerations, priorities with and without ``preemptionPolicy: Never``, nominated
  pods, scheduling gates, claims of missing PersistentVolumeClaims and generic ephemeral volumes;
- PodDisruptionBudgets over running pods, with allowed disruptions in their status;
- in ``profiles`` mode, several profiles (bin packing, RequestedToCapacityRatio, changed weights, disabled
  plugins, plugin arguments) and pods spread over them.

kube-oracle loads no PersistentVolumes, PersistentVolumeClaims, StorageClasses or CSINodes (it warns
``skipping kind``), so volumes are generated only where it can judge them: in-tree inline disks
(VolumeRestrictions' conflicts) and claims that do not exist (VolumeBinding's PreFilter). Pods carrying a
nomination are of the highest priority class: a preemption clears lower-priority pods' nominations with a status
patch, which kube-oracle's fake clientset delivers to its scheduler with an unchanged resourceVersion, and
kube-scheduler ignores such an update (docs/reference/compatibility.md).

Pods are written as an API server stores them: an affinity term's ``matchLabelKeys``/``mismatchLabelKeys`` are
also merged into its label selector, as the API server does on create (docs/reference/compatibility.md).
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.quantity import parse_quantity

Manifest = dict[str, Any]

MODES = ("default", "profiles")
DEFAULT_SCHEDULER = "default-scheduler"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
GPU = "example.com/gpu"
HUGEPAGES = "hugepages-2Mi"
NAMESPACES = ("default", "team-a", "team-b")
NAMESPACE_LABELS: dict[str, dict[str, str]] = {
    "team-a": {"team": "a", "env": "prod"},
    "team-b": {"team": "b", "env": "dev"},
}
APPS = ("web", "api", "db", "cache")
VERSIONS = ("v1", "v2")
ZONES = ("zone-a", "zone-b", "zone-c")
IMAGES: dict[str, int] = {
    "registry.example/app:1": 350_000_000,
    "registry.example/db:2": 900_000_000,
    "registry.example/ml:3": 1_600_000_000,
    "docker.io/library/nginx:1.27": 190_000_000,
    "registry.example/tiny:1": 20_000_000,
}
# How pods name the images above: the short form of docker.io images normalizes to the node's name.
POD_IMAGES = (
    "registry.example/app:1",
    "registry.example/db:2",
    "registry.example/ml:3",
    "nginx:1.27",
    "registry.example/tiny:1",
    "registry.example/absent:9",
)
TAINTS: tuple[tuple[str, str | None], ...] = (("dedicated", "gpu"), ("spot", None), ("maintenance", None))
PRIORITY_CLASSES: dict[str, tuple[int, str | None]] = {
    "low": (100, None),
    "mid-never": (500, "Never"),
    "high": (1000, None),
}
HOST_PORTS = (80, 8080, 8443, 9090)
RUNTIME_CLASS: Manifest = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "sandboxed"},
    "handler": "sandboxed",
    "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
}
DISKS = ("disk-1", "disk-2", "disk-3")
START = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class Scenario:
    """One generated cluster: its manifests in file order and its configuration."""

    seed: int
    mode: str
    objects: list[Manifest]
    config: Manifest
    features: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.mode}-{self.seed}"

    def pods(self) -> list[Manifest]:
        return [obj for obj in self.objects if obj["kind"] == "Pod"]

    def pending_pods(self) -> list[Manifest]:
        return [pod for pod in self.pods() if not pod["spec"].get("nodeName")]

    def write(self, directory: Path) -> tuple[Path, Path]:
        """Write ``cluster.yaml`` and ``config.yaml`` into ``directory``; returns their paths."""
        return write_files(directory, self.objects, self.config)


def dump_manifests(objects: Sequence[Manifest]) -> str:
    return "---\n".join(yaml.safe_dump(obj, sort_keys=False) for obj in objects)


def as_submitted(obj: Manifest) -> Manifest:
    """``obj`` as a client would create it: without the label selector expressions the API server merges in from
    an affinity term's ``matchLabelKeys``/``mismatchLabelKeys`` (the generator's selectors never name those keys
    themselves), and without ``status``."""
    submitted = copy.deepcopy(obj)
    submitted.pop("status", None)
    if submitted.get("kind") != "Pod":
        return submitted
    affinity = submitted["spec"].get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        weighted = terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        for term in [
            *(terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []),
            *(w["podAffinityTerm"] for w in weighted),
        ]:
            merged = {*term.get("matchLabelKeys", ()), *term.get("mismatchLabelKeys", ())}
            selector = term.get("labelSelector") or {}
            if merged and "matchExpressions" in selector:
                selector["matchExpressions"] = [e for e in selector["matchExpressions"] if e["key"] not in merged]
                if not selector["matchExpressions"]:
                    del selector["matchExpressions"]
    return submitted


def write_files(directory: Path, objects: Sequence[Manifest], config: Manifest) -> tuple[Path, Path]:
    """``cluster.yaml`` (the manifests in order) and ``config.yaml`` in ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    cluster = directory / "cluster.yaml"
    config_path = directory / "config.yaml"
    cluster.write_text(dump_manifests(objects))
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return cluster, config_path


class _Draw:
    """``random.Random`` with the few shapes of choice the generator needs, and a tally of features used."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        self.features: dict[str, int] = {}

    def chance(self, probability: float, feature: str | None = None) -> bool:
        hit = self.rng.random() < probability
        if hit and feature:
            self.features[feature] = self.features.get(feature, 0) + 1
        return hit

    def note(self, feature: str) -> None:
        self.features[feature] = self.features.get(feature, 0) + 1

    def pick(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def some(self, options: Sequence[Any], low: int, high: int) -> list[Any]:
        return self.rng.sample(list(options), self.rng.randint(low, min(high, len(options))))

    def between(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


def generate(seed: int, mode: str = "default") -> Scenario:
    """The scenario of ``seed`` in ``mode`` (``default``: kube-scheduler's default profile alone; ``profiles``:
    several profiles with other plugin settings)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    draw = _Draw(f"kubesched-differential:{mode}:{seed}")
    config, scheduler_names = _config(draw, mode)
    nodes = [_node(draw, index) for index in range(draw.between(3, 9))]
    node_names = [node["metadata"]["name"] for node in nodes]
    running = _running_pods(draw, nodes)
    pdbs = _pdbs(draw, running)
    pending = [_pending_pod(draw, index, node_names, scheduler_names) for index in range(draw.between(22, 38))]
    objects: list[Manifest] = [
        *(_namespace(name) for name in NAMESPACES if name != "default"),
        *(_priority_class(name, value, policy) for name, (value, policy) in PRIORITY_CLASSES.items()),
        *([copy.deepcopy(RUNTIME_CLASS)] if any(pod["spec"].get("runtimeClassName") for pod in pending) else []),
        *nodes,
        *running,
        *pdbs,
        *pending,
    ]
    return Scenario(seed, mode, objects, config, dict(sorted(draw.features.items())))


# ---- configuration ---------------------------------------------------------------------------------------


def _config(draw: _Draw, mode: str) -> tuple[Manifest, list[str]]:
    profiles: list[Manifest] = [{"schedulerName": DEFAULT_SCHEDULER}]
    if mode == "profiles":
        variants = draw.some(list(_PROFILE_VARIANTS), 1, 3)
        for name in variants:
            profile: Manifest = {"schedulerName": name}
            profile.update(_PROFILE_VARIANTS[name](draw))
            profiles.append(profile)
            draw.note(f"profile:{name}")
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "profiles": profiles,
    }
    return config, [profile["schedulerName"] for profile in profiles]


def _bin_packing(draw: _Draw) -> Manifest:
    resources = [{"name": "cpu", "weight": draw.between(1, 3)}, {"name": "memory", "weight": draw.between(1, 3)}]
    if draw.chance(0.5):
        resources.append({"name": GPU, "weight": draw.between(1, 5)})
    return {
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {"scoringStrategy": {"type": "MostAllocated", "resources": resources}},
            }
        ]
    }


def _ratio(draw: _Draw) -> Manifest:
    shape = [{"utilization": 0, "score": draw.pick((0, 10))}, {"utilization": 100, "score": draw.pick((0, 10))}]
    if draw.chance(0.5):
        shape.insert(1, {"utilization": draw.between(20, 80), "score": draw.between(0, 10)})
    return {
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                        "requestedToCapacityRatio": {"shape": shape},
                    }
                },
            }
        ]
    }


def _weights(draw: _Draw) -> Manifest:
    plugins = ["TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity", "ImageLocality"]
    enabled = [{"name": name, "weight": draw.between(1, 10)} for name in draw.some(plugins, 1, 3)]
    disabled = [{"name": name} for name in draw.some(["NodeResourcesBalancedAllocation", "NodeResourcesFit"], 0, 1)]
    score: Manifest = {"enabled": enabled}
    if disabled:
        score["disabled"] = disabled
    return {"plugins": {"score": score}}


def _no_preemption(draw: _Draw) -> Manifest:
    del draw
    return {"plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}


def _plugin_args(draw: _Draw) -> Manifest:
    config: list[Manifest] = [
        {
            "name": "InterPodAffinity",
            "args": {
                "hardPodAffinityWeight": draw.pick((0, 1, 10, 100)),
                "ignorePreferredTermsOfExistingPods": draw.chance(0.5),
            },
        },
        {
            "name": "NodeResourcesBalancedAllocation",
            "args": {"resources": [{"name": "cpu", "weight": 1}, {"name": draw.pick(("memory", GPU)), "weight": 1}]},
        },
    ]
    if draw.chance(0.5):
        config.append(
            {
                "name": "PodTopologySpread",
                "args": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": draw.between(1, 3), "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}
                    ],
                },
            }
        )
    if draw.chance(0.5):
        config.append(
            {
                "name": "NodeAffinity",
                "args": {
                    "addedAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd", "hdd"]}]}
                            ]
                        }
                    }
                },
            }
        )
    if draw.chance(0.4):
        config.append({"name": "NodeResourcesFit", "args": {"ignoredResources": [GPU]}})
    return {"pluginConfig": config}


_PROFILE_VARIANTS: dict[str, Callable[[_Draw], Manifest]] = {
    "bin-packing": _bin_packing,
    "ratio": _ratio,
    "weights": _weights,
    "no-preemption": _no_preemption,
    "plugin-args": _plugin_args,
}


# ---- nodes -----------------------------------------------------------------------------------------------


def _namespace(name: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": NAMESPACE_LABELS[name]}}


def _priority_class(name: str, value: int, policy: str | None) -> Manifest:
    manifest: Manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if policy:
        manifest["preemptionPolicy"] = policy
    return manifest


def _node(draw: _Draw, index: int) -> Manifest:
    name = f"node-{index:02d}"
    labels = {HOSTNAME: name}
    if not draw.chance(0.1, "node:no-zone"):
        labels[ZONE] = draw.pick(ZONES)
    labels["disk"] = draw.pick(("ssd", "hdd"))
    labels["gen"] = str(draw.between(1, 8))
    cpu = draw.pick((1000, 2000, 2000, 3000, 4000, 6000))
    memory = draw.pick((2048, 4096, 4096, 6144, 8192))
    pods = draw.pick(("110", "110", "110", "30", "6", "3"))
    capacity: Manifest = {"cpu": f"{cpu + draw.pick((0, 100, 250))}m", "memory": f"{memory + 200}Mi", "pods": pods}
    allocatable: Manifest = {"cpu": f"{cpu}m", "memory": f"{memory}Mi", "pods": pods}
    if draw.chance(0.25, "node:gpu"):
        labels["gpu"] = "true"
        count = str(draw.pick((1, 2, 4)))
        capacity[GPU] = allocatable[GPU] = count
    if draw.chance(0.15, "node:ephemeral-storage"):
        storage = draw.pick(("10Gi", "20Gi"))
        capacity["ephemeral-storage"] = allocatable["ephemeral-storage"] = storage
    if draw.chance(0.1, "node:hugepages"):
        capacity[HUGEPAGES] = allocatable[HUGEPAGES] = draw.pick(("64Mi", "128Mi"))
    status: Manifest = {"capacity": capacity}
    if not draw.chance(0.15, "node:capacity-only"):
        status["allocatable"] = allocatable
    if draw.chance(0.7, "node:images"):
        status["images"] = [_image(draw, image) for image in draw.some(list(IMAGES), 1, 3)]
    spec: Manifest = {}
    if draw.chance(0.1, "node:unschedulable"):
        spec["unschedulable"] = True
    if draw.chance(0.3, "node:taints"):
        taints = []
        for key, value in draw.some(TAINTS, 1, 2):
            effect = draw.pick(("NoSchedule", "PreferNoSchedule", "NoExecute"))
            draw.note(f"node:taint-{effect}")
            taint: Manifest = {"key": key, "effect": effect}
            if value is not None:
                taint["value"] = value
            taints.append(taint)
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": status,
    }


def _image(draw: _Draw, image: str) -> Manifest:
    names = [image]
    if draw.chance(0.3):
        names.insert(0, image.rsplit(":", 1)[0] + "@sha256:" + f"{draw.rng.getrandbits(64):016x}" * 4)
    return {"names": names, "sizeBytes": IMAGES[image]}


# ---- pods ------------------------------------------------------------------------------------------------


def _running_pods(draw: _Draw, nodes: Sequence[Manifest]) -> list[Manifest]:
    pods: list[Manifest] = []
    for node in nodes:
        for _ in range(draw.pick((0, 0, 1, 1, 2, 3))):
            index = len(pods) + 1
            pod = _base_pod(draw, f"running-{index:02d}", running=True)
            spec = pod["spec"]
            spec["nodeName"] = node["metadata"]["name"]
            status: Manifest = {"phase": "Running", "startTime": f"2026-01-01T00:{index:02d}:00Z"}
            if draw.chance(0.1, "running:over-commit"):
                spec["containers"][0]["resources"] = {"requests": {"cpu": draw.pick(("8", "64")), "memory": "1Gi"}}
            if draw.chance(0.08, "running:terminating"):
                pod["metadata"]["deletionTimestamp"] = START
                pod["metadata"]["deletionGracePeriodSeconds"] = 30
            elif draw.chance(0.08, "running:finished"):
                status["phase"] = draw.pick(("Succeeded", "Failed"))
            if draw.chance(0.1, "running:same-start"):
                status["startTime"] = START
            pod["status"] = status
            pods.append(pod)
    return pods


def _pdbs(draw: _Draw, running: Sequence[Manifest]) -> list[Manifest]:
    pdbs: list[Manifest] = []
    for namespace in NAMESPACES:
        if not any(pod["metadata"]["namespace"] == namespace for pod in running) or not draw.chance(0.4):
            continue
        draw.note("pdb")
        spec: Manifest = {"selector": {"matchLabels": {"app": draw.pick(APPS)}}}
        if draw.chance(0.5):
            spec["minAvailable"] = draw.between(0, 2)
        else:
            spec["maxUnavailable"] = draw.between(0, 1)
        allowed = draw.between(0, 2)
        pdbs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"pdb-{namespace}", "namespace": namespace},
                "spec": spec,
                "status": {
                    "disruptionsAllowed": allowed,
                    "currentHealthy": 2,
                    "desiredHealthy": 2 - allowed,
                    "expectedPods": 2,
                },
            }
        )
    return pdbs


def _base_pod(draw: _Draw, name: str, *, running: bool) -> Manifest:
    namespace = draw.pick(NAMESPACES) if draw.chance(0.35) else "default"
    labels = {"app": draw.pick(APPS)}
    if draw.chance(0.6):
        labels["version"] = draw.pick(VERSIONS)
    containers = [_container(draw, f"c{i}", running=running) for i in range(draw.pick((1, 1, 1, 2, 3)))]
    spec: Manifest = {"containers": containers}
    priority = draw.pick((None, "low", "low", "high", "mid-never"))
    if priority is not None:
        spec["priorityClassName"] = priority
    if draw.chance(0.25):
        spec["tolerations"] = _tolerations(draw)
    if draw.chance(0.12, "pod:host-ports"):
        if draw.chance(0.25, "pod:host-network"):
            spec["hostNetwork"] = True
            containers[0]["ports"] = [{"containerPort": draw.pick(HOST_PORTS), "protocol": "TCP"}]
        else:
            containers[0]["ports"] = [_host_port(draw)]
    if draw.chance(0.06, "pod:inline-disk"):
        spec["volumes"] = [_inline_disk(draw)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _container(draw: _Draw, name: str, *, running: bool) -> Manifest:
    container: Manifest = {"name": name, "image": draw.pick(POD_IMAGES)}
    if draw.chance(0.1, "container:best-effort"):
        return container
    requests: Manifest = {}
    if draw.chance(0.9):
        requests["cpu"] = draw.pick(("100m", "200m", "250m", "0.3", "500m", "1", "1500m", "2", "3"))
    if draw.chance(0.8):
        requests["memory"] = draw.pick(("64Mi", "128Mi", "200M", "512Mi", "1Gi", "2Gi", "3Gi"))
    limits: Manifest = {}
    if not running and draw.chance(0.1, "container:gpu"):
        requests[GPU] = limits[GPU] = str(draw.pick((1, 2)))
    if draw.chance(0.06, "container:ephemeral-storage"):
        requests["ephemeral-storage"] = draw.pick(("1Gi", "8Gi", "16Gi"))
    if draw.chance(0.04, "container:hugepages"):
        requests[HUGEPAGES] = limits[HUGEPAGES] = draw.pick(("32Mi", "64Mi"))
        requests.setdefault("memory", "64Mi")
    if draw.chance(0.08, "container:limits-only"):
        limits.update({key: value for key, value in requests.items() if key in ("cpu", "memory")})
        requests = {key: value for key, value in requests.items() if key not in ("cpu", "memory")}
    elif draw.chance(0.15, "container:limits"):
        if "cpu" in requests:
            limits["cpu"] = "4"
        if "memory" in requests:
            limits["memory"] = "4Gi"
    resources: Manifest = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    if resources:
        container["resources"] = resources
    return container


def _tolerations(draw: _Draw) -> list[Manifest]:
    tolerations: list[Manifest] = []
    for key, value in draw.some(TAINTS, 1, 2):
        toleration: Manifest = {"key": key}
        if value is not None and draw.chance(0.7):
            toleration.update({"operator": "Equal", "value": value})
        else:
            toleration["operator"] = "Exists"
        effect = draw.pick(("NoSchedule", "PreferNoSchedule", "NoExecute", None))
        if effect is not None:
            toleration["effect"] = effect
            if effect == "NoExecute" and draw.chance(0.3):
                toleration["tolerationSeconds"] = 60
        tolerations.append(toleration)
    if draw.chance(0.1, "pod:toleration-unschedulable"):
        tolerations.append({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"})
    if draw.chance(0.03, "pod:toleration-everything"):
        tolerations.append({"operator": "Exists"})
    return tolerations


def _host_port(draw: _Draw) -> Manifest:
    port = draw.pick(HOST_PORTS)
    entry: Manifest = {"containerPort": port, "hostPort": port, "protocol": draw.pick(("TCP", "TCP", "UDP"))}
    if draw.chance(0.2, "pod:host-ip"):
        entry["hostIP"] = draw.pick(("127.0.0.1", "0.0.0.0", "10.0.0.1"))
    return entry


def _inline_disk(draw: _Draw) -> Manifest:
    disk = draw.pick(DISKS)
    kind = draw.pick(("gcePersistentDisk", "awsElasticBlockStore"))
    source: Manifest = {"pdName": disk} if kind == "gcePersistentDisk" else {"volumeID": disk}
    if draw.chance(0.4):
        source["readOnly"] = True
    return {"name": "disk", kind: source}


def _pending_pod(draw: _Draw, index: int, node_names: Sequence[str], scheduler_names: Sequence[str]) -> Manifest:
    pod = _base_pod(draw, f"pod-{index:02d}", running=False)
    spec = pod["spec"]
    if len(scheduler_names) > 1:
        spec["schedulerName"] = draw.pick(scheduler_names)
    if draw.chance(0.12, "pod:init-containers"):
        init: Manifest = {"name": "init", "image": draw.pick(POD_IMAGES)}
        init["resources"] = {"requests": {"cpu": draw.pick(("500m", "2", "4")), "memory": draw.pick(("64Mi", "1Gi"))}}
        if draw.chance(0.4, "pod:sidecar"):
            init["restartPolicy"] = "Always"
        spec["initContainers"] = [init]
    if draw.chance(0.05, "pod:overhead"):
        # Set by the API server's RuntimeClass admission from the class the pod names (RUNTIME_CLASS).
        spec["runtimeClassName"] = RUNTIME_CLASS["metadata"]["name"]
        spec["overhead"] = dict(RUNTIME_CLASS["overhead"]["podFixed"])
    if draw.chance(0.05, "pod:pod-level-resources"):
        spec["resources"] = {"requests": _pod_level_requests(draw, spec)}
    if draw.chance(0.15, "pod:node-selector"):
        spec["nodeSelector"] = draw.pick(({"disk": "ssd"}, {"gpu": "true"}, {ZONE: draw.pick(ZONES)}))
    affinity: Manifest = {}
    if draw.chance(0.35):
        affinity["nodeAffinity"] = _node_affinity(draw, node_names)
    if draw.chance(0.3):
        affinity["podAffinity"] = _pod_affinity(draw, pod, anti=False)
    if draw.chance(0.3):
        affinity["podAntiAffinity"] = _pod_affinity(draw, pod, anti=True)
    if affinity:
        spec["affinity"] = affinity
    if draw.chance(0.25, "pod:topology-spread"):
        constraints = [_spread(draw, pod) for _ in range(draw.pick((1, 1, 2)))]
        # The API server refuses two constraints with the same topology key and whenUnsatisfiable.
        distinct = {(c["topologyKey"], c["whenUnsatisfiable"]): c for c in reversed(constraints)}
        spec["topologySpreadConstraints"] = [
            c for c in constraints if distinct[c["topologyKey"], c["whenUnsatisfiable"]] is c
        ]
    if draw.chance(0.04, "pod:scheduling-gates"):
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
    if draw.chance(0.03, "pod:missing-claim"):
        spec.setdefault("volumes", []).append({"name": "data", "persistentVolumeClaim": {"claimName": "absent"}})
    if draw.chance(0.02, "pod:missing-ephemeral-claim"):
        claim = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        spec.setdefault("volumes", []).append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": claim}})
    if draw.chance(0.04, "pod:nominated"):
        pod["status"] = {"phase": "Pending", "nominatedNodeName": draw.pick(node_names)}
        # Of the highest priority, so that no preemption clears the nomination: kube-oracle never delivers such a
        # clear to its scheduler (module doc).
        spec["priorityClassName"] = "high"
    return pod


def _pod_level_requests(draw: _Draw, spec: Manifest) -> Manifest:
    """Pod-level cpu and memory requests, each at least what the containers ask for together (the API server
    refuses less): their sum, init containers included, plus a drawn margin."""
    requests: Manifest = {}
    units = {"cpu": ("m", Fraction(1, 1000)), "memory": ("Mi", Fraction(2**20))}
    for name, margins in (("cpu", ("0", "500m", "1")), ("memory", ("0", "512Mi", "1Gi"))):
        total = parse_quantity(draw.pick(margins))
        for container in (*spec.get("initContainers", ()), *spec["containers"]):
            resources = container.get("resources") or {}
            # A container's limit stands for its request when it gives none (API defaulting).
            asked = (resources.get("requests") or {}).get(name) or (resources.get("limits") or {}).get(name)
            if asked is not None:
                total += parse_quantity(asked)
        suffix, unit = units[name]
        requests[name] = f"{math.ceil(total / unit)}{suffix}"
    return requests


def _expression(draw: _Draw) -> Manifest:
    kind = draw.pick(("zone", "disk", "gen", "gpu", "missing"))
    if kind == "zone":
        return {"key": ZONE, "operator": draw.pick(("In", "NotIn")), "values": draw.some(ZONES, 1, 2)}
    if kind == "disk":
        return {"key": "disk", "operator": draw.pick(("In", "NotIn")), "values": [draw.pick(("ssd", "hdd"))]}
    if kind == "gen":
        draw.note("pod:node-affinity-gt-lt")
        return {"key": "gen", "operator": draw.pick(("Gt", "Lt")), "values": [str(draw.between(1, 8))]}
    if kind == "gpu":
        return {"key": "gpu", "operator": draw.pick(("Exists", "DoesNotExist"))}
    return {"key": "rack", "operator": draw.pick(("Exists", "DoesNotExist"))}


def _node_affinity(draw: _Draw, node_names: Sequence[str]) -> Manifest:
    affinity: Manifest = {}
    if draw.chance(0.6, "pod:node-affinity-required"):
        terms = []
        for _ in range(draw.pick((1, 1, 2))):
            term: Manifest = {"matchExpressions": [_expression(draw) for _ in range(draw.pick((1, 1, 2)))]}
            if draw.chance(0.15, "pod:node-affinity-match-fields"):
                term["matchFields"] = [
                    {
                        "key": "metadata.name",
                        "operator": draw.pick(("In", "NotIn")),
                        # The API server takes exactly one value for a field selector's In and NotIn.
                        "values": [draw.pick(node_names)],
                    }
                ]
                if draw.chance(0.5):
                    del term["matchExpressions"]
            terms.append(term)
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if not affinity or draw.chance(0.5, "pod:node-affinity-preferred"):
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw.between(1, 100), "preference": {"matchExpressions": [_expression(draw)]}}
            for _ in range(draw.pick((1, 1, 2)))
        ]
    return affinity


def _selector(draw: _Draw) -> Manifest:
    if draw.chance(0.8):
        return {"matchLabels": {"app": draw.pick(APPS)}}
    return {
        "matchExpressions": [{"key": "app", "operator": draw.pick(("In", "NotIn")), "values": draw.some(APPS, 1, 2)}]
    }


def _pod_affinity_term(draw: _Draw, pod: Manifest, kind: str) -> Manifest:
    term: Manifest = {
        "labelSelector": _selector(draw),
        "topologyKey": draw.pick((HOSTNAME, ZONE, ZONE, "disk")),
    }
    if draw.chance(0.15, f"{kind}:namespaces"):
        term["namespaces"] = draw.some(NAMESPACES, 1, 2)
    if draw.chance(0.12, f"{kind}:namespace-selector"):
        term["namespaceSelector"] = draw.pick(({}, {"matchLabels": {"env": "prod"}}, {"matchLabels": {"team": "b"}}))
    labels = pod["metadata"]["labels"]
    if "version" in labels and draw.chance(0.15):
        keys_field = draw.pick(("matchLabelKeys", "mismatchLabelKeys"))
        draw.note(f"{kind}:{keys_field}")
        term[keys_field] = ["version"]
        # Merged into the selector as the API server does on create (the module doc).
        operator = "In" if keys_field == "matchLabelKeys" else "NotIn"
        expressions = term["labelSelector"].setdefault("matchExpressions", [])
        expressions.append({"key": "version", "operator": operator, "values": [labels["version"]]})
    return term


def _pod_affinity(draw: _Draw, pod: Manifest, *, anti: bool) -> Manifest:
    kind = "pod:anti-affinity" if anti else "pod:affinity"
    affinity: Manifest = {}
    if draw.chance(0.5, f"{kind}-required"):
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_affinity_term(draw, pod, kind)]
    if not affinity or draw.chance(0.5, f"{kind}-preferred"):
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw.between(1, 100), "podAffinityTerm": _pod_affinity_term(draw, pod, kind)}
            for _ in range(draw.pick((1, 1, 2)))
        ]
    return affinity


def _spread(draw: _Draw, pod: Manifest) -> Manifest:
    hard = draw.chance(0.5)
    constraint: Manifest = {
        "maxSkew": draw.pick((1, 1, 2)),
        "topologyKey": draw.pick((ZONE, HOSTNAME)),
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": draw.pick((pod["metadata"]["labels"]["app"], *APPS))}},
    }
    if hard and draw.chance(0.2, "spread:min-domains"):
        constraint["minDomains"] = draw.between(2, 4)
    if draw.chance(0.2, "spread:node-affinity-policy"):
        constraint["nodeAffinityPolicy"] = draw.pick(("Honor", "Ignore"))
    if draw.chance(0.2, "spread:node-taints-policy"):
        constraint["nodeTaintsPolicy"] = draw.pick(("Honor", "Ignore"))
    if "version" in pod["metadata"]["labels"] and draw.chance(0.2, "spread:match-label-keys"):
        constraint["matchLabelKeys"] = ["version"]
    return constraint
