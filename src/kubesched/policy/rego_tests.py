"""Run Rego unit tests as ``opa test`` does, with the embedded engine (regorus), each under a real time limit.

Who calls it: ``kubesched policy test`` (:mod:`kubesched.cli.main`), after
:func:`~kubesched.policy.rego_test_files.load_test_sources` has read the files, and the test suite, for the bundled
policies; :mod:`~kubesched.policy.rego_test_report` prints the results as OPA's reporters do. What counts as a test
and how it passes follow OPA's ``tester`` package (docs/reference/policy-contract.md#rego-unit-tests); a name two
rules define runs rule by rule (``test_x``, ``test_x#01``), as a passing body would otherwise hide a failing one.
Tests run one at a time in a child process started as the policy worker's are (regorus holds the GIL and has no time
limit of its own); the parent waits with the time left and kills the child when it runs out, reports that test as
``eval_cancel_error`` and starts a fresh child for the rest. The child is sent the modules and data, answers
``("ready", cases)`` or ``("error", message)``, then ``(fail, error, duration_ns, output)`` per test index.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import regorus

from kubesched.policy.embedded import _first_line
from kubesched.policy.worker import DEFAULT_STARTUP_TIMEOUT_SECONDS, _context, _Late, _Lost, _Worker
from kubesched.policyapi.contract import PolicyError

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "RegoTestResult",
    "TestError",
    "TestLocation",
    "run_rego_tests",
    "run_tests",
]

#: ``opa test``'s default per-test time limit.
DEFAULT_TIMEOUT_SECONDS = 5.0

TEST_PREFIX = "test_"
SKIP_PREFIX = "todo_test_"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENGINE_ERROR = re.compile(r"(?P<file>.+):(?P<row>\d+):(?P<col>\d+): (?P<message>.*)")
_PRINT_LOCATION = re.compile(r"(?P<file>.+?):\d+: ")


@dataclass(frozen=True, slots=True)
class TestLocation:
    """Where a test rule (or an error) is: the file as loaded, and its 1-based line and column."""

    __test__ = False

    file: str
    row: int
    col: int


@dataclass(frozen=True, slots=True)
class TestError:
    """Why a test could not be evaluated; printed as OPA prints its errors (``file:row: code: message``)."""

    __test__ = False

    code: str
    message: str
    location: TestLocation | None = None

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        return f"{self.location.file}:{self.location.row}: {text}" if self.location else text


@dataclass(frozen=True, slots=True)
class RegoTestResult:
    """One test's outcome, with the fields of OPA's ``tester.Result``."""

    location: TestLocation
    package: str  # data.kubernetes.authz_test
    name: str  # test_allow, cases.test_allow, test_allow#01
    fail: bool = False
    skip: bool = False
    error: TestError | None = None
    duration_ns: int = 0
    output: str = ""  # the test's print() lines, each ending in a newline

    @property
    def full_name(self) -> str:
        return f"{self.package}.{self.name}"

    @property
    def passed(self) -> bool:
        return not self.fail and not self.skip and self.error is None

    @property
    def outcome(self) -> str:
        if self.passed:
            return "PASS"
        if self.fail:
            return "FAIL"
        return "SKIPPED" if self.skip else "ERROR"


@dataclass(frozen=True, slots=True)
class _Case:
    package: str
    name: str  # as reported (test_x#01)
    query: str  # as evaluated (the renamed rule of a duplicate)
    location: TestLocation
    skip: bool
    partial: bool  # the head goes on with a variable: the value is an object of results

    @property
    def full_name(self) -> str:
        return f"{self.package}.{self.name}"


# ------------------------------------------------------------------------------------------- child side


def _render(parts: Sequence[str]) -> str:
    """A reference as Rego (and OPA's ``Ref.String``) writes it: dots where it can, brackets where it must."""
    text = parts[0]
    for part in parts[1:]:
        text += f".{part}" if _IDENTIFIER.fullmatch(part) else f"[{json.dumps(part)}]"
    return text


_Part = tuple[str | None, Mapping[str, Any] | None]  # (name, span); name None: not ground (a variable)


def _ref_parts(node: Mapping[str, Any]) -> list[_Part]:
    """The parts of a reference in regorus' AST (``Var``, ``RefDot``, ``RefBrack``), left to right."""
    kind, body = next(iter(node.items()))
    if kind == "Var":
        return [(body["value"], body["span"])]
    if kind == "RefDot":
        span, name = body["field"]
        return [*_ref_parts(body["refr"]), (name, span)]
    if kind == "RefBrack":
        index_kind, index = next(iter(body["index"].items()))
        part: _Part = (index["value"], index["span"]) if index_kind == "String" else (None, None)
        return [*_ref_parts(body["refr"]), part]
    return [(None, None)]


def _discover(ast: Sequence[Mapping[str, Any]]) -> tuple[list[_Case], dict[str, list[tuple[int, int, str]]]]:
    """The tests of every module, and the renames (file -> [(start, end, new name)]) duplicates need."""
    cases: list[_Case] = []
    renames: dict[str, list[tuple[int, int, str]]] = {}
    seen: dict[str, int] = {}
    for module in ast:
        file = module["source"]["file"]
        package_parts = [name for name, _ in _ref_parts(module["ast"]["package"]["refr"]) if name is not None]
        package = _render(["data", *package_parts])
        for rule in module["ast"]["rules"]:
            spec = rule.get("Spec")
            if spec is None or "Func" in spec["head"]:
                continue  # default values and functions are not tests
            head = next(iter(spec["head"].values()))
            parts = _ref_parts(head["refr"])
            ground = []
            for name, _ in parts:
                if name is None:
                    break
                ground.append(name)
            at = next((i for i, name in enumerate(ground) if name.startswith((TEST_PREFIX, SKIP_PREFIX))), None)
            if at is None:
                continue
            names = ground[: at + 1]
            skip = names[-1].startswith(SKIP_PREFIX)
            reported = evaluated = names
            key = f"{package}.{_render(names)}"
            count = seen.get(key, 0)
            seen[key] = count + 1
            span = parts[at][1]
            if count and not skip and span is not None:
                # OPA's rewriteDuplicateTestNames: the n-th extra definition becomes test_x#0n. regorus would
                # evaluate all definitions of one name together, so the extra one is given a name of its own.
                reported = [*names[:-1], f"{names[-1]}#{count:02d}"]
                evaluated = [*names[:-1], f"{names[-1]}__kubesched_duplicate_{count:02d}"]
                renames.setdefault(file, []).append((span["start"], span["end"], evaluated[-1]))
            location = TestLocation(file, spec["span"]["line"], spec["span"]["col"])
            partial = any(name is None for name, _ in parts[at + 1 :])
            cases.append(_Case(package, _render(reported), f"{package}.{_render(evaluated)}", location, skip, partial))
    return cases, renames


def _renamed(text: str, renames: Sequence[tuple[int, int, str]]) -> str:
    data = text.encode()  # regorus' spans are byte offsets
    for start, end, name in sorted(renames, reverse=True):
        data = data[:start] + name.encode() + data[end:]
    return data.decode()


def _engine(modules: Sequence[tuple[str, str]], data_json: str) -> Any:
    engine = regorus.Engine()
    engine.set_gather_prints(True)
    for path, text in modules:
        try:
            engine.add_policy(path, text)
        except RuntimeError as exc:
            raise PolicyError(_first_line(exc)) from None
    try:
        engine.add_data_json(data_json)
    except RuntimeError as exc:
        raise PolicyError(f"the data could not be loaded: {_first_line(exc)}") from None
    return engine


def _build(modules: Sequence[tuple[str, str]], data_json: str) -> tuple[Any, list[_Case]]:
    engine = _engine(modules, data_json)
    try:
        cases, renames = _discover(json.loads(engine.get_ast_as_json()))
    except (KeyError, TypeError, ValueError, StopIteration) as exc:
        raise PolicyError(f"could not list the policy's rules (regorus AST changed?): {exc!r}") from None
    if renames:
        modules = [(path, _renamed(text, renames[path]) if path in renames else text) for path, text in modules]
        engine = _engine(modules, data_json)
    return engine, cases


def _passes(value: Any, partial: bool) -> bool:
    if not partial:
        return value is True
    if not isinstance(value, dict):
        return False
    return all(_passes(item, isinstance(item, dict)) for item in value.values())


def _engine_error(exc: BaseException) -> TestError:
    text = _first_line(exc)
    located = _ENGINE_ERROR.fullmatch(text)
    if located is None:
        return TestError("eval_error", text)
    where = TestLocation(located["file"], int(located["row"]), int(located["col"]))
    return TestError("eval_error", located["message"], where)


def _evaluate(engine: Any, case: _Case, files: frozenset[str]) -> tuple[bool, TestError | None, int, str]:
    error: TestError | None = None
    value: Any = None
    started = time.perf_counter_ns()
    try:
        value = engine.eval_rule(case.query)
    except RuntimeError as exc:
        error = _engine_error(exc)
    duration = time.perf_counter_ns() - started
    lines = []
    for line in engine.take_prints():
        located = _PRINT_LOCATION.match(line)
        lines.append(line[located.end() :] if located and located["file"] in files else line)
    output = "".join(f"{line}\n" for line in lines)
    return error is None and not _passes(value, case.partial), error, duration, output


def _serve(conn: Connection, modules: Sequence[tuple[str, str]], data_json: str) -> None:
    """The child process: build the engine, list the tests, then evaluate the ones asked for, one at a time."""
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when the child stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # With RUST_BACKTRACE=1 in the environment, regorus captures a backtrace for every evaluation error (~0.2 s
    # each, eaten from the test's time limit) that the one-line error drops anyway. Read at the first capture.
    os.environ["RUST_LIB_BACKTRACE"] = "0"
    try:
        engine, cases = _build(modules, data_json)
    except PolicyError as exc:
        conn.send_bytes(pickle.dumps(("error", str(exc))))
        return
    except BaseException as exc:  # a bug, or a pyo3 PanicException (a BaseException): a line, not a traceback
        message = f"the policy test worker could not start: {type(exc).__name__}: {_first_line(exc)}"
        conn.send_bytes(pickle.dumps(("error", message)))
        return
    conn.send_bytes(pickle.dumps(("ready", cases)))
    files = frozenset(path for path, _ in modules)
    while True:
        try:
            index = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return  # the parent is gone, or done
        try:
            reply = _evaluate(engine, cases[index], files)
        except BaseException as exc:
            # A pyo3 PanicException is a BaseException: the engine may be broken; report it and exit, and the
            # parent starts a fresh child for the next test.
            failed = (False, TestError("internal_error", f"the policy engine panicked: {_first_line(exc)}"), 0, "")
            conn.send_bytes(pickle.dumps(failed))
            return
        conn.send_bytes(pickle.dumps(reply))


# ------------------------------------------------------------------------------------------ parent side


class _Runner:
    """The parent's end: one child at a time, replaced when a test outlives its time or kills it."""

    def __init__(self, modules: Sequence[tuple[str, str]], data_json: str) -> None:
        self._modules = tuple(modules)
        self._data_json = data_json
        self._worker: _Worker | None = None

    def start(self) -> list[_Case]:
        """Start a child and return the tests it found; :class:`PolicyError` when a module does not parse."""
        context = _context()
        parent_conn, child_conn = context.Pipe()
        process = context.Process(
            target=_serve, args=(child_conn, self._modules, self._data_json), name="kubesched-policy-test", daemon=True
        )
        try:
            process.start()
        except OSError as exc:
            parent_conn.close()
            raise PolicyError(f"the policy test worker could not be started: {exc}") from exc
        finally:
            child_conn.close()  # the child has its own copy; ours would keep the pipe open after it dies
        worker = _Worker(process, parent_conn)
        try:
            message = pickle.loads(worker.receive(time.monotonic() + DEFAULT_STARTUP_TIMEOUT_SECONDS))
        except _Lost:
            code = worker.exit_code(wait=1.0)
            worker.dispose(graceful=False)
            raise PolicyError(f"the policy test worker exited while starting (exit code {code})") from None
        except _Late:
            worker.dispose(graceful=False)
            raise PolicyError(
                f"the policy test worker did not start within {DEFAULT_STARTUP_TIMEOUT_SECONDS:g}s"
            ) from None
        if message[0] == "error":
            worker.dispose(graceful=False)
            raise PolicyError(message[1])
        self._worker = worker
        cases: list[_Case] = message[1]
        return cases

    def run(self, index: int, case: _Case, timeout_seconds: float) -> RegoTestResult:
        if self._worker is None:
            self.start()  # the same sources: the same tests, in the same order
        worker = self._worker
        assert worker is not None
        started = time.monotonic()
        try:
            fail, error, duration, output = pickle.loads(
                worker.exchange(pickle.dumps(index), started + timeout_seconds)
            )
        except _Late:
            self._discard()
            message = (
                f"context deadline exceeded: the test ran longer than {timeout_seconds:g}s (--timeout); "
                "its evaluation was stopped"
            )
            elapsed = int((time.monotonic() - started) * 1e9)
            return _result(case, error=TestError("eval_cancel_error", message), duration_ns=elapsed)
        except _Lost:
            code = worker.exit_code(wait=1.0)
            self._discard()
            lost = TestError("internal_error", f"the policy test worker exited during the test (exit code {code})")
            return _result(case, error=lost, duration_ns=int((time.monotonic() - started) * 1e9))
        if error is not None and error.code == "internal_error":
            self._discard()  # it exits after a panic
        return _result(case, fail=fail, error=error, duration_ns=duration, output=output)

    def _discard(self) -> None:
        if self._worker is not None:
            self._worker.dispose(graceful=False)
            self._worker = None

    def close(self) -> None:
        # The child holds no state worth an orderly exit: killing it is immediate, also mid-test on Ctrl-C.
        self._discard()


def _result(case: _Case, **fields: Any) -> RegoTestResult:
    return RegoTestResult(case.location, case.package, case.name, **fields)


def run_tests(
    modules: Sequence[tuple[str, str]],
    data: Mapping[str, Any],
    *,
    run: str | re.Pattern[str] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> list[RegoTestResult]:
    """Run the tests in ``modules`` over ``data``, those whose full name ``run`` matches (searched, as Go's
    ``MatchString``) when it is given, each for at most ``timeout_seconds``; in module order, then rule order.

    Raises :class:`PolicyError` when a module does not parse; an evaluation error is a test result.
    """
    pattern = re.compile(run) if isinstance(run, str) else run
    runner = _Runner(modules, json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    try:
        results: list[RegoTestResult] = []
        for index, case in enumerate(runner.start()):
            if pattern is not None and pattern.search(case.full_name) is None:
                continue
            results.append(_result(case, skip=True) if case.skip else runner.run(index, case, timeout_seconds))
        return results
    finally:
        runner.close()


def run_rego_tests(
    policy_paths: Sequence[str],
    data_paths: Sequence[str] = (),
    *,
    run: str | re.Pattern[str] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> list[RegoTestResult]:
    """Load ``policy_paths`` and ``data_paths`` as ``opa test`` would and run their tests (:func:`run_tests`)."""
    from kubesched.policy.rego_test_files import load_test_sources

    sources = load_test_sources(policy_paths, data_paths)
    return run_tests(sources.modules, sources.data, run=run, timeout_seconds=timeout_seconds)
