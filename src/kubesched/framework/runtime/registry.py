"""The plugin registry: plugin name → how to build it, which points it serves, its args type.

One explicit dict (``kubesched.plugins.registry.in_tree_registry``) holds the in-tree plugins; out-of-tree
plugins join through the ``kubesched.plugins`` entry-point group or through :func:`merge`. Nothing registers
itself by being imported. The registry doubles as the config loader's plugin catalog.

An entry point names either a plugin class, registered under its string ``name`` attribute, or a function
returning registrations (one :class:`PluginRegistration`, a list of them, or a dict of name to registration).
:func:`with_entry_points` (called by every CLI command through ``kubesched.cli.common.plugin_registry``, and
by the benchmark runner) skips an entry point that is broken with one warning line naming it.
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

_ACCEPTED = "a plugin class with a string `name`, or a function returning plugin registrations"


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line: a warning about a third-party package must not look like a traceback."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _as_registry(returned: object) -> Registry:
    if isinstance(returned, PluginRegistration):
        return {returned.name: returned}
    if isinstance(returned, Mapping):
        items = list(returned.items())
    elif isinstance(returned, Iterable) and not isinstance(returned, str | bytes):
        items = [(getattr(item, "name", None), item) for item in returned]
    else:
        raise RegistryError(f"it returned {type(returned).__name__}, not plugin registrations")
    registry: Registry = {}
    for name, registration in items:
        if not isinstance(registration, PluginRegistration):
            raise RegistryError(
                f"it returned {type(registration).__name__} among its registrations, not a PluginRegistration"
            )
        if name != registration.name:
            # The config names the key, the framework builds under the registration's name: they must agree.
            raise RegistryError(f"it registered {registration.name!r} under the name {name!r}")
        registry[name] = registration
    return registry


def registrations_of(provided: object) -> Registry:
    """What one entry point's object contributes (module doc); :class:`RegistryError` says why it contributes
    nothing. A function is called here, once; whatever it raises is reported the same way."""
    if isinstance(provided, type):
        name = getattr(provided, "name", None)
        # A class's ``name`` property (in-tree plugins have one) is no name until an instance exists.
        if not isinstance(name, str) or not name:
            raise RegistryError(f"class {provided.__qualname__} has no string `name` attribute (its plugin name)")
        return {name: PluginRegistration.of(name, provided)}
    if not callable(provided):
        raise RegistryError(f"it is {type(provided).__name__}, not {_ACCEPTED}")
    try:
        returned = provided()
    except Exception as exc:
        raise RegistryError(f"calling it raised {_one_line(exc)}") from exc
    return _as_registry(returned)


def with_entry_points(base: Mapping[str, PluginRegistration]) -> Registry:
    """``base`` merged with every plugin published under the ``kubesched.plugins`` entry-point group.

    A broken entry point (it does not import, names something else, or its plugin's name is taken) is skipped
    with one warning naming it, ``name (module:attr)``: a broken third-party package must not stop the
    scheduler, nor bury the reason in a traceback."""
    registry = dict(base)
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"plugin entry point {entry_point.name!r} ({entry_point.value})"
        try:
            provided = entry_point.load()
        except (Exception, SystemExit) as exc:  # SystemExit too: a module that exits on import stops nothing
            log.warning("skipping %s: cannot import it: %s", where, _one_line(exc))
            continue
        try:
            registry = merge(registry, registrations_of(provided))
        except RegistryError as exc:
            log.warning("skipping %s: %s", where, exc)
    return registry
