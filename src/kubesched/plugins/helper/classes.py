"""Batch helpers: evaluate a per-node rule once per equivalence class, and pack per-node statuses.

Who calls it: the ``filter_batch``/``score_batch`` of plugins whose answer depends only on node-level
properties (taints, labels, the unschedulable flag): NodeTable class columns give each node a
class id, so the rule runs once per distinct class present in the batch and the answer is broadcast.

A NodeTable keeps one column per *name* and refuses a second key function for the same name, so every
plugin uses the shared :class:`ClassSpec` constants below rather than naming its own column for the same
property.
Class columns are refreshed only when the node object changes, so keys must depend on the Node only,
never on the pods placed on it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import numpy as np

from kubesched.api.objects import Taint
from kubesched.framework.node_table import BatchFilterResult, ClassColumn, IntArray, NodeBatch
from kubesched.framework.status import Status
from kubesched.framework.types import NodeInfo
from kubesched.policyapi.contract import node_facts

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class ClassSpec(Generic[K]):
    """A class column: its table-wide name and the node-level key it interns."""

    name: str
    key_fn: Callable[[NodeInfo], K]


def _name(info: NodeInfo) -> str:
    return info.name


def _labels(info: NodeInfo) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(info.labels.items()))


def _taints(info: NodeInfo) -> tuple[Taint, ...]:
    return info.taints


def _unschedulable(info: NodeInfo) -> bool:
    return info.unschedulable


def _policy_facts(info: NodeInfo) -> tuple[object, ...]:
    return node_facts(info.node)


NODE_NAME: ClassSpec[str] = ClassSpec("node-name", _name)
NODE_LABELS: ClassSpec[tuple[tuple[str, str], ...]] = ClassSpec("node-labels", _labels)
"""The node's labels as sorted (key, value) pairs."""
NODE_TAINTS: ClassSpec[tuple[Taint, ...]] = ClassSpec("node-taints", _taints)
"""The node's taints in node order."""
NODE_UNSCHEDULABLE: ClassSpec[bool] = ClassSpec("node-unschedulable", _unschedulable)
NODE_POLICY_FACTS: ClassSpec[tuple[object, ...]] = ClassSpec("node-policy-facts", _policy_facts)
"""What a policy sees of the node (:func:`kubesched.policyapi.contract.node_facts`): name, labels, annotations,
taints, unschedulable. Equal facts, equal decisions; status-only updates keep the class."""


# One spec per label key, made on first use and kept, so every table gets the same key function for a name
# (NodeTable refuses a second one). Bounded by the label keys selectors mention, not by nodes or pods.
_LABEL_VALUE_SPECS: dict[str, ClassSpec[str | None]] = {}


def label_value(key: str) -> ClassSpec[str | None]:
    """A class column of one label's value (None where the node lacks the label).

    Selectors read a few label keys; classing nodes by just those values keeps classes few even when every
    node has a unique hostname label, where :data:`NODE_LABELS` makes each node its own class.
    """
    spec = _LABEL_VALUE_SPECS.get(key)
    if spec is None:

        def value(info: NodeInfo) -> str | None:
            return info.labels.get(key)

        spec = _LABEL_VALUE_SPECS[key] = ClassSpec(f"node-label:{key}", value)
    return spec


def per_class(batch: NodeBatch, spec: ClassSpec[K], evaluate: Callable[[K], T]) -> tuple[list[T], IntArray]:
    """``(results, index)``: ``evaluate`` once per class present in ``batch``; node i's result is
    ``results[index[i]]``."""
    column = batch.table.class_column(spec.name, spec.key_fn)
    ids = column.ids[batch.slots]
    if len(ids) == 0:
        return [], np.zeros(0, dtype=np.int64)
    # Class ids are small dense integers: a counting pass finds the distinct ones in O(n), no sort.
    distinct = np.flatnonzero(np.bincount(ids))
    lookup = np.zeros(int(distinct[-1]) + 1, dtype=np.int64)
    lookup[distinct] = np.arange(len(distinct), dtype=np.int64)
    results = [evaluate(cast(K, column.values[class_id])) for class_id in distinct.tolist()]
    return results, lookup[ids]


FEW_CLASSES = 32


def per_known_class(batch: NodeBatch, spec: ClassSpec[K], evaluate: Callable[[K], T]) -> tuple[list[T], IntArray]:
    """As :func:`per_class`, but where the table has seen few classes ``evaluate`` runs once per class the
    table knows, present in ``batch`` or not, and node i's result is ``results[index[i]]`` by its class id:
    no counting pass over the batch. For cheap rules only (taints, cordons): a class no batch node has is
    evaluated too."""
    results, column = _known_class_results(batch, spec, evaluate)
    if results is None:
        return per_class(batch, spec, evaluate)
    return results, column.ids[batch.slots]


def _known_class_results(
    batch: NodeBatch, spec: ClassSpec[K], evaluate: Callable[[K], T]
) -> tuple[list[T] | None, ClassColumn]:
    """``evaluate`` for every class the table knows, or ``None`` when it knows too many for that; the callers
    below look at the results before they gather the batch's class ids, which a uniform answer never needs."""
    column = batch.table.class_column(spec.name, spec.key_fn)
    if len(column.values) > FEW_CLASSES:
        return None, column
    return [evaluate(cast(K, key)) for key in column.values], column


def uniform_scores(size: int, value: int) -> IntArray:
    """``np.full(size, value, dtype=np.int64)`` without np.full's Python-level wrapper: the uniform scores of a
    rule every node answers alike (TaintToleration on untainted nodes, ImageLocality for images no node has),
    made every cycle."""
    scores = np.empty(size, dtype=np.int64)
    scores.fill(value)
    return scores


def per_class_scores(batch: NodeBatch, spec: ClassSpec[K], evaluate: Callable[[K], int]) -> IntArray:
    """Per-node scores of a rule that depends only on the node's class (a cheap one: see
    :func:`per_known_class`)."""
    results, column = _known_class_results(batch, spec, evaluate)
    index: IntArray | None = None
    if results is None:
        results, index = per_class(batch, spec, evaluate)
    if not results:
        return np.zeros(len(batch), dtype=np.int64)
    first = results[0]
    if all(result == first for result in results):
        return uniform_scores(len(batch), first)
    if index is None:
        index = column.ids[batch.slots]
    return np.asarray(results, dtype=np.int64)[index]


def class_filter_result(
    batch: NodeBatch, spec: ClassSpec[K], evaluate: Callable[[K], Status | None]
) -> BatchFilterResult | None:
    """A cheap filter rule that depends only on the node's class, over ``batch``; None when every class the
    table knows passes (then no node of the batch is even looked at)."""
    results, column = _known_class_results(batch, spec, evaluate)
    index: IntArray | None = None
    if results is None:
        results, index = per_class(batch, spec, evaluate)
    if all(result is None for result in results):
        return None
    if index is None:
        index = column.ids[batch.slots]
    return batch_result(results, index)


def batch_result(statuses: Sequence[Status | None], index: IntArray | None = None) -> BatchFilterResult | None:
    """Pack per-class (with ``index``) or per-node (without) filter results; ``None`` when all pass."""
    interned: dict[Status, int] = {}
    unique: list[Status] = []
    codes = np.zeros(len(statuses), dtype=np.int64)
    for i, status in enumerate(statuses):
        if status is None:
            continue
        code = interned.get(status)
        if code is None:
            unique.append(status)
            code = interned[status] = len(unique)
        codes[i] = code
    if not unique:
        return None
    return BatchFilterResult(codes if index is None else codes[index], unique)


def uniform_result(size: int, status: Status | None) -> BatchFilterResult | None:
    """The same outcome for every node of a batch."""
    if status is None:
        return None
    return BatchFilterResult(np.ones(size, dtype=np.int64), [status])
