"""VolumeBinding against volume_binding_test.go (TestVolumeBinding, its PreFilter and Filter columns; v1.35 has
no Score without the StorageCapacityScoring gate) and the binder's decisions (binder_test.go's FindPodVolumes
and AssumePodVolumes, in kind), per node and in batch; Reserve/Unreserve/PreBind against a recording client."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from kubesched.api.objects import Node, Pod
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ApiError
from kubesched.framework.listers import ListerStores
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.volumebinding import VolumeBinding, VolumeBindingArgs
from kubesched.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
)
from kubesched.plugins.volumebinding.volume_binding import ERR_REASON_UNBOUND_IMMEDIATE
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import (
    PluginHandle,
    RecordingClient,
    filter_nodes,
    filter_nodes_batch,
    make_cluster,
)
from kubesched.testing.storage_builders import make_pv, make_pvc, make_storage_class

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"

IMMEDIATE_SC = make_storage_class("immediate-sc").obj()
WAIT_SC = make_storage_class("wait-sc").wait_for_first_consumer().obj()
WAIT_HDD_SC = make_storage_class("wait-hdd-sc").wait_for_first_consumer().obj()
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def unresolvable(*reasons: str) -> Status:
    return Status(UNRESOLVABLE, *reasons)


@dataclass
class Env:
    plugin: VolumeBinding
    snapshot: Snapshot
    stores: ListerStores
    handle: PluginHandle
    client: RecordingClient = field(default_factory=RecordingClient)


def env(
    nodes: Sequence[Node],
    pvcs: Sequence[PersistentVolumeClaim] = (),
    pvs: Sequence[PersistentVolume] = (),
    classes: Sequence[StorageClass] = (IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC),
    client: RecordingClient | None = None,
) -> Env:
    stores = ListerStores()
    for pvc in pvcs:
        stores.persistent_volume_claims.add(pvc)
    for pv in pvs:
        stores.persistent_volumes.add(pv)
    for sc in classes:
        stores.storage_classes.add(sc)
    cache, snapshot = make_cluster(nodes)
    the_client = client if client is not None else RecordingClient()
    handle = PluginHandle(cache, client=the_client, listers=stores.listers())
    return Env(VolumeBinding(None, handle), snapshot, stores, handle, the_client)


def node(name: str, **labels: str) -> Node:
    """upstream makeNode: the hostname label is always there."""
    builder = make_node(name).label(HOSTNAME, name)
    for key, value in labels.items():
        builder.label(key.replace("__", "/").replace("_", "."), value)
    return builder.obj()


def zonal(name: str, region: str, zone: str) -> Node:
    return make_node(name).label(HOSTNAME, name).label(REGION, region).label(ZONE, zone).obj()


def pod_with(*claims: str) -> Pod:
    builder = make_pod("pod-a")
    for claim in claims:
        builder.pvc(claim)
    return builder.obj()


def wait_pv(name: str, capacity: str = "1Gi", **affinity: list[str]) -> PersistentVolume:
    builder = make_pv(name).storage_class(WAIT_SC.name).available().capacity(capacity)
    if affinity:
        builder.node_affinity({k.replace("__", "/").replace("_", "."): v for k, v in affinity.items()})
    return builder.obj()


def local_pv(name: str, sc: str, capacity: str, host: str) -> PersistentVolume:
    return make_pv(name).storage_class(sc).available().capacity(capacity).node_affinity({HOSTNAME: [host]}).obj()


def zone_pv(name: str, capacity: str, region: str, zone: str) -> PersistentVolume:
    return (
        make_pv(name)
        .storage_class(WAIT_SC.name)
        .available()
        .capacity(capacity)
        .node_affinity({REGION: [region], ZONE: [zone]})
        .obj()
    )


ZONAL_NODES = [
    zonal("zone-a-node-a", "region-a", "zone-a"),
    zonal("zone-a-node-b", "region-a", "zone-a"),
    zonal("zone-b-node-a", "region-b", "zone-b"),
    zonal("zone-b-node-b", "region-b", "zone-b"),
    zonal("zone-c-node-a", "region-c", "zone-c"),
    zonal("zone-c-node-b", "region-c", "zone-c"),
]
BIND_CONFLICT = unresolvable(ERR_REASON_BIND_CONFLICT)

# (pod, nodes, pvcs, pvs, want PreFilter, want Filter per node) — TestVolumeBinding's rows.
CASES = [
    pytest.param(make_pod("pod-a").obj(), [node("node-a")], [], [], Status(Code.SKIP), None, id="pod-has-no-pvcs"),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).bound_to("pv-a").obj()],
        [wait_pv("pv-a")],
        None,
        [None],
        id="all-bound",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [],
        [],
        unresolvable('persistentvolumeclaim "pvc-a" not found'),
        None,
        id="pvc-does-not-exist",
    ),
    pytest.param(
        pod_with("pvc-a", "pvc-b"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).bound_to("pv-a").obj()],
        [],
        unresolvable('persistentvolumeclaim "pvc-b" not found'),
        None,
        id="part-of-pvcs-do-not-exist",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(IMMEDIATE_SC.name).obj()],
        [],
        unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
        None,
        id="immediate-claims-not-bound",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).obj()],
        [],
        None,
        [BIND_CONFLICT],
        id="unbound-claims-no-matches",
    ),
    pytest.param(
        pod_with("pvc-a", "pvc-b"),
        [node("node-a", foo="barbar")],
        [
            make_pvc("pvc-a").storage_class(WAIT_SC.name).bound_to("pv-a").obj(),
            make_pvc("pvc-b").storage_class(WAIT_SC.name).obj(),
        ],
        [wait_pv("pv-a", foo=["bar"])],
        None,
        [unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)],
        id="bound-and-unbound-unsatisfied",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).bound_to("pv-a").obj()],
        [],
        None,
        [unresolvable(ERR_REASON_PV_NOT_EXIST)],
        id="pv-not-found",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).bound_to("pv-a").phase("Lost").obj()],
        [],
        unresolvable('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'),
        None,
        id="pv-not-found-claim-lost",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a"), node("node-b"), node("node-c")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).request("50Gi").obj()],
        [
            local_pv("pv-a-0", WAIT_SC.name, "200Gi", "node-a"),
            local_pv("pv-a-1", WAIT_SC.name, "200Gi", "node-a"),
            local_pv("pv-b-0", WAIT_SC.name, "100Gi", "node-b"),
            local_pv("pv-b-1", WAIT_SC.name, "100Gi", "node-b"),
        ],
        None,
        [None, None, BIND_CONFLICT],
        id="local-volumes-with-close-capacity-are-preferred",
    ),
    pytest.param(
        pod_with("pvc-0", "pvc-1"),
        [node("node-a"), node("node-b"), node("node-c")],
        [
            make_pvc("pvc-0").storage_class(WAIT_SC.name).request("50Gi").obj(),
            make_pvc("pvc-1").storage_class(WAIT_HDD_SC.name).request("100Gi").obj(),
        ],
        [
            local_pv("pv-a-0", WAIT_SC.name, "200Gi", "node-a"),
            local_pv("pv-a-1", WAIT_SC.name, "200Gi", "node-a"),
            local_pv("pv-a-2", WAIT_HDD_SC.name, "200Gi", "node-a"),
            local_pv("pv-a-3", WAIT_HDD_SC.name, "200Gi", "node-a"),
            local_pv("pv-b-0", WAIT_SC.name, "100Gi", "node-b"),
            local_pv("pv-b-1", WAIT_SC.name, "100Gi", "node-b"),
            local_pv("pv-b-2", WAIT_HDD_SC.name, "100Gi", "node-b"),
            local_pv("pv-b-3", WAIT_HDD_SC.name, "100Gi", "node-b"),
        ],
        None,
        [None, None, BIND_CONFLICT],
        id="local-volumes-with-close-capacity-are-preferred-multiple-pvcs",
    ),
    pytest.param(
        pod_with("pvc-a"),
        ZONAL_NODES,
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).request("50Gi").obj()],
        [
            zone_pv("pv-a-0", "200Gi", "region-a", "zone-a"),
            zone_pv("pv-a-1", "200Gi", "region-a", "zone-a"),
            zone_pv("pv-b-0", "100Gi", "region-b", "zone-b"),
            zone_pv("pv-b-1", "100Gi", "region-b", "zone-b"),
        ],
        None,
        [None, None, None, None, BIND_CONFLICT, BIND_CONFLICT],
        id="zonal-volumes-with-close-capacity-are-preferred",
    ),
    pytest.param(
        pod_with("pvc-a"),
        ZONAL_NODES,
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).request("50Gi").obj()],
        [
            zone_pv("pv-a-0", "200Gi", "region-a", "zone-a"),
            zone_pv("pv-a-1", "200Gi", "region-a", "zone-a"),
            zone_pv("pv-a-2", "200Gi", "region-a", "zone-a"),
            zone_pv("pv-a-3", "200Gi", "region-a", "zone-a"),
            zone_pv("pv-b-0", "100Gi", "region-b", "zone-b"),
            zone_pv("pv-b-1", "100Gi", "region-b", "zone-b"),
            zone_pv("pv-b-2", "100Gi", "region-b", "zone-b"),
            zone_pv("pv-b-3", "100Gi", "region-b", "zone-b"),
        ],
        None,
        [None, None, None, None, BIND_CONFLICT, BIND_CONFLICT],
        id="zonal-volumes-with-close-capacity-are-preferred-capacity-ignored-without-the-gate",
    ),
    # Beyond upstream's table: the other PreFilter outcomes and the provisioning paths.
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).terminating().obj()],
        [],
        unresolvable('persistentvolumeclaim "pvc-a" is being deleted'),
        None,
        id="pvc-being-deleted",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class("gone").obj()],
        [],
        unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
        None,
        id="missing-storage-class-counts-as-immediate",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").obj()],
        [],
        unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
        None,
        id="claim-without-class-counts-as-immediate",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).volume_name("pv-a").obj()],
        [wait_pv("pv-a")],
        unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
        None,
        id="pre-bound-claim-waits-for-the-pv-controller",
    ),
    pytest.param(
        make_pod("pod-a").ephemeral_volume("scratch").obj(),
        [node("node-a")],
        [],
        [],
        unresolvable('waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-scratch"'),
        None,
        id="ephemeral-claim-not-created-yet",
    ),
    pytest.param(
        make_pod("pod-a").uid("pod-uid").ephemeral_volume("scratch").obj(),
        [node("node-a")],
        [make_pvc("pod-a-scratch").storage_class(WAIT_SC.name).owner("Pod", "pod-a", uid="other").obj()],
        [],
        unresolvable("PVC default/pod-a-scratch was not created for pod default/pod-a (pod is not owner)"),
        None,
        id="ephemeral-claim-of-another-pod",
    ),
    pytest.param(
        make_pod("pod-a").uid("pod-uid").ephemeral_volume("scratch").obj(),
        [node("node-a", kubernetes_io__hostname="node-a"), node("node-b", kubernetes_io__hostname="node-b")],
        [make_pvc("pod-a-scratch").storage_class(WAIT_SC.name).owner("Pod", "pod-a", uid="pod-uid").obj()],
        [wait_pv("pv-b", kubernetes_io__hostname=["node-b"])],
        None,
        [BIND_CONFLICT, None],
        id="ephemeral-claim-owned-by-the-pod-matches-a-volume",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a", zone="z1"), node("node-b", zone="z2")],
        [make_pvc("pvc-a").storage_class("csi-wait").obj()],
        [],
        None,
        [None, BIND_CONFLICT],
        id="provisioned-where-allowed-topologies-permit",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a"), node("node-b")],
        [make_pvc("pvc-a").storage_class("csi-wait").selected_node("node-b").obj()],
        [],
        None,
        [BIND_CONFLICT, BIND_CONFLICT],
        id="selected-node-elsewhere-and-topology-excludes-it",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a", zone="z1"), node("node-b", zone="z1")],
        [make_pvc("pvc-a").storage_class("csi-wait").selected_node("node-b").obj()],
        [],
        None,
        [BIND_CONFLICT, None],
        id="selected-node-only",
    ),
    pytest.param(
        pod_with("pvc-a"),
        [node("node-a")],
        [make_pvc("pvc-a").storage_class(WAIT_SC.name).request("5Gi").access_modes("ReadWriteMany").obj()],
        [
            wait_pv("pv-small", "1Gi"),
            make_pv("pv-rwo").storage_class(WAIT_SC.name).available().capacity("10Gi").obj(),
            make_pv("pv-pending").storage_class(WAIT_SC.name).capacity("10Gi").access_modes("ReadWriteMany").obj(),
            make_pv("pv-block")
            .storage_class(WAIT_SC.name)
            .available()
            .capacity("10Gi")
            .access_modes("ReadWriteMany")
            .volume_mode("Block")
            .obj(),
            make_pv("pv-taken")
            .storage_class(WAIT_SC.name)
            .available()
            .capacity("10Gi")
            .access_modes("ReadWriteMany")
            .claim_ref("other")
            .obj(),
        ],
        None,
        [BIND_CONFLICT],
        id="no-volume-fits-size-access-mode-phase-mode-and-claim-ref",
    ),
]

CSI_WAIT_SC = (
    make_storage_class("csi-wait")
    .provisioner("csi.example.com")
    .wait_for_first_consumer()
    .allowed_topology({"zone": ["z1"]})
    .obj()
)


@pytest.mark.parametrize(("pod", "nodes", "pvcs", "pvs", "want_pre_filter", "want_filter"), CASES)
def test_volume_binding(
    pod: Pod,
    nodes: list[Node],
    pvcs: list[PersistentVolumeClaim],
    pvs: list[PersistentVolume],
    want_pre_filter: Status | None,
    want_filter: list[Status | None] | None,
) -> None:
    e = env(nodes, pvcs, pvs, classes=(IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC, CSI_WAIT_SC))
    state = CycleState()
    info = PodInfo(pod)
    assert e.plugin.pre_filter(state, info, e.snapshot.node_infos) == want_pre_filter
    if want_filter is None:
        return
    # The snapshot interleaves zones, so compare by node name (the table lists nodes as upstream does).
    names = [n.metadata.name for n in nodes]
    order = [info.name for info in e.snapshot.node_infos]
    want = dict(zip(names, want_filter, strict=True))
    assert dict(zip(order, filter_nodes(e.plugin, state, info, e.snapshot), strict=True)) == want
    # The batch form on a fresh state answers the same.
    batch_state = CycleState()
    e.plugin.pre_filter(batch_state, info, e.snapshot.node_infos)
    assert dict(zip(order, filter_nodes_batch(e.plugin, batch_state, info, e.snapshot), strict=True)) == want


def test_prefilter_skips_pods_whose_volumes_use_no_claim() -> None:
    pod = make_pod().volume({"name": "cache", "emptyDir": {}}).obj()
    e = env([node("n")])
    state = CycleState()
    assert e.plugin.pre_filter(state, PodInfo(pod), ()) == Status(Code.SKIP)
    # Reserve and PreBind run for every pod and find nothing to do.
    assert e.plugin.reserve(state, PodInfo(pod), "n") is None
    assert asyncio.run(e.plugin.pre_bind(state, PodInfo(pod), "n")) is None
    assert e.client.volume_bindings == []


def test_filter_without_prefilter_state_is_an_error() -> None:
    e = env([node("n")])
    assert e.plugin.filter(CycleState(), PodInfo(pod_with("c")), e.snapshot.node_infos[0]) == Status(
        Code.ERROR, "not found"
    )


def test_smallest_volume_is_chosen_and_reserve_assumes_it() -> None:
    nodes = [node("node-a", kubernetes_io__hostname="node-a")]
    pvs = [local_pv("pv-big", WAIT_SC.name, "200Gi", "node-a"), local_pv("pv-fit", WAIT_SC.name, "60Gi", "node-a")]
    claim = make_pvc("pvc-a").uid("claim-uid").storage_class(WAIT_SC.name).request("50Gi").obj()
    e = env(nodes, [claim], pvs)
    state, info = CycleState(), PodInfo(pod_with("pvc-a"))
    assert e.plugin.pre_filter(state, info, e.snapshot.node_infos) is None
    assert filter_nodes(e.plugin, state, info, e.snapshot) == [None]
    assert e.plugin.reserve(state, info, "node-a") is None
    assumed = e.plugin.binder.assumed_pvs["pv-fit"]
    assert assumed.claim_ref is not None and (assumed.claim_ref.name, assumed.claim_ref.uid) == ("pvc-a", "claim-uid")
    assert assumed.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"

    # A second pod's claim of the same size now gets the bigger volume: the assumed one is taken.
    other = make_pvc("pvc-b").storage_class(WAIT_SC.name).request("50Gi").obj()
    e.stores.persistent_volume_claims.add(other)
    state_b, info_b = CycleState(), PodInfo(make_pod("pod-b").pvc("pvc-b").obj())
    assert e.plugin.pre_filter(state_b, info_b, e.snapshot.node_infos) is None
    assert filter_nodes(e.plugin, state_b, info_b, e.snapshot) == [None]
    assert e.plugin.reserve(state_b, info_b, "node-a") is None
    assert set(e.plugin.binder.assumed_pvs) == {"pv-fit", "pv-big"}

    # Unreserve gives the first pod's volume back.
    e.plugin.unreserve(state, info, "node-a")
    assert set(e.plugin.binder.assumed_pvs) == {"pv-big"}


def test_prebind_hands_bindings_and_provisions_to_the_client_and_forgets_them() -> None:
    nodes = [node("node-a", kubernetes_io__hostname="node-a", zone="z1")]
    pvcs = [
        make_pvc("static").storage_class(WAIT_SC.name).obj(),
        make_pvc("dynamic").storage_class(CSI_WAIT_SC.name).obj(),
    ]
    e = env(nodes, pvcs, [local_pv("pv-a", WAIT_SC.name, "1Gi", "node-a")], classes=(WAIT_SC, CSI_WAIT_SC))
    state, info = CycleState(), PodInfo(pod_with("static", "dynamic"))
    assert e.plugin.pre_filter(state, info, e.snapshot.node_infos) is None
    assert filter_nodes(e.plugin, state, info, e.snapshot) == [None]
    assert e.plugin.reserve(state, info, "node-a") is None
    assert e.plugin.binder.assumed_pvcs["default/dynamic"].selected_node == "node-a"
    assert asyncio.run(e.plugin.pre_bind(state, info, "node-a")) is None
    assert e.client.volume_bindings == [("default/pod-a", "node-a", [("pv-a", "default/static")], ["default/dynamic"])]
    assert not e.plugin.binder.assumed_pvs and not e.plugin.binder.assumed_pvcs


def test_prebind_failure_is_an_error_and_unreserve_reverts() -> None:
    client = RecordingClient(ApiError("live volume binding is not supported by kubesched yet"))
    nodes = [node("node-a", kubernetes_io__hostname="node-a")]
    pvcs = [make_pvc("pvc-a").storage_class(WAIT_SC.name).obj()]
    e = env(nodes, pvcs, [local_pv("pv-a", WAIT_SC.name, "1Gi", "node-a")], client=client)
    state, info = CycleState(), PodInfo(pod_with("pvc-a"))
    e.plugin.pre_filter(state, info, e.snapshot.node_infos)
    filter_nodes(e.plugin, state, info, e.snapshot)
    e.plugin.reserve(state, info, "node-a")
    status = asyncio.run(e.plugin.pre_bind(state, info, "node-a"))
    assert status is not None and status.code is Code.ERROR
    assert status.message == "binding volumes: live volume binding is not supported by kubesched yet"
    e.plugin.unreserve(state, info, "node-a")
    assert not e.plugin.binder.assumed_pvs


def test_all_bound_pod_needs_no_prebind() -> None:
    pvcs = [make_pvc("pvc-a").storage_class(WAIT_SC.name).bound_to("pv-a").obj()]
    e = env([node("n")], pvcs, [wait_pv("pv-a")])
    state, info = CycleState(), PodInfo(pod_with("pvc-a"))
    e.plugin.pre_filter(state, info, e.snapshot.node_infos)
    filter_nodes(e.plugin, state, info, e.snapshot)
    assert e.plugin.reserve(state, info, "n") is None
    assert asyncio.run(e.plugin.pre_bind(state, info, "n")) is None
    assert e.client.volume_bindings == []


def test_prescore_skips_without_the_capacity_scoring_gate() -> None:
    e = env([node("n")])
    assert e.plugin.pre_score(CycleState(), PodInfo(pod_with("c")), ()) == Status(Code.SKIP)


def test_assumption_gives_way_when_the_cluster_changes_the_volume() -> None:
    nodes = [node("node-a", kubernetes_io__hostname="node-a")]
    pv = local_pv("pv-a", WAIT_SC.name, "1Gi", "node-a")
    e = env(nodes, [make_pvc("pvc-a").storage_class(WAIT_SC.name).obj()], [pv])
    state, info = CycleState(), PodInfo(pod_with("pvc-a"))
    e.plugin.pre_filter(state, info, e.snapshot.node_infos)
    filter_nodes(e.plugin, state, info, e.snapshot)
    e.plugin.reserve(state, info, "node-a")
    assert "pv-a" in e.plugin.binder.assumed_pvs
    e.stores.persistent_volumes.update(local_pv("pv-a", WAIT_SC.name, "2Gi", "node-a"))
    got = e.plugin.binder.get_pv("pv-a")
    assert got is not None and got.claim_ref is None and got.capacity == 2 * 1024**3


@pytest.mark.parametrize(
    ("timeout", "errors"),
    [
        pytest.param(600, [], id="defaults"),
        pytest.param(0, [], id="zero-timeout"),
        pytest.param(
            -1,
            ["bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"],
            id="negative-timeout",
        ),
    ],
)
def test_args_validation(timeout: int, errors: list[str]) -> None:
    args = VolumeBindingArgs(bind_timeout_seconds=timeout)
    assert [str(e) for e in args.validate("")] == errors
    assert VolumeBindingArgs().bind_timeout_seconds == 600


def test_shape_is_forbidden_without_the_gate() -> None:
    from kubesched.plugins.volumebinding.args import UtilizationShapePoint

    args = VolumeBindingArgs(shape=(UtilizationShapePoint(utilization=0, score=0),))
    (error,) = args.validate("profiles[0].pluginConfig[0].args")
    assert error.path == "profiles[0].pluginConfig[0].args.shape"
    assert "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring" in str(error)


def test_config_reports_bad_args_with_their_field_paths() -> None:
    from kubesched.config.loader import load_config_dict
    from kubesched.errors import ValidationFailed
    from kubesched.plugins.registry import in_tree_registry

    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {
                        "name": "VolumeBinding",
                        "args": {"bindTimeoutSeconds": -5, "shape": [{"utilization": 0, "score": 0}]},
                    }
                ],
            }
        ],
    }
    with pytest.raises(ValidationFailed) as failure:
        load_config_dict(document, "test", in_tree_registry())
    text = str(failure.value)
    assert "profiles[0].pluginConfig[0].args.bindTimeoutSeconds: Invalid value: -5" in text
    assert "profiles[0].pluginConfig[0].args.shape: Invalid value:" in text

    # Defaults: 600 seconds, no shape.
    config = load_config_dict(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
        "test",
        in_tree_registry(),
    )
    args = config.profiles[0].plugin_args["VolumeBinding"]
    assert args == VolumeBindingArgs(bind_timeout_seconds=600, shape=None)
