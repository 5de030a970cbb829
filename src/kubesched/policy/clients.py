"""The policy clients the scheduler provides to plugins: one per distinct :class:`PolicyEngineSpec`.

The scheduler registers :func:`policy_services` with its :class:`~kubesched.framework.runtime.services.Services`;
a plugin asks for its engine through the Handle (:func:`kubesched.framework.policy.policy_client`) and gets the
client shared by every plugin configured alike.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from kubesched.clock import Clock
from kubesched.framework.policy import ENGINE_REMOTE, POLICY_ENGINE_SERVICE, Decision, PolicyClient, PolicyEngineSpec
from kubesched.framework.runtime.services import ServiceFactory


class _BlockingClient:
    """Interim adapter over the synchronous engines (replaced by the asynchronous clients)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    @property
    def kind(self) -> str:
        return str(self._engine.kind)

    def revision(self) -> str:
        return str(self._engine.revision())

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        result: Decision = self._engine.decide(input_doc)
        return result

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        result: dict[str, Decision] = self._engine.decide_batch(
            pod, targets, target_kind=target_kind, operation=operation, time=time
        )
        return result

    async def aclose(self) -> None:
        self._engine.close()


def build_policy_client(spec: PolicyEngineSpec, clock: Clock) -> PolicyClient:
    if spec.engine == ENGINE_REMOTE:
        from kubesched.policy.remote import RemoteOpaEngine

        return _BlockingClient(
            RemoteOpaEngine(
                spec.endpoint,
                timeout_seconds=spec.timeout_seconds,
                token_file=spec.token_file or None,
                ca_file=spec.ca_file or None,
                batch_endpoint=spec.batch_endpoint or None,
                decision_path=spec.decision_path,
                clock=clock,
            )
        )
    from kubesched.policy.embedded import EmbeddedRegoEngine

    return _BlockingClient(
        EmbeddedRegoEngine(
            spec.policies,
            spec.data,
            decision_path=spec.decision_path,
            clock=clock,
            reload_interval=spec.reload_interval_seconds,
        )
    )


def policy_services(clock: Clock) -> dict[str, ServiceFactory]:
    """The service factories the scheduler registers: the policy engine clients."""

    def factory(spec: Hashable) -> object:
        if not isinstance(spec, PolicyEngineSpec):
            raise TypeError(f"a {POLICY_ENGINE_SERVICE} service needs a PolicyEngineSpec, not {type(spec).__name__}")
        return build_policy_client(spec, clock)

    return {POLICY_ENGINE_SERVICE: factory}
