"""DefaultBinder against default_binder_test.go: a successful binding is written through the client,
an API failure becomes an Error status."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ApiError
from kubesched.framework.status import Code
from kubesched.framework.types import PodInfo
from kubesched.plugins.defaultbinder import DefaultBinder
from kubesched.testing.builders import make_pod
from kubesched.testing.framework_helpers import PluginHandle, RecordingClient

RunAsync = Callable[[Coroutine[Any, Any, Any]], Any]


def test_successful_binding(run_async: RunAsync) -> None:
    client = RecordingClient()
    plugin = DefaultBinder(None, PluginHandle(client=client))
    pod = PodInfo(make_pod("foo").namespace("ns").obj())
    status = run_async(plugin.bind(CycleState(), pod, "foohost.kubernetes.mydomain.com"))
    assert status is None
    assert client.bindings == [("ns/foo", "foohost.kubernetes.mydomain.com")]


def test_binding_error_becomes_an_error_status(run_async: RunAsync) -> None:
    failure = ApiError("injecting failure for pod foo")
    plugin = DefaultBinder(None, PluginHandle(client=RecordingClient(fail_with=failure)))
    status = run_async(plugin.bind(CycleState(), PodInfo(make_pod("foo").obj()), "node"))
    assert status is not None
    assert status.code is Code.ERROR
    assert status.message == "injecting failure for pod foo"
    assert status.cause is failure
