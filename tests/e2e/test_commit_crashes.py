"""Every hub pod runs in exactly one member, whatever crashes (issue 25), end to end against real kube-apiservers.

A hub API server with the MemberCluster CRD, three envtest members, ``kubesched agent`` in front of each and
``kubesched run`` as the hub, all separate processes (:mod:`kubesched.testing.federation`). Fault proxies sit
between the hub and each agent and between each agent and its member's API server, so a process is SIGKILLed at
an exact step of the commit (docs/explanation/cross-cluster-commit.md): the agent before the member pod is
created, after it was created but before the reservation was deleted, and after that but before the hub heard;
the hub after a reserve, and after the member bound the pod but before the hub pod was bound; the leader of two
hub replicas mid-burst, or frozen (SIGSTOP) with its bind on the way. Answers are dropped after the agent carried
the request out; a member's API server is stopped and started again. Deletions: a hub pod deleted while the standby
takes over, a copy deleted once, never a copy for one that is itself being deleted. A seeded chaos run kills,
freezes and cuts off agents and hubs at random and checks the invariant during the run and after it settles.

Run the chaos test N times in a row (different seeds)::

    KUBESCHED_CHAOS_RUNS=20 python -m pytest tests/e2e/test_commit_crashes.py -k chaos

(``KUBESCHED_CHAOS_SEED`` fixes the first seed; each run prints its seed, and a failure names it.)
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kubesched.federation.wire import HUB_POD_UID_ANNOTATION
from kubesched.harness.envtest import ControlPlane
from kubesched.testing.fault_proxy import FaultProxy, LoggedRequest, Rule
from kubesched.testing.federation import CommitSettings, Federation, Member, commit_violations
from kubesched.testing.processes import ChildProcess, HubProcess, ProxyLoop

pytestmark = pytest.mark.e2e

SETTLE_SECONDS = 90.0  # generous: a loaded 2-core machine runs three API servers, agents and hubs


@pytest.fixture(scope="module")
def member_planes(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ControlPlane]]:
    """Three members, each with its own etcd (one of them is stopped and started again by a test)."""
    planes = {name: ControlPlane(assets, tmp_path_factory.mktemp(f"member-{name}")) for name in ("a", "b", "c")}
    try:
        with ThreadPoolExecutor(len(planes)) as pool:  # each waits seconds for its API server: together
            list(pool.map(ControlPlane.start, planes.values()))
        yield planes
    finally:
        with ThreadPoolExecutor(len(planes)) as pool:
            list(pool.map(ControlPlane.stop, planes.values()))


@pytest.fixture
def proxies() -> Iterator[ProxyLoop]:
    with ProxyLoop() as loop:
        yield loop


FederationFactory = Callable[..., Federation]


@pytest.fixture
def federation(
    control_plane: ControlPlane, member_planes: dict[str, ControlPlane], tmp_path: Path, proxies: ProxyLoop
) -> Iterator[FederationFactory]:
    """``federation(settings, members=("a", "b"), nodes_per_member=1, node_cpu="8")``: a started Federation, closed
    after the test."""
    made: list[Federation] = []

    def make(
        settings: CommitSettings | None = None,
        members: tuple[str, ...] = ("a", "b"),
        *,
        nodes_per_member: int = 1,
        node_cpu: str = "8",
    ) -> Federation:
        planes = {name: member_planes[name] for name in members}
        workdir = tmp_path / f"federation-{len(made)}"
        built = Federation(
            control_plane, planes, workdir, proxies, settings, nodes_per_member=nodes_per_member, node_cpu=node_cpu
        )
        made.append(built)
        built.start()
        return built

    yield make
    for built in made:
        built.close()


def _settled(fed: Federation, timeout: float = SETTLE_SECONDS) -> None:
    """Wait until the invariant holds with every commit settled; fail with what still breaks it."""
    last: list[str] = []

    def holds() -> bool:
        nonlocal last
        last = fed.violations(settled=True)
        return not last

    try:
        fed.wait(holds, timeout, "the invariant after settling")
    except AssertionError as error:
        raise AssertionError(f"{last}\n{error}") from None


def _all_bound(fed: Federation, timeout: float) -> None:
    """Wait until every hub pod (not being deleted) is bound; fail naming those that are not."""
    pending: list[str] = []

    def bound() -> bool:
        nonlocal pending
        pending = sorted(pod.name for pod in fed.hub_pods().values() if not pod.node and not pod.terminating)
        return not pending

    try:
        fed.wait(bound, timeout, "every hub pod is bound")
    except AssertionError as error:
        raise AssertionError(f"not bound: {pending}\n{error}") from None


def _kill_once(
    fed: Federation, victim: Callable[[Member], ChildProcess]
) -> tuple[list[str], Callable[[str], Callable[[LoggedRequest], None]]]:
    """(the members whose hook fired -- at most one --, a factory of hook callbacks per member): the first hook to
    fire SIGKILLs ``victim(member)``; later ones do nothing."""
    fired: list[str] = []

    def callback(short: str) -> Callable[[LoggedRequest], None]:
        def kill(entry: LoggedRequest) -> None:
            if fired:
                return
            fired.append(short)
            victim(fed.members[short]).kill()

        return kill

    return fired, callback


def _then_kill_at_delete(proxy: FaultProxy, kill: Callable[[LoggedRequest], None]) -> Callable[[LoggedRequest], None]:
    """A hook callback that arms ``kill`` for when the answer to the next reservation delete passes ``proxy``."""

    def arm(entry: LoggedRequest) -> None:
        proxy.hook("DELETE", r"/configmaps/kubesched-reservation-", kill, when="answer")

    return arm


def _pods_path(fed: Federation) -> str:
    return rf"^/api/v1/namespaces/{fed.namespace}/pods$"


def _remove_rules(fed: Federation, rules: list[tuple[Member, Rule]]) -> None:
    def remove() -> None:
        for member, rule in rules:
            member.api_proxy.remove(rule)
            member.agent_proxy.remove(rule)

    fed.proxies.call(remove)


# ------------------------------------------------------------------------------------------ the agent killed


@pytest.mark.parametrize("step", ["before-create", "after-create", "after-reservation-delete"])
def test_an_agent_killed_at_each_step_of_bind_leaves_the_pod_in_exactly_one_member(
    federation: FederationFactory, step: str
) -> None:
    fed = federation()
    fired, kill = _kill_once(fed, lambda member: member.agent)
    rules: list[tuple[Member, Rule]] = []

    def arm() -> None:
        for short, member in fed.members.items():
            proxy = member.api_proxy
            if step == "before-create":  # the bind's create never reaches the member
                rules.append((member, proxy.hook("POST", _pods_path(fed), kill(short), when="request")))
            elif step == "after-create":  # the member made the pod; the agent never hears
                rules.append((member, proxy.hook("POST", _pods_path(fed), kill(short), when="answer")))
            else:  # the member made the pod and deleted the reservation; the hub never hears
                rules.append(
                    (
                        member,
                        proxy.hook(
                            "POST", _pods_path(fed), _then_kill_at_delete(proxy, kill(short)), when="answer", drop=False
                        ),
                    )
                )

    fed.proxies.call(arm)
    hub = fed.hub("h1")
    hub.start()
    fed.create_pod("web")
    fed.wait(lambda: bool(fired), 60, f"an agent is killed {step}")
    [short] = fired
    killed = fed.members[short]
    killed.agent.wait_dead()
    _remove_rules(fed, rules)
    made = [pod for pod in fed.member_pods(short) if pod.copy]
    assert len(made) == (0 if step == "before-create" else 1), made
    if step == "after-reservation-delete":
        assert fed.reservations(short) == []  # the bind deleted it: the agent died before answering
    elif step == "after-create":
        assert len(fed.reservations(short)) == 1

    # No new pod fits there any more: a placement made again goes to the other member, so only the truth (the pod
    # made there is the commit) keeps the hub pod there.
    fed.cordon(short)
    # The agent is started again once the hub has given up repeating the bind and asks to settle the commit: the
    # restarted agent's answer to that release is what decides where the pod goes.
    fed.wait(lambda: bool(killed.agent_proxy.requests("DELETE", r"^/v1/reservations/")), 60, "the hub settles")
    killed.agent.start()
    fed.wait(lambda: "web" in fed.bound(), SETTLE_SECONDS, "the hub pod is bound")
    other = next(member.name for member in fed.members.values() if member is not killed)
    assert fed.bound()["web"] == (other if step == "before-create" else killed.name)
    _settled(fed)
    assert hub.alive, hub.output()


# -------------------------------------------------------------------------------------------- the hub killed


@pytest.mark.parametrize("step", ["after-reserve", "after-member-bind"])
def test_a_hub_killed_mid_commit_and_restarted_leaves_the_pod_in_exactly_one_member(
    federation: FederationFactory, step: str
) -> None:
    fed = federation()
    first = fed.hub("h1")
    fired, kill = _kill_once(fed, lambda member: first)
    path = r"^/v1/reservations$" if step == "after-reserve" else r"^/v1/bind$"

    def arm() -> list[tuple[Member, Rule]]:
        return [
            (member, member.agent_proxy.hook("POST", path, kill(short), when="answer"))
            for short, member in fed.members.items()
        ]

    rules = fed.proxies.call(arm)
    first.start()
    uid = fed.create_pod("web")
    fed.wait(lambda: bool(fired), 60, f"the hub is killed {step}")
    first.wait_dead()
    _remove_rules(fed, rules)
    [short] = fired
    cluster = fed.members[short].name
    assert "web" not in fed.bound()
    copies = [pod for pod in fed.member_pods(short) if pod.copy]
    assert len(copies) == (0 if step == "after-reserve" else 1), copies
    assert len(fed.reservations(short)) == (1 if step == "after-reserve" else 0)
    fed.cordon(short)  # a placement made again goes to the other member

    second = fed.hub("h2")
    second.start()
    fed.wait(lambda: "web" in fed.bound(), SETTLE_SECONDS, "the restarted hub binds the pod")
    _settled(fed)
    if step == "after-member-bind":
        assert fed.bound()["web"] == cluster  # adopted where it was made
        fed.wait(lambda: _adopted(fed, second, uid), 30, "the audit record says adopted")
    else:  # placed anew; the first reservation expires by its TTL
        assert fed.bound()["web"] != cluster
        fed.wait(lambda: not fed.reservations(short), SETTLE_SECONDS, "the reservation left behind expires")
    assert second.alive, second.output()


def _adopted(fed: Federation, hub: HubProcess, uid: str) -> bool:
    for record in fed.audit_records(hub):
        if record["pod"]["uid"] != uid or record["result"] != "Scheduled":
            continue
        reasons = [reason for verdict in record["verdicts"] for reason in verdict["reasons"]]
        return any(reason.startswith("adopted: cluster ") for reason in reasons)
    return False


# -------------------------------------------------------------------------------- two hubs, the leader killed


def _leader(fed: Federation) -> str:
    """The hostname of the hub replica holding the Lease ("" none)."""
    status, lease = fed.hub_plane.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{fed.namespace}/leases/kubesched-hub"
    )
    holder = str(lease["spec"].get("holderIdentity") or "") if status == 200 else ""
    return holder.split("_")[0]


def test_of_two_hub_replicas_the_leader_killed_mid_burst_every_pod_lands_in_exactly_one_member(
    federation: FederationFactory,
) -> None:
    fed = federation(CommitSettings(leader_elect=True), members=("a", "b", "c"))
    replicas = {name: fed.hub(name) for name in ("h1", "h2")}
    for replica in replicas.values():
        replica.start()
    fed.wait(lambda: _leader(fed) in replicas, 60, "a replica leads")
    leader = _leader(fed)
    fired: list[str] = []

    def kill_leader(entry: LoggedRequest) -> None:
        if not fired:
            fired.append(leader)
            replicas[leader].kill()

    pods = 60
    for index in range(pods):
        fed.create_pod(f"burst-{index}")
    fed.wait(lambda: len(fed.bound()) >= 10, 120, "the leader binds the first pods")
    # The leader dies the moment a member answers one of its binds: that pod was made, its hub pod is not bound.
    rules = fed.proxies.call(
        lambda: [
            (m, m.agent_proxy.hook("POST", r"^/v1/bind$", kill_leader, when="answer")) for m in fed.members.values()
        ]
    )
    fed.wait(lambda: bool(fired), 60, "the leader is killed at a bind's answer")
    replicas[leader].wait_dead()
    _remove_rules(fed, rules)
    bound_at_kill = fed.bound()
    assert len(bound_at_kill) < pods, "every pod was bound before the kill: the test proves nothing"
    assert not fed.violations(settled=False)
    standby = next(name for name in replicas if name != leader)
    fed.wait(lambda: _leader(fed) == standby, 60, "the standby takes over")
    replicas[leader].start()  # back as the standby
    fed.wait(lambda: len(fed.bound()) == pods, SETTLE_SECONDS * 2, "every pod is bound")
    bound = fed.bound()
    assert all(bound[name] == cluster for name, cluster in bound_at_kill.items())  # nobody moved
    _settled(fed)
    assert all(replica.alive for replica in replicas.values()), fed.logs()


def test_a_leader_frozen_with_its_bind_in_flight_is_fenced_out_after_the_standby_took_over(
    federation: FederationFactory,
) -> None:
    """The leader freezes (SIGSTOP: a long GC pause, a suspended VM) the moment its bind leaves for a member, and
    that bind is held up on the way; the standby takes over, settles the open commit and places the pod. When the
    old bind arrives it carries the old term's fencing token and is refused; the old leader, woken up, has lost its
    Lease and stops. One copy, where the new leader bound the hub pod."""
    fed = federation(CommitSettings(leader_elect=True))
    replicas = {name: fed.hub(name) for name in ("h1", "h2")}
    for replica in replicas.values():
        replica.start()
    fed.wait(lambda: _leader(fed) in replicas, 60, "a replica leads")
    leader = _leader(fed)
    standby = next(name for name in replicas if name != leader)
    frozen: list[Member] = []
    rules: list[tuple[Member, Rule]] = []

    def freeze(member: Member) -> Callable[[LoggedRequest], None]:
        def callback(entry: LoggedRequest) -> None:
            if frozen:
                return
            frozen.append(member)
            replicas[leader].pause()
            for other, rule in rules:
                if other is not member:
                    other.agent_proxy.remove(rule)

        return callback

    def arm() -> None:
        for member in fed.members.values():
            rules.append((member, member.agent_proxy.delay("POST", r"^/v1/bind$", 10.0, 1)))
            rules.append(
                (member, member.agent_proxy.hook("POST", r"^/v1/bind$", freeze(member), when="request", drop=False))
            )

    fed.proxies.call(arm)
    fed.create_pod("web")
    fed.wait(lambda: bool(frozen), 60, "the leader freezes as its bind leaves")
    [member] = frozen
    try:
        fed.wait(lambda: _leader(fed) == standby, 60, "the standby takes over")
        fed.wait(lambda: "web" in fed.bound(), SETTLE_SECONDS, "the new leader binds the pod")
        old_bind = next(e for e in member.agent_proxy.requests("POST", r"^/v1/bind$") if "delay" in e.fault)
        fed.wait(lambda: old_bind.ended is not None, 60, "the old leader's bind arrives")
        assert old_bind.status == 409  # Fenced: a newer hub has spoken to this member since
    finally:
        replicas[leader].resume()
    fed.wait(lambda: not replicas[leader].alive, 60, "the old leader stops: it lost its Lease")
    _settled(fed)
    assert replicas[standby].alive, replicas[standby].output()


def test_a_hub_pod_deleted_while_the_standby_takes_over_has_its_copy_deleted_by_the_new_leader(
    federation: FederationFactory,
) -> None:
    """The standby hears of a deletion before it leads: the member's copy must still go once it leads (not only
    by a leader that was running when the pod was deleted), and the hub pod must not stay terminating. One member:
    it has seen the second term's fencing token."""
    fed = federation(CommitSettings(leader_elect=True), members=("a",))
    replicas = {name: fed.hub(name) for name in ("h1", "h2")}
    for replica in replicas.values():
        replica.start()
    fed.wait(lambda: _leader(fed) in replicas, 60, "a replica leads")
    first = _leader(fed)
    fed.create_pod("web")
    fed.wait(lambda: "web" in fed.bound(), SETTLE_SECONDS, "the first leader binds web")
    # A failover: the members now refuse the first term's fencing token.
    replicas[first].kill()
    replicas[first].wait_dead()
    second = next(name for name in replicas if name != first)
    fed.wait(lambda: _leader(fed) == second, 60, "the standby takes over")
    fed.create_pod("api")
    fed.wait(lambda: "api" in fed.bound(), SETTLE_SECONDS, "the second leader binds api")
    replicas[first].start()  # a standby again, on the informers
    fed.wait(lambda: "informers synced" in replicas[first].since_start(), 60, "the restarted replica is synced")
    # The leader dies; the web pod is deleted before the restarted replica holds the Lease.
    replicas[second].kill()
    replicas[second].wait_dead()
    web_cluster = fed.bound()["web"]
    fed.delete_pod("web")
    fed.wait(lambda: _leader(fed) == first, 60, "the restarted replica takes over")
    fed.wait(lambda: "web" not in {pod.name for pod in fed.hub_pods().values()}, SETTLE_SECONDS, "the hub pod is gone")
    _settled(fed)
    assert web_cluster in {member.name for member in fed.members.values()}


def test_a_deleted_hub_pod_has_its_copy_deleted_once_and_no_deletion_recorded_twice(
    federation: FederationFactory,
) -> None:
    """The hub deletes the copy of a deleted hub pod and removes the hub pod; the copy is then terminating for as
    long as its kubelet takes (for ever in envtest): reconciliation must leave it be, not delete it again at every
    refresh and write a Deleted audit record each time."""
    fed = federation(members=("a",))
    hub = fed.hub("h1")
    hub.start()
    uid = fed.create_pod("web")
    fed.wait(lambda: "web" in fed.bound(), SETTLE_SECONDS, "web is bound")
    fed.delete_pod("web")
    fed.wait(lambda: uid not in fed.hub_pods(), SETTLE_SECONDS, "the hub pod is removed")
    [copy] = fed.member_pods("a")
    assert copy.terminating  # the hub deleted it (envtest has no kubelet to finish it)
    proxy = fed.members["a"].agent_proxy
    refreshes = len(proxy.requests("GET", r"^/v1/state$"))
    fed.wait(lambda: len(proxy.requests("GET", r"^/v1/state$")) >= refreshes + 6, 60, "six more refreshes")
    deleted = [r for r in fed.audit_records(hub) if r["pod"]["uid"] == uid and r["result"] == "Deleted"]
    assert deleted == []
    assert len(proxy.requests("DELETE", r"^/v1/pods/")) <= 2  # the hub's own deletion, and one look by reconciliation


def test_a_copy_is_not_deleted_for_a_copy_that_is_itself_being_deleted(federation: FederationFactory) -> None:
    """Reconciliation deletes a member's copy of a hub pod bound elsewhere only once the other member confirms its
    own copy: one being deleted (evicted, drained) is no confirmation -- deleting this one would leave none."""
    fed = federation()
    hub = fed.hub("h1")
    hub.start()
    uid = fed.create_pod("web")
    fed.wait(lambda: "web" in fed.bound(), SETTLE_SECONDS, "web is bound")
    bound_to = fed.bound()["web"]
    [here] = [short for short, member in fed.members.items() if member.name == bound_to]
    [there] = [short for short in fed.members if short != here]
    # A second copy where the hub pod is not bound (an operator placed it again while the member was away, say) ...
    stray = fed.pod("web")
    stray["metadata"]["annotations"] = {HUB_POD_UID_ANNOTATION: uid}
    stray["spec"]["nodeName"] = next(iter(fed.allocatable(there)))
    del stray["spec"]["nodeSelector"], stray["spec"]["schedulerName"]
    plane = fed.members[there].plane
    status, answer = plane.request("POST", f"/api/v1/namespaces/{fed.namespace}/pods", stray)
    assert status == 201, answer
    # ... and the copy where it is bound is being deleted (envtest has no kubelet: it stays so).
    status, answer = fed.members[here].plane.request("DELETE", f"/api/v1/namespaces/{fed.namespace}/pods/web")
    assert status == 200, answer
    asked, refreshed = fed.members[here].agent_proxy, fed.members[there].agent_proxy
    fed.wait(lambda: bool(asked.requests("GET", r"^/v1/hubpods/")), 60, "reconciliation asks the bound member")
    refreshes = len(refreshed.requests("GET", r"^/v1/state$"))
    fed.wait(lambda: len(refreshed.requests("GET", r"^/v1/state$")) >= refreshes + 4, 60, "four more refreshes")
    assert [pod.name for pod in fed.member_pods(there) if pod.copy] == ["web"]  # the only running copy is kept
    assert [r for r in fed.audit_records(hub) if r["result"] == "Deleted"] == []


# ------------------------------------------------------------------------------------------ answers dropped


def test_answers_dropped_after_the_agent_acted_never_make_a_second_copy(federation: FederationFactory) -> None:
    """A proxy between hub and agent lets each request through and drops the agent's answer: a reserve (repeated:
    the same reservation), a bind (repeated: the member answers the pod it made), every bind of a pod and then the
    release that settles it (asked again: the member answers the pod)."""
    fed = federation(CommitSettings(bind_attempts=2))
    hub = fed.hub("h1")
    hub.start()

    def drop_on_every_agent(method: str, path: str, times: int) -> list[tuple[Member, Rule]]:
        return fed.proxies.call(
            lambda: [
                (m, m.agent_proxy.drop(method, path, times, after_upstream=True, watch=False))
                for m in fed.members.values()
            ]
        )

    def dropped(method: str, path: str) -> list[LoggedRequest]:
        return [
            entry
            for member in fed.members.values()
            for entry in member.agent_proxy.requests(method, path)
            if entry.fault.endswith("drop")
        ]

    cases = [
        ("reserve", [("POST", r"^/v1/reservations$", 1)]),
        ("bind", [("POST", r"^/v1/bind$", 1)]),
        ("bind-and-release", [("POST", r"^/v1/bind$", 2), ("DELETE", r"^/v1/reservations/", 1)]),
    ]
    for name, drops in cases:
        before = {(method, path): len(dropped(method, path)) for method, path, _ in drops}
        rules = [rule for method, path, times in drops for rule in drop_on_every_agent(method, path, times)]
        fed.create_pod(name)
        fed.wait(lambda name=name: name in fed.bound(), SETTLE_SECONDS, f"pod {name} is bound")  # type: ignore[misc]
        _remove_rules(fed, rules)
        for method, path, times in drops:  # each answer was dropped as often as asked (one member was used)
            assert len(dropped(method, path)) - before[(method, path)] == times, (name, method, path)
        assert not fed.violations(settled=False)
    _settled(fed)
    assert hub.alive, hub.output()


def test_a_pod_create_the_member_answered_504_and_carried_out_later_is_waited_for_not_placed_again(
    federation: FederationFactory,
) -> None:
    """A member API server whose etcd is slow answers a create ``504 Timeout`` and writes the pod a moment later
    (kube-apiserver: "the server may still be processing the request"). The agent cannot say the pod was not made:
    a release must wait for the pod (Settling) instead of answering released, or the hub places the pod again
    elsewhere and the late write makes a second copy."""
    fed = federation()
    hub = fed.hub("h1")
    hub.start()
    late_writes = fed.proxies.call(
        lambda: {
            short: member.api_proxy.fail("POST", _pods_path(fed), 504, forward_after=3.0)
            for short, member in fed.members.items()
        }
    )
    uid = fed.create_pod("web")

    def answered_504() -> str:
        return next((short for short, rule in late_writes.items() if rule.hits), "")

    fed.wait(lambda: bool(answered_504()), 60, "a member answers a create 504")
    short = answered_504()
    _remove_rules(fed, [(fed.members[other], rule) for other, rule in late_writes.items() if other != short])
    fed.cordon(short)  # a placement made again goes to the other member
    seen: list[str] = []

    def bound_without_a_second_copy() -> bool:
        seen.extend(problem for problem in fed.violations(settled=False) if problem not in seen)
        return "web" in fed.bound()

    fed.wait(bound_without_a_second_copy, SETTLE_SECONDS, "web is bound")
    _remove_rules(fed, [(fed.members[short], late_writes[short])])
    proxy = fed.members[short].api_proxy

    def written_late() -> bool:  # every create answered 504 has reached the member since
        late = [entry for entry in proxy.log if entry.fault == "late"]
        return len(late) == late_writes[short].hits and all(entry.ended is not None for entry in late)

    fed.wait(written_late, 60, "the late writes land")
    assert any(entry.status == 201 for entry in proxy.log if entry.fault == "late")  # the member made the pod
    bound_without_a_second_copy()
    _settled(fed)
    assert seen == []
    assert fed.bound()["web"] == fed.members[short].name  # where the late write made it
    assert [r for r in fed.audit_records(hub) if r["pod"]["uid"] == uid and r["result"] == "Deleted"] == []


# ----------------------------------------------------------------------------------- a member's API server down


def test_a_member_api_server_stopped_and_started_again_every_pod_lands_in_exactly_one_member(
    federation: FederationFactory, member_planes: dict[str, ControlPlane]
) -> None:
    fed = federation()
    hub = fed.hub("h1")
    hub.start()
    for index in range(20):
        fed.create_pod(f"before-{index}")
    fed.wait(lambda: len(fed.bound()) >= 5, 120, "the first pods are bound")
    plane = member_planes["a"]
    plane.stop()  # etcd and kube-apiserver; etcd's data directory stays
    try:
        for index in range(20):
            fed.create_pod(f"during-{index}")
        time.sleep(5)  # commits to the stopped member fail meanwhile; the other takes what it can
    finally:
        plane.start()
    fed.wait(lambda: len(fed.bound()) == 40, SETTLE_SECONDS * 2, "every pod is bound")
    _settled(fed)
    assert hub.alive and all(m.agent.alive for m in fed.members.values()), fed.logs()


# ------------------------------------------------------------------------------------------------ chaos

CHAOS_RUNS = int(os.environ.get("KUBESCHED_CHAOS_RUNS", "1"))
CHAOS_SEED = int(os.environ.get("KUBESCHED_CHAOS_SEED", str(random.SystemRandom().randrange(1 << 32))))
CHAOS_PODS = 200
CHAOS_DELETED = 10
CHAOS_SECONDS = 45.0  # kills go on this long after the first pods were created


class Chaos:
    """Faults at random moments and at random steps of the commit: SIGKILLs of agents and hubs (started again a
    moment later), a leader frozen past its Lease, answers lost between hub and agent and between agent and member,
    a member answering a create 504 and writing it later, a hub cut off from an agent."""

    def __init__(self, fed: Federation, hubs: list[HubProcess], rng: random.Random) -> None:
        self.fed = fed
        self.hubs = hubs
        self.rng = rng
        self.restart_at: dict[int, float] = {}  # id(process) -> when to start it again
        self.events: list[str] = []
        self.rules: list[tuple[Member, Rule]] = []
        self.lifted_at: list[tuple[float, Member, Rule]] = []  # faults that end by themselves
        self.paused: list[tuple[float, ChildProcess]] = []  # (when to resume, process)
        self.violations: list[str] = []
        self.leading: HubProcess | None = None
        self.agents_up: dict[str, float] = {short: time.time() for short in fed.members}  # wall clock of the start

    def processes(self) -> list[ChildProcess]:
        return [*self.hubs, *(member.agent for member in self.fed.members.values())]

    def observe(self) -> None:
        """Note which replica leads (the hooks kill it from the proxies' thread without asking the API server)."""
        name = _leader(self.fed)
        self.leading = next((hub for hub in self.hubs if hub.name == f"hub {name}" and hub.alive), None)

    def act(self) -> None:
        """One random fault."""
        rng, fed = self.rng, self.fed
        short = rng.choice(sorted(fed.members))
        member = fed.members[short]
        choice = rng.random()
        if choice < 0.2:
            if member.agent.kill():
                self.events.append(f"kill agent {short}")
        elif choice < 0.27:
            hub = self.leading or rng.choice(self.hubs)
            if hub.kill():
                self.events.append(f"kill {hub.name}")
        elif choice < 0.3:  # frozen past its Lease: the other replica takes over, then it wakes up mid-commit
            leader = self.leading
            seconds = rng.uniform(4.0, 7.0)
            if leader is not None and all(process is not leader for _, process in self.paused) and leader.pause():
                self.paused.append((time.monotonic() + seconds, leader))
                self.events.append(f"pause {leader.name} for {seconds:.1f} s")
        elif choice < 0.7:
            self.arm_step_kill(short)
        elif choice < 0.78:
            method, path = rng.choice(
                [("POST", r"^/v1/bind$"), ("DELETE", r"^/v1/reservations/"), ("POST", r"^/v1/reservations$")]
            )
            times = rng.randint(1, 3)
            self._rule(member, lambda: member.agent_proxy.drop(method, path, times, after_upstream=True, watch=False))
            self.events.append(f"drop {times} answer(s) of {method} {path} from agent {short}")
        elif choice < 0.85:  # a slow etcd: the member answers 504 and writes the pod a moment later
            later = rng.uniform(0.3, 1.0)  # well within the agents' in-flight window
            self._rule(member, lambda: member.api_proxy.fail("POST", _pods_path(fed), 504, 1, forward_after=later))
            self.events.append(f"the member answers a create 504 and makes the pod {later:.1f} s later ({short})")
        elif choice < 0.9:
            method, path = rng.choice(
                [
                    ("POST", _pods_path(fed)),
                    ("DELETE", r"/configmaps/kubesched-reservation-"),
                    ("POST", r"/configmaps$"),
                ]
            )
            self._rule(member, lambda: member.api_proxy.drop(method, path, 1, after_upstream=True, watch=False))
            self.events.append(f"drop the member's answer to {method} {path} ({short})")
        else:
            seconds = rng.uniform(1.0, 4.0)
            rule = self._rule(member, lambda: member.agent_proxy.drop(None, r"^/", None))
            self.lifted_at.append((time.monotonic() + seconds, member, rule))
            self.events.append(f"cut the hub off agent {short} for {seconds:.1f} s")

    def _rule(self, member: Member, add: Callable[[], Rule]) -> Rule:
        rule = self.fed.proxies.call(add)
        self.rules.append((member, rule))
        return rule

    def arm_step_kill(self, short: str) -> None:
        """Kill a process when the next request of one step of the commit passes one of ``short``'s proxies."""
        fed, member = self.fed, self.fed.members[short]
        pods = _pods_path(fed)
        steps: list[tuple[str, str, str, str, str]] = [  # (victim, proxy, method, path, when)
            ("agent", "api", "POST", pods, "request"),  # the create never reaches the member
            ("agent", "api", "POST", pods, "in flight"),  # it reaches the member after the agent died
            ("agent", "api", "POST", pods, "answer"),  # the member made the pod
            ("agent", "api", "DELETE", r"/configmaps/kubesched-reservation-", "answer"),
            ("agent", "api", "POST", r"/configmaps$", "answer"),  # a reservation (or a fence) stored
            ("hub", "agent", "POST", r"^/v1/reservations$", "answer"),
            ("hub", "agent", "POST", r"^/v1/bind$", "answer"),
            ("hub", "agent", "DELETE", r"^/v1/reservations/", "answer"),
        ]
        victim, side, method, path, when = self.rng.choice(steps)
        proxy = member.api_proxy if side == "api" else member.agent_proxy
        label = f"kill {victim} at {method} {path} {when} ({short})"

        def kill(entry: LoggedRequest) -> None:
            process = member.agent if victim == "agent" else self.leading
            if process is not None and process.kill():
                self.events.append(label)

        if when == "in flight":
            delay = self.rng.uniform(0.2, 1.5)  # within the agent's request timeout: the member still takes it
            self._rule(member, lambda: proxy.delay(method, path, delay, 1))
            self._rule(member, lambda: proxy.hook(method, path, kill, when="request", drop=False))
        else:
            self._rule(member, lambda: proxy.hook(method, path, kill, when="answer" if when == "answer" else "request"))

    def restart_dead(self) -> None:
        now = time.monotonic()
        for lifted in [entry for entry in self.lifted_at if entry[0] <= now]:
            self.lifted_at.remove(lifted)
            _remove_rules(self.fed, [lifted[1:]])
        for paused in [entry for entry in self.paused if entry[0] <= now]:
            self.paused.remove(paused)
            paused[1].resume()
        for process in self.processes():
            key = id(process)
            if process.alive:
                self.restart_at.pop(key, None)
                continue
            when = self.restart_at.setdefault(key, now + self.rng.uniform(0.2, 3.0))
            if when <= now:
                self._start(process)

    def _start(self, process: ChildProcess) -> None:
        process.wait_dead()
        process.start()
        self.restart_at.pop(id(process), None)
        for short, member in self.fed.members.items():
            if member.agent is process:
                self.agents_up[short] = time.time()

    def check(self) -> None:
        """The invariant's every-moment half, and no reservation stored long past its expiry by an agent that ran
        all that time (5 s of slack for a loaded machine)."""
        snapshot = self.fed.snapshot()
        problems = commit_violations(snapshot, settled=False)
        grace = self.fed.settings.reservation_grace + 5.0
        for short, member in self.fed.members.items():
            if not member.agent.alive or snapshot.taken_at - self.agents_up[short] < grace:
                continue
            for reservation in snapshot.members[member.name].reservations:
                late = snapshot.taken_at - reservation.expires_at
                if late > grace:
                    problems.append(f"reservation {reservation.name} in {member.name} is {late:.1f} s past its expiry")
        for problem in problems:
            if problem not in self.violations:
                self.violations.append(problem)

    def calm(self) -> None:
        """No more faults; every process running."""
        _remove_rules(self.fed, self.rules)
        self.rules.clear()
        self.lifted_at.clear()
        for _, process in self.paused:
            process.resume()
        self.paused.clear()
        for process in self.processes():
            if not process.alive:
                self._start(process)


@pytest.mark.parametrize("run", range(CHAOS_RUNS))
def test_chaos_every_hub_pod_runs_in_exactly_one_member(federation: FederationFactory, run: int) -> None:
    seed = CHAOS_SEED + run
    rng = random.Random(seed)
    settings = CommitSettings(ttl_seconds=6.0, in_flight_seconds=3.0, leader_elect=True)
    fed = federation(settings, members=("a", "b", "c"), nodes_per_member=2, node_cpu="10")
    hubs = [fed.hub(name) for name in ("h1", "h2")]
    for hub in hubs:
        hub.start()
    chaos = Chaos(fed, hubs, rng)
    names = [f"chaos-{index}" for index in range(CHAOS_PODS)]
    cpus = ["100m", "200m", "300m"]
    to_delete = set(rng.sample(names, CHAOS_DELETED))
    created = 0
    started = time.monotonic()
    next_fault = started + rng.uniform(0.5, 2.0)
    try:
        while time.monotonic() - started < CHAOS_SECONDS or created < CHAOS_PODS:
            chaos.observe()
            for name in names[created : created + rng.randint(3, 12)]:
                fed.create_pod(name, rng.choice(cpus))
                created += 1
            if to_delete and rng.random() < 0.2:
                victim = rng.choice(sorted(set(names[:created]) & to_delete) or [""])
                if victim:
                    fed.delete_pod(victim)
                    to_delete.discard(victim)
            if time.monotonic() >= next_fault:
                chaos.act()
                next_fault = time.monotonic() + rng.uniform(0.3, 1.5)
            chaos.restart_dead()
            chaos.check()
            time.sleep(0.2)
        chaos.calm()
        for name in sorted(to_delete):  # deletions the loop did not get to
            fed.delete_pod(name)
        _all_bound(fed, SETTLE_SECONDS * 2)
        _settled(fed, SETTLE_SECONDS * 2)
        chaos.check()
    except AssertionError as error:
        raise AssertionError(
            f"chaos seed {seed} (KUBESCHED_CHAOS_SEED={seed}); faults: {chaos.events}\n"
            f"violations seen during the run: {chaos.violations}\n{error}"
        ) from None
    assert not chaos.violations, f"chaos seed {seed}: {chaos.violations}\nfaults: {chaos.events}\n{fed.logs()}"
    assert chaos.events, "no fault was injected"
    print(f"chaos seed {seed}: {len(chaos.events)} faults, {len(fed.deleted)} hub pods deleted: {chaos.events}")
