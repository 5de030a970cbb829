"""What ``kubectl apply --validate=strict`` would object to in a manifest that kubesched can still read.

Who calls it: :mod:`kubesched.api.manifests`, for every object it loads. The findings are warnings by default
(the object is loaded as it is) and errors with ``--strict``, so a dump that the API server would refuse does
not pass a CI gate unnoticed:

- an ``apiVersion`` the kind is not served at (``no matches for kind "Pod" in version "v2"``);
- a ``metadata.name`` or ``metadata.namespace`` that is not a valid Kubernetes name, with the API server's
  wording (a lowercase RFC 1123 subdomain for most kinds, an RFC 1123 label for Namespaces and Services);
- fields the object's type does not have, at any depth, named by their path as the API server's strict field
  validation names them (``unknown field "spec.containers[0].resource"``): a ``resource:`` for ``resources:``
  or a ``toleration:`` for ``tolerations:`` would otherwise load as a pod that requests or tolerates nothing.
  The field names per kind (Kubernetes v1.35) are the table in :mod:`kubesched.api.field_schema`; free-form
  maps (labels, annotations, nodeSelector, resource lists, ...) accept any key, and a few subtrees that do not
  bear on scheduling (probes, securityContext, a pod's status, the inner fields of most volume sources) are
  not looked into;
- a key repeated in one YAML mapping (found while parsing: :class:`DuplicateKeyTracker`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeAlias, cast

import yaml

from .field_schema import ANY, GENERIC, KINDS, ListOf, Schema

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(rf"^{_LABEL}$")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

# Kinds whose names are DNS labels (the rest: subdomains).
_LABEL_NAMED = frozenset({"Namespace", "Service"})


def version_problem(kind: str, api_version: str, served: tuple[str, ...]) -> str:
    """Why ``api_version`` is not one the kind is served at, or ""."""
    version = api_version.rpartition("/")[2]
    if version in served:
        return ""
    return f'no matches for kind "{kind}" in version "{api_version}"'


def name_problems(kind: str, metadata: Mapping[str, Any], namespaced: bool) -> list[str]:
    problems: list[str] = []
    name = metadata.get("name")
    if isinstance(name, str) and name:
        pattern, message, limit = (
            (_DNS_LABEL, LABEL_MESSAGE, 63) if kind in _LABEL_NAMED else (_DNS_SUBDOMAIN, SUBDOMAIN_MESSAGE, 253)
        )
        if len(name) > limit:
            problems.append(f'metadata.name: Invalid value: "{name}": must be no more than {limit} characters')
        elif not pattern.match(name):
            problems.append(f'metadata.name: Invalid value: "{name}": {message}')
    namespace = metadata.get("namespace")
    if namespaced and isinstance(namespace, str) and namespace:
        if len(namespace) > 63:
            problems.append(f'metadata.namespace: Invalid value: "{namespace}": must be no more than 63 characters')
        elif not _DNS_LABEL.match(namespace):
            problems.append(f'metadata.namespace: Invalid value: "{namespace}": {LABEL_MESSAGE}')
    return problems


def unknown_fields(kind: str, document: Mapping[str, Any]) -> list[str]:
    """``unknown field "spec.containers[0].resource"`` for every key, at any depth, that the kind's type does not
    have (:data:`kubesched.api.field_schema.KINDS`); free-form maps accept any key. A mapping's own unknown keys
    come in document order, then those of its children in the schema's order."""
    names, children = _COMPILED.get(kind, _GENERIC)
    found: list[str] = []
    _walk(names, children, document, None, found)
    return [f'unknown field "{path}"' for path in found]


# A schema compiled for the walk: the names it allows, and its children worth descending into, each
# (field name, is a list of objects, the objects' names, their children or None for a leaf). ANY fields are not
# kept; a leaf (a toleration, a port, a condition) is checked by its parent without a call.
_Child: TypeAlias = "tuple[str, bool, frozenset[str], tuple[_Child, ...] | None]"
_Compiled: TypeAlias = "tuple[frozenset[str], tuple[_Child, ...]]"


def _compile(schema: Schema, memo: dict[int, _Compiled]) -> _Compiled:
    # Shared sub-schemas (a container, a label selector) compile once; the tables have no cycles.
    compiled = memo.get(id(schema))
    if compiled is None:
        children: list[_Child] = []
        for name, sub in schema.items():
            is_list = type(sub) is ListOf
            item = cast(ListOf, sub).item if is_list else sub
            if item is not ANY:
                sub_names, sub_children = _compile(cast(Schema, item), memo)
                children.append((name, is_list, sub_names, sub_children or None))
        compiled = memo[id(schema)] = (frozenset(schema), tuple(children))
    return compiled


_MEMO: dict[int, _Compiled] = {}
_COMPILED = {kind: _compile(schema, _MEMO) for kind, schema in KINDS.items()}
_GENERIC = _compile(GENERIC, _MEMO)

# Where the walk is: (parent, field name, the list and element when the field is a list, else None, None). A clean
# dump (the usual case) never needs a path, so the path and list indices are worked out only for a finding.
_Trail: TypeAlias = "tuple[_Trail, str, list[Any] | None, object] | None"


def _path(trail: _Trail) -> str:
    parts: list[str] = []
    while trail is not None:
        trail, name, items, element = trail
        if items is None:
            parts.append(f"{name}.")
        else:
            # By identity: an element that a YAML alias repeats is named by its first position.
            index = next(i for i, item in enumerate(items) if item is element)
            parts.append(f"{name}[{index}].")
    return "".join(reversed(parts))


def _report(obj: Mapping[Any, Any], names: frozenset[str], trail: _Trail, found: list[str]) -> None:
    prefix = _path(trail)
    # Non-string keys (YAML allows them) are left to the builders, which reject them.
    found.extend(prefix + key for key in obj if isinstance(key, str) and key not in names)


def _walk(
    names: frozenset[str], children: tuple[_Child, ...], obj: Mapping[Any, Any], trail: _Trail, found: list[str]
) -> None:
    """Append the path of each key of ``obj`` (and of its checked children) that the schema lacks.

    This runs for every object of a dump, so the clean case is kept to C-level work: a mapping is one subset
    test (``issuperset`` iterates the dict's keys), and the walk goes only as deep as the schema, however deep the
    document. A value of the wrong type (a mapping where a list belongs) is skipped: the object's builder reports
    it in its own words. YAML and JSON decode to dict and list; testing the exact types is much cheaper than the
    ABCs."""
    if not names.issuperset(obj):
        _report(obj, names, trail, found)
    get = obj.get
    for name, is_list, sub_names, sub_children in children:
        value = get(name)
        if value is None:
            continue
        if is_list:
            if type(value) is not list:
                continue
            if sub_children is None:
                for element in value:
                    if type(element) is dict and not sub_names.issuperset(element):
                        _report(element, sub_names, (trail, name, value, element), found)
            else:
                for element in value:
                    if type(element) is dict:
                        _walk(sub_names, sub_children, element, (trail, name, value, element), found)
        elif type(value) is dict:
            if sub_children is None:
                if not sub_names.issuperset(value):
                    _report(value, sub_names, (trail, name, None, None), found)
            else:
                _walk(sub_names, sub_children, value, (trail, name, None, None), found)


class DuplicateKeyTracker:
    """Records the keys repeated in one mapping while a loader constructs a document (the last one wins, as
    in kubectl's lenient decoding); ``install`` hooks it into a loader class."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def install(self, loader: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
        tracker = self

        def construct_mapping(self: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = key_node.value
                line = key_node.start_mark.line + 1
                if key in seen:
                    tracker.found.append(f'line {line}: key "{key}" already set in map (first at line {seen[key]})')
                else:
                    seen[key] = line
            # The loader's own construction: merge keys, and an unhashable key as a YAML error, not a TypeError.
            return yaml.SafeLoader.construct_mapping(self, node, deep=True)

        tracked = cast(type[yaml.SafeLoader], type("TrackingLoader", (loader,), {}))
        tracked.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
        return tracked
