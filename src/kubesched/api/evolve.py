"""A copy of an API object with some fields changed: ``dataclasses.replace`` without its generic cost.

``dataclasses.replace`` walks the class's fields and calls ``__init__`` with every one of them, a cost
paid on the hot path each time a pod is assumed on a node (:meth:`kubesched.framework.types.PodInfo.with_node`)
and each time the simulated cluster binds one. For the API's slotted dataclasses without ``__post_init__`` and
without ``init=False`` fields, copying the slots gives the same object; :func:`evolve` does that, with a copier
written out per class (one statement per field), and falls back to ``dataclasses.replace`` for any other class. A
unit test holds the two equal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

D = TypeVar("D")

# Per class: its field names and a function copying every field into a new instance, or None when the class needs
# replace().
_PLANS: dict[type, tuple[frozenset[str], Callable[[Any], Any]] | None] = {}

_set = object.__setattr__


def _plan(cls: type) -> tuple[frozenset[str], Callable[[Any], Any]] | None:
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return None
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    # Slots must hold exactly the fields (no __dict__ whose extra entries a copy would drop), and every field
    # must be an __init__ argument (replace() resets an init=False field to its default; a copy would not).
    slots = getattr(cls, "__slots__", None)
    if slots is None or len(names) < 2 or set(slots) != set(names) or any(not f.init for f in fields):
        return None
    return frozenset(names), slot_copier(cls, names, frozen=True)


def slot_copier(cls: type[D], names: tuple[str, ...], *, frozen: bool) -> Callable[[D], D]:
    """A function copying the attributes ``names`` of a ``cls`` instance into a new one (made without
    ``__init__``), written out one statement per attribute, as dataclasses writes ``__init__``: a loop over them
    costs about half again as much, and the objects copied on the hot path have a dozen or twenty. ``frozen``:
    set through ``object.__setattr__``. The names are the class's own field or slot names, so identifiers. Who
    calls it: :func:`evolve`, and :class:`~kubesched.framework.types.PodInfo` (copied twice per pod)."""
    if frozen:
        assignments = [f"    set_(clone, {name!r}, obj.{name})" for name in names]
    else:
        assignments = [f"    clone.{name} = obj.{name}" for name in names]
    lines = ["def copy(obj):", "    clone = new(cls)", *assignments, "    return clone"]
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls, "set_": _set}
    exec("\n".join(lines), namespace)  # code made from the class's own names only
    copy: Callable[[D], D] = namespace["copy"]
    return copy


def evolve(obj: D, **changes: Any) -> D:
    """``dataclasses.replace(obj, **changes)``, the same object made faster for slotted API dataclasses."""
    cls = type(obj)
    try:
        plan = _PLANS[cls]
    except KeyError:
        plan = _PLANS[cls] = _plan(cls)
    if plan is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    names, copy = plan
    for name in changes:
        if name not in names:
            # replace() names the offending argument in its TypeError; let it.
            return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    clone: D = copy(obj)
    for name, value in changes.items():
        _set(clone, name, value)
    return clone
