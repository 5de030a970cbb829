"""Which parts of ``input`` a set of Rego modules reads, from regorus' AST (``Engine.get_ast_as_json``).

Called by :class:`~kubesched.policy.embedded.EmbeddedRegoEngine` on every build (so once per policy
revision, in the policy worker), before kubesched's generated modules are added; the result travels to
:class:`~kubesched.policy.worker.EmbeddedPolicyClient`, whose ``input_paths(revision)`` SecurityAuditFilter
reads to key its decision cache on what the policy can see of a pod.

The analysis is syntactic and errs on one side only: it may name paths the policy never reads at run time
(every module and rule counts, reachable from the decision or not), never miss one. Each reference rooted at
``input`` contributes its constant prefix (``input.pod.spec.containers[i].image`` reads the whole
``containers`` array); ``object.get(<input ref>, "key" or ["a", "b"], default)`` reads the ref plus the key
path, since that is all it looks at. Anything it cannot bound makes the answer "unbounded"
(``InputPaths(None)``), which callers treat as "reads everything", i.e. the behaviour without the
analysis: ``input`` used whole (``walk(input, …)``, ``x := input``, ``import input``, ``input[k]``), and
``with input… as …``, which changes what other rules read (sound to follow in principle, but rare enough
not to be worth the risk).

Variables bound to input (``m := input.pod.metadata``) are not followed: the binding itself counts as a read
of the whole ``metadata`` subtree, which is correct, only coarser.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from kubesched.framework.policy import InputPath, InputPaths, PathPart
from kubesched.policy.defined_paths import rule_head as _rule_head

#: kubesched's generated modules read ``input.nodes``/``input.clusters`` and re-bind ``input`` for each target:
#: they are ours, and the user's modules are analysed against the input they see.
GENERATED_PACKAGES = frozenset({("kubesched", "single"), ("kubesched", "batch")})

_REF_KINDS = ("Var", "RefDot", "RefBrack")


class _Unbounded(Exception):
    """The modules read ``input`` in a way no set of paths describes."""


def _package(ast: Mapping[str, Any]) -> tuple[str, ...]:
    parts: list[str] = []
    ref = ast["package"]["refr"]
    while True:
        if "Var" in ref:
            parts.append(str(ref["Var"]["value"]))
            break
        if "RefDot" in ref:
            parts.append(str(ref["RefDot"]["field"][1]))
            ref = ref["RefDot"]["refr"]
        elif "RefBrack" in ref and "String" in ref["RefBrack"]["index"]:
            parts.append(str(ref["RefBrack"]["index"]["String"]["value"]))
            ref = ref["RefBrack"]["refr"]
        else:
            break
    return tuple(reversed(parts))


def _chain(expr: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """A reference as (its root expression, its steps root first); a step is a RefDot or a RefBrack body."""
    steps: list[Mapping[str, Any]] = []
    node = expr
    while True:
        if "RefDot" in node:
            steps.append(node["RefDot"])
            node = node["RefDot"]["refr"]
        elif "RefBrack" in node:
            steps.append(node["RefBrack"])
            node = node["RefBrack"]["refr"]
        else:
            break
    steps.reverse()
    return node, steps


def _is_input(expr: object) -> bool:
    return isinstance(expr, Mapping) and "Var" in expr and expr["Var"].get("value") == "input"


def _constant_part(index: Mapping[str, Any]) -> PathPart | None:
    """A bracket's index when it is a constant a path can hold: a string, or a whole number (an array index)."""
    if "String" in index:
        return str(index["String"]["value"])
    if "Number" in index:
        value = index["Number"]["value"]
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _constant_key_path(expr: Mapping[str, Any]) -> InputPath | None:
    """``object.get``'s key argument as a path: ``"k"`` or ``["a", 0]``; None when not constant."""
    if "String" in expr:
        return (str(expr["String"]["value"]),)
    if "Array" in expr:
        parts: list[PathPart] = []
        for item in expr["Array"]["items"]:
            part = _constant_part(item) if isinstance(item, Mapping) else None
            if part is None:
                return None
            parts.append(part)
        return tuple(parts)
    return None


class _Collector:
    def __init__(self, object_get_is_builtin: bool) -> None:
        self.paths: set[InputPath] = set()
        self._object_get = object_get_is_builtin
        self.input_vars = 0  # references to input accounted for (checked against _input_vars)

    def visit(self, node: object) -> None:
        if isinstance(node, list):
            for item in node:
                self.visit(item)
            return
        if not isinstance(node, Mapping):
            return
        if "with_mods" in node:
            for mod in node["with_mods"] or ():
                root, _ = _chain(mod["refr"])
                if _is_input(root):
                    raise _Unbounded
        if any(kind in node for kind in _REF_KINDS) and len(node) == 1:
            self._reference(node)
            return
        if "Call" in node and len(node) == 1 and self._object_get_call(node["Call"]):
            return
        for value in node.values():
            self.visit(value)

    def _reference(self, expr: Mapping[str, Any]) -> None:
        root, steps = _chain(expr)
        if _is_input(root):
            self.input_vars += 1
            path: list[PathPart] = []
            constant = True
            for step in steps:
                part: PathPart | None
                part = str(step["field"][1]) if "field" in step else _constant_part(step["index"])
                if part is None:
                    constant = False
                if constant and part is not None:
                    path.append(part)
            if not path:
                raise _Unbounded  # input itself, or input[k]
            self.paths.add(tuple(path))
        elif "Var" not in root:
            self.visit(root)  # f(x).y, [..][0], {..}.k: the root expression may read input
        for step in steps:
            if "index" in step:
                self.visit(step["index"])

    def _object_get_call(self, call: Mapping[str, Any]) -> bool:
        """``object.get(<input ref>, <constant key>, default)``: record the ref + key and visit the default;
        False when the call is anything else (it is then visited like any expression)."""
        if not self._object_get:
            return False
        fcn, params = call.get("fcn"), call.get("params") or []
        if not isinstance(fcn, Mapping) or len(params) != 3:
            return False
        root, steps = _chain(fcn)
        if not (
            "Var" in root
            and root["Var"].get("value") == "object"
            and len(steps) == 1
            and steps[0].get("field", [None, ""])[1] == "get"
        ):
            return False
        target, key, default = params
        key_path = _constant_key_path(key) if isinstance(key, Mapping) else None
        if key_path is None or not isinstance(target, Mapping):
            return False
        target_root, target_steps = _chain(target)
        parts: list[PathPart] = []
        for step in target_steps:
            part = str(step["field"][1]) if "field" in step else _constant_part(step["index"])
            if part is None:
                return False
            parts.append(part)
        if not _is_input(target_root) or not parts:
            return False
        self.input_vars += 1
        self.paths.add((*parts, *key_path))
        self.visit(default)
        return True


def _modules(ast_json: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(source text, AST) of each module but kubesched's generated ones."""
    for module in json.loads(ast_json):
        ast = module.get("ast", module)
        if _package(ast) not in GENERATED_PACKAGES:
            yield str((module.get("source") or {}).get("contents", "")), ast


def _with_targets(node: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _with_targets(item)
    elif isinstance(node, Mapping):
        for mod in node.get("with_mods") or ():
            yield mod["refr"]
        for value in node.values():
            yield from _with_targets(value)


def _defines_object(modules: list[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether ``object.get`` could mean something else than the builtin: an import or a rule named
    ``object``, or ``with object… as …``; then ``object.get`` calls get no special treatment."""
    for source, ast in modules:
        for imported in ast.get("imports") or ():
            alias = imported.get("as")
            if alias is not None:
                # The AST gives the alias as a span of the source only.
                name = source[alias.get("start", 0) : alias.get("end", 0)] if isinstance(alias, Mapping) else ""
                if name in ("", "object"):
                    return True
            else:
                _, steps = _chain(imported["refr"])
                if steps and "field" in steps[-1] and steps[-1]["field"][1] == "object":
                    return True
        for rule in ast.get("rules") or ():
            head = _rule_head(rule)
            if head and head[0] == "object":
                return True
        for target in _with_targets(ast.get("rules") or []):
            root, _ = _chain(target)
            if "Var" in root and root["Var"].get("value") == "object":
                return True
    return False


def _input_vars(node: object) -> int:
    """Every ``input`` variable in the AST, however it is nested: the collector must have seen each one."""
    if isinstance(node, list):
        return sum(_input_vars(item) for item in node)
    if not isinstance(node, Mapping):
        return 0
    own = 1 if isinstance(node.get("Var"), Mapping) and node["Var"].get("value") == "input" else 0
    return own + sum(_input_vars(value) for value in node.values())


def input_paths(ast_json: str) -> InputPaths:
    """The ``input`` paths the modules in ``ast_json`` read (kubesched's generated modules left out)."""
    modules = list(_modules(ast_json))
    collector = _Collector(object_get_is_builtin=not _defines_object(modules))
    try:
        for _, ast in modules:
            collector.visit(ast.get("imports") or [])
            collector.visit(ast.get("rules") or [])
    except _Unbounded:
        return InputPaths(None)
    if collector.input_vars != sum(
        _input_vars(ast.get("imports") or []) + _input_vars(ast.get("rules") or []) for _, ast in modules
    ):
        # An AST shape the collector does not know held a reference to input: it cannot tell what is read.
        return InputPaths(None)
    return InputPaths(tuple(sorted(collector.paths, key=lambda path: json.dumps(path))))
