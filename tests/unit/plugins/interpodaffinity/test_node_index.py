"""The array paths (per-node counts kept across cycles, the index of existing pods' terms) change no answer:
placements with them equal those of the reference loops walking every node, over workloads that mix pods with
and without terms (bindings, preemption's deletions) and over the affinity shapes of scheduler_perf."""

from __future__ import annotations

from pathlib import Path

import pytest

import kubesched.bench
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.runner import run_workload
from kubesched.bench.workload import load_workload
from kubesched.plugins.interpodaffinity.inter_pod_affinity import InterPodAffinity

WORKLOADS = Path(kubesched.bench.__file__).parent / "workloads"


def _placements(file: str, params: dict[str, int]) -> dict[str, str]:
    found: dict[str, str] = {}

    def keep(cluster: SimulatedCluster) -> None:
        found.update({pod.key: pod.spec.node_name for pod in cluster.pods.values()})

    result = run_workload(load_workload(WORKLOADS / file, params), inspect=keep)
    assert result.violations == []
    return found


@pytest.mark.parametrize(
    ("file", "params"),
    [
        pytest.param("mixed-scheduling-base-pod.yaml", {"initNodes": 15, "initPods": 6, "measurePods": 40}, id="mixed"),
        pytest.param(
            "scheduling-pod-anti-affinity.yaml", {"initNodes": 30, "initPods": 10, "measurePods": 15}, id="anti"
        ),
        pytest.param(
            "scheduling-pod-affinity.yaml", {"initNodes": 20, "initPods": 10, "measurePods": 15}, id="affinity"
        ),
        pytest.param(
            "scheduling-preferred-pod-anti-affinity.yaml",
            {"initNodes": 20, "initPods": 15, "measurePods": 20},
            id="preferred-anti",
        ),
    ],
)
def test_array_paths_give_the_placements_of_walking_every_node(
    file: str, params: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    columnar = _placements(file, params)
    monkeypatch.setattr(InterPodAffinity, "_columnar", lambda self, nodes: None)
    assert _placements(file, params) == columnar
