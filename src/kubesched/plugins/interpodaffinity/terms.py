"""Pod (anti-)affinity terms: parsed once per pod from the raw ``spec.affinity`` mapping, matched many times.

Who calls it: the InterPodAffinity plugin (PreFilter, PreScore, AddPod/RemovePod, queueing hints), through its
per-pod and per-node caches, so a pod's terms are parsed once, not per node. Semantics carried over from
kube-scheduler v1.35 (``GetAffinityTerms`` / ``NewPodInfo`` in the framework types, apimachinery's
``LabelSelectorAsSelector``) and from the API server's pod strategy:

- a term's namespaces are its ``namespaces`` list; with neither ``namespaces`` nor ``namespaceSelector`` the
  pod's own namespace; a ``namespaceSelector`` is kept as a selector (the plugin resolves an incoming pod's
  selector to names through the Namespace lister, once per cycle);
- a missing (null) ``labelSelector`` / ``namespaceSelector`` selects nothing, an empty one ``{}`` everything;
- ``matchLabelKeys`` / ``mismatchLabelKeys``: kube-scheduler does not read them; a v1.35 API server merges them
  into ``labelSelector`` when the pod is created (``key In (pod's value)`` / ``key NotIn (pod's value)`` for
  each key the pod has as a label, nothing when the selector is null). Pods here may come from manifests that
  never went through an API server, so the merge is done at parse time; for a pod that did, it adds the same
  requirements again, which changes no answer (unless the pod's labels changed after it was created);
- a term list that fails to parse is dropped whole and the failure reported as upstream words it
  (``requiredAffinityTerms: "Gt" is not a valid label selector operator``); the other lists stay usable;
- no check of ``topologyKey`` or ``weight`` is made here (the API server validates them; kube-scheduler
  takes what it gets): an empty key is a label no node has, a weight is used as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubesched.api.objects import Pod
from kubesched.plugins.helper.node_selector import DOES_NOT_EXIST, EXISTS, IN, NOT_IN, LabelRequirement
from kubesched.plugins.helper.validation import label_value_errors, qualified_name_errors

POD_AFFINITY: Final = "podAffinity"
POD_ANTI_AFFINITY: Final = "podAntiAffinity"
REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"

_NOTHING, _EVERYTHING, _REQUIREMENTS = 0, 1, 2
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled label selector: nothing (null), everything (empty) or ANDed requirements."""

    kind: int
    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.kind == _REQUIREMENTS:
            return all(r.matches(labels) for r in self.requirements)
        return self.kind == _EVERYTHING

    @property
    def is_everything(self) -> bool:
        """apimachinery's ``Selector.Empty()``: true only for the selector with no requirements."""
        return self.kind == _EVERYTHING


NOTHING = Selector(_NOTHING)
EVERYTHING = Selector(_EVERYTHING)
_NO_LABELS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One PodAffinityTerm, compiled: which pods (namespaces AND labels) and over which topology key."""

    namespaces: frozenset[str]
    selector: Selector
    topology_key: str
    namespace_selector: Selector

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether ``pod`` is one of the pods this term selects; ``namespace_labels`` are the labels of the
        pod's namespace (``None``: not looked up, which an unresolved namespace selector reads as "no labels")."""
        meta = pod.metadata
        if meta.namespace in self.namespaces or self.namespace_selector.matches(
            namespace_labels if namespace_labels is not None else _NO_LABELS
        ):
            return self.selector.matches(meta.labels)
        return False

    def with_namespaces(self, names: frozenset[str]) -> AffinityTerm:
        """The term with ``names`` added and its namespace selector spent (resolved to names)."""
        return AffinityTerm(self.namespaces | names, self.selector, self.topology_key, NOTHING)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodTerms:
    """Everything InterPodAffinity reads from one pod's ``spec.affinity``.

    ``has_affinity`` is upstream's "pod with affinity" (a podAffinity or podAntiAffinity is set at all);
    ``has_required_anti_affinity`` whether the raw podAntiAffinity has required terms (even unparsable ones).
    ``error`` is the aggregate parse error (``None`` when every list parsed).
    """

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    has_affinity: bool = False
    has_required_anti_affinity: bool = False
    has_preferred: bool = False
    error: str | None = None

    @property
    def has_required(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity)


NO_TERMS: Final = PodTerms()


class _ParseError(Exception):
    """One term list failed; the message is upstream's error text."""


def go_quote(value: str) -> str:
    """Go's ``%q`` for the strings that occur here (printable ASCII and common escapes)."""
    out = []
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _go_string_slice(values: Sequence[str]) -> str:
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _aggregate(messages: Sequence[str]) -> str:
    """apimachinery's aggregate error text: the one message, or ``[a, b]``."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def _requirement(key: object, operator: str, values: object, path: str) -> LabelRequirement:
    """``labels.NewRequirement`` for the four selector operators, with its error texts."""
    if not isinstance(key, str):
        raise _ParseError(f"{path}.key: Invalid value: must be of type string")
    if values is None:
        values = []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _ParseError(f"{path}.values: Invalid value: must be an array of strings")
    errors: list[str] = []
    problems = qualified_name_errors(key)
    if problems:
        errors.append(f"key: Invalid value: {go_quote(key)}: {'; '.join(problems)}")
    if operator in (IN, NOT_IN) and not values:
        errors.append(
            f"values: Invalid value: {_go_string_slice(values)}: for 'in', 'notin' operators, values set can't be empty"
        )
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        errors.append(
            f"values: Invalid value: {_go_string_slice(values)}: values set must be empty for exists and does not exist"
        )
    for i, value in enumerate(values):
        value_problems = label_value_errors(value)
        if value_problems:
            errors.append(f"values[{i}][{key}]: Invalid value: {go_quote(value)}: {'; '.join(value_problems)}")
    if errors:
        raise _ParseError(_aggregate(errors))
    return LabelRequirement(key, operator, frozenset(values))


def compile_selector(raw: object, path: str) -> Selector:
    """``metav1.LabelSelectorAsSelector``: null → nothing, no requirements → everything; raises _ParseError."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise _ParseError(f"{path}: Invalid value: must be of type object")
    match_labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping):
        raise _ParseError(f"{path}.matchLabels: Invalid value: must be of type object")
    if not isinstance(expressions, list):
        raise _ParseError(f"{path}.matchExpressions: Invalid value: must be of type array")
    if not match_labels and not expressions:
        return EVERYTHING
    requirements: list[LabelRequirement] = []
    # Go walks matchLabels in random map order; sorting makes the first reported error deterministic.
    for key in sorted(match_labels, key=str):
        value = match_labels[key]
        if not isinstance(value, str):
            raise _ParseError(f"{path}.matchLabels.{key}: Invalid value: must be of type string")
        requirements.append(_requirement(key, IN, [value], f"{path}.matchLabels"))
    for i, expression in enumerate(expressions):
        item_path = f"{path}.matchExpressions[{i}]"
        if not isinstance(expression, Mapping):
            raise _ParseError(f"{item_path}: Invalid value: must be of type object")
        operator = expression.get("operator", "")
        if operator not in (IN, NOT_IN, EXISTS, DOES_NOT_EXIST):
            shown = operator if isinstance(operator, str) else str(operator)
            raise _ParseError(f"{go_quote(shown)} is not a valid label selector operator")
        requirements.append(_requirement(expression.get("key", ""), operator, expression.get("values"), item_path))
    return Selector(_REQUIREMENTS, tuple(requirements))


def _string_list(raw: object, path: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise _ParseError(f"{path}: Invalid value: must be an array of strings")
    return raw


def _merged_label_selector(raw: Mapping[str, Any], pod: Pod, path: str) -> object:
    """The term's labelSelector with matchLabelKeys / mismatchLabelKeys merged as the API server does."""
    selector = raw.get("labelSelector")
    match_keys = _string_list(raw.get("matchLabelKeys"), f"{path}.matchLabelKeys")
    mismatch_keys = _string_list(raw.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")
    if (not match_keys and not mismatch_keys) or not isinstance(selector, Mapping):
        return selector
    labels = pod.metadata.labels
    added = [{"key": k, "operator": IN, "values": [labels[k]]} for k in match_keys if k in labels]
    added += [{"key": k, "operator": NOT_IN, "values": [labels[k]]} for k in mismatch_keys if k in labels]
    if not added:
        return selector
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return selector  # reported by compile_selector
    return {**selector, "matchExpressions": [*expressions, *added]}


def _term(raw: object, pod: Pod, path: str) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise _ParseError(f"{path}: Invalid value: must be of type object")
    selector = compile_selector(_merged_label_selector(raw, pod, path), f"{path}.labelSelector")
    names = _string_list(raw.get("namespaces"), f"{path}.namespaces")
    raw_ns_selector = raw.get("namespaceSelector")
    namespaces = frozenset((pod.metadata.namespace,)) if not names and raw_ns_selector is None else frozenset(names)
    ns_selector = compile_selector(raw_ns_selector, f"{path}.namespaceSelector")
    key = raw.get("topologyKey", "")
    if not isinstance(key, str):
        raise _ParseError(f"{path}.topologyKey: Invalid value: must be of type string")
    return AffinityTerm(namespaces, selector, key, ns_selector)


def _terms(raw: object, pod: Pod, path: str) -> tuple[AffinityTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _ParseError(f"{path}: Invalid value: must be of type array")
    return tuple(_term(item, pod, f"{path}[{i}]") for i, item in enumerate(raw))


def _weighted_terms(raw: object, pod: Pod, path: str) -> tuple[WeightedAffinityTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _ParseError(f"{path}: Invalid value: must be of type array")
    out: list[WeightedAffinityTerm] = []
    for i, item in enumerate(raw):
        item_path = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise _ParseError(f"{item_path}: Invalid value: must be of type object")
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or not _INT32_MIN <= weight <= _INT32_MAX:
            raise _ParseError(f"{item_path}.weight: Invalid value: must be a 32-bit integer")
        out.append(
            WeightedAffinityTerm(_term(item.get("podAffinityTerm"), pod, f"{item_path}.podAffinityTerm"), weight)
        )
    return tuple(out)


def _section(affinity: Mapping[str, Any], name: str, errors: list[str]) -> Mapping[str, Any] | None:
    section = affinity.get(name)
    if section is None or isinstance(section, Mapping):
        return section
    errors.append(f"spec.affinity.{name}: Invalid value: must be of type object")
    return {}


def parse_pod_terms(pod: Pod) -> PodTerms:
    """Parse ``pod``'s pod affinity and anti-affinity (never raises; failures land in ``error``)."""
    affinity = pod.spec.affinity
    if not isinstance(affinity, Mapping):
        return NO_TERMS
    errors: list[str] = []
    pod_affinity = _section(affinity, POD_AFFINITY, errors)
    pod_anti = _section(affinity, POD_ANTI_AFFINITY, errors)
    if pod_affinity is None and pod_anti is None:
        return NO_TERMS
    base = "spec.affinity"

    def parse(label: str, parser: Any, section: Mapping[str, Any] | None, key: str, name: str) -> tuple[Any, ...]:
        if section is None:
            return ()
        try:
            parsed: tuple[Any, ...] = parser(section.get(key), pod, f"{base}.{name}.{key}")
            return parsed
        except _ParseError as exc:
            errors.append(f"{label}: {exc}")
            return ()

    required = parse("requiredAffinityTerms", _terms, pod_affinity, REQUIRED, POD_AFFINITY)
    required_anti = parse("requiredAntiAffinityTerms", _terms, pod_anti, REQUIRED, POD_ANTI_AFFINITY)
    preferred = parse("preferredAffinityTerms", _weighted_terms, pod_affinity, PREFERRED, POD_AFFINITY)
    preferred_anti = parse("preferredAntiAffinityTerms", _weighted_terms, pod_anti, PREFERRED, POD_ANTI_AFFINITY)
    raw_required_anti = pod_anti.get(REQUIRED) if pod_anti is not None else None
    return PodTerms(
        required_affinity=required,
        required_anti_affinity=required_anti,
        preferred_affinity=preferred,
        preferred_anti_affinity=preferred_anti,
        has_affinity=True,
        has_required_anti_affinity=bool(raw_required_anti),
        has_preferred=_has_items(pod_affinity, PREFERRED) or _has_items(pod_anti, PREFERRED),
        error=_aggregate(errors) if errors else None,
    )


def _has_items(section: Mapping[str, Any] | None, key: str) -> bool:
    return section is not None and bool(section.get(key))


def matches_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """Upstream ``podMatchesAllAffinityTerms``: ``pod`` matches every term (and there is at least one).
    The namespace selectors of the terms it is used with are resolved or unset, so no labels are passed."""
    if not terms:
        return False
    return all(term.matches(pod, None) for term in terms)
