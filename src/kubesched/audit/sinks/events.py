"""An audit sink that reports each decision as a Kubernetes Event on the pod (live mode).

A live scheduler (the API-server backend) adds it next to the file sink, so ``kubectl describe pod``
shows the policy decision beside the scheduler's own ``Scheduled``/``FailedScheduling`` events. It
writes through the framework's :class:`~kubesched.framework.interface.EventRecorder` (the live backend,
or the simulated cluster in tests): reason ``PolicyAudit``, type ``Warning`` when a policy verdict
denied, ``Normal`` otherwise.
"""

from __future__ import annotations

from kubesched.api.objects import ObjectMeta, Pod, PodSpec, PodStatus
from kubesched.audit.records import AuditRecord
from kubesched.framework.interface import EventRecorder, truncate_event_message
from kubesched.policyapi.verdicts import VERDICT_ALLOW

REASON = "PolicyAudit"
ACTION = "Audit"


class EventsSink:
    name = "events"

    def __init__(self, recorder: EventRecorder) -> None:
        self.recorder = recorder

    def write(self, record: AuditRecord) -> None:
        event_type = "Warning" if record.verdict not in (None, VERDICT_ALLOW) else "Normal"
        message = truncate_event_message(event_message(record))
        self.recorder.event(_involved_pod(record), event_type, REASON, ACTION, message)

    def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


def event_message(record: AuditRecord) -> str:
    """One line: the outcome, the policy's verdict and its reasons, and the ids to look the decision up by."""
    if record.target is not None and record.result == "Scheduled":
        outcome = f"{record.result} to {record.target.kind} {record.target.name}"
    elif record.target is not None:
        outcome = f"{record.result} on {record.target.kind} {record.target.name}"
    else:
        outcome = record.result
    parts = [outcome]
    if record.verdict is None:
        parts.append("no policy verdict")
    else:
        denials = [v for v in record.verdicts if not v.allowed]
        shown = denials or list(record.verdicts)
        details = []
        for verdict in shown:
            detail = verdict.plugin
            if verdict.target:
                detail += f" on {verdict.target}"
            if not verdict.allowed and verdict.enforcement != "deny":
                detail += f" ({verdict.enforcement})"
            if verdict.reasons:
                detail += ": " + "; ".join(verdict.reasons)
            if verdict.revision:
                detail += f" [revision {verdict.revision}]"
            details.append(detail)
        parts.append(f"policy {record.verdict}: " + ", ".join(details))
    parts.append(f"decision {record.decision_id}")
    return "; ".join(parts)


def _involved_pod(record: AuditRecord) -> Pod:
    # An Event names its object by namespace, name and uid only; the record holds exactly those, so the
    # sink needs no access to the scheduler's pod objects.
    metadata = ObjectMeta(name=record.pod.name, namespace=record.pod.namespace, uid=record.pod.uid)
    return Pod(metadata=metadata, spec=PodSpec(containers=()), status=PodStatus())
