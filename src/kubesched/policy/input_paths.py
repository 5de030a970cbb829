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

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from kubesched.api.packed import canonical
from kubesched.policy.defined_paths import rule_head as _rule_head
from kubesched.policyapi.contract import DataLookup, InputPath, InputPaths, PathPart, Step

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


def _is_var(expr: object, name: str) -> bool:
    return isinstance(expr, Mapping) and "Var" in expr and expr["Var"].get("value") == name


def _is_input(expr: object) -> bool:
    return _is_var(expr, "input")


def _is_reference(expr: object) -> bool:
    return isinstance(expr, Mapping) and len(expr) == 1 and any(kind in expr for kind in _REF_KINDS)


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


# How a reference to an input path is used (``_Collector.uses``): the key of a lookup in the data at a constant
# path, the argument of a type check, or anything else.
_Use = tuple[str, InputPath]
_OTHER: _Use = ("other", ())
_TYPE_CHECK: _Use = ("type", ())


class _Collector:
    def __init__(self, builtins: frozenset[str]) -> None:
        self.paths: set[InputPath] = set()
        self.uses: dict[InputPath, set[_Use]] = {}
        self._builtins = builtins  # the builtins nothing shadows: only their calls are read specially
        self._object_get = "object" in builtins
        self._is_string = "is_string" in builtins
        self.input_vars = 0  # references to input accounted for (checked against _input_vars)
        # The rule being visited's iteration variables whose elements are read only by constant paths (see begin_rule):
        # variable -> the input paths of the collections it runs over, and the SomeIn that binds it.
        self.iterated: dict[str, tuple[list[InputPath], Mapping[str, Any]]] = {}

    def begin_rule(self, rule: object) -> None:
        """Find the rule's ``some x in <collection>`` whose ``x`` is used only as ``x.a.b`` (never whole, never bound
        again) over collections of input paths; ``x.a.b`` then reads ``<collection>[EACH].a.b``, not the collection."""
        self.iterated = {}
        binders: dict[str, list[Mapping[str, Any]]] = {}
        for some_in in _some_ins(rule):
            value = some_in.get("value")
            if isinstance(value, Mapping) and "Var" in value and len(value) == 1:
                binders.setdefault(str(value["Var"].get("value")), []).append(some_in)
        whole = _used_whole(rule)
        for name, binding in binders.items():  # in the order the rule binds them: nested collections resolve
            if len(binding) != 1 or name in whole or name in ("_", "input", "data"):
                continue
            sources = self._collection(binding[0].get("collection"))
            if sources is not None:
                self.iterated[name] = (sources[0], binding[0])

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
        if (
            "Call" in node
            and len(node) == 1
            and (self._object_get_call(node["Call"]) or self._type_check(node["Call"]) or self._count(node["Call"]))
        ):
            return
        if "SomeIn" in node and len(node) == 1 and self._iteration(node["SomeIn"]):
            return
        for value in node.values():
            self.visit(value)

    def _reference(self, expr: Mapping[str, Any], use: _Use = _OTHER) -> None:
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
            self.uses.setdefault(tuple(path), set()).add(use if constant else _OTHER)
        elif _is_var(root, "data"):
            self._data_reference(steps)
            return
        elif "Var" in root and str(root["Var"].get("value")) in self.iterated:
            self._element_reference(self.iterated[str(root["Var"]["value"])][0], steps)
            return
        elif "Var" not in root:
            self.visit(root)  # f(x).y, [..][0], {..}.k: the root expression may read input
        for step in steps:
            if "index" in step:
                self.visit(step["index"])

    def _element_reference(self, collections: list[InputPath], steps: list[Mapping[str, Any]]) -> None:
        """``x.a.b`` for an iteration variable ``x`` over ``collections``: reads ``<collection>[EACH].a.b`` of each
        (up to the first variable step, whose index expression is visited as any expression)."""
        parts: list[PathPart] = []
        constant = True
        for step in steps:
            part = str(step["field"][1]) if "field" in step else _constant_part(step["index"])
            if part is None:
                constant = False
                self.visit(step["index"])
            elif constant:
                parts.append(part)
        for collection in collections:
            path = (*collection, Step.EACH, *parts)
            self.paths.add(path)
            self.uses.setdefault(path, set()).add(_OTHER)

    def _collection(self, expr: object) -> tuple[list[InputPath], list[object], int] | None:
        """What an iteration runs over, when it is made only of input paths: a constant input reference, an
        iteration variable's constant path, ``object.get(<input reference>, <constant key>, default)`` and
        ``array.concat`` of those. (The paths, the defaults to visit, the input references in it.) None: anything
        else, whose reads are then the expression's, visited as any."""
        if isinstance(expr, Mapping) and _is_reference(expr):
            root, steps = _chain(expr)
            parts = [str(step["field"][1]) if "field" in step else _constant_part(step["index"]) for step in steps]
            if any(part is None for part in parts):
                return None
            constant = [part for part in parts if part is not None]
            if _is_input(root) and constant:
                return [tuple(constant)], [], 1
            if "Var" in root and str(root["Var"].get("value")) in self.iterated:
                return [(*c, Step.EACH, *constant) for c in self.iterated[str(root["Var"]["value"])][0]], [], 0
            return None
        if not (isinstance(expr, Mapping) and "Call" in expr and len(expr) == 1):
            return None
        call = expr["Call"]
        fcn, params = call.get("fcn"), call.get("params") or []
        if not isinstance(fcn, Mapping):
            return None
        root, steps = _chain(fcn)
        name = (str(root["Var"].get("value")) if "Var" in root else "", [s.get("field", [None, ""])[1] for s in steps])
        if name == ("object", ["get"]) and self._object_get and len(params) == 3:
            target, key, default = params
            key_path = _constant_key_path(key) if isinstance(key, Mapping) else None
            inner = self._collection(target)
            if key_path is None or inner is None or inner[2] != 1 or len(inner[0]) != 1 or inner[1]:
                return None
            return [(*inner[0][0], *key_path)], [default], 1
        if name == ("array", ["concat"]) and "array" in self._builtins and len(params) == 2:
            left, right = self._collection(params[0]), self._collection(params[1])
            if left is None or right is None:
                return None
            return left[0] + right[0], left[1] + right[1], left[2] + right[2]
        return None

    def _iteration(self, some_in: Mapping[str, Any]) -> bool:
        """``some x in <collection>`` binding an iteration variable of :meth:`begin_rule`: its collections are read
        for their size only (how many times the body runs); ``x.a.b`` reads the rest. False for any other."""
        value = some_in.get("value")
        name = str(value["Var"].get("value")) if isinstance(value, Mapping) and "Var" in value else ""
        found = self.iterated.get(name)
        if found is None or found[1] is not some_in:
            return False
        sources = self._collection(some_in.get("collection"))
        if sources is None:  # begin_rule resolved it with no more iteration variables than there are now
            return False
        paths, defaults, input_refs = sources
        for collection in paths:
            path = (*collection, Step.COUNT)
            self.paths.add(path)
            self.uses.setdefault(path, set()).add(_OTHER)
        self.input_vars += input_refs
        self.visit(defaults)
        self.visit(some_in.get("key"))
        return True

    def _count(self, call: Mapping[str, Any]) -> bool:
        """``count(<constant input reference>)``: only the size is read; False for any other call."""
        fcn, params = call.get("fcn"), call.get("params") or []
        if "count" not in self._builtins or not _is_var(fcn, "count") or len(params) != 1:
            return False
        sources = self._collection(params[0]) if _is_reference(params[0]) else None
        if sources is None or sources[2] != 1:
            return False
        for collection in sources[0]:
            path = (*collection, Step.COUNT)
            self.paths.add(path)
            self.uses.setdefault(path, set()).add(_OTHER)
        self.input_vars += 1
        return True

    def _data_reference(self, steps: list[Mapping[str, Any]]) -> None:
        """``data.a.b[<input ref>]...``: an input reference indexing the data after a constant path is a lookup
        there; every other index is visited as any expression."""
        prefix: list[str] = []
        constant = True
        for step in steps:
            if "field" in step:
                prefix.append(str(step["field"][1]))
                continue
            index = step["index"]
            if "String" in index:
                prefix.append(str(index["String"]["value"]))
                continue
            if constant and _is_reference(index) and _is_input(_chain(index)[0]):
                self._reference(index, ("lookup", tuple(prefix)))
            else:
                self.visit(index)
            constant = False  # past a variable index the reference reads a record, not a data path

    def _type_check(self, call: Mapping[str, Any]) -> bool:
        """``is_string(<input ref>)``: only the type of the value matters; False for any other call."""
        fcn, params = call.get("fcn"), call.get("params") or []
        if not self._is_string or not _is_var(fcn, "is_string") or len(params) != 1 or not _is_reference(params[0]):
            return False
        if not _is_input(_chain(params[0])[0]):
            return False
        self._reference(params[0], _TYPE_CHECK)
        return True

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
        self.uses.setdefault((*parts, *key_path), set()).add(_OTHER)
        self.visit(default)
        return True


def _some_ins(node: object) -> Iterator[Mapping[str, Any]]:
    """Every ``some … in …`` under ``node``, in the order written."""
    if isinstance(node, list):
        for item in node:
            yield from _some_ins(item)
    elif isinstance(node, Mapping):
        if "SomeIn" in node and isinstance(node["SomeIn"], Mapping):
            yield node["SomeIn"]
        for value in node.values():
            yield from _some_ins(value)


def _used_whole(node: object) -> set[str]:
    """The variables used under ``node`` other than as the root of a reference with a step (``x.a``, ``x[k]``) or
    as the element variable of a ``some … in …``: bound again, compared, passed whole, indexed into something."""
    found: set[str] = set()

    def walk(item: object) -> None:
        if isinstance(item, list):
            for element in item:
                walk(element)
            return
        if not isinstance(item, Mapping):
            return
        if len(item) == 1 and ("RefDot" in item or "RefBrack" in item):
            root, steps = _chain(item)
            if "Var" not in root:
                walk(root)
            for step in steps:
                if "index" in step:
                    walk(step["index"])
            return
        if "Var" in item and isinstance(item["Var"], Mapping):
            found.add(str(item["Var"].get("value")))
            return
        if "SomeIn" in item and isinstance(item["SomeIn"], Mapping):
            some_in = item["SomeIn"]
            walk(some_in.get("key"))
            walk(some_in.get("collection"))
            return
        for value in item.values():
            walk(value)

    walk(node)
    return found


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


def _shadowed(modules: list[tuple[str, Mapping[str, Any]]], name: str) -> bool:
    """Whether the builtin ``name`` (``object``, ``is_string``) could mean something else: an import or a rule of
    that name, or ``with name… as …``; then its calls get no special treatment."""
    for source, ast in modules:
        for imported in ast.get("imports") or ():
            alias = imported.get("as")
            if alias is not None:
                # The AST gives the alias as a span of the source only.
                text = source[alias.get("start", 0) : alias.get("end", 0)] if isinstance(alias, Mapping) else ""
                if text in ("", name):
                    return True
            else:
                _, steps = _chain(imported["refr"])
                if steps and "field" in steps[-1] and steps[-1]["field"][1] == name:
                    return True
        for rule in ast.get("rules") or ():
            head = _rule_head(rule)
            if head and head[0] == name:
                return True
        for target in _with_targets(ast.get("rules") or []):
            root, _ = _chain(target)
            if _is_var(root, name):
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


def _base_data_paths(modules: list[tuple[str, Mapping[str, Any]]], wanted: set[InputPath]) -> set[InputPath]:
    """Those of ``wanted`` (paths under ``data``) that hold only base data: no rule defines anything at, above or
    below them (kubesched's generated packages included), and no ``with data… as …`` replaces data anywhere."""
    defined: list[tuple[str, ...]] = list(GENERATED_PACKAGES)
    for _, ast in modules:
        if any(_is_var(_chain(target)[0], "data") for target in _with_targets(ast.get("rules") or [])):
            return set()
        package = _package(ast)
        defined.extend((*package, *_rule_head(rule)) for rule in ast.get("rules") or ())
    return {
        path
        for path in wanted
        if path and not any(path[: len(rule)] == rule[: len(path)] for rule in defined)  # one a prefix of the other
    }


def _lookup_paths(
    collector: _Collector, modules: list[tuple[str, Mapping[str, Any]]]
) -> dict[InputPath, tuple[InputPath, ...]]:
    """The input paths used only as keys into base data (and in type checks), with the data paths they index.
    A path read any other way, or with a prefix or an extension read too, is no lookup: its value counts."""
    candidates: dict[InputPath, set[InputPath]] = {}
    for path, uses in collector.uses.items():
        data_paths = {where for kind, where in uses if kind == "lookup"}
        if not data_paths or any(kind == "other" for kind, _ in uses):
            continue
        if any(other != path and other[: len(path)] == path[: len(other)] for other in collector.paths):
            continue
        candidates[path] = data_paths
    base = _base_data_paths(modules, {where for data_paths in candidates.values() for where in data_paths})
    return {path: tuple(sorted(data_paths)) for path, data_paths in candidates.items() if data_paths <= base}


def _record_classes(data: Mapping[str, Any], data_paths: tuple[InputPath, ...]) -> dict[str, int]:
    """Each key of the objects at ``data_paths`` → a class number, equal for keys whose records are equal at every
    one of them (from 1; a key found in none of them has class 0 and is left out)."""
    tables: list[Mapping[str, Any]] = []
    for where in data_paths:
        node: Any = data
        for part in where:
            node = node.get(part) if isinstance(node, Mapping) else None
        tables.append(node if isinstance(node, Mapping) else {})
    keys = sorted({key for table in tables for key in table if isinstance(key, str)})
    signatures: dict[str, int] = {}
    classes: dict[str, int] = {}
    for key in keys:
        signature = canonical([[table[key]] if key in table else [] for table in tables])
        classes[key] = signatures.setdefault(signature, len(signatures) + 1)
    return classes


def _lookups(paths: dict[InputPath, tuple[InputPath, ...]], data: Mapping[str, Any]) -> tuple[DataLookup, ...]:
    found = []
    for path, data_paths in sorted(paths.items(), key=lambda item: json.dumps(item[0])):
        classes = _record_classes(data, data_paths)
        fingerprint = hashlib.sha256(canonical(classes).encode()).hexdigest()[:16]
        found.append(DataLookup(path, data_paths, classes, fingerprint))
    return tuple(found)


def input_paths(ast_json: str, data: Mapping[str, Any] | None = None) -> InputPaths:
    """The ``input`` paths the modules in ``ast_json`` read (kubesched's generated modules left out); with the
    revision's ``data``, also the paths it reads only to look records up there (:class:`DataLookup`)."""
    modules = list(_modules(ast_json))
    collector = _Collector(
        frozenset(name for name in ("object", "is_string", "count", "array") if not _shadowed(modules, name))
    )
    try:
        for _, ast in modules:
            collector.visit(ast.get("imports") or [])
            for rule in ast.get("rules") or []:
                collector.begin_rule(rule)
                collector.visit(rule)
            collector.iterated = {}
    except _Unbounded:
        return InputPaths(None)
    if collector.input_vars != sum(
        _input_vars(ast.get("imports") or []) + _input_vars(ast.get("rules") or []) for _, ast in modules
    ):
        # An AST shape the collector does not know held a reference to input: it cannot tell what is read.
        return InputPaths(None)
    lookups = _lookups(_lookup_paths(collector, modules), data) if data is not None else ()
    return InputPaths(tuple(sorted(collector.paths, key=lambda path: json.dumps(path, default=str))), lookups)
