"""The policy gate decides with the policy in force, in real schedulers on the virtual clock.

Embedded engine: the first decision after a file change uses the new policy, whatever the clock says. Both
engines: a new revision is the PolicyRevisionChange event, which requeues the pods the old revision rejected (and
only those). A status patch of a rejected pod (the scheduler's own PodScheduled condition) requeues nothing. A
remote OPA's revision is what OPA reports, trusted for ``policyRefreshSeconds``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import load_config_dict
from kubesched.framework.events import POLICY_REVISION_CHANGE, PolicyRevision, QueueingHint
from kubesched.harness.opa_server import OpaTestServer
from kubesched.plugins.registry import in_tree_registry
from kubesched.plugins.security.decided_revisions import DecidedRevisions
from kubesched.plugins.security.security_audit_filter import SecurityAuditFilter
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
ROOT = Path(__file__).resolve().parents[4]
POLICIES = ROOT / "examples" / "policies"
UNTRUSTED = "evil.example.com/miner:1"


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def of(self, name: str) -> list[AttemptRecord]:
        return [r for r in self.all if r.pod.name == name]


def nodes() -> list[Any]:
    return [make_node(name).capacity(cpu="4", memory="8Gi", pods=20).obj() for name in ("node-a", "node-b")]


def pod(name: str, *, image: str = "nginx:1.27", labels: dict[str, str] | None = None) -> Pod:
    raw = make_pod(name).namespace("default").req(cpu="100m").raw()
    raw["spec"]["containers"][0]["image"] = image
    raw["metadata"]["labels"] = dict(labels or {})
    raw["metadata"]["resourceVersion"] = "1"
    return Pod.from_dict(raw, name)


def config(args: dict[str, Any]) -> Any:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                "pluginConfig": [{"name": "SecurityAuditFilter", "args": args}],
            }
        ],
    }
    return load_config_dict(document, "test", in_tree_registry())


def embedded_files(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    shutil.copytree(POLICIES, tmp_path / "policies")
    data = tmp_path / "policies" / "data.json"
    return {"policies": [str(tmp_path / "policies")], "data": [str(data)]}, data


def trust(data: Path, prefix: str, *, trusted: bool) -> None:
    """Add or remove a trusted image prefix in the example's data file."""
    document = json.loads(data.read_text())
    prefixes = document["config"]["trusted_image_prefixes"]
    if trusted:
        prefixes.append(prefix)
    else:
        prefixes.remove(prefix)
    data.write_text(json.dumps(document))


def start(args: dict[str, Any], clock: VirtualClock) -> tuple[Scheduler, SimulatedCluster, Records]:
    cluster = SimulatedCluster(clock, nodes(), [])
    records = Records()
    scheduler = Scheduler(config(args), in_tree_registry(), cluster, clock=clock, seed=0, observer=records)
    cluster.subscribe(scheduler.event_handlers)
    return scheduler, cluster, records


def audit_filter(scheduler: Scheduler) -> SecurityAuditFilter:
    found = scheduler.frameworks["default-scheduler"].plugins["SecurityAuditFilter"]
    assert isinstance(found, SecurityAuditFilter)
    return found


# ---- embedded: the next decision after a change --------------------------------------------------------------


def test_a_tightened_policy_denies_the_very_next_identical_pod(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        args, data = embedded_files(tmp_path)
        clock = VirtualClock()
        scheduler, cluster, records = start(args, clock)
        cluster.add_pod(pod("first"))
        await scheduler.run_until_idle(clock)
        [first] = records.of("first")
        assert first.result == "Scheduled"
        trust(data, "nginx:", trusted=False)
        # No time passes: the change is found before the cached decisions for this very pod input are read.
        cluster.add_pod(pod("second"))
        await scheduler.run_until_idle(clock)
        [second] = records.of("second")
        assert second.result == "Unschedulable", "decided with the policy in force, not the cached one"
        assert "nginx:1.27 is not from a trusted registry" in second.message
        before = {v.revision for v in first.verdicts}
        after = {v.revision for v in second.verdicts}
        assert len(before) == len(after) == 1 and before != after
        await scheduler.close()

    run_async(scenario())


def test_a_relaxed_policy_requeues_the_pods_the_old_one_rejected(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        args, data = embedded_files(tmp_path)
        clock = VirtualClock()
        scheduler, cluster, records = start(args, clock)
        cluster.add_pod(pod("miner", image=UNTRUSTED))
        cluster.add_pod(pod("web", labels={"app": "web"}))
        await scheduler.run_until_idle(clock)
        assert [r.result for r in records.of("miner")] == ["Unschedulable"]
        assert scheduler.queue.counts().unschedulable == 1
        trust(data, "evil.example.com/", trusted=True)
        assert await scheduler.check_policy_revisions(), "the new revision is the PolicyRevisionChange event"
        await scheduler.run_until_idle(clock)
        assert [r.result for r in records.of("miner")] == ["Unschedulable", "Scheduled"]
        assert [r.result for r in records.of("web")] == ["Scheduled"], "a bound pod is not touched"
        # Moved by the event (to backoffQ: its one-second backoff had not passed), not by the 5-minute flush.
        assert scheduler.queue.incoming.get(("backoff", POLICY_REVISION_CHANGE.label)) == 1
        assert not await scheduler.check_policy_revisions(), "the same revision is no new event"
        await scheduler.close()

    run_async(scenario())


def test_the_attempt_that_sees_a_new_revision_is_not_requeued_by_it(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        args, data = embedded_files(tmp_path)
        clock = VirtualClock()
        scheduler, cluster, records = start(args, clock)
        cluster.add_pod(pod("old-miner", image=UNTRUSTED))
        await scheduler.run_until_idle(clock)
        trust(data, "busybox", trusted=False)  # another revision that still denies both miners
        cluster.add_pod(pod("new-miner", image=UNTRUSTED))
        await scheduler.run_until_idle(clock)
        # new-miner's attempt found the change and was decided under it: the event requeues only old-miner,
        # decided under the revision before.
        assert [r.result for r in records.of("new-miner")] == ["Unschedulable"]
        assert [r.result for r in records.of("old-miner")] == ["Unschedulable", "Unschedulable"]
        await scheduler.close()

    run_async(scenario())


def test_the_hint_queues_only_pods_its_engine_decided_under_another_revision() -> None:
    hints = DecidedRevisions(engine="spec-a")
    rejected = pod("p")
    hints.record(rejected.metadata.uid, "r1")
    before, after = PolicyRevision("spec-a", "r1"), PolicyRevision("spec-a", "r2")
    assert hints.hint(rejected, before, after) is QueueingHint.QUEUE
    assert hints.hint(rejected, PolicyRevision("spec-b", "x"), PolicyRevision("spec-b", "y")) is QueueingHint.SKIP
    hints.record(rejected.metadata.uid, "r2")
    assert hints.hint(rejected, before, after) is QueueingHint.SKIP
    assert hints.hint(pod("never-seen"), before, after) is QueueingHint.QUEUE


# ---- one attempt per real event ------------------------------------------------------------------------------


def with_changes(current: Pod, *, status: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> Pod:
    raw = current.raw
    raw["metadata"]["resourceVersion"] = str(int(raw["metadata"].get("resourceVersion", "1")) + 1)
    raw["metadata"]["managedFields"] = [{"manager": "kubesched", "operation": "Update"}]
    if status is not None:
        raw["status"] = status
    if labels is not None:
        raw["metadata"]["labels"] = labels
    return Pod.from_dict(raw, current.metadata.name)


@pytest.mark.parametrize(
    ("change", "attempts"),
    [
        pytest.param(
            {
                "status": {
                    "phase": "Pending",
                    "nominatedNodeName": "node-a",
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                }
            },
            1,
            id="the-schedulers-own-status-patch-requeues-nothing",
        ),
        pytest.param({"labels": {"app": "miner", "tier": "batch"}}, 2, id="a-label-change-is-another-attempt"),
    ],
)
def test_only_a_scheduling_relevant_update_of_a_rejected_pod_requeues_it(
    run_async: Runner, tmp_path: Path, change: dict[str, Any], attempts: int
) -> None:
    async def scenario() -> None:
        args, _ = embedded_files(tmp_path)
        clock = VirtualClock()
        scheduler, cluster, records = start(args, clock)
        miner = pod("miner", image=UNTRUSTED, labels={"app": "miner"})
        cluster.add_pod(miner)
        await scheduler.run_until_idle(clock)
        assert len(records.of("miner")) == 1
        cluster.update_pod(with_changes(cluster.pods[miner.metadata.uid], **change))
        await scheduler.run_until_idle(clock)
        assert len(records.of("miner")) == attempts
        await scheduler.close()

    run_async(scenario())


# ---- remote: OPA's revision, within the bound ------------------------------------------------------------------


def test_remote_decisions_follow_opas_revision_within_the_bound(run_async: Runner) -> None:
    policies = {path.name: path.read_text() for path in POLICIES.glob("*.rego") if not path.stem.endswith("_test")}
    data = json.loads((POLICIES / "data.json").read_text())
    with OpaTestServer(policies, data) as server:

        async def scenario() -> None:
            clock = VirtualClock()
            args = {"opaEndpoint": f"{server.url}/v1/data/kubernetes/authz", "policyRefreshSeconds": 5}
            scheduler, cluster, records = start(args, clock)
            cluster.add_pod(pod("first"))
            await scheduler.run_until_idle(clock)
            [first] = records.of("first")
            assert first.result == "Scheduled"
            [revision] = {v.revision for v in first.verdicts}
            assert revision.startswith("policies:"), "the revision OPA reported, not a counter of ours"
            # Tightened on OPA: no nginx any more (a module of its own, as PUT /v1/policies would install it).
            server.put_policy(
                "no-nginx.rego",
                'package kubernetes.authz\n\nimport rego.v1\n\ndeny contains "nginx is retired" if {\n'
                '\tsome c in input.pod.spec.containers\n\tstartswith(c.image, "nginx:")\n}\n',
            )
            clock.advance(4)  # within the bound: what OPA reported last is trusted
            cluster.add_pod(pod("second"))
            await scheduler.run_until_idle(clock)
            assert [r.result for r in records.of("second")] == ["Scheduled"]
            clock.advance(1)  # the bound: OPA is asked again before the cache is read
            cluster.add_pod(pod("third"))
            await scheduler.run_until_idle(clock)
            [third] = records.of("third")
            assert third.result == "Unschedulable" and "nginx is retired" in third.message
            [tightened] = {v.revision for v in third.verdicts}
            assert tightened.startswith("policies:") and tightened != revision
            await scheduler.close()

        run_async(scenario())


# ---- live mode: the engines are asked every policyRefreshSeconds -----------------------------------------------


async def settle_until(check: Callable[[], bool], rounds: int = 400) -> bool:
    """Let the loop, the policy worker's thread and its process work (real I/O: a bounded number of short waits)."""
    for _ in range(rounds):
        if check():
            return True
        await asyncio.sleep(0.01)
    return check()


def test_live_mode_frees_a_pod_the_old_policy_rejected_once_the_bound_passes(run_async: Runner, tmp_path: Path) -> None:
    async def scenario() -> None:
        args, data = embedded_files(tmp_path)
        clock = VirtualClock()
        scheduler, cluster, records = start({**args, "policyRefreshSeconds": 3}, clock)
        stop = asyncio.Event()
        loop = asyncio.create_task(scheduler.run(stop))
        cluster.add_pod(pod("miner", image=UNTRUSTED))
        assert await settle_until(lambda: len(records.of("miner")) == 1)
        assert records.of("miner")[0].result == "Unschedulable"
        trust(data, "evil.example.com/", trusted=True)
        clock.advance(2.9)
        await settle_until(lambda: len(records.of("miner")) > 1, rounds=20)
        assert len(records.of("miner")) == 1, "the engines are asked every policyRefreshSeconds, not sooner"
        clock.advance(0.1)  # the check: the new revision moves the pod (its backoff has passed)
        assert await settle_until(lambda: len(records.of("miner")) == 2)
        assert records.of("miner")[1].result == "Scheduled"
        assert scheduler.queue.incoming.get(("active", POLICY_REVISION_CHANGE.label)) == 1
        stop.set()
        await asyncio.wait_for(loop, timeout=10)

    run_async(scenario())
