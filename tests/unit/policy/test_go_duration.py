"""Go's duration text, as ``opa test`` prints test times and reads ``--timeout`` (expected values are Go's own
``time.Duration.String`` outputs)."""

from __future__ import annotations

import pytest

from kubesched.policy.go_duration import format_duration, parse_duration


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
    ],
)
def test_format_matches_go(nanoseconds: int, text: str) -> None:
    assert format_duration(nanoseconds) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("500ms", 0.5), ("1m30s", 90.0), ("1.5h", 5400.0), ("250us", 0.00025), ("0.5", 0.5), ("0", 0.0)],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "5 s", "-1s", "-2", "5x", "nan"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
