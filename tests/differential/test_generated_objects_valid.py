"""The generator's clusters are ones a real cluster could hold: kube-apiserver accepts every object.

kube-oracle and kubesched both read what they are given, valid or not, and would agree on a pod no API server
lets in; a comparison is only worth something on objects that pass the API server's validation and admission.
Every object of the CI seeds is created with ``dryRun=All`` against the kube-apiserver of ``KUBEBUILDER_ASSETS``
(skipped without it), after the namespaces, PriorityClasses and RuntimeClass they refer to.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesched.harness.envtest import ControlPlane, assets_directory

from .generator import NAMESPACES, PRIORITY_CLASSES, RUNTIME_CLASS, Manifest, _priority_class, as_submitted, generate
from .live import collection
from .test_differential import CI_SEEDS

SHARED_KINDS = ("Namespace", "PriorityClass", "RuntimeClass")


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assets = assets_directory()
    if assets is None:
        pytest.skip("KUBEBUILDER_ASSETS names no kube-apiserver and etcd (setup-envtest use -p path 1.34.x)")
    with ControlPlane(assets, tmp_path_factory.mktemp("differential-validation")) as plane:
        shared: list[Manifest] = [
            *({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in NAMESPACES[1:]),
            *(_priority_class(name, value, policy) for name, (value, policy) in PRIORITY_CLASSES.items()),
            RUNTIME_CLASS,
        ]
        for obj in shared:
            status, answer = plane.request("POST", collection(obj), obj)
            assert status in (201, 409), answer
        yield plane


def test_kube_apiserver_accepts_every_generated_object(api_server: ControlPlane) -> None:
    refused: list[str] = []
    for mode, seed in CI_SEEDS:
        for obj in generate(seed, mode).objects:
            if obj["kind"] in SHARED_KINDS:
                continue
            status, answer = api_server.request("POST", collection(obj), as_submitted(obj), query={"dryRun": "All"})
            if status != 201:
                refused.append(f"{mode}-{seed} {obj['kind']} {obj['metadata']['name']}: {answer.get('message')}")
    assert not refused, "\n".join(refused)
