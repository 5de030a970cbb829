"""The crash tests' check of the commit invariant (kubesched.testing.federation.commit_violations) on hand-made
snapshots: it must name each way the invariant breaks, or the end-to-end tests that rely on it prove nothing."""

from __future__ import annotations

from kubesched.testing.federation import (
    FederationSnapshot,
    HubPodView,
    MemberPodView,
    MemberSnapshot,
    ReservationView,
    commit_violations,
)

NOW = 1000.0
NODE = {"cpu": 1000, "memory": 1 << 30, "pods": 10}


def _hub(uid: str, node: str = "", *, terminating: bool = False) -> HubPodView:
    return HubPodView(uid, f"pod-{uid}", node, terminating, {})


def _copy(uid: str, *, cpu: int = 100, terminating: bool = False, finished: bool = False) -> MemberPodView:
    return MemberPodView(f"pod-{uid}", uid, "n1", {"cpu": cpu}, terminating, finished)


def _member(*pods: MemberPodView, reservations: tuple[ReservationView, ...] = ()) -> MemberSnapshot:
    return MemberSnapshot(list(pods), {"n1": dict(NODE)}, list(reservations))


def _snapshot(hub: list[HubPodView], **members: MemberSnapshot) -> FederationSnapshot:
    return FederationSnapshot({pod.uid: pod for pod in hub}, dict(members), NOW)


def test_one_copy_per_bound_hub_pod_in_its_cluster_holds() -> None:
    snapshot = _snapshot([_hub("p", "a"), _hub("q", "b")], a=_member(_copy("p")), b=_member(_copy("q")))
    assert commit_violations(snapshot, settled=True) == []


def test_copies_in_two_members_break_it_at_any_moment() -> None:
    snapshot = _snapshot([_hub("p")], a=_member(_copy("p")), b=_member(_copy("p")))
    [problem] = commit_violations(snapshot, settled=False)
    assert problem == "hub pod pod-p runs in more than one member: a:pod-p, b:pod-p"


def test_a_copy_being_deleted_or_finished_is_no_copy() -> None:
    snapshot = _snapshot(
        [_hub("p", "b")],
        a=_member(_copy("p", terminating=True)),
        b=_member(_copy("p")),
        c=_member(_copy("p", finished=True)),
    )
    assert commit_violations(snapshot, settled=True) == []


def test_once_settled_a_bound_pod_needs_its_copy_where_it_is_bound_and_every_pod_is_bound() -> None:
    snapshot = _snapshot([_hub("p", "a"), _hub("q", "a"), _hub("r")], a=_member(_copy("q")), b=_member(_copy("p")))
    assert commit_violations(snapshot, settled=False) == []
    assert commit_violations(snapshot, settled=True) == [
        "hub pod pod-p is bound to a; its copies: b:pod-p",
        "hub pod pod-r is not bound",
    ]


def test_once_settled_no_copy_is_left_of_a_deleted_hub_pod() -> None:
    snapshot = _snapshot([_hub("t", "a", terminating=True)], a=_member(_copy("t"), _copy("gone")))
    assert commit_violations(snapshot, settled=True) == [
        "a copy of deleted hub pod gone is left: a:pod-gone",
        "a copy of deleted hub pod t is left: a:pod-t",
    ]


def test_a_node_holding_more_than_its_allocatable_breaks_it_counting_live_reservations_once() -> None:
    live = ReservationView("kubesched-reservation-r1", "n1", "other", {"cpu": 300}, NOW + 5)
    made = ReservationView("kubesched-reservation-r2", "n1", "p", {"cpu": 800}, NOW + 5)  # its pod holds it
    expired = ReservationView("kubesched-reservation-r3", "n1", "x", {"cpu": 800}, NOW - 1)
    fits = _snapshot([_hub("p", "a")], a=_member(_copy("p", cpu=700), reservations=(live, made, expired)))
    assert commit_violations(fits, settled=False) == []
    over = _snapshot(
        [_hub("p", "a")], a=_member(_copy("p", cpu=700), _copy("q", cpu=1, terminating=True), reservations=(live,))
    )
    [problem] = commit_violations(over, settled=False)
    assert problem.startswith("node n1 of a holds more than its allocatable: {'cpu': (1001, 1000)}")


def test_once_settled_no_reservation_is_stored_past_its_expiry_and_the_grace() -> None:
    late = ReservationView("kubesched-reservation-r1", "n1", "p", {"cpu": 1}, NOW - 10)
    snapshot = _snapshot([], a=_member(reservations=(late,)))
    assert commit_violations(snapshot, settled=True, reservation_grace=11) == []
    assert commit_violations(snapshot, settled=True, reservation_grace=9) == [
        "reservation kubesched-reservation-r1 in a is stored 10.0 s past its expiry"
    ]
