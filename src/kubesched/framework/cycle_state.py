"""Per-attempt key/value store shared by the plugins of one scheduling context.

PreFilter and PreScore write; Filter and Score only read (compute once, read many). The state lives on
into the binding cycle. ``clone()`` is used when filtering with nominated pods, so values that
AddPod/RemovePod mutate must deep-copy themselves in their own ``clone``.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable


@runtime_checkable
class StateData(Protocol):
    """A cycle-state value; immutable values may return ``self``."""

    def clone(self) -> StateData: ...


T = TypeVar("T")


class StateNotFoundError(KeyError):
    """Raised by :meth:`CycleState.read` for a key nobody wrote this cycle."""


class CycleState:
    """Cycle-scoped storage plus the framework's own skip sets."""

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, object] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str) -> object:
        try:
            return self._data[key]
        except KeyError:
            raise StateNotFoundError(f"{key!r} not found") from None

    def get(self, key: str, kind: type[T]) -> T | None:
        """The value under ``key`` if it is a ``kind``, else ``None`` (plugins recompute then)."""
        value = self._data.get(key)
        return value if isinstance(value, kind) else None

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        copy = CycleState()
        data: dict[str, object] = {}
        for key, value in self._data.items():
            # What isinstance(value, StateData) decides, without the runtime Protocol check, which is slow
            # for every value; preemption's dry run clones the state for every node it tries.
            clone = getattr(value, "clone", None)
            data[key] = clone() if clone is not None else value
        copy._data = data
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        return copy


def no_writes(state: CycleState) -> None:
    """The writes of a PreFilter or PreScore Skip that writes nothing (``SkipWrites`` in
    :mod:`kubesched.framework.interface`): plugins answer ``pre_filter_skip`` / ``pre_score_skip`` with it."""
    del state
