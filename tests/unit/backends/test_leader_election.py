"""LeaderElector against a real kube-apiserver (kubesched.harness.envtest), with short durations.

Lease 2 s, renew deadline 1.5 s, retry period 0.3 s. What is checked: one leader out of two; a graceful stop
releases the Lease and the standby takes it without waiting for it to expire; a killed leader is replaced once
the Lease went unrenewed for a lease duration; a lost Lease (foreign holder, hung requests, an unreachable server)
cancels the leader's work at once or at the renew deadline; a stale resourceVersion gets the real server's 409
and only loses that round; a crashing lead() stops the renewals, releases and re-raises; expiry follows the
injected monotonic clock and never the wall clock; bad durations are refused. Each candidate's monotonic clock
is a :class:`ManualTime` the test moves: expiry and deadlines come when the test says, so what happens before and
after them is checked as events, never as durations measured on a loaded machine. Every scenario runs in
``run_async``, which fails a test that leaves asyncio tasks behind.

Needs kube-apiserver and etcd in ``KUBEBUILDER_ASSETS``; without the variable these tests are skipped.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kubesched.backends.kube.client import KubeClient
from kubesched.backends.kube.errors import KubeApiError, KubeConfigError
from kubesched.backends.kube.kubeconfig import ClusterConnection, load_connection
from kubesched.backends.kube.leader_election import (
    LeaderElector,
    LeadershipLost,
    Requester,
    RunEnd,
    default_identity,
    microtime,
)
from kubesched.config.types import LeaderElectionConfig
from kubesched.harness.envtest import ASSETS_VARIABLE, ControlPlane, assets_directory

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]

LEASE, RENEW, RETRY = 2.0, 1.5, 0.3
WAIT = 20.0  # the longest any step may take before the test gives up on it (a hang guard, not a measure)
NAMESPACE = "kube-system"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
MISSING_ASSETS = (
    "KUBEBUILDER_ASSETS is not set: the leader election tests need kube-apiserver and etcd; get them with"
    " setup-envtest (go install sigs.k8s.io/controller-runtime/tools/setup-envtest@latest;"
    ' export KUBEBUILDER_ASSETS="$(setup-envtest use -p path 1.34.x)")'
)

e2e = pytest.mark.e2e


def settings(name: str, **changes: Any) -> LeaderElectionConfig:
    base = LeaderElectionConfig(
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        resource_name=name,
        resource_namespace=NAMESPACE,
    )
    return dataclasses.replace(base, **changes)


def unique() -> str:
    return f"le-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if not os.environ.get(ASSETS_VARIABLE):
        pytest.skip(MISSING_ASSETS)
    assets = assets_directory()
    if assets is None:
        pytest.fail(f"{ASSETS_VARIABLE}={os.environ[ASSETS_VARIABLE]} holds no executable kube-apiserver and etcd")
    with ControlPlane(assets, tmp_path_factory.mktemp("leader-election")) as control_plane:
        yield control_plane


def _connection(plane: ControlPlane, directory: Path, user: str) -> ClusterConnection:
    return load_connection(str(plane.write_kubeconfig(directory / f"{user}.kubeconfig", user=user)))


@pytest.fixture(scope="module")
def admin(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> ClusterConnection:
    return _connection(plane, tmp_path_factory.mktemp("kubeconfig"), "admin")


@pytest.fixture(scope="module")
def scheduler_user(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> ClusterConnection:
    """system:kube-scheduler: the built-in role may create Leases but get/update only kube-system/kube-scheduler."""
    return _connection(plane, tmp_path_factory.mktemp("kubeconfig"), "scheduler")


# ---------------------------------------------------------------------------------------------- helpers


def read_lease(plane: ControlPlane, name: str) -> dict[str, Any]:
    status, lease = plane.request("GET", f"{LEASES}/{name}")
    assert status == 200, lease
    assert isinstance(lease, dict)
    return lease


def lease_spec(plane: ControlPlane, name: str) -> dict[str, Any]:
    spec = read_lease(plane, name)["spec"]
    assert isinstance(spec, dict)
    return spec


def write_spec(plane: ControlPlane, name: str, **fields: Any) -> dict[str, Any]:
    """Change the Lease behind the electors' backs (admin, with the resourceVersion just read)."""
    lease = read_lease(plane, name)
    lease["spec"].update(fields)
    status, answer = plane.request("PUT", f"{LEASES}/{name}", lease)
    assert status == 200, answer
    assert isinstance(answer, dict)
    return answer


async def wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        await asyncio.sleep(0.005)


@asynccontextmanager
async def clients(connection: ClusterConnection, count: int) -> AsyncIterator[list[KubeClient]]:
    """One client (one connection pool) per candidate, as separate processes would have."""
    made = [KubeClient(connection) for _ in range(count)]
    try:
        yield made
    finally:
        for client in made:
            await client.aclose()


@dataclasses.dataclass
class Call:
    method: str
    body: Any


class ManualTime:
    """A candidate's monotonic clock, moved only by :meth:`advance`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Pauses:
    """A candidate's sleep: real pauses, each one's length recorded; with ``hold`` set, the next pause lasts until
    the candidate is stopped (``holding`` says one has begun)."""

    def __init__(self) -> None:
        self.taken: list[float] = []
        self.hold = False
        self.holding = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.taken.append(seconds)
        if self.hold:
            self.holding.set()
            await asyncio.Event().wait()
        await asyncio.sleep(seconds)


class Interposer:
    """A Requester in front of a KubeClient: records every call and error, can hang or act before a call."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.calls: list[Call] = []
        self.errors: list[tuple[str, int]] = []
        self.hang = False
        self.before: Callable[[str], None] | None = None
        self.in_flight = 0

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None, retry: bool = True
    ) -> Any:
        self.calls.append(Call(method, copy.deepcopy(body)))
        self.in_flight += 1
        try:
            if self.hang:
                await asyncio.Event().wait()  # an API server that accepted the request and never answers
            if self.before is not None:
                self.before(method)
            return await self.client.request(method, path, body=body, timeout=timeout, retry=retry)
        except KubeApiError as error:
            self.errors.append((method, error.status))
            raise
        finally:
            self.in_flight -= 1


class Candidate:
    """One elector on a clock of its own (``clock``, a :class:`ManualTime` unless ``monotonic`` is given) and its
    leader work, which records that it started and that it saw its cancellation."""

    def __init__(self, client: Requester, name: str, identity: str | None = None, **options: Any) -> None:
        self.identity = identity or default_identity()
        self.holders: list[str] = []  # what on_change reported
        self.clock = ManualTime()
        options.setdefault("monotonic", self.clock)
        self.elector = LeaderElector(client, settings(name), self.identity, on_change=self.holders.append, **options)
        self.stop = asyncio.Event()
        self.leading = asyncio.Event()
        self.work_cancelled = asyncio.Event()
        self._interposer = client if isinstance(client, Interposer) else None
        self._task: asyncio.Task[RunEnd] | None = None

    async def lead(self) -> None:
        self.leading.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.work_cancelled.set()
            raise

    def calls(self) -> list[Call]:
        """The requests its elector made (the client must be an :class:`Interposer`)."""
        assert self._interposer is not None, "wrap the client in an Interposer to see its calls"
        return self._interposer.calls

    def start(self) -> Candidate:
        self._task = asyncio.create_task(self.elector.run(self.lead, self.stop))
        return self

    @property
    def task(self) -> asyncio.Task[RunEnd]:
        assert self._task is not None
        return self._task

    async def ended(self) -> asyncio.Task[RunEnd]:
        await asyncio.wait((self.task,), timeout=WAIT)
        assert self.task.done(), f"run() of {self.identity} did not end"
        return self.task

    async def shutdown(self) -> None:
        if self._task is None or self._task.done():
            return
        self.stop.set()
        await asyncio.wait((self._task,), timeout=5)
        if not self._task.done():
            self._task.cancel()
            await asyncio.wait((self._task,))


class Proxy:
    """A TCP relay in front of kube-apiserver; close() drops every connection and refuses new ones."""

    def __init__(self, target: str) -> None:
        match = re.fullmatch(r"https://127\.0\.0\.1:(\d+)", target)
        assert match, target
        self.target_port = int(match.group(1))
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"https://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            self._writers += [writer, up_writer]
            pumps = [
                asyncio.create_task(self._pump(reader, up_writer)),
                asyncio.create_task(self._pump(up_reader, writer)),
            ]
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pumps:
                pump.cancel()
            await asyncio.wait(pumps)
            up_writer.transport.abort()
        finally:
            writer.transport.abort()
            self._handlers.discard(handler)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()
        if self._handlers:
            await asyncio.wait(set(self._handlers))


# ---------------------------------------------------------------------------------------------- scenarios


@e2e
def test_one_leader_and_a_graceful_handover_without_waiting_for_expiry(
    plane: ControlPlane, scheduler_user: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """kube-scheduler's own Lease and least-privilege identity: two candidates race, one leads, the Lease says
    so and is renewed (acquireTime kept); a graceful stop cancels the work, releases (client-go's
    ReleaseOnCancel) and the standby takes over. Its clock never moves, so the Lease never expired for it: it
    took the released Lease."""
    name = "kube-scheduler"  # the only Lease system:kube-scheduler may read and update
    status, _ = plane.request("GET", f"{LEASES}/{name}")
    assert status == 404

    async def scenario() -> None:
        async with clients(scheduler_user, 2) as (one, two):
            a, b = Candidate(Interposer(one), name), Candidate(Interposer(two), name)
            try:
                a.start()  # a real race: both find no Lease, both POST; the server lets one win
                b.start()
                await wait_until(lambda: a.leading.is_set() or b.leading.is_set(), WAIT)
                leader, follower = (a, b) if a.leading.is_set() else (b, a)
                polled = len(follower.calls())
                await wait_until(lambda: len(follower.calls()) >= polled + 3, WAIT)  # it polled meanwhile
                assert (leader.elector.is_leader, follower.elector.is_leader) == (True, False)
                assert not follower.leading.is_set()
                assert (leader.elector.leader_identity, follower.elector.leader_identity) == (leader.identity,) * 2
                first = lease_spec(plane, name)
                assert first["holderIdentity"] == leader.identity
                assert (first["leaseDurationSeconds"], first["leaseTransitions"]) == (2, 0)
                assert MICROTIME.match(first["acquireTime"]) and MICROTIME.match(first["renewTime"])
                await wait_until(lambda: lease_spec(plane, name)["renewTime"] > first["renewTime"], WAIT)
                later = lease_spec(plane, name)
                assert later["acquireTime"] == first["acquireTime"]  # kept while renewing
                assert later["leaseTransitions"] == 0
                before_stop = read_lease(plane, name)["metadata"]["resourceVersion"]

                leader.stop.set()
                assert (await leader.ended()).result() is RunEnd.STOPPED
                assert leader.work_cancelled.is_set()
                assert (leader.elector.is_leader, leader.elector.leader_identity) == (False, "")
                await wait_until(follower.leading.is_set, WAIT)
                # The follower saw the released Lease, then itself; nothing in between.
                assert follower.holders == [leader.identity, "", follower.identity]
                assert follower.elector.transitions_observed == 1

                # The server's history since just before the stop: maybe one more renewal, the release, the takeover.
                query = {
                    "watch": "1",
                    "resourceVersion": before_stop,
                    "fieldSelector": f"metadata.name={name}",
                    "timeoutSeconds": "1",
                }
                status, events = await asyncio.to_thread(plane.request, "GET", LEASES, query=query)
                assert status == 200, events
                specs = [event["object"]["spec"] for event in events]
                holders = [spec.get("holderIdentity") for spec in specs]
                released_at = holders.index("")
                assert set(holders[:released_at]) <= {leader.identity}
                released, taken = specs[released_at], specs[released_at + 1]
                assert released == {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "acquireTime": released["renewTime"],
                    "renewTime": released["renewTime"],
                    "leaseTransitions": 0,
                }
                assert taken["holderIdentity"] == follower.identity
                assert (taken["leaseDurationSeconds"], taken["leaseTransitions"]) == (2, 1)
                assert taken["acquireTime"] == taken["renewTime"] != released["renewTime"]

                follower.stop.set()
                assert (await follower.ended()).result() is RunEnd.STOPPED
                assert lease_spec(plane, name)["holderIdentity"] == ""
            finally:
                await a.shutdown()
                await b.shutdown()

    run_async(scenario())


@e2e
def test_a_killed_leader_is_replaced_after_the_lease_duration(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """Cancelling run() is a crash: the work is cancelled, nothing is released, and the standby takes over only
    once the Lease went unchanged for leaseDuration by its own clock."""
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 2) as (one, two):
            a, b = Candidate(one, name), Candidate(Interposer(two), name)
            try:
                a.start()
                await wait_until(a.leading.is_set, WAIT)
                b.start()
                await wait_until(lambda: b.elector.leader_identity == a.identity, WAIT)
                acquired = lease_spec(plane, name)["acquireTime"]

                a.task.cancel()
                await asyncio.wait((a.task,))
                assert a.task.cancelled() and a.work_cancelled.is_set()
                assert lease_spec(plane, name)["holderIdentity"] == a.identity  # not released
                polled = len(b.calls())
                await wait_until(lambda: len(b.calls()) >= polled + 3, WAIT)
                assert not b.leading.is_set(), "the Lease has not expired by the standby's clock"
                b.clock.advance(LEASE)
                await wait_until(b.leading.is_set, WAIT)
                spec = lease_spec(plane, name)
                assert spec["holderIdentity"] == b.identity
                assert spec["leaseTransitions"] == 1
                assert spec["acquireTime"] != acquired
                assert b.holders == [a.identity, b.identity]
            finally:
                await a.shutdown()
                await b.shutdown()

    run_async(scenario())


@e2e
def test_a_foreign_holder_stops_the_work_at_once(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """Someone writes another holder into the Lease: the next renewal gets 409, reads the Lease, sees the holder
    and cancels the work right away: the leader's clock stands still, so its renew deadline never passes; the lost
    leader writes nothing more."""
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            a = Candidate(Interposer(one), name)
            try:
                a.start()
                await wait_until(a.leading.is_set, WAIT)
                renewals = len(a.calls())
                await wait_until(lambda: len(a.calls()) > renewals, WAIT)  # it renews
                intruder = write_spec(plane, name, holderIdentity="intruder")
                task = await a.ended()
                with pytest.raises(LeadershipLost, match=r"the lease is now held by intruder$"):
                    task.result()
                assert a.work_cancelled.is_set()
                assert (a.elector.is_leader, a.elector.leader_identity) == (False, "intruder")
                after = read_lease(plane, name)
                assert after["metadata"]["resourceVersion"] == intruder["metadata"]["resourceVersion"]
            finally:
                await a.shutdown()

    run_async(scenario())


@e2e
def test_hung_renewals_stop_the_work_at_the_renew_deadline(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """Requests that never get an answer: each waits only for what is left of renewDeadline after the last
    successful renewal, by the leader's clock; the leader keeps its work while that clock is before the deadline,
    and cancels it once the clock has passed it, without a release."""
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            interposer = Interposer(one)
            a = Candidate(interposer, name)
            try:
                a.start()
                await wait_until(a.leading.is_set, WAIT)
                interposer.hang = True
                hung_from = len(interposer.calls)
                # The first hung renewal runs out of its budget (renewDeadline, in real time), and the leader,
                # whose clock has not moved, tries again: still leading.
                await wait_until(lambda: len(interposer.calls) >= hung_from + 2, WAIT)
                assert a.elector.is_leader and not a.work_cancelled.is_set()
                a.clock.advance(RENEW)
                task = await a.ended()
                with pytest.raises(LeadershipLost, match=r"not renewed within leaderElection\.renewDeadline \(1\.5s\)"):
                    task.result()
                assert a.work_cancelled.is_set()
                assert {call.method for call in interposer.calls[hung_from:]} == {"PUT"}
                assert not a.elector.is_leader
                assert lease_spec(plane, name)["holderIdentity"] == a.identity  # nothing could be written
            finally:
                await a.shutdown()

    run_async(scenario())


@e2e
def test_an_unreachable_server_stops_the_work_at_the_renew_deadline(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """The connection to the API server is cut and new ones are refused: renewals are retried after a retry
    period each (no hot loop) until the leader's clock passes renewDeadline after the last success, then the work
    is cancelled."""
    name = unique()

    async def scenario() -> None:
        proxy = Proxy(admin.server)
        through_proxy = dataclasses.replace(admin, server=await proxy.start())
        closed = False
        async with clients(through_proxy, 1) as (one,):
            interposer = Interposer(one)
            pauses = Pauses()
            a = Candidate(interposer, name, sleep=pauses)
            try:
                a.start()
                await wait_until(a.leading.is_set, WAIT)
                await proxy.close()
                closed = True
                cut_from, paused_from = len(interposer.calls), len(pauses.taken)
                await wait_until(lambda: len(interposer.calls) >= cut_from + 3, WAIT)
                assert a.elector.is_leader and not a.work_cancelled.is_set()
                # Between two failed attempts the leader paused a retry period (its clock stands still).
                assert len(pauses.taken[paused_from:]) >= 2 and set(pauses.taken[paused_from:]) == {RETRY}
                a.clock.advance(RENEW)
                task = await a.ended()
                unreachable = rf"renewDeadline \(1\.5s\): PUT {re.escape(LEASES)}/{name}: "  # the last error
                with pytest.raises(LeadershipLost, match=unreachable):
                    task.result()
                assert a.work_cancelled.is_set()
            finally:
                await a.shutdown()
                if not closed:
                    await proxy.close()

    run_async(scenario())


@e2e
def test_a_stale_resource_version_loses_the_round_not_the_run(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """Between the candidate's GET and PUT someone else takes the free Lease: the real server answers the stale
    resourceVersion with 409, the candidate just has not acquired it this round, sees the new holder and, as
    that one never renews, takes the Lease once it went unrenewed for a lease duration by the candidate's clock
    (leaseTransitions 1 -> 2)."""
    name = unique()
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": "", "leaseDurationSeconds": 1},
    }
    status, created = plane.request("POST", LEASES, lease)
    assert status == 201, created

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            interposer = Interposer(one)
            intruded: list[bool] = []

            def intrude(method: str) -> None:
                if method == "PUT" and not intruded:
                    now = microtime(time.time())
                    write_spec(
                        plane, name, holderIdentity="intruder", leaseDurationSeconds=2, leaseTransitions=1,
                        acquireTime=now, renewTime=now,
                    )  # fmt: skip
                    intruded.append(True)

            interposer.before = intrude
            b = Candidate(interposer, name)
            try:
                b.start()
                await wait_until(lambda: bool(interposer.errors), WAIT)
                polled = len(interposer.calls)
                await wait_until(lambda: len(interposer.calls) >= polled + 3, WAIT)  # it reads the intruder's record
                assert interposer.errors == [("PUT", 409)]
                assert not b.task.done()
                assert not b.leading.is_set() and not b.elector.is_leader
                assert b.elector.leader_identity == "intruder"
                assert lease_spec(plane, name)["holderIdentity"] == "intruder"

                b.clock.advance(LEASE)
                await wait_until(b.leading.is_set, WAIT)
                spec = lease_spec(plane, name)
                assert (spec["holderIdentity"], spec["leaseTransitions"]) == (b.identity, 2)
                assert b.holders == ["intruder", b.identity]
            finally:
                await b.shutdown()

    run_async(scenario())


@e2e
def test_a_crashing_lead_stops_the_renewals_releases_and_re_raises(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            interposer = Interposer(one)
            elector = LeaderElector(interposer, settings(name), "crasher")
            crashed_at: list[int] = []  # how many calls were made before the crash

            def renewed_twice_and_idle() -> bool:
                return [call.method for call in interposer.calls].count("PUT") >= 2 and not interposer.in_flight

            async def lead() -> None:
                # Between two renewals: one in flight would race the release (409, then a read and a retry).
                await wait_until(renewed_twice_and_idle, WAIT)
                crashed_at.append(len(interposer.calls))
                raise RuntimeError("the scheduling loop crashed")

            with pytest.raises(RuntimeError, match=r"^the scheduling loop crashed$"):
                await asyncio.wait_for(elector.run(lead, asyncio.Event()), WAIT)
            assert not elector.is_leader
            before, after = interposer.calls[: crashed_at[0]], interposer.calls[crashed_at[0] :]
            assert [call.method for call in before][:2] == ["GET", "POST"]
            assert [call.method for call in before].count("PUT") >= 2  # it was renewing while the work ran
            assert [call.method for call in after] == ["PUT"]  # the release, and no renewal
            assert after[0].body["spec"]["holderIdentity"] == ""
            lease = read_lease(plane, name)
            spec = lease["spec"]
            assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("", 1, 0)
            assert spec["acquireTime"] == spec["renewTime"]
            await asyncio.sleep(2 * RETRY)
            assert read_lease(plane, name)["metadata"]["resourceVersion"] == lease["metadata"]["resourceVersion"]
            assert len(interposer.calls) == crashed_at[0] + 1, "nothing more after the release"

    run_async(scenario())


@e2e
def test_a_lead_that_returns_releases_the_lease(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            elector = LeaderElector(one, settings(name), "finisher")
            seen: list[bool] = []

            async def lead() -> None:
                seen.append(elector.is_leader)
                await asyncio.sleep(RETRY + 0.1)

            assert await asyncio.wait_for(elector.run(lead, asyncio.Event()), WAIT) is RunEnd.LEAD_RETURNED
            assert seen == [True]
            assert (elector.is_leader, elector.leader_identity) == (False, "")
            spec = lease_spec(plane, name)
            assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)

    run_async(scenario())


@e2e
def test_expiry_follows_the_monotonic_clock_never_the_wall_clock(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """The leader's wall clock is 20 years behind (its renewTime looks long expired), a standby's 20 years ahead:
    nothing changes; the dead leader's Lease expires for the standby whose monotonic clock passes the lease
    duration, and never for one whose monotonic clock stands still. A waiting candidate stops in its pause."""
    name = unique()
    skew = 20 * 365 * 86400.0

    async def scenario() -> None:
        async with clients(admin, 3) as (one, two, three):
            pauses = Pauses()
            a = Candidate(one, name, wall=lambda: time.time() - skew)
            b = Candidate(Interposer(two), name, wall=lambda: time.time() + skew)
            c = Candidate(Interposer(three), name, sleep=pauses)
            try:
                a.start()
                await wait_until(a.leading.is_set, WAIT)
                past = datetime.datetime.fromtimestamp(time.time() - skew, tz=datetime.UTC).year
                assert lease_spec(plane, name)["renewTime"].startswith(f"{past}-")
                b.start()
                c.start()
                polled = min(len(b.calls()), len(c.calls()))
                await wait_until(lambda: min(len(b.calls()), len(c.calls())) >= polled + 3, WAIT)
                assert a.elector.is_leader
                assert not b.leading.is_set() and not c.leading.is_set()
                assert b.elector.leader_identity == c.elector.leader_identity == a.identity

                a.task.cancel()
                await asyncio.wait((a.task,))
                polled = len(b.calls())
                await wait_until(lambda: len(b.calls()) >= polled + 2, WAIT)  # it has seen a's last record
                b.clock.advance(LEASE)
                await wait_until(b.leading.is_set, WAIT)
                future = datetime.datetime.fromtimestamp(time.time() + skew, tz=datetime.UTC).year
                assert lease_spec(plane, name)["renewTime"].startswith(f"{future}-")

                await wait_until(lambda: c.elector.leader_identity == b.identity, WAIT)
                assert not c.leading.is_set()
                assert c.holders == [a.identity, b.identity]
                pauses.hold = True  # c's next pause lasts until it is stopped
                await asyncio.wait_for(pauses.holding.wait(), WAIT)
                c.stop.set()
                assert (await c.ended()).result() is RunEnd.STOPPED  # a waiting candidate stops in its pause
                assert lease_spec(plane, name)["holderIdentity"] == b.identity
            finally:
                for candidate in (a, b, c):
                    await candidate.shutdown()

    run_async(scenario())


# ---------------------------------------------------------------------------------------------- no server


class NoServer:
    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None, retry: bool = True
    ) -> Any:
        raise AssertionError(f"unexpected request {method} {path}")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"renew_deadline": 2.0},
            'leaderElection.leaseDuration: Invalid value: "2s": must be greater than leaderElection.renewDeadline (2s)',
        ),
        (
            {"retry_period": 2.0},
            'leaderElection.renewDeadline: Invalid value: "1.5s": must be greater than 1.2 × '
            "leaderElection.retryPeriod (2.4s)",
        ),
        (
            {"lease_duration": 0.0},
            'leaderElection.leaseDuration: Invalid value: "0s": must be greater than zero; '
            'leaderElection.leaseDuration: Invalid value: "0s": must be greater than '
            "leaderElection.renewDeadline (1.5s)",
        ),
        (
            {"retry_period": -0.5},
            'leaderElection.retryPeriod: Invalid value: "-500ms": must be greater than zero',
        ),
        (
            {"resource_lock": "endpointsleases", "resource_name": ""},
            'leaderElection.resourceLock: Invalid value: "endpointsleases": must be "leases"; '
            "leaderElection.resourceName: Required value",
        ),
    ],
)
def test_invalid_durations_are_refused_naming_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeConfigError) as raised:
        LeaderElector(NoServer(), settings("x", **changes), "me")
    assert str(raised.value) == message


def test_an_empty_identity_is_refused_and_a_valid_config_makes_no_request() -> None:
    with pytest.raises(KubeConfigError, match=r"^identity: Required value: the leader election identity"):
        LeaderElector(NoServer(), settings("x"), "")
    elector = LeaderElector(NoServer(), settings("x", lease_duration=2.5), "me")
    assert (elector.is_leader, elector.leader_identity, elector.transitions_observed) == (False, "", 0)
    assert elector.lease_seconds == 3  # rounded up, never below the configured duration


def test_the_default_identity_is_hostname_and_a_uuid() -> None:
    first, second = default_identity(), default_identity()
    assert re.fullmatch(
        re.escape(socket.gethostname()) + r"_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", first
    )
    assert first != second


def test_microtime_is_rfc3339_utc_with_microseconds() -> None:
    assert microtime(1_700_000_000.123456) == "2023-11-14T22:13:20.123456Z"
    assert microtime(0.0) == "1970-01-01T00:00:00.000000Z"


def test_a_candidate_stopped_before_it_starts_makes_no_request(run_async: RunAsync[None]) -> None:
    async def scenario() -> None:
        stop = asyncio.Event()
        stop.set()
        elector = LeaderElector(NoServer(), settings("x"), "me")

        async def lead() -> None:
            raise AssertionError("must not lead")

        assert await elector.run(lead, stop) is RunEnd.STOPPED

    run_async(scenario())
