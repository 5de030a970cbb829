"""Shared builders for the InterPodAffinity tests: upstream's ``st.MakePod()`` affinity helpers as data.

``req``/``pref`` add one term selecting pods by ``key OP values`` over ``topology``; existing pods get unique
names (the cache keys pods by uid, which comes from the name). ``setup`` builds a real cache, snapshot,
Namespace listers and the plugin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubesched.api.objects import Namespace, Node, Pod
from kubesched.framework.listers import ClusterStore, ListerStores
from kubesched.framework.snapshot import Snapshot
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.scheduler.cache.cache import Cache
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster

NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}
"""upstream's ``namespaces`` fixture."""

Term = tuple[str, str, str, Sequence[str]]
"""(label key, operator, topology key, values)."""


def term(key: str, op: str, topology: str, values: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": op}
    if values:
        requirement["values"] = list(values)
    out: dict[str, Any] = {"labelSelector": {"matchExpressions": [requirement]}, "topologyKey": topology}
    out.update(extra)
    return out


def pod(
    name: str = "pod",
    *,
    ns: str = "default",
    labels: Mapping[str, str] | None = None,
    node: str = "",
    affinity: Iterable[Mapping[str, Any]] = (),
    anti: Iterable[Mapping[str, Any]] = (),
    pref: Iterable[tuple[int, Mapping[str, Any]]] = (),
    pref_anti: Iterable[tuple[int, Mapping[str, Any]]] = (),
) -> Pod:
    builder: PodBuilder = make_pod(name).namespace(ns)
    if labels:
        builder.labels(labels)
    if node:
        builder.node_name(node)
    for t in affinity:
        builder.pod_affinity_term(t)
    for t in anti:
        builder.pod_affinity_term(t, anti=True)
    for weight, t in pref:
        builder.pod_affinity_term(t, weight=weight)
    for weight, t in pref_anti:
        builder.pod_affinity_term(t, anti=True, weight=weight)
    return builder.obj()


def node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    return make_node(name).labels(labels or {}).obj()


def named(pods: Sequence[Pod]) -> list[Pod]:
    """Give pods left with the default name a unique one (p0, p1, ...), keeping everything else."""
    out: list[Pod] = []
    for i, p in enumerate(pods):
        if p.metadata.name == "pod":
            raw = dict(p.raw)
            raw["metadata"] = {**raw["metadata"], "name": f"p{i}"}
            raw["metadata"].pop("uid", None)
            p = Pod.from_dict(raw, f"test pod p{i}")
        out.append(p)
    return out


def namespace_stores(namespaces: Mapping[str, Mapping[str, str]]) -> ListerStores:
    store = ClusterStore(
        Namespace.from_dict(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": dict(labels)}}, n
        )
        for n, labels in namespaces.items()
    )
    return ListerStores(namespaces=store)


def setup(
    nodes: Sequence[Node],
    pods: Sequence[Pod] = (),
    *,
    args: InterPodAffinityArgs | None = None,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[InterPodAffinity, Cache, Snapshot]:
    cache, _ = make_cluster(nodes, named(pods))
    handle = PluginHandle(
        cache, listers=namespace_stores(namespaces if namespaces is not None else NAMESPACES).listers()
    )
    return InterPodAffinity(args, handle), cache, handle.snapshot()
