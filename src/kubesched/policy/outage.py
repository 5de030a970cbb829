"""Operators hear of a policy engine outage: one warning when its calls start failing, one when it answers again
(a warning too, so that whoever sees the first, at the default level, sees its end).

Who calls it: :func:`kubesched.policy.clients.policy_services` wraps every policy client the scheduler hands to
plugins in an :class:`OutageLog`. A failed call is otherwise only a pod's status (``OPA evaluation failed: ...``,
an audit record, an event), and with failurePolicy Fail an engine that is down keeps every pod that needs it
pending with nothing at info or warning level to say why. Time is the scheduler's clock. An engine that flaps
reports at most one outage per :data:`OUTAGE_REPORT_INTERVAL`; the next report counts the outages left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.clock import Clock
from kubesched.policyapi.contract import Decision, InputPaths, PolicyClient, PolicyError

log = logging.getLogger(__name__)

OUTAGE_REPORT_INTERVAL = 60.0  # seconds between two outage reports of one engine, at least


class OutageLog:
    """A :class:`~kubesched.policyapi.contract.PolicyClient` that passes every call to ``client`` and logs when its
    failures start and end (module doc); ``name`` says which engine (its endpoint, or the embedded policies)."""

    def __init__(self, client: PolicyClient, clock: Clock, name: str) -> None:
        self.client = client
        self.clock = clock
        self.name = name
        self._failing_since: float | None = None
        self._failed_calls = 0
        self._reported = False  # the current outage's start was logged, so its end is too
        self._last_report: float | None = None
        self._unreported = 0  # outages since the last report that were not logged

    @property
    def kind(self) -> str:
        return self.client.kind

    def revision(self) -> str:
        return self.client.revision()

    async def refresh(self) -> str:
        # A failure counts; a success does not end an outage: it may be the revision last seen, asked of no one.
        try:
            return await self.client.refresh()
        except PolicyError as exc:
            self._failed(exc)
            raise

    def input_paths(self, revision: str) -> InputPaths | None:
        return self.client.input_paths(revision)

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        try:
            decision = await self.client.decide(input_doc)
        except PolicyError as exc:
            self._failed(exc)
            raise
        self._answered()
        return decision

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        try:
            decisions = await self.client.decide_batch(
                pod, targets, target_kind=target_kind, operation=operation, time=time
            )
        except PolicyError as exc:
            self._failed(exc)
            raise
        self._answered()
        return decisions

    async def aclose(self) -> None:
        await self.client.aclose()

    def __getattr__(self, name: str) -> Any:
        # What a caller knows of one engine beyond the protocol (a remote engine's endpoint, its pool).
        return getattr(self.client, name)

    def _failed(self, error: PolicyError) -> None:
        if self._failing_since is not None:
            self._failed_calls += 1
            return
        now = self.clock.now()
        self._failing_since, self._failed_calls = now, 1
        self._reported = self._last_report is None or now - self._last_report >= OUTAGE_REPORT_INTERVAL
        if not self._reported:
            self._unreported += 1
            return
        left_out = (
            f" ({self._unreported} more outage(s) since the last report, not reported one by one)"
            if self._unreported
            else ""
        )
        self._last_report, self._unreported = now, 0
        log.warning(
            "policy engine %s is failing: %s; pods that need its decisions wait for it (or pass unchecked, with "
            "failurePolicy: Ignore)%s",
            self.name,
            error,
            left_out,
        )

    def _answered(self) -> None:
        since = self._failing_since
        if since is None:
            return
        self._failing_since = None
        if self._reported:
            log.warning(
                "policy engine %s answers again after %.1f s and %d failed call(s)",
                self.name,
                self.clock.now() - since,
                self._failed_calls,
            )
