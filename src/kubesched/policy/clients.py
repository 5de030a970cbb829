"""The policy clients the scheduler provides to plugins: one per distinct :class:`PolicyEngineSpec`.

The scheduler registers :func:`policy_services` with its :class:`~kubesched.framework.runtime.services.Services`;
a plugin asks for its engine through the Handle (:func:`kubesched.framework.policy.policy_client`) and gets the
client shared by every plugin configured alike.
"""

from __future__ import annotations

from collections.abc import Hashable

from kubesched.clock import Clock
from kubesched.framework.policy import ENGINE_REMOTE, POLICY_ENGINE_SERVICE, PolicyClient, PolicyEngineSpec
from kubesched.framework.runtime.services import ServiceFactory


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
        return build_policy_client(spec, clock)

    return {POLICY_ENGINE_SERVICE: factory}
