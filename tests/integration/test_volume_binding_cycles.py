"""VolumeBinding and VolumeZone through the whole scheduler, in simulation (default profile).

Local volumes of a WaitForFirstConsumer class are matched to the nodes they live on; the assume cache keeps
a volume chosen for one pod from the next; PreBind binds them in the simulated cluster (volume and claim
Bound); a claim that finds no volume and cannot be provisioned fails with upstream's message; a dynamically
provisioned claim lands where the class's allowedTopologies permit and gets a volume; a bound volume's zone
label keeps its pod in that zone.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from kubesched.api.objects import Pod
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.config.loader import default_config
from kubesched.framework.listers import ListerStores
from kubesched.plugins.registry import in_tree_registry
from kubesched.scheduler.results import AttemptRecord
from kubesched.scheduler.scheduler import Scheduler
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.storage_builders import make_pv, make_pvc, make_storage_class

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


class Records:
    def __init__(self) -> None:
        self.all: list[AttemptRecord] = []

    def on_attempt(self, record: AttemptRecord) -> None:
        self.all.append(record)

    def last(self, name: str) -> AttemptRecord:
        return [record for record in self.all if record.pod.name == name][-1]


def build(pods: list[Pod]) -> tuple[Scheduler, SimulatedCluster, VirtualClock, Records, ListerStores]:
    clock = VirtualClock()
    nodes = [
        make_node(name).label(HOSTNAME, name).zone(zone).capacity(cpu="4", memory="8Gi").obj()
        for name, zone in (("node-a", "zone-a"), ("node-b", "zone-b"))
    ]
    stores = ListerStores()
    stores.storage_classes.add(make_storage_class("local").wait_for_first_consumer().obj())
    stores.storage_classes.add(
        make_storage_class("csi")
        .provisioner("csi.example.com")
        .wait_for_first_consumer()
        .allowed_topology({ZONE: ["zone-b"]})
        .obj()
    )
    for name, node in (("pv-a", "node-a"), ("pv-b", "node-b")):
        stores.persistent_volumes.add(
            make_pv(name).storage_class("local").capacity("10Gi").available().node_affinity({HOSTNAME: [node]}).obj()
        )
    stores.persistent_volumes.add(
        make_pv("pv-zonal")
        .capacity("1Gi")
        .claim_ref("zonal", uid="zonal-uid")
        .phase("Bound")
        .label(ZONE, "zone-b")
        .obj()
    )
    for claim in ("c1", "c2", "c3"):
        stores.persistent_volume_claims.add(make_pvc(claim).uid(claim).storage_class("local").request("5Gi").obj())
    stores.persistent_volume_claims.add(make_pvc("dyn").uid("dyn").storage_class("csi").obj())
    stores.persistent_volume_claims.add(make_pvc("zonal").uid("zonal-uid").bound_to("pv-zonal").obj())
    cluster = SimulatedCluster(clock, nodes, pods, listers=stores.listers())
    records = Records()
    registry = in_tree_registry()
    scheduler = Scheduler(default_config(registry), registry, cluster, clock=clock, seed=0, observer=records)
    cluster.subscribe(scheduler.event_handlers)
    return scheduler, cluster, clock, records, stores


def claimant(name: str, claim: str) -> Pod:
    return make_pod(name).uid(name).req(cpu="100m").pvc(claim).obj()


def test_local_volumes_are_bound_once_each_and_the_third_claim_finds_none(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [claimant("p1", "c1"), claimant("p2", "c2"), claimant("p3", "c3")]
        scheduler, cluster, clock, records, stores = build(pods)
        try:
            await scheduler.run_until_idle(clock)
            placed = {records.last(p).node for p in ("p1", "p2")}
            assert placed == {"node-a", "node-b"}
            third = records.last("p3")
            assert third.result == "Unschedulable"
            assert third.message.startswith(
                "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
            )
            # PreBind bound each claim to the volume on its pod's node, in the simulated cluster.
            bound = {claim: volume for _, claim, volume in cluster.volume_bindings}
            assert bound == {
                "default/c1": "pv-a" if records.last("p1").node == "node-a" else "pv-b",
                "default/c2": "pv-a" if records.last("p2").node == "node-a" else "pv-b",
            }
            for claim, volume in bound.items():
                name = claim.split("/")[1]
                pvc = stores.persistent_volume_claims.get("default", name)
                pv = stores.persistent_volumes.get(volume)
                assert pvc is not None and pvc.volume_name == volume and pvc.phase == "Bound"
                assert pv is not None and pv.claim_ref is not None and pv.claim_ref.name == name
                assert pv.phase == "Bound"
        finally:
            await scheduler.close()

    run_async(scenario())


def test_provisioning_follows_allowed_topologies_and_zone_labels_hold_pods(run_async: Runner) -> None:
    async def scenario() -> None:
        pods = [claimant("dynamic", "dyn"), claimant("zonal", "zonal")]
        scheduler, cluster, clock, records, stores = build(pods)
        try:
            await scheduler.run_until_idle(clock)
            assert (records.last("dynamic").result, records.last("dynamic").node) == ("Scheduled", "node-b")
            assert (records.last("zonal").result, records.last("zonal").node) == ("Scheduled", "node-b")
            # The simulated provisioner made a volume for the claim and bound it; the claim remembers the node.
            dyn = stores.persistent_volume_claims.get("default", "dyn")
            assert dyn is not None and dyn.volume_name == "pvc-dyn" and dyn.selected_node == "node-b"
            made = stores.persistent_volumes.get("pvc-dyn")
            assert made is not None and made.claim_ref is not None and made.claim_ref.name == "dyn"
            # The bound claim needed no binding.
            assert [claim for _, claim, _ in cluster.volume_bindings] == ["default/dyn"]
        finally:
            await scheduler.close()

    run_async(scenario())


def test_missing_claim_fails_in_prefilter_with_upstreams_message(run_async: Runner) -> None:
    async def scenario() -> None:
        scheduler, _, clock, records, _ = build([claimant("lost", "nope")])
        try:
            await scheduler.run_until_idle(clock)
            record = records.last("lost")
            assert record.result == "Unschedulable"
            # DynamicResources' PreFilter never ran, so its PostFilter fails reading its state, as upstream's.
            assert record.message == '0/2 nodes are available: persistentvolumeclaim "nope" not found. not found'
        finally:
            await scheduler.close()

    run_async(scenario())


def test_simulated_bind_volumes_refuses_read_only_listers_and_foreign_claim_refs(run_async: Runner) -> None:
    from kubesched.framework.interface import ApiError
    from kubesched.framework.listers import Listers

    class ReadOnly:
        """A lister that is not one of the simulated cluster's stores."""

        def get(self, name: str) -> None:
            return None

        def list(self) -> tuple[()]:
            return ()

    pod = claimant("p", "c1")
    volume = make_pv("pv-a").obj()
    claim = make_pvc("c1").obj()

    async def scenario() -> None:
        empty = Listers.empty()
        frozen = SimulatedCluster(
            VirtualClock(),
            listers=Listers(**{**{f: getattr(empty, f) for f in Listers.__slots__}, "persistent_volumes": ReadOnly()}),
        )
        try:
            await frozen.bind_volumes(pod, "node-a", [(volume, claim)], [])
        except ApiError as exc:
            assert "read-only" in str(exc)
        else:
            raise AssertionError("expected ApiError")

        stores = ListerStores()
        stores.persistent_volumes.add(make_pv("pv-a").claim_ref("someone-else").obj())
        stores.persistent_volume_claims.add(claim)
        cluster = SimulatedCluster(VirtualClock(), listers=stores.listers())
        try:
            await cluster.bind_volumes(pod, "node-a", [(volume, claim)], [])
        except ApiError as exc:
            assert "already bound to claim default/someone-else" in str(exc)
        else:
            raise AssertionError("expected ApiError")

    run_async(scenario())
