"""Benchmark workloads as data: scheduler_perf-style YAML with params, templates and ops.

A workload names its node and pod templates (ordinary manifests with ``metadata.generateName``), a
``params`` map and a list of ops: ``createNodes {count}``, ``createPods {count, namespace,
collectMetrics, podTemplate?}``. ``$name`` in a count refers to a param. Read by the bench runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.errors import KubeschedError

OPCODES = ("createNodes", "createPods")


class WorkloadError(KubeschedError):
    pass


@dataclass(frozen=True, slots=True)
class Op:
    opcode: str
    count: int
    namespace: str = "default"
    collect_metrics: bool = False
    template: Mapping[str, Any] = field(default_factory=dict)
    unique_labels: bool = False  # give every pod its own label value, so no two share a policy decision


@dataclass(frozen=True, slots=True)
class OpaServerSpec:
    """An OPA-compatible server the runner starts on loopback; its URL replaces ``${OPA_URL}`` in the config."""

    policies: tuple[str, ...]
    data: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    description: str
    labels: tuple[str, ...]
    ops: tuple[Op, ...]
    source: str
    config: str | None = None
    opa_server: OpaServerSpec | None = None


def _count(value: object, params: Mapping[str, Any], where: str) -> int:
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in params:
            raise WorkloadError(f"{where}: unknown param {value!r}")
        value = params[value[1:]]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WorkloadError(f"{where}: must be a non-negative integer, got {value!r}")
    return value


def parse_workload(document: object, source: str) -> Workload:
    if not isinstance(document, Mapping):
        raise WorkloadError(f"{source}: a workload must be a mapping")
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{source}: name: Required value")
    params = document.get("params") or {}
    if not isinstance(params, Mapping):
        raise WorkloadError(f"{source}: params: must be a mapping")
    templates = {"createNodes": document.get("nodeTemplate"), "createPods": document.get("podTemplate")}
    raw_ops = document.get("ops")
    if not isinstance(raw_ops, list) or not raw_ops:
        raise WorkloadError(f"{source}: ops: Required value")
    ops: list[Op] = []
    for index, raw in enumerate(raw_ops):
        where = f"{source}: ops[{index}]"
        if not isinstance(raw, Mapping):
            raise WorkloadError(f"{where}: must be a mapping")
        opcode = raw.get("opcode")
        if opcode not in OPCODES:
            raise WorkloadError(
                f"{where}.opcode: Unsupported value: {opcode!r}: supported values: {', '.join(OPCODES)}"
            )
        template_key = "nodeTemplate" if opcode == "createNodes" else "podTemplate"
        template = raw.get(template_key) or templates[opcode]
        if not isinstance(template, Mapping):
            raise WorkloadError(f"{where}: no {template_key} (set it on the op or the workload)")
        ops.append(
            Op(
                opcode=opcode,
                count=_count(raw.get("count"), params, f"{where}.count"),
                namespace=str(raw.get("namespace", "default")),
                collect_metrics=bool(raw.get("collectMetrics", False)),
                template=template,
                unique_labels=bool(raw.get("uniqueLabels", False)),
            )
        )
    labels = document.get("labels") or []
    config = document.get("config")
    server = document.get("opaServer")
    opa_server = None
    if server is not None:
        if not isinstance(server, Mapping) or not isinstance(server.get("policies"), list):
            raise WorkloadError(f"{source}: opaServer.policies: Required value (a list of .rego files)")
        opa_server = OpaServerSpec(
            tuple(str(p) for p in server["policies"]), tuple(str(d) for d in server.get("data") or [])
        )
    return Workload(
        name=name,
        description=str(document.get("description", "")),
        labels=tuple(str(label) for label in labels),
        ops=tuple(ops),
        source=source,
        config=str(Path(source).parent / config) if isinstance(config, str) else None,
        opa_server=opa_server,
    )


def load_workload(path: Path) -> Workload:
    try:
        text = path.read_text()
    except OSError as exc:
        raise WorkloadError(f"{path}: {exc.strerror}") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{path}: could not parse YAML: {exc}") from exc
    return parse_workload(document, str(path))


def find_workloads(directory: Path) -> dict[str, Workload]:
    workloads: dict[str, Workload] = {}
    for path in sorted(directory.glob("*.yaml")):
        workload = load_workload(path)
        workloads[workload.name] = workload
    return workloads
