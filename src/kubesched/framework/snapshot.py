"""Snapshot: the cluster as one scheduling cycle sees it.

The scheduling cycle is synchronous Python: binding tasks and informer updates run on the event loop
only between cycles, so the cache cannot change during a cycle. A Snapshot is therefore a cheap view
over the cache's NodeInfos and columnar table, rebuilt only when the node set changes, rather than
kube-scheduler's copy of every changed NodeInfo. Plugins must not keep it past the cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubesched.framework.node_table import IntArray, NodeTable
from kubesched.framework.types import NodeInfo


class Snapshot:
    """Ordered NodeInfos (zone-interleaved), lookup by name, and the columnar table."""

    __slots__ = ("by_name", "image_node_counts", "node_infos", "nodes_version", "slots", "table")

    def __init__(
        self,
        node_infos: Sequence[NodeInfo],
        table: NodeTable,
        slots: IntArray,
        image_node_counts: Mapping[str, int],
        nodes_version: int = 0,
    ) -> None:
        self.node_infos = node_infos
        self.by_name: dict[str, NodeInfo] = {info.name: info for info in node_infos}
        self.table = table
        self.slots = slots
        self.image_node_counts = image_node_counts
        # Changes whenever a node is added, updated or removed (not when pods move): the "node facts
        # version" that policy decision caches are keyed by.
        self.nodes_version = nodes_version

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    def __len__(self) -> int:
        return len(self.node_infos)

    def num_nodes_with_image(self, image: str) -> int:
        return self.image_node_counts.get(image, 0)
