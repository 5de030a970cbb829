"""The member view's pod reader: whatever it has read before, a pod reads exactly as a full parse reads it (the same
metadata, node, phase and requests, the same error), and a spec seen before is not parsed again."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesched.agent.view import PodReader
from kubesched.api.objects import Pod
from kubesched.api.resources import pod_requests
from kubesched.errors import KubeschedError


def manifest(name: str, **changes: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "apps", "uid": f"uid-{name}", "labels": {"app": "web"}},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}],
            "initContainers": [
                {"name": "side", "image": "busybox", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
        "status": {"phase": "Running"},
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        at = pod
        for key in parents:
            at = at[key]
        at[last] = value
    return pod


def full(raw: dict[str, Any]) -> tuple[Any, ...] | str:
    try:
        pod = Pod.from_dict(copy.deepcopy(raw), "pod")
    except KubeschedError as error:
        return str(error)
    return pod.metadata, pod.spec.node_name, pod.status.phase, pod_requests(pod)


def read(reader: PodReader, raw: dict[str, Any]) -> tuple[Any, ...] | str:
    try:
        metadata, node, phase, requests = reader.read(raw, "pod")
    except KubeschedError as error:
        return str(error)
    return metadata, node, phase, dict(requests)


CASES = [
    pytest.param(manifest("b"), id="another-pod-of-the-same-spec"),
    pytest.param(manifest("c", status=None), id="no-status"),
    pytest.param(manifest("d", status__phase="Succeeded"), id="finished"),
    pytest.param(manifest("e", metadata__labels={"app": 7}), id="bad-metadata-of-a-known-spec"),
    pytest.param(manifest("f", metadata__name=""), id="no-name-with-a-known-spec"),
    pytest.param(manifest("g", status="Running"), id="status-not-a-mapping"),
    pytest.param(manifest("h", status__startTime="yesterday"), id="bad-status-of-a-known-spec"),
    pytest.param(manifest("i", spec__nodeName="n2"), id="another-node"),
    pytest.param(manifest("j", spec__containers=[]), id="bad-spec"),
    pytest.param(manifest("k", metadata=None), id="no-metadata"),
    pytest.param(
        manifest("l", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": "x"}}}]), id="bad-quantity"
    ),
]


@pytest.mark.parametrize("raw", CASES)
def test_a_pod_reads_as_its_full_parse_whatever_was_read_before(raw: dict[str, Any]) -> None:
    reader = PodReader()
    assert read(reader, manifest("a")) == full(manifest("a"))
    assert read(reader, raw) == full(raw)
    assert read(reader, raw) == full(raw)  # and again, with its own spec known (or still refused)


def test_a_known_spec_is_not_parsed_again_and_the_oldest_is_forgotten() -> None:
    reader = PodReader(size=2)
    first = reader.read(manifest("a"), "pod")[3]
    assert reader.read(manifest("b"), "pod")[3] is first  # the kept reading, not a new parse
    reader.read(manifest("c", spec__nodeName="n2"), "pod")
    reader.read(manifest("d", spec__nodeName="n3"), "pod")
    assert reader.read(manifest("e"), "pod")[3] is not first  # forgotten past the size: parsed anew


def requests(reader: PodReader, raw: dict[str, Any]) -> dict[str, int] | str:
    try:
        return dict(reader.requests(raw, "pod"))
    except KubeschedError as error:
        return str(error)


@pytest.mark.parametrize("raw", CASES)
def test_a_pods_requests_are_its_known_specs_or_its_full_parses(raw: dict[str, Any]) -> None:
    """A bind reads only the requests: a spec read before gives its requests whatever the rest of the pod holds
    (the member checks the pod it is sent); any other pod's are its full parse's, or its error."""
    reader = PodReader()
    reader.read(manifest("a"), "pod")
    parsed = full(raw)
    wanted = parsed if isinstance(parsed, str) else dict(parsed[3])
    if raw.get("spec") == manifest("a")["spec"]:
        wanted = dict(pod_requests(Pod.from_dict(manifest("a"), "pod")))
    assert requests(reader, raw) == wanted
    assert requests(PodReader(), raw) == (parsed if isinstance(parsed, str) else dict(parsed[3]))
