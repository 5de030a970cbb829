"""NodePorts: a pod's host ports must be free on the node."""

from kubesched.plugins.nodeports.node_ports import NodePorts

__all__ = ["NodePorts"]
