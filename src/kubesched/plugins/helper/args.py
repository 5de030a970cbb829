"""The factory's second validation: defaults when no args were given, then every error.

Called by every plugin constructor that takes args; the config loader validated them already, but a
plugin can also be built directly (tests, out-of-tree wiring), and must not run on invalid args
(docs/explanation/design.md#typed-defaulted-validated-plugin-args).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from kubesched.errors import FieldError, ValidationFailed


class _Args(Protocol):
    def validate(self, path: str) -> list[FieldError]: ...


A = TypeVar("A", bound=_Args)


def validated(args: A | None, args_type: type[A]) -> A:
    resolved = args if args is not None else args_type()
    errors = resolved.validate("")
    if errors:
        raise ValidationFailed(args_type.__name__, errors)
    return resolved
