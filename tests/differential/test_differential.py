"""kubesched against kube-scheduler v1.35's own code (kube-oracle) on a fixed set of seeded random clusters.

Every cluster of :data:`CI_SEEDS` goes through both (:mod:`.runner`); each pod must get the same result, the same
FailedScheduling message and the same node where kubesched's totals do not tie. Skipped, saying why, without
``$KUBEBUILDER_ASSETS/kube-oracle``. Thousands more seeds: ``python -m tests.differential.run`` (see
docs/reference/compatibility.md). The generator and the minimizer are checked here too, without the oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from kubesched.api.manifests import load_manifests
from kubesched.config.loader import load_config_file
from kubesched.plugins.registry import in_tree_registry

from .compare import Comparison, Problem
from .generator import Manifest, generate, write_files
from .minimize import _drop_units, _pin
from .runner import Outcome, check, find_oracle, oracle_view

# Seeds the CI runs, about a minute and a half of kube-oracle on a 2-core machine: each agreed, with kube-oracle
# giving the same answers, in three screenings. Where kube-scheduler's own runs differ (its preemption and binding
# race with later cycles) a comparison can fail by chance; those clusters are left to the large runs
# (docs/reference/compatibility.md). No measurement uses these seeds.
STABLE_DEFAULT: tuple[int, ...] = (1, 2, 3, 4, 6, 7, 10, 11, 12, 13, 15, 16, 18, 19, 21, 22, 23, 24, 26, 27, 29, 31)
STABLE_DEFAULT += (32, 34, 35, 36, 38, 39, 41, 44, 45, 46, 48, 49, 50, 51)
STABLE_PROFILES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 18)
CI_SEEDS = [("default", seed) for seed in STABLE_DEFAULT] + [("profiles", seed) for seed in STABLE_PROFILES]
ORACLE = find_oracle()
NEEDS_ORACLE = pytest.mark.skipif(
    ORACLE is None,
    reason='kube-oracle not found: export KUBEBUILDER_ASSETS="$(/work/shared/envtest/setup.sh)" '
    "(or setup-envtest's directory with kube-oracle in it)",
)


@NEEDS_ORACLE
@pytest.mark.parametrize(("mode", "seed"), CI_SEEDS, ids=[f"{mode}-{seed}" for mode, seed in CI_SEEDS])
def test_kubesched_agrees_with_kube_scheduler_on_a_random_cluster(mode: str, seed: int) -> None:
    assert ORACLE is not None
    scenario = generate(seed, mode)
    outcome = check(scenario.objects, scenario.config, ORACLE)
    assert outcome.comparison.pods > 0
    assert outcome.agrees, (
        f"{scenario.name} differs from kube-oracle; reproduce and shrink with "
        f"python -m tests.differential.run --mode {mode} --seeds {seed} -v --minimize --keep /tmp/case\n"
        + "\n".join(outcome.comparison.texts)
    )


def test_a_seed_always_gives_the_same_cluster_and_seeds_differ() -> None:
    assert generate(7).objects == generate(7).objects
    assert generate(7).objects != generate(8).objects
    assert generate(7, "profiles").config != generate(7).config


def test_the_generated_files_load_in_kubesched(tmp_path: Path) -> None:
    """Every object is read without a finding (a manifest error would make the comparison meaningless)."""
    registry = in_tree_registry()
    for mode, seed in CI_SEEDS[:4] + CI_SEEDS[-2:]:
        scenario = generate(seed, mode)
        cluster, config = write_files(tmp_path / scenario.name, scenario.objects, scenario.config)
        loaded = load_manifests([str(cluster)], strict=True)
        assert len(loaded.pods) == len(scenario.pods())
        assert len(loaded.nodes) == sum(1 for obj in scenario.objects if obj["kind"] == "Node")
        profiles = load_config_file(str(config), registry).profiles
        assert profiles[0].scheduler_name == "default-scheduler"


FEATURES = {
    "node:capacity-only",
    "node:unschedulable",
    "node:taints",
    "node:images",
    "node:gpu",
    "running:over-commit",
    "running:terminating",
    "running:finished",
    "pod:host-ports",
    "pod:host-network",
    "pod:node-affinity-required",
    "pod:node-affinity-preferred",
    "pod:node-affinity-match-fields",
    "pod:affinity-required",
    "pod:anti-affinity-required",
    "pod:affinity:namespace-selector",
    "pod:anti-affinity:namespaces",
    "pod:anti-affinity:mismatchLabelKeys",
    "pod:topology-spread",
    "spread:min-domains",
    "spread:node-affinity-policy",
    "spread:node-taints-policy",
    "spread:match-label-keys",
    "pod:nominated",
    "pod:scheduling-gates",
    "pod:init-containers",
    "pod:sidecar",
    "pod:overhead",
    "pod:pod-level-resources",
    "pod:inline-disk",
    "pod:missing-claim",
    "pdb",
    "container:limits-only",
    "container:hugepages",
    "container:ephemeral-storage",
}


def test_a_hundred_seeds_cover_every_input_the_generator_knows() -> None:
    seen: set[str] = set()
    for seed in range(100):
        seen.update(generate(seed).features)
    assert seen >= FEATURES, sorted(FEATURES - seen)
    profiles: set[str] = set()
    for seed in range(30):
        profiles.update(name for name in generate(seed, "profiles").features if name.startswith("profile:"))
    assert len(profiles) == 5, profiles


def test_the_oracle_reads_no_finished_pods() -> None:
    objects = generate(3).objects
    finished = [
        obj for obj in objects if obj["kind"] == "Pod" and obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
    ]
    assert finished, "seed 3 has a finished pod"
    view = oracle_view(objects)
    assert len(view) == len(objects) - len(finished)
    assert not any(o in view for o in finished)


def _node(name: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _pod(name: str, node: str = "") -> Manifest:
    spec: Manifest = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_delta_debugging_keeps_exactly_what_the_difference_needs() -> None:
    """A stand-in for the oracle: the 'difference' shows while pod p7 and node n2 (with its pod r2) are there."""
    objects = [_node(f"n{i}") for i in range(4)] + [_pod("r2", "n2")] + [_pod(f"p{i}") for i in range(10)]

    def still_differs(candidate: Sequence[Manifest]) -> bool:
        names = {obj["metadata"]["name"] for obj in candidate}
        return {"p7", "n2", "r2"} <= names

    kept = _drop_units(list(objects), still_differs, lambda line: None)
    assert sorted(obj["metadata"]["name"] for obj in kept) == ["n2", "p7", "r2"]


def test_pinning_turns_pods_placed_alike_before_the_target_into_running_pods() -> None:
    objects = [_node("n1"), _pod("a"), _pod("b"), _pod("target"), _pod("later")]
    ours = [
        {"namespace": "default", "name": name, "node": node}
        for name, node in (("a", "n1"), ("b", "n1"), ("target", None), ("later", "n1"))
    ]
    oracle = [{**pod, "node": "n1" if pod["name"] != "b" else "n2"} for pod in ours]
    outcome = Outcome(comparison=_no_comparison(), oracle_pods=oracle, ours=ours)
    pinned = {obj["metadata"]["name"]: obj for obj in _pin(objects, outcome, "default/target")}
    assert pinned["a"]["spec"]["nodeName"] == "n1" and pinned["a"]["status"] == {"phase": "Running"}
    assert "nodeName" not in pinned["b"]["spec"], "placed differently: left to be scheduled"
    assert "nodeName" not in pinned["later"]["spec"], "after the target: left to be scheduled"
    assert [obj["metadata"]["name"] for obj in _pin(objects, outcome, "default/target")][:2] == ["n1", "a"]


def _no_comparison() -> Comparison:
    return Comparison(problems=[Problem("default/target", "message", "")])


def test_written_files_are_the_yaml_of_the_objects(tmp_path: Path) -> None:
    scenario = generate(11)
    cluster, config = scenario.write(tmp_path)
    assert list(yaml.safe_load_all(cluster.read_text())) == scenario.objects
    assert yaml.safe_load(config.read_text()) == scenario.config
