"""The audit package's imports: what it may depend on, and only the webhook sink speaks HTTP
(docs/explanation/design.md#own-the-client-and-its-errors)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

AUDIT = Path(__file__).resolve().parents[3] / "src" / "kubesched" / "audit"

ALLOWED = (
    "kubesched.audit",
    "kubesched.framework",
    "kubesched.policyapi",
    "kubesched.api",
    "kubesched.errors",
    "kubesched.durations",
    "kubesched.clock",
    "kubesched.net",
    "kubesched.scheduler.results",
    "kubesched.scheduler.diagnosis",
)
HTTP_LIBRARIES = {"aiohttp", "requests", "urllib3", "lightkube"}


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


MODULES = sorted(AUDIT.rglob("*.py"))


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(AUDIT))) for p in MODULES])
def test_audit_module_imports(path: Path) -> None:
    names = imports(path)
    ours = {name for name in names if name.startswith("kubesched")}
    # ``from kubesched import __version__`` names the package itself.
    wrong = sorted(n for n in ours if n != "kubesched" and not any(n == a or n.startswith(a + ".") for a in ALLOWED))
    assert wrong == []
    http = {name.split(".")[0] for name in names} & HTTP_LIBRARIES
    assert http == ({"aiohttp"} if path.name == "webhook.py" else set())


def test_every_audit_module_is_checked() -> None:
    assert len(MODULES) >= 12
