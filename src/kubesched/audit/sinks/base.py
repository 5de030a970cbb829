"""The contract every audit sink keeps, and the durability settings of file sinks.

The audit observer (:class:`kubesched.audit.builder.AuditObserver`) hands each record to a sink's
``write`` from inside the scheduling loop, so ``write`` must never wait on the network: file sinks write
(and fsync, as configured) synchronously, network sinks queue and return. ``close`` is a coroutine because
a network sink drains its queue before it returns.
"""

from __future__ import annotations

from typing import Protocol

from kubesched.audit.records import AuditRecord


class AuditSink(Protocol):
    #: The sink's label on the audit metrics (``jsonl``, ``stdout``, ``webhook``, ``events``).
    name: str

    def write(self, record: AuditRecord) -> None:
        """Take one record; may raise (a full disk) but never blocks on the network."""
        ...

    def flush(self) -> None:
        """Push what is buffered toward its destination now (fsync a file; wake a webhook sender)."""
        ...

    async def close(self) -> None:
        """Flush and release; a network sink waits (bounded) for its queue to drain."""
        ...
