"""Embedded Rego: evaluate policies in-process with regorus (Rego v1), no OPA server needed.

Loads ``.rego`` files (or every ``.rego`` file in a directory, ``*_test.rego`` excluded) and data files
(JSON or YAML, merged into ``data`` at the root), adds the generated batch module, and smoke-evaluates
every entry point, because regorus compiles lazily and would otherwise report an unknown function only
at the first decision. The revision is a digest of every policy and data byte, so a decision cache
keyed by it can never serve a decision made under other policy or data; every Decision carries it.

Files are re-read when they change (checked at most every ``reload_interval`` seconds of the injected
clock, or on demand with :meth:`EmbeddedRegoEngine.check_for_changes`); a change that does not compile
keeps the last good engine and is reported through ``last_reload_error``, and that same broken state of
the files is not compiled again until they change once more.

regorus engines are bound to the thread that made them and hold the GIL while they evaluate, so this
synchronous engine is for callers that may block: the policy worker process
(:mod:`kubesched.policy.worker`, which is what the scheduler uses) and the OPA test server. In a process with
other threads, keep an engine out of reference cycles (a traceback kept alive holds the frames that see it): the
cycle may be collected on another thread, where the regorus engine cannot be dropped (pyo3 reports "unsendable,
but is being dropped on another thread").
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regorus
import yaml

from kubesched.bounded_input import InputTooLarge, load_yaml, read_text
from kubesched.clock import Clock
from kubesched.policy.contract import (
    batch_input,
    batch_module,
    batch_rule,
    data_reference,
    interpret_result,
)
from kubesched.policy.defined_paths import undefined_path_error
from kubesched.policy.input_paths import input_paths
from kubesched.policyapi.contract import Decision, InputPaths, PolicyError, undefined_decision

log = logging.getLogger(__name__)

SINGLE_PACKAGE = "kubesched.single"
DATA_SUFFIXES = (".json", ".yaml", ".yml")


Stamp = tuple[tuple[str, int, int, int], ...]  # (path, mtime_ns, size, inode) per file


@dataclass(frozen=True, slots=True)
class PolicySources:
    """Everything an engine is built from, as read from the files: picklable, so that the policy worker can
    hand it to its replacement (which then answers with the same revision without re-reading the files)."""

    policies: tuple[tuple[str, str], ...]  # (path, text)
    data: Mapping[str, Any]
    revision: str
    stamp: Stamp


def _expand(paths: Sequence[str], suffixes: tuple[str, ...], *, skip_tests: bool) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix in suffixes and not (skip_tests and child.stem.endswith("_test")):
                    files.append(child)
        elif path.exists():
            files.append(path)
        else:
            raise PolicyError(f"{raw}: no such file or directory")
    return files


def _stamp(files: Sequence[Path]) -> Stamp:
    stamps = []
    for file in files:
        info = file.stat()  # follows symlinks: a ConfigMap update swaps the link target
        stamps.append((str(file), info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(stamps)


def _merge(into: dict[str, Any], addition: Mapping[str, Any], source: str, path: str = "") -> None:
    for key, value in addition.items():
        where = f"{path}.{key}" if path else key
        existing = into.get(key)
        if isinstance(existing, dict) and isinstance(value, Mapping):
            _merge(existing, value, source, where)
        elif key in into:
            raise PolicyError(f"{source}: data.{where} is also defined by another data file")
        else:
            into[key] = value


def _files(policy_paths: Sequence[str], data_paths: Sequence[str]) -> tuple[list[Path], list[Path]]:
    policy_files = _expand(policy_paths, (".rego",), skip_tests=True)
    if not policy_files:
        raise PolicyError(f"no .rego files found in {', '.join(policy_paths) or '(no paths)'}")
    return policy_files, _expand(data_paths, DATA_SUFFIXES, skip_tests=False)


def files_stamp(policy_paths: Sequence[str], data_paths: Sequence[str]) -> Stamp:
    """The state of every policy and data file the paths name now (raises PolicyError or OSError when they cannot
    be listed): equal stamps, unchanged files."""
    return _stamp([*itertools.chain(*_files(policy_paths, data_paths))])


def watched_paths(policy_paths: Sequence[str], data_paths: Sequence[str]) -> tuple[str, ...]:
    """The policy and data files the paths name now, and every directory they are listed from: a change of the
    files (or of which files there are: an added, removed or renamed entry changes its directory) changes the
    stat of one of these paths. Raises PolicyError or OSError when they cannot be listed."""
    policy_files, data_files = _files(policy_paths, data_paths)
    directories: list[str] = []
    for raw in (*policy_paths, *data_paths):
        if os.path.isdir(raw):
            directories.extend(sorted(top for top, _, _ in os.walk(raw, followlinks=True)))
    return tuple(dict.fromkeys([*map(str, policy_files), *map(str, data_files), *directories]))


def _read_sources(policy_paths: Sequence[str], data_paths: Sequence[str]) -> PolicySources:
    policy_files, data_files = _files(policy_paths, data_paths)
    # Stamped before reading: a file written while we read it then looks changed at the next check and is
    # read again, instead of its old content being recorded under its new stamp and never reloaded.
    stamp = _stamp([*policy_files, *data_files])
    policies = []
    digest = hashlib.sha256()
    for file in policy_files:
        try:
            text = file.read_text()
        except OSError as exc:
            raise PolicyError(f"{file}: {exc.strerror}") from exc
        policies.append((str(file), text))
        digest.update(text.encode())
    data: dict[str, Any] = {}
    for file in data_files:
        try:
            text = read_text(file)
            loaded = json.loads(text) if file.suffix == ".json" else load_yaml(text, str(file))
        except InputTooLarge as exc:
            raise PolicyError(str(exc)) from None
        except OSError as exc:
            raise PolicyError(f"{file}: {exc.strerror}") from exc
        except (ValueError, yaml.YAMLError) as exc:
            raise PolicyError(f"{file}: not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {exc}") from exc
        if loaded is None:
            continue
        if not isinstance(loaded, Mapping):
            raise PolicyError(f"{file}: a data file must hold an object at the top level")
        _merge(data, loaded, str(file))
    digest.update(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode())
    return PolicySources(tuple(policies), data, digest.hexdigest()[:16], stamp)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # regorus errors carry a source excerpt and, with RUST_BACKTRACE set, a backtrace: keep the gist.
    lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith(("|", "Stack"))]
    located = next((line.strip() for line in lines if line.strip().startswith("-->")), "")
    error = next((line.strip() for line in lines if line.strip().startswith("error:")), lines[0] if lines else "")
    return f"{located.removeprefix('--> ')}: {error.removeprefix('error: ')}" if located else error


class EmbeddedRegoEngine:
    """A policy engine evaluating Rego v1 in-process, synchronously, on the thread that built it."""

    def __init__(
        self,
        policies: Sequence[str],
        data: Sequence[str] = (),
        *,
        decision_path: str = "kubernetes/authz",
        clock: Clock | None = None,
        reload_interval: float = 5.0,
        sources: PolicySources | None = None,
    ) -> None:
        """Build from the files, or from ``sources`` read earlier (then the files are only watched)."""
        self._policy_paths = list(policies)
        self._data_paths = list(data)
        self._decision_path = decision_path
        self._reference = data_reference(decision_path)
        self._clock = clock
        self._reload_interval = reload_interval
        self._last_check = clock.now() if clock is not None else 0.0
        self.last_reload_error = ""
        self._failed_stamp: Stamp | None = None
        self._sources = sources if sources is not None else _read_sources(self._policy_paths, self._data_paths)
        self._engine, self._input_paths = self._build(self._sources)

    @property
    def kind(self) -> str:
        return "embedded"

    @property
    def input_paths(self) -> InputPaths:
        """What the policy in force reads of ``input`` (:mod:`kubesched.policy.input_paths`)."""
        return self._input_paths

    @property
    def decision_path(self) -> str:
        return self._decision_path

    @property
    def sources(self) -> PolicySources:
        """What the engine in force was built from."""
        return self._sources

    @property
    def failed_stamp(self) -> Stamp | None:
        """The state of the files whose reload failed (not retried until the files change again)."""
        return self._failed_stamp

    def remember_failed_reload(self, stamp: Stamp | None, error: str) -> None:
        """Carry a reload failure over from a predecessor (the policy worker restarts engines)."""
        self._failed_stamp = stamp
        self.last_reload_error = error

    def _build(self, sources: PolicySources) -> tuple[Any, InputPaths]:
        engine = regorus.Engine()
        for path, text in sources.policies:
            try:
                engine.add_policy(path, text)
            except RuntimeError as exc:
                raise PolicyError(f"policy does not compile: {_first_line(exc)}") from exc
        ast_json = engine.get_ast_as_json()
        undefined = undefined_path_error(self._decision_path, ast_json, sources.data)
        if undefined:
            raise PolicyError(undefined)
        paths = input_paths(ast_json, sources.data)  # of the user's modules only: the generated ones come below
        generated = {
            "kubesched-single.rego": (f"package {SINGLE_PACKAGE}\n\nimport rego.v1\n\ndecision := {self._reference}\n"),
            "kubesched-batch-node.rego": batch_module(self._decision_path, "node"),
            "kubesched-batch-cluster.rego": batch_module(self._decision_path, "cluster"),
        }
        for name, text in generated.items():
            engine.add_policy(name, text)
        engine.add_data(dict(sources.data))
        # regorus compiles on first use: evaluate every entry point once so errors surface now.
        for rule in (f"data.{SINGLE_PACKAGE}.decision", batch_rule("node"), batch_rule("cluster")):
            try:
                engine.set_input({"pod": {}, "nodes": [], "clusters": [], "operation": "", "time": ""})
                engine.eval_rule(rule)
            except RuntimeError as exc:
                raise PolicyError(f"policy does not compile: {_first_line(exc)}") from exc
        return engine, paths

    def revision(self) -> str:
        self._maybe_reload()
        return self._sources.revision

    def _maybe_reload(self) -> None:
        if self._clock is None or self._reload_interval <= 0:
            return
        now = self._clock.now()
        if now - self._last_check < self._reload_interval:
            return
        self._last_check = now
        self.check_for_changes()

    def check_for_changes(self, on_change: Callable[[Stamp], None] | None = None) -> bool:
        """Stat the files now and reload them if they changed; True when another revision is now in force.

        ``on_change`` is called with the new state of the files before they are read and compiled (the
        policy worker reports it, so that a reload that never finishes can be recognised and skipped).
        A change that fails keeps the last good engine, sets ``last_reload_error`` and is not retried
        until the files change again.
        """
        stamp: Stamp | None = None
        try:
            stamp = files_stamp(self._policy_paths, self._data_paths)
            if stamp == self._sources.stamp or stamp == self._failed_stamp:
                return False
            if on_change is not None:
                on_change(stamp)
            sources = _read_sources(self._policy_paths, self._data_paths)
            if sources.revision == self._sources.revision:
                # Touched or rewritten with the same bytes (or put back after a broken change).
                self._sources, self._failed_stamp, self.last_reload_error = sources, None, ""
                return False
            engine, paths = self._build(sources)
        except (PolicyError, OSError, ValueError) as exc:  # ValueError: a file that is not UTF-8
            self._failed_stamp = stamp  # None when the files could not even be listed: retried every check
            self.last_reload_error = str(exc)
            log.error("keeping the last good policy (revision %s): %s", self._sources.revision, exc)
            return False
        self._sources, self._engine, self._input_paths = sources, engine, paths
        self._failed_stamp, self.last_reload_error = None, ""
        log.info("policy reloaded: revision %s", sources.revision)
        return True

    def _eval(self, rule: str, input_doc: Mapping[str, Any] | str) -> Any:
        try:
            if isinstance(input_doc, str):
                self._engine.set_input_json(input_doc)
            else:
                self._engine.set_input(dict(input_doc))
            return self._engine.eval_rule(rule)
        except RuntimeError as exc:
            raise PolicyError(f"evaluation failed: {_first_line(exc)}") from exc

    def _decision(self, result: Any, *, defined: bool = True) -> Decision:
        decision = interpret_result(result, defined=defined)
        # Built anew rather than dataclasses.replace: a batch makes hundreds of these per call.
        return Decision(
            decision.allowed,
            decision.reasons,
            decision.decision_id,
            pending=decision.pending,
            undefined=decision.undefined,
            revision=self._sources.revision,
        )

    def decide(self, input_doc: Mapping[str, Any] | str) -> Decision:
        """One decision; ``input_doc`` may also be the input already encoded as JSON."""
        self._maybe_reload()
        result = self._eval(f"data.{SINGLE_PACKAGE}.decision", input_doc)
        return self._decision(result, defined=result is not None)

    def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        self._maybe_reload()
        document = batch_input(pod, targets, target_kind=target_kind, operation=operation, time=time)
        answers = self.decide_batch_document(document, target_kind)
        revision = self._sources.revision
        decisions: dict[str, Decision] = {}
        for target in targets:
            name = target["metadata"]["name"]
            decisions[name] = answers[name] if name in answers else undefined_decision(revision=revision)
        return decisions

    def decide_batch_document(self, document: Mapping[str, Any] | str, target_kind: str) -> dict[str, Decision]:
        """The decisions of a batch input (:func:`~kubesched.policy.contract.batch_input`, or its JSON),
        for the targets that have one: a target left out is undefined (the caller knows the names)."""
        answers = self._eval(batch_rule(target_kind), document) or {}
        if not isinstance(answers, Mapping):
            raise PolicyError(f"batch rule returned {type(answers).__name__}, not an object")
        return {name: self._decision(answer) for name, answer in answers.items()}

    def close(self) -> None:
        return None
