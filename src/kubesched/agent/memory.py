"""An in-memory member cluster API: the few calls the cluster agent makes, answered from dicts in this process.

Who calls it: the multi-cluster benchmark (:mod:`kubesched.bench.multicluster`), which runs a hundred members'
agents in one process, and the agent's unit tests. An :class:`InMemoryMember` is a
:class:`~kubesched.agent.api.MemberApi`, so the :class:`~kubesched.agent.core.Agent` runs on it unchanged. It answers
with the API server's semantics where the agent relies on them: namespaces, Pods, ConfigMaps and Nodes with label
and field selectors and discovery; 409 on a name taken or a failed precondition, 404 for what is missing; one
``resourceVersion`` counter; watches from a version (410 once it is older than the kept history). Stored objects
are never changed in place: answers share them, read-only. :meth:`InMemoryMember.add_node` stands in for a kubelet.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import itertools
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kubesched.api import jsonwire
from kubesched.backends.kube.errors import KubeApiError

__all__ = ["InMemoryMember"]

CORE_KINDS = (("namespaces", "Namespace"), ("nodes", "Node"), ("pods", "Pod"), ("configmaps", "ConfigMap"))
_NAMESPACED = frozenset({"pods", "configmaps"})
_KIND = dict(CORE_KINDS)
_FIELDS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "spec.nodeName": lambda obj: str((obj.get("spec") or {}).get("nodeName") or ""),
    "metadata.name": lambda obj: str(obj["metadata"]["name"]),
    "metadata.namespace": lambda obj: str(obj["metadata"].get("namespace") or ""),
}

Predicate = Callable[[Mapping[str, Any]], bool]

WATCH_HISTORY = 20000  # events kept for watches to resume from (an API server keeps a window too)


class _Event(NamedTuple):
    revision: int
    resource: str
    namespace: str
    type: str
    obj: Mapping[str, Any]


def _status(code: int, reason: str, message: str) -> KubeApiError:
    return KubeApiError(code, reason, message)


Reader = Callable[[Mapping[str, Any]], str | None]


def _requirement(term: str, reader: Callable[[str], Reader], what: str) -> Predicate:
    """One selector term: ``k=v``, ``k==v``, ``k!=v`` (a missing key is "not v"), ``k`` (exists), ``!k``."""
    for operator in ("!=", "==", "="):
        key, sep, value = term.partition(operator)
        if sep:
            key = key.strip()
            value = value.strip()
            if not key:
                break
            read = reader(key)
            if operator == "!=":
                return lambda obj: read(obj) != value
            return lambda obj: read(obj) == value
    else:
        name = term.strip().removeprefix("!")
        if name:
            read = reader(name)
            if term.strip().startswith("!"):
                return lambda obj: read(obj) is None
            return lambda obj: read(obj) is not None
    raise _status(400, "BadRequest", f"unable to parse requirement {term!r} of the {what}")


def _label(key: str) -> Reader:
    def read(obj: Mapping[str, Any]) -> str | None:
        value = (obj["metadata"].get("labels") or {}).get(key)
        return None if value is None else str(value)

    return read


def _field(key: str) -> Reader:
    """An unknown field is refused before anything is listed, as the API server does."""
    read = _FIELDS.get(key)
    if read is None:
        raise _status(400, "BadRequest", f"field label not supported: {key}")
    return read


def _selector(text: str, reader: Callable[[str], Reader], what: str) -> list[Predicate]:
    return [_requirement(term, reader, what) for term in text.split(",") if term.strip()]


def _resource_path(parts: list[str], path: str) -> tuple[str, str, str]:
    """(resource, namespace, name) of a core-group path's parts; 404 for any other path."""
    if parts[:2] != ["api", "v1"]:
        raise _status(404, "NotFound", f"the server could not find the requested resource ({path})")
    rest = parts[2:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in _NAMESPACED:
        namespace, rest = rest[1], rest[2:]
    if not rest or rest[0] not in _KIND or len(rest) > 2:
        raise _status(404, "NotFound", f"the server could not find the requested resource ({path})")
    resource, name = rest[0], rest[1] if len(rest) == 2 else ""
    if resource in _NAMESPACED and name and not namespace:
        raise _status(404, "NotFound", f"the server could not find the requested resource ({path})")
    return resource, namespace, name


class InMemoryMember:
    """One member cluster's API, in memory (module doc). ``clock`` stamps ``creationTimestamp`` (wall seconds)."""

    def __init__(self, name: str = "member", *, clock: Callable[[], float] | None = None) -> None:
        self.server = f"memory://{name}"
        self._now = clock if clock is not None else time.time
        self._revision = itertools.count(1)
        self.resource_version = 0
        self._store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {resource: {} for resource, _ in CORE_KINDS}
        self._compiled: dict[tuple[str, str], list[Predicate]] = {}  # selectors as parsed, by their text
        self.requests = 0  # calls answered (errors included): what a real API server would have been sent
        # Every call is answered before it returns: concurrency gains nothing (see Agent._together).
        self.overlaps_requests = False
        self._events: collections.deque[_Event] = collections.deque(maxlen=WATCH_HISTORY)
        self._forgotten = 0  # the revision of the last event dropped from the history
        self._wakeups: dict[str, set[asyncio.Future[None]]] = {}  # resource -> its watches' pending waits
        # uids: one random UUID per member, its last 48 bits counting objects (unique as uuid4's, a tenth the cost)
        self._uid_prefix = str(uuid.uuid4())[:24]
        self._uids = itertools.count(int(str(uuid.uuid4())[24:], 16))
        self._stamp: tuple[int, str] = (-1, "")  # the last creationTimestamp made, by its whole second

    # --------------------------------------------------------------------------------------------- seeding

    def add_node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Node as the kubelet would register it (409 when its name exists)."""
        return self._create("nodes", "", node)

    def add_namespace(self, name: str) -> None:
        """Create namespace ``name`` unless it exists (a member's pods need their namespace)."""
        if ("", name) not in self._store["namespaces"]:
            self._create("namespaces", "", {"metadata": {"name": name}})

    # ------------------------------------------------------------------------------------------- reading

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._store["nodes"].values())

    def pods(self) -> list[dict[str, Any]]:
        return list(self._store["pods"].values())

    def configmaps(self, namespace: str) -> list[dict[str, Any]]:
        return [obj for (ns, _), obj in self._store["configmaps"].items() if ns == namespace]

    # ------------------------------------------------------------------------------------------ the API

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        retry: bool = True,
    ) -> Any:
        """One API call, answered at once (``content_type``, ``timeout`` and ``retry`` change nothing here)."""
        self.requests += 1
        return self._answer(method, path, query or {}, body)

    async def aclose(self) -> None:
        """Nothing to close: there is no connection."""

    def _answer(self, method: str, path: str, query: Mapping[str, str], body: Any) -> Any:
        parts = [part for part in path.split("?", 1)[0].split("/") if part]
        if parts[:1] == ["apis"] and method == "GET":
            if len(parts) == 1:
                return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
            raise _status(404, "NotFound", f"the server could not find the requested resource ({path})")
        if parts == ["api", "v1"] and method == "GET":
            return self._discovery()
        resource, namespace, name = _resource_path(parts, path)
        if method == "GET":
            return self._get(resource, namespace, name) if name else self._list(resource, namespace, query)
        if method == "POST" and not name:
            if resource in _NAMESPACED and ("", namespace) not in self._store["namespaces"]:
                raise _status(404, "NotFound", f'namespaces "{namespace}" not found')
            return self._create(resource, namespace, body)
        if method == "DELETE" and name:
            return self._delete(resource, namespace, name, body)
        raise _status(405, "MethodNotAllowed", f"{method} is not supported on {path}")

    @contextlib.asynccontextmanager
    async def stream_lines(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A watch of a collection, as the real client's: the API server's JSON lines for the events after the
        ``resourceVersion`` asked for (none, or ``0``: the current objects as ``ADDED``), filtered by the selectors,
        then each new one until ``timeoutSeconds`` (wall time); 410 when the version is older than the kept history.
        ``read_timeout`` changes nothing here (the stream ends at ``timeoutSeconds``, never silently)."""
        self.requests += 1
        resource, namespace, name = _resource_path([part for part in path.split("/") if part], path)
        if name:
            raise _status(405, "MethodNotAllowed", f"a watch is of a collection, not of {path}")
        predicates = self._predicates(query)
        asked = str(query.get("resourceVersion") or "0")
        if not asked.isdigit():
            raise _status(400, "BadRequest", f"resourceVersion {asked!r}: not a version this server gave")
        since = int(asked)
        if since and since < self._forgotten:
            raise _status(410, "Expired", f"too old resource version: {since} ({self._forgotten})")
        deadline = asyncio.get_running_loop().time() + float(query.get("timeoutSeconds") or 1800)

        def wanted(event: _Event) -> bool:
            return (
                event.resource == resource
                and (not namespace or event.namespace == namespace)
                and all(p(event.obj) for p in predicates)
            )

        async def lines() -> AsyncGenerator[bytes, None]:
            cursor = since
            if not since:  # "from now", with the current objects first, as the API server's watch does
                cursor = self.resource_version
                for (ns, _), obj in list(self._store[resource].items()):
                    if (not namespace or ns == namespace) and all(p(obj) for p in predicates):
                        yield jsonwire.dumps({"type": "ADDED", "object": obj})
            loop = asyncio.get_running_loop()
            waits = self._wakeups.setdefault(resource, set())
            expired = False
            pending: asyncio.Future[None] | None = None

            def expire() -> None:
                nonlocal expired
                expired = True
                if pending is not None and not pending.done():
                    pending.set_result(None)

            # One timer for the watch's timeoutSeconds rather than a timeout scope around every wait.
            timer = loop.call_at(deadline, expire)
            try:
                while True:
                    for event in self._events_after(cursor):
                        cursor = event.revision
                        if wanted(event):
                            yield jsonwire.dumps({"type": event.type, "object": event.obj})
                    if expired:
                        return
                    pending = wakeup = loop.create_future()
                    waits.add(wakeup)
                    try:
                        await wakeup  # a cancellation ends the watch here, even one that came with a wakeup
                    finally:
                        waits.discard(wakeup)
                        pending = None
                    if expired:
                        return
            finally:
                timer.cancel()

        stream = lines()
        try:
            yield stream
        finally:
            await stream.aclose()  # its timer goes now, not when the generator is collected

    def _events_after(self, revision: int) -> list[_Event]:
        """The logged events after ``revision``, oldest first (read from the newest end: watchers are near it)."""
        newer: list[_Event] = []
        for event in reversed(self._events):
            if event.revision <= revision:
                break
            newer.append(event)
        newer.reverse()
        return newer

    def _happened(self, resource: str, namespace: str, kind: str, obj: Mapping[str, Any]) -> None:
        """Log a write for the watches and wake them."""
        if len(self._events) == self._events.maxlen:
            self._forgotten = self._events[0].revision
        self._events.append(_Event(self.resource_version, resource, namespace, kind, obj))
        waits = self._wakeups.get(resource)
        if waits:
            for wakeup in waits:
                if not wakeup.done():
                    wakeup.set_result(None)
            waits.clear()

    def _discovery(self) -> dict[str, Any]:
        resources = [
            {"name": resource, "kind": kind, "namespaced": resource in _NAMESPACED} for resource, kind in CORE_KINDS
        ]
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}

    def _get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        obj = self._store[resource].get((namespace, name))
        if obj is None:
            raise _status(404, "NotFound", f'{resource} "{name}" not found')
        return obj

    def _predicates(self, query: Mapping[str, str]) -> list[Predicate]:
        selectors = (query.get("labelSelector", ""), query.get("fieldSelector", ""))
        predicates = self._compiled.get(selectors)
        if predicates is None:
            predicates = [
                *_selector(selectors[0], _label, "label selector"),
                *_selector(selectors[1], _field, "field selector"),
            ]
            self._compiled[selectors] = predicates
        return predicates

    def _list(self, resource: str, namespace: str, query: Mapping[str, str]) -> dict[str, Any]:
        predicates = self._predicates(query)
        stored = self._store[resource]
        found = stored.values() if not namespace else [obj for (ns, _), obj in stored.items() if ns == namespace]
        if len(predicates) == 1:  # the agent's lists: one term each (a list of a hundred pods per reservation)
            only = predicates[0]
            items = [obj for obj in found if only(obj)]
        else:
            items = [obj for obj in found if all(p(obj) for p in predicates)]
        return {
            "kind": _KIND[resource] + "List",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(self.resource_version)},
            "items": items,
        }

    def _next_revision(self) -> str:
        self.resource_version = next(self._revision)
        return str(self.resource_version)

    def _create(self, resource: str, namespace: str, body: Any) -> dict[str, Any]:
        obj = jsonwire.loads(jsonwire.dumps(body)) if body is not None else None
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise _status(400, "BadRequest", f"the body of a {_KIND[resource]} create must be an object with metadata")
        metadata = obj["metadata"]
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise _status(422, "Invalid", f"{_KIND[resource]}: metadata.name: Required value")
        given = metadata.get("namespace")
        if resource in _NAMESPACED:
            if given not in (None, "", namespace):
                raise _status(400, "BadRequest", "the namespace of the object does not match the namespace of the URL")
            metadata["namespace"] = namespace
        key = (namespace, name)
        if key in self._store[resource]:
            raise _status(409, "AlreadyExists", f'{resource} "{name}" already exists')
        metadata["uid"] = f"{self._uid_prefix}{next(self._uids) & 0xFFFFFFFFFFFF:012x}"
        metadata["resourceVersion"] = self._next_revision()
        metadata["creationTimestamp"] = self._timestamp()
        obj.setdefault("apiVersion", "v1")
        obj.setdefault("kind", _KIND[resource])
        if resource == "pods":
            status = obj["status"] = dict(obj.get("status") or {})
            status.setdefault("phase", "Pending")
        self._store[resource][key] = obj
        self._happened(resource, namespace, "ADDED", obj)
        return obj

    def _timestamp(self) -> str:
        second = int(self._now())
        if second != self._stamp[0]:
            stamp = datetime.datetime.fromtimestamp(second, datetime.UTC)
            self._stamp = (second, stamp.strftime("%Y-%m-%dT%H:%M:%SZ"))
        return self._stamp[1]

    def _delete(self, resource: str, namespace: str, name: str, options: Any) -> dict[str, Any]:
        obj = self._store[resource].get((namespace, name))
        if obj is None:
            raise _status(404, "NotFound", f'{resource} "{name}" not found')
        preconditions = (options.get("preconditions") or {}) if isinstance(options, Mapping) else {}
        for field in ("uid", "resourceVersion"):
            wanted = preconditions.get(field)
            if wanted is not None and wanted != obj["metadata"].get(field):
                raise _status(409, "Conflict", f"Precondition failed: {field} in precondition: {wanted}")
        del self._store[resource][(namespace, name)]
        version = self._next_revision()
        self._happened(
            resource, namespace, "DELETED", {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}
        )
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}


if TYPE_CHECKING:
    from kubesched.agent.api import MemberApi
    from kubesched.backends.kube.client import KubeClient

    def _conforms(member: InMemoryMember, client: KubeClient) -> tuple[MemberApi, MemberApi]:
        return member, client
