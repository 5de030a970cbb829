"""Benchmark workloads as data: scheduler_perf-style YAML with params, templates and ops.

A workload names its node and pod templates (ordinary manifests with ``metadata.generateName``), a
``params`` map and a list of ops. ``$name`` in a count refers to a param. Read by the bench runner.

- ``createNodes {count, nodeTemplate?, labelNodePrepareStrategy?: {labelKey, labelValues}, hostnameLabel?}``:
  scheduler_perf's ``labelNodePrepareStrategy`` gives node *i* ``labelValues[i % len]`` under ``labelKey``;
  ``hostnameLabel: true`` gives each node ``kubernetes.io/hostname: <its name>``, as a kubelet would.
- ``createPods {count, namespace, collectMetrics, podTemplate?, expectUnschedulable?}``: all of the op's pods
  are queued, then the scheduler drains them; ``expectUnschedulable`` marks pods that must stay pending.
- ``churn {podTemplate, intervalMilliseconds, namespace?}``: scheduler_perf's ``churn`` in ``create`` mode,
  narrowed to pods: while the next ``createPods`` op is being drained, one pod from the template is created
  every interval of wall-clock time. Churned pods are expected to stay pending (upstream churns pods that
  cannot fit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.bounded_input import InputTooLarge, load_yaml, read_text
from kubesched.errors import KubeschedError

OPCODES = ("createNodes", "createPods", "churn")
HOSTNAME_LABEL = "kubernetes.io/hostname"


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
    node_labels: tuple[str, tuple[str, ...]] | None = None  # labelNodePrepareStrategy: (key, values)
    hostname_label: bool = False
    expect_unschedulable: bool = False
    interval_seconds: float = 0.0  # churn only


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


def _node_labels(value: object, where: str) -> tuple[str, tuple[str, ...]] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise WorkloadError(f"{where}: must be a mapping")
    key, values = value.get("labelKey"), value.get("labelValues")
    if not isinstance(key, str) or not key:
        raise WorkloadError(f"{where}.labelKey: Required value")
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise WorkloadError(f"{where}.labelValues: must be a non-empty list of strings")
    return key, tuple(values)


def parse_workload(document: object, source: str, params: Mapping[str, Any] | None = None) -> Workload:
    """``params`` override the document's (a smaller run of the same shape, for tests)."""
    if not isinstance(document, Mapping):
        raise WorkloadError(f"{source}: a workload must be a mapping")
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{source}: name: Required value")
    declared = document.get("params") or {}
    if not isinstance(declared, Mapping):
        raise WorkloadError(f"{source}: params: must be a mapping")
    unknown = sorted(set(params or {}) - set(declared))
    if unknown:
        raise WorkloadError(f"{source}: params: no such param(s) to override: {', '.join(unknown)}")
    params = {**declared, **(params or {})}
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
        template = raw.get(template_key) or templates["createNodes" if opcode == "createNodes" else "createPods"]
        if not isinstance(template, Mapping):
            raise WorkloadError(f"{where}: no {template_key} (set it on the op or the workload)")
        interval = 0.0
        if opcode == "churn":
            milliseconds = _count(raw.get("intervalMilliseconds"), params, f"{where}.intervalMilliseconds")
            if milliseconds == 0:
                raise WorkloadError(f"{where}.intervalMilliseconds: must be greater than zero")
            interval = milliseconds / 1000
        ops.append(
            Op(
                opcode=opcode,
                count=0 if opcode == "churn" else _count(raw.get("count"), params, f"{where}.count"),
                namespace=str(raw.get("namespace", "default")),
                collect_metrics=bool(raw.get("collectMetrics", False)),
                template=template,
                unique_labels=bool(raw.get("uniqueLabels", False)),
                node_labels=_node_labels(raw.get("labelNodePrepareStrategy"), f"{where}.labelNodePrepareStrategy"),
                hostname_label=bool(raw.get("hostnameLabel", False)),
                expect_unschedulable=bool(raw.get("expectUnschedulable", False)),
                interval_seconds=interval,
            )
        )
    if raw_ops and isinstance(raw_ops[-1], Mapping) and raw_ops[-1].get("opcode") == "churn":
        raise WorkloadError(f"{source}: ops[{len(raw_ops) - 1}]: a churn op must come before a createPods op")
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


def load_workload(path: Path, params: Mapping[str, Any] | None = None, *, partial: bool = False) -> Workload:
    try:
        text = read_text(path)
        document = load_yaml(text, str(path))
    except InputTooLarge as exc:
        raise WorkloadError(str(exc)) from None
    except OSError as exc:
        raise WorkloadError(f"{path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text ({exc.reason}): is it a workload file?") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{path}: could not parse YAML: {exc}") from exc
    if partial and params and isinstance(document, Mapping):
        declared = document.get("params")
        params = {k: v for k, v in params.items() if isinstance(declared, Mapping) and k in declared}
    return parse_workload(document, str(path), params)


def find_workloads(directory: Path, params: Mapping[str, Any] | None = None) -> dict[str, Workload]:
    """Every workload in ``directory``; ``params`` override the params of those that declare them."""
    workloads: dict[str, Workload] = {}
    for path in sorted(directory.glob("*.yaml")):
        workload = load_workload(path, params, partial=True)
        workloads[workload.name] = workload
    return workloads
