"""The scheduler finds the policy clients among its services once per change of the services, not per cycle.

A client created after the scheduler first looked (a profile's plugin asking for another engine) must still have
its revision changes noticed; a closed set of services leaves none behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.framework.events import POLICY_REVISION_CHANGE, ClusterEvent
from kubesched.framework.runtime.services import Services
from kubesched.plugins.registry import in_tree_registry
from kubesched.policyapi.contract import (
    ENGINE_EMBEDDED,
    POLICY_ENGINE_SERVICE,
    Decision,
    InputPaths,
    PolicyEngineSpec,
)
from kubesched.scheduler.scheduler import Scheduler


class RevisionOnly:
    """A policy client whose revision the test sets; it is never asked to decide."""

    kind = "embedded"

    def __init__(self) -> None:
        self.current = "r1"

    def revision(self) -> str:
        return self.current

    async def refresh(self) -> str:
        return self.current

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        raise AssertionError("not asked")

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        raise AssertionError("not asked")

    def input_paths(self, revision: str) -> InputPaths | None:
        return None

    async def aclose(self) -> None:
        pass


def test_a_policy_client_created_after_the_first_look_has_its_revision_changes_noticed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[RevisionOnly] = []

    def factory(spec: object) -> RevisionOnly:
        made.append(RevisionOnly())
        return made[-1]

    services = Services({POLICY_ENGINE_SERVICE: factory})
    config = load_config_dict(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
        "test",
        in_tree_registry(),
    )
    clock = VirtualClock()
    scheduler = Scheduler(config, in_tree_registry(), SimulatedCluster(clock), clock=clock, services=services)
    seen: list[str] = []

    def on_event(event: ClusterEvent, old: object, new: object) -> None:
        seen.append(event.label)

    monkeypatch.setattr(scheduler.queue, "on_event", on_event)
    assert scheduler.note_policy_revisions() is False  # no client yet

    spec = PolicyEngineSpec(engine=ENGINE_EMBEDDED, decision_path="kubernetes/authz", timeout_seconds=1.0)
    services.get(POLICY_ENGINE_SERVICE, spec)
    assert scheduler.note_policy_revisions() is False  # its first revision is no change
    made[0].current = "r2"
    assert scheduler.note_policy_revisions() is True
    assert seen == [POLICY_REVISION_CHANGE.label]

    asyncio.run(services.aclose())
    made[0].current = "r3"
    assert scheduler.note_policy_revisions() is False  # closed: no client left to ask
