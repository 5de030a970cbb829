"""What SecurityAuditFilter keys its shared decisions on: the parts of the pod and of the node the policy reads.

Who calls it: :class:`~kubesched.plugins.security.security_audit_filter.SecurityAuditFilter`, once per attempt
through a :class:`Keying` made once per policy revision. The paths come from the
engine client (``PolicyClient.input_paths(revision)``, the analysis of :mod:`kubesched.policy.input_paths`);
when it has none for the revision, or they do not bound a part, that part is keyed whole, exactly as before
the analysis existed: a pod by the digest of its whole input, a node by its policy facts
(:data:`~kubesched.plugins.helper.classes.NODE_POLICY_FACTS`). So a missing or coarse analysis costs
evaluations, never a decision made for another input.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

import orjson

from kubesched.api.objects import Node, Pod
from kubesched.api.packed import unpack
from kubesched.framework.node_table import ClassColumn, NodeTable
from kubesched.framework.policy import InputPath, InputPaths, digest, pod_projection, projection
from kubesched.framework.types import NodeInfo
from kubesched.plugins.helper.classes import NODE_POLICY_FACTS

# One key function per (target kind, paths), kept: a NodeTable refuses a second key function for a column
# name. Bounded by the policy revisions a process sees.
_NODE_KEYS: dict[tuple[str, tuple[InputPath, ...]], tuple[str, Callable[[NodeInfo], str]]] = {}


class Keying:
    """How one revision's decisions are keyed: made once per revision (the paths do not change within one),
    so that an attempt pays only for projecting its pod."""

    __slots__ = ("_entry_keys", "_node", "_pod_paths", "_replicas", "reads_time")

    def __init__(self, paths: InputPaths | None, target_kind: str, document: Callable[[Node], dict[str, Any]]) -> None:
        self._pod_paths = paths.below("pod") if paths is not None else None
        # A policy that never reads input.time decides alike in every time bucket: its decisions are not keyed by
        # the bucket, so they are not all asked again each time the clock crosses into the next one.
        self.reads_time = paths is None or paths.below("time") != ()
        below = paths.below(target_kind) if paths is not None else None
        self._node: tuple[str, Callable[[NodeInfo], Hashable]] = (NODE_POLICY_FACTS.name, NODE_POLICY_FACTS.key_fn)
        if below is not None:
            spec = _NODE_KEYS.get((target_kind, below))
            if spec is None:
                spec = _NODE_KEYS[(target_kind, below)] = _node_key(below, target_kind, document)
            self._node = spec
        # Pod keys by the manifest around the pod's name (see _around_name): a ReplicaSet's pods differ only there.
        # None: seen once, not proven yet; "": the proof failed (projected every time).
        self._replicas: dict[tuple[str, bytes, bytes], str | None] = {}
        self._entry_keys: dict[str, str] = {}

    def pod_key(self, pod_doc: Mapping[str, Any], whole_digest: Callable[[], str]) -> str:
        """The pod's part of the cache key: its values at the paths the policy reads under ``input.pod``, or
        ``whole_digest()`` (the digest of the whole input) when the paths do not bound what it reads."""
        if self._pod_paths is None:
            return "whole:" + whole_digest()
        return "read:" + projection(pod_doc, self._pod_paths)

    def key_of_pod(self, pod: Pod, whole_digest: Callable[[], str]) -> str:
        """:meth:`pod_key` of ``pod_document(pod)``, read from the pod's manifest without building the document
        (:func:`~kubesched.framework.policy.pod_projection`): the attempt needs the document only to evaluate."""
        paths = self._pod_paths
        if paths is None:
            return "whole:" + whole_digest()
        around = _around_name(pod)
        if around is None:
            return "read:" + pod_projection(pod, paths)
        memo_key = (pod.metadata.namespace, *around)
        known = self._replicas.get(memo_key, _UNSEEN)
        if known and known is not _UNSEEN:
            return known
        key = "read:" + pod_projection(pod, paths)
        if known is _UNSEEN or known is None:
            # Proven (_name_is_between, a second decode) only when a second pod has the same surroundings: pods whose
            # manifests differ elsewhere too (a uid, managedFields) never pay for it. "" marks a failed proof.
            if known is _UNSEEN and len(self._replicas) >= _MAX_REPLICA_KEYS:
                self._replicas.clear()
            self._replicas[memo_key] = None if known is _UNSEEN else key if _name_is_between(pod, *around) else ""
        return key

    def entry_key(self, pod: Pod, whole_digest: Callable[[], str]) -> str:
        """The decision cache's pod part for ``pod``: :meth:`key_of_pod` and the name of the node class column
        (class ids of one column mean nothing in another). Replicas get the same text object, so the cache key's
        hash of a few hundred characters is computed once, not every attempt."""
        part = self.key_of_pod(pod, whole_digest)
        key = self._entry_keys.get(part)
        if key is None:
            if len(self._entry_keys) >= _MAX_REPLICA_KEYS:
                self._entry_keys.clear()
            key = self._entry_keys[part] = f"{part}/{self._node[0]}"
        return key

    def node_classes(self, table: NodeTable) -> tuple[str, ClassColumn]:
        """The class column whose classes are nodes the policy cannot tell apart, and its name: by the values
        at the paths the policy reads under ``input.<target kind>``, else by the node's policy facts."""
        name, key_fn = self._node
        return name, table.class_column(name, key_fn)


def _node_key(
    below: tuple[InputPath, ...], target_kind: str, document: Callable[[Node], dict[str, Any]]
) -> tuple[str, Callable[[NodeInfo], str]]:
    def key(info: NodeInfo) -> str:
        return projection(document(info.node), below)

    return f"policy-read-{target_kind}-{digest({'paths': [list(p) for p in below]})[:16]}", key


# Replicas of one template differ only in their name (and what the API server stamps per instance), and their
# manifests differ only in the bytes of that name: so the bytes before and after the pod's ``"name":"<name>"``
# member name its projection, found without decoding it (a decode and a projection cost about 8 us an attempt).
# Safe because the member is proven to be metadata.name before its surroundings are trusted (_name_is_between):
# a manifest with the same bytes before and after, and another name between, decodes to the same pod with another
# metadata.name, which no projection reads (pod_document leaves it out). Pods whose other instance fields (uid,
# resourceVersion, managedFields) are in the manifest key on those too, so they miss and are projected as before.
_MAX_REPLICA_KEYS = 1024
_UNSEEN = "unseen"  # compared by identity: never a stored value
_NAME_MEMBER = b'"name":'
_STAND_IN = "\x00kubesched-stand-in\x00"


def _around_name(pod: Pod) -> tuple[bytes, bytes] | None:
    """The manifest before and after its one ``"name":<the pod's name>`` member; None when there is not exactly one
    (a container named like the pod, say: then no bytes say which is which)."""
    manifest = pod.manifest
    try:
        member = _NAME_MEMBER + orjson.dumps(pod.metadata.name)
    except TypeError:  # not text orjson writes (a lone surrogate): no replica key
        return None
    at = manifest.find(member)
    if at < 0 or manifest.find(member, at + 1) >= 0:
        return None
    return manifest[:at], manifest[at + len(member) :]


def _name_is_between(pod: Pod, before: bytes, after: bytes) -> bool:
    """Whether the member between ``before`` and ``after`` is the pod's ``metadata.name``: with a stand-in name
    written there the manifest must decode to the pod's own with only ``metadata.name`` changed. (JSON is
    context-free and a string is one token: what holds for the stand-in holds for any name written there.)"""
    raw = pod.raw
    metadata = raw.get("metadata") if type(raw) is dict else None
    if type(metadata) is not dict or metadata.get("name") != pod.metadata.name or pod.metadata.name == _STAND_IN:
        return False
    try:
        stand_in = unpack(before + _NAME_MEMBER + orjson.dumps(_STAND_IN) + after)
    except ValueError:
        return False
    return bool(stand_in == {**raw, "metadata": {**metadata, "name": _STAND_IN}})
