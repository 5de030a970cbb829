"""DefaultBinder (Bind): writes the Binding (pod → node) through the Handle's cluster client.

The framework awaits ``bind`` in the binding cycle. The client (the simulated or kube backend) creates the
``pods/<name>/binding`` subresource; the API server then sets ``spec.nodeName``. Any failure becomes an
Error status, so the pod is forgotten from the cache and retried through the error backoff.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.plugins import names

if TYPE_CHECKING:
    from kubesched.framework.interface import BindPlugin, Handle

log = logging.getLogger(__name__)


class DefaultBinder:
    """Bind: POST the pod's Binding to the chosen node."""

    def __init__(self, args: object, handle: Handle) -> None:
        del args
        self._handle = handle

    @property
    def name(self) -> str:
        return names.DEFAULT_BINDER

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        log.debug("attempting to bind %s to %s", pod.key, node_name)
        try:
            await self._handle.client.bind(pod.pod, node_name)
        except Exception as exc:  # every client failure is this plugin's Error, never a crash
            return Status.error(exc)
        return None


if TYPE_CHECKING:

    def _conforms(plugin: DefaultBinder) -> BindPlugin:
        return plugin
