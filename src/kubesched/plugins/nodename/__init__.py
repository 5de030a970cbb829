"""NodeName: a pod with ``spec.nodeName`` fits only that node."""

from kubesched.plugins.nodename.node_name import NodeName

__all__ = ["NodeName"]
