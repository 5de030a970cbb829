"""LeaderElector against a real kube-apiserver (kubesched.harness.envtest), with short durations.

Lease 2 s, renew deadline 1.5 s, retry period 0.3 s. What is checked, with measured times: one leader out of
two; a graceful stop releases the Lease and the standby takes over within a candidate's pause (not a lease
duration); a killed leader is replaced after a lease duration; a lost Lease (foreign holder, hung requests, an
unreachable server) cancels the leader's work at once or at the renew deadline; a stale resourceVersion gets
the real server's 409 and only loses that round; a crashing lead() stops the renewals, releases and re-raises;
expiry follows the injected monotonic clock and never the wall clock; bad durations are refused. Every
scenario runs in ``run_async``, which fails a test that leaves asyncio tasks behind.

Needs kube-apiserver and etcd in ``KUBEBUILDER_ASSETS``; without the variable these tests are skipped.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import itertools
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
    JITTER_FACTOR,
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
MAX_PAUSE = RETRY * (1 + JITTER_FACTOR)  # a candidate's longest pause between two attempts (0.66 s)
SLACK = 0.4  # request latency and scheduling noise on a busy 2-core machine
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
    at: float
    method: str
    body: Any


class Interposer:
    """A Requester in front of a KubeClient: records every call and error, can hang or act before a call."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.calls: list[Call] = []
        self.errors: list[tuple[str, int]] = []
        self.hang = False
        self.before: Callable[[str], None] | None = None

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None, retry: bool = True
    ) -> Any:
        self.calls.append(Call(time.monotonic(), method, copy.deepcopy(body)))
        if self.hang:
            await asyncio.Event().wait()  # an API server that accepted the request and never answers
        if self.before is not None:
            self.before(method)
        try:
            return await self.client.request(method, path, body=body, timeout=timeout, retry=retry)
        except KubeApiError as error:
            self.errors.append((method, error.status))
            raise


class Candidate:
    """One elector and its leader work, which records when it started and when it saw its cancellation."""

    def __init__(self, client: Requester, name: str, identity: str | None = None, **options: Any) -> None:
        self.identity = identity or default_identity()
        self.holders: list[str] = []  # what on_change reported
        self.elector = LeaderElector(client, settings(name), self.identity, on_change=self.holders.append, **options)
        self.stop = asyncio.Event()
        self.leading = asyncio.Event()
        self.started_at: float | None = None
        self.cancelled_at: float | None = None
        self._task: asyncio.Task[RunEnd] | None = None

    async def lead(self) -> None:
        self.started_at = time.monotonic()
        self.leading.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled_at = time.monotonic()
            raise

    def start(self) -> Candidate:
        self._task = asyncio.create_task(self.elector.run(self.lead, self.stop))
        return self

    @property
    def task(self) -> asyncio.Task[RunEnd]:
        assert self._task is not None
        return self._task

    async def ended(self, timeout: float) -> asyncio.Task[RunEnd]:
        await asyncio.wait((self.task,), timeout=timeout)
        assert self.task.done(), f"run() of {self.identity} did not end within {timeout} s"
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
def test_one_leader_and_a_graceful_handover_within_a_candidates_pause(
    plane: ControlPlane, scheduler_user: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """kube-scheduler's own Lease and least-privilege identity: two candidates race, one leads, the Lease says
    so and is renewed (acquireTime kept); a graceful stop cancels the work, releases (client-go's
    ReleaseOnCancel) and the standby takes over within one jittered retry period, not a lease duration."""
    name = "kube-scheduler"  # the only Lease system:kube-scheduler may read and update
    status, _ = plane.request("GET", f"{LEASES}/{name}")
    assert status == 404

    async def scenario() -> None:
        async with clients(scheduler_user, 2) as (one, two):
            a, b = Candidate(one, name), Candidate(two, name)
            try:
                a.start()  # a real race: both find no Lease, both POST; the server lets one win
                b.start()
                await wait_until(lambda: a.leading.is_set() or b.leading.is_set(), 5)
                leader, follower = (a, b) if a.leading.is_set() else (b, a)
                await asyncio.sleep(3 * MAX_PAUSE)  # the follower has polled a few times
                assert (leader.elector.is_leader, follower.elector.is_leader) == (True, False)
                assert not follower.leading.is_set()
                assert (leader.elector.leader_identity, follower.elector.leader_identity) == (leader.identity,) * 2
                first = lease_spec(plane, name)
                assert first["holderIdentity"] == leader.identity
                assert (first["leaseDurationSeconds"], first["leaseTransitions"]) == (2, 0)
                assert MICROTIME.match(first["acquireTime"]) and MICROTIME.match(first["renewTime"])
                await asyncio.sleep(2 * RETRY + 0.05)
                later = lease_spec(plane, name)
                assert later["acquireTime"] == first["acquireTime"]  # kept while renewing
                assert later["renewTime"] > first["renewTime"]
                assert later["leaseTransitions"] == 0
                before_stop = read_lease(plane, name)["metadata"]["resourceVersion"]

                stopped_at = time.monotonic()
                leader.stop.set()
                assert (await leader.ended(3)).result() is RunEnd.STOPPED
                assert leader.cancelled_at is not None and leader.cancelled_at - stopped_at < 0.1
                assert (leader.elector.is_leader, leader.elector.leader_identity) == (False, "")
                await wait_until(follower.leading.is_set, LEASE)
                assert follower.started_at is not None
                takeover = follower.started_at - stopped_at
                print(f"graceful handover: {takeover:.3f} s")
                assert takeover < MAX_PAUSE + SLACK < LEASE
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
                assert (await follower.ended(3)).result() is RunEnd.STOPPED
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
    once the Lease went unchanged for leaseDuration by its own clock (plus at most two of its pauses)."""
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 2) as (one, two):
            a, b = Candidate(one, name), Candidate(two, name)
            try:
                a.start()
                await wait_until(a.leading.is_set, 5)
                b.start()
                await wait_until(lambda: b.elector.leader_identity == a.identity, 3)
                await asyncio.sleep(MAX_PAUSE)
                acquired = lease_spec(plane, name)["acquireTime"]

                killed_at = time.monotonic()
                a.task.cancel()
                await asyncio.wait((a.task,))
                assert a.task.cancelled()
                assert a.cancelled_at is not None and a.cancelled_at - killed_at < 0.05
                assert lease_spec(plane, name)["holderIdentity"] == a.identity  # not released
                await wait_until(b.leading.is_set, LEASE + 2 * MAX_PAUSE + 2)
                assert b.started_at is not None
                takeover = b.started_at - killed_at
                print(f"takeover after a kill: {takeover:.3f} s")
                # a's last renewal was sent at most one retry period (and a request) before the kill
                assert LEASE - RETRY - 0.1 <= takeover <= LEASE + 2 * MAX_PAUSE + SLACK
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
    and cancels the work right away (not at the renew deadline); the lost leader writes nothing more."""
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            a = Candidate(one, name)
            try:
                a.start()
                await wait_until(a.leading.is_set, 5)
                await asyncio.sleep(2 * RETRY + 0.1)  # between two renewals
                intruder = write_spec(plane, name, holderIdentity="intruder")
                intruded_at = time.monotonic()
                task = await a.ended(RETRY + SLACK + 0.5)
                with pytest.raises(LeadershipLost, match=r"the lease is now held by intruder$"):
                    task.result()
                assert a.cancelled_at is not None
                print(f"foreign holder -> work cancelled after {a.cancelled_at - intruded_at:.3f} s")
                assert a.cancelled_at - intruded_at < RETRY + SLACK < RENEW
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
    """Requests that never get an answer: the renewal waits only for what is left of renewDeadline after the last
    successful renewal, then the work is cancelled: one hung request, no second one, no release."""
    name = unique()

    async def scenario() -> None:
        async with clients(admin, 1) as (one,):
            interposer = Interposer(one)
            a = Candidate(interposer, name)
            try:
                a.start()
                await wait_until(a.leading.is_set, 5)
                await asyncio.sleep(2 * RETRY)
                hung_at = time.monotonic()
                interposer.hang = True
                task = await a.ended(RENEW + 1)
                with pytest.raises(LeadershipLost, match=r"not renewed within leaderElection\.renewDeadline \(1\.5s\)"):
                    task.result()
                last_renewal = a.elector.renewed_at
                assert last_renewal is not None and a.cancelled_at is not None
                assert hung_at - RETRY - 0.1 <= last_renewal <= hung_at
                lost_after = a.cancelled_at - last_renewal
                print(f"hung requests: work cancelled {lost_after:.3f} s after the last renewal")
                assert RENEW <= lost_after <= RENEW + 0.2
                assert [call.method for call in interposer.calls if call.at >= hung_at] == ["PUT"]
                assert not a.elector.is_leader
                assert lease_spec(plane, name)["holderIdentity"] == a.identity  # nothing could be written
            finally:
                await a.shutdown()

    run_async(scenario())


@e2e
def test_an_unreachable_server_stops_the_work_at_the_renew_deadline(
    plane: ControlPlane, admin: ClusterConnection, run_async: RunAsync[None]
) -> None:
    """The connection to the API server is cut and new ones are refused: renewals are retried every retry
    period (no hot loop) until renewDeadline after the last success, then the work is cancelled."""
    name = unique()

    async def scenario() -> None:
        proxy = Proxy(admin.server)
        through_proxy = dataclasses.replace(admin, server=await proxy.start())
        closed = False
        async with clients(through_proxy, 1) as (one,):
            interposer = Interposer(one)
            a = Candidate(interposer, name)
            try:
                a.start()
                await wait_until(a.leading.is_set, 5)
                await asyncio.sleep(2 * RETRY)
                cut_at = time.monotonic()
                await proxy.close()
                closed = True
                task = await a.ended(RENEW + 1)
                unreachable = rf"renewDeadline \(1\.5s\): PUT {re.escape(LEASES)}/{name}: "  # the last error
                with pytest.raises(LeadershipLost, match=unreachable):
                    task.result()
                last_renewal = a.elector.renewed_at
                assert last_renewal is not None and a.cancelled_at is not None
                lost_after = a.cancelled_at - last_renewal
                attempts = [call.at for call in interposer.calls if call.at >= cut_at]
                print(f"unreachable server: cancelled {lost_after:.3f} s after the last renewal, {len(attempts)} tries")
                assert RENEW <= lost_after <= RENEW + 0.2
                assert len(attempts) >= 3
                assert all(y - x >= RETRY - 0.01 for x, y in itertools.pairwise(attempts))
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
    that one never renews, takes the Lease a lease duration later (leaseTransitions 1 -> 2)."""
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
            intruded_at: list[float] = []

            def intrude(method: str) -> None:
                if method == "PUT" and not intruded_at:
                    now = microtime(time.time())
                    write_spec(
                        plane, name, holderIdentity="intruder", leaseDurationSeconds=2, leaseTransitions=1,
                        acquireTime=now, renewTime=now,
                    )  # fmt: skip
                    intruded_at.append(time.monotonic())

            interposer.before = intrude
            b = Candidate(interposer, name)
            try:
                b.start()
                await wait_until(lambda: bool(interposer.errors), 3)
                await asyncio.sleep(2 * MAX_PAUSE)  # more rounds: it reads the intruder's record and waits
                assert interposer.errors == [("PUT", 409)]
                assert not b.task.done()
                assert not b.leading.is_set() and not b.elector.is_leader
                assert b.elector.leader_identity == "intruder"
                assert lease_spec(plane, name)["holderIdentity"] == "intruder"

                await wait_until(b.leading.is_set, LEASE + 2 * MAX_PAUSE + 1)
                assert b.started_at is not None
                waited = b.started_at - intruded_at[0]
                print(f"took the intruder's abandoned lease after {waited:.3f} s")
                assert LEASE <= waited <= LEASE + 2 * MAX_PAUSE + SLACK
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
            crashed_at: list[float] = []

            async def lead() -> None:
                await asyncio.sleep(3 * RETRY + 0.05)
                crashed_at.append(time.monotonic())
                raise RuntimeError("the scheduling loop crashed")

            with pytest.raises(RuntimeError, match=r"^the scheduling loop crashed$"):
                await asyncio.wait_for(elector.run(lead, asyncio.Event()), 5)
            ended_at = time.monotonic()
            assert ended_at - crashed_at[0] < 0.2
            assert not elector.is_leader
            before = [call for call in interposer.calls if call.at < crashed_at[0]]
            after = [call for call in interposer.calls if call.at >= crashed_at[0]]
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

            assert await asyncio.wait_for(elector.run(lead, asyncio.Event()), 5) is RunEnd.LEAD_RETURNED
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
    nothing changes; a standby whose monotonic clock stands still never sees the dead leader's Lease expire."""
    name = unique()
    skew = 20 * 365 * 86400.0

    async def scenario() -> None:
        async with clients(admin, 3) as (one, two, three):
            frozen = time.monotonic()
            a = Candidate(one, name, wall=lambda: time.time() - skew)
            b = Candidate(two, name, wall=lambda: time.time() + skew)
            c = Candidate(three, name, monotonic=lambda: frozen)
            try:
                a.start()
                await wait_until(a.leading.is_set, 5)
                past = datetime.datetime.fromtimestamp(time.time() - skew, tz=datetime.UTC).year
                assert lease_spec(plane, name)["renewTime"].startswith(f"{past}-")
                b.start()
                c.start()
                await asyncio.sleep(LEASE + 2 * MAX_PAUSE)  # longer than a lease duration
                assert a.elector.is_leader
                assert not b.leading.is_set() and not c.leading.is_set()
                assert b.elector.leader_identity == c.elector.leader_identity == a.identity

                killed_at = time.monotonic()
                a.task.cancel()
                await asyncio.wait((a.task,))
                await wait_until(b.leading.is_set, LEASE + 2 * MAX_PAUSE + 2)
                assert b.started_at is not None
                takeover = b.started_at - killed_at
                print(f"takeover with skewed wall clocks: {takeover:.3f} s")
                assert LEASE - RETRY - 0.1 <= takeover <= LEASE + 2 * MAX_PAUSE + SLACK
                future = datetime.datetime.fromtimestamp(time.time() + skew, tz=datetime.UTC).year
                assert lease_spec(plane, name)["renewTime"].startswith(f"{future}-")

                await wait_until(lambda: c.elector.leader_identity == b.identity, 2 * MAX_PAUSE + 1)
                assert not c.leading.is_set()
                assert c.holders == [a.identity, b.identity]
                stopping = time.monotonic()
                c.stop.set()
                assert (await c.ended(1)).result() is RunEnd.STOPPED  # a waiting candidate stops at once
                assert time.monotonic() - stopping < 0.1
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
