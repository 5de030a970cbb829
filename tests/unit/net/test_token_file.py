"""The one bearer-token file reader (:mod:`kubesched.net.token_file`): rotation seen on the injected clock, a 401
looking again at once, and a file that cannot give a token an error naming it, at every call."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kubesched.clock import VirtualClock
from kubesched.net.token_file import TokenFile, TokenFileError, read_token_file

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]


def rotate(path: Path, token: str) -> None:
    """The kubelet's way: write aside, then rename over."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(token + "\n")
    os.replace(staged, path)


def test_a_rotated_token_is_read_once_the_recheck_interval_has_passed_on_the_clock(
    tmp_path: Path, run_async: RunAsync[list[str]]
) -> None:
    path = tmp_path / "token"
    rotate(path, "first")
    clock = VirtualClock()
    tokens = TokenFile(str(path), clock=clock, recheck_seconds=60.0)

    async def scenario() -> list[str]:
        seen = [await tokens.current()]
        rotate(path, "second")
        seen.append(await tokens.current())  # no time has passed: the file is not looked at
        clock.advance(59.0)
        seen.append(await tokens.current())
        clock.advance(1.0)
        seen.append(await tokens.current())
        return seen

    assert run_async(scenario()) == ["first", "first", "first", "second"]


def test_a_401_makes_the_next_call_look_at_once(tmp_path: Path, run_async: RunAsync[list[str]]) -> None:
    path = tmp_path / "token"
    rotate(path, "old")
    tokens = TokenFile(str(path), clock=VirtualClock(), recheck_seconds=60.0)

    async def scenario() -> list[str]:
        seen = [await tokens.current()]
        rotate(path, "new")
        tokens.invalidate()
        seen.append(await tokens.current())
        return seen

    assert run_async(scenario()) == ["old", "new"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "cannot read the token file {path}: No such file or directory", id="missing"),
        pytest.param("  \n", "the token file {path} is empty", id="empty"),
        pytest.param("two tokens", "the token file {path} holds more than one token", id="two-tokens"),
        pytest.param(b"\xff\xfe", "cannot read the token file {path}: ", id="not-utf-8"),
    ],
)
def test_a_file_that_gives_no_token_is_an_error_naming_it_at_every_call(
    tmp_path: Path, content: str | bytes | None, message: str, run_async: RunAsync[list[str]]
) -> None:
    path = tmp_path / "token"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    tokens = TokenFile(str(path), clock=VirtualClock(), recheck_seconds=60.0)

    async def scenario() -> list[str]:
        errors = []
        for _ in range(2):  # a bad file is never remembered as a token, nor as a failure
            with pytest.raises(TokenFileError) as caught:
                await tokens.current()
            errors.append(str(caught.value))
        return errors

    errors = run_async(scenario())
    assert all(error.startswith(message.format(path=path)) for error in errors), errors
    with pytest.raises(TokenFileError, match=r"cannot read|is empty|more than one"):
        read_token_file(str(path))


def test_a_token_file_that_goes_missing_is_an_error_not_the_old_token(tmp_path: Path, run_async: RunAsync[str]) -> None:
    path = tmp_path / "token"
    rotate(path, "t")
    clock = VirtualClock()
    tokens = TokenFile(str(path), clock=clock, recheck_seconds=1.0, label="OPA token file")

    async def scenario() -> str:
        assert await tokens.current() == "t"
        path.unlink()
        clock.advance(1.0)
        with pytest.raises(TokenFileError) as caught:
            await tokens.current()
        return str(caught.value)

    assert run_async(scenario()) == f"cannot read the OPA token file {path}: No such file or directory"


def test_concurrent_callers_read_the_file_once(
    tmp_path: Path, run_async: RunAsync[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "token"
    rotate(path, "t")
    opened: list[str] = []
    real_open = open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(path):
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", counting_open)
    tokens = TokenFile(str(path), clock=VirtualClock(), recheck_seconds=60.0)

    async def scenario() -> list[str]:
        return list(await asyncio.gather(*(tokens.current() for _ in range(5))))

    assert run_async(scenario()) == ["t"] * 5
    assert len(opened) == 1
