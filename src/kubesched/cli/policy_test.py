"""``kubesched policy test``: a policy's Rego unit tests, run as ``opa test`` runs them, where no OPA binary is.

The same flags, output and exit codes as ``opa test`` where kubesched has the feature: ``-r/--run``, ``-v``,
``-f/--format`` (also ``-o/--output``, as kubesched's other commands), ``--timeout``, ``-z``,
``--fail-on-empty``; plus ``--data`` (kubesched's own: a data file at ``data``). Loading is
:mod:`kubesched.policy.rego_test_files`, running :mod:`kubesched.policy.rego_tests`, the report
:mod:`kubesched.policy.rego_test_report`.

Exit codes are OPA's: 0 all passed, 2 a test failed, errored or was skipped, 1 for everything else: a file that
cannot be read or parsed (one line on stderr, from ``main``) and wrong usage too, where argparse would exit 2,
because here 2 means that tests failed and a CI job must be able to tell the two apart.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any, NoReturn

from kubesched.cli.common import warn

__all__ = ["UsageExitParser", "add_policy_test_command", "cmd_policy_test"]


class UsageExitParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with ``usage_exit_code`` (argparse's 2 unless told otherwise)."""

    def __init__(self, *args: Any, usage_exit_code: int = 2, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.usage_exit_code = usage_exit_code

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_exit_code, f"{self.prog}: error: {message}\n")


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None


def _duration(text: str) -> float:
    """Seconds in ``--timeout``: a Go duration (``5s``, ``500ms``, ``1m30s``), as ``opa test`` reads it, or a bare
    number of seconds; negatives refused."""
    from kubesched.durations import DurationError, parse_go_duration

    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            seconds = parse_go_duration(raw) / 1e9
        except DurationError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a duration (use e.g. 5s, 500ms, 1m30s)") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative duration")
    return seconds


def add_policy_test_command(commands: argparse._SubParsersAction[UsageExitParser]) -> None:
    test = commands.add_parser(
        "test",
        help="run the test_* rules of Rego policies, like opa test",
        description="Run the test_* rules of the .rego files under PATHS, with the data of the .json/.yaml files "
        "there (each at the data path its directories name), as opa test does.",
        usage_exit_code=1,
    )
    test.add_argument("paths", nargs="+", metavar="PATH", help=".rego and data files, or directories (recursive)")
    test.add_argument(
        "--data",
        action="append",
        metavar="PATH",
        help="data file (JSON or YAML) merged at data, or a directory of them; repeatable. A file the PATHS already "
        "hold is read once",
    )
    test.add_argument(
        "-r", "--run", type=_regex, metavar="REGEX", help="run only tests whose full name (data.pkg.test_x) matches"
    )
    # dest is not "verbose": that is the global option (debug logging), which this one hides after "policy test".
    test.add_argument(
        "-v", "--verbose", dest="test_verbose", action="store_true", help="list every test, its time and output"
    )
    test.add_argument(
        "-f",
        "--format",
        "-o",
        "--output",
        dest="format",
        choices=("pretty", "json"),
        default="pretty",
        help="pretty (default) or json: one object per test, as opa test --format json",
    )
    test.add_argument(
        "--timeout",
        type=_duration,
        metavar="DURATION",
        help="stop a test that runs longer and report it as an error: 500ms, 5s, 1m (default 5s, as opa)",
    )
    test.add_argument(
        "-z", "--exit-zero-on-skipped", action="store_true", help="skipped (todo_test_) tests do not make exit 2"
    )
    test.add_argument("--fail-on-empty", action="store_true", help="exit 1 when no test was run")
    test.set_defaults(func=cmd_policy_test, usage_parser=test)


def cmd_policy_test(args: argparse.Namespace) -> int:
    from kubesched.policy.rego_test_files import load_test_sources
    from kubesched.policy.rego_test_report import exit_code, json_report, pretty_report
    from kubesched.policy.rego_tests import DEFAULT_TIMEOUT_SECONDS, run_tests

    sources = load_test_sources(args.paths, args.data or [])
    warn(sources.warnings)
    timeout = args.timeout or DEFAULT_TIMEOUT_SECONDS  # no --timeout, or 0 (unset to opa test): OPA's 5 s
    results = run_tests(sources.modules, sources.data, run=args.run, timeout_seconds=timeout)
    if args.format == "json":
        sys.stdout.write(json_report(results))
    else:
        sys.stdout.write(pretty_report(results, verbose=args.test_verbose))
    if not results:
        # opa test is silent here and exits 0 unless --fail-on-empty; a line on stderr changes no exit code.
        where = f"matches --run {args.run.pattern!r}" if args.run is not None else f"in {', '.join(args.paths)}"
        if args.fail_on_empty:
            print(f"error: no tests were run: no test_ rule {where}", file=sys.stderr)
            return 1
        warn([f"no tests were run: no test_ rule {where}"])
    return exit_code(results, exit_zero_on_skipped=args.exit_zero_on_skipped)
