"""What SecurityAuditFilter keys its shared decisions on: the parts of the pod and of the node the policy reads.

Who calls it: :class:`~kubesched.plugins.security.security_audit_filter.SecurityAuditFilter`, once per attempt
(:func:`pod_key`) and once per policy revision and node table (:func:`node_classes`). The paths come from the
engine client (``PolicyClient.input_paths(revision)``, the analysis of :mod:`kubesched.policy.input_paths`);
when it has none for the revision, or they do not bound a part, that part is keyed whole, exactly as before
the analysis existed: a pod by the digest of its whole input, a node by its policy facts
(:data:`~kubesched.plugins.helper.classes.NODE_POLICY_FACTS`). So a missing or coarse analysis costs
evaluations, never a decision made for another input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.api.objects import Node
from kubesched.framework.node_table import ClassColumn, NodeTable
from kubesched.framework.policy import InputPath, InputPaths, digest, projection
from kubesched.framework.types import NodeInfo
from kubesched.plugins.helper.classes import NODE_POLICY_FACTS

# One key function per (target kind, paths), kept: a NodeTable refuses a second key function for a column
# name. Bounded by the policy revisions a process sees.
_NODE_KEYS: dict[tuple[str, tuple[InputPath, ...]], tuple[str, Callable[[NodeInfo], str]]] = {}


def pod_key(pod_doc: Mapping[str, Any], whole_digest: str, paths: InputPaths | None) -> str:
    """The pod's part of the cache key: its values at the paths the policy reads under ``input.pod``, or
    ``whole_digest`` (the digest of the whole input) when the paths do not bound what it reads."""
    below = paths.below("pod") if paths is not None else None
    if below is None:
        return "whole:" + whole_digest
    return "read:" + digest({"projection": projection(pod_doc, below)})


def node_classes(
    table: NodeTable, paths: InputPaths | None, target_kind: str, document: Callable[[Node], dict[str, Any]]
) -> tuple[str, ClassColumn]:
    """The class column whose classes are nodes the policy cannot tell apart, and its name: by the values at
    the paths the policy reads under ``input.<target_kind>``, else by the node's policy facts."""
    below = paths.below(target_kind) if paths is not None else None
    if below is None:
        return NODE_POLICY_FACTS.name, table.class_column(NODE_POLICY_FACTS.name, NODE_POLICY_FACTS.key_fn)
    spec = _NODE_KEYS.get((target_kind, below))
    if spec is None:
        read = below

        def key(info: NodeInfo) -> str:
            return projection(document(info.node), read)

        name = f"policy-read-{target_kind}-{digest({'paths': [list(p) for p in below]})[:16]}"
        spec = _NODE_KEYS[(target_kind, below)] = (name, key)
    name, key_fn = spec
    return name, table.class_column(name, key_fn)
