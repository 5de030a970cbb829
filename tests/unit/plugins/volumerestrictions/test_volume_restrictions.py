"""VolumeRestrictions against volume_restrictions_test.go (TestGCEDiskConflicts, TestAWSDiskConflicts,
TestRBDDiskConflicts, TestISCSIDiskConflicts, TestAccessModeConflicts, Test_isSchedulableAfterPodDeleted,
Test_isSchedulableAfterPersistentVolumeClaimChange), per node and in batch, plus PreFilterExtensions,
read-only sharing and a batch/per-node property test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.api.storage import PersistentVolumeClaim
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import QueueingHint
from kubesched.framework.listers import ListerStores
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.volumerestrictions import VolumeRestrictions
from kubesched.plugins.volumerestrictions.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
)
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, filter_nodes, filter_nodes_batch, make_cluster, pre_filter
from kubesched.testing.storage_builders import pvc_object

SKIP = Status(Code.SKIP)
DISK_CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT)
RWOP_CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)

GCE_FOO: dict[str, Any] = {"gcePersistentDisk": {"pdName": "foo"}}
GCE_BAR: dict[str, Any] = {"gcePersistentDisk": {"pdName": "bar"}}
AWS_FOO: dict[str, Any] = {"awsElasticBlockStore": {"volumeID": "foo"}}
AWS_BAR: dict[str, Any] = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD_AB: dict[str, Any] = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD_CD: dict[str, Any] = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI_16: dict[str, Any] = {
    "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}
}
ISCSI_17: dict[str, Any] = {
    "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}
}
NO_RESTRICTION: dict[str, Any] = {"emptyDir": {}}


def vol_pod(*sources: Mapping[str, Any], name: str = "pod", node: str = "", claims: Sequence[str] = ()) -> Pod:
    builder = make_pod(name)
    for i, source in enumerate(sources):
        builder.volume({"name": f"v{i}", **source})
    for claim in claims:
        builder.pvc(claim)
    if node:
        builder.node_name(node)
    return builder.obj()


def setup(existing: Sequence[Pod] = (), claims: Sequence[PersistentVolumeClaim] = ()) -> tuple[VolumeRestrictions, Any]:
    stores = ListerStores()
    for claim in claims:
        stores.persistent_volume_claims.add(claim)
    nodes = {p.spec.node_name for p in existing} | {"node-1"}
    cache, snapshot = make_cluster([make_node(n).obj() for n in sorted(nodes)], existing)
    return VolumeRestrictions(None, PluginHandle(cache, listers=stores.listers())), snapshot


def run(
    plugin: VolumeRestrictions, snapshot: Any, pod: Pod
) -> tuple[Status | None, list[Status | None] | None, list[Status | None] | None]:
    state = CycleState()
    info = PodInfo(pod)
    pre = pre_filter(plugin, state, info, snapshot)
    assert pre is None or isinstance(pre, Status)
    if pre is not None:
        return pre, None, None
    return pre, filter_nodes(plugin, state, info, snapshot), filter_nodes_batch(plugin, state, info, snapshot)


def _disk_cases(name: str, same: Mapping[str, Any], other: Mapping[str, Any]) -> list[Any]:
    """The four cases each of upstream's Test<Disk>DiskConflicts has."""
    return [
        pytest.param(vol_pod(), [], SKIP, None, id=f"{name}-nothing"),
        pytest.param(vol_pod(), [vol_pod(same, name="e", node="node-1")], SKIP, None, id=f"{name}-one-state"),
        pytest.param(
            vol_pod(same), [vol_pod(same, name="e", node="node-1")], None, DISK_CONFLICT, id=f"{name}-same-state"
        ),
        pytest.param(
            vol_pod(other), [vol_pod(same, name="e", node="node-1")], None, None, id=f"{name}-different-state"
        ),
    ]


@pytest.mark.parametrize(
    ("pod", "existing", "want_pre", "want"),
    [
        *_disk_cases("gce", GCE_FOO, GCE_BAR),
        pytest.param(vol_pod(NO_RESTRICTION), [], SKIP, None, id="gce-pod-with-a-volume-that-has-no-restrictions"),
        *_disk_cases("aws", AWS_FOO, AWS_BAR),
        *_disk_cases("rbd", RBD_AB, RBD_CD),
        *_disk_cases("iscsi", ISCSI_16, ISCSI_17),
    ],
)
def test_disk_conflicts(pod: Pod, existing: list[Pod], want_pre: Status | None, want: Status | None) -> None:
    plugin, snapshot = setup(existing)
    pre, per_node, batch = run(plugin, snapshot, pod)
    assert pre == want_pre
    if pre is None:
        assert per_node == [want]
        assert batch == per_node


def _read_only(source: Mapping[str, Any]) -> dict[str, Any]:
    ((key, body),) = source.items()
    return {key: {**body, "readOnly": True}}


@pytest.mark.parametrize(
    ("mine", "theirs", "want"),
    [
        pytest.param(_read_only(GCE_FOO), _read_only(GCE_FOO), None, id="gce-both-read-only-share"),
        pytest.param(_read_only(GCE_FOO), GCE_FOO, DISK_CONFLICT, id="gce-one-writer-conflicts"),
        pytest.param(_read_only(AWS_FOO), _read_only(AWS_FOO), DISK_CONFLICT, id="aws-read-only-still-conflicts"),
        pytest.param(_read_only(ISCSI_16), _read_only(ISCSI_16), None, id="iscsi-both-read-only-share"),
        pytest.param(_read_only(RBD_AB), _read_only(RBD_AB), None, id="rbd-both-read-only-share"),
        pytest.param(
            {"rbd": {"monitors": ["b", "z"], "pool": "foo", "image": "bar"}},
            RBD_AB,
            DISK_CONFLICT,
            id="rbd-one-common-monitor-conflicts",
        ),
        pytest.param(
            {"rbd": {"monitors": ["a"], "image": "bar"}},
            {"rbd": {"monitors": ["a"], "pool": "rbd", "image": "bar"}},
            DISK_CONFLICT,
            id="rbd-pool-defaults-to-rbd",
        ),
        pytest.param(
            {"rbd": {"monitors": ["a"], "pool": "p1", "image": "bar"}},
            {"rbd": {"monitors": ["a"], "pool": "p2", "image": "bar"}},
            None,
            id="rbd-other-pool",
        ),
        pytest.param(GCE_FOO, AWS_FOO, None, id="same-name-different-kind"),
    ],
)
def test_read_only_and_identity_rules(mine: dict[str, Any], theirs: dict[str, Any], want: Status | None) -> None:
    plugin, snapshot = setup([vol_pod(theirs, name="e", node="node-1")])
    pre, per_node, batch = run(plugin, snapshot, vol_pod(mine))
    assert pre is None
    assert per_node == [want]
    assert batch == per_node


RWOP_1 = pvc_object("claim-with-rwop-1", access_modes=("ReadWriteOncePod",))
RWOP_2 = pvc_object("claim-with-rwop-2", access_modes=("ReadWriteOncePod",))
RWX = pvc_object("claim-with-rwx", access_modes=("ReadWriteMany",))


def claim_pod(name: str, *claims: str, node: str = "") -> Pod:
    return vol_pod(name=name, node=node, claims=claims)


@pytest.mark.parametrize(
    ("pod", "existing", "claims", "want_pre", "want"),
    [
        pytest.param(vol_pod(), [], [], SKIP, None, id="nothing"),
        pytest.param(
            claim_pod("pod-with-one-pvc", "claim-with-rwop-1"),
            [],
            [],
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "claim-with-rwop-1" not found'),
            None,
            id="failed-to-get-pvc",
        ),
        pytest.param(
            claim_pod("pod-with-one-pvc", "claim-with-rwop-1"),
            [claim_pod("pod-with-rwx", "claim-with-rwx", node="node-1")],
            [RWOP_1, RWX],
            SKIP,
            None,
            id="no-access-mode-conflict",
        ),
        pytest.param(
            claim_pod("pod-with-one-conflict", "claim-with-rwop-1"),
            [
                claim_pod("pod-with-one-pvc", "claim-with-rwop-1", node="node-1"),
                claim_pod("pod-with-rwx", "claim-with-rwx", node="node-1"),
            ],
            [RWOP_1, RWX],
            None,
            RWOP_CONFLICT,
            id="access-mode-conflict-unschedulable",
        ),
        pytest.param(
            claim_pod("pod-with-two-conflicts", "claim-with-rwop-1", "claim-with-rwop-2"),
            [
                claim_pod("pod-with-two-pvcs", "claim-with-rwop-1", "claim-with-rwop-2", node="node-1"),
                claim_pod("pod-with-rwx", "claim-with-rwx", node="node-1"),
            ],
            [RWOP_1, RWOP_2, RWX],
            None,
            RWOP_CONFLICT,
            id="two-conflicts-unschedulable",
        ),
        pytest.param(
            claim_pod("p", "claim-with-rwop-1"),
            [claim_pod("holder", "claim-with-rwop-1", node="node-2")],
            [RWOP_1],
            None,
            RWOP_CONFLICT,
            id="claim-in-use-on-another-node-rejects-every-node",
        ),
        pytest.param(
            claim_pod("p", "claim-with-rwop-1"),
            [make_pod("holder").namespace("other").pvc("claim-with-rwop-1").node_name("node-1").obj()],
            [RWOP_1],
            SKIP,
            None,
            id="same-claim-name-in-another-namespace-is-another-claim",
        ),
    ],
)
def test_access_mode_conflicts(
    pod: Pod, existing: list[Pod], claims: list[PersistentVolumeClaim], want_pre: Status | None, want: Status | None
) -> None:
    plugin, snapshot = setup(existing, claims)
    pre, per_node, batch = run(plugin, snapshot, pod)
    assert pre == want_pre
    if pre is None:
        assert per_node == [want] * len(snapshot.node_infos)
        assert batch == per_node


def test_remove_pod_and_add_pod_move_the_claim_count() -> None:
    """Preemption's simulation: removing the claim's holder frees every node; adding it back rejects again."""
    holder = claim_pod("holder", "claim-with-rwop-1", node="node-1")
    plugin, snapshot = setup([holder], [RWOP_1])
    state = CycleState()
    pod = PodInfo(claim_pod("p", "claim-with-rwop-1"))
    assert pre_filter(plugin, state, pod, snapshot) is None
    extensions = plugin.pre_filter_extensions()
    assert extensions is not None
    node = snapshot.node_infos[0]
    before = state.clone()
    assert extensions.remove_pod(state, pod, PodInfo(holder), node) is None
    assert plugin.filter(state, pod, node) is None
    # The clone taken before keeps its own count.
    assert plugin.filter(before, pod, node) == RWOP_CONFLICT
    assert extensions.add_pod(state, pod, PodInfo(holder), node) is None
    assert plugin.filter(state, pod, node) == RWOP_CONFLICT


def test_filter_without_pre_filter_state_is_an_error() -> None:
    plugin, snapshot = setup()
    status = plugin.filter(CycleState(), PodInfo(vol_pod(GCE_FOO)), snapshot.node_infos[0])
    assert status is not None and status.code is Code.ERROR
    assert "PreFilterVolumeRestrictions" in status.message


def test_malformed_volume_is_an_error_naming_the_field() -> None:
    plugin, snapshot = setup()
    pod = make_pod("bad").volume({"name": "v", "persistentVolumeClaim": {"claimName": 7}}).obj()
    status = pre_filter(plugin, CycleState(), PodInfo(pod), snapshot)
    assert isinstance(status, Status) and status.code is Code.ERROR
    assert "Pod default/bad" in status.message and "spec.volumes[0].persistentVolumeClaim.claimName" in status.message


# ---- queueing hints ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "deleted", "want"),
    [
        pytest.param(vol_pod(GCE_FOO), vol_pod(GCE_FOO, name="d"), QueueingHint.QUEUE, id="queue-gcedisk-conflict"),
        pytest.param(vol_pod(GCE_FOO), vol_pod(GCE_BAR, name="d"), QueueingHint.SKIP, id="skip-gcedisk-no-conflict"),
        pytest.param(vol_pod(AWS_FOO), vol_pod(AWS_FOO, name="d"), QueueingHint.QUEUE, id="queue-awsdisk-conflict"),
        pytest.param(vol_pod(AWS_FOO), vol_pod(AWS_BAR, name="d"), QueueingHint.SKIP, id="skip-awsdisk-no-conflict"),
        pytest.param(vol_pod(RBD_AB), vol_pod(RBD_AB, name="d"), QueueingHint.QUEUE, id="queue-rbddisk-conflict"),
        pytest.param(vol_pod(RBD_AB), vol_pod(RBD_CD, name="d"), QueueingHint.SKIP, id="skip-rbddisk-no-conflict"),
        pytest.param(vol_pod(ISCSI_16), vol_pod(ISCSI_16, name="d"), QueueingHint.QUEUE, id="queue-iscsidisk-conflict"),
        pytest.param(
            vol_pod(ISCSI_16), vol_pod(ISCSI_17, name="d"), QueueingHint.SKIP, id="skip-iscsidisk-no-conflict"
        ),
        pytest.param(
            claim_pod("pod1", "claim-rwop"),
            claim_pod("pod2", "claim-rwop"),
            QueueingHint.QUEUE,
            id="queue-has-same-claim",
        ),
        pytest.param(
            claim_pod("pod1", "claim-1-rwop"),
            claim_pod("pod2", "claim-2-rwop"),
            QueueingHint.SKIP,
            id="skip-no-same-claim",
        ),
        pytest.param(
            claim_pod("pod1", "claim-rwop"),
            make_pod("pod2").namespace("other").pvc("claim-rwop").obj(),
            QueueingHint.SKIP,
            id="skip-other-namespace",
        ),
    ],
)
def test_is_schedulable_after_pod_deleted(pod: Pod, deleted: Pod, want: QueueingHint) -> None:
    plugin, _ = setup()
    assert plugin.is_schedulable_after_pod_deleted(pod, deleted, None) is want


POD_WITH_ONE_PVC = claim_pod("pod-with-one-pvc", "claim-with-rwx-1", node="node-1")
POD_WITH_TWO_PVCS = claim_pod("pod-with-two-pvcs", "claim-with-rwx-1", "claim-with-rwx-2", node="node-1")
POD_IN_KUBE_SYSTEM = make_pod("pod-with-one-pvc").namespace("kube-system").pvc("claim-with-rwx-1").obj()
PVC1 = pvc_object("claim-with-rwx-1", access_modes=("ReadWriteMany",))
PVC2 = pvc_object("claim-with-rwx-2", access_modes=("ReadWriteMany",))


@pytest.mark.parametrize(
    ("pod", "new", "want"),
    [
        pytest.param(POD_WITH_TWO_PVCS, PVC1, QueueingHint.QUEUE, id="queue-new-object-pvc-belong-pod"),
        pytest.param(POD_WITH_ONE_PVC, PVC2, QueueingHint.SKIP, id="skip-new-object-unused"),
        pytest.param(POD_WITH_ONE_PVC, PVC2, QueueingHint.SKIP, id="skip-nil-old-object"),
        pytest.param(POD_WITH_ONE_PVC, PVC2, QueueingHint.SKIP, id="skip-new-object-not-belong-pod"),
        pytest.param(POD_IN_KUBE_SYSTEM, PVC1, QueueingHint.SKIP, id="skip-new-object-namespace-not-equal-pod"),
        pytest.param(POD_WITH_ONE_PVC, "not-a-pvc", QueueingHint.QUEUE, id="queue-on-unexpected-object"),
    ],
)
def test_is_schedulable_after_pvc_added(pod: Pod, new: object, want: QueueingHint) -> None:
    plugin, _ = setup()
    assert plugin.is_schedulable_after_pvc_added(pod, None, new) is want


def test_events_to_register() -> None:
    plugin, _ = setup()
    labels = [(e.event.label, e.hint is not None) for e in plugin.events_to_register()]
    assert labels == [("PodDelete", True), ("NodeAdd", False), ("PersistentVolumeClaimAdd", True)]


# ---- batch == per node ------------------------------------------------------------------------------

_SOURCES = [GCE_FOO, _read_only(GCE_FOO), GCE_BAR, AWS_FOO, RBD_AB, _read_only(RBD_AB), ISCSI_16, NO_RESTRICTION]


@settings(max_examples=60, deadline=None)
@given(
    mine=st.lists(st.sampled_from(_SOURCES), min_size=1, max_size=3),
    placed=st.lists(st.tuples(st.integers(0, 3), st.lists(st.sampled_from(_SOURCES), max_size=2)), max_size=6),
    rwop_holder=st.booleans(),
)
def test_batch_equals_per_node(
    mine: list[dict[str, Any]], placed: list[tuple[int, list[dict[str, Any]]]], rwop_holder: bool
) -> None:
    existing = [vol_pod(*sources, name=f"e{i}", node=f"n{node}") for i, (node, sources) in enumerate(placed)]
    if rwop_holder:
        existing.append(claim_pod("holder", "claim-with-rwop-1", node="n0"))
    stores = ListerStores()
    stores.persistent_volume_claims.add(RWOP_1)
    cache, snapshot = make_cluster([make_node(f"n{i}").obj() for i in range(4)], existing)
    plugin = VolumeRestrictions(None, PluginHandle(cache, listers=stores.listers()))
    pod = PodInfo(vol_pod(*mine, name="p", claims=["claim-with-rwop-1"]))
    state = CycleState()
    pre = pre_filter(plugin, state, pod, snapshot)
    if pre is not None:
        assert pre == SKIP
        return
    assert filter_nodes_batch(plugin, state, pod, snapshot) == filter_nodes(plugin, state, pod, snapshot)
