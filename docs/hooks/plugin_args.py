"""MkDocs hook: every in-tree plugin's args, generated from its typed ``<Plugin>Args`` dataclass.

A page that holds the line ``<!-- generated: plugin-args -->`` gets, in its place, one section per plugin
that takes args: each field under the name a configuration file gives it, its type and its default (the
dataclass's defaults, which are kube-scheduler's for upstream plugins). The prose around the marker explains
what the fields mean; the names, types and defaults come from the code, so they cannot drift from it.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

MARKER = "<!-- generated: plugin-args -->"


def _is_dataclass_type(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return hint


def type_name(hint: Any) -> str:
    """A reader's name for a field's type: ``list of string``, ``one of LeastAllocated, MostAllocated``."""
    hint = _strip_optional(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool:
        return "boolean"
    if hint is int:
        return "integer"
    if hint is float:
        return "number"
    if hint is str:
        return "string"
    if hint is Any or hint is object:
        return "any"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{value}`" for value in args)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(f"`{member.value}`" for member in hint)
    if _is_dataclass_type(hint):
        return "object"
    if origin in (list, tuple, Sequence, frozenset, set):
        return "list of " + type_name(args[0]) if args else "list"
    if origin in (dict, Mapping):
        return "map of string to " + type_name(args[1]) if len(args) == 2 else "map"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in args if arg is not type(None))
    return getattr(hint, "__name__", str(hint))


def _value(value: object) -> str:
    if value is None:
        return "unset"
    return "`" + json.dumps(value, sort_keys=False) + "`"


def fields(
    args_type: type, prefix: str = "", defaults: Mapping[str, Any] | None = None
) -> Iterator[tuple[str, str, str]]:
    """``(name in a file, type, default)`` of every field, nested dataclasses flattened with dots."""
    from kubesched.config.args_decode import encode_args, json_name

    if defaults is None:
        defaults = encode_args(args_type())
    hints = typing.get_type_hints(args_type)
    for field in dataclasses.fields(args_type):
        name = json_name(field)
        hint = _strip_optional(hints[field.name])
        default = defaults.get(name)
        if _is_dataclass_type(hint):
            yield f"{prefix}{name}", "object", ""
            yield from fields(hint, f"{prefix}{name}.", default if isinstance(default, Mapping) else {})
            continue
        element = typing.get_args(hint)[0] if typing.get_origin(hint) in (list, tuple, Sequence) else None
        shown = _value(default) if name in defaults or not prefix else ""  # a nested field of an unset object
        yield f"{prefix}{name}", type_name(hint), shown
        if element is not None and _is_dataclass_type(element):
            for sub_name, sub_type, _ in fields(element, f"{prefix}{name}[].", {}):
                yield sub_name, sub_type, ""


def render() -> str:
    from kubesched.plugins.registry import in_tree_registry

    lines: list[str] = []
    for name, registration in sorted(in_tree_registry().items()):
        if registration.args_type is None:
            continue
        args_type = registration.args_type
        lines += [f"### {name} {{#{name.lower()}-args}}", "", f"`{args_type.__name__}`.", ""]
        lines += ["| field | type | default |", "|---|---|---|"]
        lines += [f"| `{field}` | {kind} | {default} |" for field, kind, default in fields(args_type)]
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
