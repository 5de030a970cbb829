"""The selector types other API objects embed: LabelSelector, NodeSelector and TopologySelectorTerm.

Who calls it: :mod:`kubesched.api.workloads` (a ReplicaSet's or StatefulSet's ``spec.selector``) and
:mod:`kubesched.api.storage` (a claim's ``spec.selector``, a volume's ``spec.nodeAffinity.required``, a
StorageClass's ``allowedTopologies``). Each is read once, when its object is parsed, with the shape checks the
API server makes (operators, how many values each operator takes, required parts), so a selector that reaches a
plugin is well formed. Key and value *syntax* (qualified names, label values) is not re-checked here; the
compilers in ``kubesched.plugins.helper`` check it when they compile ``raw``, which is kept for that reason.

Matching lives with those compilers, not here: this module only says what a selector contains.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from kubesched.errors import FieldError

from . import _fields as f

__all__ = [
    "LABEL_SELECTOR_OPERATORS",
    "NODE_SELECTOR_OPERATORS",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "TopologySelectorLabelRequirement",
    "TopologySelectorTerm",
]

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = (*LABEL_SELECTOR_OPERATORS, "Gt", "Lt")
_NODE_FIELD_KEYS = ("metadata.name",)

_NEEDS_VALUES = "must be specified when `operator` is 'In' or 'NotIn'"
_NO_VALUES = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
_ONE_VALUE = "must be specified single value when `operator` is 'Lt' or 'Gt'"
_ONE_FIELD_VALUE = "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
_BAD_OPERATOR = "not a valid selector operator"


def _check_values(operator: str, values: tuple[str, ...], where: str, path: str) -> None:
    """The value count each operator allows; the caller has already checked the operator is one it accepts."""
    values_path = f"{path}.values"
    if operator in ("In", "NotIn") and not values:
        f.reject(where, FieldError.required(values_path, _NEEDS_VALUES))
    if operator in ("Exists", "DoesNotExist") and values:
        f.reject(where, FieldError.forbidden(values_path, _NO_VALUES))
    if operator in ("Gt", "Lt") and len(values) != 1:
        f.reject(where, FieldError.required(values_path, _ONE_VALUE))


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry of a metav1.LabelSelector (In, NotIn, Exists, DoesNotExist)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "spec.selector.matchExpressions[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        key = f.required_string(obj, "key", where, path)
        operator = f.string(obj, "operator", where, path)
        values = tuple(f.string_list(obj, "values", where, path))
        if operator not in LABEL_SELECTOR_OPERATORS:
            f.invalid(where, f"{path}.operator", operator, _BAD_OPERATOR)
        _check_values(operator, values, where, path)
        return cls(key=key, operator=operator, values=values)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: every ``matchLabels`` pair and every expression must hold.

    An empty selector (``{}``) selects everything; objects whose selector may be absent hold ``None`` for
    that, because absent means "selects nothing" to the scheduler. ``raw`` is the decoded mapping, for
    ``kubesched.plugins.helper.label_selector.compile_label_selector``.
    """

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "spec.selector") -> Self:
        obj = f.item_mapping(obj, where, path)
        expressions = tuple(
            LabelSelectorRequirement.from_dict(item, where, path=f"{path}.matchExpressions[{i}]")
            for i, item in enumerate(f.sequence(obj, "matchExpressions", where, path))
        )
        return cls(
            match_labels=f.string_map(obj, "matchLabels", where, path),
            match_expressions=expressions,
            raw=obj,
        )

    @property
    def is_empty(self) -> bool:
        """No requirements at all: selects every object (apps/v1 controllers reject such a selector)."""
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` (label) or ``matchFields`` (``metadata.name``) entry of a NodeSelectorTerm."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


def _node_requirement(obj: object, where: str, path: str, *, field_selector: bool) -> NodeSelectorRequirement:
    obj = f.item_mapping(obj, where, path)
    key = f.required_string(obj, "key", where, path)
    operator = f.string(obj, "operator", where, path)
    values = tuple(f.string_list(obj, "values", where, path))
    if field_selector:
        if operator not in ("In", "NotIn"):
            f.invalid(where, f"{path}.operator", operator, _BAD_OPERATOR)
        if len(values) != 1:
            f.reject(where, FieldError.required(f"{path}.values", _ONE_FIELD_VALUE))
        if key not in _NODE_FIELD_KEYS:
            f.invalid(where, f"{path}.key", key, "not a valid field selector key")
    else:
        if operator not in NODE_SELECTOR_OPERATORS:
            f.invalid(where, f"{path}.operator", operator, _BAD_OPERATOR)
        _check_values(operator, values, where, path)
    return NodeSelectorRequirement(key=key, operator=operator, values=values)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed. A term with neither list selects no node (kube-scheduler drops such terms)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str) -> Self:
        obj = f.item_mapping(obj, where, path)
        return cls(
            match_expressions=tuple(
                _node_requirement(item, where, f"{path}.matchExpressions[{i}]", field_selector=False)
                for i, item in enumerate(f.sequence(obj, "matchExpressions", where, path))
            ),
            match_fields=tuple(
                _node_requirement(item, where, f"{path}.matchFields[{i}]", field_selector=True)
                for i, item in enumerate(f.sequence(obj, "matchFields", where, path))
            ),
        )


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A core/v1 NodeSelector: terms ORed; at least one term, as validation requires.

    ``raw`` is the decoded mapping, for ``kubesched.plugins.helper.node_selector.compile_node_selector``.
    """

    terms: tuple[NodeSelectorTerm, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "spec.nodeAffinity.required") -> Self:
        obj = f.item_mapping(obj, where, path)
        terms = tuple(
            NodeSelectorTerm.from_dict(item, where, path=f"{path}.nodeSelectorTerms[{i}]")
            for i, item in enumerate(f.sequence(obj, "nodeSelectorTerms", where, path))
        )
        if not terms:
            f.reject(
                where, FieldError.required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")
            )
        return cls(terms=terms, raw=obj)


@dataclass(frozen=True, slots=True)
class TopologySelectorLabelRequirement:
    """A label that must have one of ``values`` (there is no operator: it is always In)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologySelectorTerm:
    """One ``allowedTopologies`` entry of a StorageClass: every requirement must hold.

    v1helper.MatchTopologySelectorTerms treats a term without requirements as selecting nothing, and an empty
    list of terms as allowing every node.
    """

    match_label_expressions: tuple[TopologySelectorLabelRequirement, ...] = ()

    @classmethod
    def from_dict(cls, obj: object, where: str, *, path: str = "allowedTopologies[0]") -> Self:
        obj = f.item_mapping(obj, where, path)
        requirements: list[TopologySelectorLabelRequirement] = []
        seen_keys: set[str] = set()
        for i, item in enumerate(f.sequence(obj, "matchLabelExpressions", where, path)):
            item_path = f"{path}.matchLabelExpressions[{i}]"
            item = f.item_mapping(item, where, item_path)
            key = f.required_string(item, "key", where, item_path)
            values = f.string_list(item, "values", where, item_path)
            if not values:
                f.reject(where, FieldError.required(f"{item_path}.values"))
            seen_values: set[str] = set()
            for j, value in enumerate(values):
                if value in seen_values:
                    f.reject(where, FieldError.duplicate(f"{item_path}.values[{j}]", value))
                seen_values.add(value)
            if key in seen_keys:
                f.reject(where, FieldError.duplicate(f"{item_path}.key", key))
            seen_keys.add(key)
            requirements.append(TopologySelectorLabelRequirement(key=key, values=tuple(values)))
        return cls(match_label_expressions=tuple(requirements))
