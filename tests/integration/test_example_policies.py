"""The bundled example policy passes its own Rego unit tests, and a broken test is reported as failing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.cli.main import main
from kubesched.policy.rego_tests import run_rego_tests

POLICIES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def test_example_policy_unit_tests_pass() -> None:
    results = run_rego_tests([str(POLICIES)], [str(POLICIES / "data.json")])
    assert len(results) >= 6
    assert [r.full_name for r in results if not r.passed] == []


def test_failing_rego_test_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.rego").write_text("package p\n\nimport rego.v1\n\nallow if input.ok\n")
    (tmp_path / "p_test.rego").write_text(
        "package p_test\n\nimport rego.v1\n\nimport data.p\n\n"
        'test_allows if {\n\tp.allow with input as {"ok": true}\n}\n\n'
        'test_wrong if {\n\tp.allow with input as {"ok": false}\n}\n'
    )
    results = {r.full_name: r for r in run_rego_tests([str(tmp_path)])}
    assert results["data.p_test.test_allows"].passed
    assert results["data.p_test.test_wrong"].fail
    assert main(["policy", "test", str(tmp_path)]) == 2  # opa test's code for a failed test
    out = capsys.readouterr().out
    assert "data.p_test.test_wrong: FAIL (" in out and "PASS: 1/2\nFAIL: 1/2\n" in out
