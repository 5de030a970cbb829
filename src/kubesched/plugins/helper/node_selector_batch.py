"""Compiled node selectors (:mod:`kubesched.plugins.helper.node_selector`) answered for a whole NodeBatch.

Who calls it: NodeAffinity's ``filter_batch`` and ``score_batch`` (the pod's required and preferred node
affinity, its nodeSelector and the profile's ``addedAffinity``). The per-node ``matches``/``score`` methods
of the compiled selectors stay the reference; property tests hold the two equal.

Why not one class per node label set: with a unique ``kubernetes.io/hostname`` label every node is its own
class, so a selector on the zone would still be evaluated once per node. A label requirement reads one
label, so it is answered from that label's class column (:func:`~kubesched.plugins.helper.classes.label_value`,
a small integer per node naming its value): In, NotIn, Exists and DoesNotExist become comparisons of
integer ids, looked up once per requirement (ids are append-only, so an id always names the same value);
Gt and Lt compare the integers parsed from the column's values, parsed once per value and kept. A field
requirement (``metadata.name``) compares the batch's names. Terms AND their requirements, selectors OR
their terms, all as boolean arrays over the batch: O(batch) numpy work per requirement, no Python per node.
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.node_table import BoolArray, ClassColumn, IntArray, NodeBatch
from kubesched.plugins.helper.classes import label_value
from kubesched.plugins.helper.node_selector import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    IN,
    NOT_IN,
    FieldRequirement,
    LabelRequirement,
    NodeSelector,
    PreferredTerms,
    RequiredNodeAffinity,
    Term,
    parse_int64,
)


class _ParsedValues:
    """The int64 each value of one class column parses to (``valid`` False where it does not), extended as
    the column meets new values."""

    __slots__ = ("column", "ints", "valid")

    def __init__(self, column: ClassColumn) -> None:
        self.column = column
        self.ints: IntArray = np.zeros(0, dtype=np.int64)
        self.valid: BoolArray = np.zeros(0, dtype=np.bool_)

    def refresh(self) -> None:
        values = self.column.values
        done = self.ints.shape[0]
        if done == len(values):
            return
        parsed = [parse_int64(v) if isinstance(v, str) else None for v in values[done:]]
        self.ints = np.concatenate([self.ints, np.asarray([p or 0 for p in parsed], dtype=np.int64)])
        self.valid = np.concatenate([self.valid, np.asarray([p is not None for p in parsed], dtype=np.bool_)])


class SelectorColumns:
    """Evaluates compiled selectors over NodeBatches; one per plugin instance (it keeps parsed Gt/Lt values
    per label column, which is the only state, and is equal for every table's column of the same key)."""

    __slots__ = ("_parsed",)

    _PARSED_LIMIT = 64

    def __init__(self) -> None:
        self._parsed: dict[str, _ParsedValues] = {}

    def _column(self, batch: NodeBatch, key: str) -> tuple[ClassColumn, IntArray]:
        spec = label_value(key)
        column = batch.table.class_column(spec.name, spec.key_fn)
        return column, column.ids[batch.slots]

    def _parsed_values(self, key: str, column: ClassColumn) -> _ParsedValues:
        entry = self._parsed.get(key)
        if entry is None or entry.column is not column:
            if len(self._parsed) >= self._PARSED_LIMIT:
                self._parsed.clear()
            entry = self._parsed[key] = _ParsedValues(column)
        entry.refresh()
        return entry

    def label_requirement(self, batch: NodeBatch, requirement: LabelRequirement) -> BoolArray:
        """``requirement.matches(node.labels)`` for every node of ``batch``."""
        column, ids = self._column(batch, requirement.key)
        op = requirement.operator
        if op in (IN, NOT_IN):
            wanted = [i for i in (column.id_of(v) for v in requirement.values) if i is not None]
            if not wanted:
                hit = np.zeros(ids.shape[0], dtype=np.bool_)
            elif len(wanted) == 1:
                hit = ids == wanted[0]
            else:
                hit = np.isin(ids, np.asarray(wanted, dtype=np.int64))
            # The absent label is the None value, never among a requirement's strings: NotIn admits it.
            return hit if op == IN else ~hit
        if op in (EXISTS, DOES_NOT_EXIST):
            absent_id = column.id_of(None)
            absent = np.zeros(ids.shape[0], dtype=np.bool_) if absent_id is None else ids == absent_id
            return ~absent if op == EXISTS else absent
        parsed = self._parsed_values(requirement.key, column)
        values = parsed.ints[ids]
        compared = values > requirement.bound if op == GT else values < requirement.bound
        # An absent label (None) and a value that is not an int64 are both invalid: no match, as per node.
        result: BoolArray = parsed.valid[ids] & compared
        return result

    @staticmethod
    def field_requirement(batch: NodeBatch, requirement: FieldRequirement) -> BoolArray:
        """``requirement.matches(node.name)`` for every node of ``batch``."""
        names = batch.table.name_column[batch.slots]
        equal = np.asarray(names == requirement.value, dtype=np.bool_)
        return equal if requirement.equal else ~equal

    def term(self, batch: NodeBatch, term: Term) -> BoolArray:
        """``term.matches(labels, name)`` for every node of ``batch``."""
        if term.errors:
            return np.zeros(len(batch), dtype=np.bool_)
        masks = [self.label_requirement(batch, r) for r in term.labels]
        masks.extend(self.field_requirement(batch, f) for f in term.fields)
        # Compiled terms always have a requirement (empty ones are dropped); the masks are fresh arrays.
        result = masks[0]
        for mask in masks[1:]:
            result &= mask
        return result

    def selector(self, batch: NodeBatch, selector: NodeSelector) -> BoolArray:
        """``selector.matches(labels, name)``: the OR of its terms (no terms, no node)."""
        if not selector.terms:
            return np.zeros(len(batch), dtype=np.bool_)
        result = self.term(batch, selector.terms[0])
        for term in selector.terms[1:]:
            result |= self.term(batch, term)
        return result

    def required(self, batch: NodeBatch, required: RequiredNodeAffinity) -> BoolArray:
        """``required.matches(labels, name)``: the nodeSelector's label equalities AND the required terms."""
        result = self.selector(batch, required.affinity) if required.affinity is not None else None
        for key, value in required.node_selector:
            column, ids = self._column(batch, key)
            wanted = column.id_of(value)
            if wanted is None:
                return np.zeros(len(batch), dtype=np.bool_)
            equal = ids == wanted
            result = equal if result is None else result & equal
        return np.ones(len(batch), dtype=np.bool_) if result is None else result

    def preferred_scores(self, batch: NodeBatch, preferred: PreferredTerms) -> IntArray:
        """``preferred.score(labels, name)``: the sum of the weights of the terms each node matches."""
        scores = np.zeros(len(batch), dtype=np.int64)
        for term, weight in preferred.terms:
            scores += self.term(batch, term) * np.int64(weight)
        return scores
