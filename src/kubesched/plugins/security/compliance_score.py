"""ComplianceScore (PreScore, Score): prefer nodes with a better compliance posture, from a data file.

Built by the framework from the registry in profiles that enable it. A node's score is the 0..100 score the data
file gives it (:mod:`kubesched.plugins.security.compliance_data`), so there is no NormalizeScore; the profile's
weight multiplies it (``weight`` in the args is the same thing, used when the profile sets none). The file is read
when the plugin is built; afterwards no cycle touches the disk: at most every ``reloadIntervalSeconds`` on the
handle's clock, PreScore starts a background check for a changed file (device, inode, mtime, size: a ConfigMap
update swaps a symlink), and a good new file takes effect from the next cycle. ``score_batch`` answers from
per-class arrays over the ``node-name`` and ``node-labels`` class columns. Args and file format:
docs/reference/plugin-args.md#compliance-score.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from kubesched.errors import FieldError
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import ClassColumn, IntArray, NodeBatch, NodeTable
from kubesched.framework.status import Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.args import validated
from kubesched.plugins.helper.classes import NODE_LABELS, NODE_NAME
from kubesched.plugins.security.compliance_data import (
    MAX_COMPLIANCE_SCORE,
    MIN_COMPLIANCE_SCORE,
    ComplianceData,
    ComplianceDataError,
    FileIdentity,
    Resolution,
    file_identity,
    load_compliance_file,
)

if TYPE_CHECKING:
    from kubesched.clock import Clock
    from kubesched.framework.interface import BatchScorePlugin, Handle, PreScorePlugin

log = logging.getLogger(__name__)

COMPLIANCE_SCORE = names.COMPLIANCE_SCORE

POLICY_NEUTRAL = "neutral"
POLICY_ZERO = "zero"
MISSING_DATA_POLICIES = (POLICY_NEUTRAL, POLICY_ZERO)

STATE_KEY = "PreScore" + COMPLIANCE_SCORE


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class ComplianceScoreArgs:
    """``ComplianceScoreArgs``: where the compliance data lives and what a node without data scores.

    ``weight`` is the plugin's score weight when the profile's ``plugins.score.enabled`` entry gives none.
    """

    weight: int = 1
    compliance_data_path: str = field(default="", metadata={"path": True})  # relative to the configuration file
    missing_data_policy: str = POLICY_NEUTRAL
    neutral_score: int = 50
    reload_interval_seconds: float = 5.0

    @property
    def missing_score(self) -> int:
        """The score of a node whose data is missing or expired."""
        return self.neutral_score if self.missing_data_policy == POLICY_NEUTRAL else MIN_COMPLIANCE_SCORE

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.weight < 1:
            errors.append(FieldError.invalid(_join(path, "weight"), self.weight, "must be greater than 0"))
        if not self.compliance_data_path:
            errors.append(
                FieldError.required(_join(path, "complianceDataPath"), "the path of the compliance data JSON file")
            )
        if self.missing_data_policy not in MISSING_DATA_POLICIES:
            errors.append(
                FieldError.unsupported(
                    _join(path, "missingDataPolicy"), self.missing_data_policy, MISSING_DATA_POLICIES
                )
            )
        if not MIN_COMPLIANCE_SCORE <= self.neutral_score <= MAX_COMPLIANCE_SCORE:
            errors.append(
                FieldError.invalid(
                    _join(path, "neutralScore"),
                    self.neutral_score,
                    f"must be between {MIN_COMPLIANCE_SCORE} and {MAX_COMPLIANCE_SCORE}",
                )
            )
        interval = self.reload_interval_seconds
        if math.isnan(interval) or math.isinf(interval) or interval < 0:
            errors.append(
                FieldError.invalid(
                    _join(path, "reloadIntervalSeconds"), interval, "must be a finite number of seconds >= 0"
                )
            )
        return errors


@dataclass(frozen=True, slots=True)
class _CycleView:
    """The data and the time one scheduling cycle scores with (written by PreScore, read by Score)."""

    data: ComplianceData
    version: int
    now: float
    missing: int

    def clone(self) -> _CycleView:
        return self

    def score(self, name: str, labels: Mapping[str, str]) -> int:
        resolved = self.data.resolve(name, labels, self.now).score
        return self.missing if resolved is None else resolved

    def name_class_score(self, key: Hashable) -> int:
        """The node record's answer for a ``node-name`` class, or -1 when there is no record."""
        record = self.data.node_record(cast(str, key))
        if record is None:
            return _NO_RECORD
        return self.missing if record.expired(self.now) else record.score

    def label_class_score(self, key: Hashable) -> int:
        """Rules, default, policy for a ``node-labels`` class (sorted label pairs)."""
        labels = dict(cast(tuple[tuple[str, str], ...], key))
        resolved = self.data.resolve_labels(labels, self.now).score
        return self.missing if resolved is None else resolved


_NO_RECORD = -1
_UNSCORED = -2


class _ClassScores:
    """Scores per class id of one class column; ``_UNSCORED`` until a batch first needs a class."""

    __slots__ = ("scores",)

    def __init__(self) -> None:
        self.scores: IntArray = np.empty(0, dtype=np.int64)

    def gather(self, column: ClassColumn, ids: IntArray, compute: Callable[[Hashable], int]) -> IntArray:
        known = len(column.values)
        if self.scores.shape[0] < known:
            grown = np.full(max(known, 2 * self.scores.shape[0]), _UNSCORED, dtype=np.int64)
            grown[: self.scores.shape[0]] = self.scores
            self.scores = grown
        out = self.scores[ids]
        todo = out == _UNSCORED
        if todo.any():
            for class_id in np.unique(ids[todo]).tolist():
                self.scores[class_id] = compute(column.values[class_id])
            out = self.scores[ids]
        return out


@dataclass(slots=True)
class _BatchCache:
    table: NodeTable
    key: tuple[int, int]
    """(data version, expiry epoch) the class scores hold for."""
    by_name: _ClassScores
    by_labels: _ClassScores


class ComplianceScore:
    """Scores nodes 0-100 by compliance data from a JSON file that is reloaded when it changes."""

    def __init__(self, args: ComplianceScoreArgs | None, handle: Handle) -> None:
        args = validated(args, ComplianceScoreArgs)
        self.args = args
        self._clock: Clock = handle.clock
        self._path = args.compliance_data_path
        self._missing = args.missing_score
        # A missing or broken file at startup is a construction error (ComplianceDataError).
        self._data, self._identity = load_compliance_file(self._path)
        self._version = 1
        self._last_check = self._clock.now()
        self._failed_identity: FileIdentity | None = None
        self._last_error: str | None = None
        self._reload_failures = 0
        self._cache: _BatchCache | None = None
        self._warned_no_pre_score = False
        self.handle = handle
        self._reloading = False
        log.info("%s: loaded %s (%s)", COMPLIANCE_SCORE, self._path, self._data.summary())

    @property
    def name(self) -> str:
        return COMPLIANCE_SCORE

    @property
    def weight(self) -> int:
        return self.args.weight

    # ---- observability -------------------------------------------------------------------------

    @property
    def data(self) -> ComplianceData:
        """The data in force (the last file that loaded cleanly)."""
        return self._data

    @property
    def data_version(self) -> int:
        """1 for the file read at startup, +1 for every successful reload."""
        return self._version

    @property
    def last_reload_error(self) -> str | None:
        """Why the last reload attempt failed; None once a reload succeeds."""
        return self._last_error

    @property
    def reload_failures(self) -> int:
        return self._reload_failures

    def explain(self, node_info: NodeInfo, now: float | None = None) -> Resolution:
        """Where the node's score comes from under the data in force (for audit records and CLIs)."""
        when = self._clock.now() if now is None else now
        return self._data.resolve(node_info.name, node_info.labels, when)

    # ---- reload --------------------------------------------------------------------------------

    def _record_failure(self, message: str) -> None:
        self._reload_failures += 1
        if message != self._last_error:
            log.warning("%s: keeping compliance data version %d: %s", COMPLIANCE_SCORE, self._version, message)
        self._last_error = message

    def reload_due(self, now: float) -> bool:
        elapsed = now - self._last_check
        return not 0 <= elapsed < self.args.reload_interval_seconds

    async def reload(self) -> bool:
        """Check the file (in a worker thread) and take a changed, valid one; True when new data took effect."""
        self._last_check = self._clock.now()
        known = (self._identity, self._failed_identity)
        try:
            outcome = await asyncio.to_thread(_read_if_changed, self._path, known)
        except Exception as exc:  # a reload problem must never fail a cycle: keep the data in force
            self._record_failure(f"{self._path}: reload failed: {type(exc).__name__}: {exc}")
            return False
        if outcome is None:
            return False
        if isinstance(outcome, _ReadFailure):
            if outcome.identity is not None:
                self._failed_identity = outcome.identity
            self._record_failure(outcome.message)
            return False
        self._data, self._identity = outcome
        self._version += 1
        self._failed_identity = None
        self._last_error = None
        log.info(
            "%s: reloaded %s as version %d (%s)", COMPLIANCE_SCORE, self._path, self._version, self._data.summary()
        )
        return True

    async def _reload_in_background(self) -> None:
        try:
            await self.reload()
        finally:
            self._reloading = False

    # ---- PreScore / Score ----------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        now = self._clock.now()
        if not self._reloading and self.reload_due(now):
            self._reloading = True
            self._last_check = now
            self.handle.spawn(self._reload_in_background())
        state.write(STATE_KEY, _CycleView(self._data, self._version, now, self._missing))
        return None

    def _view(self, state: CycleState) -> _CycleView:
        view = state.get(STATE_KEY, _CycleView)
        if view is not None:
            return view
        # PreScore is not enabled for this plugin in the profile (e.g. it is only under score.enabled):
        # score with the data in force, which then is never reloaded.
        if not self._warned_no_pre_score:
            self._warned_no_pre_score = True
            log.warning(
                "%s runs without its PreScore: %s will not be reloaded; enable it under multiPoint or preScore too",
                COMPLIANCE_SCORE,
                self._path,
            )
        return _CycleView(self._data, self._version, self._clock.now(), self._missing)

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return self._view(state).score(node_info.name, node_info.labels)

    def _batch_cache(self, table: NodeTable, view: _CycleView) -> _BatchCache:
        key = (view.version, view.data.epoch(view.now))
        cache = self._cache
        if cache is None or cache.table is not table or cache.key != key:
            cache = self._cache = _BatchCache(table, key, _ClassScores(), _ClassScores())
        return cache

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        view = self._view(state)
        table = nodes.table
        cache = self._batch_cache(table, view)
        labels_column = table.class_column(NODE_LABELS.name, NODE_LABELS.key_fn)
        by_labels = cache.by_labels.gather(labels_column, labels_column.ids[nodes.slots], view.label_class_score)
        if not view.data.nodes:
            return by_labels
        name_column = table.class_column(NODE_NAME.name, NODE_NAME.key_fn)
        by_name = cache.by_name.gather(name_column, name_column.ids[nodes.slots], view.name_class_score)
        return np.where(by_name >= 0, by_name, by_labels)


@dataclass(frozen=True, slots=True)
class _ReadFailure:
    message: str
    identity: FileIdentity | None  # the broken file's identity, so it is not parsed again


def _read_if_changed(
    path: str, known: tuple[FileIdentity | None, FileIdentity | None]
) -> tuple[ComplianceData, FileIdentity] | _ReadFailure | None:
    """In a worker thread: the new data if ``path`` now names another file than the ``known`` ones."""
    try:
        identity = file_identity(os.stat(path))
    except OSError as exc:
        return _ReadFailure(f"{path}: cannot read compliance data: {exc.strerror or exc}", None)
    if identity in known:
        return None
    try:
        return load_compliance_file(path)
    except ComplianceDataError as exc:
        return _ReadFailure(str(exc).replace("\n", "; "), identity)


if TYPE_CHECKING:

    def _conforms(plugin: ComplianceScore) -> tuple[PreScorePlugin, BatchScorePlugin]:
        return plugin, plugin
