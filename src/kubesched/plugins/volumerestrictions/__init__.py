"""VolumeRestrictions: in-tree disks one node may mount, and ReadWriteOncePod claims one pod may use."""

from kubesched.plugins.volumerestrictions.volume_restrictions import VolumeRestrictions

__all__ = ["VolumeRestrictions"]
