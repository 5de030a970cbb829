"""The in-tree plugins inside a real framework built from kube-scheduler's default configuration: the
runtime's batch path (filter_batch/score_batch) and its per-node reference path reach the same
per-node statuses and the same weighted totals."""

from __future__ import annotations

import numpy as np

from kubesched.config.loader import default_config
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.node_table import NodeBatch
from kubesched.framework.runtime.framework import Framework
from kubesched.framework.runtime.outcomes import ScoreOutcome
from kubesched.framework.types import PodInfo
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster


def _framework(handle: PluginHandle, *, use_batch: bool) -> Framework:
    registry = in_tree_registry()
    profile = default_config(registry).profiles[0]
    return Framework(profile, registry, handle.context, use_batch=use_batch)


def test_default_profile_batch_and_reference_paths_agree() -> None:
    nodes = [
        make_node("small").capacity(cpu="1", memory="1Gi").label("zone", "a").obj(),
        make_node("big")
        .capacity(cpu="8", memory="32Gi")
        .label("zone", "b")
        .image("app:latest", size=500 * 2**20)
        .obj(),
        make_node("tainted").capacity(cpu="8", memory="32Gi").taint("dedicated", "gpu").obj(),
        make_node("cordoned").capacity(cpu="8", memory="32Gi").unschedulable().obj(),
        make_node("soft").capacity(cpu="4", memory="8Gi").taint("spot", effect="PreferNoSchedule").obj(),
    ]
    existing = [make_pod("busy").node_name("big").req(cpu="6", memory="4Gi").obj()]
    cache, snapshot = make_cluster(nodes, existing)
    handle = PluginHandle(cache)
    pod = PodInfo(
        make_pod("web")
        .container(cpu="1500m", memory="2Gi", image="app")
        .affinity(
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                        }
                    ]
                }
            }
        )
        .obj()
    )
    outcomes = []
    for use_batch in (True, False):
        fwk = _framework(handle, use_batch=use_batch)
        state = CycleState()
        pre = fwk.run_pre_filter(state, pod, snapshot.node_infos)
        assert pre.status is None
        filtered = fwk.run_filter_batch(state, pod, NodeBatch(snapshot.table, snapshot.slots.copy()))
        assert filtered.error is None
        statuses = {info.name: filtered.status_of(i) for i, info in enumerate(snapshot.node_infos)}
        assert {name: fwk.run_filter(state, pod, info) for name, info in snapshot.by_name.items()} == statuses
        feasible = [info for info in snapshot.node_infos if statuses[info.name] is None]
        assert fwk.run_pre_score(state, pod, feasible) is None
        slots = np.fromiter((info.slot for info in feasible), dtype=np.int64, count=len(feasible))
        scored = fwk.run_score(state, pod, NodeBatch(snapshot.table, slots))
        assert isinstance(scored, ScoreOutcome)
        outcomes.append((statuses, [info.name for info in feasible], scored))
    (batch_statuses, batch_nodes, batch_scores), (ref_statuses, ref_nodes, ref_scores) = outcomes
    assert batch_statuses == ref_statuses
    assert batch_nodes == ref_nodes == ["big", "soft"]
    assert {k: v.tolist() for k, v in batch_scores.per_plugin.items()} == {
        k: v.tolist() for k, v in ref_scores.per_plugin.items()
    }
    assert batch_scores.totals.tolist() == ref_scores.totals.tolist()
    reasons = {name: status.reasons for name, status in batch_statuses.items() if status is not None}
    assert reasons == {
        "small": ("Insufficient cpu", "Insufficient memory"),
        "tainted": ("node(s) had untolerated taint(s)",),
        "cordoned": ("node(s) were unschedulable",),
    }
