"""VolumeBinding's queueing hints against volume_binding_test.go (TestIsSchedulableAfterCSINodeChange,
...PersistentVolumeClaimChange, ...StorageClassChange, ...CSIStorageCapacityChange, ...CSIDriverChange) and its
event registrations. kubesched has no CSIDriver or CSIStorageCapacity types: those hints read the decoded
manifests."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.api.storage import CSINode
from kubesched.framework.events import ActionType, EventResource, QueueingHint
from kubesched.plugins.volumebinding import VolumeBinding
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle
from kubesched.testing.storage_builders import make_pvc, make_storage_class

PLUGIN = VolumeBinding(None, PluginHandle())
MIGRATED = "storage.alpha.kubernetes.io/migrated-plugins"


def csi_node(annotations: dict[str, str] | None = None) -> CSINode:
    meta: dict[str, Any] = {"name": "csinode-a"}
    if annotations:
        meta["annotations"] = annotations
    return CSINode.from_dict({"metadata": meta, "spec": {"drivers": []}}, "test")


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, csi_node(), QueueingHint.QUEUE, id="csinode-added"),
        pytest.param(csi_node(), "not-a-csinode", QueueingHint.QUEUE, id="wrong-new-object"),
        pytest.param(
            csi_node({MIGRATED: "test1"}),
            csi_node({MIGRATED: "test1, test2"}),
            QueueingHint.QUEUE,
            id="migrated-plugins-annotation-changed",
        ),
        pytest.param(
            csi_node({MIGRATED: "test1"}), csi_node({MIGRATED: "test1"}), QueueingHint.SKIP, id="annotation-unchanged"
        ),
        pytest.param(
            csi_node({MIGRATED: "test1"}),
            csi_node({MIGRATED: "test1", "other": "x"}),
            QueueingHint.SKIP,
            id="other-annotation-changed",
        ),
    ],
)
def test_csi_node_change(old: object, new: object, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_csi_node_change(make_pod().obj(), old, new) is want


POD_WITH_CLAIMS = make_pod("pod-a").pvc("pvc1").ephemeral_volume("ephemeral").obj()


@pytest.mark.parametrize(
    ("pod", "new", "want"),
    [
        pytest.param(POD_WITH_CLAIMS, make_pvc("pvc1").obj(), QueueingHint.QUEUE, id="pod-has-the-pvc"),
        pytest.param(POD_WITH_CLAIMS, make_pvc("pod-a-ephemeral").obj(), QueueingHint.QUEUE, id="ephemeral-claim"),
        pytest.param(POD_WITH_CLAIMS, make_pvc("pvc1", "other").obj(), QueueingHint.SKIP, id="different-namespace"),
        pytest.param(POD_WITH_CLAIMS, make_pvc("pvc2").obj(), QueueingHint.SKIP, id="unrelated-pvc"),
        pytest.param(make_pod().obj(), make_pvc("pvc1").obj(), QueueingHint.SKIP, id="pod-has-no-pvc"),
        pytest.param(POD_WITH_CLAIMS, "not-a-pvc", QueueingHint.QUEUE, id="wrong-object"),
    ],
)
def test_claim_change(pod: Pod, new: object, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_claim_change(pod, None, new) is want


SC = make_storage_class("sc-a").wait_for_first_consumer()


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, SC.obj(), QueueingHint.QUEUE, id="class-added"),
        pytest.param(
            SC.obj(),
            make_storage_class("sc-a").wait_for_first_consumer().allowed_topology({"zone": ["z1"]}).obj(),
            QueueingHint.QUEUE,
            id="allowed-topologies-changed",
        ),
        pytest.param(SC.obj(), SC.obj(), QueueingHint.SKIP, id="nothing-relevant-changed"),
        pytest.param(SC.obj(), "not-a-class", QueueingHint.QUEUE, id="wrong-object"),
    ],
)
def test_storage_class_change(old: object, new: object, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_storage_class_change(POD_WITH_CLAIMS, old, new) is want


def capacity(**fields: str) -> dict[str, Any]:
    return {"metadata": {"name": "cap", "namespace": "default"}, "storageClassName": "sc-a", **fields}


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, capacity(capacity="1Gi"), QueueingHint.QUEUE, id="capacity-added"),
        pytest.param(capacity(capacity="1Gi"), capacity(capacity="2Gi"), QueueingHint.QUEUE, id="capacity-grew"),
        pytest.param(capacity(capacity="2Gi"), capacity(capacity="1Gi"), QueueingHint.SKIP, id="capacity-shrank"),
        pytest.param(
            capacity(capacity="1Gi", maximumVolumeSize="1Gi"),
            capacity(capacity="1Gi", maximumVolumeSize="2Gi"),
            QueueingHint.QUEUE,
            id="max-volume-size-grew",
        ),
        pytest.param(
            capacity(capacity="5Gi", maximumVolumeSize="2Gi"),
            capacity(capacity="9Gi", maximumVolumeSize="2Gi"),
            QueueingHint.SKIP,
            id="max-volume-size-wins-over-capacity",
        ),
        pytest.param(capacity(), capacity(capacity="1Gi"), QueueingHint.QUEUE, id="limit-appeared"),
        pytest.param(capacity(), capacity(), QueueingHint.SKIP, id="no-limit-either-side"),
        pytest.param(capacity(), "not-a-capacity", QueueingHint.QUEUE, id="wrong-object"),
    ],
)
def test_capacity_change(old: object, new: object, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_capacity_change(POD_WITH_CLAIMS, old, new) is want


def driver(capacity_tracking: bool | None) -> dict[str, Any]:
    spec = {} if capacity_tracking is None else {"storageCapacity": capacity_tracking}
    return {"metadata": {"name": "test-driver"}, "spec": spec}


CSI_POD = make_pod().volume({"name": "v", "csi": {"driver": "test-driver"}}).obj()


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        pytest.param(CSI_POD, driver(True), driver(False), QueueingHint.QUEUE, id="capacity-tracking-disabled"),
        pytest.param(CSI_POD, driver(True), driver(None), QueueingHint.QUEUE, id="capacity-tracking-unset"),
        pytest.param(CSI_POD, driver(False), driver(True), QueueingHint.SKIP, id="capacity-tracking-enabled"),
        pytest.param(CSI_POD, driver(True), driver(True), QueueingHint.SKIP, id="unchanged"),
        pytest.param(make_pod().obj(), driver(True), driver(False), QueueingHint.SKIP, id="pod-without-csi-volume"),
        pytest.param(CSI_POD, "x", driver(False), QueueingHint.QUEUE, id="wrong-object"),
    ],
)
def test_csi_driver_change(pod: Pod, old: object, new: object, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_csi_driver_change(pod, old, new) is want


def test_events_registered() -> None:
    got = [(h.event.resource, h.event.action, h.hint is not None) for h in PLUGIN.events_to_register()]
    add_update = ActionType.ADD | ActionType.UPDATE
    assert got == [
        (EventResource.STORAGE_CLASS, add_update, True),
        (EventResource.PERSISTENT_VOLUME_CLAIM, add_update, True),
        (EventResource.PERSISTENT_VOLUME, add_update, False),
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, False),
        (EventResource.CSI_NODE, add_update, True),
        (EventResource.CSI_DRIVER, ActionType.UPDATE, True),
        (EventResource.CSI_STORAGE_CAPACITY, add_update, True),
    ]
