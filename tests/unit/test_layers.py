"""DESIGN rule 1: plugins see only the framework; the framework never reaches up into the scheduler."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kubesched"

ALLOWED = {
    # Policy plugins use the policy engines (kubesched.policy); the HTTP client stays inside policy.remote.
    "plugins": {
        "kubesched.framework",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.plugins",
        "kubesched.policy",
    },
    "framework": {"kubesched.framework", "kubesched.api", "kubesched.errors", "kubesched.clock", "kubesched.config"},
    "api": {"kubesched.api", "kubesched.errors"},
    "config": {"kubesched.config", "kubesched.errors"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.startswith("kubesched")}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    violations = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for module in imported_modules(path):
            if not any(module == allowed or module.startswith(allowed + ".") for allowed in ALLOWED[layer]):
                violations.append(f"{path.relative_to(SRC)} imports {module}")
    assert violations == []


def test_only_config_imports_pydantic() -> None:
    users = [
        path.relative_to(SRC)
        for path in SRC.rglob("*.py")
        if "pydantic" in {name.split(".")[0] for name in _all_imports(path)} and path.parent.name != "config"
    ]
    assert users == []


def _all_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names
