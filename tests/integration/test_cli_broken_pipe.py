"""A reader that stops early (``kubesched plugins | head -1``): the command exits quietly with 141, as git,
kubectl and coreutils do when SIGPIPE ends them, instead of a BrokenPipeError traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for `git log | head -1`


def run_into_closed_pipe(*argv: str, stderr_too: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run ``kubesched argv`` with stdout (and with ``stderr_too`` stderr) a pipe whose reader is already gone,
    so the first write fails whatever the timing."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "kubesched.cli.main", *argv],
            stdout=write_end,
            stderr=write_end if stderr_too else subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("plugins",), id="plugins"),
        pytest.param(("config", "view"), id="config-view"),
        pytest.param(("simulate", "-f", str(EXAMPLES / "cluster.yaml")), id="simulate"),
        pytest.param(("policy", "batch-module"), id="policy-batch-module"),
        pytest.param(("bench", "--list"), id="bench-list"),
    ],
)
def test_a_reader_that_closes_early_gets_no_traceback(argv: tuple[str, ...]) -> None:
    done = run_into_closed_pipe(*argv)
    assert b"Traceback" not in done.stderr and b"Broken pipe" not in done.stderr, done.stderr.decode()
    assert b"Exception ignored" not in done.stderr, done.stderr.decode()
    assert done.returncode == SIGPIPE_EXIT


def test_a_closed_pipe_on_both_streams_is_quiet_too() -> None:
    """``kubesched simulate ... 2>&1 | head -1``: the warnings meet the broken pipe first."""
    done = run_into_closed_pipe("simulate", "-f", str(EXAMPLES / "cluster.yaml"), stderr_too=True)
    assert done.returncode == SIGPIPE_EXIT
