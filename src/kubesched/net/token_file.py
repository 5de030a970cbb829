"""A bearer token read from a file that rotates (a projected service-account token, a mounted Secret).

Who uses it: the kube API client (a kubeconfig's ``tokenFile``, the in-cluster token), the remote OPA client
(``tokenFile``) and ``kubesched agent --token-file`` (read once). The file is looked at again at most every
``recheck_seconds`` on the injected clock, and read again only when it changed (device, inode, modification
time or size: the kubelet rotates by renaming a new file over the old); a 401 from the server makes the next call
look at once. A file that cannot be read, is empty or holds more than one token is a :class:`TokenFileError`
naming it, raised at every call until the file is usable: a token is never kept from a file that went bad.
"""

from __future__ import annotations

import asyncio
import math
import os

from kubesched.clock import Clock
from kubesched.errors import KubeschedError

__all__ = ["TokenFile", "TokenFileError", "read_token_file"]

_Identity = tuple[int, int, int, int]


class TokenFileError(KubeschedError):
    """The token file at ``path`` cannot give a token; the message names it."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


def read_token_file(path: str, label: str = "token file") -> str:
    """The one token in the file at ``path``, surrounding whitespace dropped; ``label`` names the file in errors
    (``"OPA token file"``)."""
    return _read(path, label)[0]


def _read(path: str, label: str) -> tuple[str, _Identity]:
    try:
        status = os.stat(path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise _unreadable(label, path, error) from error
    if not text:
        raise TokenFileError(f"the {label} {path} is empty", path)
    if any(character.isspace() or ord(character) < 0x20 for character in text):
        raise TokenFileError(f"the {label} {path} holds more than one token", path)
    return text, (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)


def _identity(path: str, label: str) -> _Identity:
    try:
        status = os.stat(path)
    except OSError as error:
        raise _unreadable(label, path, error) from error
    return status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size


def _unreadable(label: str, path: str, error: OSError | UnicodeDecodeError) -> TokenFileError:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return TokenFileError(f"cannot read the {label} {path}: {reason}", path)


class TokenFile:
    """The token in the file at ``path``, kept fresh (see the module doc); use it from one event loop."""

    def __init__(self, path: str, *, clock: Clock, recheck_seconds: float, label: str = "token file") -> None:
        self.path = path
        self._clock = clock
        self._recheck = recheck_seconds
        self._label = label
        self._lock = asyncio.Lock()  # one reader at a time; binds to a loop only when contended
        self._token: str | None = None
        self._identity: _Identity | None = None
        self._checked_at = -math.inf

    def _fresh(self) -> str | None:
        if self._token is not None and abs(self._clock.now() - self._checked_at) < self._recheck:
            return self._token
        return None

    async def current(self) -> str:
        """The token; looks at the file (off the event loop) when the last look is ``recheck_seconds`` old."""
        token = self._fresh()
        if token is not None:
            return token
        async with self._lock:
            token = self._fresh()
            if token is not None:
                return token
            self._checked_at = self._clock.now()
            try:
                read, self._identity = await asyncio.to_thread(self._look, self._token, self._identity)
            except BaseException:
                self._token = None  # every call looks again until the file is usable
                raise
            self._token = read
            return read

    def _look(self, token: str | None, identity: _Identity | None) -> tuple[str, _Identity]:
        if token is not None and identity is not None and _identity(self.path, self._label) == identity:
            return token, identity
        return _read(self.path, self._label)

    def invalidate(self) -> None:
        """Look at the file again at the next call (the server said 401: the token may have been rotated)."""
        self._checked_at = -math.inf
