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

from kubesched.api.objects import Node, Pod
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

    __slots__ = ("_entry_keys", "_node", "_pod_paths", "reads_time")

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
        return "read:" + pod_projection(pod, paths)

    def entry_key(self, pod: Pod, whole_digest: Callable[[], str]) -> str:
        """The decision cache's pod part for ``pod``: :meth:`key_of_pod` and the name of the node class column
        (class ids of one column mean nothing in another). Replicas get the same text object, so the cache key's
        hash of a few hundred characters is computed once, not every attempt."""
        part = self.key_of_pod(pod, whole_digest)
        key = self._entry_keys.get(part)
        if key is None:
            if len(self._entry_keys) >= _MAX_ENTRY_KEYS:
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


_MAX_ENTRY_KEYS = 1024
