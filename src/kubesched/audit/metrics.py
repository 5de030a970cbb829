"""Prometheus metrics of the audit trail: records handed to each sink, and records it lost.

The audit observer and the sinks count through an :class:`AuditMetrics`. The process-wide one
(:func:`default_metrics`) registers in prometheus_client's default registry, which the scheduler's
metrics endpoint serves; tests build their own over a fresh ``CollectorRegistry`` so counts do not leak
between them.

``kubesched_audit_records_total{sink}`` counts records a sink accepted (its ``write`` returned);
``kubesched_audit_dropped_records_total{sink, reason}`` counts records lost, whether refused at ``write``
or lost later on the way by the sink's writer (so accepted − dropped = written or delivered, or still
queued). Reasons:

* ``queue_full``: a sink's bounded queue was full (a slow receiver, a stalled disk); the record was dropped
  so scheduling never waits;
* ``undeliverable``: every retry failed (timeouts, connection errors, 5xx/429 answers), or the batch
  killed the sender task twice;
* ``rejected``: the receiver refused the batch with a 4xx answer that retrying cannot fix;
* ``closed``: the sink was closed (or its drain timed out) with the record still queued;
* ``write_error``: the sink refused the record (it was closed), or its writer could not write or fsync it
  (disk full, EIO); see the log.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter

DROPPED = "kubesched_audit_dropped_records_total"
RECORDS = "kubesched_audit_records_total"

REASON_QUEUE_FULL = "queue_full"
REASON_UNDELIVERABLE = "undeliverable"
REASON_REJECTED = "rejected"
REASON_CLOSED = "closed"
REASON_WRITE_ERROR = "write_error"


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.dropped = Counter(
            DROPPED,
            "Audit records that were dropped instead of written or delivered, by sink and reason.",
            ["sink", "reason"],
            registry=registry,
        )
        self.records = Counter(
            RECORDS,
            "Audit records handed to a sink (its write returned), by sink.",
            ["sink"],
            registry=registry,
        )

    def drop(self, sink: str, reason: str, count: int = 1) -> None:
        if count:
            self.dropped.labels(sink=sink, reason=reason).inc(count)

    def handed(self, sink: str, count: int = 1) -> None:
        if count:
            self.records.labels(sink=sink).inc(count)

    def dropped_total(self, sink: str | None = None, reason: str | None = None) -> int:
        """How many records were dropped (optionally for one sink and/or reason), summed over labels."""
        return _sum(self.dropped, {"sink": sink, "reason": reason})

    def handed_total(self, sink: str | None = None) -> int:
        return _sum(self.records, {"sink": sink})


def _sum(counter: Counter, wanted: dict[str, str | None]) -> int:
    total = 0.0
    for metric in counter.collect():
        for sample in metric.samples:
            if not sample.name.endswith("_total"):
                continue
            if all(value is None or sample.labels.get(key) == value for key, value in wanted.items()):
                total += sample.value
    return int(total)


_default: AuditMetrics | None = None


def default_metrics() -> AuditMetrics:
    """The process-wide metrics, registered once in prometheus_client's default registry."""
    global _default
    if _default is None:
        _default = AuditMetrics()
    return _default
