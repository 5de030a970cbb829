"""The package's layers, checked on every import statement in ``src/kubesched``.

The rules are those of docs/explanation/design.md#plugins-see-only-the-framework, of two kinds: what a layer
may import (:data:`ALLOWED`: plugins see only the framework, the framework never reaches up into the
scheduler, backends only provide clusters) and who may import a package (:data:`IMPORTED_ONLY_BY`: the CLI is
the top, the drivers are started by it, the scheduler is driven only by them, nothing in the product imports
the test-support package). No two modules import each other, even indirectly. Each rule is also shown to
catch an import that breaks it, planted in a scratch tree. An ast test rather than import-linter contracts:
nothing to install or configure, and it runs wherever pytest does, CI included.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kubesched"

# kubesched.errors, kubesched.bounded_input (the input limits every file reader applies) and kubesched.durations (Go's
# duration text) are leaves: anyone may import them, and they import nothing of kubesched but errors.
ALLOWED = {
    # Policy plugins get their engines through the Handle (kubesched.policyapi), never kubesched.policy; cluster
    # plugins their state and committer (kubesched.clusterapi), never kubesched.federation.
    "plugins": {
        "kubesched.framework",
        "kubesched.policyapi",
        "kubesched.clusterapi",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.durations",
        "kubesched.plugins",
    },
    "framework": {
        "kubesched.framework",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.durations",
        "kubesched.config",
    },
    "api": {"kubesched.api", "kubesched.errors", "kubesched.bounded_input"},
    # The contracts between plugins and what serves them (policy engines, member clusters): on the plugin API, below
    # the plugins, the engines and the federation.
    "policyapi": {"kubesched.policyapi", "kubesched.framework", "kubesched.api", "kubesched.errors"},
    "clusterapi": {"kubesched.clusterapi", "kubesched.framework", "kubesched.api", "kubesched.errors"},
    # Servers bench and the tests start (OPA-compatible, envtest, TLS): below every layer, so both can use them.
    "harness": {"kubesched.harness"},
    "config": {"kubesched.config", "kubesched.errors", "kubesched.bounded_input", "kubesched.durations"},
    # The network plumbing every client shares (HTTP/1.1, TLS, token files, retries): below every layer that talks
    # to a server, and above nothing of kubesched but errors and the clock.
    "net": {"kubesched.net", "kubesched.errors", "kubesched.clock"},
    "backends": {
        "kubesched.backends",
        "kubesched.framework",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.durations",
        "kubesched.net",
    },
    # Member clusters as framework nodes: the object model and the cluster contract, plus the cluster plugins' names
    # (which profiles place onto clusters); never the scheduler, a backend or a plugin itself.
    "federation": {
        "kubesched.federation",
        "kubesched.framework",
        "kubesched.clusterapi",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.config",
        "kubesched.plugins.names",
        # The agent client's transport, never the kube API client: the hub talks to members through their agents.
        "kubesched.net",
    },
    # The cluster agent runs beside one member: its API client and the federation wire format, no scheduler.
    "agent": {
        "kubesched.agent",
        "kubesched.backends",
        "kubesched.federation",
        "kubesched.framework",
        "kubesched.clusterapi",
        "kubesched.api",
        "kubesched.errors",
        "kubesched.clock",
        "kubesched.serving",  # the one way kubesched starts an HTTP server on a pre-bound socket
        "kubesched.net",
    },
}


# Who may import a package, besides the package itself and kubesched.testing (test support may import the
# product). The longest key that names an imported module decides: kubesched.scheduler.results is read by
# more than kubesched.scheduler is driven by.
DRIVERS = {"kubesched.bench", "kubesched.live", "kubesched.simulation", "kubesched.explain"}
IMPORTED_ONLY_BY: dict[str, set[str]] = {
    # Test support is for tests: nothing in the product imports it.
    "kubesched.testing": set(),
    # The CLI is the top: nothing imports it.
    "kubesched.cli": set(),
    # The drivers are started by the CLI; explain replays a simulation.
    "kubesched.bench": {"kubesched.cli"},
    "kubesched.live": {"kubesched.cli"},
    "kubesched.explain": {"kubesched.cli"},
    "kubesched.simulation": {"kubesched.cli", "kubesched.explain"},
    # The scheduler is driven by the CLI and the drivers only: never by a plugin, the framework, a backend,
    # a policy engine, the federation or the agent.
    "kubesched.scheduler": {"kubesched.cli", *DRIVERS},
    # ... and the audit trail reads its attempt records.
    "kubesched.scheduler.results": {"kubesched.cli", *DRIVERS, "kubesched.audit"},
    # The in-tree plugins are imported where a registry is assembled (the CLI, bench); the scheduler and the
    # drivers are handed one. The federation names the cluster plugins its profiles place onto.
    "kubesched.plugins": {"kubesched.cli", "kubesched.bench"},
    "kubesched.plugins.names": {"kubesched.cli", "kubesched.bench", "kubesched.federation"},
    # The audit trail is written by whoever drives a scheduler; the scheduler reports through its observer.
    "kubesched.audit": {"kubesched.cli", "kubesched.live", "kubesched.simulation"},
    # The cluster agent is a process of its own (kubesched agent); bench and the live hub embed it.
    "kubesched.agent": {"kubesched.cli", "kubesched.bench", "kubesched.live"},
    # Servers for exercising kubesched, not part of what it runs: only bench (and the tests) start them.
    "kubesched.harness": {"kubesched.bench"},
}


def _module_of(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` under ``root`` (the directory holding ``kubesched``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _is_module(name: str, root: Path) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@functools.cache
def imported_modules(path: Path, root: Path = SRC.parent) -> frozenset[str]:
    """Every kubesched module ``path`` imports, anywhere in it (functions and TYPE_CHECKING blocks included),
    relative imports resolved; ``from a import b`` counts as ``a.b`` when that is a module, else as ``a``."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_of(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.add(submodule if _is_module(submodule, root) else module)
    return frozenset(name for name in found if name.startswith("kubesched."))


def layer_violations(layer: str, root: Path = SRC.parent) -> list[str]:
    """Imports of a module of ``layer`` (a top-level package of kubesched) outside :data:`ALLOWED` for it."""
    violations = []
    for path in sorted((root / "kubesched" / layer).rglob("*.py")):
        for module in sorted(imported_modules(path, root)):
            if not any(module == allowed or module.startswith(allowed + ".") for allowed in ALLOWED[layer]):
                violations.append(f"{path.relative_to(root)} imports {module}")
    return violations


def _rule_for(module: str) -> str | None:
    """The key of :data:`IMPORTED_ONLY_BY` that decides who may import ``module`` (the longest that names it)."""
    keys = [key for key in IMPORTED_ONLY_BY if module == key or module.startswith(key + ".")]
    return max(keys, key=len) if keys else None


def importer_violations(target: str, root: Path = SRC.parent) -> list[str]:
    """Imports of a module that :data:`IMPORTED_ONLY_BY` ``[target]`` decides, by a package it does not name."""
    violations = []
    for path in sorted((root / "kubesched").rglob("*.py")):
        importer = ".".join(_module_of(path, root).split(".")[:2])
        if importer in ("kubesched.testing", target) or importer.startswith(target + "."):
            continue
        for module in sorted(imported_modules(path, root)):
            rule = _rule_for(module)
            if rule != target or module.startswith(importer + ".") or module == importer:
                continue
            if importer not in IMPORTED_ONLY_BY[target]:
                violations.append(f"{path.relative_to(root)} imports {module}")
    return violations


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    assert layer_violations(layer) == []


LEAVES = ("errors", "bounded_input", "durations")


@pytest.mark.parametrize("leaf", LEAVES)
def test_a_leaf_imports_nothing_of_kubesched_but_errors(leaf: str) -> None:
    assert imported_modules(SRC / f"{leaf}.py") <= {"kubesched.errors"}


@pytest.mark.parametrize("target", sorted(IMPORTED_ONLY_BY))
def test_package_imported_only_by_whom_it_may(target: str) -> None:
    assert importer_violations(target) == []


def _planted(kind: str, rule: str, planted_in: str, statement: str) -> Any:
    return pytest.param(kind, rule, planted_in, statement, id=f"{rule}:{planted_in}:{statement.split()[-1]}")


PLANTED = [
    *(_planted("ALLOWED", layer, layer, "import kubesched.cli.main") for layer in sorted(ALLOWED)),
    # A relative import and one inside a function are imports all the same.
    _planted("ALLOWED", "plugins", "plugins", "from ..scheduler import scheduler"),
    _planted("ALLOWED", "framework", "framework", "def later() -> None:\n    import kubesched.backends.base"),
    # The plugin API stays below the contracts that build on it.
    _planted("ALLOWED", "framework", "framework", "from kubesched.clusterapi import contract"),
    *(_planted("IMPORTED_ONLY_BY", target, "framework", f"import {target}") for target in sorted(IMPORTED_ONLY_BY)),
    _planted("IMPORTED_ONLY_BY", "kubesched.scheduler", "audit", "import kubesched.scheduler.scheduler"),
    _planted("IMPORTED_ONLY_BY", "kubesched.scheduler", "backends", "from kubesched.scheduler import scheduler"),
    _planted("IMPORTED_ONLY_BY", "kubesched.plugins", "federation", "import kubesched.plugins.registry"),
    _planted("IMPORTED_ONLY_BY", "kubesched.testing", "bench", "from kubesched import testing"),
]


@pytest.mark.parametrize(("kind", "rule", "planted_in", "statement"), PLANTED)
def test_every_rule_catches_a_planted_import(
    kind: str, rule: str, planted_in: str, statement: str, tmp_path: Path
) -> None:
    """A scratch tree with the packages the rules name and one module of ``planted_in`` that breaks ``rule``:
    the check reports that module, and only it."""
    root = tmp_path / "kubesched"
    for package in {planted_in, "cli", "scheduler", "backends", *(key.split(".")[1] for key in IMPORTED_ONLY_BY)}:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    for module in ("cli/main", "scheduler/scheduler", "scheduler/results", "backends/base", "plugins/registry"):
        (root / f"{module}.py").write_text("")
    (root / planted_in / "planted.py").write_text(statement + "\n")
    found = layer_violations(rule, tmp_path) if kind == "ALLOWED" else importer_violations(rule, tmp_path)
    assert found != []
    assert [line for line in found if not line.startswith(f"kubesched/{planted_in}/planted.py imports ")] == []


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


def test_aiohttp_is_used_only_through_its_public_api() -> None:
    """aiohttp's submodules (client_proto, connector, http, ...) change between minor releases, which ``aiohttp<4``
    allows; kubesched imports only the package itself and :mod:`aiohttp.web`."""
    private = sorted(
        f"{path.relative_to(SRC.parent)} imports {name}"
        for path in SRC.rglob("*.py")
        for name in _all_imports(path)
        if name.startswith("aiohttp.") and name != "aiohttp.web"
    )
    assert private == []
