"""Builders and runners shared by the PodTopologySpread tests (the shape of upstream's ``st.MakePod()
.SpreadConstraint(...)`` calls, as data)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.listers import Listers
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs, TopologySpreadConstraint
from kubesched.plugins.podtopologyspread.plugin import PRE_FILTER_STATE_KEY, PreFilterState
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster

Raw = dict[str, Any]
DNS = "DoNotSchedule"
SA = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
HOSTNAME = "kubernetes.io/hostname"
UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "", "NoSchedule")


def exists(key: str) -> Raw:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


FOO = exists("foo")
BAR = exists("bar")


def labels_selector(**labels: str) -> Raw:
    return {"matchLabels": dict(labels)}


def constraint(
    max_skew: int,
    key: str,
    action: str,
    selector: Raw | None,
    *,
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] | None = None,
) -> Raw:
    out: Raw = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action}
    if selector is not None:
        out["labelSelector"] = selector
    if min_domains is not None:
        out["minDomains"] = min_domains
    if affinity_policy is not None:
        out["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        out["nodeTaintsPolicy"] = taints_policy
    if match_label_keys is not None:
        out["matchLabelKeys"] = list(match_label_keys)
    return out


def pod(
    name: str,
    labels: Mapping[str, str] | None = None,
    *constraints: Raw,
    node: str = "",
    namespace: str = "default",
    node_selector: Mapping[str, str] | None = None,
    affinity: Raw | None = None,
    tolerate: Sequence[str] = (),
    terminating: bool = False,
    uid: str = "",
    owner: tuple[str, str, str] | None = None,
) -> Pod:
    builder = make_pod(name).namespace(namespace).labels(labels or {})
    for c in constraints:
        builder.spread(c)
    if node:
        builder.node_name(node)
    if node_selector:
        builder.node_selector(node_selector)
    if affinity is not None:
        builder.affinity(affinity)
    for key in tolerate:
        builder.toleration(key, "Exists", "", "NoSchedule")
    if terminating:
        builder.terminating()
    if uid:
        builder.uid(uid)
    raw = builder.raw()
    if owner is not None:
        api_version, kind, owner_name = owner
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": owner_name, "controller": True}
        ]
    return Pod.from_dict(raw, f"test pod {namespace}/{name}")


def node_in(name: str, labels: Mapping[str, str], *, taints: Sequence[tuple[str, str, str]] = ()) -> Node:
    builder = make_node(name).labels(labels)
    for key, value, effect in taints:
        builder.taint(key, value, effect)
    return builder.obj()


def zone_node(name: str, zone: str, **extra: str) -> Node:
    """A node labelled ``zone`` and ``node`` (its name), as upstream's tables build them."""
    return node_in(name, {"zone": zone, "node": name, **extra})


def nodes_abxy() -> list[Node]:
    return [
        zone_node("node-a", "zone1"),
        zone_node("node-b", "zone1"),
        zone_node("node-x", "zone2"),
        zone_node("node-y", "zone2"),
    ]


def placed(name: str, node: str, labels: Mapping[str, str] | None = None, **kwargs: Any) -> Pod:
    return pod(name, labels if labels is not None else {"foo": ""}, node=node, **kwargs)


def node_affinity_not_in(key: str, *values: str) -> Raw:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "NotIn", "values": list(values)}]}]
            }
        }
    }


def node_affinity_in(key: str, *values: str) -> Raw:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]
            }
        }
    }


def list_args(*constraints: Raw) -> PodTopologySpreadArgs:
    """``defaultingType: List`` with these default constraints."""
    return PodTopologySpreadArgs(
        defaulting_type="List",
        default_constraints=tuple(
            TopologySpreadConstraint(
                max_skew=c["maxSkew"], topology_key=c["topologyKey"], when_unsatisfiable=c["whenUnsatisfiable"]
            )
            for c in constraints
        ),
    )


NO_DEFAULTS = PodTopologySpreadArgs(defaulting_type="List")


class Run:
    """One plugin over one cluster: the cache, its snapshot, the plugin and a cycle state."""

    def __init__(
        self,
        nodes: Sequence[Node],
        existing: Sequence[Pod] = (),
        *,
        args: PodTopologySpreadArgs | None = NO_DEFAULTS,
        listers: Listers | None = None,
    ) -> None:
        self.cache, self.snapshot = make_cluster(nodes, existing)
        self.handle = PluginHandle(self.cache, listers=listers)
        self.plugin = PodTopologySpread(args, self.handle)
        self.state = CycleState()

    def refresh(self) -> Snapshot:
        self.snapshot = self.cache.snapshot()
        return self.snapshot

    def pre_filter(self, incoming: Pod) -> tuple[PodInfo, Status | None]:
        info = PodInfo(incoming)
        status = self.plugin.pre_filter(self.state, info, self.snapshot.node_infos)
        return info, status

    def pre_filter_state(self) -> PreFilterState:
        found = self.state.get(PRE_FILTER_STATE_KEY, PreFilterState)
        assert found is not None, "PreFilter wrote no state"
        return found


def sorted_paths(paths: tuple[tuple[str, int], tuple[str, int]]) -> tuple[tuple[str, int], tuple[str, int]]:
    """Upstream's comparer: with equal counts the two domains are compared alphabetically."""
    (v0, n0), (v1, n1) = paths
    if n0 == n1 and v0 > v1:
        v0, v1 = v1, v0
    return (v0, n0), (v1, n1)


MAX_INT32 = 2**31 - 1
EMPTY_PATHS = (("", MAX_INT32), ("", MAX_INT32))
