"""NodeVolumeLimits: per-driver CSI volume counts must stay within a node's CSINode allocatable counts."""

from kubesched.plugins.nodevolumelimits.csi import CSILimits

__all__ = ["CSILimits"]
