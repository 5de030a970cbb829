"""What the cluster agent needs of its member's API: ``request`` calls, watches (``stream_lines``, what its
member view's reflectors read), the server's name, and whether concurrent calls overlap.

Who calls it: :class:`~kubesched.agent.core.Agent` is typed against :class:`MemberApi`, so it runs on a real API
server through :class:`~kubesched.backends.kube.client.KubeClient` and, in the benchmark and unit tests, on
:class:`~kubesched.agent.memory.InMemoryMember`; :class:`~kubesched.agent.push.PushEndpoint` names the member by
``server``. Failures are :class:`~kubesched.backends.kube.errors.KubeApiError` (an answer) and
:class:`~kubesched.backends.kube.errors.KubeTransportError` (none), whichever implementation answers.
"""

from __future__ import annotations

from typing import Protocol

from kubesched.backends.kube.reflector import WatchableApi

__all__ = ["MemberApi"]


class MemberApi(WatchableApi, Protocol):
    """A member's API server as the agent calls it (see the module doc)."""

    @property
    def server(self) -> str:
        """Where the member is (a URL), for messages."""
        ...

    @property
    def overlaps_requests(self) -> bool:
        """Whether concurrent calls overlap (a remote server's round trips do): the agent then makes its
        independent reads concurrently, and otherwise one after another."""
        ...
