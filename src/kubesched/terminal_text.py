"""Text shown on a terminal, made safe: control characters and bidirectional overrides escaped.

Who calls it: the table and text outputs (``simulate``'s table, ``audit query``'s text and table) for every
value that comes from an input file or an audit log. An object name or a policy reason carrying ``\\x1b[2J`` or
a right-to-left override must show as those characters, not clear the screen or reorder the line a reviewer
reads. JSON output needs none of this (its encoder escapes control characters already).
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL, plus the bidirectional embeddings, overrides and isolates ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with every control character and bidi override written as an escape (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, text)


def safe_lines(text: str) -> str:
    """:func:`safe` line by line: the newlines that separate lines stay."""
    return "\n".join(safe(line) for line in text.split("\n"))
