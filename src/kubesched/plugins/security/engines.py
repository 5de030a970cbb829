"""Which policy engine a SecurityAudit plugin's args describe, and who is exempt from policy.

The plugins never build an engine: :func:`engine_spec` turns their args into a
:class:`~kubesched.policyapi.contract.PolicyEngineSpec`, and the Handle hands back the scheduler's client for
it, shared with every plugin configured alike (SecurityAuditFilter and SecurityAuditPermit with the same
engine settings use one connection pool or worker).

Exemptions exist so that the policy gate can never deadlock the cluster (Gatekeeper's lesson): pods
in exempt namespaces (``kube-system`` by default), pods matching ``exemptPodLabels`` (the policy
engine's own pods) and pods carrying the break-glass label set to ``"true"`` are not evaluated. The
break-glass label is honoured only where an administrator allowed it (``breakGlassNamespaces``, or a namespace
labelled ``kubesched.io/break-glass-allowed: "true"``, which pod authors cannot set), and every use is a
Warning event ``BreakGlass``. Elsewhere the label is refused: the pod is evaluated like any other, and the refusal
is a Warning event ``BreakGlassRefused`` on the pod and a note in the attempt's audit verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from kubesched.api.objects import Pod
from kubesched.framework.interface import Handle
from kubesched.plugins.security.args import BREAK_GLASS_NAMESPACE_LABEL, PolicyEngineArgs
from kubesched.policyapi.contract import ENGINE_REMOTE, PolicyClient, PolicyEngineSpec, policy_client

BREAK_GLASS_EVENT_REASON = "BreakGlass"
BREAK_GLASS_REFUSED_EVENT_REASON = "BreakGlassRefused"


def engine_spec(args: PolicyEngineArgs) -> PolicyEngineSpec:
    engine = args.resolved_engine()
    path = args.resolved_decision_path()
    timeout = float(args.timeout_seconds)
    if engine == ENGINE_REMOTE:
        return PolicyEngineSpec(
            engine=engine,
            decision_path=path,
            timeout_seconds=timeout,
            endpoint=args.opa_endpoint,
            token_file=args.token_file,
            ca_file=args.ca_file,
            batch_endpoint=args.batch_endpoint,
            refresh_seconds=float(args.policy_refresh_seconds),
        )
    return PolicyEngineSpec(
        engine=engine,
        decision_path=path,
        timeout_seconds=timeout,
        policies=tuple(args.policies),
        data=tuple(args.data),
        refresh_seconds=float(args.policy_refresh_seconds),
    )


def engine_client(args: PolicyEngineArgs, handle: Handle) -> PolicyClient:
    """The scheduler's shared client for the engine ``args`` describe (built now: a policy that does not
    compile, or an endpoint that is not a URL, fails the plugin's construction)."""
    return policy_client(handle, engine_spec(args))


def exemption(args: PolicyEngineArgs, pod: Pod, namespace_labels: Mapping[str, str]) -> str:
    """Why ``pod`` is exempt from policy evaluation, or "" when it is not; ``namespace_labels`` are those of the
    pod's namespace (an administrator's, deciding where break-glass is allowed)."""
    metadata = pod.metadata
    if metadata.namespace in args.exempt_namespaces:
        return f"namespace {metadata.namespace} is exempt"
    if args.exempt_pod_labels and all(metadata.labels.get(k) == v for k, v in args.exempt_pod_labels.items()):
        return "pod matches exemptPodLabels"
    if (
        args.break_glass_label
        and metadata.labels.get(args.break_glass_label) == "true"
        and (
            metadata.namespace in args.break_glass_namespaces
            or namespace_labels.get(BREAK_GLASS_NAMESPACE_LABEL) == "true"
        )
    ):
        return f"{BREAK_GLASS} label {args.break_glass_label}=true, allowed in namespace {metadata.namespace}"
    return ""


BREAK_GLASS = "break-glass"


def is_break_glass(reason: str) -> bool:
    return reason.startswith(BREAK_GLASS)


class Exemption(NamedTuple):
    """Why a pod is not evaluated ("" when it is), and a note for its audit verdicts ("" when none)."""

    reason: str
    note: str = ""


def break_glass_refusal(args: PolicyEngineArgs, namespace: str) -> str:
    """The note of a break-glass label used where it is not allowed."""
    return (
        f"{BREAK_GLASS} label {args.break_glass_label}=true refused: namespace {namespace} is not allowed to use it "
        f"(breakGlassNamespaces, or the namespace label {BREAK_GLASS_NAMESPACE_LABEL}=true); the policy was evaluated"
    )


def pod_exemption(args: PolicyEngineArgs, handle: Handle, pod: Pod) -> Exemption:
    """:func:`exemption`, with the namespace read through the Handle's lister. A break-glass use is reported as a
    Warning event on the pod (every use, so that it shows in ``kubectl describe`` and in the event stream), and so is
    a break-glass label refused in a namespace that may not use it (then also noted for the audit record)."""
    # The namespace's labels matter only to a pod that asks for break-glass: every other attempt skips the lookup.
    namespace_labels: Mapping[str, str] = {}
    asks = bool(args.break_glass_label) and pod.metadata.labels.get(args.break_glass_label) == "true"
    if asks:
        namespace = handle.listers.namespaces.get(pod.metadata.namespace)
        if namespace is not None:
            namespace_labels = namespace.metadata.labels
    reason = exemption(args, pod, namespace_labels)
    if is_break_glass(reason):
        handle.event_recorder.event(
            pod, "Warning", BREAK_GLASS_EVENT_REASON, "Scheduling", f"security policy not evaluated: {reason}"
        )
    elif asks and not reason:
        note = break_glass_refusal(args, pod.metadata.namespace)
        handle.event_recorder.event(pod, "Warning", BREAK_GLASS_REFUSED_EVENT_REASON, "Scheduling", note)
        return Exemption("", note)
    return Exemption(reason)
