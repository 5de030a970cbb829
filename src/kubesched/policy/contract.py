"""The decision contract shared by every policy engine: what goes in, what may come out.

Input document (one decision)::

    {"pod": <pod>, "node": <node>, "operation": "schedule", "time": "2026-11-30T16:00:00Z"}

``cluster`` replaces ``node`` when a member cluster is the target. ``pod`` is the pod manifest without
``status`` and without per-instance identity (name, uid, ...: see :func:`pod_document`), so replicas share
decisions; ``node`` is ``metadata`` (name, labels, annotations) and ``spec`` (taints, unschedulable).
``time`` is passed in (rounded to the engine's time granularity) instead of read with ``time.now_ns()``
in the policy, so that equal inputs give equal, cacheable decisions.

Batch: one evaluation decides a pod for many targets. The batch input is
``{"pod", "nodes": [...], "operation", "time"}`` and the generated module :func:`batch_module` evaluates
the user's decision document once per target, so policies are written per (pod, node) and still cost
one call per pod.

Accepted results (the decision document): ``true``/``false``; or an object with ``allow`` or
``allowed`` (a boolean) and optional ``reason`` (string), ``reasons`` or ``deny`` (strings, list or
set); an object with only ``deny`` allows exactly when ``deny`` is empty; ``pending: true`` (with
``allow: false``) means "not decided yet", which SecurityAuditPermit waits on. An undefined result is a
deny ("policy decision is undefined"). Anything else is a :class:`PolicyError`.
Called by the SecurityAudit plugins and implemented by :mod:`kubesched.policy.embedded` and
:mod:`kubesched.policy.remote`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.api.objects import Node, Pod
from kubesched.errors import KubeschedError, json_type_phrase

OPERATION_SCHEDULE = "schedule"
OPERATION_PERMIT = "permit"
OPERATION_AUDIT = "audit"

UNDEFINED_REASON = "policy decision is undefined"
BATCH_PACKAGE = "kubesched.batch"


class PolicyError(KubeschedError):
    """The engine could not decide (timeout, transport, HTTP error, bad result shape, compile error)."""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reasons: tuple[str, ...] = ()
    decision_id: str | None = None
    pending: bool = False  # not decided yet (e.g. a change ticket awaiting approval); only Permit waits on it


UNDEFINED = Decision(False, (UNDEFINED_REASON,))


def interpret_result(result: object, *, defined: bool = True, decision_id: str | None = None) -> Decision:
    """Turn a decision document into a Decision; raises PolicyError for shapes the contract rejects."""
    if not defined:
        return Decision(False, (UNDEFINED_REASON,), decision_id)
    if isinstance(result, bool):
        return Decision(result, (), decision_id)
    if isinstance(result, Mapping):
        reasons = _reasons(result)
        if "allow" in result or "allowed" in result:
            # Present means it decides: a null allow is a shape error, never a fall-back to ``deny``.
            allowed: object = result["allow"] if "allow" in result else result["allowed"]
        elif "deny" not in result:
            raise PolicyError("policy result has neither allow, allowed nor deny")
        elif not isinstance(result["deny"], list | set | tuple | frozenset):
            raise PolicyError(f"policy result deny is {json_type_phrase(result['deny'])}, not a list or a set")
        else:
            allowed = not reasons
        if not isinstance(allowed, bool):
            raise PolicyError(f"policy result allow is {json_type_phrase(allowed)}, not a boolean")
        pending = result.get("pending", False)
        if not isinstance(pending, bool):
            raise PolicyError(f"policy result pending is {json_type_phrase(pending)}, not a boolean")
        return Decision(allowed, reasons, decision_id, pending=pending and not allowed)
    raise PolicyError(f"policy result is {json_type_phrase(result)}, not a boolean or an object")


def _reasons(result: Mapping[str, Any]) -> tuple[str, ...]:
    collected: list[str] = []
    for key in ("reason", "reasons", "deny"):
        value = result.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            collected.append(value)
        elif isinstance(value, list | set | tuple | frozenset):
            collected.extend(sorted(str(item) for item in value))
        else:
            collected.append(str(value))
    return tuple(collected)


# Per-instance metadata: left out of the policy input so that replicas of one template (a ReplicaSet's
# pods differ only in these) share one decision; a policy names a pod by generateName, labels or owner.
_INSTANCE_METADATA = frozenset(
    {"name", "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"}
)


def pod_document(pod: Pod) -> dict[str, Any]:
    """The pod as the policy sees it: its manifest without ``status``, ``spec.nodeName`` and the
    per-instance metadata (name, uid, resourceVersion, creationTimestamp, generation, managedFields)."""
    document = {key: value for key, value in pod.raw.items() if key not in ("status", "metadata", "spec")}
    metadata = pod.raw.get("metadata") or {}
    document["metadata"] = {key: value for key, value in metadata.items() if key not in _INSTANCE_METADATA}
    document["metadata"].setdefault("namespace", pod.metadata.namespace)
    spec = pod.raw.get("spec") or {}
    document["spec"] = {key: value for key, value in spec.items() if key != "nodeName"}
    return document


def node_document(node: Node) -> dict[str, Any]:
    metadata = node.metadata
    return {
        "metadata": {"name": metadata.name, "labels": dict(metadata.labels), "annotations": dict(metadata.annotations)},
        "spec": {
            "unschedulable": node.spec_unschedulable,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        },
    }


def rfc3339(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rounded_time(now: float, granularity: float) -> str:
    """``now`` rounded down to the granularity, as RFC 3339: the cacheable ``input.time``."""
    if granularity > 0:
        now = now - (now % granularity)
    return rfc3339(now)


def decision_input(
    pod: Mapping[str, Any], target: Mapping[str, Any], *, target_kind: str, operation: str, time: str
) -> dict[str, Any]:
    return {"pod": pod, target_kind: target, "operation": operation, "time": time}


def batch_input(
    pod: Mapping[str, Any], targets: Sequence[Mapping[str, Any]], *, target_kind: str, operation: str, time: str
) -> dict[str, Any]:
    return {"pod": pod, f"{target_kind}s": list(targets), "operation": operation, "time": time}


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def data_reference(path: str) -> str:
    """``kubernetes/authz/allow`` → ``data.kubernetes.authz.allow`` (bracketed where not an identifier)."""
    parts = [part for part in path.strip("/").split("/") if part]
    if not parts:
        raise PolicyError("the decision path is empty")
    reference = "data"
    for part in parts:
        reference += f".{part}" if _IDENTIFIER.match(part) else f"[{_quote(part)}]"
    return reference


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def batch_module(decision_path: str, target_kind: str = "node") -> str:
    """A Rego v1 module deciding ``input.pod`` for every target in ``input.<kind>s``, keyed by name.

    A target whose decision is undefined is absent from the result; callers treat it as undefined.
    """
    reference = data_reference(decision_path)
    return f"""package {BATCH_PACKAGE}

import rego.v1

# Generated by kubesched: evaluates {reference} once per {target_kind} in one query.
{target_kind}_decisions[name] := decision if {{
\tsome target in input.{target_kind}s
\tname := target.metadata.name
\tdecision := {reference} with input as {{
\t\t"pod": input.pod,
\t\t"{target_kind}": target,
\t\t"operation": input.operation,
\t\t"time": input.time,
\t}}
}}
"""


def batch_rule(target_kind: str = "node") -> str:
    return f"data.{BATCH_PACKAGE}.{target_kind}_decisions"


def batch_path(target_kind: str = "node") -> str:
    return f"{BATCH_PACKAGE.replace('.', '/')}/{target_kind}_decisions"


class PolicyEngine(Protocol):
    """One policy engine; ``decide_batch`` is the call the scheduler makes per pod."""

    @property
    def kind(self) -> str:
        """``embedded`` or ``remote`` (recorded in audit records)."""
        ...

    def revision(self) -> str:
        """Identifies the policy and data in force; a decision cache is keyed by it."""
        ...

    def decide(self, input_doc: Mapping[str, Any]) -> Decision: ...

    def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        """Decisions keyed by target name; a target missing from the answer is UNDEFINED."""
        ...

    def close(self) -> None: ...
