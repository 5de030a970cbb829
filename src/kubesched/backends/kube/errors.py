"""What can go wrong talking to the API server, as our own exceptions (no library exception leaves the package).

:class:`KubeApiError` is an answer the server gave (a status code and, usually, a ``Status`` object);
:class:`KubeTransportError` is no answer at all (connection refused or reset, TLS failure, timeout);
:class:`KubeConfigError` is a kubeconfig or in-cluster configuration that cannot be used, naming the file and
the field. The first two derive from :class:`~kubesched.framework.interface.ApiError`, which the scheduler
handles for any backend.
"""

from __future__ import annotations

from typing import Any

from kubesched.errors import KubeschedError
from kubesched.framework.interface import ApiError


class KubeConfigError(KubeschedError):
    """The kubeconfig (or the in-cluster service account) cannot be used."""


class KubeTransportError(ApiError):
    """The request got no answer: connection failure, TLS failure or timeout."""

    retryable = True


class KubeApiError(ApiError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Throttled, or a server-side failure that a later attempt may not meet (client-go's retry rule)."""
        return self.status == 429 or (self.status >= 500 and self.status != 501)

    @classmethod
    def from_response(cls, status: int, body: Any, retry_after: float | None) -> KubeApiError:
        """The error for a non-2xx answer; ``body`` is the decoded JSON (a ``Status``) or the raw text."""
        if isinstance(body, dict) and body.get("kind") == "Status":
            message = str(body.get("message") or "")
            reason = str(body.get("reason") or "")
        else:
            message = str(body)[:512] if body else ""
            reason = ""
        return cls(status, reason, message or f"the server answered {status}", retry_after=retry_after)


def is_status(error: BaseException, status: int) -> bool:
    return isinstance(error, KubeApiError) and error.status == status
