"""The one retry policy (:mod:`kubesched.net.retry`): ``Retry-After`` in both of its forms, the cap, the backoff's
doubling, ceiling and jitter."""

from __future__ import annotations

import random

import pytest

from kubesched.net.retry import Backoff, RetryPolicy, parse_retry_after

NOW = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT


class Scripted(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        pytest.param("2", 2.0, id="seconds"),
        pytest.param(" 120 ", 120.0, id="seconds-with-spaces"),
        pytest.param("0", 0.0, id="zero"),
        pytest.param("Wed, 21 Oct 2015 07:28:30 GMT", 30.0, id="http-date"),
        pytest.param("Wednesday, 21-Oct-15 07:29:00 GMT", 60.0, id="rfc850-date"),
        pytest.param("Wed Oct 21 07:28:05 2015", 5.0, id="asctime-date"),
        pytest.param("Wed, 21 Oct 2015 07:00:00 GMT", 0.0, id="date-in-the-past"),
    ],
)
def test_retry_after_is_seconds_or_an_http_date(header: str, seconds: float) -> None:
    assert parse_retry_after(header, NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("header", [None, "", "soon", "-3", "1.5", "nan", "٣", "Wed, 32 Oct 2015 07:28:00 GMT"])
def test_retry_after_that_says_nothing_usable_is_none(header: str | None) -> None:
    assert parse_retry_after(header, NOW) is None


def test_the_server_wins_over_the_backoff_up_to_the_cap() -> None:
    policy = RetryPolicy(Backoff(0.2, 5.0), max_retries=3, max_retry_after=30.0)
    rng = Scripted(0.5)
    assert policy.delay(0, 7.0, rng) == 7.0
    assert policy.delay(0, 3600.0, rng) == 30.0
    assert policy.delay(2, None, rng) == pytest.approx(0.8)
    assert [policy.allows(attempt) for attempt in range(4)] == [True, True, True, False]


def test_the_backoff_doubles_to_its_ceiling() -> None:
    backoff = Backoff(0.8, 30.0)
    assert [backoff.step(attempt) for attempt in range(7)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    assert backoff.step(10_000) == 30.0


@pytest.mark.parametrize(("drawn", "factor"), [(0.0, 0.5), (0.5, 1.0), (0.999, 1.499)])
def test_jitter_spreads_each_delay_from_half_to_one_and_a_half_times_the_step(drawn: float, factor: float) -> None:
    assert Backoff(2.0, 30.0).delay(1, Scripted(drawn)) == pytest.approx(4.0 * factor)
    assert Backoff(2.0, 30.0, jitter=False).delay(1, Scripted(drawn)) == 4.0
