"""Read a cluster from manifest files: the YAML or JSON ``kubectl get ... -o yaml`` prints, or a user writes.

Who calls it: the CLI (``kubesched simulate -f cluster.yaml``), the simulated backend when seeded from files,
and tests (through :func:`load_manifest_text`). Every problem is a :class:`ManifestError` naming the file, the
object and the field; kinds kubesched has no use for (Deployments, ConfigMaps, ...) are skipped with a warning.

Loaded kinds: Pod, Node, Namespace (core), PriorityClass (scheduling.k8s.io), PodDisruptionBudget (policy),
and the objects plugins read through the framework's listers: Service, ReplicationController,
PersistentVolume, PersistentVolumeClaim (core), ReplicaSet, StatefulSet (apps), StorageClass, CSINode
(storage.k8s.io); and kubesched's own MemberCluster (multicluster.kubesched.io, see
:mod:`kubesched.api.multicluster`). A kind is recognised by its API group; a version the kind is not served
at is a finding (a warning, or an error with ``strict``).

After loading, pod priorities are resolved from PriorityClasses as the API server's Priority admission plugin
would have done on create (:func:`resolve_priorities`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesched.bounded_input import InputTooLarge, check_aliases, may_have_aliases, read_stdin, read_text
from kubesched.errors import FieldError, ManifestError

from ._fields import type_name
from .manifest_checks import DuplicateKeyTracker, name_problems, unknown_fields, version_problem
from .multicluster import GROUP as MULTICLUSTER_GROUP
from .multicluster import KIND as MEMBER_CLUSTER
from .multicluster import VERSION as MULTICLUSTER_VERSION
from .multicluster import MemberCluster
from .objects import Namespace, Node, Pod, PodDisruptionBudget, PriorityClass
from .storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from .workloads import ReplicaSet, ReplicationController, Service, StatefulSet

__all__ = [
    "MANIFEST_SUFFIXES",
    "SYSTEM_PRIORITY_CLASSES",
    "LoadedManifests",
    "load_manifest_text",
    "load_manifests",
    "resolve_priorities",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
STDIN_SOURCE = "<stdin>"

SYSTEM_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
"""The classes every API server creates itself; dumps rarely include them, pods in kube-system name them."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(slots=True)
class LoadedManifests:
    """Everything read, in file order. ``origins`` maps (kind, namespace, name) to the "file: Kind ns/name"
    prefix used in messages, so later checks can still name the file."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    replica_sets: list[ReplicaSet] = field(default_factory=list)
    replication_controllers: list[ReplicationController] = field(default_factory=list)
    stateful_sets: list[StatefulSet] = field(default_factory=list)
    persistent_volumes: list[PersistentVolume] = field(default_factory=list)
    persistent_volume_claims: list[PersistentVolumeClaim] = field(default_factory=list)
    storage_classes: list[StorageClass] = field(default_factory=list)
    csi_nodes: list[CSINode] = field(default_factory=list)
    member_clusters: list[MemberCluster] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    origins: dict[tuple[str, str, str], str] = field(default_factory=dict)
    strict: bool = False
    """Validation findings (unknown fields, invalid names, ...) are errors rather than warnings."""
    objects_read: int = 0
    """Objects found in the input, those of skipped kinds too: 0 means the input was empty."""

    def finding(self, message: str) -> None:
        """A problem kubectl's strict validation would refuse: a warning, or the error under ``strict``."""
        if self.strict:
            raise ManifestError(message)
        self.warnings.append(message)


@dataclass(frozen=True, slots=True)
class _Kind:
    group: str
    namespaced: bool
    build: Callable[[Mapping[str, Any], str], Any]
    target: Callable[[LoadedManifests], list[Any]]
    """The LoadedManifests list the objects go to."""
    versions: tuple[str, ...] = ("v1",)
    """The versions the API server serves the kind at."""


_KINDS: dict[str, _Kind] = {
    "Pod": _Kind("", True, Pod.from_dict, lambda m: m.pods),
    "Node": _Kind("", False, Node.from_dict, lambda m: m.nodes),
    "Namespace": _Kind("", False, Namespace.from_dict, lambda m: m.namespaces),
    "PriorityClass": _Kind("scheduling.k8s.io", False, PriorityClass.from_dict, lambda m: m.priority_classes),
    "PodDisruptionBudget": _Kind("policy", True, PodDisruptionBudget.from_dict, lambda m: m.pdbs),
    "Service": _Kind("", True, Service.from_dict, lambda m: m.services),
    "ReplicationController": _Kind("", True, ReplicationController.from_dict, lambda m: m.replication_controllers),
    "ReplicaSet": _Kind("apps", True, ReplicaSet.from_dict, lambda m: m.replica_sets),
    "StatefulSet": _Kind("apps", True, StatefulSet.from_dict, lambda m: m.stateful_sets),
    "PersistentVolume": _Kind("", False, PersistentVolume.from_dict, lambda m: m.persistent_volumes),
    "PersistentVolumeClaim": _Kind("", True, PersistentVolumeClaim.from_dict, lambda m: m.persistent_volume_claims),
    "StorageClass": _Kind("storage.k8s.io", False, StorageClass.from_dict, lambda m: m.storage_classes),
    "CSINode": _Kind("storage.k8s.io", False, CSINode.from_dict, lambda m: m.csi_nodes),
    MEMBER_CLUSTER: _Kind(
        MULTICLUSTER_GROUP,
        False,
        MemberCluster.from_dict,
        lambda m: m.member_clusters,
        versions=(MULTICLUSTER_VERSION,),
    ),
}


def load_manifests(
    paths: Sequence[str], *, strict: bool = False, on_object: Callable[[str], None] | None = None
) -> LoadedManifests:
    """Load files (or every .yaml/.yml/.json file directly inside a directory, in name order; a file named
    twice is read once; ``-`` is standard input, YAML or JSON), then resolve priorities. An input without a single
    object (an empty file, a directory without manifest files) is a warning naming it. What ``kubectl apply
    --validate=strict`` would refuse (:mod:`kubesched.api.manifest_checks`) is a warning, or with ``strict`` an
    error. ``on_object(source)`` hears of each object read (items of a List one by one), for a progress line."""
    loaded = LoadedManifests(strict=strict)
    seen: set[str] = set()
    for path in paths:
        if path == STDIN:
            if STDIN in seen:
                continue
            seen.add(STDIN)
            try:
                text = read_stdin(sys.stdin)
            except InputTooLarge as exc:
                raise ManifestError(str(exc)) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(f"{STDIN_SOURCE}: could not read: {exc}") from None
            before = loaded.objects_read
            _load_text(loaded, text, STDIN_SOURCE, on_object)
            if loaded.objects_read == before:
                loaded.warnings.append(f"{STDIN_SOURCE}: no objects")
            continue
        files = _expand(path)
        if not files:
            loaded.warnings.append(f"{path}: no {', '.join(MANIFEST_SUFFIXES[:-1])} or {MANIFEST_SUFFIXES[-1]} files")
        for file in files:
            # "-f dir -f dir/pods.yaml" names one file twice; reading it once avoids false duplicates.
            real = os.path.realpath(file)
            if real in seen:
                continue
            seen.add(real)
            try:
                text = read_text(file)
            except InputTooLarge as exc:
                raise ManifestError(str(exc)) from None
            except FileNotFoundError:
                raise ManifestError(f"{file}: no such file") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(f"{file}: could not read file: {exc}") from None
            before = loaded.objects_read
            _load_text(loaded, text, file, on_object)
            if loaded.objects_read == before:
                loaded.warnings.append(f"{file}: no objects")
    resolve_priorities(loaded)
    return loaded


def load_manifest_text(text: str, source: str = "<text>") -> LoadedManifests:
    """Load one manifest text as if it were the file ``source`` (JSON when it ends in .json)."""
    loaded = LoadedManifests()
    _load_text(loaded, text, source)
    resolve_priorities(loaded)
    return loaded


def _expand(path: str) -> list[str]:
    if not os.path.isdir(path):
        return [path]
    return sorted(
        os.path.join(path, name)
        for name in os.listdir(path)
        if name.endswith(MANIFEST_SUFFIXES) and os.path.isfile(os.path.join(path, name))
    )


def _load_text(loaded: LoadedManifests, text: str, source: str, on_object: Callable[[str], None] | None = None) -> None:
    duplicates = DuplicateKeyTracker()
    documents = (
        _json_documents(text, source, duplicates)
        if source.endswith(".json")
        else _yaml_documents(text, source, duplicates)
    )
    for label, document in documents:
        for found in duplicates.found:
            loaded.finding(f"{source}: {found}")
        duplicates.found.clear()
        if document is None:
            continue
        _add_document(loaded, document, source, label, on_object)


def _json_documents(text: str, source: str, duplicates: DuplicateKeyTracker) -> Iterator[tuple[str, object]]:
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)  # the last value wins, as in kubectl's lenient decoding
        if len(obj) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    repeated.append(key)
                seen.add(key)
        return obj

    try:
        document = json.loads(text, object_pairs_hook=pairs) if text.strip() else None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{source}: line {exc.lineno}: could not parse JSON: {exc.msg}") from None
    if repeated:
        duplicates.found.extend(_repeated_key_lines(text) or [f'key "{key}" already set in map' for key in repeated])
    yield "document 1", document


MAX_JSON_TO_LOCATE = 16 * 1024 * 1024  # beyond it a repeated key is reported without its lines


def _repeated_key_lines(text: str) -> list[str]:
    """Where a JSON text repeats a key, with lines as for YAML: JSON is YAML's flow style, so the YAML composer
    (which knows each key's line) finds them. Only run when the JSON decoder saw a repeated key; empty when the
    text is too large to read twice or is JSON that PyYAML's YAML 1.1 does not read."""
    if len(text) > MAX_JSON_TO_LOCATE:
        return []
    tracker = DuplicateKeyTracker()
    loader = tracker.install(_Loader)(text)
    try:
        loader.get_single_data()
    except yaml.YAMLError:
        return []
    finally:
        loader.dispose()
    return tracker.found


def _yaml_documents(text: str, source: str, duplicates: DuplicateKeyTracker) -> Iterator[tuple[str, object]]:
    loader = duplicates.install(_Loader)(text)
    aliased = may_have_aliases(text)
    try:
        number = 0
        while loader.check_node():
            node = loader.get_node()
            number += 1
            if node is None:
                continue
            label = f"document {number} (line {node.start_mark.line + 1})"
            if aliased:
                try:
                    check_aliases(node, f"{source}: {label}")
                except InputTooLarge as exc:
                    raise ManifestError(str(exc)) from None
            yield label, loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}: line {mark.line + 1}" if mark is not None else source
        raise ManifestError(f"{where}: could not parse YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: could not parse YAML: {exc}") from None
    finally:
        loader.dispose()


def _add_document(
    loaded: LoadedManifests,
    document: object,
    source: str,
    label: str,
    on_object: Callable[[str], None] | None = None,
) -> None:
    where = f"{source}: {label}"
    if not isinstance(document, Mapping):
        raise ManifestError(f"{where}: expected a mapping, got {type_name(document)}")
    kind = _header(document, "kind", where)
    api_version = _header(document, "apiVersion", where)
    if kind.endswith("List") and "items" in document:
        items = document["items"]
        if items is None:
            return
        if not isinstance(items, list):
            raise ManifestError(f"{where}: items: expected a list, got {type_name(items)}")
        item_kind = kind.removesuffix("List")
        for i, item in enumerate(items):
            # Typed lists from the API (PodList) omit kind/apiVersion on items; kubectl's "List" keeps them.
            if item_kind and isinstance(item, Mapping) and "kind" not in item:
                item = {"apiVersion": api_version, "kind": item_kind, **item}
            if item is not None:
                _add_document(loaded, item, source, f"{label} items[{i}]", on_object)
        return
    _add_object(loaded, document, kind, api_version, source, where)
    if on_object is not None:
        on_object(source)


def _header(document: Mapping[str, Any], key: str, where: str) -> str:
    raw = document.get(key)
    if raw is None or raw == "":
        raise ManifestError(f"{where}: {FieldError.required(key)}")
    if not isinstance(raw, str):
        raise ManifestError(f"{where}: {key}: expected a string, got {type_name(raw)}")
    return raw


def _add_object(
    loaded: LoadedManifests,
    document: Mapping[str, Any],
    kind: str,
    api_version: str,
    source: str,
    doc_where: str,
) -> None:
    loaded.objects_read += 1
    metadata = document.get("metadata")
    meta: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else None
    group = api_version.rpartition("/")[0]
    known = _KINDS.get(kind)
    if known is None or known.group != group:
        in_version = f' in apiVersion "{api_version}"' if known is not None else ""
        named = f" ({name})" if name else ""
        loaded.warnings.append(f'{source}: skipping unsupported kind "{kind}"{in_version}{named}')
        return
    namespaced = known.namespaced
    namespace = (meta.get("namespace") or "default") if namespaced else ""
    if not name:
        where = f"{doc_where}: {kind}"
    elif namespaced:
        where = f"{source}: {kind} {namespace}/{name}"
    else:
        where = f"{source}: {kind} {name}"

    for problem in (
        version_problem(kind, api_version, known.versions),
        *name_problems(kind, meta, namespaced),
        *unknown_fields(kind, document),
    ):
        if problem:
            loaded.finding(f"{where}: {problem}")
    obj = known.build(document, where)
    key = (kind, obj.metadata.namespace, obj.metadata.name)
    first = loaded.origins.get(key)
    if first is not None:
        first_file = first.split(": ", 1)[0]
        raise ManifestError(f"{where}: defined twice (first in {first_file})")
    loaded.origins[key] = where
    known.target(loaded).append(obj)


def resolve_priorities(loaded: LoadedManifests) -> None:
    """Fill each pod's priority (and preemption policy) from its PriorityClass, as Priority admission does.

    A pod naming a class gets the class's value; a pod naming none gets the globalDefault class (the one with
    the lowest value if several claim it) and its name, or priority 0 when there is no default. The two
    built-in system classes exist even when not loaded. An explicit ``spec.priority`` is kept; it must equal
    the value of a class the pod names, as the API server requires. A class that does not exist is an error.
    """
    classes: dict[str, tuple[int, str]] = {
        name: (value, "PreemptLowerPriority") for name, value in SYSTEM_PRIORITY_CLASSES.items()
    }
    for pc in loaded.priority_classes:
        classes[pc.metadata.name] = (pc.value, pc.preemption_policy)
    defaults = sorted((pc.value, pc.metadata.name) for pc in loaded.priority_classes if pc.global_default)
    default_name = defaults[0][1] if defaults else ""

    for pod in loaded.pods:
        spec = pod.spec
        where = loaded.origins.get(("Pod", pod.namespace, pod.name), f"Pod {pod.key}")
        named = spec.priority_class_name
        if not named:
            if not default_name:
                if spec.priority is None:
                    spec.priority = 0
                continue
            spec.priority_class_name = default_name
        found = classes.get(spec.priority_class_name)
        if found is None:
            not_found = FieldError.not_found("spec.priorityClassName", spec.priority_class_name)
            raise ManifestError(f"{where}: {not_found}: no PriorityClass with this name was loaded")
        value, policy = found
        if spec.priority is None:
            spec.priority = value
        elif named and spec.priority != value:
            raise ManifestError(
                f"{where}: spec.priority: the integer value of priority ({spec.priority}) must not be "
                f"provided in pod spec; priority admission controller computed {value} from the given "
                "PriorityClass name"
            )
        raw_spec = pod.raw.get("spec")
        explicit_policy = isinstance(raw_spec, Mapping) and raw_spec.get("preemptionPolicy")
        if not explicit_policy:
            spec.preemption_policy = policy
        elif named and spec.preemption_policy != policy:
            raise ManifestError(
                f"{where}: spec.preemptionPolicy: the string value of PreemptionPolicy "
                f"({spec.preemption_policy}) must not be provided in pod spec; priority admission controller "
                f"computed {policy} from the given PriorityClass name"
            )
