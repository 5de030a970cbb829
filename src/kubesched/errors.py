"""Errors shared by every layer: field-path validation errors and the user-facing error tree.

Config validation, plugin-args validation and manifest loading all report problems as
:class:`FieldError` values, formatted exactly like Kubernetes' ``field.Error`` so that messages read
the way kube-scheduler's do (``profiles[0].plugins.score.enabled[1].name: Invalid value: "Foo": ...``).
The CLI catches :class:`KubeschedError` subclasses and prints them as one-line errors (exit code 1).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


class ErrorType(enum.Enum):
    """The kinds of field error Kubernetes uses, with the phrase it prints for each."""

    INVALID = "Invalid value"
    REQUIRED = "Required value"
    UNSUPPORTED = "Unsupported value"
    DUPLICATE = "Duplicate value"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "Not found"
    TOO_MANY = "Too many"


_NO_VALUE = object()


def _render_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, default=str, sort_keys=True)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field path; ``str()`` gives Kubernetes' wording."""

    path: str
    type: ErrorType
    value: object = _NO_VALUE
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: {self.type.value}" if self.path else self.type.value
        if self.type in (ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_MANY):
            return f"{text}: {self.detail}" if self.detail else text
        if self.value is not _NO_VALUE:
            text = f"{text}: {_render_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    @staticmethod
    def invalid(path: str, value: object, detail: str) -> FieldError:
        return FieldError(path, ErrorType.INVALID, value, detail)

    @staticmethod
    def required(path: str, detail: str = "") -> FieldError:
        return FieldError(path, ErrorType.REQUIRED, detail=detail)

    @staticmethod
    def unsupported(path: str, value: object, supported: Sequence[str]) -> FieldError:
        listed = ", ".join(json.dumps(s) for s in supported)
        return FieldError(path, ErrorType.UNSUPPORTED, value, f"supported values: {listed}")

    @staticmethod
    def duplicate(path: str, value: object) -> FieldError:
        return FieldError(path, ErrorType.DUPLICATE, value)

    @staticmethod
    def forbidden(path: str, detail: str) -> FieldError:
        return FieldError(path, ErrorType.FORBIDDEN, detail=detail)

    @staticmethod
    def not_found(path: str, value: object) -> FieldError:
        return FieldError(path, ErrorType.NOT_FOUND, value)


def json_type_phrase(value: object) -> str:
    """What a decoded JSON value is, for messages: "null", "a boolean", "a number", "a string", "an array",
    "an object" (used where a document from outside — a policy result, an audit record — has a wrong type)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple | set | frozenset):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


class KubeschedError(Exception):
    """Base of every error the CLI reports as a clean one-line message (exit code 1)."""


class ValidationFailed(KubeschedError):
    """A document (config file, plugin args) failed validation; holds every error, not only the first."""

    def __init__(self, source: str, errors: Iterable[FieldError | str]) -> None:
        self.source = source
        self.errors: list[str] = [str(e) for e in errors]
        prefix = f"{source}: " if source else ""
        super().__init__("\n".join(prefix + e for e in self.errors))


class ManifestError(KubeschedError):
    """A Kubernetes manifest could not be read: names the file, the object and the field."""
