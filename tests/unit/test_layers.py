"""DESIGN rule 1: plugins see only the framework; the framework never reaches up into the scheduler; backends
only provide clusters (they never drive a scheduler); and no two modules import each other, even indirectly."""

from __future__ import annotations

import ast
import itertools
import re
import tomllib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kubesched"

# kubesched.errors and kubesched.bounded_input (the input limits every file reader applies) are leaves: anyone may
# import them, and they import nothing of kubesched but errors.
ALLOWED = {
    # Policy plugins get their engines through the Handle (kubesched.framework.policy), never kubesched.policy.
    "plugins": {"kubesched.framework", "kubesched.api", "kubesched.errors", "kubesched.clock", "kubesched.plugins"},
    "framework": {"kubesched.framework", "kubesched.api", "kubesched.errors", "kubesched.clock", "kubesched.config"},
    "api": {"kubesched.api", "kubesched.errors", "kubesched.bounded_input"},
    "config": {"kubesched.config", "kubesched.errors", "kubesched.bounded_input"},
    "backends": {"kubesched.backends", "kubesched.framework", "kubesched.api", "kubesched.errors", "kubesched.clock"},
    # Member clusters as framework nodes: the object model and the framework's cluster contract, plus the cluster
    # plugins' names (which profiles place onto clusters); never the scheduler, a backend or a plugin itself.
    "federation": {
        "kubesched.federation",
        "kubesched.framework",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.config",
        "kubesched.plugins.names",
        # The agent client's transport only (keep-alive HTTP/1.1, a quarter of aiohttp's CPU per request), never
        # the kube API client: the hub talks to members through their agents.
        "kubesched.backends.kube.http1",
    },
    # The cluster agent runs beside one member: its API client and the federation wire format, no scheduler.
    "agent": {
        "kubesched.agent",
        "kubesched.backends",
        "kubesched.federation",
        "kubesched.framework",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.serving",  # the one way kubesched starts an HTTP server on a pre-bound socket
    },
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


# distribution name in pyproject.toml -> the module it is imported as
IMPORT_NAMES = {"PyYAML": "yaml", "gordon-to-regorus": "regorus", "prometheus-client": "prometheus_client"}


def test_every_declared_dependency_is_imported_by_the_package() -> None:
    """A runtime dependency nothing imports is dead weight for every install (and a supply-chain risk)."""
    pyproject = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    declared = [
        re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0] for requirement in pyproject["project"]["dependencies"]
    ]
    imported = set().union(*({name.split(".")[0] for name in _all_imports(path)} for path in SRC.rglob("*.py")))
    unused = [name for name in declared if IMPORT_NAMES.get(name, name.replace("-", "_")) not in imported]
    assert unused == []


def _all_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(path: Path) -> set[str]:
    """Imports made when the module is imported (not inside functions or TYPE_CHECKING blocks)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("kubesched")}


def test_no_import_cycles() -> None:
    modules = {_module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        # "from kubesched.x import y" depends on kubesched.x.y when that is a module, else on kubesched.x.
        graph[name] = {dep for dep in _top_level_imports(path) if dep in modules and dep != name}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path_stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path_stack.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                cycles.append([*path_stack[path_stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        path_stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    # A package __init__ re-exporting its own submodules is not a cycle that matters: skip those edges.
    real = [cycle for cycle in cycles if not all(_same_package(a, b) for a, b in itertools.pairwise(cycle))]
    assert real == []


def _same_package(a: str, b: str) -> bool:
    return a.startswith(b + ".") or b.startswith(a + ".")
