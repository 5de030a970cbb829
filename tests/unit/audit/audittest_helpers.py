"""Shared by the audit tests: audit-record builders, log writers, and two small policy plugins.

The plugins are ordinary out-of-tree plugins (registered next to the in-tree ones) that leave policy
verdicts in the cycle state the way the SecurityAudit plugins do, so records are built from real
scheduling attempts rather than hand-made attempt records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubesched.api.objects import Node, Pod
from kubesched.audit.builder import AuditObserver, FanOut
from kubesched.audit.metrics import AuditMetrics
from kubesched.audit.records import AuditRecord, OwnerRef, PodRef, ScoredNode, Target
from kubesched.audit.sinks.base import AuditSink
from kubesched.audit.sinks.jsonl import JsonlSink
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.config.types import SchedulerConfiguration
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.runtime.registry import PluginRegistration, Registry, merge
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.policyapi.verdicts import PolicyVerdict, add_verdict
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler

# ---- records and logs ---------------------------------------------------------------------------


def make_record(index: int = 0, **changes: Any) -> AuditRecord:
    """A plausible scheduled-pod record; ``changes`` replace fields."""
    record = AuditRecord(
        decision_id=f"00000000-0000-4000-8000-{index:012d}",
        timestamp=f"2024-05-01T12:{index // 60 % 60:02d}:{index % 60:02d}.000000Z",
        pod=PodRef("default", f"web-{index}", f"uid-{index}", OwnerRef("ReplicaSet", "web")),
        profile="default-scheduler",
        result="Scheduled",
        attempts=1,
        target=Target("node", f"node-{index % 3}"),
        phases={"queued": "2024-05-01T11:59:59.000000Z", "bound": "2024-05-01T12:00:00.000000Z"},
        verdicts=(
            PolicyVerdict(
                plugin="SecurityAuditFilter",
                stage="filter",
                target=f"node-{index % 3}",
                allowed=True,
                engine="regorus",
                revision="rev-1",
                decision_id=f"opa-{index}",
                input_digest="sha256:abc",
            ),
        ),
        top_scores=(ScoredNode(f"node-{index % 3}", 300, {"NodeResourcesFit": 100, "TaintToleration": 100}),),
        labels={"version": "test"},
    )
    return replace(record, **changes)


def write_log(path: Path, count: int, *, durability: str = "never", start: int = 0) -> None:
    with JsonlSink(path, durability=durability) as sink:
        for index in range(start, start + count):
            sink.write(make_record(index))


def fresh_metrics() -> AuditMetrics:
    return AuditMetrics(CollectorRegistry())


# ---- policy plugins -------------------------------------------------------------------------------


class _NodePolicy:
    """A verdict source: answers for any node the pod was filtered against (like a batch evaluation)."""

    def __init__(self, denied: dict[str, str]) -> None:
        self.denied = denied

    def verdicts_for(self, targets: Sequence[str]) -> list[PolicyVerdict]:
        return [
            PolicyVerdict(
                plugin="LabelPolicy",
                stage="filter",
                target=target,
                allowed=self.denied.get(target) is None,
                reasons=(self.denied[target],) if target in self.denied else (),
                engine="test-engine",
                revision="rev-7",
                decision_id=f"opa-{target}",
                input_digest=f"sha256:{target}",
            )
            for target in targets
        ]


class LabelPolicy:
    """Denies nodes labelled restricted=true to pods without the label clearance=yes."""

    name = "LabelPolicy"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> None:
        cleared = pod.pod.metadata.labels.get("clearance") == "yes"
        denied = {
            info.name: "node is restricted and the pod has no clearance"
            for info in nodes
            if info.labels.get("restricted") == "true" and not cleared
        }
        add_verdict(state, _NodePolicy(denied))
        state.write("LabelPolicy", _Denied(denied))

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        denied = state.get("LabelPolicy", _Denied)
        reason = denied.nodes.get(node_info.name) if denied is not None else None
        return Status(Code.UNSCHEDULABLE, reason) if reason else None


class _Denied:
    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes

    def clone(self) -> _Denied:
        return self


class ChangeWindow:
    """Permit: rejects pods labelled window=closed, with a concrete verdict about the chosen node."""

    name = "ChangeWindow"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        closed = pod.pod.metadata.labels.get("window") == "closed"
        verdict = PolicyVerdict(
            plugin="ChangeWindow",
            stage="permit",
            target=node_name,
            allowed=not closed,
            reasons=("the change window is closed",) if closed else (),
            engine="test-engine",
            revision="rev-7",
            enforcement="deny",
        )
        add_verdict(state, verdict)
        return (Status(Code.UNSCHEDULABLE, "the change window is closed"), 0.0) if closed else (None, 0.0)


def registry() -> Registry:
    extra = {cls.name: PluginRegistration.of(cls.name, cls) for cls in (LabelPolicy, ChangeWindow)}
    return merge(in_tree_registry(), extra)


def policy_config(*plugins: str) -> SchedulerConfiguration:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"multiPoint": {"enabled": [{"name": name} for name in plugins]}},
            }
        ],
    }
    return load_config_dict(document, "test", registry())


class Attempts:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)


async def schedule(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *sinks: AuditSink,
    plugins: Sequence[str] = ("LabelPolicy", "ChangeWindow"),
    metrics: AuditMetrics | None = None,
    observer: AuditObserver | None = None,
) -> tuple[list[AttemptRecord], AuditObserver, SimulatedCluster]:
    """Run a scheduler over ``nodes`` and ``pods`` until idle, one attempt per pod; every attempt goes to
    ``observer``, or to a new audit observer over ``sinks``."""
    clock = VirtualClock()
    cluster = SimulatedCluster(clock, nodes, pods)
    attempts = Attempts()
    audit = observer if observer is not None else AuditObserver(*sinks, metrics=metrics or fresh_metrics())
    config = policy_config(*plugins)
    scheduler = Scheduler(config, registry(), cluster, clock=clock, seed=1, observer=FanOut(attempts, audit))
    scheduler.max_attempts = 1
    cluster.subscribe(scheduler.event_handlers)
    await scheduler.run_until_idle(clock)
    await scheduler.close()
    return attempts.all, audit, cluster
