"""Property test: VolumeBinding's and VolumeZone's ``filter_batch`` answer exactly what ``filter`` answers.

Random clusters of nodes with hostname/zone/region labels, random volumes (classes, sizes, access modes,
phases, claim references, node affinity and zone labels, some malformed) and random claims (bound,
pre-bound, WaitForFirstConsumer, immediate, selected-node, missing classes) are filtered per node and in
batch, over the whole snapshot and a subset, each on a fresh cycle state.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Node
from kubesched.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.listers import ListerStores
from kubesched.framework.types import PodInfo
from kubesched.plugins.volumebinding import VolumeBinding
from kubesched.plugins.volumezone import VolumeZone
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, batch_of, expand_batch_result, make_cluster
from kubesched.testing.storage_builders import make_pv, make_pvc, make_storage_class

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
NODE_NAMES = tuple(f"n{i}" for i in range(6))
ZONES = ("z1", "z2", "z3")
CLASSES = ("wait", "wait-csi", "immediate", "gone", "")
CLAIMS = tuple(f"c{i}" for i in range(5))
SIZES = ("1Gi", "5Gi", "10Gi")

STORAGE_CLASSES = [
    make_storage_class("wait").wait_for_first_consumer().obj(),
    make_storage_class("wait-csi")
    .provisioner("csi.example.com")
    .wait_for_first_consumer()
    .allowed_topology({ZONE: ["z1", "z2"]})
    .obj(),
    make_storage_class("immediate").obj(),
]


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    names = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=6, unique=True))
    built = []
    for name in names:
        builder = make_node(name)
        if draw(st.booleans()):
            builder.label(HOSTNAME, name)
        zone = draw(st.sampled_from((None, *ZONES)))
        if zone is not None:
            builder.label(draw(st.sampled_from((ZONE, BETA_ZONE))), zone)
        if draw(st.booleans()):
            builder.label(REGION, draw(st.sampled_from(("r1", "r2"))))
        built.append(builder.obj())
    return built


@st.composite
def volume(draw: st.DrawFn, index: int) -> PersistentVolume:
    builder = make_pv(f"pv{index}").capacity(draw(st.sampled_from(SIZES)))
    builder.storage_class(draw(st.sampled_from(CLASSES[:3])))
    builder.access_modes(draw(st.sampled_from(("ReadWriteOnce", "ReadWriteMany"))))
    builder.phase(draw(st.sampled_from(("Available", "Available", "Bound", "Pending"))))
    affinity = draw(st.sampled_from(("none", "host", "zone")))
    if affinity == "host":
        builder.node_affinity({HOSTNAME: [draw(st.sampled_from(NODE_NAMES))]})
    elif affinity == "zone":
        builder.node_affinity({ZONE: draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))})
    label = draw(st.sampled_from((None, "z1", "z2", "z1__z3", "z2__")))
    if label is not None:
        builder.label(draw(st.sampled_from((ZONE, BETA_ZONE))), label)
    if draw(st.integers(0, 5)) == 0:
        builder.claim_ref(draw(st.sampled_from(CLAIMS)))
    return builder.obj()


@st.composite
def claim(draw: st.DrawFn, name: str, volume_names: list[str]) -> PersistentVolumeClaim:
    builder = make_pvc(name).request(draw(st.sampled_from(SIZES)))
    class_name = draw(st.sampled_from(CLASSES))
    if class_name:
        builder.storage_class(class_name)
    builder.access_modes(draw(st.sampled_from(("ReadWriteOnce", "ReadWriteMany"))))
    kind = draw(st.sampled_from(("unbound", "unbound", "bound", "prebound", "selected")))
    if kind == "bound":
        builder.bound_to(draw(st.sampled_from([*volume_names, "pv-missing"])))
    elif kind == "prebound":
        builder.volume_name(draw(st.sampled_from([*volume_names, "pv-missing"])))
    elif kind == "selected":
        builder.selected_node(draw(st.sampled_from(NODE_NAMES)))
    return builder.obj()


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    cluster_nodes = draw(nodes())
    volumes = [draw(volume(i)) for i in range(draw(st.integers(0, 6)))]
    names = [v.name for v in volumes]
    claims = [draw(claim(name, names)) for name in CLAIMS if draw(st.booleans())]
    wanted = draw(st.lists(st.sampled_from(CLAIMS), min_size=0, max_size=3, unique=True))
    subset = draw(st.lists(st.sampled_from([n.metadata.name for n in cluster_nodes]), unique=True))
    return {"nodes": cluster_nodes, "volumes": volumes, "claims": claims, "wanted": wanted, "subset": subset}


def classes() -> list[StorageClass]:
    return STORAGE_CLASSES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_batch_equals_per_node(scenario: dict[str, Any]) -> None:
    stores = ListerStores()
    for v in scenario["volumes"]:
        stores.persistent_volumes.add(v)
    for c in scenario["claims"]:
        stores.persistent_volume_claims.add(c)
    for sc in classes():
        stores.storage_classes.add(sc)
    cache, snapshot = make_cluster(scenario["nodes"])
    handle = PluginHandle(cache, listers=stores.listers())
    builder = make_pod("p")
    for name in scenario["wanted"]:
        builder.pvc(name)
    pod = PodInfo(builder.obj())
    for plugin in (VolumeBinding(None, handle), VolumeZone(None, handle)):
        for names in (None, scenario["subset"]):
            batch = batch_of(snapshot, names)
            per_node_state, batch_state = CycleState(), CycleState()
            pre = plugin.pre_filter(per_node_state, pod, snapshot.node_infos)
            assert plugin.pre_filter(batch_state, pod, snapshot.node_infos) == pre
            per_node = [plugin.filter(per_node_state, pod, info) for info in batch.infos]
            got = expand_batch_result(plugin.filter_batch(batch_state, pod, batch), len(batch))
            assert got == per_node, (plugin.name, pre)
