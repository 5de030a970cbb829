"""ClusterReservation and ClusterBind on their own: args errors with field paths, reservation ids, the ledger,
and what each does in a scheduler without a cluster committer (the end-to-end flow is tests/e2e/
test_two_phase_commit.py, against real agents)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.errors import FieldError, ValidationFailed
from kubesched.federation.wire import RESERVATION_ID_PATTERN
from kubesched.framework.clusters import CommitLedger
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.multicluster import (
    ClusterBind,
    ClusterBindArgs,
    ClusterReservation,
    ClusterReservationArgs,
)
from kubesched.plugins.multicluster.bind import NOT_RESERVED
from kubesched.plugins.multicluster.reservation import reservation_id
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle


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
    ledger.succeeded("east")
    assert ledger.consecutive("east") == (0, None)


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
