"""KubeBackend.bind_volumes: live volume binding is not supported yet, so VolumeBinding's PreBind gets a clear
ApiError (and the pod's cycle fails with it), and no request reaches the API server."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from aiohttp import web
from kubetest_apiserver import ApiServer, FakeTime, Seen, ok, pod

from kubesched.api.objects import Pod
from kubesched.backends.kube.backend import KubeBackend
from kubesched.backends.kube.client import KubeClient
from kubesched.clock import VirtualClock
from kubesched.framework.interface import ApiError
from kubesched.testing.storage_builders import make_pv, make_pvc

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]


def test_bind_volumes_refuses_and_calls_nothing(run_async: RunAsync[None]) -> None:
    target = Pod.from_dict(pod("web", "3", namespace="apps"), "pods apps/web")

    async def scenario() -> None:
        async def handle(request: web.Request, seen: Seen) -> web.StreamResponse:
            return ok({})

        async with ApiServer(handle) as server:
            client = KubeClient(server.connection(), max_retries=0, sleep=FakeTime().sleep)
            try:
                backend = KubeBackend(client, ["kubesched"], clock=VirtualClock(0.0))
                with pytest.raises(ApiError, match="live volume binding is not supported by kubesched yet") as err:
                    await backend.bind_volumes(
                        target,
                        "node-a",
                        [(make_pv("pv-a").obj(), make_pvc("data", "apps").obj())],
                        [make_pvc("scratch", "apps").obj()],
                    )
                assert "apps/data, apps/scratch" in str(err.value)
            finally:
                await client.aclose()
            assert server.seen == []

    run_async(scenario())
