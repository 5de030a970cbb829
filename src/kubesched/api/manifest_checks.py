"""What ``kubectl apply --validate=strict`` would object to in a manifest that kubesched can still read.

Who calls it: :mod:`kubesched.api.manifests`, for every object it loads. The findings are warnings by default
(the object is loaded as it is) and errors with ``--strict``, so a dump that the API server would refuse does
not pass a CI gate unnoticed:

- an ``apiVersion`` the kind is not served at (``no matches for kind "Pod" in version "v2"``);
- a ``metadata.name`` or ``metadata.namespace`` that is not a valid Kubernetes name, with the API server's
  wording (a lowercase RFC 1123 subdomain for most kinds, an RFC 1123 label for Namespaces and Services);
- fields the object's type does not have, at the top level and in ``metadata`` (the API server's strict decoder
  finds them anywhere; deeper ones are not checked here);
- a key repeated in one YAML mapping (found while parsing: :class:`DuplicateKeyTracker`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

import yaml

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

_OBJECT_META = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_COMMON = frozenset({"apiVersion", "kind", "metadata"})
_TOP_LEVEL: Mapping[str, frozenset[str]] = {
    "PriorityClass": _COMMON | {"value", "globalDefault", "description", "preemptionPolicy"},
    "StorageClass": _COMMON
    | {
        "provisioner",
        "parameters",
        "reclaimPolicy",
        "mountOptions",
        "allowVolumeExpansion",
        "volumeBindingMode",
        "allowedTopologies",
    },
}
_SPEC_STATUS = _COMMON | {"spec", "status"}


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
    """``unknown field "x"`` for the top-level and metadata keys the kind does not have."""
    allowed = _TOP_LEVEL.get(kind, _SPEC_STATUS)
    found = [f'unknown field "{key}"' for key in document if isinstance(key, str) and key not in allowed]
    metadata = document.get("metadata")
    if isinstance(metadata, Mapping):
        found.extend(
            f'unknown field "metadata.{key}"' for key in metadata if isinstance(key, str) and key not in _OBJECT_META
        )
    return found


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
