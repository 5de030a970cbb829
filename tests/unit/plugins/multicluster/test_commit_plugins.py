"""ClusterReservation and ClusterBind on their own: args errors with field paths, reservation ids, the ledger,
and what each does in a scheduler without a cluster committer (the end-to-end flow is tests/e2e/
test_two_phase_commit.py, against real agents)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kubesched.clock import VirtualClock
from kubesched.clusterapi.contract import CLUSTER_COMMIT_SERVICE, CommitError, CommitLedger, ReleaseOutcome
from kubesched.errors import FieldError, ValidationFailed
from kubesched.federation.wire import RESERVATION_ID_PATTERN
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime.services import Services
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.multicluster import (
    ClusterBind,
    ClusterBindArgs,
    ClusterReservation,
    ClusterReservationArgs,
)
from kubesched.plugins.multicluster.bind import NOT_RESERVED, OUTCOME_UNKNOWN, RECORD_CHANGED, SETTLE_SKEW_SECONDS
from kubesched.plugins.multicluster.intent import COMMIT_ANNOTATION, CommitIntent
from kubesched.plugins.multicluster.reservation import RESERVATION_STATE_KEY, HeldReservation, reservation_id
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, RecordingClient


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        pytest.param(ClusterReservationArgs(), [], id="defaults-are-valid"),
        pytest.param(
            ClusterReservationArgs(ttl_seconds=0, permit_timeout_seconds=901),
            [
                FieldError.invalid("ttlSeconds", 0, "must be a number of seconds in (0, 3600]"),
                FieldError.invalid("permitTimeoutSeconds", 901, "must be a number of seconds in (0, 900]"),
            ],
            id="ttl-and-permit-timeout-ranges",
        ),
        pytest.param(
            ClusterReservationArgs(reserve_attempts=0, suspect_after_failures=0, approval="Manual"),
            [
                FieldError.invalid("reserveAttempts", 0, "must be in [1, 10]"),
                FieldError.invalid("suspectAfterFailures", 0, "must be >= 1"),
                FieldError.unsupported("approval", "Manual", ("Annotation", "Automatic")),
            ],
            id="attempts-suspicion-and-approval-mode",
        ),
        pytest.param(
            ClusterReservationArgs(max_commits_in_flight=-1),
            [FieldError.invalid("maxCommitsInFlight", -1, "must be in [0, 100000] (0: unbounded)")],
            id="commits-in-flight-not-negative",
        ),
        pytest.param(
            ClusterBindArgs(bind_timeout_seconds=float("nan")),
            [FieldError.invalid("bindTimeoutSeconds", float("nan"), "must be a finite number of seconds > 0")],
            id="bind-timeout",
        ),
        pytest.param(
            ClusterBindArgs(bind_attempts=0),
            [FieldError.invalid("bindAttempts", 0, "must be in [1, 10]")],
            id="bind-attempts",
        ),
    ],
)
def test_args_report_every_error_with_its_field_path(args: Any, errors: list[FieldError]) -> None:
    assert [str(e) for e in args.validate("")] == [str(e) for e in errors]


@pytest.mark.parametrize(
    ("plugin", "bad"),
    [
        pytest.param(ClusterReservation, ClusterReservationArgs(reserve_attempts=0), id="reservation"),
        pytest.param(ClusterBind, ClusterBindArgs(bind_timeout_seconds=-1), id="bind"),
    ],
)
def test_the_factory_validates_again(plugin: Any, bad: Any) -> None:
    with pytest.raises(ValidationFailed):
        plugin(bad, PluginHandle())


def test_reservation_ids_are_dns_labels_one_per_attempt() -> None:
    uid = "0b7f5f0e-6f0c-4f4e-9a57-1f0b3cf7b8a1"
    first, again, second = reservation_id(uid, 1), reservation_id(uid, 1), reservation_id(uid, 2)
    assert first == again != second
    assert all(RESERVATION_ID_PATTERN.match(rid) for rid in (first, second, reservation_id(uid, 10**9)))
    assert reservation_id("another-pod", 1) != first


def test_the_ledger_counts_consecutive_failures_until_a_success() -> None:
    ledger = CommitLedger()
    assert ledger.consecutive("east") == (0, None)
    assert [ledger.failed("east", 10.0), ledger.failed("east", 12.0)] == [1, 2]
    assert ledger.consecutive("east") == (2, 12.0)
    assert dict(ledger.failing()) == {"east": (2, 12.0)}
    ledger.succeeded("east")
    assert ledger.consecutive("east") == (0, None)
    assert dict(ledger.failing()) == {}


def test_without_a_committer_permit_refuses_filter_passes_and_bind_errors() -> None:
    handle = PluginHandle()
    pod = PodInfo(make_pod("p").req(cpu="1").obj())
    state = CycleState()
    reservation = ClusterReservation(None, handle)
    assert reservation.filter(state, pod, NodeInfo(make_node("east").obj())) is None
    status, timeout = reservation.permit(state, pod, "east")
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "no cluster committer" in status.message and timeout == 0.0
    bound = asyncio.run(ClusterBind(None, handle).bind(state, pod, "east"))
    assert bound is not None and (bound.code, bound.message) == (Code.ERROR, NOT_RESERVED)


class _ScriptedCommitter:
    """A committer whose release and bind answers are scripted: "lost" (no answer in time), "unreached" (the
    connection refused: the request never left), "refused", or -- for a release -- "made" (the member made the pod)
    or whether it still held the reservation; a bind's other answers are a success."""

    def __init__(self, binds: list[str], releases: list[object]) -> None:
        self.ledger = CommitLedger()
        self.binds = binds
        self.releases = releases
        self.calls: list[str] = []

    def _next(self, script: list[Any], what: str) -> Any:
        self.calls.append(what)
        answer = script.pop(0) if script else "lost"
        if answer == "lost":
            raise CommitError("east", "Unreachable", f"{what}: no answer", refused=False)
        if answer == "unreached":
            raise CommitError("east", "Unreachable", f"{what}: connection refused", refused=False, may_have_acted=False)
        if answer == "refused":
            raise CommitError("east", "NotFound", f"{what}: no such reservation", refused=True)
        return answer

    async def reserve(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("not reserved here")

    async def release(self, cluster: str, reservation_id: str, *, timeout: float, pod: Any = None) -> ReleaseOutcome:
        answer = self._next(self.releases, "release")
        return ReleaseOutcome(False, "default/p") if answer == "made" else ReleaseOutcome(bool(answer))

    async def bind(self, cluster: str, reservation_id: str, pod: Any, *, timeout: float) -> None:
        self._next(self.binds, "bind")


def _bind_with(
    committer: _ScriptedCommitter, clock: VirtualClock, ttl: float = 60.0, client: RecordingClient | None = None
) -> Status | None:
    services = Services()
    services.register(CLUSTER_COMMIT_SERVICE, lambda spec: committer)
    handle = PluginHandle(clock=clock, services=services, client=client)
    state = CycleState()
    state.write(
        RESERVATION_STATE_KEY, HeldReservation("east", "r-1", reserved=True, member_expiry=clock.now() + ttl, attempt=1)
    )
    plugin = ClusterBind(ClusterBindArgs(bind_attempts=2), handle)
    pod = PodInfo(make_pod("p").uid("p-uid").req(cpu="1").obj())

    async def run() -> Status | None:
        task = asyncio.ensure_future(plugin.bind(state, pod, "east"))
        while not task.done():  # the settling waits on the hub's (virtual) clock between rounds
            await asyncio.sleep(0)
            clock.advance(1.0)
        return task.result()

    status = asyncio.run(run())
    assert isinstance(handle.client, RecordingClient)
    if status is None:
        assert handle.client.bindings == [(pod.key, "east")]
    else:
        assert handle.client.bindings == []
    return status


@pytest.mark.parametrize(
    ("binds", "releases", "bound", "calls"),
    [
        pytest.param(["lost", "lost"], ["made"], True, ["bind", "bind", "release"], id="a-lost-bind-had-made-it"),
        pytest.param(["lost", "lost"], [True], False, ["bind", "bind", "release"], id="released-before-any-bind"),
        pytest.param(["lost", "lost"], [False], False, ["bind", "bind", "release"], id="nothing-held-nothing-made"),
        pytest.param(
            ["lost", "lost"],
            ["lost", "lost", "made"],
            True,
            ["bind", "bind", "release", "release", "release"],
            id="the-member-answers-again-later",
        ),
        pytest.param(["refused"], [], False, ["bind"], id="a-refusal-needs-no-settling"),
        pytest.param(["unreached", "unreached"], [], False, ["bind", "bind"], id="binds-that-never-left-need-none"),
        pytest.param(["lost", "unreached"], ["made"], True, ["bind", "bind", "release"], id="one-lost-is-enough"),
    ],
)
def test_a_bind_never_answered_is_settled_before_the_pod_goes_elsewhere(
    binds: list[str], releases: list[object], bound: bool, calls: list[str]
) -> None:
    committer = _ScriptedCommitter(binds, releases)
    status = _bind_with(committer, VirtualClock())
    assert (status is None) == bound, status
    assert committer.calls == calls
    # What the next attempt's PreFilter reads: a settled commit lets the pod go elsewhere; a bound one needs nothing.
    assert committer.ledger.is_settled_empty("p-uid", "r-1") == (not bound)


def test_a_member_silent_until_its_reservation_expired_leaves_the_outcome_open() -> None:
    committer = _ScriptedCommitter(["lost", "lost"], [])  # nothing is ever answered again
    clock = VirtualClock()
    start = clock.now()
    status = _bind_with(committer, clock, ttl=30.0)
    assert status is not None and status.code is Code.ERROR and OUTCOME_UNKNOWN in status.message
    assert clock.now() >= start + 30.0 + SETTLE_SKEW_SECONDS  # a late bind would be refused there by now
    assert committer.calls.count("release") >= 2
    # Not settled: the pod waits at the next PreFilter while the member is asked again in the background.
    assert not committer.ledger.is_settled_empty("p-uid", "r-1") and committer.ledger.made_in("p-uid") is None


def test_the_commit_is_recorded_on_the_hub_pod_before_the_member_is_asked() -> None:
    committer = _ScriptedCommitter(["bound"], [])
    client = RecordingClient()
    assert _bind_with(committer, VirtualClock(), client=client) is None
    record = client.annotations["p-uid"][COMMIT_ANNOTATION]
    assert json.loads(record) == {"attempt": 1, "cluster": "east", "reservation": "r-1"}


def test_a_record_changed_under_the_hub_stops_the_bind_before_the_member_acts() -> None:
    committer = _ScriptedCommitter(["bound"], [])
    client = RecordingClient()
    # Another hub recorded its own commit after this one read the pod.
    client.annotations["p-uid"] = {COMMIT_ANNOTATION: CommitIntent("west", "r-other", 1).text()}
    status = _bind_with(committer, VirtualClock(), client=client)
    assert status is not None and status.message == RECORD_CHANGED
    assert committer.calls == []
