"""Where audit records go: a hash-chained JSON-lines file (the default), stdout, an HTTP webhook, Events.

Every sink keeps the :class:`~kubesched.audit.sinks.base.AuditSink` contract; the audit observer writes
each record to every sink it was given. The webhook sink is imported from
:mod:`kubesched.audit.sinks.webhook` (it brings aiohttp's client with it).
"""

from kubesched.audit.sinks.base import AuditSink
from kubesched.audit.sinks.events import EventsSink
from kubesched.audit.sinks.jsonl import DURABILITIES, JsonlSink
from kubesched.audit.sinks.stdout import StdoutSink

__all__ = ["DURABILITIES", "AuditSink", "EventsSink", "JsonlSink", "StdoutSink"]
