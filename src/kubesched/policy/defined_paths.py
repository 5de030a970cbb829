"""Which documents a set of Rego modules and a data tree define, so that a ``decisionPath`` nothing defines is
refused when the engine is built, not answered "undefined" for every pod once it runs.

Called by :class:`~kubesched.policy.embedded.EmbeddedRegoEngine` on every build (start-up, ``config
validate``, reloads). It reads regorus' AST (``get_ast_as_json``): each module's package and the head
reference of each rule, up to the first part that is not a constant (``z[k] := ...`` defines ``z``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

Path = tuple[str, ...]


def _ref_parts(ref: Mapping[str, Any]) -> list[str]:
    """``a.b["c"][k]`` → ``["a", "b", "c"]``: the constant prefix of a reference."""
    if "Var" in ref:
        return [str(ref["Var"]["value"])]
    if "RefDot" in ref:
        dot = ref["RefDot"]
        return [*_ref_parts(dot["refr"]), str(dot["field"][1])]
    if "RefBrack" in ref:
        brack = ref["RefBrack"]
        parts = _ref_parts(brack["refr"])
        index = brack["index"]
        return [*parts, str(index["String"]["value"])] if "String" in index and parts else parts
    return []


def rule_head(rule: Mapping[str, Any]) -> list[str]:
    body = rule.get("Spec") or rule.get("Default") or {}
    head = body.get("head", body)  # a Default rule carries its reference directly
    for kind in ("Compr", "Set", "Func"):
        if kind in head:
            return _ref_parts(head[kind]["refr"])
    return _ref_parts(head["refr"]) if "refr" in head else []


def defined_paths(ast_json: str) -> tuple[list[Path], list[Path]]:
    """The modules' packages, and the documents their rules define (package + rule reference)."""
    packages: list[Path] = []
    rules: list[Path] = []
    for module in json.loads(ast_json):
        ast = module.get("ast", module)
        package = tuple(_ref_parts(ast["package"]["refr"]))
        packages.append(package)
        for rule in ast.get("rules", ()):
            head = rule_head(rule)
            if head:
                rules.append((*package, *head))
    return packages, rules


def _in_data(path: Path, data: Mapping[str, Any]) -> bool:
    node: Any = data
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def is_defined(path: Path, packages: Sequence[Path], rules: Sequence[Path], data: Mapping[str, Any]) -> bool:
    """True when ``path`` holds a package (``kubernetes`` holds ``kubernetes.authz``), names or holds a rule, or
    lies inside a rule's value (``authz.decision.allowed``) or in the data."""
    if _in_data(path, data):
        return True
    if any(package[: len(path)] == path for package in packages if len(package) >= len(path)):
        return True
    return any(rule[: len(path)] == path[: len(rule)] for rule in rules)


def undefined_path_error(decision_path: str, ast_json: str, data: Mapping[str, Any]) -> str:
    """"" when ``decision_path`` (``kubernetes/authz``) is defined by the modules or the data, else why not."""
    path = tuple(part for part in decision_path.strip("/").split("/") if part)
    packages, rules = defined_paths(ast_json)
    if is_defined(path, packages, rules, data):
        return ""
    shown = ", ".join(sorted({".".join(("data", *package)) for package in packages})) or "none"
    return (
        f'decisionPath "{decision_path}" (data.{".".join(path)}) is not defined by the loaded policies or data '
        f"(packages: {shown})"
    )
