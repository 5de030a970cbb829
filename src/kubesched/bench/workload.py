"""Benchmark workloads as data: scheduler_perf-style YAML with params, templates and ops, read and checked.

Who calls it: the bench runner (:mod:`kubesched.bench.runner`), for the bundled workloads (:func:`bundled_workloads`,
package data, so they run from any directory) and for files given on the command line. Every field is checked, and
an unknown op or field is an error naming the file and its path, as scheduler_perf refuses a typo such as
``colectMetrics`` that would otherwise measure nothing. The format (``createNodes``, ``createPods``, ``churn``,
``relativeTo``, ``multiCluster``, params, relative paths and ``${WORKLOAD_DIR}``) is documented in
docs/reference/bench-workloads.md#format.
"""

from __future__ import annotations

import contextlib
import importlib.resources
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.bounded_input import InputTooLarge, load_yaml, read_text
from kubesched.errors import KubeschedError

OPCODES = ("createNodes", "createPods", "churn")
HOSTNAME_LABEL = "kubernetes.io/hostname"
WORKLOAD_FIELDS = frozenset(
    {
        "name",
        "description",
        "labels",
        "params",
        "nodeTemplate",
        "podTemplate",
        "ops",
        "config",
        "opaServer",
        "multiCluster",
        "relativeTo",
    }
)
OP_FIELDS: Mapping[str, frozenset[str]] = {
    "createNodes": frozenset(
        {"opcode", "count", "nodeTemplate", "labelNodePrepareStrategy", "hostnameLabel", "images", "taints"}
    ),
    "createPods": frozenset(
        {
            "opcode",
            "count",
            "namespace",
            "collectMetrics",
            "podTemplate",
            "podTemplates",
            "uniqueLabels",
            "uniqueAnnotations",
            "uniqueTokenMounts",
            "expectUnschedulable",
            "nodeHeartbeatEveryPods",
        }
    ),
    "churn": frozenset({"opcode", "podTemplate", "intervalMilliseconds", "namespace"}),
}


IMAGE_FIELDS = frozenset({"perNode", "poolSize", "minSizeMB", "maxSizeMB", "seed", "prefix"})
TAINT_FIELDS = frozenset({"key", "value", "effect", "every"})
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MULTI_CLUSTER_FIELDS = frozenset(
    {"clusters", "nodesPerCluster", "nodeCapacity", "regions", "transport", "agentProcess", "refreshSeconds"}
)
TRANSPORTS = ("inProcess", "https")
AGENT_PROCESSES = ("separate", "hub")
DEFAULT_NODE_CAPACITY: Mapping[str, str] = {"cpu": "8", "memory": "32Gi", "pods": "110"}
DEFAULT_REFRESH_SECONDS = 5  # MemberRefresh's interval: what a live hub does
MAX_TEMPLATE_WEIGHT = 1000  # a round-robin cycle is the weights expanded: keep it small


class WorkloadError(KubeschedError):
    """A workload that cannot be read or run; ``source`` is its file, when the error concerns one."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


@dataclass(frozen=True, slots=True)
class Op:
    opcode: str
    count: int
    namespace: str = "default"
    collect_metrics: bool = False
    template: Mapping[str, Any] = field(default_factory=dict)
    unique_labels: bool = False  # give every pod its own label value, so no two share a policy decision
    node_labels: tuple[tuple[str, tuple[str, ...]], ...] = ()  # labelNodePrepareStrategy: (key, values) each
    hostname_label: bool = False
    expect_unschedulable: bool = False
    interval_seconds: float = 0.0  # churn only
    # createPods: the round-robin cycle of templates (podTemplates, weights expanded); empty: ``template`` only
    templates: tuple[Mapping[str, Any], ...] = ()
    unique_annotations: bool = False  # a per-pod annotation: pods differ, in a field policies do not read
    # every container mounts the pod's own kube-api-access-<n> token volume, as the ServiceAccount admission adds it
    unique_token_mounts: bool = False
    heartbeat_every: int = 0  # createPods: a node status update after every N bindings; 0: none
    images: ImageSpec | None = None  # createNodes
    taints: tuple[TaintSpec, ...] = ()  # createNodes
    count_param: str = ""  # the param the count came from ("initNodes"), for messages; "" when written out

    def template_for(self, i: int) -> Mapping[str, Any]:
        """The template of the op's pod ``i``."""
        return self.templates[i % len(self.templates)] if self.templates else self.template


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """``createNodes.images``: each node gets ``per_node`` distinct images of a seeded pool."""

    per_node: int
    pool_size: int
    min_bytes: int
    max_bytes: int
    seed: int
    prefix: str

    def name(self, k: int) -> str:
        return f"{self.prefix}{k}:1.0"


@dataclass(frozen=True, slots=True)
class TaintSpec:
    """``createNodes.taints[i]``: the taint, on nodes 0, ``every``, 2 x ``every``, ... of the op."""

    key: str
    value: str
    effect: str
    every: int


@dataclass(frozen=True, slots=True)
class OpaServerSpec:
    """An OPA-compatible server the runner starts on loopback; its URL replaces ``${OPA_URL}`` in the config."""

    policies: tuple[str, ...]
    data: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MultiClusterSpec:
    """``multiCluster``: the member clusters a hub workload schedules onto (see :mod:`kubesched.bench.multicluster`).
    ``node_capacity`` holds quantity strings; cluster *i* is in ``regions[i % len]``."""

    clusters: int
    nodes_per_cluster: int
    node_capacity: tuple[tuple[str, str], ...]
    regions: tuple[str, ...]
    transport: str
    refresh_seconds: int
    agent_process: str = AGENT_PROCESSES[0]


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    description: str
    labels: tuple[str, ...]
    ops: tuple[Op, ...]
    source: str
    config: str | None = None
    opa_server: OpaServerSpec | None = None
    multi_cluster: MultiClusterSpec | None = None
    # The workload this one is judged against (SecurityAuditChurn: SchedulingBasic): the runner reports the ratio
    # of their pods/s within each round of one run, so machine drift between runs cancels out.
    relative_to: str | None = None
    # The params in force (the declared ones, with overrides applied), in the order the file declares them.
    params: Mapping[str, int] = field(default_factory=dict)


def _count(value: object, params: Mapping[str, Any], where: str) -> int:
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in params:
            raise WorkloadError(f"{where}: unknown param {value!r}")
        value = params[value[1:]]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WorkloadError(f"{where}: must be a non-negative integer, got {value!r}")
    return value


def _unknown_fields(raw: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(str(key) for key in raw if key not in known)
    if unknown:
        raise WorkloadError(f"{where}: unknown field {unknown[0]!r} (known fields: {', '.join(sorted(known))})")


def _flag(raw: Mapping[str, Any], key: str, where: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise WorkloadError(f"{where}.{key}: must be true or false, got {value!r}")
    return value


def _string(raw: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise WorkloadError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise WorkloadError(f"{where}: must be a list of strings, got {value!r}")
    return tuple(value)


def _node_labels(value: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """One ``{labelKey, labelValues}`` mapping, or a list of them (one label key each)."""
    if value is None:
        return ()
    if isinstance(value, list):
        strategies = [_node_label(item, f"{where}[{i}]") for i, item in enumerate(value)]
        keys = [key for key, _ in strategies]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise WorkloadError(f"{where}[{i}].labelKey: Duplicate value: {key!r}")
        return tuple(strategies)
    return (_node_label(value, where),)


def _node_label(value: object, where: str) -> tuple[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise WorkloadError(f"{where}: must be a mapping (or a list of mappings)")
    _unknown_fields(value, frozenset({"labelKey", "labelValues"}), where)
    key, values = value.get("labelKey"), value.get("labelValues")
    if not isinstance(key, str) or not key:
        raise WorkloadError(f"{where}.labelKey: Required value")
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise WorkloadError(f"{where}.labelValues: must be a non-empty list of strings")
    return key, tuple(values)


def _images(value: object, params: Mapping[str, Any], where: str) -> ImageSpec | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise WorkloadError(f"{where}: must be a mapping")
    _unknown_fields(value, IMAGE_FIELDS, where)
    if "perNode" not in value or "poolSize" not in value:
        raise WorkloadError(f"{where}.{'perNode' if 'perNode' not in value else 'poolSize'}: Required value")
    per_node = _count(value["perNode"], params, f"{where}.perNode")
    pool = _count(value["poolSize"], params, f"{where}.poolSize")
    if pool == 0 or per_node > pool:
        raise WorkloadError(f"{where}.perNode: must be at most poolSize ({pool}) and poolSize above 0, got {per_node}")
    low = _count(value.get("minSizeMB", 10), params, f"{where}.minSizeMB")
    high = _count(value.get("maxSizeMB", 800), params, f"{where}.maxSizeMB")
    if low > high:
        raise WorkloadError(f"{where}.maxSizeMB: must be at least minSizeMB ({low}), got {high}")
    seed = _count(value.get("seed", 0), params, f"{where}.seed")
    prefix = _string(value, "prefix", where, "registry.k8s.io/bench/image-")
    return ImageSpec(per_node, pool, low * 1024 * 1024, high * 1024 * 1024, seed, prefix)


def _taints(value: object, params: Mapping[str, Any], where: str) -> tuple[TaintSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise WorkloadError(f"{where}: must be a list of {{key, value, effect, every}}")
    taints: list[TaintSpec] = []
    for i, raw in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise WorkloadError(f"{here}: must be a mapping")
        _unknown_fields(raw, TAINT_FIELDS, here)
        key = _string(raw, "key", here, "")
        effect = raw.get("effect")
        if effect not in TAINT_EFFECTS:
            raise WorkloadError(
                f"{here}.effect: Unsupported value: {effect!r}: supported values: {', '.join(TAINT_EFFECTS)}"
            )
        taint_value = raw.get("value", "")
        if not isinstance(taint_value, str):
            raise WorkloadError(f"{here}.value: must be a string, got {taint_value!r}")
        every = _count(raw.get("every"), params, f"{here}.every")
        if every == 0:
            raise WorkloadError(f"{here}.every: must be greater than zero")
        if any((t.key, t.effect) == (key, effect) for t in taints):
            raise WorkloadError(f"{here}: Duplicate value: taints must be unique by key and effect pair")
        taints.append(TaintSpec(key, taint_value, effect, every))
    return tuple(taints)


def _pod_templates(value: object, params: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], ...]:
    """``podTemplates: [{template, weight?}]`` as the round-robin cycle, each template ``weight`` times."""
    if not isinstance(value, list) or not value:
        raise WorkloadError(f"{where}: must be a non-empty list of {{template, weight}}")
    cycle: list[Mapping[str, Any]] = []
    for i, raw in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise WorkloadError(f"{here}: must be a mapping")
        _unknown_fields(raw, frozenset({"template", "weight"}), here)
        template = raw.get("template")
        if not isinstance(template, Mapping):
            raise WorkloadError(f"{here}.template: Required value (a pod manifest)")
        weight = _count(raw.get("weight", 1), params, f"{here}.weight")
        if weight == 0:
            raise WorkloadError(f"{here}.weight: must be greater than zero")
        cycle.extend([template] * weight)
    if len(cycle) > MAX_TEMPLATE_WEIGHT:
        raise WorkloadError(f"{where}: the weights add up to {len(cycle)}, more than {MAX_TEMPLATE_WEIGHT}")
    return tuple(cycle)


def parse_workload(document: object, source: str, params: Mapping[str, Any] | None = None) -> Workload:
    """``params`` override the document's (a smaller run of the same shape, for tests)."""
    if not isinstance(document, Mapping):
        raise WorkloadError(f"{source}: a workload must be a mapping, got {type(document).__name__}")
    _unknown_fields(document, WORKLOAD_FIELDS, source)
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
        _unknown_fields(raw, OP_FIELDS[opcode], where)
        template_key = "nodeTemplate" if opcode == "createNodes" else "podTemplate"
        cycle: tuple[Mapping[str, Any], ...] = ()
        if "podTemplates" in raw:
            if "podTemplate" in raw:
                raise WorkloadError(f"{where}.podTemplates: Forbidden: set podTemplate or podTemplates, not both")
            cycle = _pod_templates(raw["podTemplates"], params, f"{where}.podTemplates")
        template = (
            cycle[0]
            if cycle
            else raw.get(template_key) or templates["createNodes" if opcode == "createNodes" else "createPods"]
        )
        if not isinstance(template, Mapping):
            raise WorkloadError(f"{where}: no {template_key} (set it on the op or the workload)")
        interval = 0.0
        if opcode == "churn":
            milliseconds = _count(raw.get("intervalMilliseconds"), params, f"{where}.intervalMilliseconds")
            if milliseconds == 0:
                raise WorkloadError(f"{where}.intervalMilliseconds: must be greater than zero")
            interval = milliseconds / 1000
        raw_count = raw.get("count")
        ops.append(
            Op(
                opcode=opcode,
                count=0 if opcode == "churn" else _count(raw_count, params, f"{where}.count"),
                count_param=raw_count[1:] if isinstance(raw_count, str) and raw_count.startswith("$") else "",
                namespace=_string(raw, "namespace", where, "default"),
                collect_metrics=_flag(raw, "collectMetrics", where),
                template=template,
                unique_labels=_flag(raw, "uniqueLabels", where),
                node_labels=_node_labels(raw.get("labelNodePrepareStrategy"), f"{where}.labelNodePrepareStrategy"),
                hostname_label=_flag(raw, "hostnameLabel", where),
                expect_unschedulable=_flag(raw, "expectUnschedulable", where),
                interval_seconds=interval,
                templates=cycle,
                unique_annotations=_flag(raw, "uniqueAnnotations", where),
                unique_token_mounts=_flag(raw, "uniqueTokenMounts", where),
                heartbeat_every=_heartbeat(raw, params, where),
                images=_images(raw.get("images"), params, f"{where}.images"),
                taints=_taints(raw.get("taints"), params, f"{where}.taints"),
            )
        )
    if raw_ops and isinstance(raw_ops[-1], Mapping) and raw_ops[-1].get("opcode") == "churn":
        raise WorkloadError(f"{source}: ops[{len(raw_ops) - 1}]: a churn op must come before a createPods op")
    multi_cluster = _multi_cluster(document.get("multiCluster"), params, f"{source}: multiCluster")
    if multi_cluster is not None:
        _check_hub_ops(ops, document, source)
    else:
        _check_nodes_before_pods(ops, raw_ops, source)
        check_capacity(ops, source)
    labels = _strings(document.get("labels"), f"{source}: labels")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise WorkloadError(f"{source}: description: must be a string, got {description!r}")
    relative_to = document.get("relativeTo")
    if relative_to is not None and (not isinstance(relative_to, str) or not relative_to or relative_to == name):
        raise WorkloadError(f"{source}: relativeTo: must name another workload, got {relative_to!r}")
    config = document.get("config")
    if config is not None and (not isinstance(config, str) or not config):
        raise WorkloadError(f"{source}: config: must be the path of a KubeSchedulerConfiguration file, got {config!r}")
    here = Path(source).parent
    server = document.get("opaServer")
    opa_server = None
    if server is not None:
        if not isinstance(server, Mapping) or not server.get("policies"):
            raise WorkloadError(f"{source}: opaServer.policies: Required value (a list of .rego files)")
        _unknown_fields(server, frozenset({"policies", "data"}), f"{source}: opaServer")
        policies = _strings(server["policies"], f"{source}: opaServer.policies")
        data = _strings(server.get("data"), f"{source}: opaServer.data")
        opa_server = OpaServerSpec(tuple(str(here / p) for p in policies), tuple(str(here / d) for d in data))
    return Workload(
        name=name,
        description=description,
        labels=labels,
        ops=tuple(ops),
        source=source,
        config=str(here / config) if config is not None else None,
        opa_server=opa_server,
        multi_cluster=multi_cluster,
        relative_to=relative_to,
        params={str(k): v for k, v in params.items() if isinstance(v, int) and not isinstance(v, bool)},
    )


def _multi_cluster(value: object, params: Mapping[str, Any], where: str) -> MultiClusterSpec | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise WorkloadError(f"{where}: must be a mapping")
    _unknown_fields(value, MULTI_CLUSTER_FIELDS, where)
    counts = {}
    for key in ("clusters", "nodesPerCluster"):
        if key not in value:
            raise WorkloadError(f"{where}.{key}: Required value")
        counts[key] = _count(value[key], params, f"{where}.{key}")
        if counts[key] == 0:
            raise WorkloadError(f"{where}.{key}: must be greater than zero")
    capacity = value.get("nodeCapacity", DEFAULT_NODE_CAPACITY)
    if not isinstance(capacity, Mapping) or not capacity:
        raise WorkloadError(f"{where}.nodeCapacity: must be a mapping of resource name to quantity")
    for name, amount in capacity.items():
        if not isinstance(name, str) or not isinstance(amount, str | int) or isinstance(amount, bool):
            raise WorkloadError(f"{where}.nodeCapacity.{name}: must be a quantity, got {amount!r}")
    if "pods" not in capacity:
        raise WorkloadError(f"{where}.nodeCapacity.pods: Required value (a node without it admits no pods)")
    regions = _strings(value.get("regions", ["region-0"]), f"{where}.regions")
    if not regions or not all(regions):
        raise WorkloadError(f"{where}.regions: must be a non-empty list of non-empty strings")
    transport = value.get("transport", TRANSPORTS[0])
    if transport not in TRANSPORTS:
        raise WorkloadError(
            f"{where}.transport: Unsupported value: {transport!r}: supported values: {', '.join(TRANSPORTS)}"
        )
    refresh = _count(value.get("refreshSeconds", DEFAULT_REFRESH_SECONDS), params, f"{where}.refreshSeconds")
    process = value.get("agentProcess", AGENT_PROCESSES[0])
    if process not in AGENT_PROCESSES:
        raise WorkloadError(
            f"{where}.agentProcess: Unsupported value: {process!r}: supported values: {', '.join(AGENT_PROCESSES)}"
        )
    if "agentProcess" in value and transport != "https":
        raise WorkloadError(f"{where}.agentProcess: Forbidden: only with transport: https")
    return MultiClusterSpec(
        clusters=counts["clusters"],
        nodes_per_cluster=counts["nodesPerCluster"],
        node_capacity=tuple((str(k), str(v)) for k, v in capacity.items()),
        regions=regions,
        transport=str(transport),
        refresh_seconds=refresh,
        agent_process=str(process),
    )


def _check_hub_ops(ops: Sequence[Op], document: Mapping[str, Any], source: str) -> None:
    """A hub workload places pods onto its member clusters, and only that: its nodes are the clusters' (their
    super nodes), and its profile is the hub's (a config file is required)."""
    if not document.get("config"):
        raise WorkloadError(f"{source}: config: Required value (the hub profile) with multiCluster")
    if document.get("opaServer") is not None:
        raise WorkloadError(f"{source}: opaServer: Forbidden with multiCluster")
    for index, op in enumerate(ops):
        if op.opcode != "createPods":
            raise WorkloadError(
                f"{source}: ops[{index}].opcode: Forbidden: {op.opcode} with multiCluster (only createPods: "
                "the nodes are the member clusters')"
            )
        if op.heartbeat_every:
            raise WorkloadError(f"{source}: ops[{index}].nodeHeartbeatEveryPods: Forbidden with multiCluster")


def _heartbeat(raw: Mapping[str, Any], params: Mapping[str, Any], where: str) -> int:
    if "nodeHeartbeatEveryPods" not in raw:
        return 0
    every = _count(raw["nodeHeartbeatEveryPods"], params, f"{where}.nodeHeartbeatEveryPods")
    if every == 0:
        raise WorkloadError(f"{where}.nodeHeartbeatEveryPods: must be greater than zero (omit it for no heartbeat)")
    return every


def check_capacity(ops: Sequence[Op], source: str) -> None:
    """Refuse a size whose nodes cannot hold the pods expected bound (:mod:`kubesched.bench.capacity`)."""
    from kubesched.bench.capacity import capacity_problem

    problem = capacity_problem(ops, source)
    if problem is not None:
        raise WorkloadError(f"{source}: {problem}")


def _check_nodes_before_pods(ops: Sequence[Op], raw_ops: Sequence[Mapping[str, Any]], source: str) -> None:
    """Refuse pods created while there are no nodes. scheduler_perf accepts a zero count, then waits for the
    pods until its timeout fails the test; here such pods would be retried with backoff forever (no plugin
    rejected them: kube-scheduler's "no nodes available"), so the workload is refused before it runs."""
    nodes = 0
    counts: list[str] = []
    for index, op in enumerate(ops):
        if op.opcode == "createNodes":
            nodes += op.count
            param = raw_ops[index].get("count")
            counts.append(f"ops[{index}].count" + (f" ({param} = {op.count})" if isinstance(param, str) else ""))
        elif op.opcode == "createPods" and op.count and not nodes:
            never = (
                f"ops[{index}] creates {op.count} pod(s) that could never be scheduled "
                "(scheduler_perf would wait for them until it timed out)"
            )
            if not counts:
                raise WorkloadError(f"{source}: ops[{index}]: no createNodes op before it: {never}")
            raise WorkloadError(f"{source}: {', '.join(counts)}: 0 nodes, but {never}")


def load_workload(path: Path, params: Mapping[str, Any] | None = None, *, partial: bool = False) -> Workload:
    """Read and parse the workload file ``path``; every error is a one-line :class:`WorkloadError` naming it."""
    try:
        return _load_workload(path, params, partial)
    except WorkloadError as exc:
        exc.source = exc.source or str(path)
        raise


def _load_workload(path: Path, params: Mapping[str, Any] | None, partial: bool) -> Workload:
    try:
        text = read_text(path)
        document = load_yaml(text, str(path))
    except InputTooLarge as exc:
        raise WorkloadError(str(exc)) from None
    except OSError as exc:
        raise WorkloadError(f"{path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text ({exc.reason}): is it a workload file?") from None
    except yaml.MarkedYAMLError as exc:
        # str(exc) spans several lines (it quotes the offending line); the error is one line.
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}: line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
        raise WorkloadError(f"{where}: could not parse YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{path}: could not parse YAML: {' '.join(str(exc).split())}") from None
    if partial and params and isinstance(document, Mapping):
        declared = document.get("params")
        params = {k: v for k, v in params.items() if isinstance(declared, Mapping) and k in declared}
    return parse_workload(document, str(path), params)


@dataclass(slots=True)
class WorkloadScan:
    """What a directory holds: the workloads read, by name, and one error per file that could not be."""

    workloads: dict[str, Workload] = field(default_factory=dict)
    failures: list[WorkloadError] = field(default_factory=list)


def scan_workloads(directory: Path, params: Mapping[str, Any] | None = None) -> WorkloadScan:
    """Every workload in ``directory`` (its ``*.yaml`` files, in name order); ``params`` override the params
    of those that declare them. A file that cannot be read is a failure naming it, and the others still load:
    one broken file must not stop a night of benchmarks."""
    scan = WorkloadScan()
    origin: dict[str, str] = {}
    for path in sorted(directory.glob("*.yaml")):
        try:
            workload = load_workload(path, params, partial=True)
        except WorkloadError as exc:
            scan.failures.append(exc)
            continue
        if workload.name in origin:
            scan.failures.append(
                WorkloadError(
                    f"{path}: name: Duplicate value: {workload.name!r} (also the name in {origin[workload.name]})",
                    str(path),
                )
            )
            continue
        origin[workload.name] = str(path)
        scan.workloads[workload.name] = workload
    return scan


@contextlib.contextmanager
def bundled_workloads() -> Iterator[Path]:
    """The directory of the workloads shipped inside the package (``kubesched/bench/workloads``), as a real
    path for as long as the context lasts, wherever the package is installed and whatever the working
    directory."""
    with importlib.resources.as_file(importlib.resources.files("kubesched.bench") / "workloads") as path:
        yield path
