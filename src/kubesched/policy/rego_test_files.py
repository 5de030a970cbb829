"""Which files ``kubesched policy test`` reads, and where their data goes in ``data``: what ``opa test`` does.

OPA's file loader (``v1/loader``, the non-bundle mode ``opa test`` uses) walks each path given, recursively and
in name order, and loads every ``.rego`` file as a module and every ``.json``, ``.yaml`` and ``.yml`` file as
data, whatever its name. A data file goes under ``data`` at the path its directories spell *below the path given
on the command line*: ``policy test policies`` merges ``policies/data.json`` at ``data`` and
``policies/kubernetes/authz/data.yaml`` at ``data.kubernetes.authz``; a file named on the command line goes at
``data`` itself. A document placed at ``data`` must be an object, and two files may not give one key values that
are not both objects (OPA: "merge error"). Inside directories, files with other suffixes are skipped; a file named
on the command line must have one of these suffixes (OPA would also try to parse it as each kind).

kubesched adds ``--data PATH``: read like a path given on the command line (a file at ``data``, a directory's data
files below it), with ``.rego`` files ignored. A file reached twice (named with ``--data`` and found in a directory,
or under two paths given) is read once, where OPA would merge it with itself and fail; when ``--data`` names a file
that the walk would have placed deeper, the ``--data`` placement wins and a warning says so.

YAML is read as OPA reads it (sigs.k8s.io/yaml turns it into JSON first): timestamps stay the strings they are
written as, and what JSON cannot hold (NaN, binary, sets) is refused. Every read goes through
:mod:`kubesched.bounded_input` (size limit, alias bombs refused); every problem is one :class:`PolicyError` line
naming the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesched.bounded_input import InputTooLarge, load_yaml, read_text
from kubesched.errors import json_type_phrase
from kubesched.policy.embedded import _merge
from kubesched.policyapi.contract import PolicyError

__all__ = ["DATA_SUFFIXES", "TestSources", "load_test_sources"]

DATA_SUFFIXES = (".json", ".yaml", ".yml")
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class _DataLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: ``2026-01-01`` stays a string, as in OPA."""


_DataLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True, slots=True)
class TestSources:
    """What one ``policy test`` run evaluates: the modules (path as shown, text) and the merged ``data``."""

    __test__ = False  # not a pytest test class, whatever its name

    modules: tuple[tuple[str, str], ...]
    data: dict[str, Any]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _DataFile:
    shown: str  # the path as the user will recognise it: the argument, or joined below it
    real: str  # symlinks resolved: the identity of the file, for reading it once
    prefix: tuple[str, ...]  # where under data it goes


def load_test_sources(paths: Sequence[str], data_paths: Sequence[str] = ()) -> TestSources:
    """Walk ``paths`` (modules and data) and ``data_paths`` (data only) as ``opa test`` would; read every file."""
    modules: dict[str, tuple[str, str]] = {}
    found: list[_DataFile] = []
    for raw in paths:
        _walk(raw, (), 0, modules, found, set())
    given: list[_DataFile] = []
    for raw in data_paths:
        _walk(raw, (), 0, None, given, set())
    warnings: list[str] = []
    explicit = {entry.real for entry in given}
    for entry in found:
        if entry.real in explicit and entry.prefix:
            warnings.append(
                f"{entry.shown}: given with --data, so loaded at data, not at data.{'.'.join(entry.prefix)} "
                "where its directory would place it"
            )
    data: dict[str, Any] = {}
    loaded: set[tuple[str, tuple[str, ...]]] = set()
    for entry in [*(e for e in found if e.real not in explicit), *given]:
        if (entry.real, entry.prefix) in loaded:
            continue  # the same file at the same place: read once, where OPA would fail to merge it with itself
        loaded.add((entry.real, entry.prefix))
        document = _read_data(entry.shown)
        if document is None:
            continue  # an empty file adds nothing
        _merge(data, _place(document, entry), entry.shown)
    return TestSources(tuple(modules.values()), data, tuple(dict.fromkeys(warnings)))


def _walk(
    path: str,
    prefix: tuple[str, ...],
    depth: int,
    modules: dict[str, tuple[str, str]] | None,
    data: list[_DataFile],
    open_dirs: set[str],
) -> None:
    try:
        is_dir = os.path.isdir(path)
        exists = is_dir or os.path.exists(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise PolicyError(f"{path}: {exc}") from None
    if not exists:
        raise PolicyError(f"{path}: no such file or directory")
    real = os.path.realpath(path)
    if is_dir:
        if real in open_dirs:
            return  # a symlink back to a directory being walked: OPA would walk forever
        if depth > 0:
            prefix = (*prefix, os.path.basename(path))
        try:
            names = sorted(os.listdir(path))  # name order, as Go's os.ReadDir
        except OSError as exc:
            raise PolicyError(f"{path}: {exc.strerror or exc}") from None
        open_dirs.add(real)
        for name in names:
            _walk(os.path.normpath(os.path.join(path, name)), prefix, depth + 1, modules, data, open_dirs)
        open_dirs.discard(real)
        return
    suffix = Path(path).suffix
    if suffix == ".rego":
        if modules is not None and real not in modules:
            modules[real] = (path, _read(path))
        elif modules is None and depth == 0:
            raise PolicyError(f"{path}: --data takes data files (JSON or YAML), not policies")
    elif suffix in DATA_SUFFIXES:
        data.append(_DataFile(path, real, prefix))
    elif depth == 0:
        raise PolicyError(f"{path}: can't recognize file type (want .rego, .json, .yaml or .yml)")


def _read(path: str) -> str:
    try:
        return read_text(path)
    except InputTooLarge as exc:
        raise PolicyError(str(exc)) from None
    except UnicodeDecodeError:
        raise PolicyError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise PolicyError(f"{path}: {exc.strerror or exc}") from None


def _read_data(path: str) -> Any:
    text = _read(path)
    try:
        if path.endswith(".json"):
            try:
                document = json.loads(text)
            except json.JSONDecodeError as exc:
                raise PolicyError(f"{path}: not valid JSON: {exc}") from None
        else:
            document = _load_yaml(text, path)
        # What JSON cannot hold (NaN, Infinity, binary, sets) cannot be data in OPA either.
        json.dumps(document, allow_nan=False)
    except RecursionError:
        raise PolicyError(f"{path}: nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"{path}: holds a value JSON cannot represent: {exc}") from None
    return document


def _load_yaml(text: str, path: str) -> Any:
    try:
        return load_yaml(text, path, _DataLoader)
    except InputTooLarge as exc:
        raise PolicyError(str(exc)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise PolicyError(f"{path}: not valid YAML: {where}{exc.problem or exc.context or 'malformed'}") from None
    except yaml.YAMLError as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), "malformed")
        raise PolicyError(f"{path}: not valid YAML: {first}") from None


def _place(document: Any, entry: _DataFile) -> dict[str, Any]:
    if not entry.prefix:
        if not isinstance(document, dict):
            raise PolicyError(
                f"{entry.shown}: a data file loaded at data must hold an object at the top level, "
                f"not {json_type_phrase(document)}"
            )
        return document
    placed: dict[str, Any] = {entry.prefix[-1]: document}
    for key in reversed(entry.prefix[:-1]):
        placed = {key: placed}
    return placed


