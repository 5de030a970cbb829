"""The realistic bench shapes (issue 11, item 1): their workload fields, small runs of the bundled shapes, the
node heartbeat, the CPU and RSS columns and ``bench --compare``. Speed itself is never asserted here."""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubesched.bench
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.bench.runner import BENCH_INDEX, BenchResult, node_images, run_workload
from kubesched.bench.runner import main as bench_main
from kubesched.bench.workload import ImageSpec, WorkloadError, load_workload, parse_workload
from kubesched.cli.main import build_parser
from kubesched.cli.main import main as cli_main
from kubesched.policy.embedded import EmbeddedRegoEngine
from kubesched.policyapi.contract import Step, pod_document

WORKLOADS = Path(kubesched.bench.__file__).parent / "workloads"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"
TINY = {"initNodes": 60, "initPods": 20, "measurePods": 200}


def run_small(file: str, **params: int) -> tuple[BenchResult, SimulatedCluster]:
    captured: list[SimulatedCluster] = []
    result = run_workload(load_workload(WORKLOADS / file, params), inspect=captured.append)
    [cluster] = captured
    return result, cluster


def pod(name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": f"{name}-"}, "spec": {"containers": []}}


def document(nodes: dict[str, Any] | None = None, pods: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-node, one-pod workload; ``nodes`` / ``pods`` are extra fields of its createNodes / createPods op."""
    return {
        "name": "x",
        "nodeTemplate": {"metadata": {"generateName": "n-"}},
        "podTemplate": pod(),
        "ops": [
            {"opcode": "createNodes", "count": 1, **(nodes or {})},
            {"opcode": "createPods", "count": 1, **(pods or {})},
        ],
    }


# ---- the new fields parse, and bad values are errors naming the field ----------------------------------


def test_the_realistic_shape_parses_into_labels_images_taints_and_a_template_cycle() -> None:
    workload = load_workload(WORKLOADS / "scheduling-basic-realistic-churn.yaml")
    nodes, setup, measured = workload.ops
    assert nodes.node_labels == ((REGION, ("region-1",)), (ZONE, ("zone-a", "zone-b", "zone-c")))
    assert nodes.images == ImageSpec(20, 60, 10 * 2**20, 800 * 2**20, 11, "registry.k8s.io/bench/image-")
    assert [(t.key, t.value, t.effect, t.every) for t in nodes.taints] == [("dedicated", "infra", "NoSchedule", 10)]
    prefixes = [t["metadata"]["generateName"] for t in measured.templates]
    assert prefixes == ["web-"] * 4 + ["api-"] * 2 + ["batch-", "agent-"]
    assert (setup.heartbeat_every, measured.heartbeat_every) == (0, 100)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param(
            document({"labelNodePrepareStrategy": [{"labelKey": "k", "labelValues": ["a"]}] * 2}),
            "ops[0].labelNodePrepareStrategy[1].labelKey: Duplicate value: 'k'",
            id="label-strategies-with-one-key-twice",
        ),
        pytest.param(
            document({"images": {"perNode": 20}}), "ops[0].images.poolSize: Required value", id="images-without-pool"
        ),
        pytest.param(
            document({"images": {"perNode": 21, "poolSize": 20}}),
            "ops[0].images.perNode: must be at most poolSize (20)",
            id="more-images-per-node-than-the-pool-has",
        ),
        pytest.param(
            document({"images": {"perNode": 2, "poolSize": 4, "minSizeMB": 900}}),
            "ops[0].images.maxSizeMB: must be at least minSizeMB (900), got 800",
            id="image-sizes-upside-down",
        ),
        pytest.param(
            document({"images": {"perNode": 2, "poolSize": 4, "sizeMB": 3}}),
            "ops[0].images: unknown field 'sizeMB'",
            id="images-with-an-unknown-field",
        ),
        pytest.param(
            document({"images": {"perNode": -1, "poolSize": 4}}),
            "ops[0].images.perNode: must be a non-negative integer, got -1",
            id="negative-images-per-node",
        ),
        pytest.param(
            document({"taints": [{"key": "d", "effect": "NoRun", "every": 10}]}),
            "ops[0].taints[0].effect: Unsupported value: 'NoRun'",
            id="taint-with-an-unknown-effect",
        ),
        pytest.param(
            document({"taints": [{"key": "d", "effect": "NoSchedule", "every": 0}]}),
            "ops[0].taints[0].every: must be greater than zero",
            id="taint-on-every-0th-node",
        ),
        pytest.param(
            document({"taints": [{"effect": "NoSchedule", "every": 2}]}),
            "ops[0].taints[0].key: must be a non-empty string",
            id="taint-without-a-key",
        ),
        pytest.param(
            document({"taints": [{"key": "d", "effect": "NoSchedule", "every": 2}] * 2}),
            "ops[0].taints[1]: Duplicate value",
            id="one-taint-twice",
        ),
        pytest.param(
            document(pods={"podTemplates": []}),
            "ops[1].podTemplates: must be a non-empty list",
            id="no-pod-templates",
        ),
        pytest.param(
            document(pods={"podTemplates": [{"template": pod(), "weight": 0}]}),
            "ops[1].podTemplates[0].weight: must be greater than zero",
            id="pod-template-weight-zero",
        ),
        pytest.param(
            document(pods={"podTemplates": [{"weight": 2}]}),
            "ops[1].podTemplates[0].template: Required value",
            id="pod-template-entry-without-template",
        ),
        pytest.param(
            document(pods={"podTemplates": [{"template": pod(), "weight": 1001}]}),
            "ops[1].podTemplates: the weights add up to 1001",
            id="pod-template-weights-too-large",
        ),
        pytest.param(
            document(pods={"podTemplate": pod(), "podTemplates": [{"template": pod()}]}),
            "ops[1].podTemplates: Forbidden: set podTemplate or podTemplates, not both",
            id="pod-template-and-templates",
        ),
        pytest.param(
            document(pods={"nodeHeartbeatEveryPods": 0}),
            "ops[1].nodeHeartbeatEveryPods: must be greater than zero",
            id="heartbeat-every-0-pods",
        ),
        pytest.param(
            document(pods={"nodeHeartbeatEveryPods": "often"}),
            "ops[1].nodeHeartbeatEveryPods: must be a non-negative integer, got 'often'",
            id="heartbeat-not-a-number",
        ),
        pytest.param(
            document(pods={"uniqueAnnotations": "yes"}),
            "ops[1].uniqueAnnotations: must be true or false",
            id="unique-annotations-not-a-flag",
        ),
        pytest.param(
            document({"nodeHeartbeatEveryPods": 10}),
            "ops[0]: unknown field 'nodeHeartbeatEveryPods'",
            id="heartbeat-on-a-node-op",
        ),
    ],
)
def test_bad_realistic_fields_are_errors_naming_file_and_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError) as exc:
        parse_workload(doc, "w.yaml")
    assert str(exc.value).startswith("w.yaml: ")
    assert message in str(exc.value)


def test_pod_templates_take_turns_by_weight() -> None:
    doc = document(pods={"podTemplates": [{"template": pod("a"), "weight": 2}, {"template": pod("b")}], "count": 7})
    op = parse_workload(doc, "w.yaml").ops[1]
    assert [op.template_for(i)["metadata"]["generateName"] for i in range(7)] == ["a-", "a-", "b-"] * 2 + ["a-"]


# ---- realistic nodes ------------------------------------------------------------------------------------


def test_node_images_are_seeded_and_differ_between_nodes() -> None:
    spec = ImageSpec(20, 60, 10 * 2**20, 800 * 2**20, 11, "registry.k8s.io/bench/image-")
    first = node_images(spec, 3)
    assert first == node_images(spec, 3)  # every run gives node 3 the same images
    assert len({entry["names"][0] for entry in first}) == 20
    assert first != node_images(spec, 4)
    assert node_images(spec, 3) != node_images(ImageSpec(20, 60, 10 * 2**20, 800 * 2**20, 12, spec.prefix), 3)
    sizes = {entry["names"][0]: entry["sizeBytes"] for index in range(10) for entry in node_images(spec, index)}
    assert all(10 * 2**20 <= size <= 800 * 2**20 for size in sizes.values())
    for index in range(10):  # one image, one size, whichever node has it
        assert all(sizes[entry["names"][0]] == entry["sizeBytes"] for entry in node_images(spec, index))


def test_realistic_nodes_carry_labels_images_and_taints_and_pods_follow_them() -> None:
    result, cluster = run_small("scheduling-basic-realistic.yaml", **TINY)
    assert (result.scheduled, result.violations) == (200, [])
    nodes = list(cluster.nodes.values())
    assert all(node.metadata.labels[HOSTNAME] == node.metadata.name for node in nodes)
    assert {node.metadata.labels[REGION] for node in nodes} == {"region-1"}
    assert Counter(node.metadata.labels[ZONE] for node in nodes) == {"zone-a": 20, "zone-b": 20, "zone-c": 20}
    assert all(len(node.images) == 20 for node in nodes)
    assert len({tuple(image.names for image in node.images) for node in nodes}) == len(nodes)
    tainted = {node.metadata.name for node in nodes if node.taints}
    assert tainted == {f"scheduler-perf-{i}" for i in range(0, 60, 10)}
    bound = [p for p in cluster.pods.values() if p.spec.node_name]
    assert {p.name.split("-")[0] for p in bound if p.spec.node_name in tainted} <= {"agent"}
    assert Counter(p.name.split("-")[0] for p in bound) == {"web": 112, "api": 54, "batch": 27, "agent": 27}
    # ImageLocality matters: with room everywhere, web pods go where their image is (a third of the nodes have it).
    web = [p for p in bound if p.name.startswith("web-")]
    with_image = [
        p
        for p in web
        if any("registry.k8s.io/bench/image-3:1.0" in i.names for i in cluster.nodes[p.spec.node_name].images)
    ]
    assert len(with_image) > 0.8 * len(web)


# ---- every new bundled shape, small: everything scheduled that should be, placements checked ------------


@pytest.mark.parametrize(
    ("file", "name", "params", "pending"),
    [
        pytest.param("scheduling-basic-realistic.yaml", "SchedulingBasicRealistic", TINY, 0, id="realistic"),
        pytest.param(
            "scheduling-basic-churn.yaml", "SchedulingBasicChurn", {**TINY, "heartbeatEveryPods": 10}, 0, id="churn"
        ),
        pytest.param(
            "scheduling-basic-realistic-churn.yaml",
            "SchedulingBasicRealisticChurn",
            {**TINY, "heartbeatEveryPods": 10},
            0,
            id="realistic-churn",
        ),
        pytest.param(
            "unschedulable-waiting.yaml", "UnschedulableWaiting", {**TINY, "waitingPods": 30}, 30, id="waiting"
        ),
        pytest.param(
            "security-audit-churn.yaml", "SecurityAuditChurn", {**TINY, "heartbeatEveryPods": 10}, 0, id="audit-churn"
        ),
        pytest.param("security-audit-distinct.yaml", "SecurityAuditDistinct", TINY, 0, id="audit-distinct"),
    ],
)
def test_each_new_shape_schedules_its_measured_pods_and_passes_the_checks(
    file: str, name: str, params: dict[str, int], pending: int
) -> None:
    result, cluster = run_small(file, **params)
    assert result.workload == name
    assert (result.nodes, result.measured_pods, result.scheduled) == (60, 200, 200)
    assert (result.pending, result.violations) == (pending, [])
    assert all(not p.spec.node_name for p in cluster.pods.values() if p.namespace == "sched-waiting")


@pytest.mark.parametrize(
    ("file", "sizes"),
    [
        pytest.param("scheduling-basic-realistic.yaml", (5000, 1000, 10000), id="realistic"),
        pytest.param("scheduling-basic-churn.yaml", (5000, 1000, 10000), id="churn"),
        pytest.param("scheduling-basic-realistic-churn.yaml", (5000, 1000, 10000), id="realistic-churn"),
        pytest.param("unschedulable-waiting.yaml", (5000, 1000, 1000, 10000), id="waiting"),
        pytest.param("security-audit-churn.yaml", (5000, 1000, 10000), id="audit-churn"),
        pytest.param("security-audit-distinct.yaml", (5000, 1000, 1000), id="audit-distinct"),
    ],
)
def test_new_shapes_default_to_the_issue_sizes(file: str, sizes: tuple[int, ...]) -> None:
    assert tuple(op.count for op in load_workload(WORKLOADS / file).ops) == sizes


# ---- the heartbeat updates nodes through the cluster -------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "versions"),
    [
        pytest.param(20, Counter({"": 50, "1": 10}), id="200-pods-every-20-updates-10-nodes-once"),
        pytest.param(2, Counter({"1": 20, "2": 40}), id="100-beats-wrap-around-60-nodes"),
    ],
)
def test_the_heartbeat_updates_a_node_every_n_bindings(every: int, versions: Counter[str]) -> None:
    result, cluster = run_small("scheduling-basic-realistic-churn.yaml", **{**TINY, "heartbeatEveryPods": every})
    assert result.violations == []
    assert Counter(node.metadata.resource_version for node in cluster.nodes.values()) == versions
    beaten = [node for node in cluster.nodes.values() if node.metadata.resource_version]
    stamps = [
        c.get("lastHeartbeatTime") for node in beaten for c in node.raw["status"]["conditions"] if c["type"] == "Ready"
    ]
    assert all(stamp and stamp.startswith("2026-01-01T") for stamp in stamps) and len(stamps) == len(beaten)
    assert all(len(node.images) == 20 and node.allocatable["cpu"] == 4000 for node in beaten)  # nothing else changed


def test_without_the_heartbeat_no_node_is_updated() -> None:
    _, cluster = run_small("scheduling-basic-realistic.yaml", **TINY)
    assert {node.metadata.resource_version for node in cluster.nodes.values()} == {""}


# ---- SecurityAuditDistinct: distinct pods, equal policy-visible facts -------------------------------------


def _placements(cluster: SimulatedCluster) -> dict[str, str]:
    return {p.key: p.spec.node_name for p in cluster.pods.values() if p.namespace == "sched-test"}


def test_distinct_pods_differ_only_where_the_policy_does_not_look() -> None:
    result, cluster = run_small("security-audit-distinct.yaml", **TINY)
    measured = [p for p in cluster.pods.values() if p.namespace == "sched-test"]
    assert len({p.metadata.annotations[BENCH_INDEX] for p in measured}) == len(measured) == 200
    assert len({json.dumps(pod_document(p), sort_keys=True) for p in measured}) == 200  # every input differs
    stripped = set()
    for p in measured:
        doc = pod_document(p)
        doc["metadata"]["annotations"] = {k: v for k, v in doc["metadata"]["annotations"].items() if k != BENCH_INDEX}
        del doc["spec"]["volumes"]  # the pod's own token volume, mounted in its container
        for container in doc["spec"]["containers"]:
            del container["volumeMounts"]
        stripped.add(json.dumps(doc, sort_keys=True))
    assert len(stripped) == 1  # ... only in the annotation and the token mount
    policy = (WORKLOADS / "security" / "placement.rego").read_text()
    assert "annotations" not in policy and "volume" not in policy  # which the policy never reads
    # ... and which its analysis knows it never reads: of the containers, only each one's image and their number.
    engine = EmbeddedRegoEngine([str(WORKLOADS / "security" / "placement.rego")])
    assert [path for path in engine.input_paths.below("pod") or () if path[:2] == ("spec", "containers")] == [
        ("spec", "containers", Step.COUNT),
        ("spec", "containers", Step.EACH, "image"),
    ]
    # Equal decisions: the same placements as SecurityAudit, whose replicas share theirs.
    _, audit = run_small("security-audit.yaml", **TINY)
    assert _placements(cluster) == _placements(audit)
    assert result.violations == []
    assert result.cpu_us_per_pod == pytest.approx((result.cpu_seconds + result.helper_cpu_seconds) / 200 * 1e6)


def test_distinct_pods_reuse_the_policy_decisions() -> None:
    result, _ = run_small("security-audit-distinct.yaml", **TINY)
    audit, _ = run_small("security-audit.yaml", **TINY)
    assert result.policy_calls <= audit.policy_calls + 2


@pytest.mark.skipif(sys.platform != "linux", reason="helper CPU is read from /proc")
def test_the_policy_workers_cpu_counts_per_pod() -> None:
    # A unique label, which the policy reads (it reads the labels object whole): one evaluation per pod, in the
    # embedded engine's worker process, whose CPU the per-pod column includes.
    result, _ = run_small("security-audit-uncached.yaml", initNodes=60, measurePods=200)
    assert result.policy_calls >= 200
    assert result.helper_cpu_seconds > 0
    assert result.cpu_us_per_pod == pytest.approx((result.cpu_seconds + result.helper_cpu_seconds) / 200 * 1e6)


# ---- the CPU and RSS columns; --compare ------------------------------------------------------------------


def tiny(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKLOADS / "scheduling-basic-small.yaml").read_text())
    doc.update(name=name, params={"initNodes": 3, "initPods": 2, "measurePods": 5})
    return dict(doc)


def bench(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["bench", "--workload-dir", str(tmp_path), *argv])
    code = bench_main(args, out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def workloads(tmp_path: Path) -> Path:
    for name in ("First", "Second"):
        (tmp_path / f"{name.lower()}.yaml").write_text(yaml.safe_dump(tiny(name)))
    return tmp_path


def test_every_row_reports_cpu_per_pod_and_peak_rss(workloads: Path) -> None:
    code, out, _ = bench(workloads, "First", "-o", "json")
    assert code == 0
    [row] = json.loads(out)["results"]
    assert row["cpu_us_per_pod"] > 0 and row["cpu_seconds"] > 0 and row["peak_rss_mb"] > 10
    assert row["helper_cpu_seconds"] == 0  # no policy engine: no helper process
    assert row["cpu_us_per_pod"] == pytest.approx(row["cpu_seconds"] / row["measured_pods"] * 1e6)
    code, out, _ = bench(workloads, "First")
    header, first = out.splitlines()[:2]
    assert "CPU US/POD" in header and "PEAK RSS MB" in header
    for column in ("CPU US/POD", "PEAK RSS MB"):  # the cell under each header is a positive number
        assert float(first[header.index(column) :].split()[0]) > 0


@pytest.mark.parametrize("output", ["table", "json"])
def test_compare_gives_ratios_per_workload_and_names_the_missing(workloads: Path, output: str) -> None:
    code, out, _ = bench(workloads, "First", "-o", "json")
    baseline = workloads / "base.json"
    baseline.write_text(out)
    code, out, err = bench(workloads, "First", "Second", "-o", output, "--compare", str(baseline))
    assert code == 0, err
    if output == "json":
        comparison = json.loads(out)["comparison"]
        first, second = comparison["workloads"]
        assert comparison["baseline"] == str(baseline)
        assert first["workload"] == "First" and not first["missing"]
        assert all(first[k] > 0 for k in ("throughput_ratio", "p50_ratio", "cpu_per_pod_ratio"))
        assert second == {"workload": "Second", "missing": True}
    else:
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("compared with"))
        assert str(baseline) in lines[start]
        first_line = next(line for line in lines[start:] if line.startswith("First"))
        assert first_line.count("x (was") == 3
        assert any(line.split() == ["Second", "missing", "from", "the", "baseline"] for line in lines[start:])


def test_compare_with_a_baseline_without_cpu_gives_no_cpu_ratio(workloads: Path) -> None:
    _, out, _ = bench(workloads, "First", "-o", "json")
    document = json.loads(out)
    for row in document["results"]:
        del row["cpu_us_per_pod"]
    (workloads / "old.json").write_text(json.dumps(document))
    code, out, _ = bench(workloads, "First", "-o", "json", "--compare", str(workloads / "old.json"))
    [first] = json.loads(out)["comparison"]["workloads"]
    assert code == 0 and first["cpu_per_pod_ratio"] is None and first["throughput_ratio"] > 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b'{"results": [', "not JSON (line 1, column 14", id="truncated-json"),
        pytest.param(b"\xff\xfe\x00", "not UTF-8 text", id="binary"),
        pytest.param(b"[1, 2]", "not a `kubesched bench -o json` document (no results list)", id="a-list"),
        pytest.param(b'{"machine": "x"}', "(no results list)", id="no-results"),
        pytest.param(b'{"results": [3]}', "results[0]: must be an object", id="result-not-an-object"),
        pytest.param(b'{"results": [{"throughput": 1}]}', "results[0].workload: Required value", id="no-workload"),
        pytest.param(
            b'{"results": [{"workload": "First", "throughput": "fast", "p50_ms": 1}]}',
            "results[0].throughput: must be a non-negative number, got 'fast'",
            id="throughput-not-a-number",
        ),
    ],
)
def test_a_bad_baseline_is_one_line_naming_the_file_and_runs_nothing(
    workloads: Path, content: bytes, message: str
) -> None:
    baseline = workloads / "bad.json"
    baseline.write_bytes(content)
    code, out, err = bench(workloads, "First", "--compare", str(baseline))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: --compare: {baseline}: ")
    assert message in err


def test_a_missing_baseline_is_one_line(workloads: Path) -> None:
    code, _, err = bench(workloads, "First", "--compare", str(workloads / "nope.json"))
    assert code == 2 and err == f"error: --compare: {workloads / 'nope.json'}: No such file or directory\n"


def test_compare_is_refused_with_the_api_bench(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "--api", "--compare", "base.json"]) == 2
    assert capsys.readouterr().err == "error: --compare works with the in-process bench, not with --api\n"


@pytest.mark.parametrize(
    ("file", "params"),
    [
        pytest.param("scheduling-basic-realistic.yaml", TINY, id="realistic"),
        pytest.param("scheduling-basic-churn.yaml", {**TINY, "heartbeatEveryPods": 10}, id="churn"),
        pytest.param("scheduling-basic-realistic-churn.yaml", {**TINY, "heartbeatEveryPods": 10}, id="realistic-churn"),
        pytest.param("unschedulable-waiting.yaml", {**TINY, "waitingPods": 30}, id="waiting"),
        pytest.param("security-audit-churn.yaml", {**TINY, "heartbeatEveryPods": 10}, id="audit-churn"),
        pytest.param("security-audit-distinct.yaml", {**TINY, "measurePods": 50}, id="audit-distinct"),
    ],
)
def test_each_new_shape_places_every_pod_alike_on_the_batch_and_the_per_node_path(
    file: str, params: dict[str, int]
) -> None:
    """The reference the hot-path work (issue 11 items 2-5) must keep: same seed, same placements."""
    placements = []
    for use_batch in (True, False):
        captured: list[SimulatedCluster] = []
        result = run_workload(load_workload(WORKLOADS / file, params), use_batch=use_batch, inspect=captured.append)
        assert result.violations == []
        placements.append({p.key: p.spec.node_name for p in captured[0].pods.values()})
    assert placements[0] == placements[1]
