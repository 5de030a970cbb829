"""metav1.LabelSelector: ``matchLabels`` + ``matchExpressions``, compiled once, matched against node labels.

Who calls it: plugins whose data names nodes by label (ComplianceScore's rules); later PodTopologySpread and
InterPodAffinity, whose selectors have the same shape. Semantics are apimachinery's
``LabelSelectorAsSelector`` and ``ValidateLabelSelector``:

- every ``matchLabels`` pair and every ``matchExpressions`` requirement must hold (AND);
- operators In, NotIn (true when the label is absent), Exists, DoesNotExist; nothing else (Gt/Lt belong to
  node selectors only): another operator is ``Invalid value: "Gt": not a valid selector operator``;
- In/NotIn need values, Exists/DoesNotExist must have none; keys are qualified names, values label values;
- an empty selector ``{}`` matches every node; a missing (null) selector is the caller's business
  (Kubernetes reads it as "matches nothing").

Raw input is decoded JSON/YAML; every problem is reported as a :class:`FieldError` with its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.errors import FieldError
from kubesched.plugins.helper.node_selector import DOES_NOT_EXIST, EXISTS, IN, NOT_IN, LabelRequirement
from kubesched.plugins.helper.validation import label_value_errors, qualified_name_errors

SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)
_SELECTOR_KEYS = ("matchLabels", "matchExpressions")
_REQUIREMENT_KEYS = ("key", "operator", "values")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Compiled requirements, ANDed; no requirements matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _unknown_keys(raw: Mapping[Any, Any], known: tuple[str, ...], path: str) -> list[FieldError]:
    return [
        FieldError.invalid(_join(path, str(key)), raw[key], f'unknown field "{key}"') for key in raw if key not in known
    ]


def _key_errors(key: object, path: str) -> list[FieldError]:
    if not isinstance(key, str):
        return [FieldError.invalid(path, key, "must be of type string")]
    problems = qualified_name_errors(key)
    return [FieldError.invalid(path, key, "; ".join(problems))] if problems else []


def _value_errors(value: object, path: str) -> list[FieldError]:
    if not isinstance(value, str):
        return [FieldError.invalid(path, value, "must be of type string")]
    problems = label_value_errors(value)
    return [FieldError.invalid(path, value, "; ".join(problems))] if problems else []


def _requirement(raw: object, path: str, errors: list[FieldError]) -> LabelRequirement | None:
    if not isinstance(raw, Mapping):
        errors.append(FieldError.invalid(path, raw, "must be of type object"))
        return None
    before = len(errors)
    errors.extend(_unknown_keys(raw, _REQUIREMENT_KEYS, path))
    key = raw.get("key", "")
    operator = raw.get("operator", "")
    values_raw = raw.get("values")
    values: list[str] = []
    values_path = _join(path, "values")
    if values_raw is not None:
        if not isinstance(values_raw, list):
            errors.append(FieldError.invalid(values_path, values_raw, "must be of type array"))
        else:
            for i, value in enumerate(values_raw):
                value_errors = _value_errors(value, f"{values_path}[{i}]")
                errors.extend(value_errors)
                if not value_errors:
                    values.append(value)
    if operator in (IN, NOT_IN):
        if values_raw is None or values_raw == []:
            errors.append(FieldError.required(values_path, "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values_raw:
            errors.append(
                FieldError.forbidden(values_path, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            )
    else:
        errors.append(FieldError.invalid(_join(path, "operator"), operator, "not a valid selector operator"))
    errors.extend(_key_errors(key, _join(path, "key")))
    if len(errors) != before:
        return None
    return LabelRequirement(str(key), str(operator), frozenset(values))


def compile_label_selector(raw: object, path: str = "") -> tuple[LabelSelector, list[FieldError]]:
    """Compile a LabelSelector mapping; with errors the selector returned is empty and must not be used."""
    errors: list[FieldError] = []
    if not isinstance(raw, Mapping):
        return LabelSelector(), [FieldError.invalid(path, raw, "must be of type object")]
    errors.extend(_unknown_keys(raw, _SELECTOR_KEYS, path))
    requirements: list[LabelRequirement] = []
    match_labels = raw.get("matchLabels")
    labels_path = _join(path, "matchLabels")
    if match_labels is not None:
        if not isinstance(match_labels, Mapping):
            errors.append(FieldError.invalid(labels_path, match_labels, "must be of type object"))
        else:
            # Sorted, as LabelSelectorAsSelector builds them; the order never changes the answer.
            for key in sorted(match_labels, key=str):
                value = match_labels[key]
                item_errors = _key_errors(key, labels_path) + _value_errors(value, f"{labels_path}.{key}")
                errors.extend(item_errors)
                if not item_errors:
                    requirements.append(LabelRequirement(key, IN, frozenset((value,))))
    expressions = raw.get("matchExpressions")
    expressions_path = _join(path, "matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            errors.append(FieldError.invalid(expressions_path, expressions, "must be of type array"))
        else:
            for i, item in enumerate(expressions):
                requirement = _requirement(item, f"{expressions_path}[{i}]", errors)
                if requirement is not None:
                    requirements.append(requirement)
    if errors:
        return LabelSelector(), errors
    return LabelSelector(tuple(requirements)), []
