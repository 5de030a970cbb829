"""ImageLocality: prefers nodes that already hold the pod's container images."""

from kubesched.plugins.imagelocality.image_locality import ImageLocality

__all__ = ["ImageLocality"]
