"""Typed access to the objects a queueing hint receives.

Who calls it: every plugin's queueing-hint functions. Upstream's ``util.As`` fails when an object has the
wrong type and the hint then answers Queue; these helpers raise :class:`TypeError`, which the hint turns
into ``QueueingHint.QUEUE`` (the queue would do the same with any exception).
"""

from __future__ import annotations

from kubesched.api.objects import Node, Pod


def as_nodes(old: object, new: object) -> tuple[Node | None, Node | None]:
    if old is not None and not isinstance(old, Node):
        raise TypeError(f"expected a Node as the old object, got {type(old).__name__}")
    if new is not None and not isinstance(new, Node):
        raise TypeError(f"expected a Node as the new object, got {type(new).__name__}")
    return old, new


def as_pods(old: object, new: object) -> tuple[Pod | None, Pod | None]:
    if old is not None and not isinstance(old, Pod):
        raise TypeError(f"expected a Pod as the old object, got {type(old).__name__}")
    if new is not None and not isinstance(new, Pod):
        raise TypeError(f"expected a Pod as the new object, got {type(new).__name__}")
    return old, new
