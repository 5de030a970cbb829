"""VolumeZone against volume_zone_test.go: TestSingleZone, TestMultiZone, TestWithBinding and the hint tests
(TestIsSchedulableAfterPersistentVolumeClaimAdded, ...StorageClassAdded, ...PersistentVolumeChange), per node
and in batch.

Upstream's tables read a fake lister whose not-found text is ``storageclasses.storage.k8s.io "x" not found``;
the informer listers kube-scheduler runs with say ``storageclass.storage.k8s.io "x" not found``, which is what
kubesched reports. Upstream's claims there have no access modes or size; ours get the builders' valid
defaults, which VolumeZone does not read. Upstream's "Class_Immediate" has no binding mode at all (its
``VolumeBindingMode not set`` row); the API server always defaults one, so that row becomes an Immediate
class, rejected as ``PersistentVolume had no name``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kubesched.api.objects import Node, Pod
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.listers import ListerStores
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.volumezone import VolumeZone
from kubesched.plugins.volumezone.volume_zone import (
    BETA_REGION,
    BETA_ZONE,
    ERR_NO_PV_NAME,
    ERR_NO_PV_NO_CLASS,
    ERR_REASON_CONFLICT,
    REGION,
    ZONE,
)
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch, make_cluster
from kubesched.testing.storage_builders import make_pv, make_pvc, make_storage_class

CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
SKIP = Status(Code.SKIP)


def pv(name: str, **labels: str) -> PersistentVolume:
    builder = make_pv(name)
    for key, value in labels.items():
        builder.label(key, value)
    return builder.obj()


def labelled(name: str, labels: Mapping[str, str]) -> PersistentVolume:
    builder = make_pv(name)
    for key, value in labels.items():
        builder.label(key, value)
    return builder.obj()


def claim(name: str, volume: str) -> PersistentVolumeClaim:
    return make_pvc(name).volume_name(volume).obj()


def pod_with(claim_name: str) -> Pod:
    return make_pod("pod_1").pvc(claim_name).obj()


def host(labels: Mapping[str, str]) -> Node:
    return make_node("host1").labels(labels).obj()


def plugin(
    pvs: Sequence[PersistentVolume], pvcs: Sequence[PersistentVolumeClaim], classes: Sequence[StorageClass] = ()
) -> VolumeZone:
    stores = ListerStores()
    for volume in pvs:
        stores.persistent_volumes.add(volume)
    for c in pvcs:
        stores.persistent_volume_claims.add(c)
    for sc in classes:
        stores.storage_classes.add(sc)
    return VolumeZone(None, PluginHandle(listers=stores.listers()))


def run(p: VolumeZone, pod: Pod, node: Node) -> tuple[object, Status | None, Status | None]:
    _, snapshot = make_cluster([node])
    state = CycleState()
    info = PodInfo(pod)
    pre = p.pre_filter(state, info, snapshot.node_infos)
    (per_node,) = filter_nodes(p, state, info, snapshot)
    (batch,) = filter_nodes_batch(p, state, info, snapshot)
    return pre, per_node, batch


SINGLE_ZONE_PVS = [
    labelled("Vol_1", {BETA_ZONE: "us-west1-a"}),
    labelled("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    labelled("Vol_3", {BETA_REGION: "us-west1"}),
    labelled("Vol_Stable_1", {ZONE: "us-west1-a"}),
    labelled("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
    labelled("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
]
SINGLE_ZONE_PVCS = [
    claim("PVC_1", "Vol_1"),
    claim("PVC_2", "Vol_2"),
    claim("PVC_3", "Vol_3"),
    claim("PVC_4", "Vol_not_exist"),
    claim("PVC_Stable_1", "Vol_Stable_1"),
    claim("PVC_Stable_2", "Vol_Stable_2"),
    claim("PVC_Stable_3", "Vol_Stable_3"),
]


@pytest.mark.parametrize(
    ("pod", "node", "want_pre", "want_filter"),
    [
        pytest.param(make_pod("pod_1").obj(), host({BETA_ZONE: "us-west1-a"}), SKIP, None, id="pod-without-volume"),
        pytest.param(pod_with("PVC_1"), host({}), None, None, id="node-without-labels"),
        pytest.param(
            pod_with("PVC_1"),
            host({BETA_ZONE: "us-west1-a", "uselessLabel": "none"}),
            None,
            None,
            id="beta-zone-matched",
        ),
        pytest.param(
            pod_with("PVC_2"),
            host({BETA_REGION: "us-west1", "uselessLabel": "none"}),
            None,
            None,
            id="beta-region-matched",
        ),
        pytest.param(
            pod_with("PVC_2"),
            host({BETA_REGION: "no_us-west1", "uselessLabel": "none"}),
            None,
            CONFLICT,
            id="beta-region-does-not-match",
        ),
        pytest.param(
            pod_with("PVC_1"),
            host({BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            None,
            CONFLICT,
            id="beta-zone-does-not-match",
        ),
        pytest.param(
            pod_with("PVC_Stable_1"), host({ZONE: "us-west1-a", "uselessLabel": "none"}), None, None, id="zone-matched"
        ),
        pytest.param(
            pod_with("PVC_Stable_2"),
            host({REGION: "us-west1", "uselessLabel": "none"}),
            None,
            None,
            id="region-matched",
        ),
        pytest.param(
            pod_with("PVC_Stable_2"),
            host({REGION: "no_us-west1", "uselessLabel": "none"}),
            None,
            CONFLICT,
            id="region-does-not-match",
        ),
        pytest.param(
            pod_with("PVC_Stable_1"),
            host({ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            None,
            CONFLICT,
            id="zone-does-not-match",
        ),
        pytest.param(
            pod_with("PVC_Stable_3"), host({ZONE: "us-west1-a"}), None, CONFLICT, id="pv-zone-and-region-node-only-zone"
        ),
        pytest.param(pod_with("PVC_Stable_1"), host({BETA_ZONE: "us-west1-a"}), None, CONFLICT, id="pv-ga-node-beta"),
        pytest.param(pod_with("PVC_1"), host({ZONE: "us-west1-a"}), None, None, id="pv-beta-node-ga-matched"),
        pytest.param(pod_with("PVC_1"), host({ZONE: "us-west1-b"}), None, CONFLICT, id="pv-beta-node-ga-do-not-match"),
        pytest.param(
            pod_with("PVC_4"),
            host({ZONE: "us-west1-a"}),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolume "Vol_not_exist" not found'),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolume "Vol_not_exist" not found'),
            id="volume-not-found",
        ),
        pytest.param(
            pod_with("PVC_missing"),
            host({ZONE: "us-west1-a"}),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "PVC_missing" not found'),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "PVC_missing" not found'),
            id="claim-not-found",
        ),
    ],
)
def test_single_zone(pod: Pod, node: Node, want_pre: Status | None, want_filter: Status | None) -> None:
    pre, per_node, batch = run(plugin(SINGLE_ZONE_PVS, SINGLE_ZONE_PVCS), pod, node)
    assert pre == want_pre
    assert per_node == want_filter
    assert batch == want_filter


MULTI_ZONE_PVS = [
    labelled("Vol_1", {BETA_ZONE: "us-west1-a"}),
    labelled("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    labelled("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    labelled("Vol_Stable_1", {ZONE: "us-west1-a"}),
    labelled("Vol_Stable_2", {ZONE: "us-west1-c__us-west1-a"}),
    labelled("Vol_bad", {ZONE: "us-west1-c__"}),
]
MULTI_ZONE_PVCS = [
    claim("PVC_1", "Vol_1"),
    claim("PVC_2", "Vol_2"),
    claim("PVC_3", "Vol_3"),
    claim("PVC_4", "Vol_not_exist"),
    claim("PVC_Stable_1", "Vol_Stable_1"),
    claim("PVC_Stable_2", "Vol_Stable_2"),
    claim("PVC_bad", "Vol_bad"),
]


@pytest.mark.parametrize(
    ("pod", "node", "want_pre", "want_filter"),
    [
        pytest.param(pod_with("PVC_3"), host({}), None, None, id="node-without-labels"),
        pytest.param(
            pod_with("PVC_3"),
            host({BETA_ZONE: "us-west1-a", "uselessLabel": "none"}),
            None,
            None,
            id="beta-zone-matched",
        ),
        pytest.param(
            pod_with("PVC_1"),
            host({BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
            None,
            CONFLICT,
            id="beta-zone-does-not-match",
        ),
        pytest.param(
            pod_with("PVC_Stable_2"), host({ZONE: "us-west1-a", "uselessLabel": "none"}), None, None, id="zone-matched"
        ),
        pytest.param(
            pod_with("PVC_Stable_1"),
            host({ZONE: "us-west1-b", "uselessLabel": "none"}),
            None,
            CONFLICT,
            id="zone-does-not-match",
        ),
        # LabelZonesToSet rejects an empty member: the label is ignored, so the volume constrains nothing.
        pytest.param(pod_with("PVC_bad"), host({ZONE: "us-west1-b"}), SKIP, None, id="malformed-zone-label-ignored"),
    ],
)
def test_multi_zone(pod: Pod, node: Node, want_pre: Status | None, want_filter: Status | None) -> None:
    pre, per_node, batch = run(plugin(MULTI_ZONE_PVS, MULTI_ZONE_PVCS), pod, node)
    assert pre == want_pre
    assert per_node == want_filter
    assert batch == want_filter


BINDING_CLASSES = [
    make_storage_class("Class_Immediate").obj(),
    make_storage_class("Class_Wait").wait_for_first_consumer().obj(),
]
BINDING_PVCS = [
    claim("PVC_1", "Vol_1"),
    make_pvc("PVC_NoSC").storage_class("Class_0").obj(),
    make_pvc("PVC_EmptySC").obj(),
    make_pvc("PVC_WaitSC").storage_class("Class_Wait").obj(),
    make_pvc("PVC_ImmediateSC").storage_class("Class_Immediate").obj(),
]
TEST_NODE = host({BETA_ZONE: "us-west1-a", "uselessLabel": "none"})


def unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


@pytest.mark.parametrize(
    ("pod", "want_pre", "want_filter"),
    [
        pytest.param(pod_with("PVC_1"), None, None, id="label-zone-failure-domain-matched"),
        pytest.param(
            pod_with("PVC_EmptySC"),
            unresolvable(ERR_NO_PV_NO_CLASS),
            unresolvable(ERR_NO_PV_NO_CLASS),
            id="unbound-volume-empty-storage-class",
        ),
        pytest.param(
            pod_with("PVC_NoSC"),
            unresolvable('storageclass.storage.k8s.io "Class_0" not found'),
            unresolvable('storageclass.storage.k8s.io "Class_0" not found'),
            id="unbound-volume-no-storage-class",
        ),
        pytest.param(
            pod_with("PVC_ImmediateSC"),
            unresolvable(ERR_NO_PV_NAME),
            unresolvable(ERR_NO_PV_NAME),
            id="unbound-volume-immediate-binding-mode",
        ),
        pytest.param(pod_with("PVC_WaitSC"), SKIP, None, id="unbound-volume-wait-binding-mode"),
    ],
)
def test_with_binding(pod: Pod, want_pre: Status | None, want_filter: Status | None) -> None:
    volumes = [labelled("Vol_1", {BETA_ZONE: "us-west1-a"})]
    pre, per_node, batch = run(plugin(volumes, BINDING_PVCS, BINDING_CLASSES), pod, TEST_NODE)
    assert pre == want_pre
    assert per_node == want_filter
    assert batch == want_filter


def test_claim_without_name() -> None:
    pod = make_pod("pod_1").volume({"name": "v", "persistentVolumeClaim": {"claimName": ""}}).obj()
    pre, _, _ = run(plugin([], []), pod, TEST_NODE)
    assert pre == unresolvable("PersistentVolumeClaim had no name")


HINT_PLUGIN = plugin([], [])


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        pytest.param(pod_with("PVC_1"), None, "not-a-pvc", QueueingHint.QUEUE, id="error-wrong-new-object"),
        pytest.param(
            make_pod("pod_1").obj(), None, claim("PVC_1", "Vol_1"), QueueingHint.SKIP, id="pvc-added-pod-refers-no-pvc"
        ),
        pytest.param(pod_with("PVC_2"), None, claim("PVC_1", "Vol_1"), QueueingHint.SKIP, id="pvc-added-other-pvc"),
        pytest.param(
            pod_with("PVC_1"),
            None,
            make_pvc("PVC_1", "ns1").volume_name("Vol_1").obj(),
            QueueingHint.SKIP,
            id="pvc-added-different-namespace",
        ),
        pytest.param(pod_with("PVC_1"), None, claim("PVC_1", "Vol_1"), QueueingHint.QUEUE, id="pvc-added-the-pvc"),
        pytest.param(
            pod_with("PVC_1"), make_pvc("PVC_1").obj(), claim("PVC_1", "Vol_1"), QueueingHint.QUEUE, id="pvc-updated"
        ),
        pytest.param(
            make_pod("pod_1").obj(),
            make_pvc("PVC_1").obj(),
            claim("PVC_1", "Vol_1"),
            QueueingHint.SKIP,
            id="pvc-updated-pod-refers-no-pvc",
        ),
    ],
)
def test_hint_claim_change(pod: Pod, old: object, new: object, want: QueueingHint) -> None:
    assert HINT_PLUGIN.is_schedulable_after_claim_change(pod, old, new) is want


@pytest.mark.parametrize(
    ("new", "want"),
    [
        pytest.param("not-a-storageclass", QueueingHint.QUEUE, id="error-wrong-new-object"),
        pytest.param(make_storage_class("SC_1").obj(), QueueingHint.SKIP, id="immediate-class"),
        pytest.param(
            make_storage_class("SC_1").wait_for_first_consumer().obj(), QueueingHint.QUEUE, id="wait-for-first-consumer"
        ),
    ],
)
def test_hint_storage_class_added(new: object, want: QueueingHint) -> None:
    assert HINT_PLUGIN.is_schedulable_after_storage_class_added(pod_with("PVC_1"), None, new) is want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, "not-a-pv", QueueingHint.QUEUE, id="error-wrong-new-object"),
        pytest.param("not-a-pv", make_pv("Vol_1").obj(), QueueingHint.QUEUE, id="error-wrong-old-object"),
        pytest.param(None, pv("Vol_1", **{BETA_ZONE: "us-west1-b"}), QueueingHint.QUEUE, id="new-pv"),
        pytest.param(
            pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
            pv("Vol_1", **{BETA_ZONE: "us-west1-b"}),
            QueueingHint.QUEUE,
            id="topology-changed",
        ),
        pytest.param(
            pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
            pv("Vol_1", **{BETA_ZONE: "us-west1-a", ZONE: "zone"}),
            QueueingHint.QUEUE,
            id="topology-label-added",
        ),
        pytest.param(
            pv("Vol_1", **{BETA_ZONE: "us-west1-a", ZONE: "zone"}),
            pv("Vol_1", **{BETA_ZONE: "us-west1-a", ZONE: "zone"}),
            QueueingHint.SKIP,
            id="no-topology-change",
        ),
    ],
)
def test_hint_volume_change(old: object, new: object, want: QueueingHint) -> None:
    assert HINT_PLUGIN.is_schedulable_after_volume_change(pod_with("PVC_1"), old, new) is want


def test_events_registered() -> None:
    labels = [hint.event.label for hint in HINT_PLUGIN.events_to_register()]
    assert labels == ["StorageClassAdd", "NodeChange", "PersistentVolumeClaimChange", "PersistentVolumeChange"]
