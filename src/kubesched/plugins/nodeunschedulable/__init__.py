"""NodeUnschedulable: cordoned nodes take only pods that tolerate the unschedulable taint."""

from kubesched.plugins.nodeunschedulable.node_unschedulable import NodeUnschedulable

__all__ = ["NodeUnschedulable"]
