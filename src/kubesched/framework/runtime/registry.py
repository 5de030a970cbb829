"""The plugin registry: plugin name → how to build it, which points it serves, its args type.

One explicit dict (``kubesched.plugins.registry.in_tree_registry``) holds the in-tree plugins; out-of-tree
plugins join through the ``kubesched.plugins`` entry-point group (each entry point names a callable that
returns a Registry) or through :func:`merge`. Nothing registers itself by being imported.
The registry doubles as the config loader's plugin catalog.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubesched.errors import KubeschedError
from kubesched.framework.interface import PluginFactory

log = logging.getLogger(__name__)

# Config extension-point name → the method whose presence means "implements it".
POINT_METHODS: Mapping[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "less",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}


def extension_points_of(plugin_type: type) -> frozenset[str]:
    return frozenset(point for point, method in POINT_METHODS.items() if callable(getattr(plugin_type, method, None)))


@dataclass(frozen=True, slots=True)
class PluginRegistration:
    """One registry entry; ``implemented=False`` marks a default plugin not built yet."""

    name: str
    factory: PluginFactory | None
    args_type: type | None = None
    extension_points: frozenset[str] = field(default_factory=frozenset)
    implemented: bool = True
    description: str = ""

    @classmethod
    def of(
        cls, name: str, plugin_type: type, *, args_type: type | None = None, description: str = ""
    ) -> PluginRegistration:
        """Register ``plugin_type`` whose constructor takes ``(args, handle)``."""
        return cls(
            name=name,
            factory=plugin_type,
            args_type=args_type,
            extension_points=extension_points_of(plugin_type),
            description=description or next(iter((plugin_type.__doc__ or "").strip().splitlines()), ""),
        )

    @classmethod
    def planned(cls, name: str, points: Iterable[str], description: str = "") -> PluginRegistration:
        return cls(
            name=name, factory=None, extension_points=frozenset(points), implemented=False, description=description
        )


Registry = dict[str, PluginRegistration]


class RegistryError(KubeschedError):
    pass


def merge(base: Mapping[str, PluginRegistration], extra: Mapping[str, PluginRegistration]) -> Registry:
    """``base`` plus ``extra``; a name in both is an error unless the base entry is only planned."""
    merged = dict(base)
    for name, registration in extra.items():
        existing = merged.get(name)
        if existing is not None and existing.implemented:
            raise RegistryError(f"a plugin named {name!r} already exists")
        merged[name] = registration
    return merged


ENTRY_POINT_GROUP = "kubesched.plugins"


def with_entry_points(base: Mapping[str, PluginRegistration]) -> Registry:
    """``base`` merged with every registry published under the ``kubesched.plugins`` entry-point group."""
    registry = dict(base)
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            provider = entry_point.load()
            registry = merge(registry, provider())
        except Exception as exc:  # a broken third-party package must not stop the scheduler
            log.warning("skipping plugin entry point %s: %s", entry_point.name, exc)
    return registry
