"""NodeAffinity: ``spec.nodeSelector``, required and preferred node affinity, scheduler-enforced affinity."""

from kubesched.plugins.nodeaffinity.node_affinity import NodeAffinity, NodeAffinityArgs

__all__ = ["NodeAffinity", "NodeAffinityArgs"]
