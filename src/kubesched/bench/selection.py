"""Which workloads ``kubesched bench`` runs, at what size, and ``bench --list``.

Called by :func:`kubesched.bench.runner.main`. Workloads are named (a bundled name, a name in ``--workload-dir``,
or a file) or all of a directory are taken (``--all``, or ``--workload-dir`` alone). Every ``--param NAME=N``
must be declared by at least one selected workload (a typo such as ``measurepods`` is an error suggesting
``measurePods``, never an override silently ignored); a param applies to the workloads that declare it. A named
workload that the overrides make impossible (``initNodes=0``, or nodes too small for its pods) is an error
naming its file and the param, not an unknown name.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kubesched.bench.report import Failure
from kubesched.bench.workload import Workload, WorkloadError, WorkloadScan, load_workload, scan_workloads
from kubesched.errors import KubeschedError


@dataclass(slots=True)
class Selection:
    """The workloads to run, in order, and the failures known before any runs (files that cannot be read)."""

    workloads: list[Workload] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def parse_params(pairs: Sequence[str]) -> dict[str, int]:
    """``--param NAME=N`` values, in the order given."""
    params: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value.isdigit():
            raise WorkloadError(f"--param {pair!r}: expected NAME=N with N a non-negative integer")
        params[name] = int(value)
    return params


def failure(exc: KubeschedError, source: str | None) -> Failure:
    """One line naming the workload file: an error from elsewhere (its config file) gets the file in front."""
    text = "; ".join(str(exc).splitlines())  # a config's every validation error, on the one line
    where = source or getattr(exc, "source", None) or ""
    if where and not text.startswith(where):
        text = f"{where}: {text}"
    return Failure(where, text)


def select(
    names: Sequence[str], directory: Path, params: Mapping[str, int] | None = None, *, bundled: bool = False
) -> Selection:
    """The named workloads (all of ``directory`` when ``names`` is empty) at the size ``params`` give them."""
    params = dict(params or {})
    written = scan_workloads(directory) if directory.is_dir() else WorkloadScan()
    sized = scan_workloads(directory, params) if params and directory.is_dir() else written
    by_source = {workload.source: workload for workload in sized.workloads.values()}
    sized_failures = {exc.source: exc for exc in sized.failures}
    available = {**written.workloads, **sized.workloads}  # a file broken as written may be fine at this size
    if not names:
        if not (available or written.failures):
            hint = "the installed package lacks its workloads" if bundled else "pass a directory of workload YAML"
            raise WorkloadError(f"{directory}: no workloads found ({hint})")
        check_params(params, list(available.values()))
        return Selection(list(sized.workloads.values()), [failure(exc, exc.source) for exc in sized.failures])
    chosen: list[Workload] = []
    selection = Selection()
    for name in names:
        if name in available:
            chosen.append(available[name])
        elif Path(name).is_file():
            try:
                chosen.append(load_workload(Path(name)))
            except WorkloadError as exc:
                selection.failures.append(failure(exc, name))
        else:
            known = ", ".join(sorted(available)) or "none"
            broken = [exc.source for exc in written.failures if exc.source]
            unreadable = f"; unreadable there: {', '.join(broken)}" if broken else ""
            raise WorkloadError(f"unknown workload {name!r} (known in {directory}: {known}{unreadable})")
    check_params(params, chosen)
    for workload in chosen:
        source = workload.source
        if not params:
            selection.workloads.append(workload)
        elif source in by_source:
            selection.workloads.append(by_source[source])
        elif source in sized_failures:
            selection.failures.append(failure(sized_failures[source], source))
        else:  # a file named on the command line
            try:
                selection.workloads.append(load_workload(Path(source), params, partial=True))
            except WorkloadError as exc:
                selection.failures.append(failure(exc, source))
    return selection


def check_params(params: Mapping[str, int], workloads: Sequence[Workload]) -> None:
    """Every override must be a param some selected workload declares."""
    declared = sorted({name for workload in workloads for name in workload.params})
    for name, value in params.items():
        if name in declared:
            continue
        folded = [known for known in declared if known.lower() == name.lower()]
        close = folded or difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
        suggestion = f' (did you mean "{close[0]}"?)' if close else ""
        who = workloads[0].name if len(workloads) == 1 else "the selected workloads"
        declares = f"{who} declare{'s' if len(workloads) == 1 else ''}: {', '.join(declared)}" if declared else ""
        raise WorkloadError(
            f'--param {name}={value}: no selected workload declares a param "{name}"{suggestion}'
            + (f"; {declares}" if declares else "; they declare none")
        )


# ---- bench --list ----------------------------------------------------------------------------------------


LIST_HEADER = ("WORKLOAD", "NODES", "PODS", "PARAMS", "MEASURES")


def describe(workload: Workload) -> dict[str, Any]:
    """What ``bench --list -o json`` says of one workload."""
    spec = workload.multi_cluster
    pods = [op.count for op in workload.ops if op.opcode == "createPods"]
    measured = sum(op.count for op in workload.ops if op.opcode == "createPods" and op.collect_metrics)
    entry: dict[str, Any] = {
        "name": workload.name,
        "file": workload.source,
        "nodes": (
            spec.clusters * spec.nodes_per_cluster
            if spec is not None
            else sum(op.count for op in workload.ops if op.opcode == "createNodes")
        ),
        "pods": sum(pods),
        "measured_pods": measured,
        "params": dict(workload.params),
        "description": workload.description,
        "labels": list(workload.labels),
    }
    if spec is not None:
        entry["clusters"] = spec.clusters
        entry["nodes_per_cluster"] = spec.nodes_per_cluster
    return entry


def list_workloads(selection: Selection, output: str, out: TextIO, err: TextIO) -> int:
    """``bench --list``: each selected workload's size (after ``--param``) and what it measures; exit code."""
    for broken in selection.failures:
        err.write(f"error: {broken.message}\n")
    entries = [describe(workload) for workload in selection.workloads]
    if output == "json":
        json.dump(entries, out, indent=2)
        out.write("\n")
        return 1 if selection.failures else 0
    rows = [LIST_HEADER]
    for workload, entry in zip(selection.workloads, entries, strict=True):
        spec = workload.multi_cluster
        nodes = f"{spec.clusters}x{spec.nodes_per_cluster}" if spec is not None else str(entry["nodes"])
        pods = "+".join(str(op.count) for op in workload.ops if op.opcode == "createPods") or "0"
        params = ",".join(f"{k}={v}" for k, v in workload.params.items()) or "-"
        rows.append((workload.name, nodes, pods, params, workload.description or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(LIST_HEADER) - 1)]
    for row in rows:
        out.write("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]) + "\n")
    return 1 if selection.failures else 0
