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
from typing import Any, NamedTuple, cast

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.framework.node_table import ClassColumn, IntArray, NodeTable
from kubesched.framework.types import NodeInfo
from kubesched.plugins.helper.classes import NODE_POLICY_FACTS
from kubesched.policyapi.contract import (
    DataLookup,
    InputPath,
    InputPaths,
    digest,
    lookup_key,
    pod_projection,
    projection,
)

# One key function per (target kind, paths, looked-up paths), kept: a NodeTable refuses a second key function for a
# column name. Bounded by the policy revisions a process sees.
_NODE_KEYS: dict[
    tuple[str, tuple[InputPath, ...], tuple[InputPath, ...]], tuple[str, Callable[[NodeInfo], Hashable]]
] = {}


class NodeClasses(NamedTuple):
    """The classes of nodes one revision's policy cannot tell apart, over one table.

    ``column`` holds classes of the values at the paths read; where the policy reads a path only to look a record
    up in its data (:class:`~kubesched.policyapi.contract.DataLookup`: a node's name), ``groups`` maps those column
    classes onto the coarser classes of equal records (``groups[column id]``; None: the column's classes are the
    classes). ``total`` is how many classes there are; ``name`` tells classings apart (the column's and, with
    groups, the data's fingerprints): class ids under one name mean the same nodes."""

    name: str
    column_name: str
    column: ClassColumn
    groups: IntArray | None
    total: int


class Keying:
    """How one revision's decisions are keyed: made once per revision (the paths do not change within one),
    so that an attempt pays only for projecting its pod."""

    __slots__ = ("_entry_keys", "_grouping", "_lookups", "_name", "_node", "_pod_paths", "reads_time")

    def __init__(self, paths: InputPaths | None, target_kind: str, document: Callable[[Node], dict[str, Any]]) -> None:
        self._pod_paths = paths.below("pod") if paths is not None else None
        # A policy that never reads input.time decides alike in every time bucket: its decisions are not keyed by
        # the bucket, so they are not all asked again each time the clock crosses into the next one.
        self.reads_time = paths is None or paths.below("time") != ()
        below = paths.below(target_kind) if paths is not None else None
        self._node: tuple[str, Callable[[NodeInfo], Hashable]] = (NODE_POLICY_FACTS.name, NODE_POLICY_FACTS.key_fn)
        self._lookups: tuple[DataLookup, ...] = ()
        if below is not None:
            by_path = paths.lookups_below(target_kind) if paths is not None else {}
            looked_up = tuple(path for path in below if path in by_path)
            self._lookups = tuple(by_path[path] for path in looked_up)
            spec = _NODE_KEYS.get((target_kind, below, looked_up))
            if spec is None:
                spec = _NODE_KEYS[(target_kind, below, looked_up)] = _node_key(below, looked_up, target_kind, document)
            self._node = spec
        self._name = self._node[0]
        if self._lookups:
            self._name += "+data-" + digest({"lookups": [lookup.fingerprint for lookup in self._lookups]})[:16]
        # The column grouped so far: (column, its class id -> group id, group ids by group key).
        self._grouping: tuple[ClassColumn | None, IntArray, dict[Hashable, int]] = (None, _NO_GROUPS, {})
        self._entry_keys: dict[str, str] = {}

    def pod_key(self, pod_doc: Mapping[str, Any], whole_digest: Callable[[], str]) -> str:
        """The pod's part of the cache key: its values at the paths the policy reads under ``input.pod``, or
        ``whole_digest()`` (the digest of the whole input) when the paths do not bound what it reads."""
        if self._pod_paths is None:
            return "whole:" + whole_digest()
        return "read:" + projection(pod_doc, self._pod_paths)

    def key_of_pod(self, pod: Pod, whole_digest: Callable[[], str]) -> str:
        """:meth:`pod_key` of ``pod_document(pod)``, read from the pod's manifest without building the document
        (:func:`~kubesched.policyapi.contract.pod_projection`): the attempt needs the document only to evaluate."""
        paths = self._pod_paths
        if paths is None:
            return "whole:" + whole_digest()
        return "read:" + pod_projection(pod, paths)

    def entry_key(self, pod: Pod, whole_digest: Callable[[], str]) -> str:
        """The decision cache's pod part for ``pod``: :meth:`key_of_pod` and the name of the node classes (class
        ids of one classing mean nothing in another). Replicas get the same text object, so the cache key's hash
        of a few hundred characters is computed once, not every attempt."""
        part = self.key_of_pod(pod, whole_digest)
        key = self._entry_keys.get(part)
        if key is None:
            if len(self._entry_keys) >= _MAX_ENTRY_KEYS:
                self._entry_keys.clear()
            key = self._entry_keys[part] = f"{part}/{self._name}"
        return key

    def node_classes(self, table: NodeTable) -> NodeClasses:
        """The classes of nodes the policy cannot tell apart: by the values at the paths it reads under
        ``input.<target kind>`` (a looked-up value by its record), else by the node's policy facts."""
        column_name, key_fn = self._node
        column = table.class_column(column_name, key_fn)
        if not self._lookups:
            return NodeClasses(column_name, column_name, column, None, len(column.values))
        groups, count = self._groups(column)
        return NodeClasses(self._name, column_name, column, groups, count)

    def _groups(self, column: ClassColumn) -> tuple[IntArray, int]:
        """The column's classes grouped by their records: extended as the column gains classes (first seen, first
        numbered, so the ids of one revision's grouping of one column never change)."""
        grouped, groups, index = self._grouping
        if grouped is not column:
            groups, index = _NO_GROUPS, {}
        done, size = groups.shape[0], len(column.values)
        if done < size:
            grown = np.zeros(size, dtype=np.int64)
            grown[:done] = groups
            for class_id in range(done, size):
                rest, looked_up = cast(tuple[str, tuple[Hashable, ...]], column.values[class_id])  # see _node_key
                key = (
                    rest,
                    tuple(lookup.class_of(value) for lookup, value in zip(self._lookups, looked_up, strict=True)),
                )
                grown[class_id] = index.setdefault(key, len(index))
            groups = grown
        self._grouping = (column, groups, index)
        return groups, len(index)


def _node_key(
    below: tuple[InputPath, ...],
    looked_up: tuple[InputPath, ...],
    target_kind: str,
    document: Callable[[Node], dict[str, Any]],
) -> tuple[str, Callable[[NodeInfo], Hashable]]:
    """The column of the values at ``below``: a projection, or, when some of them are only looked up in data,
    (the projection of the others, the looked-up values), for :meth:`Keying._groups` to group by record."""
    name = f"policy-read-{target_kind}-{digest({'paths': [list(p) for p in below]})[:16]}"
    if not looked_up:

        def key(info: NodeInfo) -> Hashable:
            return projection(document(info.node), below)

        return name, key

    rest = tuple(path for path in below if path not in looked_up)

    def key_with_lookups(info: NodeInfo) -> Hashable:
        node_doc = document(info.node)
        return projection(node_doc, rest), tuple(lookup_key(node_doc, path) for path in looked_up)

    name += "-lookups-" + digest({"paths": [list(p) for p in looked_up]})[:16]
    return name, key_with_lookups


_NO_GROUPS: IntArray = np.zeros(0, dtype=np.int64)
_MAX_ENTRY_KEYS = 1024
