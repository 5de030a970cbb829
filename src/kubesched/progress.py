"""One progress line on a terminal: rewritten in place with ``\\r``, throttled, silent when not a TTY.

Long commands (``kubesched bench``, ``kubesched simulate`` of a large cluster) say how far they are on
stderr, so stdout stays the report a pipe or a file receives. Nothing at all is written unless the stream is
a terminal: CI logs and redirected output never collect carriage returns. Updates are throttled to one per
``interval`` seconds (~10 a second), so a caller may report every pod and pay a clock read, not a write.

The TTY test and the clock are injectable, so tests can force terminal mode and step time.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

DEFAULT_INTERVAL = 0.1


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream is not a terminal
        return False


class Progress:
    """``update`` shows a line (at most once per ``interval``); ``clear`` erases it before other output.

    Used as a context manager, the line is erased on exit, so a report printed next starts on a clean line.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        isatty: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = DEFAULT_INTERVAL,
        columns: int | None = None,
    ) -> None:
        self.stream = stream
        self.enabled = isatty() if isatty is not None else _isatty(stream)
        self._clock = clock
        self._interval = interval
        self._last: float | None = None
        self._shown = 0  # length of the line on screen; 0 when none is
        # A line longer than the terminal wraps, and "\r" would then rewrite only its last row.
        self._columns = columns if columns is not None else shutil.get_terminal_size().columns

    def due(self) -> bool:
        """Whether an update now would be written (enabled and the interval has passed): lets a caller skip
        formatting the line when it would be dropped."""
        if not self.enabled:
            return False
        return self._last is None or self._clock() - self._last >= self._interval

    def update(self, text: str, *, force: bool = False) -> None:
        if not (force and self.enabled) and not self.due():
            return
        self._last = self._clock()
        text = text[: max(1, self._columns - 1)]
        # Spaces, not an ANSI erase, cover a longer previous line: any terminal understands them.
        self.stream.write("\r" + text.ljust(self._shown))
        self.stream.flush()
        self._shown = len(text)

    def count(self, label: str, done: int, total: int | None, unit: str) -> None:
        """``label: done/total unit`` (or ``label: done unit`` when the total is unknown)."""
        if self.due():
            self.update(f"{label}: {done}/{total} {unit}" if total is not None else f"{label}: {done} {unit}")

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0
        # The next update shows at once: a new phase should not wait out the previous one's interval.
        self._last = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.clear()
