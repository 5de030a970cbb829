"""The batch (numpy) path and the per-node reference path schedule every cluster identically.

Whole simulations on random clusters, both paths with the same seed: same placements, same
FailedScheduling messages, same per-node filter statuses, same scores and totals.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.manifests import LoadedManifests
from kubesched.cli.report import report_json
from kubesched.config.loader import load_config_dict
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate
from kubesched.testing.builders import make_node, make_pod

TAINTS = [("dedicated", "gpu", "NoSchedule"), ("spot", "true", "PreferNoSchedule"), ("maint", "", "NoExecute")]
ZONES = ["z1", "z2", "z3"]


@st.composite
def clusters(draw: st.DrawFn) -> LoadedManifests:
    loaded = LoadedManifests()
    node_count = draw(st.integers(1, 12))
    for i in range(node_count):
        node = (
            make_node(f"n{i}")
            .zone(draw(st.sampled_from(ZONES)))
            .capacity(
                cpu=str(draw(st.integers(1, 8))),
                memory=f"{draw(st.integers(1, 16))}Gi",
                pods=draw(st.integers(1, 6)),
                **({"example.com/gpu": draw(st.integers(0, 2))} if draw(st.booleans()) else {}),
            )
        )
        for key, value, effect in draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)):
            node = node.taint(key, value, effect)
        if draw(st.integers(0, 5)) == 0:
            node = node.unschedulable()
        loaded.nodes.append(node.obj())
    pod_count = draw(st.integers(1, 25))
    for i in range(pod_count):
        pod = make_pod(f"p{i}").priority(draw(st.integers(0, 3)))
        cpu = draw(st.sampled_from([None, "100m", "500m", "1", "2", "3"]))
        memory = draw(st.sampled_from([None, "128Mi", "1Gi", "4Gi"]))
        requests: dict[str, Any] = {}
        if cpu:
            requests["cpu"] = cpu
        if memory:
            requests["memory"] = memory
        if draw(st.integers(0, 4)) == 0:
            requests["example.com/gpu"] = 1
        if requests:
            pod = pod.req(requests)
        for key, value, effect in draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)):
            pod = pod.toleration(key=key, operator="Equal", value=value, effect=effect)
        if draw(st.integers(0, 6)) == 0:
            pod = pod.node_name(f"n{draw(st.integers(0, node_count - 1))}")
        loaded.pods.append(pod.obj())
    return loaded


STRATEGIES = ["LeastAllocated", "MostAllocated"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), strategy=st.sampled_from(STRATEGIES), seed=st.integers(0, 3))
def test_batch_and_reference_paths_agree(cluster: LoadedManifests, strategy: str, seed: int) -> None:
    registry = in_tree_registry()
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}],
            }
        ],
    }
    config = load_config_dict(document, "test", registry)
    batch = report_json(simulate(cluster, config, registry, seed=seed, use_batch=True).records)
    reference = report_json(simulate(cluster, config, registry, seed=seed, use_batch=False).records)
    assert batch == reference
