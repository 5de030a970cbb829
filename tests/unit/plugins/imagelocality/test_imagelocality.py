"""ImageLocality against image_locality_test.go (TestImageLocalityPriority, TestNormalizedImageName),
per node and in batch."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from kubesched.api.objects import Node
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.types import PodInfo
from kubesched.plugins.imagelocality import ImageLocality
from kubesched.plugins.imagelocality.image_locality import normalized_image_name
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster, score_nodes, score_nodes_batch

MB = 1024 * 1024


def image_node(name: str, images: Sequence[tuple[Sequence[str], int]]) -> Node:
    builder = make_node(name)
    for names, size_mb in images:
        builder.image(names[0], size=size_mb * MB, aliases=names[1:])
    return builder.obj()


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300),
    (["gcr.io/2000:latest"], 2000),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10)]
NODE_600_40_900 = [(["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900)]
NODE_300_600_900 = [(["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900)]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30)]
NODE_20_30_40 = [(["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40)]


def pod(*images: str, init: Sequence[str] = ()) -> PodBuilder:
    builder = make_pod()
    for image in images:
        builder.container(image=image)
    for image in init:
        builder.init_container(image=image)
    return builder


@pytest.mark.parametrize(
    ("pod_builder", "nodes", "want"),
    [
        pytest.param(
            pod("gcr.io/40", "gcr.io/250"),
            [image_node("node1", NODE_40_300_2000), image_node("node2", NODE_250_10)],
            [0, 5],
            id="two-images-spread-on-two-nodes-prefer-the-larger-image",
        ),
        pytest.param(
            pod("gcr.io/40", "gcr.io/300"),
            [image_node("node1", NODE_40_300_2000), image_node("node2", NODE_250_10)],
            [7, 0],
            id="two-images-on-one-node-prefer-this-node",
        ),
        pytest.param(
            pod("gcr.io/10", "gcr.io/4000"),
            [image_node("node1", NODE_4000_30), image_node("node2", NODE_250_10)],
            [100, 0],
            id="if-exceed-limit-use-limit",
        ),
        pytest.param(
            pod("gcr.io/10", "gcr.io/4000"),
            [image_node("node1", NODE_4000_30), image_node("node2", NODE_250_10), image_node("node3", [])],
            [66, 0, 0],
            id="if-exceed-limit-use-limit-with-a-node-without-images",
        ),
        pytest.param(
            pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [image_node("node1", NODE_600_40_900), image_node("node2", NODE_300_600_900), image_node("node3", [])],
            [32, 36, 0],
            id="pod-with-multiple-large-images-node2-preferred",
        ),
        pytest.param(
            pod("gcr.io/30", "gcr.io/40"),
            [image_node("node1", NODE_20_30_40), image_node("node2", NODE_4000_30)],
            [1, 0],
            id="pod-with-multiple-small-images",
        ),
        pytest.param(
            pod("gcr.io/30", init=["gcr.io/300"]),
            [image_node("node1", NODE_40_300_2000), image_node("node2", NODE_20_30_40)],
            [6, 0],
            id="init-containers-count",
        ),
    ],
)
def test_image_locality(pod_builder: PodBuilder, nodes: list[Node], want: list[int]) -> None:
    cache, snapshot = make_cluster(nodes)
    plugin = ImageLocality(None, PluginHandle(cache))
    info = PodInfo(pod_builder.obj())
    assert score_nodes(plugin, CycleState(), info, snapshot) == want
    assert score_nodes_batch(plugin, CycleState(), info, snapshot) == want


def _digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("root", "root:latest", id="add-latest-postfix-1"),
        pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="add-latest-postfix-2"),
        pytest.param("root:tag", "root:tag", id="keep-it-as-is-1"),
        pytest.param("root@" + _digest("root"), "root@" + _digest("root"), id="keep-it-as-is-2"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want
