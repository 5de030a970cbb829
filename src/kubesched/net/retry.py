"""When to send a request again, and how long to wait first: the one retry policy of kubesched's clients.

Who uses it: the kube API client (a 429, a 5xx or no answer), the reflectors (a failed list or watch) and the audit
webhook sink (a batch not delivered). The agent client and the remote OPA client do not retry on a schedule: their
callers decide (docs/explanation/design.md#own-the-client-and-its-errors). A server's ``Retry-After`` (seconds or
an HTTP date) wins over the backoff, capped so that a server cannot park a client for an hour.
"""

from __future__ import annotations

import datetime
import email.utils
import random
from dataclasses import dataclass

__all__ = ["Backoff", "RetryPolicy", "parse_retry_after"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """An exponential backoff: ``initial`` seconds, doubling at each attempt up to ``maximum``; with ``jitter``,
    each delay is drawn from [0.5, 1.5) times that step, so that clients failing together do not retry together."""

    initial: float
    maximum: float
    jitter: bool = True

    def step(self, attempt: int) -> float:
        """The delay before retry number ``attempt`` (0 for the first), before jitter."""
        return float(min(self.initial * 2.0 ** min(attempt, 64), self.maximum))

    def delay(self, attempt: int, rng: random.Random) -> float:
        step = self.step(attempt)
        return step * (0.5 + rng.random()) if self.jitter else step


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Up to ``max_retries`` retries, each after the server's ``Retry-After`` (at most ``max_retry_after`` seconds)
    when it sent one, else after the backoff."""

    backoff: Backoff
    max_retries: int
    max_retry_after: float

    def allows(self, attempt: int) -> bool:
        """Whether retry number ``attempt`` (0 for the first) may be sent."""
        return attempt < self.max_retries

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return self.backoff.delay(attempt, rng)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """The seconds a ``Retry-After`` header asks for (RFC 9110 section 10.2.3): delay-seconds, or an HTTP date
    counted from ``now`` (seconds since the epoch; a date past is 0). None when there is none or it is neither."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit() and text.isascii():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)  # "-0000": a date in UTC, origin unknown
    return max(when.timestamp() - now, 0.0)
