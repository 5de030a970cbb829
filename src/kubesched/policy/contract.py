"""The engine side of the decision contract: what a decision document may be, and the batch module.

Plugins see :mod:`kubesched.policyapi.contract` (inputs, :class:`Decision`, the client protocol); the engines in
this package turn what a policy answered into Decisions with :func:`interpret_result` and decide many targets
in one evaluation with the generated :func:`batch_module`.

Accepted results (the decision document): ``true``/``false``; or an object with ``allow`` or
``allowed`` (a boolean) and optional ``reason`` (string), ``reasons`` or ``deny`` (strings, list or
set); an object with only ``deny`` allows exactly when ``deny`` is empty; ``pending: true`` (with
``allow: false``) means "not decided yet", which SecurityAuditPermit waits on. An undefined result is a
deny ("policy decision is undefined"). Anything else is a :class:`PolicyError`.

Batch: one evaluation decides a pod for many targets. The batch input is
``{"pod", "nodes": [...], "operation", "time"}`` and the generated module :func:`batch_module` evaluates
the user's decision document once per target, so policies are written per (pod, node) and still cost
one call per pod. Implemented by :mod:`kubesched.policy.embedded` and :mod:`kubesched.policy.remote`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.errors import json_type_phrase
from kubesched.policyapi.contract import REASON_SEPARATOR, Decision, PolicyError, undefined_decision

BATCH_PACKAGE = "kubesched.batch"


def interpret_result(result: object, *, defined: bool = True, decision_id: str | None = None) -> Decision:
    """Turn a decision document into a Decision; raises PolicyError for shapes the contract rejects."""
    if not defined:
        return undefined_decision(decision_id)
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
            # Allowed only by an empty deny and no reason at all: a blank entry (``deny: [""]``) still denies, though
            # it gives no reason to show.
            reason, listed = result.get("reason"), result.get("reasons")
            allowed = not result["deny"] and reason in (None, []) and listed in (None, [])
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
    # A policy often states one reason under two keys (``reason`` and ``deny``): say it once, in order; an
    # empty reason says nothing (the message falls back to kubesched.policyapi.contract.NO_REASON).
    unique = list(dict.fromkeys(reason for reason in collected if reason.strip()))
    # The common Rego shape ``reason := concat("; ", sort(deny))`` states the others again, joined as the message
    # joins them: "a; b" beside "a" and "b" would read "a; b; a; b".
    return tuple(reason for reason in unique if not _joins_others(reason, unique))


def _joins_others(reason: str, reasons: Sequence[str]) -> bool:
    """Whether ``reason`` is two or more of the other ``reasons`` joined by the denial's separator."""
    parts = reason.split(REASON_SEPARATOR)
    if len(parts) < 2:
        return False
    others = {other for other in reasons if other != reason}
    return all(part.strip() in others for part in parts)


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
