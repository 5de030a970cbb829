"""One profile, from what the file says to the final plugin lists: merge, expand, check, decode args.

Internal to :mod:`kubesched.config`; the loader calls :func:`build_profile` once per profile. The steps
follow kube-scheduler exactly, in two places of its source:

1. **Merge with the defaults** (``apis/config/v1/default_plugins.go`` ``mergePluginSet``), per plugin set
   including ``multiPoint``: the disabled set is the user's ``disabled`` names plus the defaults' own;
   with ``*`` disabled no default is kept, otherwise every default not disabled is kept in default order
   and, when the user also enables it, replaced *in place* by the user's entry (its weight); the user's
   remaining ``enabled`` entries are appended in their order, duplicates included.
2. **Build the framework** (``framework/runtime/framework.go`` ``updatePluginList`` and
   ``expandMultiPointPlugins``): each point's explicit list must only hold plugins that implement the
   point, each once; then, unless the point disables ``*``, every ``multiPoint`` plugin implementing the
   point and not disabled there is added. Final order: explicit plugins that are also in ``multiPoint``
   (in the point's order), then the other ``multiPoint`` plugins (``multiPoint`` order), then the other
   explicit plugins. Score weights: the first entry of ``score.enabled + multiPoint.enabled`` wins, 0
   becomes 1, and the sum of weight×100 must fit in an int64.

kubesched additions: a plugin missing from the catalog, or marked ``implemented=False``, is an error when
the file names it and is skipped with a warning when it only comes from the default set; errors carry the
field path of the entry that caused them and every one is reported.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubesched.errors import FieldError

from .args_decode import decode_args
from .catalog import EXTENSION_POINTS, MULTI_POINT, PLUGIN_INTERFACES, PluginCatalog
from .defaults import (
    API_VERSION,
    DEFAULT_PLUGINS,
    MAX_NODE_SCORE,
    MAX_TOTAL_SCORE,
    REMOVED_PLUGINS,
    REMOVED_PLUGINS_VERSION,
)
from .document import PLUGIN_SETS, RawPlugin, RawPluginSet, RawProfile, join
from .types import PluginRef, ProfileConfig

UPSTREAM_EXPANSION_ORDER: tuple[str, ...] = (
    "preFilter",
    "filter",
    "postFilter",
    "reserve",
    "preScore",
    "score",
    "preBind",
    "bind",
    "postBind",
    "permit",
    "preEnqueue",
    "queueSort",
)
"""The order kube-scheduler's ``getExtensionPoints`` walks the points (decides which error is first)."""


def default_plugin_sets() -> dict[str, RawPluginSet]:
    """kube-scheduler's default ``Plugins``: everything in ``multiPoint``, the other sets empty."""
    sets = {name: RawPluginSet() for name in PLUGIN_SETS}
    sets[MULTI_POINT].enabled = [RawPlugin(name, weight) for name, weight in DEFAULT_PLUGINS]
    return sets


def merge_plugin_set(default: RawPluginSet, custom: RawPluginSet | None) -> RawPluginSet:
    """``mergePluginSet``: the user's set layered over the default one (see the module docstring)."""
    if custom is None:
        return RawPluginSet(list(default.enabled), list(default.disabled))
    disabled = [RawPlugin(p.name, 0, p.path) for p in custom.disabled]
    disabled += [RawPlugin(p.name, 0, p.path) for p in default.disabled]
    disabled_names = {p.name for p in disabled}
    custom_index = {p.name: (i, p) for i, p in enumerate(custom.enabled)}  # the last occurrence wins
    replaced: set[int] = set()
    enabled: list[RawPlugin] = []
    if "*" not in disabled_names:
        for plugin in default.enabled:
            if plugin.name in disabled_names:
                continue
            hit = custom_index.get(plugin.name)
            if hit is not None:
                replaced.add(hit[0])
                plugin = hit[1]
            enabled.append(plugin)
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return RawPluginSet(enabled, disabled)


def merge_plugins(defaults: Mapping[str, RawPluginSet], custom: Mapping[str, RawPluginSet]) -> dict[str, RawPluginSet]:
    """``mergePlugins`` over every plugin set, ``multiPoint`` included."""
    return {name: merge_plugin_set(defaults.get(name, RawPluginSet()), custom.get(name)) for name in PLUGIN_SETS}


def _name_path(plugin: RawPlugin, fallback: str) -> str:
    return join(plugin.path, "name") if plugin.path else fallback


@dataclass(slots=True)
class Expansion:
    """Final plugin lists per extension point and the framework-construction errors found."""

    plugins: dict[str, list[RawPlugin]]
    errors: list[FieldError] = field(default_factory=list)


def expand_plugins(
    merged: Mapping[str, RawPluginSet],
    implements: Mapping[str, frozenset[str]],
    plugins_path: str,
) -> Expansion:
    """Per-point lists from merged sets: ``updatePluginList`` + ``expandMultiPointPlugins``.

    ``implements`` maps every plugin name present in ``merged`` to the points it implements.
    """
    result = Expansion(plugins={})
    reported_multipoint: set[int] = set()
    multi = merged[MULTI_POINT].enabled
    for point in UPSTREAM_EXPANSION_ORDER:
        kind = PLUGIN_INTERFACES[point]
        explicit: list[RawPlugin] = []
        seen: set[str] = set()
        for plugin in merged[point].enabled:
            where = _name_path(plugin, join(plugins_path, point))
            if point not in implements[plugin.name]:
                result.errors.append(
                    FieldError.invalid(where, plugin.name, f'plugin "{plugin.name}" does not extend {kind} plugin')
                )
                continue
            if plugin.name in seen:
                result.errors.append(
                    FieldError.invalid(where, plugin.name, f'plugin "{plugin.name}" already registered as "{kind}"')
                )
                continue
            seen.add(plugin.name)
            explicit.append(plugin)
        disabled = {p.name for p in merged[point].disabled}
        if "*" in disabled:
            result.plugins[point] = explicit
            continue
        overrides: set[str] = set()
        from_multi: list[RawPlugin] = []
        from_multi_names: set[str] = set()
        for i, plugin in enumerate(multi):
            if point not in implements[plugin.name] or plugin.name in disabled:
                continue
            if plugin.name in seen:
                overrides.add(plugin.name)
                continue
            if plugin.name in from_multi_names:
                if i not in reported_multipoint:
                    reported_multipoint.add(i)
                    where = _name_path(plugin, join(plugins_path, MULTI_POINT))
                    result.errors.append(
                        FieldError.invalid(where, plugin.name, f'plugin "{plugin.name}" already registered as "{kind}"')
                    )
                continue
            from_multi_names.add(plugin.name)
            from_multi.append(plugin)
        result.plugins[point] = (
            [p for p in explicit if p.name in overrides] + from_multi + [p for p in explicit if p.name not in overrides]
        )
    return result


def resolve_score_weights(
    merged: Mapping[str, RawPluginSet],
    implements: Mapping[str, frozenset[str]],
    plugins_path: str,
    args_weights: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], list[FieldError]]:
    """``getScoreWeights``: score-point weight beats the multiPoint one, 0 -> 1, overflow check.

    ``args_weights`` replaces the 1 for plugins whose args carry their own ``weight`` (ComplianceScore's
    ``weight: 30`` in ``examples/security-config.yaml``): a weight written in the profile's plugin list still wins.
    """
    weights: dict[str, int] = {}
    total = 0
    fallback = args_weights or {}
    for plugin in [*merged["score"].enabled, *merged[MULTI_POINT].enabled]:
        if "score" not in implements[plugin.name] or plugin.name in weights:
            continue
        weight = plugin.weight or fallback.get(plugin.name, 1)
        weights[plugin.name] = weight
        if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
            where = join(plugin.path, "weight") if plugin.path else join(plugins_path, "score")
            return weights, [FieldError.invalid(where, weight, "total score of Score plugins could overflow")]
        total += weight * MAX_NODE_SCORE
    return weights, []


def removed_plugin_error(path: str, name: str) -> FieldError:
    return FieldError.invalid(
        path,
        name,
        f'was invalid in version "{REMOVED_PLUGINS_VERSION}" (KubeSchedulerConfiguration is version "{API_VERSION}")',
    )


@dataclass(slots=True)
class ProfileResult:
    """What :func:`build_profile` found: the profile (when it has no errors), errors, warnings, and
    whether its queueSort can be compared across profiles."""

    profile: ProfileConfig | None
    errors: list[FieldError]
    warnings: list[str]
    queue_sort: tuple[str, ...]
    queue_sort_set: dict[str, list[dict[str, object]]]
    comparable: bool
    plugin_args: dict[str, object]
    explicit_args_paths: dict[str, str]


def _lands_anywhere(name: str, merged: Mapping[str, RawPluginSet], points: Iterable[str] | None) -> bool:
    """Would a default multiPoint plugin be placed at some point (ignoring its readiness)?"""
    if points is None:
        return True
    for point in points:
        if point not in merged:
            continue
        disabled = {p.name for p in merged[point].disabled}
        if "*" not in disabled and name not in disabled:
            return True
    return False


def build_profile(raw: RawProfile, scheduler_name: str, catalog: PluginCatalog) -> ProfileResult:
    """Merge, expand and validate one profile; decode its plugin args (see the module docstring)."""
    errors: list[FieldError] = []
    warnings: list[str] = []
    path = raw.path
    plugins_path = join(path, "plugins")
    label = f"profile {_quote(scheduler_name)}"

    if raw.percentage_of_nodes_to_score is not None and not 0 <= raw.percentage_of_nodes_to_score <= 100:
        errors.append(
            FieldError.invalid(
                join(path, "percentageOfNodesToScore"), raw.percentage_of_nodes_to_score, "not in valid range [0-100]"
            )
        )

    # 1. Every plugin the file names must exist, be built, and not be one kube-scheduler removed.
    reference_errors = False
    for set_name in PLUGIN_SETS:
        rset = raw.plugins.get(set_name)
        for plugin in rset.enabled if rset else ():
            err = _reference_error(plugin.name, plugin.path or plugins_path, catalog)
            if err is not None:
                errors.append(err)
                reference_errors = True

    # 2. Merge with the default set, then drop what cannot run (warning for defaults).
    merged = merge_plugins(default_plugin_sets(), raw.plugins)
    queue_sort_set = _set_as_written(merged["queueSort"])
    warned: set[str] = set()
    skipped: dict[str, list[str]] = {}
    for set_name in PLUGIN_SETS:
        kept: list[RawPlugin] = []
        for plugin in merged[set_name].enabled:
            desc = catalog.get(plugin.name)
            if desc is not None and desc.implemented and plugin.name not in REMOVED_PLUGINS:
                kept.append(plugin)
                continue
            if plugin.path is None and plugin.name not in warned:
                points = desc.extension_points if desc is not None else None
                if set_name != MULTI_POINT or _lands_anywhere(plugin.name, merged, points):
                    warned.add(plugin.name)
                    why = "not implemented yet" if desc is not None else "not in the plugin catalog"
                    skipped.setdefault(why, []).append(plugin.name)
        merged[set_name].enabled = kept
    # One line per reason, not per plugin: a default profile skips several planned plugins at once.
    for why, names in skipped.items():
        warnings.append(f"{label}: default plugins {why}, skipped: {', '.join(names)}")

    implements = {
        plugin.name: frozenset(catalog[plugin.name].extension_points)
        for rset in merged.values()
        for plugin in rset.enabled
    }

    # 3. Framework construction: explicit lists, multiPoint expansion, weights, queueSort/bind counts.
    expansion = expand_plugins(merged, implements, plugins_path)
    errors.extend(expansion.errors)
    weights, weight_errors = resolve_score_weights(merged, implements, plugins_path)
    errors.extend(weight_errors)
    final: dict[str, tuple[PluginRef, ...]] = {}
    for point in EXTENSION_POINTS:
        entries = expansion.plugins[point]
        if point == "score":
            final[point] = tuple(PluginRef(p.name, weights.get(p.name, p.weight or 1)) for p in entries)
        else:
            final[point] = tuple(PluginRef(p.name) for p in entries)
    queue_sort = tuple(p.name for p in final["queueSort"])
    if not reference_errors:
        if len(queue_sort) != 1:
            detail = (
                f"only one queue sort plugin required for profile with scheduler name "
                f"{_quote(scheduler_name)}, but got {len(queue_sort)}"
            )
            if queue_sort:
                errors.append(FieldError.invalid(join(plugins_path, "queueSort"), list(queue_sort), detail))
            else:
                errors.append(FieldError.required(join(plugins_path, "queueSort"), detail))
        if not final["bind"]:
            errors.append(
                FieldError.required(
                    join(plugins_path, "bind"),
                    f"at least one bind plugin is needed for profile with scheduler name {_quote(scheduler_name)}",
                )
            )

    # 4. pluginConfig: one entry per plugin, decoded into its args type; defaults for the rest.
    explicit_args: dict[str, object] = {}
    explicit_paths: dict[str, str] = {}
    for entry in raw.plugin_config:
        if not entry.name:
            continue
        if entry.name in explicit_paths:
            errors.append(FieldError.duplicate(entry.path, entry.name))
            continue
        explicit_paths[entry.name] = entry.path
        err = _reference_error(entry.name, entry.path, catalog)
        if err is not None:
            errors.append(err)
            continue
        desc = catalog[entry.name]
        args_path = join(entry.path, "args")
        if desc.args_type is None:
            if entry.args not in (None, {}):
                errors.append(FieldError.invalid(args_path, entry.args, f"plugin {_quote(entry.name)} takes no args"))
            continue
        args, arg_errors = decode_args(desc.args_type, entry.args, args_path, kind=f"{entry.name}Args")
        errors.extend(arg_errors)
        if args is not None:
            explicit_args[entry.name] = args

    needed = sorted({p.name for rset in merged.values() for p in rset.enabled})
    plugin_args: dict[str, object] = {}
    appended = len(raw.plugin_config)
    for name in needed:
        args_type = catalog[name].args_type
        if args_type is None:
            continue
        if name in explicit_args:
            plugin_args[name] = explicit_args[name]
        elif name not in explicit_paths:
            args, arg_errors = decode_args(
                args_type, None, f"{join(path, 'pluginConfig')}[{appended}].args", kind=f"{name}Args"
            )
            appended += 1
            errors.extend(arg_errors)
            if args is not None:
                plugin_args[name] = args
    for name, entry_path in explicit_paths.items():
        if name in explicit_args and name not in plugin_args:
            # Kept, as kube-scheduler keeps every pluginConfig entry it decoded; no framework uses it.
            plugin_args[name] = explicit_args[name]
            warnings.append(f"{label}: {entry_path} configures plugin {_quote(name)}, which is not enabled; ignored")
    args_weights: dict[str, int] = {}
    for name, args in plugin_args.items():
        weight = getattr(args, "weight", None)
        if isinstance(weight, int) and not isinstance(weight, bool) and weight > 0:
            args_weights[name] = weight
    if args_weights and not errors:
        weights, _ = resolve_score_weights(merged, implements, plugins_path, args_weights)
        final["score"] = tuple(PluginRef(p.name, weights.get(p.name, p.weight or 1)) for p in final["score"])

    profile = None
    if not errors:
        profile = ProfileConfig(
            scheduler_name=scheduler_name,
            percentage_of_nodes_to_score=raw.percentage_of_nodes_to_score,
            plugins=types.MappingProxyType(final),
            plugin_args=types.MappingProxyType(plugin_args),
        )
    return ProfileResult(
        profile=profile,
        errors=errors,
        warnings=warnings,
        queue_sort=queue_sort,
        queue_sort_set=queue_sort_set,
        comparable=not reference_errors,
        plugin_args=plugin_args,
        explicit_args_paths=explicit_paths,
    )


def _set_as_written(rset: RawPluginSet) -> dict[str, list[dict[str, object]]]:
    """A merged plugin set in file form (for comparing and showing it)."""
    out: dict[str, list[dict[str, object]]] = {}
    if rset.enabled:
        out["enabled"] = [{"name": p.name, "weight": p.weight} if p.weight else {"name": p.name} for p in rset.enabled]
    if rset.disabled:
        out["disabled"] = [{"name": p.name} for p in rset.disabled]
    return out


def _reference_error(name: str, path: str, catalog: PluginCatalog) -> FieldError | None:
    """Why a plugin the file names cannot be used, or ``None``. ``path`` is the entry's path; a removed
    plugin is reported at the entry (as kube-scheduler does), the others at its ``name``."""
    if name in REMOVED_PLUGINS:
        return removed_plugin_error(path, name)
    desc = catalog.get(name)
    if desc is None:
        return FieldError.invalid(join(path, "name"), name, "plugin does not exist" + _did_you_mean(name, catalog))
    if not desc.implemented:
        return FieldError.invalid(join(path, "name"), name, "plugin is not implemented yet")
    return None


def _did_you_mean(name: str, catalog: PluginCatalog) -> str:
    """`` (did you mean "NodeResourcesFit"?)`` for a name close to one the catalog has (case aside first)."""
    names = sorted(catalog)
    close = [known for known in names if known.lower() == name.lower()] or difflib.get_close_matches(
        name, names, n=1, cutoff=0.8
    )
    return f" (did you mean {_quote(close[0])}?)" if close else ""


def _quote(text: str) -> str:
    """Go's ``%q`` for the plain names used here."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
