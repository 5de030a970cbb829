"""The audit trail: one record per scheduling decision, written to tamper-evident logs and other sinks.

The scheduler's observer hook feeds :class:`AuditObserver` (:mod:`.builder`), which builds an
:class:`AuditRecord` (:mod:`.records`) for every attempt (scheduled, unschedulable, error) and writes it
to its sinks (:mod:`.sinks`: hash-chained JSON lines, stdout, webhook, Kubernetes Events).
:func:`verify_chain` (:mod:`.verify`) proves a log was neither altered, truncated nor reordered, and
with a public key that it is what the writer signed (:mod:`.checkpoints`, keys in :mod:`.keys`; both are
imported from their modules, so cryptography is loaded only where logs are signed or checked);
:mod:`.query` answers "why did this pod land here". The CLI's ``kubesched audit`` and
``kubesched simulate --audit-log`` are thin layers over these.

:class:`~kubesched.audit.sinks.webhook.WebhookSink` is imported from its module, so that aiohttp is
loaded only by the processes that send records over HTTP.
"""

from kubesched.audit.builder import AuditObserver, FanOut, build_record, random_ids, seeded_ids
from kubesched.audit.chain import AuditLogError
from kubesched.audit.metrics import AuditMetrics, default_metrics
from kubesched.audit.query import Query, explain, parse_pod, parse_since, read_records, run_query
from kubesched.audit.records import AuditRecord, OwnerRef, PodRef, ScoredNode, Target
from kubesched.audit.sinks import AuditSink, EventsSink, JsonlSink, StdoutSink
from kubesched.audit.verify import VerifyResult, verify_chain

__all__ = [
    "AuditLogError",
    "AuditMetrics",
    "AuditObserver",
    "AuditRecord",
    "AuditSink",
    "EventsSink",
    "FanOut",
    "JsonlSink",
    "OwnerRef",
    "PodRef",
    "Query",
    "ScoredNode",
    "StdoutSink",
    "Target",
    "VerifyResult",
    "build_record",
    "default_metrics",
    "explain",
    "parse_pod",
    "parse_since",
    "random_ids",
    "read_records",
    "run_query",
    "seeded_ids",
    "verify_chain",
]
