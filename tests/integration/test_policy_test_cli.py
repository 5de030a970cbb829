"""``kubesched policy test`` behaves as ``opa test``: data files found under the given directories, ``--run``,
``-v``, ``--format json``, a per-test time limit, OPA's exit codes, one-line errors. Real policies in ``tmp_path``,
real regorus in real child processes; the bad-input and console cases run the command as a process, so a
traceback from any process (the test worker's included) would show on its stderr."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

POLICY = """package kubernetes.authz

import rego.v1

allow if data.kubernetes.authz.levels[input.node] == data.required
"""
TESTS = """package kubernetes.authz_test

import rego.v1

import data.kubernetes.authz

test_pci_node_allowed if {
	authz.allow with input as {"node": "node-a"}
}

test_standard_node_denied if {
	not authz.allow with input as {"node": "node-b"}
}

test_wrong if {
	print("checking node-b")
	authz.allow with input as {"node": "node-b"}
}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """A policy directory whose data sits at the root (data.json) and in nested directories (data.yaml)."""
    root = tmp_path / "policies"
    write(root / "kubernetes" / "authz" / "policy.rego", POLICY)
    write(root / "kubernetes" / "authz" / "policy_test.rego", TESTS)
    write(root / "data.json", '{"required": "pci"}')
    write(root / "kubernetes" / "authz" / "levels" / "data.yaml", "node-a: pci\nnode-b: standard\n")
    return root


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["policy", "test", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_process(*argv: str, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "kubesched.cli.main", "policy", "test", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_data_files_under_the_directories_are_loaded_at_their_directory_path(
    policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(capsys, str(policies), "-r", "test_(pci|standard)", "-f", "json")
    assert code == 0, out
    assert [(r["name"], r.get("fail", False)) for r in json.loads(out)] == [
        ("test_pci_node_allowed", False),
        ("test_standard_node_denied", False),
    ]


def test_without_verbose_only_failures_and_the_summary_are_printed(
    policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(capsys, str(policies))
    assert code == 2
    test_file = policies / "kubernetes" / "authz" / "policy_test.rego"
    assert re.fullmatch(
        rf"{re.escape(str(test_file))}:\n"
        r"data\.kubernetes\.authz_test\.test_wrong: FAIL \([\d.]+(ns|µs|ms|s)\)\n"
        r"\n  checking node-b\n\n"
        rf"{'-' * 80}\n"
        r"PASS: 2/3\nFAIL: 1/3\n",
        out,
    ), out


def test_verbose_lists_every_test_with_its_time_and_output(policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, str(policies), "-v")
    assert code == 2
    lines = out.splitlines()
    assert lines[:2] == ["FAILURES", "-" * 80]
    summary = lines[lines.index("SUMMARY") :]
    assert summary[2] == f"{policies / 'kubernetes' / 'authz' / 'policy_test.rego'}:"
    outcomes = [re.fullmatch(r"(data\.\S+): (PASS|FAIL) \(([\d.]+(ns|µs|ms|s))\)", line) for line in summary[3:6]]
    assert [(m[1], m[2]) for m in outcomes if m] == [
        ("data.kubernetes.authz_test.test_pci_node_allowed", "PASS"),
        ("data.kubernetes.authz_test.test_standard_node_denied", "PASS"),
        ("data.kubernetes.authz_test.test_wrong", "FAIL"),
    ]
    assert summary[6:9] == ["", "  checking node-b", ""]
    assert summary[-3:] == ["-" * 80, "PASS: 2/3", "FAIL: 1/3"]


def test_run_selects_by_full_name(policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, str(policies), "--run", r"authz_test\.test_wrong$", "--format", "json")
    assert code == 2
    assert [r["name"] for r in json.loads(out)] == ["test_wrong"]
    code, out, _ = run_main(capsys, str(policies), "-r", "standard")
    assert (code, out) == (0, "PASS: 1/1\n")


def test_json_results_have_opas_fields(policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, str(policies), "--output", "json")  # --output, as kubesched's other commands
    assert code == 2
    results = json.loads(out)
    assert {r["package"] for r in results} == {"data.kubernetes.authz_test"}
    for result in results:
        assert set(result) <= {"error", "location", "package", "name", "output", "duration", "fail", "skip"}
        assert result["location"]["file"].endswith("policy_test.rego")
        assert isinstance(result["location"]["row"], int) and isinstance(result["duration"], int)
    [wrong] = [r for r in results if r["name"] == "test_wrong"]
    assert wrong["fail"] is True and wrong["location"]["row"] == 15
    assert "output" in wrong  # base64 of "checking node-b\n", as Go encodes []byte


def test_a_test_that_runs_too_long_is_stopped_and_the_rest_still_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path / "slow_test.rego",
        "package slow_test\n\nimport rego.v1\n\n"
        "test_loops if {\n\tr := numbers.range(1, 1000)\n"
        "\tevery a in r { every b in r { every c in r { a + b + c > 0 } } }\n}\n\n"
        "test_after if true\n",
    )
    code, out, _ = run_main(capsys, str(tmp_path), "--timeout", "500ms", "-f", "json")
    assert code == 2
    loops, after = json.loads(out)
    # Stopped (a billion iterations would otherwise run for minutes), reported as opa test does, and the
    # duration says how long it ran: at least its time limit.
    assert loops["error"]["code"] == "eval_cancel_error" and "0.5s" in loops["error"]["message"]
    assert loops["duration"] >= 0.5e9
    assert after["name"] == "test_after" and "fail" not in after and "error" not in after


def test_several_definitions_of_one_test_name_run_each_as_opa_renames_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Evaluated together, the passing body would hide the failing one.
    write(tmp_path / "dup_test.rego", "package dup_test\n\nimport rego.v1\n\ntest_x if true\n\ntest_x if false\n")
    code, out, _ = run_main(capsys, str(tmp_path), "-v")
    assert code == 2
    assert re.search(r"^data\.dup_test\.test_x: PASS ", out, re.MULTILINE)
    assert re.search(r"^data\.dup_test\.test_x#01: FAIL ", out, re.MULTILINE)


@pytest.mark.parametrize(
    ("body", "flags", "code"),
    [
        pytest.param("test_a if false", [], 2, id="failure-2"),
        pytest.param("test_a if 1 / 0", [], 2, id="error-2"),
        pytest.param("test_a if true\ntodo_test_b if false", [], 2, id="skipped-2"),
        pytest.param("test_a if true\ntodo_test_b if false", ["-z"], 0, id="skipped-with-z-0"),
        pytest.param("allow if true", [], 0, id="no-tests-0"),
        pytest.param("allow if true", ["--fail-on-empty"], 1, id="no-tests-fail-on-empty-1"),
        pytest.param("test_a if true", ["--timeout", "soon"], 1, id="usage-error-1"),
        pytest.param("test_a if true", ["--no-such-flag"], 1, id="unknown-flag-1"),
    ],
)
def test_exit_codes_are_opas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, flags: list[str], code: int
) -> None:
    write(tmp_path / "p_test.rego", f"package p_test\n\nimport rego.v1\n\n{body}\n")
    try:
        got = main(["policy", "test", str(tmp_path), *flags])
    except SystemExit as exc:  # argparse
        got = int(exc.code or 0)
    capsys.readouterr()
    assert got == code


def test_policy_test_has_its_own_verbose_and_the_global_one_still_works() -> None:
    parser = build_parser()
    own = parser.parse_args(["policy", "test", "p", "-v"])
    assert (own.test_verbose, own.verbose) == (True, False)  # a verbose report, not debug logging
    ahead = parser.parse_args(["-v", "policy", "test", "p"])
    assert (ahead.test_verbose, ahead.verbose) == (False, True)
    assert parser.parse_args(["policy", "test", "p", "--log-level", "info"]).log_level == "info"


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("files", "argv", "expected"),
    [
        pytest.param({}, ["ok_test.rego", "--data", "missing.json"], "missing.json: no such file", id="data-missing"),
        pytest.param(
            {"d.json": "{nope"}, ["ok_test.rego", "--data", "d.json"], "d.json: not valid JSON", id="not-json"
        ),
        pytest.param(
            {"d.yaml": "a: [1\n"}, ["ok_test.rego", "--data", "d.yaml"], "d.yaml: not valid YAML", id="not-yaml"
        ),
        pytest.param({"d.json": "[1]"}, ["ok_test.rego", "--data", "d.json"], "at the top level", id="not-an-object"),
        pytest.param({"d.yaml": ALIAS_BOMB}, ["ok_test.rego", "--data", "d.yaml"], "alias bomb", id="alias-bomb"),
        pytest.param(
            {"bad.rego": "package bad\n\nallow if {\n"}, ["bad.rego"], "bad.rego:4:1: ", id="policy-does-not-compile"
        ),
        pytest.param({}, ["no-such-dir"], "no-such-dir: no such file or directory", id="path-missing"),
        pytest.param(
            {"p.rego": "package p\n\nallow := true\n"},
            ["p.rego", "--fail-on-empty"],
            "no tests were run",
            id="no-tests-fail-on-empty",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_1(
    tmp_path: Path, files: dict[str, str], argv: list[str], expected: str
) -> None:
    write(tmp_path / "ok_test.rego", "package ok_test\n\nimport rego.v1\n\ntest_ok if true\n")
    for name, text in files.items():
        write(tmp_path / name, text)
    done = run_process(*argv, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ") and expected in done.stderr, done.stderr


def test_the_example_policies_pass_as_a_process_with_and_without_data() -> None:
    for argv in (["examples/policies"], ["examples/policies", "--data", "examples/policies/data.json"]):
        done = run_process(*argv)
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.fullmatch(r"PASS: (\d+)/\1\n", done.stdout), done.stdout
        assert done.stderr == ""
