"""The progress line: written only to a terminal, rewritten in place, throttled to ~10 updates a second."""

from __future__ import annotations

import io

import pytest

from kubesched.progress import Progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tty_progress(stream: io.StringIO, clock: FakeClock, columns: int = 80) -> Progress:
    return Progress(stream, isatty=lambda: True, clock=clock, columns=columns)


def test_updates_on_a_terminal_are_throttled_to_one_per_interval() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = tty_progress(stream, clock)
    progress.count("SchedulingBasic", 0, 10000, "pods")
    clock.now += 0.05
    progress.count("SchedulingBasic", 1500, 10000, "pods")  # within 0.1 s of the last write: dropped
    clock.now += 0.06
    progress.count("SchedulingBasic", 3000, 10000, "pods")
    assert stream.getvalue() == "\rSchedulingBasic: 0/10000 pods\rSchedulingBasic: 3000/10000 pods"


def test_a_shorter_line_covers_the_longer_one_and_clear_erases_it() -> None:
    stream, clock = io.StringIO(), FakeClock()
    with tty_progress(stream, clock) as progress:
        progress.update("reading big.yaml: 12000 objects")
        clock.now += 1
        progress.update("scheduling: 5")
    assert stream.getvalue() == (
        "\rreading big.yaml: 12000 objects" + "\rscheduling: 5" + " " * 18 + "\r" + " " * 13 + "\r"
    )


def test_clear_lets_the_next_phase_show_at_once() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = tty_progress(stream, clock)
    progress.count("First", 1, 3, "nodes")
    progress.clear()
    progress.count("Second", 0, 3, "nodes")  # same instant: shown, the interval restarts with a new phase
    assert stream.getvalue().endswith("\rSecond: 0/3 nodes")


def test_an_unknown_total_and_a_narrow_terminal() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = tty_progress(stream, clock, columns=12)
    progress.count("reading a.yaml", 7, None, "objects")
    # One column short of the width: a line that wrapped could not be rewritten with "\r".
    assert stream.getvalue() == "\rreading a.y"


@pytest.mark.parametrize("force", [pytest.param(False, id="update"), pytest.param(True, id="forced-update")])
def test_nothing_is_written_when_the_stream_is_not_a_terminal(force: bool) -> None:
    stream, clock = io.StringIO(), FakeClock()  # a StringIO is no terminal: the real isatty() says so
    with Progress(stream, clock=clock) as progress:
        assert not progress.enabled and not progress.due()
        progress.update("SchedulingBasic: 1/2 pods", force=force)
        progress.count("SchedulingBasic", 2, 2, "pods")
    assert stream.getvalue() == ""


def test_a_closed_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    stream.close()
    assert not Progress(stream).enabled
