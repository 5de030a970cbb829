"""A pod's ``spec.volumes`` and a PersistentVolume's in-tree source, read into the few fields the scheduler uses.

Who calls it: VolumeRestrictions and NodeVolumeLimits (through :func:`pod_volumes` and
:func:`pv_in_tree_source`), and their queueing hints. :class:`~kubesched.api.objects.PodSpec` keeps the volumes
as given; this module reads each entry once per pod, so the plugins compare typed values in Filter.

What is read, as kube-scheduler v1.35 reads it:

- ``persistentVolumeClaim.claimName`` and ``ephemeral`` (a generic ephemeral volume: its claim is named
  ``<pod>-<volume>`` and must be controlled by the pod, component-helpers ``ephemeral``);
- the in-tree sources VolumeRestrictions checks for disk conflicts: ``gcePersistentDisk`` (``pdName``,
  ``readOnly``), ``awsElasticBlockStore`` (``volumeID``), ``iscsi`` (``iqn``, ``readOnly``) and ``rbd``
  (``monitors``, ``pool`` defaulted to ``rbd`` as the API server does, ``image``, ``readOnly``);
- the in-tree sources csi-translation-lib can migrate to CSI (NodeVolumeLimits counts them as CSI volumes
  where migration is on): AWS EBS, GCE PD, Azure Disk, Azure File, Cinder, vSphere, Portworx, with the field
  that becomes the CSI volume handle.

The CSI translation itself (plugin → driver name, source → volume handle) is :func:`translate_in_tree`.
A field of the wrong type is a :class:`~kubesched.errors.ManifestError` naming the pod (or volume) and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import _fields as f
from .objects import Pod
from .storage import PersistentVolume

__all__ = [
    "AWS_EBS_DRIVER",
    "AWS_EBS_PLUGIN",
    "AZURE_DISK_DRIVER",
    "AZURE_DISK_PLUGIN",
    "AZURE_FILE_PLUGIN",
    "CINDER_DRIVER",
    "CINDER_PLUGIN",
    "GCE_PD_DRIVER",
    "GCE_PD_PLUGIN",
    "IN_TREE_CSI_DRIVERS",
    "ISCSI_PLUGIN",
    "PORTWORX_DRIVER",
    "PORTWORX_PLUGIN",
    "RBD_PLUGIN",
    "VSPHERE_PLUGIN",
    "InTreeSource",
    "PodVolume",
    "TranslationError",
    "pod_volumes",
    "pv_in_tree_source",
    "translate_in_tree",
]

AWS_EBS_PLUGIN = "kubernetes.io/aws-ebs"
GCE_PD_PLUGIN = "kubernetes.io/gce-pd"
AZURE_DISK_PLUGIN = "kubernetes.io/azure-disk"
AZURE_FILE_PLUGIN = "kubernetes.io/azure-file"
CINDER_PLUGIN = "kubernetes.io/cinder"
VSPHERE_PLUGIN = "kubernetes.io/vsphere-volume"
PORTWORX_PLUGIN = "kubernetes.io/portworx-volume"
ISCSI_PLUGIN = "kubernetes.io/iscsi"
RBD_PLUGIN = "kubernetes.io/rbd"

AWS_EBS_DRIVER = "ebs.csi.aws.com"
GCE_PD_DRIVER = "pd.csi.storage.gke.io"
AZURE_DISK_DRIVER = "disk.csi.azure.com"
CINDER_DRIVER = "cinder.csi.openstack.org"
PORTWORX_DRIVER = "pxd.portworx.com"

IN_TREE_CSI_DRIVERS: Mapping[str, str] = {
    AWS_EBS_PLUGIN: AWS_EBS_DRIVER,
    GCE_PD_PLUGIN: GCE_PD_DRIVER,
    AZURE_DISK_PLUGIN: AZURE_DISK_DRIVER,
    AZURE_FILE_PLUGIN: "file.csi.azure.com",
    CINDER_PLUGIN: CINDER_DRIVER,
    VSPHERE_PLUGIN: "csi.vsphere.vmware.com",
    PORTWORX_PLUGIN: PORTWORX_DRIVER,
}
"""csi-translation-lib's migratable in-tree plugins and the CSI driver each migrates to."""

# VolumeSource field -> (in-tree plugin, the field naming the disk). Order is irrelevant: a volume has one source.
_MIGRATABLE_SOURCES: Mapping[str, tuple[str, str]] = {
    "awsElasticBlockStore": (AWS_EBS_PLUGIN, "volumeID"),
    "gcePersistentDisk": (GCE_PD_PLUGIN, "pdName"),
    "azureDisk": (AZURE_DISK_PLUGIN, "diskURI"),
    "azureFile": (AZURE_FILE_PLUGIN, "shareName"),
    "cinder": (CINDER_PLUGIN, "volumeID"),
    "vsphereVolume": (VSPHERE_PLUGIN, "volumePath"),
    "portworxVolume": (PORTWORX_PLUGIN, "volumeID"),
}
_CONFLICT_SOURCES: Mapping[str, tuple[str, str]] = {
    "iscsi": (ISCSI_PLUGIN, "iqn"),
    "rbd": (RBD_PLUGIN, "image"),
}

_UNSPECIFIED = "UNSPECIFIED"  # csi-translation-lib's placeholder for a GCE project or zone it does not know
_ZONE_LABEL = "topology.kubernetes.io/zone"
_BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
_MANAGED = "Managed"


@dataclass(frozen=True, slots=True)
class InTreeSource:
    """One in-tree volume source: its plugin, the disk it names (``ident``), and what conflict checks read."""

    plugin: str
    ident: str
    read_only: bool = False
    monitors: tuple[str, ...] = ()  # rbd only
    pool: str = ""  # rbd only
    kind: str = ""  # azureDisk only, "Shared" when unset (the API server's default)

    @property
    def migratable(self) -> bool:
        """csi-translation-lib can translate it (``IsInlineMigratable`` / ``IsPVMigratable``)."""
        return self.plugin in IN_TREE_CSI_DRIVERS


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One ``spec.volumes`` entry: the claim it names (``claim_name``; ``""`` if the claim name is empty), whether
    it is a generic ephemeral volume, or the in-tree source it uses. Other sources leave all three empty."""

    name: str
    claim_name: str | None = None
    ephemeral: bool = False
    in_tree: InTreeSource | None = None

    def ephemeral_claim_name(self, pod: Pod) -> str:
        """component-helpers ``ephemeral.VolumeClaimName``: ``<pod name>-<volume name>``."""
        return f"{pod.metadata.name}-{self.name}"


class TranslationError(ValueError):
    """csi-translation-lib could not translate an in-tree source (the message is its error text)."""


def _in_tree(source_key: str, plugin: str, ident_key: str, raw: object, where: str, path: str) -> InTreeSource:
    here = f"{path}.{source_key}"
    obj = f.item_mapping(raw, where, here)
    ident = f.string(obj, ident_key, where, here)
    read_only = f.boolean(obj, "readOnly", where, here)
    if source_key == "rbd":
        return InTreeSource(
            plugin,
            ident,
            read_only,
            monitors=tuple(f.string_list(obj, "monitors", where, here)),
            pool=f.string(obj, "pool", where, here) or "rbd",
        )
    if source_key == "azureDisk":
        return InTreeSource(plugin, ident, read_only, kind=f.string(obj, "kind", where, here) or "Shared")
    return InTreeSource(plugin, ident, read_only)


def _volume(raw: object, where: str, path: str) -> PodVolume:
    obj = f.item_mapping(raw, where, path)
    name = f.string(obj, "name", where, path)
    claim = obj.get("persistentVolumeClaim")
    if claim is not None:
        claim_obj = f.item_mapping(claim, where, f"{path}.persistentVolumeClaim")
        return PodVolume(name, claim_name=f.string(claim_obj, "claimName", where, f"{path}.persistentVolumeClaim"))
    if obj.get("ephemeral") is not None:
        f.item_mapping(obj["ephemeral"], where, f"{path}.ephemeral")
        return PodVolume(name, ephemeral=True)
    for table in (_MIGRATABLE_SOURCES, _CONFLICT_SOURCES):
        for key, (plugin, ident_key) in table.items():
            if obj.get(key) is not None:
                return PodVolume(name, in_tree=_in_tree(key, plugin, ident_key, obj[key], where, path))
    return PodVolume(name)


def pod_volumes(pod: Pod) -> tuple[PodVolume, ...]:
    """The pod's volumes, in order; raises ManifestError naming the pod and field for a malformed entry."""
    where = f"Pod {pod.metadata.namespace}/{pod.metadata.name}"
    return tuple(_volume(raw, where, f"spec.volumes[{i}]") for i, raw in enumerate(pod.spec.volumes))


def pv_in_tree_source(pv: PersistentVolume) -> InTreeSource | None:
    """The volume's migratable in-tree source (``spec.awsElasticBlockStore`` ...), if it has one."""
    spec = pv.raw.get("spec")
    if not isinstance(spec, Mapping):
        return None
    where = f"PersistentVolume {pv.name}"
    for key, (plugin, ident_key) in _MIGRATABLE_SOURCES.items():
        if spec.get(key) is not None:
            return _in_tree(key, plugin, ident_key, spec[key], where, "spec")
    return None


def _ebs_volume_id(volume_id: str) -> str:
    """csi-translation-lib ``KubernetesVolumeIDToEBSVolumeID``: ``aws://<zone>/vol-...`` → ``vol-...``."""
    if not volume_id.startswith("aws://"):
        return volume_id
    rest = volume_id[len("aws://") :]
    # url.Parse puts "<zone>" in the host; what is left of the path, trimmed of "/", is the volume ID.
    path = rest.partition("/")[2]
    aws_id = path.strip("/")
    if not aws_id.startswith("vol-") or "/" in aws_id:
        raise TranslationError(f"Invalid format for AWS volume ({volume_id})")
    return aws_id


def _gce_region(zones: list[str]) -> str:
    region = ""
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(
                f"failed to get region from zones: zone in unexpected format, expected: "
                f"{{locale}}-{{region}}-{{zone}}, got: {zone}"
            )
        this = f"{parts[0]}-{parts[1]}"
        if region and region != this:
            raise TranslationError(
                f"failed to get region from zones: multiple or no regions gotten from zones, got: {zones}"
            )
        region = this
    return region


def _gce_handle(pd_name: str, labels: Mapping[str, str] | None) -> str:
    if labels is None:
        # An inline volume carries no zone: csi-translation-lib leaves project and zone unspecified.
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd_name}"
    beta = labels.get(_BETA_ZONE_LABEL, "")
    ga = labels.get(_ZONE_LABEL, "")
    if beta and ga and beta != ga:
        raise TranslationError(f"Label {_BETA_ZONE_LABEL}({beta}) and {_ZONE_LABEL}({ga}) conflicts")
    zones = (beta or ga).split("__")
    if len(zones) == 1 and zones[0]:
        return f"projects/{_UNSPECIFIED}/zones/{zones[0]}/disks/{pd_name}"
    if len(zones) > 1:
        return f"projects/{_UNSPECIFIED}/regions/{_gce_region(zones)}/disks/{pd_name}"
    return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd_name}"


def translate_in_tree(source: InTreeSource, pv_labels: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(CSI driver, volume handle) of a migratable in-tree source, as csi-translation-lib translates it; ``None``
    when the translation gives no CSI source. ``pv_labels`` are the PersistentVolume's labels (GCE PD reads its
    zone there), ``None`` for an inline volume. Raises TranslationError where the library returns an error."""
    driver = IN_TREE_CSI_DRIVERS.get(source.plugin)
    if driver is None:
        return None
    if source.plugin == AWS_EBS_PLUGIN:
        try:
            return driver, _ebs_volume_id(source.ident)
        except TranslationError as exc:
            raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID {exc}") from None
    if source.plugin == GCE_PD_PLUGIN:
        return driver, _gce_handle(source.ident, pv_labels)
    if source.plugin == AZURE_DISK_PLUGIN:
        if source.kind.lower() != _MANAGED.lower():
            raise TranslationError(f"kind({source.kind}) is not supported in csi migration")
        return driver, source.ident
    return driver, source.ident
