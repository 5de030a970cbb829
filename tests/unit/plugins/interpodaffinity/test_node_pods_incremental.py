"""A node's view built from the previous one and the pods that changed equals the view built from every pod, over
random sequences of pods bound, deleted, relabelled and re-wrapped (assumed, then bound: a new PodInfo); and
NodeInfo's count of pods with affinity terms agrees with the view."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.interpodaffinity.node_pods import NodePods, fresh_node_pods, node_pods
from kubesched.plugins.interpodaffinity.terms import PodTerms, parse_pod_terms
from kubesched.testing.builders import make_node, make_pod

NODE = make_node("n1").capacity(cpu="100", memory="100Gi", pods=1000).obj()


def parse(pod_info: PodInfo) -> PodTerms:
    return parse_pod_terms(pod_info.pod)


def a_pod(uid: str, label: str, kind: int) -> Pod:
    builder = make_pod(uid).uid(uid).node_name("n1").label("app", label)
    if kind == 1:
        builder.pod_affinity("app", "In", ["a"], topology_key="zone")
    elif kind == 2:
        builder.pod_affinity("app", "In", ["b"], topology_key="host", anti=True)
    elif kind == 3:
        builder.pod_affinity("app", "Exists", topology_key="zone", weight=5)
    return builder.obj()


def summary(view: NodePods) -> tuple[object, ...]:
    return (
        {pod_info.uid: (id(pod_info), terms) for pod_info, terms in view.with_affinity},
        {pod_info.uid for pod_info, _ in view.with_required_anti_affinity},
        Counter({group.key: group.count for group in view.groups}),
        [group.key == (group.sample.metadata.namespace, frozenset(group.sample.metadata.labels.items()))
         for group in view.groups],
        dict(view.term_counts),
    )  # fmt: skip


STEP = st.tuples(st.sampled_from(["add", "delete", "relabel", "rewrap"]), st.integers(0, 7), st.sampled_from("ab"),
                 st.integers(0, 3))  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(STEP, max_size=25))
def test_incremental_views_equal_fresh_ones(steps: list[tuple[str, int, str, int]]) -> None:
    info = NodeInfo(NODE)
    view = fresh_node_pods(info, parse)
    for action, index, label, kind in steps:
        uid = f"p{index}"
        present = uid in info.pods
        info = info.clone()
        if action == "add" and not present:
            info.add_pod(PodInfo(a_pod(uid, label, kind)))
        elif action == "delete" and present:
            info.remove_pod(uid)
        elif action == "relabel" and present:
            info.remove_pod(uid)
            info.add_pod(PodInfo(a_pod(uid, label, kind)))
        elif action == "rewrap" and present:
            old = info.pods[uid].pod
            info.remove_pod(uid)
            info.add_pod(PodInfo(old))
        view = node_pods(info, view, parse)
        assert summary(view) == summary(fresh_node_pods(info, parse)), (action, uid)
        # The node's own count, which lets the plugin skip nodes without such pods, follows the same changes.
        assert info.pods_with_affinity == len(view.with_affinity), (action, uid)
