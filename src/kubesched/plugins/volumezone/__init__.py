"""VolumeZone: a node must be in the zone and region of the volumes a pod's claims are bound to."""

from kubesched.plugins.volumezone.volume_zone import VolumeZone

__all__ = ["VolumeZone"]
