"""Status codes and the Status value plugins return on rejection.

Plugins return ``None`` for success; a :class:`Status` is built only when a plugin rejects or fails,
from constant reason strings. The runtime attaches the plugin name. Every code's docstring says what
the scheduling queue does with a pod that ends its cycle with it (kube-scheduler's ``framework.Code``).
"""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """Framework status codes; the numeric order is kube-scheduler's and part of the API."""

    SUCCESS = 0
    """The plugin ran fine and the pod fits / is allowed. ``None`` means the same."""
    ERROR = 1
    """Unexpected failure: the cycle aborts and the pod is retried through the error backoff,
    whatever cluster events happen (condition reason ``SchedulerError``)."""
    UNSCHEDULABLE = 2
    """Expected rejection that preemption may fix; the pod waits for a relevant cluster event, then backoff."""
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """Rejection preemption cannot fix (e.g. a node selector mismatch); queued like UNSCHEDULABLE."""
    WAIT = 4
    """Only from Permit: hold the pod as a waiting pod until allowed, rejected or timed out."""
    SKIP = 5
    """From PreFilter/PreScore: skip this plugin's Filter/Score for this cycle; from Bind: not mine."""
    PENDING = 6
    """Decision is fine but an external component must act first: on a matching event the pod goes
    straight to activeQ, without backoff."""


REJECTED_CODES = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})

CODE_NAMES: dict[Code, str] = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}
"""kube-scheduler's names of the codes (``Code.String()``): metric labels, reports and explanations."""


class Status:
    """A non-success outcome: code, reasons, the plugin that produced it and an optional cause."""

    __slots__ = ("cause", "code", "plugin", "reasons")

    def __init__(
        self,
        code: Code,
        *reasons: str,
        plugin: str = "",
        cause: BaseException | None = None,
    ) -> None:
        self.code = code
        self.reasons: tuple[str, ...] = reasons
        self.plugin = plugin
        self.cause = cause

    @classmethod
    def error(cls, message: str | BaseException, *, plugin: str = "") -> Status:
        if isinstance(message, BaseException):
            return cls(Code.ERROR, str(message), plugin=plugin, cause=message)
        return cls(Code.ERROR, message, plugin=plugin)

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, *reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def is_rejected(self) -> bool:
        return self.code in REJECTED_CODES

    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    def is_wait(self) -> bool:
        return self.code is Code.WAIT

    def with_plugin(self, plugin: str) -> Status:
        """The same outcome attributed to ``plugin`` (statuses are shared, so copy rather than mutate)."""
        if self.plugin == plugin:
            return self
        return Status(self.code, *self.reasons, plugin=plugin, cause=self.cause)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    def __hash__(self) -> int:
        return hash((self.code, self.reasons, self.plugin))

    def __repr__(self) -> str:
        plugin = f", plugin={self.plugin!r}" if self.plugin else ""
        return f"Status({self.code.name}, {list(self.reasons)!r}{plugin})"


def is_success(status: Status | None) -> bool:
    return status is None or status.code is Code.SUCCESS


def is_rejected(status: Status | None) -> bool:
    return status is not None and status.code in REJECTED_CODES
