"""Durations written the way Go writes them (``time.Duration.String``, ``time.ParseDuration``).

Who uses it: ``kubesched policy test``, whose report and ``--timeout`` follow ``opa test``: OPA prints each
test's time as a Go duration (``PASS (172.75µs)``, ``FAIL (1.2ms)``, ``ERROR (5.000213s)``) and reads
``--timeout 500ms``. Matching the format keeps scripts that read ``opa test`` output working on ours.
"""

from __future__ import annotations

import re

__all__ = ["format_duration", "parse_duration"]

_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def _decimal(value: int, digits: int) -> str:
    """``value / 10**digits`` with the trailing zeros of its fraction dropped, as Go's ``fmtFrac`` does."""
    whole, fraction = divmod(value, 10**digits)
    text = str(fraction).rjust(digits, "0").rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def format_duration(nanoseconds: int) -> str:
    """Go's ``Duration.String``: ``0s``, ``850ns``, ``172.75µs``, ``1.2ms``, ``5.000213s``, ``1m30s``, ``1h0m0s``."""
    if nanoseconds < 0:
        return "-" + format_duration(-nanoseconds)
    if nanoseconds == 0:
        return "0s"
    if nanoseconds < 1_000:
        return f"{nanoseconds}ns"
    if nanoseconds < 1_000_000:
        return _decimal(nanoseconds, 3) + "µs"
    if nanoseconds < 10**9:
        return _decimal(nanoseconds, 6) + "ms"
    minutes, rest = divmod(nanoseconds, 60 * 10**9)
    hours, minutes = divmod(minutes, 60)
    seconds = _decimal(rest, 9) + "s"
    if hours:
        return f"{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{minutes}m{seconds}"
    return seconds


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``5s``, ``500ms``, ``1m30s``, ``1.5h``); a bare number is seconds.

    Raises ``ValueError`` with a message fit for the user (argparse shows it) for anything else, negatives
    included.
    """
    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        if seconds < 0 or seconds != seconds or seconds == float("inf"):
            raise ValueError(f"{text!r} is not a non-negative duration")
        return seconds
    position = 0
    total = 0.0
    while position < len(raw):
        part = _PART.match(raw, position)
        if part is None:
            raise ValueError(f"{text!r} is not a duration (use e.g. 5s, 500ms, 1m30s)")
        total += float(part.group(1)) * _NS[part.group(2)] / 10**9
        position = part.end()
    if not raw:
        raise ValueError("an empty duration")
    return total
