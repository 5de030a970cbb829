"""Reading an audit log line by line with a bound on a line's length, so that a log with one enormous line (a
damaged or hostile file) is reported as such instead of being read into memory whole.

Who calls it: ``audit verify`` (:mod:`kubesched.audit.verify`) and ``audit query`` (:mod:`kubesched.audit.query`).
The bound is ``KUBESCHED_MAX_AUDIT_LINE_BYTES`` (default 64 MiB; a record of a pod filtered on 5000 nodes is a
few hundred kB). A longer line is yielded as :data:`TOO_LONG` after its bytes were skipped in bounded chunks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

MAX_LINE_BYTES_ENV = "KUBESCHED_MAX_AUDIT_LINE_BYTES"
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
TOO_LONG = b""  # an empty value never comes from a real line (it holds at least its newline, or is the tail)
_SKIP_CHUNK = 1 << 20


def max_line_bytes() -> int:
    raw = os.environ.get(MAX_LINE_BYTES_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_LINE_BYTES


def too_long_detail(limit: int) -> str:
    return f"the line is longer than {limit} bytes (raise {MAX_LINE_BYTES_ENV} if records really are this large)"


def bounded_lines(handle: BinaryIO, limit: int) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, the line's bytes with its newline) — or :data:`TOO_LONG` for a line over ``limit``."""
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while True:
                rest = handle.readline(_SKIP_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, TOO_LONG
            continue
        yield number, raw
