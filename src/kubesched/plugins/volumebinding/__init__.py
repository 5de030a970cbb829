"""VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable, to volumes its node can reach."""

from kubesched.plugins.volumebinding.args import VolumeBindingArgs
from kubesched.plugins.volumebinding.volume_binding import VolumeBinding

__all__ = ["VolumeBinding", "VolumeBindingArgs"]
