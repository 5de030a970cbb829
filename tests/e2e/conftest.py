"""End-to-end fixtures: a real etcd and kube-apiserver (kubesched.harness.envtest) for the whole session.

They need the binaries of controller-runtime's envtest in ``KUBEBUILDER_ASSETS``; without the variable every
test here is skipped (with how to get them), with a variable that names no binaries they error.
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesched.harness.envtest import ASSETS_VARIABLE, ControlPlane, assets_directory

MISSING_ASSETS = (
    "KUBEBUILDER_ASSETS is not set: the end-to-end tests need kube-apiserver and etcd; get them with setup-envtest"
    " (go install sigs.k8s.io/controller-runtime/tools/setup-envtest@latest;"
    ' export KUBEBUILDER_ASSETS="$(setup-envtest use -p path 1.34.x)")'
)


@pytest.fixture(scope="session")
def assets() -> Path:
    if not os.environ.get(ASSETS_VARIABLE):
        pytest.skip(MISSING_ASSETS)
    directory = assets_directory()
    if directory is None:
        pytest.fail(f"{ASSETS_VARIABLE}={os.environ[ASSETS_VARIABLE]} holds no executable kube-apiserver and etcd")
    return directory


@pytest.fixture(scope="session")
def control_plane(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """kube-apiserver as in a real cluster (watch cache on), shared by the session: name objects uniquely."""
    with ControlPlane(assets, tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def uncached_control_plane(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """kube-apiserver without its watch cache: watches and lists read etcd, so compact_etcd() gives 410 at once."""
    with ControlPlane(assets, tmp_path_factory.mktemp("uncached-control-plane"), watch_cache=False) as plane:
        yield plane


_agent_namespaces = itertools.count()


@pytest.fixture(scope="module")
def member(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A member cluster for agent tests, one per module: they count every Node of it, so no other test may add
    one (tests of one module remove theirs: see agent_namespace)."""
    with ControlPlane(assets, tmp_path_factory.mktemp("member")) as plane:
        yield plane


@pytest.fixture
def agent_namespace(member: ControlPlane) -> Iterator[str]:
    """A fresh namespace in ``member`` for this test's pods and reservations; afterwards its pods and every
    Node of the member are removed."""
    name = f"agent-test-{next(_agent_namespaces)}"
    status, _ = member.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status == 201
    yield name
    member.request("DELETE", f"/api/v1/namespaces/{name}/pods", query={"gracePeriodSeconds": "0"})
    member.request("DELETE", "/api/v1/nodes")


@pytest.fixture(autouse=True)
def _collect_garbage_after_each_test() -> Iterator[None]:
    """Resources left unclosed (sockets, transports) warn when collected: collect after every test, so the
    warning fails the test that leaked them rather than whichever test the collector happens to run in."""
    yield
    gc.collect()
