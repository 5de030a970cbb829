"""Generic decoding of ``pluginConfig[].args`` into a plugin's typed ``<Name>Args`` dataclass.

Called by the loader for every ``pluginConfig`` entry (and with ``raw=None`` for enabled plugins that
have no entry, which yields kube-scheduler's defaults); plugin factories and tests may call it too.
Plugin authors write only the dataclass: ``@dataclass(frozen=True, slots=True, kw_only=True)``, snake_case
fields that all have defaults (those defaults ARE kube-scheduler's), and ``validate(self, path) ->
list[FieldError]`` reporting every problem. This module supplies the rest:

- camelCase keys map to snake_case fields (``ignoredResourceGroups`` -> ``ignored_resource_groups``);
  a field may override its file name with ``field(metadata={"json": "apiURL"})``; a field holding a file path
  or a list of them says so with ``field(metadata={"path": True})``, and a relative value is then read relative
  to the configuration file (:mod:`kubesched.config.relative_paths`);
- field types understood: ``int``, ``float``, ``bool``, ``str``, ``Literal[...]``, ``Enum`` subclasses
  (by value), nested dataclasses, ``list[T]`` / ``tuple[T, ...]`` / ``Sequence[T]``, ``frozenset[T]``,
  ``dict[str, T]`` / ``Mapping[str, T]``, ``T | None``, unions, ``Any``;
- a key given as ``null`` means "not set": the field keeps its default (kube's pointer semantics);
- an unknown key is an error (``unknown field "foo"``, like kube's strict decoder); so is a wrong type
  (``Invalid value: "x": must be of type integer``); ``apiVersion`` (must be
  ``kubescheduler.config.k8s.io/v1``) and ``kind`` (must be ``<PluginName>Args``, else
  ``has to match plugin args``) are accepted at the top level;
- defaulting that depends on other fields (kube's ``SetDefaults_*``, e.g. a resource weight of 0 becoming
  1) belongs in the dataclass's ``__post_init__`` (``object.__setattr__`` on a frozen instance);
- ``ValueError``/``TypeError`` raised by the constructor become an Invalid-value error at ``path``.

:func:`encode_args` is the inverse (camelCase dict, ``None`` fields omitted), used by ``dump_config``.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, Union

from kubesched.errors import ErrorType, FieldError

from .defaults import API_VERSION

T = TypeVar("T")

_INVALID: Any = object()
"""Sentinel: the value could not be decoded (errors already recorded)."""


def snake_to_camel(name: str) -> str:
    """``ignored_resource_groups`` -> ``ignoredResourceGroups``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def json_name(f: dataclasses.Field[Any]) -> str:
    """The key a dataclass field has in a config file."""
    override = f.metadata.get("json")
    return override if isinstance(override, str) else snake_to_camel(f.name)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def unknown_field(path: str, key: str, known: Sequence[str]) -> FieldError:
    """``<path>.<key>: Invalid value: unknown field "<key>"`` (+ a did-you-mean when one name is close)."""
    detail = f'unknown field "{key}"'
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    if close:
        detail += f' (did you mean "{close[0]}"?)'
    return FieldError(_join(path, key), ErrorType.INVALID, detail=detail)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is bool:
        return "boolean"
    if tp is int:
        return "integer"
    if tp is float:
        return "number"
    if tp is str:
        return "string"
    if dataclasses.is_dataclass(tp) or origin in (dict, Mapping) or tp in (dict,):
        return "object"
    if origin in (list, tuple, Sequence, frozenset, set) or tp in (list, tuple):
        return "array"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "string"
    return getattr(tp, "__name__", str(tp))


def _wrong_type(path: str, raw: object, expected: str, errors: list[FieldError]) -> Any:
    errors.append(FieldError.invalid(path, raw, f"must be of type {expected}"))
    return _INVALID


_HINTS_CACHE: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS_CACHE.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS_CACHE[cls] = hints
    return hints


def _decode_dataclass(
    cls: type[Any],
    raw: Mapping[Any, Any],
    path: str,
    errors: list[FieldError],
    skip_keys: frozenset[str] = frozenset(),
) -> Any:
    hints = _hints(cls)
    fields = {json_name(f): f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    attempted: set[str] = set()
    before = len(errors)
    for key, value in raw.items():
        if not isinstance(key, str):
            errors.append(FieldError.invalid(path, key, "field names must be strings"))
            continue
        if key in skip_keys:
            continue
        f = fields.get(key)
        if f is None:
            errors.append(unknown_field(path, key, list(fields)))
            continue
        if value is None:
            continue
        attempted.add(f.name)
        decoded = _decode_value(hints[f.name], value, _join(path, key), errors)
        if decoded is not _INVALID:
            kwargs[f.name] = decoded
    for key, f in fields.items():
        if f.name not in attempted and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            errors.append(FieldError.required(_join(path, key)))
    if len(errors) != before:
        return _INVALID
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        errors.append(FieldError.invalid(path, dict(raw), str(exc)))
        return _INVALID


def _decode_value(tp: Any, raw: object, path: str, errors: list[FieldError]) -> Any:
    if tp is Any or tp is object:
        return raw
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)

    if origin is Union or origin is types.UnionType:
        if raw is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _decode_value(options[0], raw, path, errors)
        for option in options:
            trial: list[FieldError] = []
            value = _decode_value(option, raw, path, trial)
            if value is not _INVALID and not trial:
                return value
        return _wrong_type(path, raw, " or ".join(_type_name(o) for o in options), errors)

    if origin is Literal:
        for allowed in args:
            if raw == allowed and type(raw) is type(allowed):
                return allowed
        errors.append(FieldError.unsupported(path, raw, [str(a) for a in args]))
        return _INVALID

    if tp is bool:
        return raw if isinstance(raw, bool) else _wrong_type(path, raw, "boolean", errors)
    if tp is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        return _wrong_type(path, raw, "integer", errors)
    if tp is float:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        return _wrong_type(path, raw, "number", errors)
    if tp is str:
        return raw if isinstance(raw, str) else _wrong_type(path, raw, "string", errors)

    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if member.value == raw and type(member.value) is type(raw):
                return member
        errors.append(FieldError.unsupported(path, raw, [str(m.value) for m in tp]))
        return _INVALID

    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(raw, Mapping):
            return _wrong_type(path, raw, "object", errors)
        return _decode_dataclass(tp, raw, path, errors)

    if origin in (list, tuple, Sequence, frozenset, set) or tp in (list, tuple):
        if not isinstance(raw, list):
            return _wrong_type(path, raw, "array", errors)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(raw) != len(args):
                errors.append(FieldError.invalid(path, raw, f"must have exactly {len(args)} items"))
                return _INVALID
            item_types: list[Any] = list(args)
        else:
            item_type = args[0] if args else Any
            item_types = [item_type] * len(raw)
        before = len(errors)
        items = [
            _decode_value(t, v, f"{path}[{i}]", errors) for i, (t, v) in enumerate(zip(item_types, raw, strict=True))
        ]
        if len(errors) != before:
            return _INVALID
        if origin is list or tp is list:
            return items
        if origin in (frozenset, set):
            return frozenset(items)
        return tuple(items)

    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(raw, Mapping):
            return _wrong_type(path, raw, "object", errors)
        key_type = args[0] if args else Any
        value_type = args[1] if len(args) > 1 else Any
        before = len(errors)
        out: dict[Any, Any] = {}
        for k, v in raw.items():
            dk = _decode_value(key_type, k, f"{path}[{k}]", errors)
            dv = _decode_value(value_type, v, f"{path}[{k}]", errors)
            out[dk] = dv
        return _INVALID if len(errors) != before else out

    raise TypeError(f"kubesched.config cannot decode args field type {tp!r} (at {path})")


def decode_args(
    args_type: type[T],
    raw: Mapping[str, Any] | None,
    path: str,
    *,
    kind: str | None = None,
) -> tuple[T | None, list[FieldError]]:
    """Decode ``raw`` (a ``pluginConfig[].args`` mapping, or ``None`` for defaults) into ``args_type``,
    then run its ``validate(path)``.

    ``kind`` is the expected ``kind`` value (default: the class name, ``<PluginName>Args``).
    Returns ``(args, [])`` on success and ``(None, errors)`` with every problem otherwise.
    """
    errors: list[FieldError] = []
    expected_kind = kind or args_type.__name__
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        _wrong_type(path, raw, "object", errors)
        return None, errors
    if "kind" in raw and raw["kind"] is not None:
        given = raw["kind"]
        if not isinstance(given, str):
            _wrong_type(_join(path, "kind"), given, "string", errors)
        elif given != expected_kind:
            errors.append(FieldError.invalid(path, given, "has to match plugin args"))
            return None, errors
    if "apiVersion" in raw and raw["apiVersion"] is not None:
        given = raw["apiVersion"]
        if not isinstance(given, str):
            _wrong_type(_join(path, "apiVersion"), given, "string", errors)
        elif given != API_VERSION:
            errors.append(FieldError.unsupported(_join(path, "apiVersion"), given, [API_VERSION]))
    value = _decode_dataclass(args_type, raw, path, errors, skip_keys=frozenset({"apiVersion", "kind"}))
    if errors or value is _INVALID:
        return None, errors
    validate = getattr(value, "validate", None)
    if callable(validate):
        problems = validate(path)
        if problems:
            return None, list(problems)
    return typing.cast(T, value), []


def _encode_value(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode_args(value)
    if isinstance(value, enum.Enum):
        return _encode_value(value.value)
    if isinstance(value, list | tuple):
        return [_encode_value(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted((_encode_value(v) for v in value), key=repr)
    if isinstance(value, Mapping):
        return {k: _encode_value(v) for k, v in value.items()}
    return value


def encode_args(args: object) -> dict[str, Any]:
    """The camelCase mapping for an args dataclass (``None`` fields left out), as a file would hold it."""
    if not dataclasses.is_dataclass(args) or isinstance(args, type):
        raise TypeError(f"encode_args needs a dataclass instance, got {type(args).__name__}")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        if value is None:
            continue
        out[json_name(f)] = _encode_value(value)
    return out
