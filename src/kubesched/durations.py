"""Go ``time.Duration`` text: parse ``"1m30s"`` as ``time.ParseDuration`` does, and print it back.

The one duration parser of kubesched, a leaf anyone may import: the configuration loader and ``config view``
(``leaderElection``), plugin args (``filterTimeout``), ``audit query --since``, ``policy test --timeout`` and the
messages that show a duration (Permit timeouts, the leader elector). Values are integer nanoseconds, like Go's.
"""

from __future__ import annotations

_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # µ (micro sign)
    "\u03bcs": 1_000,  # μ (Greek mu)
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_MAX = 2**63 - 1


class DurationError(ValueError):
    """The text is not a Go duration; the message is Go's (``time: invalid duration "x"``)."""


def parse_go_duration(text: str) -> int:
    """Nanoseconds for a Go duration string such as ``"15s"``, ``"1m30s"``, ``"1.5h"``, ``"-2ms"``."""
    orig = text
    quoted = '"' + orig + '"'
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(f"time: invalid duration {quoted}")
    total = 0
    while s:
        i = 0
        while i < len(s) and s[i].isdigit() and s[i].isascii():
            i += 1
        whole = s[:i]
        s = s[i:]
        frac = ""
        if s.startswith("."):
            s = s[1:]
            j = 0
            while j < len(s) and s[j].isdigit() and s[j].isascii():
                j += 1
            frac = s[:j]
            s = s[j:]
        if not whole and not frac:
            raise DurationError(f"time: invalid duration {quoted}")
        j = 0
        while j < len(s) and s[j] != "." and not (s[j].isdigit() and s[j].isascii()):
            j += 1
        unit_text = s[:j]
        s = s[j:]
        if not unit_text:
            raise DurationError(f"time: missing unit in duration {quoted}")
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(f'time: unknown unit "{unit_text}" in duration {quoted}')
        value = int(whole or "0") * unit
        if frac:
            value += int(frac) * unit // 10 ** len(frac)
        total += value
        if total > _MAX:
            raise DurationError(f"time: invalid duration {quoted}")
    return -total if neg else total


def _with_fraction(value: int, unit: int) -> str:
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def format_go_duration(ns: int) -> str:
    """Go's ``Duration.String()``: ``"15s"``, ``"1m30s"``, ``"1h0m0s"``, ``"500ms"``, ``"0s"``."""
    if ns == 0:
        return "0s"
    u = abs(ns)
    if u < 1_000:
        text = f"{u}ns"
    elif u < 1_000_000:
        text = _with_fraction(u, 1_000) + "\u00b5s"
    elif u < 1_000_000_000:
        text = _with_fraction(u, 1_000_000) + "ms"
    else:
        hours, rest = divmod(u, _UNITS["h"])
        minutes, rest = divmod(rest, _UNITS["m"])
        seconds = _with_fraction(rest, _UNITS["s"]) + "s"
        if hours:
            text = f"{hours}h{minutes}m{seconds}"
        elif minutes:
            text = f"{minutes}m{seconds}"
        else:
            text = seconds
    return "-" + text if ns < 0 else text


def seconds_to_ns(seconds: float) -> int:
    """Round float seconds (as stored in :mod:`kubesched.config.types`) back to nanoseconds."""
    return round(seconds * 1_000_000_000)


def format_seconds(seconds: float) -> str:
    """Float seconds as Go prints the duration: ``"10s"``, ``"1m30s"``, ``"500ms"``."""
    return format_go_duration(seconds_to_ns(seconds))
