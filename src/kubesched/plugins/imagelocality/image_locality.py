"""ImageLocality (Score): favors nodes that already have the pod's images, weighted by image size and by
how widely the image has spread (to avoid piling pods onto the few nodes that have it).

For every init and app container whose normalized image name (":latest" appended when the name has no
tag after its last "/") is on the node, add int(size × (nodes with the image / all nodes)) — a float
product, as upstream computes it. The sum is clamped to [23 MiB, 1000 MiB × containers] and scaled to
0..100. There is no NormalizeScore. The node counts come from the cycle's Snapshot via the Handle.

The batch form reads one NodeTable image column per image of the pod (the size each node reports, 0 where it
has none): the same float products and truncation per node, as arrays, then the clamp and scale as integers.
A node's score depends only on its images and on the pod's images with their spread, so it is kept per node
across cycles for a recurring (images, spread) and recomputed only where a node changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.node_table import IntArray, NodeBatch
from kubesched.framework.slot_values import ColumnCache
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins import names
from kubesched.plugins.helper.classes import uniform_scores
from kubesched.plugins.helper.gomath import trunc_div

if TYPE_CHECKING:
    from kubesched.framework.interface import BatchScorePlugin, Handle

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """The CRI name of an image reference: ":latest" when no tag follows the last "/"."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return trunc_div(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


@dataclass(frozen=True, slots=True)
class _PodImages:
    """What the batch path needs of a pod's images against one state of the snapshot's image counts."""

    counts: dict[str, int]  # the snapshot's image counts it was computed from (a new dict whenever they change)
    total_nodes: int
    images: list[str]
    num_containers: int
    spread: dict[str, float]
    present: list[str]  # the images some node has
    key: tuple[tuple[str, ...], tuple[float, ...]]


_POD_IMAGES_KEPT = 256


class ImageLocality:
    """Score: the larger and rarer the pod's images already on a node, the higher the node scores."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args
        self._handle = handle
        self._scores = ColumnCache()
        # Per tuple of the pod's image names as written: replicas ask the same every cycle, and the answer
        # holds while the snapshot's image counts and node count stay the same.
        self._pod_images_memo: dict[tuple[str, ...], _PodImages] = {}

    @property
    def name(self) -> str:
        return names.IMAGE_LOCALITY

    def _pod_images(self, pod: PodInfo) -> tuple[list[str], int]:
        spec = pod.pod.spec
        containers = (*spec.init_containers, *spec.containers)
        return [normalized_image_name(c.image) for c in containers], len(containers)

    def _score(self, images: list[str], num_containers: int, sizes: dict[str, int], spread: dict[str, float]) -> int:
        total = 0
        for image in images:
            size = sizes.get(image)
            if size is not None:
                total += int(float(size) * spread[image])
        return calculate_priority(total, num_containers)

    def _spread(self, images: list[str]) -> dict[str, float]:
        snapshot = self._handle.snapshot()
        total_nodes = len(snapshot)
        if total_nodes == 0:
            return dict.fromkeys(images, 0.0)
        return {image: float(snapshot.num_nodes_with_image(image)) / float(total_nodes) for image in images}

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        images, num_containers = self._pod_images(pod)
        return self._score(images, num_containers, node_info.image_sizes, self._spread(images))

    def _batch_facts(self, pod: PodInfo) -> _PodImages:
        spec = pod.pod.spec
        written = tuple(c.image for c in spec.init_containers) + tuple(c.image for c in spec.containers)
        snapshot = self._handle.snapshot()
        counts, total_nodes = snapshot.image_node_counts, len(snapshot)
        memo = self._pod_images_memo
        facts = memo.get(written)
        if facts is not None and facts.counts is counts and facts.total_nodes == total_nodes:
            return facts
        images, num_containers = self._pod_images(pod)
        spread = self._spread(images)
        present = [image for image in images if spread[image] > 0.0]
        key = (tuple(images), tuple(spread[image] for image in images))
        if len(memo) >= _POD_IMAGES_KEPT:
            memo.clear()
        facts = memo[written] = _PodImages(counts, total_nodes, images, num_containers, spread, present, key)
        return facts

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> IntArray:
        facts = self._batch_facts(pod)
        images, num_containers, spread, present = facts.images, facts.num_containers, facts.spread, facts.present
        if not present:  # no node has any of them: every node scores as one with none
            return uniform_scores(len(nodes), calculate_priority(0, num_containers))
        infos = nodes.table.infos

        def compute(batch: NodeBatch) -> IntArray:
            totals = np.zeros(len(batch), dtype=np.int64)
            for image in present:
                sizes = batch.table.image_sizes(image)[batch.slots]
                totals += (sizes.astype(np.float64) * spread[image]).astype(np.int64)
            max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
            clamped = np.clip(totals, MIN_THRESHOLD, max_threshold)
            # clamped - MIN_THRESHOLD is never negative: floor division is Go's truncating one here
            return (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // (max_threshold - MIN_THRESHOLD)

        def score_slot(slot: int) -> int:
            info = infos[slot]
            return 0 if info is None else self._score(images, num_containers, info.image_sizes, spread)

        return self._scores.read(nodes, facts.key, compute, score_slot)


if TYPE_CHECKING:

    def _conforms(plugin: ImageLocality) -> BatchScorePlugin:
        return plugin
