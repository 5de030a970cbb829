"""PreFilter/PreScore skips decided by the pod's shape: each plugin's answer agrees with its own call, and the
runtime's skipping gives the outcome, skip sets and cycle state that calling every plugin gives.

A plugin that answers ``pre_filter_skip`` / ``pre_score_skip`` promises that its call returns Skip for every pod
of that :class:`PodShape` and makes exactly the writes it hands back. For generated pods (host ports, volumes of
several kinds, resource claims, node selectors, node and pod affinity, spread constraints, labels a Service
selects) in profiles with and without addedAffinity and List default constraints, the promise is checked against
the call itself; and a real framework's runners are run with the shape plans and with every plugin called (the
path of timed cycles), which must agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod
from kubesched.api.workloads import Service
from kubesched.config.loader import default_config, load_config_dict
from kubesched.config.types import ProfileConfig
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.listers import ListerStores
from kubesched.framework.runtime.framework import Framework, _shape_plan
from kubesched.framework.runtime.outcomes import PreFilterOutcome
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo, PodShape
from kubesched.plugins.registry import in_tree_registry
from kubesched.testing.builders import make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster
from kubesched.testing.storage_builders import make_pvc

REGISTRY = in_tree_registry()

_ADDED_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
    },
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}
    ],
}


def _profile(plugin_config: list[dict[str, Any]]) -> ProfileConfig:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": plugin_config}],
    }
    return load_config_dict(document, "test", REGISTRY).profiles[0]


PROFILES = {
    "default": default_config(REGISTRY).profiles[0],
    "added-affinity-and-hard-list-defaults": _profile(
        [
            {"name": "NodeAffinity", "args": {"addedAffinity": _ADDED_AFFINITY}},
            {
                "name": "PodTopologySpread",
                "args": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    ],
                },
            },
        ]
    ),
    "soft-list-defaults": _profile(
        [
            {
                "name": "PodTopologySpread",
                "args": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                    ],
                },
            },
        ]
    ),
}

_NODE_AFFINITIES: list[dict[str, Any]] = [
    {},
    {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
    {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}]}},
    {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["b"]}]}}]},
]  # fmt: skip

_VOLUMES: list[dict[str, Any]] = [
    {"name": "scratch", "emptyDir": {}},
    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
    {"name": "rwop", "persistentVolumeClaim": {"claimName": "rwop"}},
    {"name": "lost", "persistentVolumeClaim": {"claimName": "missing"}},
    {"name": "disk", "gcePersistentDisk": {"pdName": "pd-1"}},
    {"name": "csi", "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "h"}},
]


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    builder = make_pod("incoming").namespace("ns").container(cpu=draw(st.sampled_from(["0", "100m", "1"])))
    if draw(st.booleans()):
        builder = builder.label("app", draw(st.sampled_from(["web", "db"])))
    if draw(st.integers(0, 3)) == 0:
        builder = builder.host_port(8080)
    for volume in draw(st.lists(st.sampled_from(_VOLUMES), unique_by=lambda v: v["name"], max_size=2)):
        builder = builder.volume(volume)
    if draw(st.integers(0, 5)) == 0:
        builder = builder.ephemeral_volume("eph")
    if draw(st.integers(0, 5)) == 0:
        builder = builder.resource_claim("gpu", claim="gpu-claim")
    if draw(st.integers(0, 3)) == 0:
        builder = builder.node_selector({"zone": draw(st.sampled_from(["a", "c"]))})
    affinity: dict[str, Any] = {}
    node_affinity = draw(st.sampled_from([None, *_NODE_AFFINITIES]))
    if node_affinity is not None:
        affinity["nodeAffinity"] = node_affinity
    if draw(st.integers(0, 3)) == 0:
        term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
        kind = draw(st.sampled_from(["podAffinity", "podAntiAffinity"]))
        if draw(st.booleans()):
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        else:
            affinity[kind] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]
            }
    if affinity or draw(st.integers(0, 7)) == 0:
        builder = builder.affinity(affinity)
    if draw(st.integers(0, 3)) == 0:
        builder = builder.spread(
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        )
    return builder.obj()


def _handle(with_service: bool) -> PluginHandle:
    nodes = [
        make_node("n1").capacity(cpu="4", memory="8Gi").label("zone", "a").obj(),
        make_node("n2").capacity(cpu="4", memory="8Gi").label("zone", "b").obj(),
        make_node("n3").capacity(cpu="4", memory="8Gi").obj(),
    ]
    existing = [
        make_pod("placed").namespace("ns").label("app", "web").node_name("n1").obj(),
        make_pod("guard")
        .namespace("ns")
        .node_name("n2")
        .pod_affinity("app", "In", ["db"], topology_key="zone", anti=True)
        .obj(),
    ]
    cache, _ = make_cluster(nodes, existing)
    stores = ListerStores()
    for name, mode in (("data", "ReadWriteOnce"), ("rwop", "ReadWriteOncePod")):
        stores.persistent_volume_claims.add(make_pvc(name, "ns").access_modes(mode).bound_to(f"pv-{name}").obj())
    if with_service:
        stores.services.add(
            Service.from_dict(
                {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"}}}, "t"
            )
        )
    return PluginHandle(cache, listers=stores.listers())


HANDLES = {False: _handle(False), True: _handle(True)}
FRAMEWORKS = {
    (profile, service): Framework(PROFILES[profile], REGISTRY, HANDLES[service].context)
    for profile in PROFILES
    for service in (False, True)
}


def _value(value: object) -> object:
    """A cycle-state value made comparable: dataclasses field by field (a fresh mutable state is equal to
    another fresh one), arrays and containers element by element, anything else by type and, where it defines
    equality, by value."""
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple((f.name, _value(getattr(value, f.name))) for f in fields(value)))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.tolist())
    if isinstance(value, dict):
        return ("dict", sorted((repr(k), _value(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_value(v) for v in value))
    if type(value).__eq__ is object.__eq__:
        return type(value).__name__
    return value


def _contents(state: CycleState) -> dict[str, object]:
    return {key: _value(value) for key, value in state._data.items()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(), profile=st.sampled_from(sorted(PROFILES)), service=st.booleans())
def test_a_plugins_shape_skip_is_what_its_own_call_does(pod: Pod, profile: str, service: bool) -> None:
    fwk = FRAMEWORKS[(profile, service)]
    info = PodInfo(pod)
    shape = PodShape(info.shape)
    nodes = fwk.snapshot().node_infos
    for point, plugins in (("pre_filter", fwk.pre_filter_plugins), ("pre_score", fwk.pre_score_plugins)):
        for name, plugin in plugins:
            ask = getattr(plugin, f"{point}_skip", None)
            writes = ask(shape) if ask is not None else None
            if writes is None:
                continue
            called, skipped = CycleState(), CycleState()
            returned = getattr(plugin, point)(called, info, nodes)
            assert isinstance(returned, Status) and returned.code is Code.SKIP, (name, point, returned)
            writes(skipped)
            assert _contents(skipped) == _contents(called), (name, point)


@contextmanager
def _plans(fwk: Framework, info: PodInfo, *, every_plugin: bool) -> Iterator[None]:
    """With ``every_plugin``, what a timed cycle runs for ``info``'s shape: every plugin called."""
    kept = fwk._pre_filter_plans, fwk._pre_score_plans
    if every_plugin:
        fwk._pre_filter_plans = {info.shape: fwk._pre_filter_calls}
        fwk._pre_score_plans = {info.shape: fwk._pre_score_calls}
    try:
        yield
    finally:
        fwk._pre_filter_plans, fwk._pre_score_plans = kept


def _pre_filter(fwk: Framework, info: PodInfo, *, every_plugin: bool) -> tuple[PreFilterOutcome, CycleState]:
    state = CycleState()
    with _plans(fwk, info, every_plugin=every_plugin):
        return fwk.run_pre_filter(state, info, fwk.snapshot().node_infos), state


def _pre_score(fwk: Framework, info: PodInfo, *, every_plugin: bool) -> tuple[Status | None, CycleState]:
    state = CycleState()
    with _plans(fwk, info, every_plugin=every_plugin):
        return fwk.run_pre_score(state, info, fwk.snapshot().node_infos), state


def _outcome(outcome: PreFilterOutcome) -> tuple[object, ...]:
    status = outcome.status
    return (
        None if status is None else (status.code, status.reasons, status.plugin),
        None if outcome.result is None else outcome.result.node_names,
        tuple(outcome.narrowed_by),
        frozenset(outcome.rejected_by),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(), profile=st.sampled_from(sorted(PROFILES)), service=st.booleans())
def test_runners_with_shape_plans_equal_calling_every_plugin(pod: Pod, profile: str, service: bool) -> None:
    fwk = FRAMEWORKS[(profile, service)]
    info = PodInfo(pod)
    planned, planned_state = _pre_filter(fwk, info, every_plugin=False)
    called, called_state = _pre_filter(fwk, info, every_plugin=True)
    assert _outcome(planned) == _outcome(called)
    assert planned_state.skip_filter_plugins == called_state.skip_filter_plugins
    assert _contents(planned_state) == _contents(called_state)
    planned_status, planned_state = _pre_score(fwk, info, every_plugin=False)
    called_status, called_state = _pre_score(fwk, info, every_plugin=True)
    assert (planned_status is None) == (called_status is None)
    if planned_status is not None and called_status is not None:
        assert (planned_status.code, planned_status.reasons) == (called_status.code, called_status.reasons)
    assert planned_state.skip_score_plugins == called_state.skip_score_plugins
    assert _contents(planned_state) == _contents(called_state)


def test_a_plain_pod_calls_no_plugin_that_skips_it() -> None:
    """scheduler_perf's pod (requests, a container port without hostPort): of the default PreFilter plugins only
    NodeResourcesFit and InterPodAffinity are called, the rest are skipped without a call, as their calls would."""
    fwk = FRAMEWORKS[("default", False)]
    info = PodInfo(make_pod("plain").namespace("ns").container(cpu="100m", memory="500Mi").obj())
    assert info.shape == 0
    plan = _shape_plan(fwk._pre_filter_plans, fwk.pre_filter_plugins, "pre_filter_skip", info.shape)
    called = [name for name, _, skip in plan if skip is None]
    assert called == ["NodeResourcesFit", "InterPodAffinity"]
    outcome, state = _pre_filter(fwk, info, every_plugin=False)
    assert outcome.status is None
    assert state.skip_filter_plugins == {
        "NodePorts",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeAffinity",
    }
    score_plan = _shape_plan(fwk._pre_score_plans, fwk.pre_score_plugins, "pre_score_skip", info.shape)
    scored = [name for name, _, skip in score_plan if skip is None]
    assert "NodeAffinity" not in scored and "VolumeBinding" not in scored


def test_pod_shape_bits() -> None:
    assert PodInfo(make_pod("p").container(cpu="1").obj()).shape == 0
    shaped = PodInfo(
        make_pod("p")
        .host_port(80)
        .pvc("c")
        .resource_claim("r", claim="c")
        .node_selector({"a": "b"})
        .affinity({"nodeAffinity": {}, "podAntiAffinity": {}})
        .spread({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"})
        .obj()
    )
    assert PodShape(shaped.shape) == (
        PodShape.HOST_PORTS
        | PodShape.VOLUMES
        | PodShape.RESOURCE_CLAIMS
        | PodShape.NODE_SELECTOR
        | PodShape.NODE_AFFINITY
        | PodShape.POD_AFFINITY
        | PodShape.SPREAD_CONSTRAINTS
    )
