"""Build the policy engine a SecurityAudit plugin's args describe, and decide who is exempt.

Exemptions exist so that the policy gate can never deadlock the cluster (Gatekeeper's lesson): pods
in exempt namespaces (``kube-system`` by default), pods matching ``exemptPodLabels`` (the policy
engine's own pods) and pods carrying the break-glass label set to ``"true"`` are not evaluated.
"""

from __future__ import annotations

from typing import Any

from kubesched.api.objects import Pod
from kubesched.clock import Clock
from kubesched.plugins.security.args import ENGINE_REMOTE, PolicyEngineArgs


def build_engine(args: PolicyEngineArgs, clock: Clock) -> Any:
    if args.resolved_engine() == ENGINE_REMOTE:
        from kubesched.policy.remote import RemoteOpaEngine

        return RemoteOpaEngine(
            args.opa_endpoint,
            timeout_seconds=args.timeout_seconds,
            token_file=args.token_file or None,
            ca_file=args.ca_file or None,
            batch_endpoint=args.batch_endpoint or None,
            decision_path=args.resolved_decision_path(),
            clock=clock,
        )
    from kubesched.policy.embedded import EmbeddedRegoEngine

    return EmbeddedRegoEngine(args.policies, args.data, decision_path=args.resolved_decision_path(), clock=clock)


def exemption(args: PolicyEngineArgs, pod: Pod) -> str:
    """Why ``pod`` is exempt from policy evaluation, or "" when it is not."""
    metadata = pod.metadata
    if metadata.namespace in args.exempt_namespaces:
        return f"namespace {metadata.namespace} is exempt"
    if args.break_glass_label and metadata.labels.get(args.break_glass_label) == "true":
        return f"break-glass label {args.break_glass_label}=true"
    if args.exempt_pod_labels and all(metadata.labels.get(k) == v for k, v in args.exempt_pod_labels.items()):
        return "pod matches exemptPodLabels"
    return ""
