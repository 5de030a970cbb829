"""VolumeRestrictions and NodeVolumeLimits through the whole scheduler, in simulation, with the default profile:
CSI attach limits from CSINodes (a volume already on a node attaches no second time), and a ReadWriteOncePod
claim held by a lower-priority pod, which preemption frees (RemovePod makes the holder's node feasible), after
which the pod binds to the node it was nominated for."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.storage import ANN_BIND_COMPLETED, CSINode, PersistentVolume, PersistentVolumeClaim
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config
from kubesched.framework.listers import ListerStores
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.storage_builders import make_csi_node, pv_object, pvc_object

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
EBS = "ebs.csi.aws.com"


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def of(self, name: str) -> list[AttemptRecord]:
        return [record for record in self.all if record.pod.name == name]


def bound_pair(
    name: str, *, access_modes: Sequence[str] = ("ReadWriteOnce",)
) -> tuple[PersistentVolume, PersistentVolumeClaim]:
    """A CSI volume and the claim bound to it, as the PV controller leaves them."""
    pv = pv_object(f"pv-{name}", csi=(EBS, f"vol-{name}"), claim=("default", name), phase="Bound")
    claim = pvc_object(
        name,
        volume_name=f"pv-{name}",
        access_modes=access_modes,
        annotations={ANN_BIND_COMPLETED: "yes"},
        phase="Bound",
    )
    return pv, claim


def build(
    pods: list[Pod], pairs: Sequence[tuple[PersistentVolume, PersistentVolumeClaim]], csi_nodes: Sequence[CSINode]
) -> tuple[Scheduler, SimulatedCluster, VirtualClock, Records]:
    clock = VirtualClock()
    nodes = [make_node(name).capacity(cpu="4", memory="8Gi", pods=20).obj() for name in ("node-a", "node-b")]
    stores = ListerStores()
    for pv, claim in pairs:
        stores.persistent_volumes.add(pv)
        stores.persistent_volume_claims.add(claim)
    for csi_node in csi_nodes:
        stores.csi_nodes.add(csi_node)
    cluster = SimulatedCluster(clock, nodes, pods, listers=stores.listers())
    records = Records()
    registry = in_tree_registry()
    scheduler = Scheduler(default_config(registry), registry, cluster, clock=clock, seed=0, observer=records)
    cluster.subscribe(scheduler.event_handlers)
    return scheduler, cluster, clock, records


def claim_pod(name: str, *claims: str, node: str = "", priority: int = 0) -> Pod:
    builder = make_pod(name).uid(name).priority(priority).req(cpu="100m")
    for claim in claims:
        builder.pvc(claim)
    if node:
        builder.node_name(node)
    return builder.obj()


def test_csi_attach_limits_from_csinodes(run_async: Runner) -> None:
    async def scenario() -> None:
        pairs = [bound_pair(f"c{i}") for i in range(4)]
        pods = [
            claim_pod("full-a", "c0", "c1", node="node-a"),
            claim_pod("full-b", "c2", node="node-b"),
            claim_pod("wants-c3", "c3"),
            claim_pod("shares-c0", "c0"),
        ]
        csi_nodes = [make_csi_node("node-a", {EBS: 2}), make_csi_node("node-b", {EBS: 1})]
        scheduler, _, clock, records = build(pods, pairs, csi_nodes)
        scheduler.max_attempts = 1
        try:
            await scheduler.run_until_idle(clock)
            (wants,) = records.of("wants-c3")
            assert wants.result == "Unschedulable"
            assert wants.message == (
                "0/2 nodes are available: 2 node(s) exceed max volume count. no new claims to deallocate, "
                "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
            )
            # c0 is already attached to node-a: no new attachment there; on node-b it would be a second one.
            (shares,) = records.of("shares-c0")
            assert (shares.result, shares.node) == ("Scheduled", "node-a")
        finally:
            await scheduler.close()

    run_async(scenario())


def test_read_write_once_pod_claim_is_freed_by_preemption(run_async: Runner) -> None:
    async def scenario() -> None:
        pairs = [bound_pair("solo", access_modes=("ReadWriteOncePod",))]
        pods = [
            claim_pod("holder", "solo", node="node-a", priority=10),
            claim_pod("urgent", "solo", priority=1000),
        ]
        scheduler, cluster, clock, records = build(pods, pairs, [])
        try:
            await scheduler.run_until_idle(clock)
            first, *_, last = records.of("urgent")
            assert first.result == "Unschedulable"
            assert first.message.startswith(
                "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                "access mode already in-use by another pod."
            )
            # Only on node-a does removing a pod (the holder) make room: the holder is the one victim.
            assert cluster.preempted == {"urgent": ["default/holder"]}
            assert "holder" not in cluster.pods
            assert (last.result, last.node) == ("Scheduled", "node-a")
        finally:
            await scheduler.close()

    run_async(scenario())
