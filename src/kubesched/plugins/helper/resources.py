"""Which resource names are "scalar" resources, as apimachinery's ``v1helper`` decides.

Who calls it: NodeResourcesFit (only scalar resources are checked beyond cpu, memory and
ephemeral-storage; only *extended* ones may be ignored) and the resource-allocation scorers (a scalar the
pod does not request is left out of the score). kube-scheduler's NodeInfo keeps only scalar names in
``ScalarResources``; kubesched's Resource keeps every non-basic name, so plugins filter with these tests.
"""

from __future__ import annotations

import functools

from kubesched.plugins.helper.validation import qualified_name_errors

RESOURCE_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
RESOURCE_REQUESTS_PREFIX = "requests."
RESOURCE_HUGEPAGES_PREFIX = "hugepages-"
RESOURCE_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


def is_prefixed_native_resource(name: str) -> bool:
    return RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    return "/" not in name or is_prefixed_native_resource(name)


@functools.lru_cache(maxsize=4096)
def is_extended_resource_name(name: str) -> bool:
    """A name outside the kubernetes.io namespace, usable as a quota name (``requests.<name>``)."""
    if is_native_resource(name) or name.startswith(RESOURCE_REQUESTS_PREFIX):
        return False
    return not qualified_name_errors(RESOURCE_REQUESTS_PREFIX + name)


def is_hugepage_resource_name(name: str) -> bool:
    return name.startswith(RESOURCE_HUGEPAGES_PREFIX)


def is_attachable_volume_resource_name(name: str) -> bool:
    return name.startswith(RESOURCE_ATTACHABLE_VOLUMES_PREFIX)


@functools.lru_cache(maxsize=4096)
def is_scalar_resource_name(name: str) -> bool:
    return (
        is_extended_resource_name(name)
        or is_hugepage_resource_name(name)
        or is_prefixed_native_resource(name)
        or is_attachable_volume_resource_name(name)
    )
