"""InterPodAffinity: required and preferred pod affinity / anti-affinity between pods, over topology domains."""

from kubesched.plugins.interpodaffinity.args import InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.inter_pod_affinity import InterPodAffinity

__all__ = ["InterPodAffinity", "InterPodAffinityArgs"]
