"""The audit record: one scheduling decision, as it is written to every audit sink.

Built by :mod:`kubesched.audit.builder` from the scheduler's attempt records, written by the sinks
(:mod:`kubesched.audit.sinks`), read back by :mod:`kubesched.audit.verify` and :mod:`kubesched.audit.query`. Its JSON
form (``schema: kubesched.io/audit/v1``; keys may be added, none removed) is documented in
docs/reference/audit-schema.md#record, and a test holds that page to the keys written here. Records hold no
floating-point numbers (times are RFC 3339 strings, scores integers), so their canonical JSON, which the hash chain
covers, is the same in every language and on every platform.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.errors import KubeschedError, json_type_phrase
from kubesched.policyapi.verdicts import VERDICT_ALLOW, VERDICT_DENY, VERDICT_ERROR, VERDICT_EXEMPT, PolicyVerdict
from kubesched.scheduler.results import PHASE_ORDER as _PHASES

SCHEMA = "kubesched.io/audit/v1"

TARGET_NODE = "node"
TARGET_CLUSTER = "cluster"
TARGET_KINDS = (TARGET_NODE, TARGET_CLUSTER)

VERDICTS = (VERDICT_ALLOW, VERDICT_DENY, VERDICT_ERROR, VERDICT_EXEMPT)

# The phases of an attempt in the order they happen; a record lists the ones the attempt reached.
PHASE_ORDER: tuple[str, ...] = tuple(str(phase) for phase in _PHASES)


class AuditRecordError(KubeschedError):
    """A JSON object is not an audit record: names the field that is wrong."""


def rfc3339(seconds: float) -> str:
    """Clock seconds as an RFC 3339 UTC timestamp with microseconds (``2024-05-01T12:00:00.000000Z``)."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_rfc3339(text: str) -> datetime.datetime:
    """An RFC 3339 timestamp (a zone is required); raises ValueError otherwise."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (write e.g. {text}Z)")
    return moment


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    owner: OwnerRef | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ClusterObservation:
    """One member cluster in a cross-cluster decision: when its state was observed, how old that state was when
    the cycle took its snapshot, and which Filter plugin refused it (empty when it passed or was not asked)."""

    name: str
    observed_at: str | None  # RFC 3339; None: the source reports the member continuously
    age_ms: int
    rejected_by: str = ""
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Target:
    kind: str  # "node" | "cluster"
    name: str


@dataclass(frozen=True, slots=True)
class ScoredNode:
    """One of the best-scored nodes: its total (the weighted sum) and each score plugin's normalized score
    (0–100, before its weight is applied; the same numbers as ``kubesched simulate -o json``)."""

    node: str
    total: int
    scores: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One scheduling decision: an attempt that scheduled the pod, or one that failed (denials included)."""

    decision_id: str
    timestamp: str
    pod: PodRef
    profile: str
    result: str  # Scheduled | Unschedulable | Error
    attempts: int
    target: Target | None = None
    message: str = ""
    phases: Mapping[str, str] = field(default_factory=dict)
    verdicts: tuple[PolicyVerdict, ...] = ()
    # Verdicts left out of a failure's record (one per rejected node can be thousands).
    verdicts_omitted: int = 0
    top_scores: tuple[ScoredNode, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    # Cross-cluster decisions only: every member as the cycle saw it (written as "clusters" when present).
    clusters: tuple[ClusterObservation, ...] = ()

    @property
    def verdict(self) -> str | None:
        """``error`` when a policy engine could not decide (whether failurePolicy let the pod through or
        not), else ``deny`` when any policy verdict did not allow (enforced or not: a dryrun/warn denial is
        still a violation to audit, as in Gatekeeper), ``exempt`` when the pod was not evaluated (an exempt
        namespace or pod, an allowed break-glass), ``allow`` when every verdict allowed, None without any."""
        if not self.verdicts:
            return None
        if any(v.error for v in self.verdicts):
            return VERDICT_ERROR
        if not all(v.allowed for v in self.verdicts):
            return VERDICT_DENY
        return VERDICT_EXEMPT if any(v.exempt for v in self.verdicts) else VERDICT_ALLOW

    @property
    def time(self) -> datetime.datetime:
        return parse_rfc3339(self.timestamp)

    def to_json(self) -> dict[str, Any]:
        pod: dict[str, Any] = {"namespace": self.pod.namespace, "name": self.pod.name, "uid": self.pod.uid}
        pod["owner"] = None if self.pod.owner is None else {"kind": self.pod.owner.kind, "name": self.pod.owner.name}
        document: dict[str, Any] = {
            "schema": SCHEMA,
            "decision_id": self.decision_id,
            "timestamp": self.timestamp,
            "pod": pod,
            "profile": self.profile,
            "result": self.result,
            "attempts": self.attempts,
            "target": None if self.target is None else {"kind": self.target.kind, "name": self.target.name},
            "message": self.message,
            "phases": dict(self.phases),
            "verdict": self.verdict,
            "verdicts": [verdict_to_json(v) for v in self.verdicts],
            "verdicts_omitted": self.verdicts_omitted,
            "top_scores": [{"node": s.node, "total": s.total, "scores": dict(s.scores)} for s in self.top_scores],
            "labels": dict(self.labels),
        }
        if self.clusters:
            # Only in cross-cluster records, so node records keep their exact form (and chain hashes).
            document["clusters"] = [
                {
                    "name": c.name,
                    "observed_at": c.observed_at,
                    "age_ms": c.age_ms,
                    "rejected_by": c.rejected_by,
                    "reasons": list(c.reasons),
                }
                for c in self.clusters
            ]
        return document

    @classmethod
    def from_json(cls, obj: object) -> AuditRecord:
        """Read a record back; unknown keys (the chain's ``hash``, later schema additions) are ignored."""
        doc = _Reader(obj, "")
        schema = doc.string("schema")
        if schema != SCHEMA:
            raise AuditRecordError(f"schema: unsupported value {schema!r} (supported: {SCHEMA!r})")
        pod = doc.mapping("pod")
        owner = pod.optional_mapping("owner")
        target = doc.optional_mapping("target")
        target_kind = target.string("kind") if target is not None else None
        if target is not None and target_kind not in TARGET_KINDS:
            raise AuditRecordError(f"target.kind: unsupported value {target_kind!r} (supported: node, cluster)")
        phases = doc.mapping("phases")
        labels = doc.mapping("labels")
        return cls(
            decision_id=doc.string("decision_id"),
            timestamp=doc.timestamp("timestamp"),
            pod=PodRef(
                namespace=pod.string("namespace"),
                name=pod.string("name"),
                uid=pod.string("uid"),
                owner=None if owner is None else OwnerRef(owner.string("kind"), owner.string("name")),
            ),
            profile=doc.string("profile"),
            result=doc.string("result"),
            attempts=doc.integer("attempts"),
            target=None if target is None else Target(target.string("kind"), target.string("name")),
            message=doc.string("message"),
            phases={key: phases.timestamp(key) for key in phases},
            verdicts=tuple(verdict_from_json(item) for item in doc.items("verdicts")),
            verdicts_omitted=doc.integer("verdicts_omitted"),
            top_scores=tuple(
                ScoredNode(
                    node=item.string("node"),
                    total=item.integer("total"),
                    scores={key: item.mapping("scores").integer(key) for key in item.mapping("scores")},
                )
                for item in doc.items("top_scores")
            ),
            labels={key: labels.string(key) for key in labels},
            clusters=tuple(
                ClusterObservation(
                    name=item.string("name"),
                    observed_at=item.optional_timestamp("observed_at"),
                    age_ms=item.integer("age_ms"),
                    rejected_by=item.string("rejected_by"),
                    reasons=tuple(item.strings("reasons")),
                )
                for item in (doc.items("clusters") if "clusters" in doc.obj else ())
            ),
        )


_VERDICT_FIELDS = tuple(f.name for f in dataclasses.fields(PolicyVerdict))


# Written only when set: a record without them reads as it always has, and signs the same.
_OPTIONAL_VERDICT_FIELDS = frozenset({"note"})


def verdict_to_json(verdict: PolicyVerdict) -> dict[str, Any]:
    """Every field of the framework's PolicyVerdict under its own name (reasons as a list); ``note`` only when set."""
    out: dict[str, Any] = {}
    for name in _VERDICT_FIELDS:
        value = getattr(verdict, name)
        if name in _OPTIONAL_VERDICT_FIELDS and not value:
            continue
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def verdict_from_json(item: _Reader) -> PolicyVerdict:
    values: dict[str, Any] = {}
    defaults = {f.name: f for f in dataclasses.fields(PolicyVerdict)}
    for name in _VERDICT_FIELDS:
        if name not in item.obj:
            if defaults[name].default is dataclasses.MISSING:
                raise AuditRecordError(f"{item.path_of(name)}: required field is missing")
            continue
        value = item.obj[name]
        if name == "reasons":
            values[name] = tuple(item.strings(name))
        elif value is not None and not isinstance(value, str | bool | int):
            got = json_type_phrase(value)
            raise AuditRecordError(f"{item.path_of(name)}: expected a string, boolean or integer, got {got}")
        else:
            values[name] = value
    try:
        return PolicyVerdict(**values)
    except TypeError as exc:
        raise AuditRecordError(f"{item.path}: {exc}") from None


_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Reader:
    """Typed access to a decoded JSON object that reports the field path of what is wrong."""

    __slots__ = ("obj", "path")

    def __init__(self, obj: object, path: str) -> None:
        if not isinstance(obj, Mapping):
            raise AuditRecordError(f"{path or 'record'}: expected an object, got {json_type_phrase(obj)}")
        self.obj: Mapping[str, Any] = obj
        self.path = path

    def path_of(self, key: str) -> str:
        if _KEY.match(key):
            return f"{self.path}.{key}" if self.path else key
        return f"{self.path}[{key!r}]"

    def __iter__(self) -> Iterator[str]:
        return (str(key) for key in self.obj)

    def _get(self, key: str) -> object:
        if key not in self.obj:
            raise AuditRecordError(f"{self.path_of(key)}: required field is missing")
        return self.obj[key]

    def string(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise AuditRecordError(f"{self.path_of(key)}: expected a string, got {json_type_phrase(value)}")
        return value

    def timestamp(self, key: str) -> str:
        value = self.string(key)
        try:
            parse_rfc3339(value)
        except ValueError as exc:
            raise AuditRecordError(f"{self.path_of(key)}: {exc}") from None
        return value

    def optional_timestamp(self, key: str) -> str | None:
        return None if self._get(key) is None else self.timestamp(key)

    def integer(self, key: str) -> int:
        value = self._get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise AuditRecordError(f"{self.path_of(key)}: expected an integer, got {json_type_phrase(value)}")
        return value

    def mapping(self, key: str) -> _Reader:
        return _Reader(self._get(key), self.path_of(key))

    def optional_mapping(self, key: str) -> _Reader | None:
        value = self._get(key)
        return None if value is None else _Reader(value, self.path_of(key))

    def _list(self, key: str) -> Sequence[object]:
        value = self._get(key)
        if not isinstance(value, list):
            raise AuditRecordError(f"{self.path_of(key)}: expected a list, got {json_type_phrase(value)}")
        return value

    def items(self, key: str) -> list[_Reader]:
        return [_Reader(item, f"{self.path_of(key)}[{i}]") for i, item in enumerate(self._list(key))]

    def strings(self, key: str) -> list[str]:
        values = self._list(key)
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise AuditRecordError(f"{self.path_of(key)}[{i}]: expected a string, got {json_type_phrase(value)}")
        return [str(value) for value in values]
