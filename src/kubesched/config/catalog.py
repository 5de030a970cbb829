"""What the config layer needs to know about plugins: their names, points, args types, readiness.

The config loader never imports plugins. Whoever builds the scheduler (the runtime that builds one
framework per profile, the CLI's ``config validate``) passes a :data:`PluginCatalog` — a mapping from
plugin name to a :class:`PluginDescriptor` — and the loader uses it to expand ``multiPoint``, to reject
a plugin configured at a point it does not implement, to decode each plugin's args into its typed
``<Name>Args`` dataclass, and to skip default plugins that are not built yet.

Extension points are named as in the config file (``preFilter``, not ``PreFilterPlugin``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

EXTENSION_POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
"""The twelve concrete extension points, in the order the v1 ``Plugins`` type lists them."""

MULTI_POINT = "multiPoint"
"""The config-only plugin set that is expanded into every point a plugin implements."""

PLUGIN_INTERFACES: Mapping[str, str] = {
    "preEnqueue": "PreEnqueuePlugin",
    "queueSort": "QueueSortPlugin",
    "preFilter": "PreFilterPlugin",
    "filter": "FilterPlugin",
    "postFilter": "PostFilterPlugin",
    "preScore": "PreScorePlugin",
    "score": "ScorePlugin",
    "reserve": "ReservePlugin",
    "permit": "PermitPlugin",
    "preBind": "PreBindPlugin",
    "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
}
"""kube-scheduler's Go interface name per point, used verbatim in framework-construction errors."""


class PluginDescriptor(Protocol):
    """One plugin as the config layer sees it (read-only attributes; frozen dataclasses qualify).

    - ``name``: the plugin name used in config files, e.g. ``"NodeResourcesFit"``.
    - ``extension_points``: the config point names it implements, a subset of :data:`EXTENSION_POINTS`.
    - ``args_type``: its frozen ``<Name>Args`` dataclass, or ``None`` when it takes no args.
    - ``implemented``: ``False`` for a plugin of kube-scheduler's default set that is not built yet;
      such a plugin is skipped (with a warning) when it only comes from the defaults and rejected when
      a config names it.
    """

    @property
    def name(self) -> str: ...

    @property
    def extension_points(self) -> frozenset[str]: ...

    @property
    def args_type(self) -> type[Any] | None: ...

    @property
    def implemented(self) -> bool: ...


PluginCatalog = Mapping[str, PluginDescriptor]
"""Plugin name -> descriptor. The key is the name config files use."""
