"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics (kube-scheduler's elector).

Built by ``kubesched run`` when ``leaderElection.leaderElect`` is on, from the configuration's ``leaderElection``
section, a :class:`~kubesched.backends.kube.client.KubeClient` and an identity (:func:`default_identity`)::

    elector = LeaderElector(client, config.leader_election, default_identity())
    end = await elector.run(schedule_forever, stop)   # RunEnd, or raises LeadershipLost

:meth:`LeaderElector.run` says how each way of ending releases the Lease or not. The rules (expiry by the local
monotonic clock, renewal within the renew deadline, immediate loss on a conflict) and the two deliberate
differences from client-go are in docs/explanation/live-scheduler.md#leader-election. The configuration is anything
with :class:`LeaseSettings`' attributes: backends do not import the config layer.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import enum
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kubesched.backends.kube.errors import KubeApiError, KubeConfigError, KubeTransportError
from kubesched.durations import format_seconds
from kubesched.errors import FieldError, KubeschedError
from kubesched.framework.interface import ApiError

__all__ = [
    "JITTER_FACTOR",
    "LeaderElector",
    "LeadershipLost",
    "LeaseSettings",
    "Requester",
    "RunEnd",
    "default_identity",
    "validate_settings",
]

logger = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go's leaderelection.JitterFactor
RELEASED_LEASE_DURATION_SECONDS = 1  # what client-go's release() writes
LEASE_API = "/apis/coordination.k8s.io/v1"

T = TypeVar("T")


class LeaseSettings(Protocol):
    """What the elector reads from the configuration (:class:`~kubesched.config.types.LeaderElectionConfig`)."""

    @property
    def lease_duration(self) -> float: ...
    @property
    def renew_deadline(self) -> float: ...
    @property
    def retry_period(self) -> float: ...
    @property
    def resource_lock(self) -> str: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def resource_namespace(self) -> str: ...


class Requester(Protocol):
    """The part of :class:`~kubesched.backends.kube.client.KubeClient` the elector uses."""

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None, retry: bool = True
    ) -> Any: ...


class RunEnd(enum.Enum):
    """How :meth:`LeaderElector.run` returned (when it did not raise)."""

    STOPPED = "stopped"  # ``stop`` was set (the Lease was released if we held it)
    LEAD_RETURNED = "lead-returned"  # ``lead()`` returned on its own (the Lease was released)


class LeadershipLost(KubeschedError):
    """The Lease could not be renewed in time, or another candidate holds it: the leader's work was cancelled."""

    def __init__(self, lease: str, identity: str, reason: str) -> None:
        super().__init__(f"leader election lost: lease {lease} (identity {identity}): {reason}")
        self.lease = lease
        self.identity = identity
        self.reason = reason


def default_identity(hostname: str | None = None) -> str:
    """``<hostname>_<uuid4>``, kube-scheduler's identity: unique even for two schedulers on one host."""
    return f"{hostname or socket.gethostname()}_{uuid.uuid4()}"


def validate_settings(settings: LeaseSettings, identity: str) -> None:
    """client-go's ``NewLeaderElector`` checks; raises one :class:`KubeConfigError` listing every problem."""
    lease, renew, retry = settings.lease_duration, settings.renew_deadline, settings.retry_period
    p = "leaderElection"
    errors: list[FieldError] = []
    for key, value in (("leaseDuration", lease), ("renewDeadline", renew), ("retryPeriod", retry)):
        if not value > 0:  # also NaN
            errors.append(FieldError.invalid(f"{p}.{key}", format_seconds(value), "must be greater than zero"))
    if not lease > renew:
        errors.append(
            FieldError.invalid(
                f"{p}.leaseDuration",
                format_seconds(lease),
                f"must be greater than {p}.renewDeadline ({format_seconds(renew)})",
            )
        )
    if not renew > JITTER_FACTOR * retry:
        errors.append(
            FieldError.invalid(
                f"{p}.renewDeadline",
                format_seconds(renew),
                f"must be greater than {JITTER_FACTOR} × {p}.retryPeriod ({format_seconds(JITTER_FACTOR * retry)})",
            )
        )
    if settings.resource_lock != "leases":
        errors.append(FieldError.invalid(f"{p}.resourceLock", settings.resource_lock, 'must be "leases"'))
    if not settings.resource_name:
        errors.append(FieldError.required(f"{p}.resourceName"))
    if not settings.resource_namespace:
        errors.append(FieldError.required(f"{p}.resourceNamespace"))
    if not identity:
        errors.append(FieldError.required("identity", "the leader election identity must not be empty"))
    if errors:
        raise KubeConfigError("; ".join(str(e) for e in errors))


def microtime(wall: float) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds (``2006-01-02T15:04:05.000000Z``)."""
    return datetime.datetime.fromtimestamp(wall, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Result(enum.Enum):
    OK = "ok"  # acquired or renewed
    HELD = "held"  # another candidate holds the Lease (for a candidate: and it has not expired)
    CONFLICT = "conflict"  # our write lost the race (409)
    FAILED = "failed"  # no usable answer (transport error, 5xx, 403, timeout ...)


@dataclass(frozen=True, slots=True)
class _Attempt:
    result: _Result
    detail: str = ""


async def _invoke(lead: Callable[[], Awaitable[None]]) -> None:
    await lead()


async def _awaited(work: Awaitable[T]) -> T:
    return await work


async def _finish(*tasks: asyncio.Task[Any]) -> None:
    """Cancel the tasks that are not done and wait until all are (their outcome stays in the task objects)."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)


def _spec_of(lease: Any) -> dict[str, Any]:
    spec = lease.get("spec") if isinstance(lease, dict) else None
    return spec if isinstance(spec, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class LeaderElector:
    """Holds one Lease for one identity (docs/explanation/live-scheduler.md#leader-election); :meth:`run` says how
    it ends."""

    def __init__(
        self,
        client: Requester,
        config: LeaseSettings,
        identity: str,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        """``monotonic`` judges expiry and deadlines, ``wall`` only stamps acquireTime/renewTime; ``on_change``
        is called with the new holder ("" for none) each time the observed holder changes, ourselves included."""
        validate_settings(config, identity)
        self._client = client
        self.identity = identity
        self.namespace = config.resource_namespace
        self.name = config.resource_name
        self.lease_duration = config.lease_duration
        self.renew_deadline = config.renew_deadline
        self.retry_period = config.retry_period
        self.lease_seconds = max(1, math.ceil(config.lease_duration))
        self.description = f"{self.namespace}/{self.name}"
        self._collection = f"{LEASE_API}/namespaces/{self.namespace}/leases"
        self._path = f"{self._collection}/{self.name}"
        self._monotonic = monotonic
        self._wall = wall
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._on_change = on_change
        self._lease: dict[str, Any] | None = None  # the last Lease object read or written (its resourceVersion)
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = -math.inf  # monotonic time the observed spec was first seen (or sent, ours)
        self._observed_holder = ""
        self._transitions = 0
        self._renewed_at: float | None = None  # monotonic time our last successful write was sent
        self._leading = False

    # ------------------------------------------------------------------------------------------ properties

    @property
    def is_leader(self) -> bool:
        """Leading now: between acquiring the Lease and losing, releasing or stopping."""
        return self._leading

    @property
    def leader_identity(self) -> str:
        """The holder of the Lease as last observed ("" when it was free or has not been read yet)."""
        return self._observed_holder

    @property
    def transitions_observed(self) -> int:
        """``spec.leaseTransitions`` of the Lease as last observed (or written)."""
        return self._transitions

    @property
    def renewed_at(self) -> float | None:
        """The ``monotonic`` time our last successful acquire or renew request was sent, if any."""
        return self._renewed_at

    # ------------------------------------------------------------------------------------------ run

    async def run(self, lead: Callable[[], Awaitable[None]], stop: asyncio.Event) -> RunEnd:
        """Acquire the Lease and run ``lead()`` while it is held. How it ends:

        * ``stop`` set while waiting to lead: :attr:`RunEnd.STOPPED`, nothing written.
        * ``stop`` set while leading: ``lead()`` is cancelled and awaited (the Lease still renewed meanwhile), the Lease
          released (client-go's ``ReleaseOnCancel``), :attr:`RunEnd.STOPPED`; an exception ``lead()`` raises while being
          cancelled is raised after the release.
        * ``lead()`` returns or raises on its own: renewing stops, the Lease is released, and
          :attr:`RunEnd.LEAD_RETURNED` is returned or the exception re-raised.
        * leadership lost: ``lead()`` is cancelled at once and awaited, nothing released (the Lease is not ours any
          more), :class:`LeadershipLost` raised; ``kubesched run`` then exits, as kube-scheduler does.
        * ``run`` itself cancelled: as a killed process, ``lead()`` cancelled and awaited, nothing released.
        """
        stop_task = asyncio.create_task(stop.wait(), name=f"leader election stop ({self.description})")
        try:
            if not await self._acquire(stop, stop_task):
                return RunEnd.STOPPED
            return await self._lead(lead, stop_task)
        finally:
            self._leading = False
            await _finish(stop_task)

    async def _race(self, work: Awaitable[T], stop_task: asyncio.Task[Any]) -> asyncio.Task[T] | None:
        """Run ``work`` until it is done (its task) or ``stop`` is set first (cancelled; None)."""
        task = asyncio.create_task(_awaited(work))
        try:
            await asyncio.wait((task, stop_task), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                await _finish(task)
        return None if task.cancelled() else task

    async def _acquire(self, stop: asyncio.Event, stop_task: asyncio.Task[Any]) -> bool:
        if stop.is_set():
            return False
        logger.info("attempting to acquire leader lease %s as %s", self.description, self.identity)
        while not stop.is_set():
            done = await self._race(self._bounded_attempt(leading=False, budget=self.renew_deadline), stop_task)
            if done is None:
                return False
            attempt = done.result()
            if attempt.result is _Result.OK:
                self._leading = True
                logger.info("successfully acquired lease %s as %s", self.description, self.identity)
                return True
            if attempt.result is _Result.FAILED:
                logger.warning("could not acquire lease %s: %s", self.description, attempt.detail)
            else:
                logger.debug("lease %s not acquired: %s", self.description, attempt.detail)
            pause = self.retry_period * (1.0 + self._rng.random() * JITTER_FACTOR)  # wait.Jitter
            if await self._race(self._sleep(pause), stop_task) is None:
                return False
        return False

    async def _lead(self, lead: Callable[[], Awaitable[None]], stop_task: asyncio.Task[Any]) -> RunEnd:
        lead_task = asyncio.create_task(_invoke(lead), name=f"leader work ({self.description})")
        renew_task = asyncio.create_task(self._keep_renewing(), name=f"lease renewal ({self.description})")
        try:
            await asyncio.wait((lead_task, renew_task, stop_task), return_when=asyncio.FIRST_COMPLETED)
            if renew_task.done():  # lost: the work must stop before anyone else can take over
                self._leading = False
                await _finish(lead_task)
                error = renew_task.exception()
                assert error is not None  # _keep_renewing only ends by raising
                logger.error("%s", error)
                self._log_lead_outcome(lead_task, "after leadership was lost")
                raise error
            if lead_task.done():
                await _finish(renew_task)
                self._leading = False
                await self._release()
                lead_task.result()  # re-raises what lead() raised
                logger.info("the leader's work for lease %s returned; leadership given up", self.description)
                return RunEnd.LEAD_RETURNED
            logger.info("stopping: cancelling the leader's work for lease %s", self.description)
            lead_task.cancel()
            await asyncio.wait((lead_task, renew_task), return_when=asyncio.FIRST_COMPLETED)
            if renew_task.done():
                logger.error("while stopping: %s", renew_task.exception())
            await _finish(lead_task, renew_task)
            self._leading = False
            if not renew_task.cancelled() and renew_task.exception() is not None:
                return RunEnd.STOPPED  # not ours any more: nothing to release
            await self._release()
            error = None if lead_task.cancelled() else lead_task.exception()
            if error is not None:
                raise error
            return RunEnd.STOPPED
        finally:
            await _finish(lead_task, renew_task)  # only does something when run itself is cancelled

    def _log_lead_outcome(self, lead_task: asyncio.Task[None], when: str) -> None:
        if not lead_task.cancelled() and lead_task.exception() is not None:
            logger.error("the leader's work raised %s", when, exc_info=lead_task.exception())

    # ------------------------------------------------------------------------------------------ renewing

    async def _keep_renewing(self) -> None:
        """Renew every retry period until a renewal fails for good: raises LeadershipLost (never returns)."""
        while True:
            await self._sleep(self.retry_period)
            await self._renew()

    async def _renew(self) -> None:
        assert self._renewed_at is not None
        deadline = self._renewed_at + self.renew_deadline
        last = "no attempt finished"
        while True:
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                raise LeadershipLost(
                    self.description,
                    self.identity,
                    f"not renewed within leaderElection.renewDeadline ({format_seconds(self.renew_deadline)}): {last}",
                )
            attempt = await self._bounded_attempt(leading=True, budget=remaining)
            if attempt.result is _Result.OK:
                logger.debug("renewed lease %s", self.description)
                return
            if attempt.result is not _Result.FAILED:
                raise LeadershipLost(self.description, self.identity, attempt.detail)
            last = attempt.detail
            logger.warning("could not renew lease %s: %s", self.description, last)
            await self._sleep(max(min(self.retry_period, deadline - self._monotonic()), 0.0))

    async def _bounded_attempt(self, *, leading: bool, budget: float) -> _Attempt:
        try:
            async with asyncio.timeout(budget):
                return await self._try_acquire_or_renew(leading=leading, timeout=budget)
        except TimeoutError:
            return _Attempt(_Result.FAILED, f"no answer within {budget:.3g} s")

    # ------------------------------------------------------------------------------------------ the record

    def _record_duration(self) -> float:
        seconds = _int((self._observed_spec or {}).get("leaseDurationSeconds"))
        return float(seconds) if seconds > 0 else self.lease_duration

    def _valid(self, now: float) -> bool:
        """The observed record has not expired by our monotonic clock."""
        return self._observed_at + self._record_duration() > now

    def _observe(self, lease: dict[str, Any], at: float, *, ours: bool = False) -> None:
        """Remember the Lease read or written; a changed spec (or one we wrote) restarts the expiry clock."""
        self._lease = lease
        spec = _spec_of(lease)
        if not ours and spec == self._observed_spec:
            return
        self._observed_spec = copy.deepcopy(spec)
        self._observed_at = at
        self._transitions = _int(spec.get("leaseTransitions"))
        holder = str(spec.get("holderIdentity") or "")
        if holder != self._observed_holder:
            self._observed_holder = holder
            if holder and holder != self.identity:
                logger.info("new leader observed for lease %s: %s", self.description, holder)
            elif not holder and not ours:
                logger.info("lease %s is free (released by its holder)", self.description)
            if self._on_change is not None:
                try:
                    self._on_change(holder)
                except Exception:
                    logger.exception("the on_change callback of the elector for lease %s raised", self.description)

    def _spec(self, base: dict[str, Any], stamp: str, *, creating: bool = False) -> dict[str, Any]:
        """``base`` (the spec read; fields we do not manage are kept) holding the Lease for us from now on."""
        spec = dict(base)
        transitions = _int(base.get("leaseTransitions"))
        if str(base.get("holderIdentity") or "") == self.identity:  # renewing: keep acquireTime and the count
            spec["acquireTime"] = base.get("acquireTime") or stamp
            spec["leaseTransitions"] = transitions
        else:  # taking it: from another holder, after a release, or a new Lease (0 transitions)
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = 0 if creating else transitions + 1
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = self.lease_seconds
        spec["renewTime"] = stamp
        return spec

    async def _write(self, method: str, path: str, lease: dict[str, Any], timeout: float) -> Any:
        return await self._client.request(method, path, body=lease, timeout=timeout, retry=False)

    async def _try_acquire_or_renew(self, *, leading: bool, timeout: float) -> _Attempt:
        """One round of client-go's ``tryAcquireOrRenew``. A leader first PUTs over the object its last write
        answered; after an API error, and for a candidate, the Lease is read (created on 404) and the object read is
        PUT with its resourceVersion, so a 409 means another writer won the round. ``leaseTransitions`` moves when
        the holder changes; ``acquireTime`` is kept while renewing."""
        stamp = microtime(self._wall())
        # 1. The leader's fast path: write over the object our last write answered.
        if self._observed_holder == self.identity and self._lease is not None and self._valid(self._monotonic()):
            lease = copy.deepcopy(self._lease)
            lease["spec"] = self._spec(_spec_of(lease), stamp)
            sent = self._monotonic()
            try:
                answer = await self._write("PUT", self._path, lease, timeout)
            except KubeTransportError as error:
                return _Attempt(_Result.FAILED, str(error))
            except KubeApiError as error:
                logger.debug("lease %s: update answered %s; reading it again", self.description, error.status)
            else:
                return self._wrote(answer, sent)
        # 2. Read the Lease; create it when there is none.
        try:
            current = await self._client.request("GET", self._path, timeout=timeout, retry=False)
        except KubeApiError as error:
            if error.status != 404:
                return _Attempt(_Result.FAILED, f"GET: {error.status} {error.reason}: {error.message}")
            return await self._create(stamp, timeout)
        except KubeTransportError as error:
            return _Attempt(_Result.FAILED, str(error))
        if not isinstance(current, dict):
            return _Attempt(_Result.FAILED, "GET: the answer is not a Lease object")
        self._observe(current, self._monotonic())
        holder = self._observed_holder
        if holder and holder != self.identity:
            if leading:
                return _Attempt(_Result.HELD, f"the lease is now held by {holder}")
            if self._valid(self._monotonic()):
                return _Attempt(_Result.HELD, f"held by {holder} and not expired")
        # 3. Take or renew it: PUT the object read, with its resourceVersion.
        lease = copy.deepcopy(current)
        lease["spec"] = self._spec(_spec_of(current), stamp)
        sent = self._monotonic()
        try:
            answer = await self._write("PUT", self._path, lease, timeout)
        except KubeApiError as error:
            if error.status == 409:
                return _Attempt(_Result.CONFLICT, f"update conflict (409): {error.message}")
            return _Attempt(_Result.FAILED, f"PUT: {error.status} {error.reason}: {error.message}")
        except KubeTransportError as error:
            return _Attempt(_Result.FAILED, str(error))
        return self._wrote(answer, sent)

    async def _create(self, stamp: str, timeout: float) -> _Attempt:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec({}, stamp, creating=True),
        }
        sent = self._monotonic()
        try:
            answer = await self._write("POST", self._collection, lease, timeout)
        except KubeApiError as error:
            if error.status == 409:
                return _Attempt(_Result.CONFLICT, f"another candidate created the lease first (409): {error.message}")
            return _Attempt(_Result.FAILED, f"POST: {error.status} {error.reason}: {error.message}")
        except KubeTransportError as error:
            return _Attempt(_Result.FAILED, str(error))
        return self._wrote(answer, sent)

    def _wrote(self, answer: Any, sent: float) -> _Attempt:
        if not isinstance(answer, dict) or _spec_of(answer).get("holderIdentity") != self.identity:
            return _Attempt(_Result.FAILED, "the write was not answered with our Lease")
        self._observe(answer, sent, ours=True)
        self._renewed_at = sent
        return _Attempt(_Result.OK)

    # ------------------------------------------------------------------------------------------ release

    async def _release(self) -> bool:
        """Give the Lease up (client-go's release): True when it is released or was not ours any more."""
        if self._observed_holder != self.identity or self._lease is None:
            return True
        try:
            async with asyncio.timeout(self.renew_deadline):
                return await self._release_once(self._lease)
        except (TimeoutError, ApiError) as error:
            detail = str(error) or f"no answer within {format_seconds(self.renew_deadline)}"
            logger.warning("could not release lease %s: %s", self.description, detail)
            return False

    def _released(self, lease: dict[str, Any]) -> dict[str, Any]:
        released = copy.deepcopy(lease)
        spec = dict(_spec_of(lease))
        stamp = microtime(self._wall())
        spec.update(
            holderIdentity="",
            leaseDurationSeconds=RELEASED_LEASE_DURATION_SECONDS,
            acquireTime=stamp,
            renewTime=stamp,
            leaseTransitions=_int(spec.get("leaseTransitions")),
        )
        released["spec"] = spec
        return released

    async def _release_once(self, lease: dict[str, Any]) -> bool:
        sent = self._monotonic()
        try:
            answer = await self._write("PUT", self._path, self._released(lease), self.renew_deadline)
        except KubeApiError as error:
            if error.status != 409:
                raise
            # Our last renewal may have landed unanswered (cancelled): read the Lease and try once more.
            current = await self._client.request("GET", self._path, timeout=self.renew_deadline, retry=False)
            if not isinstance(current, dict):
                return False
            self._observe(current, self._monotonic())
            if self._observed_holder != self.identity:
                logger.info("lease %s was not ours any more: nothing to release", self.description)
                return True
            sent = self._monotonic()
            answer = await self._write("PUT", self._path, self._released(current), self.renew_deadline)
        if isinstance(answer, dict):
            self._observe(answer, sent, ours=True)
        logger.info("released leader lease %s", self.description)
        return True
