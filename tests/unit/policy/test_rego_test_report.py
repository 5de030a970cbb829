"""``policy test`` reports, byte for byte as OPA's ``tester.PrettyReporter`` / ``JSONReporter`` lay them out (the
expected texts follow the shapes in OPA's ``cmd/test_test.go``), and ``opa test``'s exit codes."""

from __future__ import annotations

import base64
import json

import pytest

from kubesched.policy.rego_test_report import exit_code, json_report, pretty_report
from kubesched.policy.rego_tests import RegoTestResult, TestError, TestLocation

A = TestLocation("policies/a_test.rego", 3, 1)
B = TestLocation("policies/b_test.rego", 7, 1)
PASSED = RegoTestResult(A, "data.a_test", "test_ok", duration_ns=172_750)
FAILED = RegoTestResult(A, "data.a_test", "test_bad", fail=True, duration_ns=1_200_000, output="got 3\n")
SKIPPED = RegoTestResult(B, "data.b_test", "todo_test_later", skip=True)
TIMED_OUT = RegoTestResult(
    B,
    "data.b_test",
    "test_slow",
    error=TestError("eval_cancel_error", "context deadline exceeded"),
    duration_ns=500_100_000,
)
RULE = "-" * 80


def test_all_passing_prints_only_the_count() -> None:
    assert pretty_report([PASSED, PASSED]) == "PASS: 2/2\n"


def test_without_verbose_only_what_did_not_pass_is_listed_by_file() -> None:
    assert pretty_report([PASSED, FAILED, SKIPPED, TIMED_OUT]) == (
        "policies/a_test.rego:\n"
        "data.a_test.test_bad: FAIL (1.2ms)\n"
        "\n"
        "  got 3\n"
        "\n"
        "\n"
        "policies/b_test.rego:\n"
        "data.b_test.todo_test_later: SKIPPED\n"
        "data.b_test.test_slow: ERROR (500.1ms)\n"
        "  eval_cancel_error: context deadline exceeded\n"
        f"{RULE}\n"
        "PASS: 1/4\n"
        "FAIL: 1/4\n"
        "SKIPPED: 1/4\n"
        "ERROR: 1/4\n"
    )


def test_verbose_lists_failures_then_every_test() -> None:
    assert pretty_report([PASSED, FAILED], verbose=True) == (
        "FAILURES\n"
        f"{RULE}\n"
        "data.a_test.test_bad: FAIL (1.2ms)\n"
        "\n"
        "SUMMARY\n"
        f"{RULE}\n"
        "policies/a_test.rego:\n"
        "data.a_test.test_ok: PASS (172.75µs)\n"
        "data.a_test.test_bad: FAIL (1.2ms)\n"
        "\n"
        "  got 3\n"
        "\n"
        f"{RULE}\n"
        "PASS: 1/2\n"
        "FAIL: 1/2\n"
    )


def test_verbose_without_failures_has_no_failures_section() -> None:
    assert pretty_report([PASSED], verbose=True) == (
        f"policies/a_test.rego:\ndata.a_test.test_ok: PASS (172.75µs)\n{RULE}\nPASS: 1/1\n"
    )


def test_json_has_opa_fields_in_opa_order() -> None:
    located = TestError("eval_error", "divide by zero", TestLocation("policies/a_test.rego", 9, 21))
    errored = RegoTestResult(A, "data.a_test", "test_err", error=located, duration_ns=7)
    report = json.loads(json_report([PASSED, FAILED, SKIPPED, errored]))
    assert report[0] == {
        "location": {"file": "policies/a_test.rego", "row": 3, "col": 1},
        "package": "data.a_test",
        "name": "test_ok",
        "duration": 172_750,
    }
    assert list(report[1]) == ["location", "package", "name", "output", "duration", "fail"]
    assert base64.b64decode(report[1]["output"]) == b"got 3\n"  # []byte in Go's JSON: base64
    assert report[2]["skip"] is True and report[2]["duration"] == 0
    assert report[3]["error"] == {
        "code": "eval_error",
        "message": "divide by zero",
        "location": {"file": "policies/a_test.rego", "row": 9, "col": 21},
    }
    assert next(iter(report[3])) == "error" and "fail" not in report[3]
    assert json_report([]) == "[]\n"


@pytest.mark.parametrize(
    ("results", "zero_on_skipped", "code"),
    [
        pytest.param([PASSED], False, 0, id="all-pass"),
        pytest.param([PASSED, FAILED], False, 2, id="a-failure"),
        pytest.param([TIMED_OUT], False, 2, id="an-error"),
        pytest.param([PASSED, SKIPPED], False, 2, id="a-skipped-test"),
        pytest.param([PASSED, SKIPPED], True, 0, id="skipped-with-exit-zero-on-skipped"),
        pytest.param([FAILED, SKIPPED], True, 2, id="failure-with-exit-zero-on-skipped"),
        pytest.param([], False, 0, id="no-tests"),
    ],
)
def test_exit_codes_are_opas(results: list[RegoTestResult], zero_on_skipped: bool, code: int) -> None:
    assert exit_code(results, exit_zero_on_skipped=zero_on_skipped) == code
