"""``kubesched policy test`` output, as ``opa test`` writes it (OPA's ``tester.PrettyReporter`` and ``JSONReporter``).

Pretty, without ``-v``: each test that did not pass, under a ``file:`` line for its file, as
``data.pkg.test_x: FAIL (1.2ms)`` (``ERROR`` with the error on the next line, indented; ``SKIPPED`` for
``todo_test_``), its ``print()`` output indented between blank lines; a line of 80 dashes when anything was
listed; then the counts that are not zero, ``PASS: 5/6``, ``FAIL: 1/6``, ``SKIPPED: ...``, ``ERROR: ...``.
With ``-v``: first a ``FAILURES`` section listing the failed tests (OPA adds each one's evaluation trace there;
regorus has no trace to give), then ``SUMMARY`` with every test, passed ones and their output too.
Durations are Go's (:mod:`kubesched.durations`).

JSON: an array with one object per test, the fields and their order of OPA's ``tester.Result``: ``error``
(``{code, message, location}``, when there is one), ``location`` (``{file, row, col}``), ``package``, ``name``,
``output`` (base64 of the print() lines, as Go encodes bytes, when there are any), ``duration`` (nanoseconds),
``fail`` and ``skip`` (only when true).

Exit codes, as ``opa test``: 0 when every test passed, 2 when any failed, errored or was skipped (0 for skipped
ones with ``--exit-zero-on-skipped``). Load errors and usage errors are 1, and no test at all is 0 (1 with
``--fail-on-empty``): :mod:`kubesched.cli.main` decides those.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from kubesched.durations import format_go_duration
from kubesched.policy.rego_tests import RegoTestResult, TestError, TestLocation

__all__ = ["EXIT_FAILED", "exit_code", "json_report", "pretty_report"]

EXIT_FAILED = 2
_RULE = "-" * 80


def _line(result: RegoTestResult) -> str:
    if result.skip:
        return f"{result.full_name}: {result.outcome}"
    return f"{result.full_name}: {result.outcome} ({format_go_duration(result.duration_ns)})"


def pretty_report(results: Sequence[RegoTestResult], *, verbose: bool = False) -> str:
    """The report ``opa test`` (``-v`` when ``verbose``) prints for ``results``, ending in a newline."""
    lines: list[str] = []
    failed = [r for r in results if r.fail and r.error is None and not r.skip]
    if verbose and failed:
        lines += ["FAILURES", _RULE]
        for result in failed:
            lines += [_line(result), ""]
        lines += ["SUMMARY", _RULE]
    listed = False
    last_file: str | None = None
    for result in results:
        if verbose or not result.passed:
            if result.location.file != last_file:
                if last_file is not None:
                    lines.append("")
                lines.append(f"{result.location.file}:")
                last_file = result.location.file
            listed = True
            lines.append(_line(result))
            if result.output.strip():
                lines += ["", *(f"  {line}" for line in result.output.strip().splitlines()), ""]
        if result.error is not None:
            lines.append(f"  {result.error}")
    if listed:
        lines.append(_RULE)
    total = len(results)
    counts = (
        ("PASS", sum(1 for r in results if r.passed)),
        ("FAIL", sum(1 for r in results if r.fail and r.error is None and not r.skip)),
        ("SKIPPED", sum(1 for r in results if r.skip)),
        ("ERROR", sum(1 for r in results if r.error is not None and not r.skip)),
    )
    lines += [f"{label}: {count}/{total}" for label, count in counts if count]
    return "".join(f"{line}\n" for line in lines)


def _location(location: TestLocation) -> dict[str, Any]:
    return {"file": location.file, "row": location.row, "col": location.col}


def _error(error: TestError) -> dict[str, Any]:
    shown: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.location is not None:
        shown["location"] = _location(error.location)
    return shown


def json_report(results: Sequence[RegoTestResult]) -> str:
    """``opa test --format json`` for ``results``: a JSON array (two-space indent, as Go's MarshalIndent)."""
    shown: list[dict[str, Any]] = []
    for result in results:
        item: dict[str, Any] = {}
        if result.error is not None:
            item["error"] = _error(result.error)
        item["location"] = _location(result.location)
        item["package"] = result.package
        item["name"] = result.name
        if result.output:
            item["output"] = base64.b64encode(result.output.encode()).decode("ascii")
        item["duration"] = result.duration_ns
        if result.fail:
            item["fail"] = True
        if result.skip:
            item["skip"] = True
        shown.append(item)
    return json.dumps(shown, indent=2, ensure_ascii=False) + "\n"


def exit_code(results: Sequence[RegoTestResult], *, exit_zero_on_skipped: bool = False) -> int:
    """0 when every test passed (or was skipped, with ``exit_zero_on_skipped``), else 2, as ``opa test``."""
    for result in results:
        if not result.passed and not (result.skip and exit_zero_on_skipped):
            return EXIT_FAILED
    return 0
