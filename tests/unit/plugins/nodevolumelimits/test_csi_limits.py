"""NodeVolumeLimits against csi_test.go (TestCSILimits, TestCSILimitsQHint, TestCSILimitsAddedPVCQHint), per node
and in batch, plus the CSINode-update hint, csi-translation-lib handles, and a batch/per-node property test.

Upstream's fixtures are kept: for each driver D, claims ``csi-D-0`` … ``csi-D-3`` bound to same-named PVs with
CSI source D (an AWS EBS source for the in-tree plugin name, a hostPath for ``kubernetes.io/hostpath``),
``csi-4`` unbound in class ``csi-sc`` (provisioner: the first driver), ``csi-5`` without a class, ``csi-6`` in
``csi-sc`` bound to a missing PV; the node's CSINode lists every driver with limit ``max_vols`` and has AWS EBS
migration on. Left out: the two VolumeAttachment cases (kubesched has no VolumeAttachment lister, see the
plugin's docstring). Upstream's fake lister says ``persistentvolumeclaims "x" not found``; a real scheduler
(informer lister) says ``persistentvolumeclaim "x" not found``, which is what we expect here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.api.storage import CSINode, PersistentVolumeClaim
from kubesched.api.volumes import AWS_EBS_PLUGIN, InTreeSource, TranslationError, translate_in_tree
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.listers import ListerStores
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.nodevolumelimits import CSILimits
from kubesched.plugins.nodevolumelimits.csi import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch, make_cluster, pre_filter
from kubesched.testing.storage_builders import make_csi_node, pv_object, pvc_object, storage_class_object

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
HOSTPATH = "kubernetes.io/hostpath"
SC_NAME = "csi-sc"
NODE = "node-for-max-pd-test-1"

SKIP = Status(Code.SKIP)
EXCEEDED = Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)

_counter = iter(range(10_000))


def claims_pod(*claims: str, name: str = "", namespace: str = "default") -> Pod:
    """upstream st.MakePod().PVC(...): pods there are nameless; ours get unique names for the cache."""
    builder = make_pod(name or f"p{next(_counter)}").namespace(namespace)
    for i, claim in enumerate(claims):
        builder.pvc(claim, name=f"v{i}")
    return builder.obj()


def volumes_pod(*volumes: Mapping[str, Any], name: str = "", namespace: str = "default", uid: str = "") -> Pod:
    builder = make_pod(name or f"p{next(_counter)}").namespace(namespace)
    if uid:
        builder.uid(uid)
    for i, volume in enumerate(volumes):
        builder.volume({"name": f"v{i}", **volume})
    return builder.obj()


def placed(pod: Pod, node: str = NODE) -> Pod:
    raw_builder = make_pod(pod.metadata.name).namespace(pod.metadata.namespace).uid(pod.metadata.uid)
    for volume in pod.spec.volumes:
        raw_builder.volume(volume)
    return raw_builder.node_name(node).obj()


CONFIGMAP: dict[str, Any] = {"configMap": {"name": "cm"}}
SECRET: dict[str, Any] = {"secret": {"secretName": "s"}}

running_pod = claims_pod("csi-ebs.csi.aws.com-3")
pending_volume_pod = claims_pod("csi-4")
unbound_pvc_pod2 = claims_pod("csi-4")
missing_pv_pod = claims_pod("csi-6")
no_sc_pvc_pod = claims_pod("csi-5")
gce_two_vol_pod = claims_pod("csi-pd.csi.storage.gke.io-1", "csi-pd.csi.storage.gke.io-2")
in_tree_one_vol_pod = claims_pod("csi-kubernetes.io/aws-ebs-0")
in_tree_two_vol_pod = claims_pod("csi-kubernetes.io/aws-ebs-1", "csi-kubernetes.io/aws-ebs-2")
csi_ebs_one_vol_pod = claims_pod("csi-ebs.csi.aws.com-0")
csi_ebs_two_vol_pod = claims_pod("csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2")
in_tree_non_migratable_one_vol_pod = claims_pod("csi-kubernetes.io/hostpath-0")
ephemeral_volume_pod = make_pod("abc").namespace("test").uid("12345").volume({"name": "xyz", "ephemeral": {}}).obj()
ephemeral_claim = pvc_object("abc-xyz", namespace="test", storage_class=SC_NAME, owner_pod=("abc", "12345"))
conflicting_claim = pvc_object("abc-xyz", namespace="test", storage_class=SC_NAME)
ephemeral_two_volume_pod = (
    make_pod("abc")
    .namespace("test")
    .uid("12345II")
    .volume({"name": "x", "ephemeral": {}})
    .volume({"name": "y", "ephemeral": {}})
    .obj()
)
ephemeral_claim_x = pvc_object("abc-x", namespace="test", storage_class=SC_NAME, owner_pod=("abc", "12345II"))
ephemeral_claim_y = pvc_object("abc-y", namespace="test", storage_class=SC_NAME, owner_pod=("abc", "12345II"))
in_tree_inline_vol_pod = volumes_pod({"awsElasticBlockStore": {"volumeID": "aws-inline1"}})
in_tree_inline_vol_pod_with_same_csi_volume_id = volumes_pod(
    {"awsElasticBlockStore": {"volumeID": "csi-ebs.csi.aws.com-1"}}
)
only_configmap_and_secret_vol_pod = volumes_pod(CONFIGMAP, SECRET)
pvc_pod_with_configmap_and_secret = volumes_pod(
    CONFIGMAP, SECRET, {"persistentVolumeClaim": {"claimName": "csi-ebs.csi.aws.com-0"}}
)
ephemeral_pod_with_configmap_and_secret = (
    make_pod("abc")
    .namespace("test")
    .volume({"name": "c", **CONFIGMAP})
    .volume({"name": "s", **SECRET})
    .volume({"name": "xyz", "ephemeral": {}})
    .obj()
)
inline_migratable_pod_with_configmap_and_secret = volumes_pod(
    CONFIGMAP, SECRET, {"awsElasticBlockStore": {"volumeID": "aws-inline1"}}
)


def fake_storage(
    drivers: Sequence[str], extra_claims: Sequence[PersistentVolumeClaim] = (), csi_node: CSINode | None = None
) -> ListerStores:
    """upstream getFakeCSIPVLister / getFakeCSIPVCLister / getFakeCSIStorageClassLister / getFakeCSINodeLister."""
    stores = ListerStores()
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            if driver == AWS_EBS_PLUGIN:
                pv = pv_object(name, source={"awsElasticBlockStore": {"volumeID": name}})
            elif driver == HOSTPATH:
                pv = pv_object(name, source={"hostPath": {"path": "/tmp"}})
            else:
                pv = pv_object(name, csi=(driver, name))
            stores.persistent_volumes.add(pv)
            stores.persistent_volume_claims.add(pvc_object(name, volume_name=name))
    stores.persistent_volume_claims.add(pvc_object("csi-4", storage_class=SC_NAME))
    stores.persistent_volume_claims.add(pvc_object("csi-5"))
    stores.persistent_volume_claims.add(pvc_object("csi-6", storage_class=SC_NAME, volume_name="missing-in-action"))
    for claim in extra_claims:
        stores.persistent_volume_claims.add(claim)
    stores.storage_classes.add(storage_class_object(SC_NAME, drivers[0]))
    if csi_node is not None:
        stores.csi_nodes.add(csi_node)
    return stores


def node_csi(limit_source: str, max_vols: int, drivers: Sequence[str]) -> CSINode | None:
    """upstream getNodeWithPodAndVolumeLimits + enableMigrationOnNode(AWS EBS)."""
    if limit_source == "csinode":
        return make_csi_node(NODE, dict.fromkeys(drivers, max_vols), migrated_plugins=[AWS_EBS_PLUGIN])
    if limit_source == "csinode-with-no-limit":
        return make_csi_node(NODE, dict.fromkeys(drivers, None), migrated_plugins=[AWS_EBS_PLUGIN])
    if limit_source == "no-csi-driver":
        return make_csi_node(NODE, {}, migrated_plugins=[AWS_EBS_PLUGIN])
    return None


def case(
    test_id: str,
    new_pod: Pod,
    existing: Sequence[Pod] = (),
    *,
    max_vols: int = 0,
    drivers: Sequence[str] = (EBS,),
    limit_source: str = "",
    extra_claims: Sequence[PersistentVolumeClaim] = (),
    want: Status | None = None,
    want_pre: Status | None = None,
) -> Any:
    return pytest.param(new_pod, existing, max_vols, drivers, limit_source, extra_claims, want, want_pre, id=test_id)


EBS_AND_PLUGIN = (AWS_EBS_PLUGIN, EBS)


@pytest.mark.parametrize(
    ("new_pod", "existing", "max_vols", "drivers", "limit_source", "extra_claims", "want", "want_pre"),
    [
        case(
            "fits-when-node-volume-limit-ge-new-pods-csi-volume",
            csi_ebs_one_vol_pod,
            [running_pod, csi_ebs_two_vol_pod],
            max_vols=4,
            limit_source="csinode",
        ),
        case(
            "doesnt-when-node-volume-limit-le-pods-csi-volume",
            csi_ebs_one_vol_pod,
            [running_pod, csi_ebs_two_vol_pod],
            max_vols=2,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "should-when-driver-does-not-support-volume-limits",
            csi_ebs_one_vol_pod,
            [running_pod, csi_ebs_two_vol_pod],
            max_vols=2,
            limit_source="csinode-with-no-limit",
        ),
        case(
            "count-pending-pvcs-towards-volume-limit-le-pods-csi-volume",
            csi_ebs_one_vol_pod,
            [pending_volume_pod, csi_ebs_two_vol_pod],
            max_vols=2,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "count-multiple-pending-pvcs-towards-volume-limit-ge-pods-csi-volume",
            csi_ebs_one_vol_pod,
            [pending_volume_pod, unbound_pvc_pod2, csi_ebs_two_vol_pod],
            max_vols=4,
            limit_source="csinode",
        ),
        case(
            "should-count-pvcs-with-invalid-pv-name-but-valid-sc",
            csi_ebs_one_vol_pod,
            [missing_pv_pod, csi_ebs_two_vol_pod],
            max_vols=2,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "dont-count-pvcs-with-missing-sc-towards-volume-limit",
            csi_ebs_one_vol_pod,
            [running_pod, no_sc_pvc_pod],
            max_vols=2,
            limit_source="csinode",
        ),
        case(
            "count-pvcs-with-the-same-type-towards-volume-limit",
            csi_ebs_one_vol_pod,
            [gce_two_vol_pod, csi_ebs_two_vol_pod],
            max_vols=2,
            drivers=(EBS, GCE),
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "dont-count-pvcs-with-different-type-towards-volume-limit",
            gce_two_vol_pod,
            [csi_ebs_two_vol_pod, running_pod],
            max_vols=2,
            drivers=(EBS, GCE),
            limit_source="csinode",
        ),
        case(
            "should-count-in-tree-volumes-if-migration-is-enabled",
            in_tree_one_vol_pod,
            [in_tree_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case("nil-csi-node", in_tree_inline_vol_pod, [in_tree_two_vol_pod], drivers=EBS_AND_PLUGIN),
        case(
            "should-count-unbound-in-tree-volumes-if-migration-is-enabled",
            pending_volume_pod,
            [in_tree_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "should-not-limit-pod-if-volume-used-does-not-report-limits",
            in_tree_one_vol_pod,
            [in_tree_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode-with-no-limit",
        ),
        case(
            "should-not-count-non-migratable-in-tree-volumes",
            in_tree_non_migratable_one_vol_pod,
            [csi_ebs_two_vol_pod],
            max_vols=2,
            drivers=(HOSTPATH, EBS),
            limit_source="csinode",
        ),
        case(
            "should-count-in-tree-inline-volumes-if-migration-is-enabled",
            in_tree_inline_vol_pod,
            [in_tree_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "should-count-in-tree-and-csi-volumes-if-migration-is-enabled-when-scheduling-in-tree-volumes",
            in_tree_one_vol_pod,
            [csi_ebs_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "should-count-in-tree-inline-and-csi-volumes-if-migration-is-enabled",
            in_tree_inline_vol_pod,
            [csi_ebs_two_vol_pod, in_tree_one_vol_pod],
            max_vols=3,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "should-not-count-in-tree-inline-and-csi-volumes-with-the-same-volume-id",
            in_tree_inline_vol_pod_with_same_csi_volume_id,
            [csi_ebs_two_vol_pod, in_tree_one_vol_pod],
            max_vols=3,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
        ),
        case(
            "should-count-in-tree-and-csi-volumes-if-migration-is-enabled-when-scheduling-csi-volumes",
            csi_ebs_one_vol_pod,
            [in_tree_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "ephemeral-volume-missing",
            ephemeral_volume_pod,
            limit_source="csinode-with-no-limit",
            want=Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
            ),
        ),
        case(
            "ephemeral-volume-not-owned",
            ephemeral_volume_pod,
            limit_source="csinode-with-no-limit",
            extra_claims=[conflicting_claim],
            want=Status(Code.ERROR, "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"),
        ),
        case(
            "ephemeral-volume-unbound",
            ephemeral_volume_pod,
            limit_source="csinode-with-no-limit",
            extra_claims=[ephemeral_claim],
        ),
        case(
            "ephemeral-doesnt-when-node-volume-limit-le-pods-csi-volume",
            ephemeral_volume_pod,
            [running_pod, csi_ebs_two_vol_pod],
            max_vols=2,
            limit_source="csinode",
            extra_claims=[ephemeral_claim],
            want=EXCEEDED,
        ),
        case(
            "ephemeral-doesnt-when-node-volume-limit-le-pods-ephemeral-csi-volume",
            csi_ebs_one_vol_pod,
            [running_pod, ephemeral_two_volume_pod],
            max_vols=2,
            limit_source="csinode",
            extra_claims=[ephemeral_claim_x, ephemeral_claim_y],
            want=EXCEEDED,
        ),
        case(
            "persistent-doesnt-when-node-volume-limit-le-pods-ephemeral-csi-volume-plus-persistent-volume",
            csi_ebs_one_vol_pod,
            [running_pod, ephemeral_volume_pod, csi_ebs_two_vol_pod],
            max_vols=3,
            limit_source="csinode",
            extra_claims=[ephemeral_claim],
            want=EXCEEDED,
        ),
        case(
            "persistent-okay-when-node-volume-limit-gt-pods-ephemeral-csi-volume-plus-persistent-volume",
            csi_ebs_one_vol_pod,
            [running_pod, ephemeral_volume_pod, csi_ebs_two_vol_pod],
            max_vols=5,
            limit_source="csinode",
            extra_claims=[ephemeral_claim],
        ),
        case(
            "skip-filter-when-the-pod-only-uses-secrets-and-configmaps",
            only_configmap_and_secret_vol_pod,
            max_vols=2,
            limit_source="csinode",
            want_pre=SKIP,
        ),
        case(
            "dont-skip-filter-when-the-pod-has-pvcs",
            pvc_pod_with_configmap_and_secret,
            max_vols=2,
            limit_source="csinode",
        ),
        case(
            "dont-skip-filter-when-the-pod-has-ephemeral-volumes",
            ephemeral_pod_with_configmap_and_secret,
            limit_source="csinode-with-no-limit",
            want=Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
            ),
        ),
        case(
            "dont-skip-filter-when-the-pod-has-inline-migratable-volumes",
            inline_migratable_pod_with_configmap_and_secret,
            [in_tree_two_vol_pod],
            max_vols=2,
            drivers=EBS_AND_PLUGIN,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        # Beyond upstream's table.
        case(
            "limit-zero-rejects-any-volume-of-the-driver",
            csi_ebs_one_vol_pod,
            max_vols=0,
            limit_source="csinode",
            want=EXCEEDED,
        ),
        case(
            "a-volume-already-on-the-node-is-not-counted-twice",
            csi_ebs_one_vol_pod,
            [claims_pod("csi-ebs.csi.aws.com-0"), csi_ebs_two_vol_pod],
            max_vols=3,
            limit_source="csinode",
        ),
        case(
            "no-csinode-drivers-means-no-limit",
            csi_ebs_one_vol_pod,
            [running_pod, csi_ebs_two_vol_pod],
            limit_source="no-csi-driver",
        ),
        case(
            "a-placed-pods-missing-claim-is-not-counted",
            csi_ebs_one_vol_pod,
            [claims_pod("gone"), running_pod],
            max_vols=2,
            limit_source="csinode",
        ),
    ],
)
def test_csi_limits(
    new_pod: Pod,
    existing: Sequence[Pod],
    max_vols: int,
    drivers: Sequence[str],
    limit_source: str,
    extra_claims: Sequence[PersistentVolumeClaim],
    want: Status | None,
    want_pre: Status | None,
) -> None:
    stores = fake_storage(drivers, extra_claims, node_csi(limit_source, max_vols, drivers))
    cache, snapshot = make_cluster([make_node(NODE).obj()], [placed(p) for p in existing])
    plugin = CSILimits(None, PluginHandle(cache, listers=stores.listers()))
    state = CycleState()
    pod = PodInfo(new_pod)
    assert pre_filter(plugin, state, pod, snapshot) == want_pre
    if want_pre is None:
        assert filter_nodes(plugin, state, pod, snapshot) == [want]
        assert filter_nodes_batch(plugin, state, pod, snapshot) == [want]
        # Filter without the PreFilter state (PreFilter disabled) answers the same.
        assert plugin.filter(CycleState(), pod, snapshot.node_infos[0]) == want


def test_portworx_needs_the_migrated_plugins_annotation() -> None:
    inline = volumes_pod({"portworxVolume": {"volumeID": "px-1"}})
    other = placed(volumes_pod({"portworxVolume": {"volumeID": "px-2"}}))
    for annotated, want in ((False, None), (True, EXCEEDED)):
        stores = ListerStores()
        plugins = ["kubernetes.io/portworx-volume"] if annotated else []
        stores.csi_nodes.add(make_csi_node(NODE, {"pxd.portworx.com": 1}, migrated_plugins=plugins))
        cache, snapshot = make_cluster([make_node(NODE).obj()], [other])
        plugin = CSILimits(None, PluginHandle(cache, listers=stores.listers()))
        state = CycleState()
        assert pre_filter(plugin, state, PodInfo(inline), snapshot) is None
        assert plugin.filter(state, PodInfo(inline), snapshot.node_infos[0]) == want


def test_in_tree_storage_class_provisioner_counts_under_its_csi_driver() -> None:
    stores = ListerStores()
    stores.storage_classes.add(storage_class_object("gp2", AWS_EBS_PLUGIN))
    stores.persistent_volume_claims.add(pvc_object("unbound", storage_class="gp2"))
    stores.persistent_volume_claims.add(pvc_object("bound", volume_name="pv-1"))
    stores.persistent_volumes.add(pv_object("pv-1", csi=(EBS, "vol-1")))
    stores.csi_nodes.add(make_csi_node(NODE, {EBS: 1}))
    cache, snapshot = make_cluster([make_node(NODE).obj()], [placed(claims_pod("bound"))])
    plugin = CSILimits(None, PluginHandle(cache, listers=stores.listers()))
    state = CycleState()
    pod = PodInfo(claims_pod("unbound"))
    assert pre_filter(plugin, state, pod, snapshot) is None
    assert plugin.filter(state, pod, snapshot.node_infos[0]) == EXCEEDED


def test_inline_volume_that_cannot_be_translated_is_an_error_where_migration_is_on() -> None:
    stores = ListerStores()
    stores.csi_nodes.add(make_csi_node(NODE, {EBS: 5}))
    cache, snapshot = make_cluster([make_node(NODE).obj()])
    plugin = CSILimits(None, PluginHandle(cache, listers=stores.listers()))
    pod = PodInfo(volumes_pod({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/not-a-volume"}}))
    state = CycleState()
    assert pre_filter(plugin, state, pod, snapshot) is None
    status = plugin.filter(state, pod, snapshot.node_infos[0])
    assert status == Status(
        Code.ERROR,
        "converting volume(v0) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://us-east-1a/not-a-volume)",
    )


@pytest.mark.parametrize(
    ("source", "labels", "want"),
    [
        pytest.param(InTreeSource(AWS_EBS_PLUGIN, "vol-1"), None, (EBS, "vol-1"), id="ebs-bare-id"),
        pytest.param(InTreeSource(AWS_EBS_PLUGIN, "aws://us-east-1a/vol-1"), None, (EBS, "vol-1"), id="ebs-url"),
        pytest.param(
            InTreeSource("kubernetes.io/gce-pd", "disk"),
            None,
            (GCE, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk"),
            id="gce-inline",
        ),
        pytest.param(
            InTreeSource("kubernetes.io/gce-pd", "disk"),
            {"topology.kubernetes.io/zone": "us-central1-a"},
            (GCE, "projects/UNSPECIFIED/zones/us-central1-a/disks/disk"),
            id="gce-zonal-pv",
        ),
        pytest.param(
            InTreeSource("kubernetes.io/gce-pd", "disk"),
            {"failure-domain.beta.kubernetes.io/zone": "us-central1-a__us-central1-b"},
            (GCE, "projects/UNSPECIFIED/regions/us-central1/disks/disk"),
            id="gce-regional-pv",
        ),
        pytest.param(
            InTreeSource("kubernetes.io/azure-disk", "uri", kind="Managed"),
            None,
            ("disk.csi.azure.com", "uri"),
            id="azure-managed",
        ),
        pytest.param(
            InTreeSource("kubernetes.io/cinder", "c-1"), None, ("cinder.csi.openstack.org", "c-1"), id="cinder"
        ),
    ],
)
def test_translate_in_tree(source: InTreeSource, labels: dict[str, str] | None, want: tuple[str, str]) -> None:
    assert translate_in_tree(source, labels) == want


def test_translate_azure_shared_disk_fails() -> None:
    with pytest.raises(TranslationError, match=r"kind\(Shared\) is not supported in csi migration"):
        translate_in_tree(InTreeSource("kubernetes.io/azure-disk", "uri", kind="Shared"))


# ---- queueing hints ---------------------------------------------------------------------------------


def plugin_alone() -> CSILimits:
    return CSILimits(None, PluginHandle())


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        pytest.param(placed(claims_pod("placeholder")), QueueingHint.QUEUE, id="deleted-pod-has-a-pvc"),
        pytest.param(
            placed(volumes_pod({"awsElasticBlockStore": {}})),
            QueueingHint.QUEUE,
            id="deleted-pod-has-an-inline-migratable-volume",
        ),
        pytest.param(placed(volumes_pod()), QueueingHint.SKIP, id="deleted-pod-has-no-volume"),
        pytest.param(claims_pod("csi-ebs.csi.aws.com-0"), QueueingHint.SKIP, id="deleted-pod-was-not-scheduled"),
        pytest.param(placed(volumes_pod(CONFIGMAP)), QueueingHint.SKIP, id="deleted-pod-has-only-a-configmap"),
    ],
)
def test_is_schedulable_after_pod_deleted(deleted: Pod, want: QueueingHint) -> None:
    pod = claims_pod("csi-ebs.csi.aws.com-2")
    assert plugin_alone().is_schedulable_after_pod_deleted(pod, deleted, None) is want


@pytest.mark.parametrize(
    ("pod", "added", "want"),
    [
        pytest.param(
            volumes_pod(namespace="ns1"), pvc_object("pvc", namespace="ns2"), QueueingHint.SKIP, id="other-ns"
        ),
        pytest.param(
            claims_pod("pvc1", namespace="ns1"), pvc_object("pvc1", namespace="ns1"), QueueingHint.QUEUE, id="same-pvc"
        ),
        pytest.param(
            make_pod("pod1").namespace("ns1").volume({"name": "ephemeral", "ephemeral": {}}).obj(),
            pvc_object("pod1-ephemeral", namespace="ns1"),
            QueueingHint.QUEUE,
            id="ephemeral-volume-claim",
        ),
        pytest.param(
            claims_pod("pvc1", namespace="ns1"), pvc_object("pvc2", namespace="ns1"), QueueingHint.SKIP, id="other-pvc"
        ),
        pytest.param(volumes_pod(namespace="ns1"), pvc_object("pvc2", namespace="ns1"), QueueingHint.SKIP, id="no-pvc"),
    ],
)
def test_is_schedulable_after_pvc_added(pod: Pod, added: PersistentVolumeClaim, want: QueueingHint) -> None:
    assert plugin_alone().is_schedulable_after_pvc_added(pod, None, added) is want


@pytest.mark.parametrize(
    ("before", "after", "want"),
    [
        pytest.param({EBS: 1}, {EBS: 2}, QueueingHint.QUEUE, id="limit-raised"),
        pytest.param({EBS: 2}, {EBS: 1}, QueueingHint.SKIP, id="limit-lowered"),
        pytest.param({EBS: 2}, {EBS: 2}, QueueingHint.SKIP, id="unchanged"),
        pytest.param({}, {EBS: 1}, QueueingHint.QUEUE, id="driver-added-with-a-limit"),
        pytest.param({EBS: None}, {EBS: 3}, QueueingHint.QUEUE, id="limit-set-where-there-was-none"),
        pytest.param({EBS: 3}, {EBS: None}, QueueingHint.SKIP, id="limit-removed-reads-as-zero"),
        pytest.param({EBS: 1, GCE: 1}, {EBS: 1, GCE: 4}, QueueingHint.QUEUE, id="other-driver-raised"),
    ],
)
def test_is_schedulable_after_csi_node_updated(
    before: dict[str, int | None], after: dict[str, int | None], want: QueueingHint
) -> None:
    pod = claims_pod("x")
    old, new = make_csi_node(NODE, before), make_csi_node(NODE, after)
    assert plugin_alone().is_schedulable_after_csi_node_updated(pod, old, new) is want


def test_events_to_register() -> None:
    labels = [(e.event.label, e.hint is not None) for e in plugin_alone().events_to_register()]
    assert labels == [
        ("CSINodeAdd", False),
        ("CSINodeUpdate", True),
        ("PodDelete", True),
        ("PersistentVolumeClaimAdd", True),
    ]


# ---- batch == per node ------------------------------------------------------------------------------

_CLAIMS = ["csi-ebs.csi.aws.com-0", "csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2", "csi-4", "csi-6", "gone"]


@settings(max_examples=60, deadline=None)
@given(
    mine=st.lists(st.sampled_from(_CLAIMS[:5]), min_size=1, max_size=3),
    others=st.lists(st.tuples(st.integers(0, 3), st.lists(st.sampled_from(_CLAIMS), max_size=3)), max_size=6),
    limits=st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=4, max_size=4),
    with_csi_node=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_batch_equals_per_node(
    mine: list[str], others: list[tuple[int, list[str]]], limits: list[int | None], with_csi_node: list[bool]
) -> None:
    stores = fake_storage((EBS,))
    for i, (limit, present) in enumerate(zip(limits, with_csi_node, strict=True)):
        if present:
            stores.csi_nodes.add(make_csi_node(f"n{i}", {EBS: limit}))
    existing = [placed(claims_pod(*claims, name=f"e{j}"), f"n{node}") for j, (node, claims) in enumerate(others)]
    cache, snapshot = make_cluster([make_node(f"n{i}").obj() for i in range(4)], existing)
    plugin = CSILimits(None, PluginHandle(cache, listers=stores.listers()))
    pod = PodInfo(claims_pod(*mine, name="p"))
    state = CycleState()
    assert pre_filter(plugin, state, pod, snapshot) is None
    assert filter_nodes_batch(plugin, state, pod, snapshot) == filter_nodes(plugin, state, pod, snapshot)
