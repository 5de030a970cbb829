"""Go's duration text (:mod:`kubesched.durations`): printed as ``time.Duration.String`` prints it (expected values
are Go's own outputs, as ``opa test`` shows test times), and ``policy test --timeout`` read as ``opa test`` reads
it. The parser's own cases (Go's error messages, overflow) are in tests/unit/config/test_config_defaults.py."""

from __future__ import annotations

import argparse

import pytest

from kubesched.cli.policy_test import _duration
from kubesched.durations import format_go_duration, format_seconds


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (0, "0s"),
        (850, "850ns"),
        (1_000, "1µs"),
        (172_750, "172.75µs"),
        (1_200_000, "1.2ms"),
        (68_875, "68.875µs"),
        (5_000_213_000, "5.000213s"),
        (90 * 10**9, "1m30s"),
        (3600 * 10**9, "1h0m0s"),
        (3725_500_000_000, "1h2m5.5s"),
        (-1_500_000_000, "-1.5s"),
    ],
)
def test_format_matches_go(nanoseconds: int, text: str) -> None:
    assert format_go_duration(nanoseconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10.0, "10s"), (0.5, "500ms"), (90.0, "1m30s"), (900.0, "15m0s"), (3600.0, "1h0m0s"), (1.5, "1.5s")],
)
def test_seconds_are_printed_as_go_durations(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("500ms", 0.5), ("1m30s", 90.0), ("1.5h", 5400.0), ("250us", 0.00025), ("0.5", 0.5), ("0", 0.0)],
)
def test_policy_test_timeout_reads_go_durations_and_bare_seconds(text: str, seconds: float) -> None:
    assert _duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "5 s", "-1s", "-2", "5x", "nan", "inf"])
def test_policy_test_timeout_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        _duration(text)
