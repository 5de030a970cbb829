"""DynamicResources: upstream v1.35's answers for pods without ResourceClaims (dynamicresources_test.go's
"no claims" cases: PreEnqueue admits, PreFilter skips, PostFilter has no claims to deallocate, Reserve and
PreBind do nothing), and kubesched's refusal of pods with claims, per plugin and through a whole
simulation of the default profile."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubesched.api.manifests import load_manifests
from kubesched.config.loader import default_config, load_config_file
from kubesched.errors import ManifestError, ValidationFailed
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.plugins.dynamicresources import DynamicResources, DynamicResourcesArgs
from kubesched.plugins.dynamicresources.dynamic_resources import ERR_REASON_NO_CLAIMS, ERR_REASON_UNSUPPORTED
from kubesched.plugins.registry import in_tree_registry
from kubesched.simulation.run import simulate
from kubesched.testing.builders import PodBuilder, make_node, make_pod
from kubesched.testing.framework_helpers import PluginHandle, make_cluster

UNSUPPORTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSUPPORTED)


def plugin() -> DynamicResources:
    return DynamicResources(None, PluginHandle())


def claiming(builder: PodBuilder) -> PodBuilder:
    return builder.resource_claim("gpu", template="single-gpu")


def test_a_pod_without_claims_passes_through_like_upstream() -> None:
    cache, snapshot = make_cluster([make_node("n").obj()])
    pl = DynamicResources(None, PluginHandle(cache))
    pod = PodInfo(make_pod().obj())
    state = CycleState()
    assert pl.pre_enqueue(pod) is None
    assert pl.pre_filter(state, pod, snapshot.node_infos) == Status(Code.SKIP)
    assert pl.filter(state, pod, snapshot.node_infos[0]) is None
    assert pl.post_filter(state, pod, {}) == (None, Status(Code.UNSCHEDULABLE, "no new claims to deallocate"))
    assert pl.reserve(state, pod, "n") is None
    pl.unreserve(state, pod, "n")
    assert asyncio.run(pl.pre_bind(state, pod, "n")) is None


def test_post_filter_fails_like_upstream_when_an_earlier_prefilter_rejected_the_pod() -> None:
    # VolumeBinding's PreFilter (say) rejected the pod before ours ran: upstream's PostFilter cannot read its
    # state and fails with CycleState's "not found", which then ends the FailedScheduling message.
    _, status = plugin().post_filter(CycleState(), PodInfo(make_pod().obj()), {})
    assert status == Status(Code.ERROR, "not found")


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod().resource_claim("gpu", claim="shared-gpu"), id="named-claim"),
        pytest.param(make_pod().resource_claim("gpu", template="single-gpu"), id="claim-from-template"),
        pytest.param(make_pod().resource_claim("a", claim="x").resource_claim("b", claim="y"), id="two-claims"),
    ],
)
def test_a_pod_with_claims_is_refused_never_placed(pod: PodBuilder) -> None:
    cache, snapshot = make_cluster([make_node("n").obj()])
    pl = DynamicResources(None, PluginHandle(cache))
    info = PodInfo(pod.obj())
    state = CycleState()
    # Admitted to the queue, so that the refusal becomes a FailedScheduling message, not a silent wait.
    assert pl.pre_enqueue(info) is None
    assert pl.pre_filter(state, info, snapshot.node_infos) == UNSUPPORTED
    assert pl.filter(state, info, snapshot.node_infos[0]) == UNSUPPORTED
    assert pl.reserve(state, info, "n") == UNSUPPORTED
    assert asyncio.run(pl.pre_bind(state, info, "n")) == UNSUPPORTED
    # Nothing kubesched could deallocate, and nothing to add to the message.
    _, status = pl.post_filter(state, info, {})
    assert status is not None and status.code is Code.UNSCHEDULABLE and status.reasons == ()
    assert list(pl.events_to_register()) == []


def test_is_in_the_default_profile_before_default_preemption() -> None:
    profile = default_config(in_tree_registry()).profiles[0]
    for point in ("preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind"):
        assert "DynamicResources" in [ref.name for ref in profile.plugins[point]], point
    assert plugin().name == "DynamicResources"


CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: with-claim, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: single-gpu}
  containers:
  - name: c
    image: cuda
    resources: {claims: [{name: gpu}]}
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: default}
spec:
  containers:
  - {name: c, image: busybox, resources: {requests: {cpu: "3"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: default}
spec:
  containers:
  - {name: c, image: busybox}
"""


def test_default_profile_simulation(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    registry = in_tree_registry()
    report = simulate(load_manifests([str(path)]), default_config(registry), registry)
    records = {record.pod.name: record for record in report.records}
    claimed = records["with-claim"]
    assert claimed.result == "Unschedulable" and claimed.node is None
    # Refused for good at PreFilter, so DefaultPreemption finds nothing to do either.
    assert claimed.message == (
        f"0/2 nodes are available: {ERR_REASON_UNSUPPORTED}. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert claimed.attempts == 1, "no event can help, so it is not retried"
    # A pod without claims: upstream's PostFilter text follows the node summary, DefaultPreemption's after it
    # (it asks for more than a whole node, so no eviction would help).
    assert records["too-big"].message == (
        f"0/2 nodes are available: 2 Insufficient cpu. {ERR_REASON_NO_CLAIMS}, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert records["plain"].result == "Scheduled"


def test_resource_claims_are_parsed_and_checked() -> None:
    pod = claiming(make_pod()).resource_claim("scratch", claim="my-claim").obj()
    first, second = pod.spec.resource_claims
    assert (first.name, first.resource_claim_name, first.resource_claim_template_name) == ("gpu", None, "single-gpu")
    assert (second.name, second.resource_claim_name) == ("scratch", "my-claim")
    assert make_pod().obj().spec.resource_claims == ()
    raw = make_pod("p").raw()
    raw["spec"]["resourceClaims"] = [{"resourceClaimName": "x"}]
    with pytest.raises(ManifestError, match=r"spec\.resourceClaims\[0\]\.name"):
        type(pod).from_dict(raw, "Pod default/p")


@pytest.mark.parametrize("timeout", ["10s", "0", "0s", "1m30s", "1.5h", "-0s", "250ms"])
def test_filter_timeout_accepts_zero_or_positive_durations(timeout: str) -> None:
    assert DynamicResourcesArgs(filter_timeout=timeout).validate("args") == []


def config_with_args(tmp_path: Path, args: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        f"- schedulerName: default-scheduler\n  pluginConfig:\n  - name: DynamicResources\n    args: {{{args}}}\n"
    )
    return path


@pytest.mark.parametrize(
    ("args", "error"),
    [
        # kube-oracle (kube-scheduler v1.35.4) prints these two exactly so.
        pytest.param(
            "filterTimeout: -1s",
            'profiles[0].pluginConfig[0].args.filterTimeout: Invalid value: "-1s": must be zero or positive',
            id="negative-filter-timeout",
        ),
        pytest.param(
            "bindingTimeout: 30s",
            "profiles[0].pluginConfig[0].args.bindingTimeout: Forbidden: DRADeviceBindingConditions or "
            "DRAResourceClaimDeviceStatus feature gate is disabled",
            id="binding-timeout-needs-gates-v1-35-leaves-off",
        ),
        pytest.param(
            "filterTimeout: soon",
            'profiles[0].pluginConfig[0].args.filterTimeout: Invalid value: "soon": must be a duration, e.g. 10s',
            id="not-a-duration",
        ),
    ],
)
def test_args_errors_name_the_field(tmp_path: Path, args: str, error: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        load_config_file(str(config_with_args(tmp_path, args)), in_tree_registry())
    assert info.value.errors == [error]


def test_args_default_and_reach_the_plugin(tmp_path: Path) -> None:
    registry = in_tree_registry()
    assert default_config(registry).profiles[0].plugin_args["DynamicResources"] == DynamicResourcesArgs()
    config = load_config_file(str(config_with_args(tmp_path, "filterTimeout: 5s")), registry)
    args = config.profiles[0].plugin_args["DynamicResources"]
    assert args == DynamicResourcesArgs(filter_timeout="5s")
    assert isinstance(args, DynamicResourcesArgs)
    assert DynamicResources(args, PluginHandle()).args.filter_timeout == "5s"
    with pytest.raises(ValidationFailed):
        DynamicResources(DynamicResourcesArgs(filter_timeout="-2m"), PluginHandle())
