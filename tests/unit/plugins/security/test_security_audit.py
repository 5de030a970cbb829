"""SecurityAuditFilter and SecurityAuditPermit with the embedded Rego engine, in real schedulers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from kubesched.api.objects import Namespace, Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.framework.listers import Listers, ListerStores
from kubesched.plugins.registry import in_tree_registry
from kubesched.plugins.security.security_audit_filter import SecurityAuditFilter
from kubesched.plugins.security.security_audit_permit import SecurityAuditPermit
from kubesched.policyapi.verdicts import PolicyVerdict
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
ROOT = Path(__file__).resolve().parents[4]
POLICIES = ROOT / "examples" / "policies"

PERMIT_POLICY = """package kubernetes.approval

import rego.v1

ticket := object.get(input.pod.metadata, ["annotations", "example.com/change-ticket"], "")

default decision := {"allow": false, "reason": "no change ticket"}

decision := {"allow": true} if {
    ticket != ""
    data.tickets[ticket] == "approved"
}

decision := {"allow": false, "pending": true, "reason": sprintf("ticket %s awaits approval", [ticket])} if {
    ticket != ""
    object.get(data.tickets, ticket, "") == "open"
}

decision := {"allow": false, "reason": sprintf("ticket %s was rejected", [ticket])} if {
    ticket != ""
    object.get(data.tickets, ticket, "") == "rejected"
}
"""


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def last(self, name: str) -> AttemptRecord:
        return [r for r in self.all if r.pod.name == name][-1]


def nodes() -> list[Any]:
    return [
        make_node(name).capacity(cpu="4", memory="8Gi", pods=20).obj()
        for name in ("node-a", "node-b", "node-c", "node-x")
    ]


def config(points: dict[str, list[str]], args: dict[str, dict[str, Any]]) -> Any:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {p: {"enabled": [{"name": n} for n in names]} for p, names in points.items()},
                "pluginConfig": [{"name": name, "args": value} for name, value in args.items()],
            }
        ],
    }
    return load_config_dict(document, "test", in_tree_registry())


def filter_config(**extra: Any) -> Any:
    args = {"policies": [str(POLICIES)], "data": [str(POLICIES / "data.json")], **extra}
    return config({"multiPoint": ["SecurityAuditFilter"]}, {"SecurityAuditFilter": args})


async def run(
    cfg: Any, pods: list[Pod], node_objs: list[Any] | None = None, *, listers: Listers | None = None
) -> tuple[Scheduler, SimulatedCluster, Records]:
    clock = VirtualClock()
    cluster = SimulatedCluster(clock, node_objs if node_objs is not None else nodes(), pods, listers=listers)
    records = Records()
    scheduler = Scheduler(cfg, in_tree_registry(), cluster, clock=clock, seed=0, observer=records)
    scheduler.max_attempts = 3
    cluster.subscribe(scheduler.event_handlers)
    await scheduler.run_until_idle(clock)
    await scheduler.close()
    return scheduler, cluster, records


def about(record: AttemptRecord, target: str | None) -> list[PolicyVerdict]:
    """The record's verdicts about ``target`` and about the pod as a whole."""
    return [verdict for verdict in record.verdicts if verdict.target in ("", target)]


def plugin(scheduler: Scheduler, name: str) -> Any:
    return scheduler.frameworks["default-scheduler"].plugins[name]


def pod(name: str, *, namespace: str = "default", image: str = "nginx:1.27") -> Any:
    builder = make_pod(name).namespace(namespace).req(cpu="100m")
    raw = builder.raw()
    raw["spec"]["containers"][0]["image"] = image
    return Pod.from_dict(raw, "test")


def test_denied_nodes_are_filtered_with_the_seed_message(run_async: Runner) -> None:
    async def scenario() -> None:
        _, _, records = await run(filter_config(), [pod("web"), pod("pay", namespace="prod")])
        web = records.last("web")
        assert web.result == "Scheduled" and web.node in {"node-a", "node-b", "node-c"}
        denial = "Denied by security policy: no compliance record for the node"
        assert web.node_to_status["node-x"].reasons == (denial,)
        assert web.node_to_status["node-x"].plugin == "SecurityAuditFilter"
        pay = records.last("pay")
        assert pay.node == "node-a", "prod needs a pci node; only node-a is pci"
        [verdict] = about(pay, "node-a")
        assert verdict.allowed and verdict.engine == "embedded" and verdict.revision and verdict.input_digest

    run_async(scenario())


def test_all_nodes_denied_gives_fit_error(run_async: Runner) -> None:
    async def scenario() -> None:
        _, cluster, records = await run(filter_config(), [pod("miner", image="evil.example.com/miner:1")])
        record = records.last("miner")
        assert record.result == "Unschedulable"
        assert record.message == (
            "0/4 nodes are available: 1 Denied by security policy: image evil.example.com/miner:1 is not from a "
            "trusted registry; no compliance record for the node, 3 Denied by security policy: image "
            "evil.example.com/miner:1 is not from a trusted registry. no new claims to deallocate, "
            # The denial is UnschedulableAndUnresolvable (no eviction changes the pod or the node): preemption
            # does not search these nodes.
            "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        )
        assert cluster.conditions[record.pod.uid]["reason"] == "Unschedulable"

    run_async(scenario())


def labelled(name: str, value: str) -> Pod:
    raw = pod(name).raw
    raw["metadata"]["labels"] = {"app": value}
    return Pod.from_dict(raw, name)


def test_one_policy_evaluation_per_pod_not_per_node(run_async: Runner) -> None:
    async def scenario() -> None:
        distinct = [labelled(f"p{i}", f"app-{i}") for i in range(5)]
        scheduler, _, records = await run(filter_config(), distinct)
        assert all(records.last(f"p{i}").result == "Scheduled" for i in range(5))
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        assert audit.calls == 5, "one batch evaluation per distinct pod, over all four nodes"

        per_node_config = filter_config(evaluationMode="per-node")
        per_node, _, per_node_records = await run(per_node_config, [labelled(f"p{i}", f"app-{i}") for i in range(5)])
        assert plugin(per_node, "SecurityAuditFilter").calls == 5 * 4, "the seed's pattern: one call per node"
        assert [r.node for r in per_node_records.all] == [r.node for r in records.all]

    run_async(scenario())


def test_replicas_share_one_evaluation(run_async: Runner) -> None:
    async def scenario() -> None:
        replicas = [labelled(f"web-{i}", "web") for i in range(5)]
        scheduler, _, records = await run(filter_config(), replicas)
        assert all(records.last(f"web-{i}").result == "Scheduled" for i in range(5))
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        assert audit.calls == 1 and audit.cache.hits == 4

    run_async(scenario())


def test_cache_reuses_decisions_for_a_retried_pod(run_async: Runner) -> None:
    async def scenario() -> None:
        # Too big for any node: NodeResourcesFit rejects after the policy ran; each retry hits the cache.
        big = make_pod("big").req(cpu="64").obj()
        scheduler, _, records = await run(filter_config(), [big])
        assert records.last("big").attempts == 1  # nothing can help; the pod waits for an event
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        assert audit.calls == 1
        assert audit.cache.misses == 1

    run_async(scenario())


POOL_POLICY = """package pools

import rego.v1

default allow := false

allow if input.node.metadata.labels.pool == input.pod.metadata.labels.team
"""

# Reads the same, and everything else too: the analysis cannot bound it, so decisions are keyed whole.
WALKING_POLICY = f"""{POOL_POLICY}
walked := [v | walk(input, [_, v])]
"""


def pool_nodes() -> list[Any]:
    pools = ["a", "a", "a", "b", "b", "c"]
    return [make_node(f"n{i}").label("pool", pool).capacity(cpu="4", pods=20).obj() for i, pool in enumerate(pools)]


def teammate(name: str, team: str) -> Pod:
    # Each pod differs from the others in a label and an annotation the pool policy never reads.
    return make_pod(name).label("team", team).label("app", name).annotation("note", name).req(cpu="100m").obj()


def pool_node(name: str, pool: str) -> Any:
    return make_node(name).label("pool", pool).capacity(cpu="4", pods=20).obj()


def pool_config(tmp_path: Path, policy: str = POOL_POLICY, **extra: Any) -> Any:
    """SecurityAuditFilter alone with ``policy`` (the pool policy by default) written to ``tmp_path``."""
    (tmp_path / "pools.rego").write_text(policy)
    args: dict[str, Any] = {"policies": [str(tmp_path / "pools.rego")], "decisionPath": "pools/allow", **extra}
    return config({"multiPoint": ["SecurityAuditFilter"]}, {"SecurityAuditFilter": args})


async def started(
    cfg: Any, node_objs: list[Any], pods: list[Pod]
) -> tuple[Scheduler, SimulatedCluster, Records, VirtualClock]:
    """A scheduler over a simulated cluster of ``node_objs`` and ``pods``, run until idle and left running (the
    caller changes the cluster, runs it again, and closes it)."""
    clock = VirtualClock()
    cluster = SimulatedCluster(clock, node_objs, pods)
    records = Records()
    scheduler = Scheduler(cfg, in_tree_registry(), cluster, clock=clock, seed=0, observer=records)
    scheduler.max_attempts = 3
    cluster.subscribe(scheduler.event_handlers)
    await scheduler.run_until_idle(clock)
    return scheduler, cluster, records, clock


@pytest.mark.parametrize(
    ("policy", "calls", "classes"),
    [
        pytest.param(POOL_POLICY, 2, 3, id="read-paths-one-call-per-team-one-document-per-pool"),
        pytest.param(WALKING_POLICY, 5, 6, id="unbounded-one-call-per-pod-one-document-per-node"),
    ],
)
def test_pods_and_nodes_the_policy_cannot_tell_apart_share_evaluations(
    run_async: Runner, tmp_path: Path, policy: str, calls: int, classes: int
) -> None:
    async def scenario() -> None:
        cfg = pool_config(tmp_path, policy)
        pods = [teammate(f"a{i}", "a") for i in range(4)] + [teammate("b0", "b")]
        scheduler, cluster, records = await run(cfg, pods, pool_nodes())
        pools = {name: node.metadata.labels["pool"] for name, node in cluster.nodes.items()}
        assert {pools.get(records.last(p.metadata.name).node or "") for p in pods[:4]} == {"a"}
        assert pools.get(records.last("b0").node or "") == "b"
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        assert audit.calls == calls
        entries = list(audit.cache._entries.values())
        assert all(int(entry.decided.sum()) == classes for entry in entries)

    run_async(scenario())


def test_a_node_class_is_decided_by_any_of_its_nodes(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        # The nodes whose documents stood for their pools in the first evaluation are gone by the second: other
        # nodes of the same pools stand for them, and their answers are theirs.
        first = [pool_node(f"n{i}", pool) for i, pool in enumerate("abcabc")]
        scheduler, cluster, records, clock = await started(pool_config(tmp_path), first, [teammate("a0", "a")])
        assert records.last("a0").node in ("n0", "n3")
        for name in ("n0", "n1", "n2"):
            cluster.delete_node(name)
        cluster.add_pod(teammate("b0", "b"))
        cluster.add_pod(teammate("c0", "c"))
        await scheduler.run_until_idle(clock)
        assert (records.last("b0").node, records.last("c0").node) == ("n4", "n5")
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        assert audit.calls == 3, "one evaluation per team"
        await scheduler.close()

    run_async(scenario())


def test_nodes_with_equal_compliance_records_share_one_evaluation(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        # The example policy reads a node's name only to find its record in data.compliance.nodes: nodes with equal
        # records are one class (standard, pci, no record), asked about once per pod key, and each node still gets
        # its own record's answer.
        data = json.loads((POLICIES / "data.json").read_text())
        levels = {"n0": "standard", "n1": "standard", "n2": "standard", "n3": "pci"}
        data["compliance"]["nodes"] = {name: {"level": level} for name, level in levels.items()}
        (tmp_path / "data.json").write_text(json.dumps(data))
        cfg = config(
            {"multiPoint": ["SecurityAuditFilter"]},
            {"SecurityAuditFilter": {"policies": [str(POLICIES)], "data": [str(tmp_path / "data.json")]}},
        )
        node_objs = [make_node(f"n{i}").capacity(cpu="4", pods=20).obj() for i in range(5)]  # n4: no record
        pods = [pod("web"), make_pod("db").namespace("prod").req(cpu="3").obj()]
        scheduler, _, records = await run(cfg, pods, node_objs)
        assert records.last("web").node in ("n0", "n1", "n2", "n3")
        assert records.last("db").node == "n3"
        scheduler2, _, records2 = await run(
            cfg, [*pods, make_pod("db2").namespace("prod").req(cpu="3").obj()], node_objs
        )
        standard = ("Denied by security policy: namespace prod requires pci nodes, the node is standard",)
        reasons = {name: status.reasons for name, status in records2.last("db2").node_to_status.items()}
        assert reasons == {
            "n0": standard,
            "n1": standard,
            "n2": standard,
            "n3": ("Insufficient cpu",),
            "n4": ("Denied by security policy: no compliance record for the node",),
        }
        for ran in (scheduler, scheduler2):
            audit: SecurityAuditFilter = plugin(ran, "SecurityAuditFilter")
            assert audit.calls == 2, "one evaluation per pod key (default, prod), not per node"
            assert sorted(int(entry.decided.sum()) for entry in audit.cache._entries.values()) == [3, 3]

    run_async(scenario())


def test_a_class_whose_first_node_came_back_in_another_class_is_asked_about_as_it_is_now(
    run_async: Runner, tmp_path: Path
) -> None:
    async def scenario() -> None:
        # Pool a's class was first seen on n1; n1 comes back in pool b, and n2 is pool a now. A new pod key asks about
        # both classes at once, and answers come back by node name: two documents named n1 would give both classes
        # one answer.
        scheduler, cluster, records, clock = await started(
            pool_config(tmp_path), [pool_node("n1", "a")], [teammate("a0", "a")]
        )
        assert records.last("a0").node == "n1"
        cluster.delete_node("n1")
        cluster.add_node(pool_node("n2", "a"))
        cluster.add_node(pool_node("n1", "b"))
        cluster.add_pod(teammate("b0", "b"))
        cluster.add_pod(teammate("a1", "a"))
        await scheduler.run_until_idle(clock)
        assert (records.last("b0").node, records.last("a1").node) == ("n1", "n2")
        await scheduler.close()

    run_async(scenario())


@pytest.mark.parametrize("mode", ["batch", "per-node"])
def test_a_node_class_that_appears_after_every_class_was_decided_is_asked_about(
    run_async: Runner, tmp_path: Path, mode: str
) -> None:
    async def scenario() -> None:
        # While the replicas' shared entry has decided every class, nothing is asked; a node of a new class makes
        # the next replica ask again (a replica told "all decided" would take the new node's undecided 0 for an
        # allow, and land where the policy says no).
        cfg = pool_config(tmp_path, **({"evaluationMode": "per-node"} if mode == "per-node" else {}))
        first = [pool_node("na", "a"), pool_node("nb", "b")]
        scheduler, cluster, records, clock = await started(cfg, first, [teammate("a0", "a"), teammate("a1", "a")])
        assert (records.last("a0").node, records.last("a1").node) == ("na", "na")
        cluster.delete_node("na")
        cluster.add_node(pool_node("nc", "c"))
        cluster.add_pod(teammate("a2", "a"))
        await scheduler.run_until_idle(clock)
        record = records.last("a2")
        assert record.result == "Unschedulable"
        denied = ("Denied by security policy: denied by policy, no reason given",)
        assert {name: status.reasons for name, status in record.node_to_status.items()} == {"nb": denied, "nc": denied}
        cluster.add_node(pool_node("nd", "a"))
        await scheduler.run_until_idle(clock)
        assert records.last("a2").node == "nd"
        if mode == "batch":
            audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
            assert audit.calls == 2, "pools a and b, then pool c, by the replicas together"
        await scheduler.close()

    run_async(scenario())


TIMED_POLICY = f"""{POOL_POLICY}
allow if {{
\tinput.node.metadata.labels.pool == "any"
\tinput.time != ""
}}
"""


@pytest.mark.parametrize(
    ("policy", "calls"),
    [
        pytest.param(POOL_POLICY, 1, id="never-reads-time-decisions-outlive-the-time-bucket"),
        pytest.param(TIMED_POLICY, 2, id="reads-time-asked-again-in-the-next-bucket"),
    ],
)
def test_decisions_are_kept_across_time_buckets_only_when_the_policy_never_reads_time(
    run_async: Runner, tmp_path: Path, policy: str, calls: int
) -> None:
    async def scenario() -> None:
        first = [pool_node("na", "a"), pool_node("nb", "b")]
        scheduler, cluster, records, clock = await started(pool_config(tmp_path, policy), first, [teammate("a0", "a")])
        clock.advance(120)  # two 60-second buckets on
        cluster.add_pod(teammate("a1", "a"))
        await scheduler.run_until_idle(clock)
        assert (records.last("a0").node, records.last("a1").node) == ("na", "na")
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        assert audit.calls == calls
        await scheduler.close()

    run_async(scenario())


@pytest.mark.parametrize(
    ("namespace", "labels", "exempt"),
    [
        pytest.param("kube-system", {}, "namespace kube-system is exempt", id="exempt-namespace"),
        pytest.param(
            "ops",
            {"kubesched.io/break-glass": "true"},
            "break-glass label kubesched.io/break-glass=true, allowed in namespace ops",
            id="break-glass-label",
        ),
        pytest.param("opa", {"app": "opa"}, "pod matches exemptPodLabels", id="policy-engine-pods"),
    ],
)
def test_exempt_pods_skip_the_policy(run_async: Runner, namespace: str, labels: dict[str, str], exempt: str) -> None:
    async def scenario() -> None:
        raw = pod("x", namespace=namespace, image="evil.example.com/miner:1")
        raw.metadata.labels.update(labels)
        cfg = filter_config(exemptPodLabels={"app": "opa"}, breakGlassNamespaces=["ops"])
        _, cluster, records = await run(cfg, [raw])
        record = records.last("x")
        assert record.result == "Scheduled"
        [verdict] = about(record, record.node)
        assert verdict.exempt == exempt and verdict.allowed
        assert verdict.outcome == "exempt", "an exemption is audited as its own verdict, never as allow"
        break_glass = [e for e in cluster.events if e.reason == "BreakGlass"]
        assert [(e.type, e.name) for e in break_glass] == ([("Warning", "x")] if "break-glass" in exempt else [])

    run_async(scenario())


def _namespace(name: str, labels: dict[str, str]) -> Namespace:
    return Namespace.from_dict({"metadata": {"name": name, "labels": labels}}, "test")


@pytest.mark.parametrize(
    ("namespace_labels", "allowed_namespaces", "exempt"),
    [
        pytest.param({}, [], False, id="nowhere-by-default"),
        pytest.param({}, ["other"], False, id="not-this-namespace"),
        pytest.param({"kubesched.io/break-glass-allowed": "false"}, [], False, id="namespace-label-false"),
        pytest.param({"kubesched.io/break-glass-allowed": "true"}, [], True, id="namespace-labelled-by-an-admin"),
        pytest.param({}, ["default"], True, id="namespace-in-the-args"),
    ],
)
def test_break_glass_is_honoured_only_where_an_administrator_allowed_it(
    run_async: Runner, namespace_labels: dict[str, str], allowed_namespaces: list[str], exempt: bool
) -> None:
    async def scenario() -> None:
        raw = pod("x", image="evil.example.com/miner:1")
        raw.metadata.labels["kubesched.io/break-glass"] = "true"
        stores = ListerStores()
        stores.namespaces.add(_namespace("default", namespace_labels))
        cfg = filter_config(breakGlassNamespaces=allowed_namespaces)
        _, cluster, records = await run(cfg, [raw], listers=stores.listers())
        record = records.last("x")
        events = [e.reason for e in cluster.events if e.reason == "BreakGlass"]
        refusals = [e for e in cluster.events if e.reason == "BreakGlassRefused"]
        if exempt:
            assert record.result == "Scheduled"
            assert {v.outcome for v in record.verdicts} == {"exempt"}
            assert len(events) == 1 and refusals == []
            assert {v.note for v in record.verdicts} == {""}
        else:
            # The label is refused: the pod is evaluated and its untrusted image denied everywhere; the refusal is
            # a Warning on the pod and a note in the audit record.
            assert record.result == "Unschedulable", record.message
            assert "deny" in {v.outcome for v in record.verdicts}
            assert events == []
            assert [(e.type, e.name) for e in refusals] == [("Warning", "x")] * len(records.all)
            assert "refused: namespace default is not allowed to use it" in refusals[0].message
            assert {v.note for v in record.verdicts} == {refusals[0].message}

    run_async(scenario())


@pytest.mark.parametrize(
    ("action", "events"),
    [
        pytest.param("warn", ["PolicyViolation"], id="warn-schedules-with-event"),
        pytest.param("dryrun", [], id="dryrun-schedules-silently"),
    ],
)
def test_warn_and_dryrun_never_reject(run_async: Runner, action: str, events: list[str]) -> None:
    async def scenario() -> None:
        untrusted = pod("m", image="evil.example.com/m:1")
        _, cluster, records = await run(filter_config(enforcementAction=action), [untrusted])
        record = records.last("m")
        assert record.result == "Scheduled"
        assert [v.allowed for v in about(record, record.node)] == [False]
        assert [e.reason for e in cluster.events_for("default", "m") if e.reason != "Scheduled"] == events

    run_async(scenario())


def broken_policy(tmp_path: Path) -> Path:
    shutil.copytree(POLICIES, tmp_path / "policies")
    (tmp_path / "policies" / "boom.rego").write_text(
        "package kubernetes.authz\n\nimport rego.v1\n\ndeny contains msg if {\n"
        '\tto_number(input.pod.metadata.namespace) > 0\n\tmsg := "never"\n}\n'
    )
    return tmp_path / "policies"


@pytest.mark.parametrize(
    ("failure_policy", "result"),
    [
        pytest.param("Fail", "Error", id="fail-closed-error-and-retry"),
        pytest.param("Ignore", "Scheduled", id="ignore-schedules-and-records-skip"),
    ],
)
def test_engine_failure_follows_failure_policy(
    run_async: Runner, tmp_path: Path, failure_policy: str, result: str
) -> None:
    async def scenario() -> None:
        policies = broken_policy(tmp_path)
        cfg = config(
            {"multiPoint": ["SecurityAuditFilter"]},
            {
                "SecurityAuditFilter": {
                    "policies": [str(policies)],
                    "data": [str(policies / "data.json")],
                    "failurePolicy": failure_policy,
                }
            },
        )
        _, _, records = await run(cfg, [pod("web")])
        record = records.last("web")
        assert record.result == result
        if result == "Error":
            assert record.message.startswith(
                'running "SecurityAuditFilter" filter plugin: OPA evaluation failed: evaluation failed:'
            )
            assert record.attempts == 3, "retried with backoff"
        else:
            [verdict] = about(record, record.node)
            assert verdict.skipped and "evaluation failed" in verdict.error

    run_async(scenario())


def test_policy_reload_changes_decisions(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        shutil.copytree(POLICIES, tmp_path / "policies")
        data = tmp_path / "policies" / "data.json"
        cfg = config(
            {"multiPoint": ["SecurityAuditFilter"]},
            {"SecurityAuditFilter": {"policies": [str(tmp_path / "policies")], "data": [str(data)]}},
        )
        clock = VirtualClock()
        cluster = SimulatedCluster(clock, nodes(), [pod("first", namespace="prod")])
        records = Records()
        scheduler = Scheduler(cfg, in_tree_registry(), cluster, clock=clock, seed=0, observer=records)
        cluster.subscribe(scheduler.event_handlers)
        await scheduler.run_until_idle(clock)
        assert records.last("first").node == "node-a"
        data.write_text(data.read_text().replace('"node-b": {"level": "standard"', '"node-b": {"level": "pci"'))
        clock.advance(10)
        cluster.add_pod(make_pod("second").namespace("prod").req(cpu="3500m").obj())
        await scheduler.run_until_idle(clock)
        assert records.last("second").node == "node-b", "node-a is full; node-b became pci after the reload"
        audit: SecurityAuditFilter = plugin(scheduler, "SecurityAuditFilter")
        revisions = {v.revision for r in records.all for v in about(r, r.node)}
        assert len(revisions) == 2 and audit.calls == 2
        await scheduler.close()

    run_async(scenario())


def permit_config(tmp_path: Path, tickets: dict[str, str], timeout: float = 120) -> tuple[Any, Path]:
    (tmp_path / "approval.rego").write_text(PERMIT_POLICY)
    data = tmp_path / "tickets.json"
    data.write_text('{"tickets": ' + str(tickets).replace("'", '"') + "}")
    args = {
        "policies": [str(tmp_path / "approval.rego")],
        "data": [str(data)],
        "decisionPath": "kubernetes/approval/decision",
        "permitTimeoutSeconds": timeout,
        "recheckIntervalSeconds": 5,
    }
    return config({"multiPoint": ["SecurityAuditPermit"]}, {"SecurityAuditPermit": args}), data


def ticket_pod(name: str, ticket: str) -> Pod:
    raw = make_pod(name).req(cpu="100m").raw()
    raw["metadata"]["annotations"] = {"example.com/change-ticket": ticket}
    return Pod.from_dict(raw, "test")


def test_permit_allows_approved_and_rejects_denied(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        cfg, _ = permit_config(tmp_path, {"CHG-1": "approved", "CHG-2": "rejected"})
        scheduler, _, records = await run(cfg, [ticket_pod("ok", "CHG-1"), ticket_pod("no", "CHG-2")])
        assert records.last("ok").result == "Scheduled"
        [verdict] = about(records.last("ok"), records.last("ok").node)
        assert verdict.stage == "permit" and verdict.allowed
        rejected = records.last("no")
        assert rejected.result == "Unschedulable"
        assert rejected.message == "0/1 nodes are available: 1 Denied by security policy: ticket CHG-2 was rejected."
        placed = {pod.name for info in scheduler.cache.snapshot().node_infos for pod in info.pods.values()}
        assert placed == {"ok"}, "the rejected pod was forgotten: its node is free again"

    run_async(scenario())


def test_permit_waits_for_pending_approval_without_blocking_others(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        cfg, data = permit_config(tmp_path, {"CHG-3": "open", "CHG-1": "approved"})
        clock = VirtualClock()
        cluster = SimulatedCluster(clock, nodes(), [ticket_pod("waits", "CHG-3"), ticket_pod("quick", "CHG-1")])
        records = Records()
        scheduler = Scheduler(cfg, in_tree_registry(), cluster, clock=clock, seed=0, observer=records)
        cluster.subscribe(scheduler.event_handlers)
        while await scheduler.schedule_next():
            pass
        await scheduler.settle()  # the decisions are made off the loop, in the engine's worker
        assert records.last("quick").result == "Scheduled", "the waiting pod does not hold up the next one"
        assert [w.pod.name for w in scheduler.waiting_pods] == ["waits"]
        for _ in range(3):  # still open after several rechecks
            clock.advance(10)
            await scheduler.settle()
        assert [w.pod.name for w in scheduler.waiting_pods] == ["waits"]
        data.write_text('{"tickets": {"CHG-3": "approved", "CHG-1": "approved"}}')
        await scheduler.run_until_idle(clock)
        assert records.last("waits").result == "Scheduled", records.last("waits").message
        plugin_calls = plugin(scheduler, "SecurityAuditPermit").calls
        assert plugin_calls >= 3
        await scheduler.close()

    run_async(scenario())


def test_permit_timeout_rejects(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        cfg, _ = permit_config(tmp_path, {"CHG-9": "open"}, timeout=60)
        _, _, records = await run(cfg, [ticket_pod("stuck", "CHG-9")])
        record = records.last("stuck")
        assert record.result == "Unschedulable"
        assert "rejected due to timeout after waiting 1m0s at plugin SecurityAuditPermit" in record.message

    run_async(scenario())


def test_args_validation_lists_every_error() -> None:
    from kubesched.errors import ValidationFailed

    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "s",
                "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                "pluginConfig": [
                    {
                        "name": "SecurityAuditFilter",
                        "args": {
                            "opaEndpoint": "ftp://x",
                            "timeoutSeconds": 0,
                            "failurePolicy": "Maybe",
                            "enforcementAction": "block",
                            "policyRefreshSeconds": 0,
                        },
                    }
                ],
            }
        ],
    }
    with pytest.raises(ValidationFailed) as exc:
        load_config_dict(document, "t.yaml", in_tree_registry())
    text = str(exc.value)
    base = "profiles[0].pluginConfig[0].args"
    assert f'{base}.opaEndpoint: Invalid value: "ftp://x": must be an http(s) URL' in text
    assert f"{base}.timeoutSeconds: Invalid value: 0" in text
    assert f'{base}.failurePolicy: Unsupported value: "Maybe"' in text
    assert f'{base}.enforcementAction: Unsupported value: "block"' in text
    assert f"{base}.policyRefreshSeconds: Invalid value: 0" in text and "at most 300" in text


def test_policy_refresh_seconds_has_a_documented_default_and_reaches_the_engine() -> None:
    from kubesched.plugins.security.args import DEFAULT_POLICY_REFRESH_SECONDS, SecurityAuditFilterArgs
    from kubesched.plugins.security.engines import engine_spec

    default = SecurityAuditFilterArgs(opa_endpoint="http://opa:8181/v1/data/kubernetes/authz")
    assert default.policy_refresh_seconds == DEFAULT_POLICY_REFRESH_SECONDS == 2.0
    assert "**`policyRefreshSeconds`** (default **2 s**)" in (ROOT / "docs/explanation/policy-freshness.md").read_text()
    tuned = SecurityAuditFilterArgs(opa_endpoint=default.opa_endpoint, policy_refresh_seconds=7)
    assert engine_spec(tuned).refresh_seconds == 7.0


def test_permit_plugin_is_registered() -> None:
    assert in_tree_registry()["SecurityAuditPermit"].extension_points == frozenset({"permit"})
    assert SecurityAuditPermit.__doc__
