"""Compiled node selectors: required node-affinity terms, preferred terms and ``spec.nodeSelector``.

Who calls it: NodeAffinity (the pod's ``spec.affinity.nodeAffinity`` and the plugin's ``addedAffinity``),
and later PodTopologySpread / preemption, which honour node affinity too. It carries over the semantics of
component-helpers' ``scheduling/corev1/nodeaffinity`` and apimachinery's label ``Requirement``:

- terms are ORed, the requirements of a term ANDed; a term with neither matchExpressions nor matchFields
  selects nothing (and is dropped); a preferred term with weight 0 is dropped too;
- operators In, NotIn (true when the label is absent), Exists, DoesNotExist, Gt and Lt (label and value
  both base-10 int64, else no match); matchFields supports only ``metadata.name`` with In/NotIn and exactly
  one value;
- a term that fails to parse never matches (the "lazy" selector a pod's required affinity uses keeps its
  errors per term; an added affinity is compiled strictly and its errors reported with field paths).

The raw affinity stays a decoded JSON mapping on the Pod (kubesched.api keeps it raw); it is compiled here
once per scheduling cycle, in PreFilter/PreScore.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.errors import ErrorType, FieldError
from kubesched.plugins.helper.validation import label_value_errors, qualified_name_errors

OBJECT_NAME_FIELD = "metadata.name"
IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, in range; else None."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def aggregate_message(errors: Sequence[FieldError]) -> str:
    """apimachinery's aggregate error text: the one message, or ``[a, b]`` for several."""
    if len(errors) == 1:
        return str(errors[0])
    return "[" + ", ".join(str(e) for e in errors) + "]"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str
    values: frozenset[str]
    bound: int = 0
    """The integer of a Gt/Lt requirement."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            return self.key in labels and labels[self.key] in self.values
        if op == NOT_IN:
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if self.key not in labels:
            return False
        value = parse_int64(labels[self.key])
        if value is None:
            return False
        return value > self.bound if op == GT else value < self.bound


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """``metadata.name`` In (equal) or NotIn (not equal) one value."""

    equal: bool
    value: str

    def matches(self, name: str) -> bool:
        return (name == self.value) == self.equal


@dataclass(frozen=True, slots=True)
class Term:
    """One NodeSelectorTerm: label requirements AND field requirements; ``errors`` makes it match nothing."""

    labels: tuple[LabelRequirement, ...]
    fields: tuple[FieldRequirement, ...]
    errors: tuple[FieldError, ...] = ()

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if self.errors:
            return False
        return all(r.matches(labels) for r in self.labels) and all(r.matches(name) for r in self.fields)


def _as_list(raw: object, path: str, errors: list[FieldError]) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, list):
        return raw
    errors.append(FieldError.invalid(path, raw, "must be of type array"))
    return []


def _as_mapping(raw: object, path: str, errors: list[FieldError]) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return raw
    errors.append(FieldError.invalid(path, raw, "must be of type object"))
    return {}


def _string_values(raw: object, path: str, errors: list[FieldError]) -> list[str]:
    values = _as_list(raw, path, errors)
    if not all(isinstance(v, str) for v in values):
        errors.append(FieldError.invalid(path, values, "must be an array of strings"))
        return []
    return values


# Requirements that passed validation, by (key, operator, values): every pod of a Deployment or DaemonSet
# carries the same terms, and checking label names and values against apimachinery's regexes was most of
# compiling them. Only valid ones are kept (an invalid one's errors name its path, so it is rebuilt each
# time); validity depends on nothing else. Cleared when full, so it stays small.
_VALID_REQUIREMENTS: dict[tuple[str, str, tuple[str, ...]], LabelRequirement] = {}
_VALID_REQUIREMENTS_LIMIT = 4096


def _label_requirement(expr: Mapping[str, Any], path: str, errors: list[FieldError]) -> LabelRequirement | None:
    key = expr.get("key", "")
    operator = expr.get("operator", "")
    values = _string_values(expr.get("values"), f"{path}.values", errors)
    cache_key = (key, operator, tuple(values)) if isinstance(key, str) and isinstance(operator, str) else None
    if cache_key is not None:
        known = _VALID_REQUIREMENTS.get(cache_key)
        if known is not None:
            return known
    requirement = _validated_label_requirement(key, operator, values, path, errors)
    if requirement is not None and cache_key is not None:
        if len(_VALID_REQUIREMENTS) >= _VALID_REQUIREMENTS_LIMIT:
            _VALID_REQUIREMENTS.clear()
        _VALID_REQUIREMENTS[cache_key] = requirement
    return requirement


def _validated_label_requirement(
    key: object, operator: object, values: list[str], path: str, errors: list[FieldError]
) -> LabelRequirement | None:
    if operator not in _OPERATORS:
        errors.append(FieldError(f"{path}.operator", ErrorType.UNSUPPORTED, operator))
        return None
    before = len(errors)
    key_text = key if isinstance(key, str) else str(key)
    key_errors = qualified_name_errors(key_text)
    if key_errors:
        errors.append(FieldError.invalid(f"{path}.key", key, "; ".join(key_errors)))
    bound = 0
    if operator in (IN, NOT_IN):
        if not values:
            errors.append(
                FieldError.invalid(f"{path}.values", values, "for 'in', 'notin' operators, values set can't be empty")
            )
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.append(
                FieldError.invalid(f"{path}.values", values, "values set must be empty for exists and does not exist")
            )
    else:
        if len(values) != 1:
            errors.append(
                FieldError.invalid(f"{path}.values", values, "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        for i, value in enumerate(values):
            parsed = parse_int64(value)
            if parsed is None:
                errors.append(
                    FieldError.invalid(
                        f"{path}.values[{i}]", value, "for 'Gt', 'Lt' operators, the value must be an integer"
                    )
                )
            else:
                bound = parsed
    for i, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(FieldError.invalid(f"{path}.values[{i}]", value, "; ".join(value_errors)))
    if len(errors) != before:
        return None
    return LabelRequirement(key_text, operator, frozenset(values), bound)


def _field_requirement(expr: Mapping[str, Any], path: str, errors: list[FieldError]) -> FieldRequirement | None:
    key = expr.get("key", "")
    operator = expr.get("operator", "")
    values = _string_values(expr.get("values"), f"{path}.values", errors)
    if key != OBJECT_NAME_FIELD:
        errors.append(FieldError.invalid(f"{path}.key", key, "not a valid field selector key"))
        return None
    if len(values) != 1:
        errors.append(FieldError.invalid(f"{path}.values", values, "must have one element"))
        return None
    if operator not in (IN, NOT_IN):
        errors.append(FieldError.invalid(f"{path}.operator", operator, "not a valid selector operator"))
        return None
    return FieldRequirement(operator == IN, values[0])


def is_empty_term(raw: Mapping[str, Any]) -> bool:
    return not raw.get("matchExpressions") and not raw.get("matchFields")


def compile_term(raw: Mapping[str, Any], path: str) -> Term:
    """Parse one NodeSelectorTerm; parse problems are kept on the term (it then matches nothing)."""
    errors: list[FieldError] = []
    labels: list[LabelRequirement] = []
    fields: list[FieldRequirement] = []
    expressions = _as_list(raw.get("matchExpressions"), f"{path}.matchExpressions", errors)
    for i, item in enumerate(expressions):
        item_path = f"{path}.matchExpressions[{i}]"
        requirement = _label_requirement(_as_mapping(item, item_path, errors), item_path, errors)
        if requirement is not None:
            labels.append(requirement)
    for i, item in enumerate(_as_list(raw.get("matchFields"), f"{path}.matchFields", errors)):
        item_path = f"{path}.matchFields[{i}]"
        field_requirement = _field_requirement(_as_mapping(item, item_path, errors), item_path, errors)
        if field_requirement is not None:
            fields.append(field_requirement)
    return Term(tuple(labels), tuple(fields), tuple(errors))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A NodeSelector's non-empty terms (ORed). With no terms it matches no node."""

    terms: tuple[Term, ...]

    @property
    def errors(self) -> list[FieldError]:
        return [error for term in self.terms for error in term.errors]

    @property
    def uses_fields(self) -> bool:
        return any(term.fields for term in self.terms)

    def match(self, labels: Mapping[str, str], name: str) -> tuple[bool, bool]:
        """(matched, parse errors seen before a match) — kube's LazyErrorNodeSelector.Match."""
        had_errors = False
        for term in self.terms:
            if term.errors:
                had_errors = True
                continue
            if term.matches(labels, name):
                return True, False
        return False, had_errors

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        return self.match(labels, name)[0]


def compile_node_selector(raw: object, path: str = "") -> NodeSelector:
    """Compile ``{nodeSelectorTerms: [...]}``; callers that must reject bad input check ``.errors``."""
    errors: list[FieldError] = []
    selector = _as_mapping(raw, path, errors)
    terms_path = _join(path, "nodeSelectorTerms")
    terms: list[Term] = []
    for i, item in enumerate(_as_list(selector.get("nodeSelectorTerms"), terms_path, errors)):
        item_path = f"{terms_path}[{i}]"
        term_raw = _as_mapping(item, item_path, errors)
        if is_empty_term(term_raw):
            continue
        terms.append(compile_term(term_raw, item_path))
    if errors:
        terms.append(Term((), (), tuple(errors)))
    return NodeSelector(tuple(terms))


@dataclass(frozen=True, slots=True)
class PreferredTerms:
    """Weighted preferred terms; a node's score is the sum of the weights of the terms it matches."""

    terms: tuple[tuple[Term, int], ...]

    @property
    def uses_fields(self) -> bool:
        return any(term.fields for term, _ in self.terms)

    def score(self, labels: Mapping[str, str], name: str) -> int:
        return sum(weight for term, weight in self.terms if term.matches(labels, name))


def compile_preferred_terms(raw: object, path: str = "") -> tuple[PreferredTerms, list[FieldError]]:
    """Compile ``preferredDuringSchedulingIgnoredDuringExecution``; every parse error is returned."""
    errors: list[FieldError] = []
    terms: list[tuple[Term, int]] = []
    for i, item in enumerate(_as_list(raw, path, errors)):
        item_path = f"{path}[{i}]"
        entry = _as_mapping(item, item_path, errors)
        weight = entry.get("weight", 0)
        preference = _as_mapping(entry.get("preference", {}), f"{item_path}.preference", errors)
        if not isinstance(weight, int) or isinstance(weight, bool):
            errors.append(FieldError.invalid(f"{item_path}.weight", weight, "must be of type integer"))
            continue
        if weight == 0 or is_empty_term(preference):
            continue
        # Upstream reports a preference's problems at the term's index, without ".preference".
        term = compile_term(preference, item_path)
        if term.errors:
            errors.extend(term.errors)
            continue
        terms.append((term, weight))
    return PreferredTerms(tuple(terms)), errors


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """``spec.nodeSelector`` AND the required node-affinity terms (either may be absent)."""

    node_selector: tuple[tuple[str, str], ...]
    affinity: NodeSelector | None

    @property
    def uses_fields(self) -> bool:
        return self.affinity is not None and self.affinity.uses_fields

    def match(self, labels: Mapping[str, str], name: str) -> tuple[bool, bool]:
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False, False
        if self.affinity is None:
            return True, False
        return self.affinity.match(labels, name)

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        return self.match(labels, name)[0]

    def clone(self) -> RequiredNodeAffinity:
        return self
