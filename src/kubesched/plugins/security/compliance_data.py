"""The compliance data file ComplianceScore reads: its JSON format, strict loading, and score resolution.

Who calls it: :mod:`kubesched.plugins.security.compliance_score` (at construction and on reload), and tools that
check a file before it is shipped (``load_compliance_file`` raises on every problem at once, each as ``<file>: <JSON
path>: <message>``). The format and the order in which a node's score is resolved (its record, the first matching
rule, ``default``, then missing) are documented in docs/reference/plugin-args.md#compliance-score. Unknown and
duplicated keys are errors: a typo like ``"scroe"`` must not silently fall back to the default.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubesched.errors import KubeschedError
from kubesched.plugins.helper.label_selector import LabelSelector, compile_label_selector

MIN_COMPLIANCE_SCORE = 0
MAX_COMPLIANCE_SCORE = 100

SOURCE_NODE = "node"
SOURCE_RULE = "rule"
SOURCE_DEFAULT = "default"
SOURCE_NONE = "none"

_TOP_LEVEL_KEYS = ("default", "nodes", "rules", "metadata")
_RECORD_KEYS = ("score", "expires")
_RULE_KEYS = ("name", "selector", "score", "expires")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_RFC3339_EXAMPLE = "2030-01-31T00:00:00Z"


class ComplianceDataError(KubeschedError):
    """A compliance data file could not be read or is invalid; ``problems`` holds every one, unprefixed."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {problem}" for problem in problems))


FileIdentity = tuple[int, int, int, int]
"""(device, inode, mtime ns, size) of the file a path resolves to: a ConfigMap update swaps a symlink to a
new file (new inode, maybe an older mtime), an in-place edit changes mtime or size."""


def file_identity(stat: os.stat_result) -> FileIdentity:
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


@dataclass(frozen=True, slots=True)
class Record:
    """A node's score, valid until ``expires`` (epoch seconds) when set."""

    score: int
    expires: float | None = None

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires


@dataclass(frozen=True, slots=True)
class Rule:
    """Nodes whose labels match ``selector`` score ``score`` (until ``expires``)."""

    selector: LabelSelector
    score: int
    expires: float | None = None
    name: str = ""

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where a node's score came from: ``score`` is None when the data is missing (or expired)."""

    score: int | None
    source: str
    """``node``, ``rule``, ``default`` or ``none``."""
    rule_index: int = -1
    expired: bool = False

    def describe(self) -> str:
        where = f"rule[{self.rule_index}]" if self.source == SOURCE_RULE else self.source
        if self.expired:
            return f"{where} (expired)"
        return where


@dataclass(frozen=True, slots=True)
class ComplianceData:
    """A loaded, validated compliance file. Immutable: a reload builds a new one."""

    source: str
    default: int | None
    nodes: Mapping[str, Record]
    rules: tuple[Rule, ...]
    expiry_times: tuple[float, ...]
    """Every distinct ``expires`` instant, sorted: the moments at which some answer can change."""

    @classmethod
    def build(
        cls, source: str, default: int | None, nodes: Mapping[str, Record], rules: tuple[Rule, ...]
    ) -> ComplianceData:
        times = {r.expires for r in nodes.values() if r.expires is not None}
        times.update(rule.expires for rule in rules if rule.expires is not None)
        return cls(source, default, dict(nodes), rules, tuple(sorted(times)))

    def epoch(self, now: float) -> int:
        """How many expiry instants have passed at ``now``: answers are constant while this is."""
        return bisect.bisect_right(self.expiry_times, now)

    def node_record(self, name: str) -> Record | None:
        return self.nodes.get(name)

    def resolve_labels(self, labels: Mapping[str, str], now: float) -> Resolution:
        """Steps 2-4 of the resolution (for a node without a record of its own)."""
        for index, rule in enumerate(self.rules):
            if rule.selector.matches(labels):
                if rule.expired(now):
                    return Resolution(None, SOURCE_RULE, index, expired=True)
                return Resolution(rule.score, SOURCE_RULE, index)
        if self.default is not None:
            return Resolution(self.default, SOURCE_DEFAULT)
        return Resolution(None, SOURCE_NONE)

    def resolve(self, name: str, labels: Mapping[str, str], now: float) -> Resolution:
        """The whole resolution for one node: its record, else the first matching rule, else ``default``, else missing;
        an expired record or rule is missing (later rules are not consulted: the best match is stale, not absent)."""
        record = self.node_record(name)
        if record is not None:
            if record.expired(now):
                return Resolution(None, SOURCE_NODE, expired=True)
            return Resolution(record.score, SOURCE_NODE)
        return self.resolve_labels(labels, now)

    def summary(self) -> str:
        default = "none" if self.default is None else str(self.default)
        return f"{len(self.nodes)} node records, {len(self.rules)} rules, default {default}"


# ---- parsing ------------------------------------------------------------------------------------


class _JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers the keys it saw twice (json keeps only the last value)."""

    duplicates: list[str]


def _object_hook(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _key_path(parent: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class _Parser:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)

    def check_object(self, raw: Mapping[str, Any], path: str, known: tuple[str, ...]) -> None:
        for key in getattr(raw, "duplicates", ()):
            self.problem(_key_path(path, key), "duplicate key")
        for key in raw:
            if key not in known:
                allowed = ", ".join(f'"{k}"' for k in known)
                self.problem(_key_path(path, key), f'unknown field "{key}" (allowed: {allowed})')

    def score(self, raw: object, path: str) -> int | None:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            self.problem(path, f"must be a number between 0 and 100, got {_type_name(raw)}")
            return None
        if isinstance(raw, float) and not raw.is_integer():
            self.problem(path, f"must be an integer between 0 and 100, got {raw}")
            return None
        value = int(raw)
        if not MIN_COMPLIANCE_SCORE <= value <= MAX_COMPLIANCE_SCORE:
            self.problem(path, f"must be between {MIN_COMPLIANCE_SCORE} and {MAX_COMPLIANCE_SCORE}, got {value}")
            return None
        return value

    def expires(self, raw: object, path: str) -> float | None:
        """Epoch seconds; None when absent or invalid (invalid is recorded)."""
        if raw is None:
            return None
        if isinstance(raw, str) and _RFC3339.fullmatch(raw):
            try:
                return datetime.fromisoformat(raw.upper()).timestamp()
            except ValueError as exc:
                self.problem(path, f"must be an RFC 3339 timestamp, got {json.dumps(raw)}: {exc}")
                return None
        shown = json.dumps(raw) if isinstance(raw, str) else _type_name(raw)
        self.problem(path, f'must be an RFC 3339 timestamp with a time zone (e.g. "{_RFC3339_EXAMPLE}"), got {shown}')
        return None

    def record(self, raw: object, path: str) -> Record | None:
        if isinstance(raw, Mapping):
            self.check_object(raw, path, _RECORD_KEYS)
            if "score" not in raw or raw["score"] is None:
                self.problem(_key_path(path, "score"), "required")
                score = None
            else:
                score = self.score(raw["score"], _key_path(path, "score"))
            before = len(self.problems)
            expires = self.expires(raw.get("expires"), _key_path(path, "expires"))
            if score is None or len(self.problems) != before:
                return None
            return Record(score, expires)
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            score = self.score(raw, path)
            return None if score is None else Record(score)
        self.problem(path, f'must be a number or an object {{"score": ..., "expires": ...}}, got {_type_name(raw)}')
        return None

    def rule(self, raw: object, path: str) -> Rule | None:
        if not isinstance(raw, Mapping):
            self.problem(path, f"must be an object, got {_type_name(raw)}")
            return None
        before = len(self.problems)
        self.check_object(raw, path, _RULE_KEYS)
        name = raw.get("name")
        if name is not None and not isinstance(name, str):
            self.problem(_key_path(path, "name"), f"must be a string, got {_type_name(name)}")
        selector_raw = raw.get("selector")
        selector = LabelSelector()
        if selector_raw is None:
            self.problem(_key_path(path, "selector"), 'required (use {} to match every node, or "default")')
        else:
            selector, errors = compile_label_selector(selector_raw, _key_path(path, "selector"))
            for error in errors:
                self.problems.append(str(error))
        score: int | None = None
        if raw.get("score") is None:
            self.problem(_key_path(path, "score"), "required")
        else:
            score = self.score(raw["score"], _key_path(path, "score"))
        expires = self.expires(raw.get("expires"), _key_path(path, "expires"))
        if score is None or len(self.problems) != before:
            return None
        return Rule(selector, score, expires, name if isinstance(name, str) else "")

    def document(self, raw: object, source: str) -> ComplianceData | None:
        if not isinstance(raw, Mapping):
            self.problem("", f"must be a JSON object, got {_type_name(raw)}")
            return None
        self.check_object(raw, "", _TOP_LEVEL_KEYS)
        default = None
        if raw.get("default") is not None:
            default = self.score(raw["default"], "default")
        nodes: dict[str, Record] = {}
        nodes_raw = raw.get("nodes")
        if nodes_raw is not None:
            if not isinstance(nodes_raw, Mapping):
                self.problem("nodes", f"must be an object keyed by node name, got {_type_name(nodes_raw)}")
            else:
                for key in getattr(nodes_raw, "duplicates", ()):
                    self.problem(_key_path("nodes", key), "duplicate key")
                for name, value in nodes_raw.items():
                    path = _key_path("nodes", name)
                    if not name:
                        self.problem(path, "node name must not be empty")
                        continue
                    record = self.record(value, path)
                    if record is not None:
                        nodes[name] = record
        rules: list[Rule] = []
        rules_raw = raw.get("rules")
        if rules_raw is not None:
            if not isinstance(rules_raw, list):
                self.problem("rules", f"must be an array, got {_type_name(rules_raw)}")
            else:
                for i, item in enumerate(rules_raw):
                    rule = self.rule(item, f"rules[{i}]")
                    if rule is not None:
                        rules.append(rule)
        metadata = raw.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            self.problem("metadata", f"must be an object, got {_type_name(metadata)}")
        if self.problems:
            return None
        return ComplianceData.build(source, default, nodes, tuple(rules))


def parse_compliance_data(content: bytes | str, source: str) -> ComplianceData:
    """Parse a file's content; ``source`` names the file in errors. Raises ComplianceDataError."""
    try:
        raw = json.loads(content, object_pairs_hook=_object_hook, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ComplianceDataError(source, [f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ComplianceDataError(source, [f"invalid JSON: {exc}"]) from exc
    parser = _Parser()
    data = parser.document(raw, source)
    if data is None:
        raise ComplianceDataError(source, parser.problems)
    return data


def load_compliance_file(path: str) -> tuple[ComplianceData, FileIdentity]:
    """Read and parse ``path`` (following symlinks); the identity is of the very file that was read."""
    try:
        with open(path, "rb") as handle:
            identity = file_identity(os.fstat(handle.fileno()))
            content = handle.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ComplianceDataError(path, [f"cannot read compliance data: {reason}"]) from exc
    return parse_compliance_data(content, path), identity
