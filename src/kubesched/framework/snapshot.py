"""Snapshot: the cluster as one scheduling cycle sees it, frozen for the length of the cycle.

The scheduling cycle awaits between Filter batches (a policy engine answering off the event loop), so
informer events and binding tasks change the cache *during* a cycle. The cycle therefore reads a
snapshot the cache brings up to date once, at the start of the cycle
(:meth:`kubesched.scheduler.cache.cache.Cache.update_snapshot`): it copies only the NodeInfos whose
generation moved since the snapshot's own generation, and writes only their rows of the columnar
:class:`~kubesched.framework.node_table.NodeTable`. The NodeInfos here are copies; nothing in a snapshot
changes until the next update. Plugins must not keep it past the cycle.
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.node_table import IntArray, NodeTable
from kubesched.framework.types import NodeInfo


class Snapshot:
    """Ordered NodeInfos (zone-interleaved), lookup by name, the columnar table, image spread."""

    __slots__ = ("by_name", "generation", "image_node_counts", "node_infos", "position_of_slot", "slots", "table")

    def __init__(self) -> None:
        self.node_infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.table = NodeTable()
        self.slots: IntArray = np.zeros(0, dtype=np.int64)
        # slot -> index in node_infos (search order), so one changed node is patched in place
        self.position_of_slot: IntArray = np.zeros(0, dtype=np.int64)
        # image name -> number of nodes that have it (ImageLocality's spread)
        self.image_node_counts: dict[str, int] = {}
        # The cache generation this snapshot reflects; 0 = never updated.
        self.generation = 0

    def set_order(self, node_infos: list[NodeInfo]) -> None:
        """The search order (the cache's node tree), as NodeInfos of this snapshot."""
        self.node_infos = node_infos
        self.slots = np.fromiter((info.slot for info in node_infos), dtype=np.int64, count=len(node_infos))
        size = int(self.slots.max()) + 1 if len(node_infos) else 0
        self.position_of_slot = np.zeros(size, dtype=np.int64)
        self.position_of_slot[self.slots] = np.arange(len(node_infos), dtype=np.int64)

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    def __len__(self) -> int:
        return len(self.node_infos)

    def num_nodes_with_image(self, image: str) -> int:
        return self.image_node_counts.get(image, 0)
