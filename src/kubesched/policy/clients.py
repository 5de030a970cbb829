"""The policy clients the scheduler provides to plugins: one per distinct :class:`PolicyEngineSpec`.

The scheduler registers :func:`policy_services` with its :class:`~kubesched.framework.runtime.services.Services`;
a plugin asks for its engine through the Handle (:func:`kubesched.policyapi.contract.policy_client`) and gets the
client shared by every plugin configured alike, wrapped in a :class:`~kubesched.policy.outage.OutageLog` so that an
engine's outage is logged once, where every plugin's failed calls meet.
"""

from __future__ import annotations

from collections.abc import Hashable

from kubesched.clock import Clock
from kubesched.framework.runtime.services import ServiceFactory
from kubesched.policy.outage import OutageLog
from kubesched.policyapi.contract import ENGINE_REMOTE, POLICY_ENGINE_SERVICE, PolicyClient, PolicyEngineSpec


def build_policy_client(spec: PolicyEngineSpec, clock: Clock) -> PolicyClient:
    if spec.engine == ENGINE_REMOTE:
        from kubesched.policy.remote import RemoteOpaEngine

        return RemoteOpaEngine(
            spec.endpoint,
            timeout_seconds=spec.timeout_seconds,
            token_file=spec.token_file or None,
            ca_file=spec.ca_file or None,
            batch_endpoint=spec.batch_endpoint or None,
            decision_path=spec.decision_path,
            refresh_seconds=spec.refresh_seconds,
            clock=clock,
        )
    from kubesched.policy.worker import EmbeddedPolicyClient

    return EmbeddedPolicyClient(
        spec.policies,
        spec.data,
        decision_path=spec.decision_path,
        timeout_seconds=spec.timeout_seconds,
        reload_interval_seconds=spec.reload_interval_seconds,
        clock=clock,
    )


def policy_services(clock: Clock) -> dict[str, ServiceFactory]:
    """The service factories the scheduler registers: the policy engine clients."""

    def factory(spec: Hashable) -> object:
        if not isinstance(spec, PolicyEngineSpec):
            raise TypeError(f"a {POLICY_ENGINE_SERVICE} service needs a PolicyEngineSpec, not {type(spec).__name__}")
        return OutageLog(build_policy_client(spec, clock), clock, engine_name(spec))

    return {POLICY_ENGINE_SERVICE: factory}


def engine_name(spec: PolicyEngineSpec) -> str:
    """How log lines name an engine: its endpoint, or the embedded engine's policy files."""
    if spec.engine == ENGINE_REMOTE:
        return spec.endpoint
    return f"embedded ({', '.join(spec.policies)})"
