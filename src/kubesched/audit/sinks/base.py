"""The contract every audit sink keeps, and how a sink shares the audit observer's metrics.

The audit observer (:class:`kubesched.audit.builder.AuditObserver`) hands each record to a sink's ``write``
on the scheduler's event loop, at the end of every attempt. ``write`` never blocks: not on the network, not
on the disk. A sink that persists records does so in a writer of its own (the JSON-lines sink's thread, the
webhook's sender task); ``write`` only queues. What that writer later fails to persist it counts as dropped
on the audit metrics (:mod:`kubesched.audit.metrics`) and logs, because the observer has long moved on.
The stdout and Events sinks hand the record on at once (to a buffered stream, to an event recorder that
queues).

``flush`` and ``close`` are for shutdown and tests: ``flush`` may block its caller (a file sink returns
once what was handed in is on disk), so a coroutine awaits ``close`` instead, which drains without
stalling the loop.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kubesched.audit.metrics import AuditMetrics
from kubesched.audit.records import AuditRecord


class AuditSink(Protocol):
    #: The sink's label on the audit metrics (``jsonl``, ``stdout``, ``webhook``, ``events``).
    name: str

    def write(self, record: AuditRecord) -> None:
        """Take one record and return at once; persisting it is the sink's writer's job.

        Raises only when the sink cannot take the record at all (it is closed); the observer counts that
        as a ``write_error`` drop. Failures after ``write`` returned are counted by the sink itself.
        """
        ...

    def flush(self) -> None:
        """Push what was handed in toward its destination now: a file sink blocks until it is on disk
        (per its durability); a network sink wakes its sender and returns."""
        ...

    async def close(self) -> None:
        """Drain and release without blocking the loop; a network sink waits (bounded) for its queue."""
        ...


@runtime_checkable
class SharesMetrics(Protocol):
    """A sink that counts its own drops: the audit observer hands it the observer's metrics."""

    def share_metrics(self, metrics: AuditMetrics) -> None:
        """Count on ``metrics`` from now on, unless the sink was built with metrics of its own."""
        ...
