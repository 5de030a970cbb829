"""Run Rego unit tests (``test_*`` rules in ``*_test.rego`` files) with the embedded engine.

What ``opa test`` does for a policy directory, so a policy can be tested where no OPA binary exists:
every rule whose name starts with ``test_`` in a ``*_test.rego`` file must evaluate to ``true``.
Used by ``kubesched policy test`` and by the test suite for the bundled example policies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import regorus
import yaml

from kubesched.framework.policy import PolicyError
from kubesched.policy.embedded import _first_line

_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)", re.MULTILINE)
_TEST_RULE = re.compile(r"^(test_\w+)\s+if\b", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class RegoTestResult:
    name: str  # data.<package>.<rule>
    passed: bool
    detail: str = ""


def _files(paths: Sequence[str], suffixes: tuple[str, ...]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in suffixes))
        elif path.is_file():
            found.append(path)
        else:
            raise PolicyError(f"{raw}: no such file or directory")
    return found


def run_rego_tests(policy_paths: Sequence[str], data_paths: Sequence[str] = ()) -> list[RegoTestResult]:
    engine = regorus.Engine()
    tests: list[str] = []
    for file in _files(policy_paths, (".rego",)):
        text = file.read_text()
        try:
            engine.add_policy(str(file), text)
        except RuntimeError as exc:
            raise PolicyError(f"policy does not compile: {_first_line(exc)}") from exc
        if file.stem.endswith("_test"):
            package = _PACKAGE.search(text)
            if package is None:
                raise PolicyError(f"{file}: no package declaration")
            tests.extend(f"data.{package.group(1)}.{rule}" for rule in _TEST_RULE.findall(text))
    for file in _files(data_paths, (".json", ".yaml", ".yml")):
        loaded = json.loads(file.read_text()) if file.suffix == ".json" else yaml.safe_load(file.read_text())
        engine.add_data(loaded or {})
    results: list[RegoTestResult] = []
    for name in tests:
        try:
            engine.set_input({})
            value = engine.eval_rule(name)
        except RuntimeError as exc:
            results.append(RegoTestResult(name, False, f"error: {_first_line(exc)}"))
            continue
        passed = value is True
        results.append(RegoTestResult(name, passed, "" if passed else f"evaluated to {json.dumps(value)}"))
    return results
