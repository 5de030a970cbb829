"""Reading a pod's spec.volumes and a PV's in-tree source (kubesched.api.volumes): each source kind, the API
server defaults the conflict checks depend on, and malformed entries reported with the pod and field."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.volumes import (
    AWS_EBS_PLUGIN,
    AZURE_DISK_PLUGIN,
    GCE_PD_PLUGIN,
    ISCSI_PLUGIN,
    RBD_PLUGIN,
    InTreeSource,
    PodVolume,
    pod_volumes,
    pv_in_tree_source,
)
from kubesched.errors import ManifestError
from kubesched.testing.builders import make_pod
from kubesched.testing.storage_builders import pv_object


def one(volume: dict[str, Any]) -> PodVolume:
    (parsed,) = pod_volumes(make_pod("p").volume({"name": "v", **volume}).obj())
    return parsed


@pytest.mark.parametrize(
    ("volume", "want"),
    [
        pytest.param({"persistentVolumeClaim": {"claimName": "c"}}, PodVolume("v", claim_name="c"), id="claim"),
        pytest.param({"persistentVolumeClaim": {}}, PodVolume("v", claim_name=""), id="claim-without-name"),
        pytest.param({"ephemeral": {"volumeClaimTemplate": {}}}, PodVolume("v", ephemeral=True), id="ephemeral"),
        pytest.param({"emptyDir": {}}, PodVolume("v"), id="other-source"),
        pytest.param(
            {"gcePersistentDisk": {"pdName": "d", "readOnly": True}},
            PodVolume("v", in_tree=InTreeSource(GCE_PD_PLUGIN, "d", True)),
            id="gce-pd",
        ),
        pytest.param(
            {"awsElasticBlockStore": {"volumeID": "vol-1"}},
            PodVolume("v", in_tree=InTreeSource(AWS_EBS_PLUGIN, "vol-1")),
            id="aws-ebs",
        ),
        pytest.param(
            {"iscsi": {"iqn": "iqn.x", "targetPortal": "1.2.3.4", "lun": 0}},
            PodVolume("v", in_tree=InTreeSource(ISCSI_PLUGIN, "iqn.x")),
            id="iscsi",
        ),
        pytest.param(
            {"rbd": {"monitors": ["m"], "image": "i"}},
            PodVolume("v", in_tree=InTreeSource(RBD_PLUGIN, "i", monitors=("m",), pool="rbd")),
            id="rbd-pool-defaults-to-rbd",
        ),
        pytest.param(
            {"azureDisk": {"diskName": "d", "diskURI": "uri"}},
            PodVolume("v", in_tree=InTreeSource(AZURE_DISK_PLUGIN, "uri", kind="Shared")),
            id="azure-disk-kind-defaults-to-shared",
        ),
    ],
)
def test_pod_volume_sources(volume: dict[str, Any], want: PodVolume) -> None:
    assert one(volume) == want


def test_migratable_sources() -> None:
    assert one({"awsElasticBlockStore": {"volumeID": "x"}}).in_tree is not None
    assert one({"vsphereVolume": {"volumePath": "p"}}).in_tree == InTreeSource("kubernetes.io/vsphere-volume", "p")
    assert InTreeSource(AWS_EBS_PLUGIN, "x").migratable
    assert not InTreeSource(ISCSI_PLUGIN, "x").migratable


@pytest.mark.parametrize(
    ("volume", "field"),
    [
        pytest.param({"persistentVolumeClaim": {"claimName": 3}}, "spec.volumes[0].persistentVolumeClaim.claimName"),
        pytest.param({"persistentVolumeClaim": "c"}, "spec.volumes[0].persistentVolumeClaim"),
        pytest.param(
            {"gcePersistentDisk": {"pdName": "d", "readOnly": "yes"}}, "spec.volumes[0].gcePersistentDisk.readOnly"
        ),
        pytest.param({"rbd": {"monitors": "m", "image": "i"}}, "spec.volumes[0].rbd.monitors"),
    ],
)
def test_malformed_entries_name_the_pod_and_field(volume: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as caught:
        one(volume)
    assert str(caught.value).startswith(f"Pod default/p: {field}")


def test_pv_in_tree_source() -> None:
    assert pv_in_tree_source(pv_object("a", csi=("d", "h"))) is None
    pv = pv_object("b", source={"awsElasticBlockStore": {"volumeID": "vol-9"}})
    assert pv_in_tree_source(pv) == InTreeSource(AWS_EBS_PLUGIN, "vol-9")
    assert pv_in_tree_source(pv_object("c", source={"hostPath": {"path": "/tmp"}})) is None
