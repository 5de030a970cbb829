"""Admission to the scheduling cycle: the bound on binding cycles in flight per profile.

A profile whose plugins bound their binding cycles (:class:`~kubesched.framework.interface.BindingLimiter`, e.g.
ClusterReservation's ``maxCommitsInFlight``) gets a limit here; :class:`~kubesched.scheduler.schedule_one.ScheduleOne`
reports each binding cycle it starts and each that ends, and :class:`~kubesched.scheduler.scheduler.Scheduler` pops
no pod while any profile is at its limit. The queue is global and ordered (the next pod's profile is unknown until
it is popped), so a full profile holds back every profile of this scheduler: the live hub runs its cluster
profiles in a scheduler of their own, so node pods never wait on member clusters.

Why a bound at all: a hub that pops a burst faster than its members commit would otherwise open one commit per
pod at once; each pod then waits between pop and commit, and every commit shares the members with all the
others, so the latency of each grows with the burst. Bounded, the burst waits in the queue and each commit meets
at most ``limit - 1`` others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


class BindingAdmission:
    """Per profile, the binding cycles in flight against that profile's limit (profiles without one are not counted)."""

    def __init__(self, limits: Mapping[str, int]) -> None:
        self.limits = dict(limits)
        self.in_flight = dict.fromkeys(self.limits, 0)
        self._full = 0  # how many profiles are at their limit: admits() is read before every pop
        # Called when a full profile gets room again (the live loop's wake-up); None while nothing listens.
        self.on_room: Callable[[], None] | None = None

    def admits(self) -> bool:
        """Whether the next pod may be popped: no profile at its limit."""
        return self._full == 0

    def started(self, profile: str) -> None:
        """A binding cycle of ``profile`` began (its pod left the scheduling cycle waiting or bound next)."""
        limit = self.limits.get(profile)
        if limit is None:
            return
        count = self.in_flight[profile] = self.in_flight[profile] + 1
        if count == limit:
            self._full += 1

    def finished(self, profile: str) -> None:
        """A binding cycle of ``profile`` ended, however (bound, rejected, cancelled)."""
        limit = self.limits.get(profile)
        if limit is None:
            return
        count = self.in_flight[profile]
        self.in_flight[profile] = count - 1
        if count == limit:
            self._full -= 1
            if self.on_room is not None:
                self.on_room()
