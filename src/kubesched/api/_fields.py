"""Typed reads of fields from decoded JSON/YAML, each failure a :class:`ManifestError` with its field path.

Used only by :mod:`kubesched.api.objects` (and :mod:`kubesched.api.manifests`), so that every object's
``from_dict`` reports problems as ``<where>: <field path>: <problem>`` and never leaks a KeyError/TypeError.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from kubesched.errors import FieldError, ManifestError

from .quantity import QuantityError, to_canonical


def type_name(value: object) -> str:
    """The YAML/JSON word for a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, _dt.datetime):
        return "timestamp"
    if isinstance(value, _dt.date):
        return "date"
    return type(value).__name__


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def fail(where: str, path: str, problem: str) -> NoReturn:
    raise ManifestError(f"{where}: {path}: {problem}" if path else f"{where}: {problem}")


def reject(where: str, error: FieldError) -> NoReturn:
    """Report a Kubernetes-style field error (it carries its own path)."""
    raise ManifestError(f"{where}: {error}")


def invalid(where: str, path: str, value: object, detail: str) -> NoReturn:
    reject(where, FieldError.invalid(path, value, detail))


def unsupported(where: str, path: str, value: object, supported: Sequence[str]) -> NoReturn:
    reject(where, FieldError.unsupported(path, value, supported))


def wrong_type(where: str, path: str, expected: str, got: object) -> NoReturn:
    fail(where, path, f"expected {expected}, got {type_name(got)}")


def mapping(obj: Mapping[str, Any], key: str, where: str, path: str) -> Mapping[str, Any]:
    """A nested object; absent or null reads as empty."""
    raw = obj.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        wrong_type(where, join(path, key), "a mapping", raw)
    return raw


def sequence(obj: Mapping[str, Any], key: str, where: str, path: str) -> list[Any]:
    """A list; absent or null reads as empty."""
    raw = obj.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        wrong_type(where, join(path, key), "a list", raw)
    return raw


def item_mapping(raw: object, where: str, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        wrong_type(where, path, "a mapping", raw)
    return raw


def string(obj: Mapping[str, Any], key: str, where: str, path: str, default: str = "") -> str:
    raw = obj.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        wrong_type(where, join(path, key), "a string", raw)
    return raw


def required_string(obj: Mapping[str, Any], key: str, where: str, path: str) -> str:
    text = string(obj, key, where, path)
    if not text:
        reject(where, FieldError.required(join(path, key)))
    return text


def optional_string(obj: Mapping[str, Any], key: str, where: str, path: str) -> str | None:
    if obj.get(key) is None:
        return None
    return string(obj, key, where, path)


def integer(obj: Mapping[str, Any], key: str, where: str, path: str, default: int = 0) -> int:
    raw = obj.get(key)
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        wrong_type(where, join(path, key), "an integer", raw)
    return int(raw)


def optional_integer(obj: Mapping[str, Any], key: str, where: str, path: str) -> int | None:
    if obj.get(key) is None:
        return None
    return integer(obj, key, where, path)


def boolean(obj: Mapping[str, Any], key: str, where: str, path: str) -> bool:
    raw = obj.get(key)
    if raw is None:
        return False
    if not isinstance(raw, bool):
        wrong_type(where, join(path, key), "a boolean", raw)
    return raw


def string_list(obj: Mapping[str, Any], key: str, where: str, path: str) -> list[str]:
    """A list of strings (selector values, access modes, topology keys); absent or null reads as empty."""
    here = join(path, key)
    items = sequence(obj, key, where, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            wrong_type(where, f"{here}[{i}]", "a string", item)
    return items


def string_map(obj: Mapping[str, Any], key: str, where: str, path: str) -> dict[str, str]:
    """labels, annotations, nodeSelector: string keys to string values (YAML `true`/`1` are not strings)."""
    here = join(path, key)
    result: dict[str, str] = {}
    for k, v in mapping(obj, key, where, path).items():
        if not isinstance(k, str):
            wrong_type(where, here, "string keys", k)
        if not isinstance(v, str):
            wrong_type(where, f"{here}.{k}", "a string", v)
        result[k] = v
    return result


def int_or_string(obj: Mapping[str, Any], key: str, where: str, path: str) -> int | str | None:
    raw = obj.get(key)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        wrong_type(where, join(path, key), "an integer or a string", raw)
    return raw if isinstance(raw, str) else int(raw)


def resource_list(obj: Mapping[str, Any], key: str, where: str, path: str) -> dict[str, int]:
    """A ResourceList as canonical integers (see :func:`to_canonical`); negative amounts are invalid."""
    here = join(path, key)
    result: dict[str, int] = {}
    for name, raw in mapping(obj, key, where, path).items():
        if not isinstance(name, str) or not name:
            wrong_type(where, here, "resource names", name)
        field = f"{here}.{name}"
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            wrong_type(where, field, "a quantity (string or number)", raw)
        try:
            amount = to_canonical(name, raw)
        except QuantityError as exc:
            fail(where, field, f"invalid quantity {_quoted(raw)}: {exc}")
        if amount < 0:
            invalid(where, field, _shown(raw), "must be greater than or equal to 0")
        result[name] = amount
    return result


def timestamp(obj: Mapping[str, Any], key: str, where: str, path: str) -> float | None:
    """An RFC 3339 time as epoch seconds; YAML loaders hand us datetimes already, JSON gives strings."""
    raw = obj.get(key)
    if raw is None:
        return None
    if isinstance(raw, _dt.datetime):
        moment = raw
    elif isinstance(raw, str):
        try:
            moment = _dt.datetime.fromisoformat(raw)
        except ValueError:
            invalid(where, join(path, key), raw, "expected an RFC 3339 timestamp")
    else:
        wrong_type(where, join(path, key), "an RFC 3339 timestamp", raw)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()


def _shown(raw: object) -> object:
    return raw if isinstance(raw, str) else str(raw)


def _quoted(raw: object) -> str:
    return f'"{raw}"' if isinstance(raw, str) else str(raw)
