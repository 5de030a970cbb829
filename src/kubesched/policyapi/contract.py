"""The policy-decision contract plugins program against: inputs, decisions, and the engine client.

Policy plugins (SecurityAuditFilter, SecurityAuditPermit, later cluster-level policy) never build or import
an engine: they describe the engine they want with a :class:`PolicyEngineSpec` and get the shared client for
it from the Handle (:func:`policy_client`). The scheduler provides one client per distinct spec, so every
plugin configured alike shares one connection pool (or one worker process) and one revision; the clients
are implemented in :mod:`kubesched.policy`.

Input document of one decision::

    {"pod": <pod>, "node": <node>, "operation": "schedule", "time": "2026-11-30T16:00:00Z"}

``cluster`` replaces ``node`` when a member cluster is the target. ``pod`` is the pod manifest without
``status`` and without per-instance identity (:func:`pod_document`), so replicas share decisions; ``node``
is ``metadata`` (name, labels, annotations) and ``spec`` (taints, unschedulable). ``time`` is passed in,
rounded to a granularity, so that equal inputs give equal, cacheable decisions. A client may also say which
paths of the input its policy reads (:class:`InputPaths`, :meth:`PolicyClient.input_paths`): inputs equal
at those paths (:func:`projection`) get equal decisions, so caches key on them.

Every client method that can wait (on the network, on a worker) is a coroutine with a deadline; the
scheduling cycle awaits it between Filter batches, never inside Filter or Score.
"""

from __future__ import annotations

import datetime
import enum
import functools
import hashlib
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from kubesched.api.objects import Node, Pod
from kubesched.api.packed import canonical
from kubesched.errors import KubeschedError
from kubesched.framework.interface import Handle

OPERATION_SCHEDULE = "schedule"
OPERATION_PERMIT = "permit"
OPERATION_AUDIT = "audit"

UNDEFINED_REASON = "policy decision is undefined"

ENGINE_EMBEDDED = "embedded"
ENGINE_REMOTE = "remote"

#: The service kind under which the scheduler provides policy clients (see :func:`policy_client`).
POLICY_ENGINE_SERVICE = "policy-engine"


class PolicyError(KubeschedError):
    """The engine could not decide (timeout, transport, HTTP error, bad result shape, compile error)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One immutable answer of the policy about one (pod, target).

    ``undefined``: the decision document did not exist (a wrong path or a missing default); it is a deny,
    judged on the decision alone, never on ``decision_id``. ``pending``: not decided yet (e.g. a change
    ticket awaiting approval); only Permit waits on it. ``revision``: the policy revision that answered.
    """

    allowed: bool
    reasons: tuple[str, ...] = ()
    decision_id: str | None = None
    pending: bool = False
    undefined: bool = False
    revision: str = ""


def undefined_decision(decision_id: str | None = None, revision: str = "") -> Decision:
    return Decision(False, (UNDEFINED_REASON,), decision_id, undefined=True, revision=revision)


@dataclass(frozen=True, slots=True)
class PolicyEngineSpec:
    """Which engine answers, and how to reach it; equal specs share one client.

    ``engine`` is :data:`ENGINE_REMOTE` (OPA's v1 Data API at ``endpoint``) or :data:`ENGINE_EMBEDDED`
    (Rego ``policies`` and ``data`` files evaluated by kubesched itself, off the event loop). Every decision
    is bounded by ``timeout_seconds``, for both engines.
    """

    engine: str
    decision_path: str
    timeout_seconds: float
    endpoint: str = ""
    token_file: str = ""
    ca_file: str = ""
    batch_endpoint: str = ""
    policies: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    reload_interval_seconds: float = 5.0
    #: The freshness bound of a remote engine's revision, and how often the scheduler asks either engine whether
    #: its revision changed (to requeue the pods the old one rejected). See docs/explanation/policy-freshness.md.
    refresh_seconds: float = 2.0


@runtime_checkable
class PolicyClient(Protocol):
    """A policy engine as the scheduler's plugins use it; implemented in :mod:`kubesched.policy`."""

    @property
    def kind(self) -> str:
        """``embedded`` or ``remote`` (recorded in audit records)."""
        ...

    def revision(self) -> str:
        """The policy revision in force as last seen. Cheap and without I/O: decision caches are keyed by it
        on every cycle; the client refreshes it in the background and from every answer."""
        ...

    async def refresh(self) -> str:
        """The revision in force now, asked of the engine's source when the client's freshness bound requires it
        (the embedded engine: whenever its files changed; remote OPA: once the revision it reported is older than
        the bound). Awaited before a decision cache is consulted; raises :class:`PolicyError` by the deadline when
        the revision cannot be confirmed."""
        ...

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        """One decision; raises :class:`PolicyError` by the deadline when the engine cannot decide."""
        ...

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        """The pod decided for every target in one evaluation, keyed by target name (a target the answer
        leaves out is undefined); raises :class:`PolicyError` by the deadline."""
        ...

    def input_paths(self, revision: str) -> InputPaths | None:
        """What the policy of ``revision`` reads of its input, when the client knows (None: it does not, and
        callers key decisions on the whole input). Cheap and without I/O."""
        ...

    async def aclose(self) -> None: ...


def policy_client(handle: Handle, spec: PolicyEngineSpec) -> PolicyClient:
    """The scheduler's shared client for ``spec`` (created on first request)."""
    return cast(PolicyClient, handle.service(POLICY_ENGINE_SERVICE, spec))


# ---- what a policy reads of its input --------------------------------------------------------------


class Step(enum.Enum):
    """The parts of a read path that are no key: ``EACH`` every element of the collection there, one at a time
    (``some c in input.pod.spec.containers; c.image`` reads ``("pod", "spec", "containers", EACH, "image")``), and
    ``COUNT`` only its size (``count(input.pod.spec.containers)``; always last)."""

    EACH = "each"
    COUNT = "count"


PathPart = str | int | Step
InputPath = tuple[PathPart, ...]


@dataclass(frozen=True, slots=True)
class InputPaths:
    """The ``input`` references a policy makes, as constant paths (``input.pod.metadata.labels["team"]`` is
    ``("pod", "metadata", "labels", "team")``; a reference with a variable key stops before it, so it stands
    for the whole subtree). ``paths`` is None when the analysis cannot bound them (``input`` used whole).

    Made by :func:`kubesched.policy.input_paths.input_paths` from the policy's AST, per revision; read by
    SecurityAuditFilter, which keys its decision cache on the pod's values at these paths only (a pod that
    differs from another only where the policy never looks gets the other's decisions).
    """

    paths: tuple[InputPath, ...] | None
    #: Paths of ``paths`` the policy reads only to look their value up in its base data (see :class:`DataLookup`).
    lookups: tuple[DataLookup, ...] = ()

    def lookups_below(self, root: str) -> dict[InputPath, DataLookup]:
        """The data lookups by their path under ``input.<root>`` (relative)."""
        return {lookup.path[1:]: lookup for lookup in self.lookups if lookup.path[:1] == (root,)}

    def below(self, root: str) -> tuple[InputPath, ...] | None:
        """The paths under ``input.<root>``, relative and prefix-free; None when ``input.<root>`` may be read
        whole (or the analysis could not tell); ``()`` when the policy never reads it."""
        if self.paths is None:
            return None
        found = sorted({path[1:] for path in self.paths if path and path[0] == root}, key=_path_order)
        if () in found:
            return None
        kept: list[InputPath] = []
        for path in found:  # sorted: a prefix comes before the paths it covers
            if not any(path[: len(prefix)] == prefix for prefix in kept):
                kept.append(path)
        return tuple(kept)


@dataclass(frozen=True, slots=True, eq=False)
class DataLookup:
    """An input path the policy reads only as the key of a lookup in its base data (``data.compliance.nodes[
    input.node.metadata.name]``) and in type checks (``is_string``): inputs whose values there are strings with
    equal records at every ``data_paths`` look alike to it (a node's name matters only through its record).

    ``classes`` maps each key of those data to a class number, equal for keys whose records are equal at every
    data path (0, not in the map: a key with no record anywhere); ``fingerprint`` digests it, so equal
    fingerprints of one path mean equal classes. Made per revision by
    :func:`kubesched.policy.input_paths.input_paths` from the AST and the revision's data.
    """

    path: InputPath
    data_paths: tuple[InputPath, ...]
    classes: Mapping[str, int]
    fingerprint: str

    def class_of(self, looked_up: Hashable) -> Hashable:
        """What the policy can tell of a value :func:`lookup_key` gave: a string's record class; anything else
        (never a node's name, but a policy may look up any path) as it is."""
        if type(looked_up) is tuple and looked_up[0] == "key":
            return ("class", self.classes.get(looked_up[1], 0))
        return looked_up

    def _identity(self) -> tuple[InputPath, tuple[InputPath, ...], str]:
        return self.path, self.data_paths, self.fingerprint

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataLookup) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


def _path_order(path: InputPath) -> tuple[tuple[int, str], ...]:
    return tuple(
        (0, part) if isinstance(part, str) else (2, part.value) if isinstance(part, Step) else (1, f"{part:020d}")
        for part in path
    )


_TYPE_TAGS = ((bool, "boolean"), (str, "string"), (int, "number"), (float, "number"), (list, "array"))


def _type_tag(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "object"
    return next((tag for kind, tag in _TYPE_TAGS if isinstance(value, kind)), type(value).__name__)


def _at(document: object, path: InputPath) -> object:
    """The value at ``path``, or where and on what the lookup stopped: two documents with equal answers for
    every read path are equal to the policy (a lookup that stops on a string is undefined whatever the
    string; on a mapping without the key, whatever the other keys)."""
    return _walk(document, path, 0)


def lookup_key(document: Mapping[str, Any], path: InputPath) -> Hashable:
    """The value at a :class:`DataLookup`'s path, hashable: ``("key", text)`` for a string (a key the data may
    hold), else ``("other", <canonical JSON of what is there>)``, kept as it is by :meth:`DataLookup.class_of`."""
    found = _at(document, path)
    if type(found) is dict and "value" in found and type(found["value"]) is str:
        return ("key", found["value"])
    return ("other", canonical(found))


def projection(document: Mapping[str, Any], paths: Sequence[InputPath]) -> str:
    """``document`` seen through ``paths`` (from :meth:`InputPaths.below`), as canonical JSON: equal
    projections mean equal inputs for a policy that reads only these paths."""
    return canonical([_at(document, path) for path in paths])


def _walk(node: object, path: InputPath, depth: int) -> object:
    """:func:`_at`, from ``node`` found at ``path[:depth]``. At ``EACH`` the answer is the rest of the path's answer
    for every element in order (a mapping's by sorted key), which keeps the collection's size and order; at
    ``COUNT`` the size and type of an array, object or string."""
    for part in path[depth:]:
        if isinstance(part, Step):
            if part is Step.COUNT and isinstance(node, list | Mapping | str):
                # With the type: an array and an object of one size count alike, but array.concat takes only one.
                return {"count": len(node), "on": _type_tag(node)}
            if part is Step.EACH and isinstance(node, list):
                return {"each": [_walk(item, path, depth + 1) for item in node]}
            if part is Step.EACH and isinstance(node, Mapping):
                return {"each": {key: _walk(node[key], path, depth + 1) for key in sorted(node)}}
            return {"absent": depth, "on": _type_tag(node)}
        # type(...) is dict first: decoded JSON has no other mappings, and the ABC check costs more than the walk.
        found = (isinstance(part, str) and (type(node) is dict or isinstance(node, Mapping)) and part in node) or (
            isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node)
        )
        if not found:
            return {"absent": depth, "on": _type_tag(node)}
        node = node[part]  # type: ignore[index]
        depth += 1
    return {"value": node}


_ABSENT_ON_OBJECT = ({"absent": 0, "on": "object"}, {"absent": 1, "on": "object"})


def pod_projection(pod: Pod, paths: Sequence[InputPath]) -> str:
    """``projection(pod_document(pod), paths)``, without building the document: each attempt keys its policy
    decisions on this, and only an evaluation needs the whole document. The few places where the document is not
    the manifest (``status``, ``spec.nodeName`` and the instance metadata left out, a default namespace) are
    answered here as :func:`pod_document` makes them; everything else is read from the manifest as it is."""
    raw = pod.raw
    if type(raw) is not dict:
        return projection(pod_document(pod), paths)  # not a manifest from_dict accepts: the reference answers
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    if type(metadata) is not dict or type(spec) is not dict:
        return projection(pod_document(pod), paths)
    values: list[object] = []
    for path in paths:
        if not path or any(isinstance(part, Step) for part in path[:2]):
            # The whole document (below() never gives this), or every field of the pod or of a section, whose
            # left-out instance fields the reference knows: the reference answers.
            return projection(pod_document(pod), paths)
        head = path[0]
        if head == "metadata" or head == "spec":
            section, left_out = (metadata, _INSTANCE_METADATA) if head == "metadata" else (spec, _SPEC_INSTANCE)
            if len(path) == 1:
                document = {key: value for key, value in section.items() if key not in left_out}
                if head == "metadata":
                    document.setdefault("namespace", pod.metadata.namespace)
                values.append({"value": document})
                continue
            part = path[1]
            if isinstance(part, str) and part not in left_out and part in section:
                values.append(_walk(section[part], path, 2))
            elif head == "metadata" and part == "namespace":  # pod_document's default
                values.append(_walk(pod.metadata.namespace, path, 2))
            else:
                values.append(_ABSENT_ON_OBJECT[1])
        elif head == "status":  # left out of the document
            values.append(_ABSENT_ON_OBJECT[0])
        else:  # the other top-level fields are the manifest's
            values.append(_walk(raw, path, 0))
    return canonical(values)


# ---- input documents ------------------------------------------------------------------------------

# Per-instance metadata: left out of the policy input so that replicas of one template (a ReplicaSet's
# pods differ only in these) share one decision; a policy names a pod by generateName, labels or owner.
_INSTANCE_METADATA = frozenset(
    {"name", "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"}
)
_SPEC_INSTANCE = frozenset({"nodeName"})


def pod_document(pod: Pod) -> dict[str, Any]:
    """The pod as the policy sees it: its manifest without ``status``, ``spec.nodeName`` and the
    per-instance metadata (name, uid, resourceVersion, creationTimestamp, generation, managedFields)."""
    raw = pod.raw  # decoded anew on every read
    document = {key: value for key, value in raw.items() if key not in ("status", "metadata", "spec")}
    metadata = raw.get("metadata") or {}
    document["metadata"] = {key: value for key, value in metadata.items() if key not in _INSTANCE_METADATA}
    document["metadata"].setdefault("namespace", pod.metadata.namespace)
    spec = raw.get("spec") or {}
    document["spec"] = {key: value for key, value in spec.items() if key != "nodeName"}
    return document


def node_facts(node: Node) -> tuple[object, ...]:
    """What the policy sees of a node, as a hashable value: equal facts give equal decisions, so a
    status-only update (allocatable, conditions, images) keeps every cached decision about the node."""
    metadata = node.metadata
    return (
        metadata.name,
        tuple(sorted(metadata.labels.items())),
        tuple(sorted(metadata.annotations.items())),
        tuple((t.key, t.value, t.effect) for t in node.taints),
        node.spec_unschedulable,
    )


def node_document(node: Node) -> dict[str, Any]:
    metadata = node.metadata
    return {
        "metadata": {"name": metadata.name, "labels": dict(metadata.labels), "annotations": dict(metadata.annotations)},
        "spec": {
            "unschedulable": node.spec_unschedulable,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        },
    }


def cluster_document(node: Node) -> dict[str, Any]:
    """A member cluster as the policy sees it (``input.cluster``), from its super node: the MemberCluster's
    name, labels (region, zone, provider), annotations and taints."""
    document = node_document(node)
    del document["spec"]["unschedulable"]
    return document


def target_document(target_kind: str) -> Callable[[Node], dict[str, Any]]:
    """How a policy target of ``target_kind`` ("node" or "cluster") becomes its input document."""
    return cluster_document if target_kind == "cluster" else node_document


def rfc3339(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rounded_time(now: float, granularity: float) -> str:
    """``now`` rounded down to the granularity, as RFC 3339: the cacheable ``input.time``."""
    if granularity > 0:
        return _rounded_rfc3339(now - (now % granularity))
    return rfc3339(now)


@functools.lru_cache(maxsize=16)
def _rounded_rfc3339(seconds: float) -> str:
    # Every attempt within one granularity step asks for the same text (formatting it anew would cost every attempt).
    return rfc3339(seconds)


def decision_input(
    pod: Mapping[str, Any], target: Mapping[str, Any], *, target_kind: str, operation: str, time: str
) -> dict[str, Any]:
    return {"pod": pod, target_kind: target, "operation": operation, "time": time}


def digest(document: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a policy input (sorted keys, no spaces)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


NO_REASON = "denied by policy, no reason given"


REASON_SEPARATOR = "; "
"""What joins a denial's reasons in its message."""


def denial_reason(reasons: Sequence[str]) -> str:
    """The text of a denial: its reasons joined, or :data:`NO_REASON` when the policy gave none."""
    return REASON_SEPARATOR.join(reasons) or NO_REASON
