"""One resource's cache, kept by list and watch: kubesched's counterpart of client-go's Reflector + informer.

The informers (:mod:`.informers`) run one :class:`Reflector` per resource and selector. The rules, client-go's
(docs/explanation/live-scheduler.md#informers):

1. List (paginated) and remember the list's ``resourceVersion``; hand every object to the handler.
2. Watch from that version with ``allowWatchBookmarks=true`` and a server ``timeoutSeconds`` drawn at random
   for each connection (5–10 min, as client-go); a line must arrive within ``timeoutSeconds`` + a margin, or
   the stream is taken for dead. The version of every event, bookmarks included, is kept; versions are
   opaque strings, never compared.
3. 410 Gone, as the watch request's status or as an ``ERROR`` event in the stream: list again and diff
   against the cache (deletes for objects that vanished, updates for the ones that changed, adds for new
   ones), then watch from the new list's version. Never the same version again, never "from now".
4. Any other failure (connection lost, 5xx, an ``ERROR`` event, a silent stream) reconnects from the last
   version after a jittered exponential backoff (:mod:`kubesched.net.retry`: 0.8 s doubling to 30 s; reset by a
   watch that delivered).
5. :attr:`Reflector.synced` is set once the first list has been handed over, which is when the scheduler
   may start.

An object that does not decode (a malformed manifest the server accepted, or one a proxy mangled) goes to
the handler's ``on_invalid`` with the error, is dropped from the cache, and the reflector goes on. Event lines
are read by :func:`kubesched.api.jsonwire.loads` (orjson, with the standard library's results).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kubesched.api import jsonwire
from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
from kubesched.errors import KubeschedError
from kubesched.net.retry import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

LIST_PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300
MAX_WATCH_TIMEOUT = 600
READ_MARGIN_SECONDS = 30.0
INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0
SHORT_WATCH_SECONDS = 1.0  # a watch ending normally sooner, with nothing in it, is a failure (client-go's rule)


class WatchableApi(Protocol):
    """What a reflector needs of an API server: calls, and watches as streams of lines. The real client
    (:class:`~kubesched.backends.kube.client.KubeClient`) is one; the cluster agent's in-memory member
    (:class:`~kubesched.agent.memory.InMemoryMember`) another."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = ...,
        timeout: float | None = None,
        retry: bool = True,
    ) -> Any:
        """One call: the decoded JSON answer; an error status raises KubeApiError."""
        ...

    def stream_lines(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


class ReflectorHandler(Protocol[T_contra]):
    def on_add(self, obj: T_contra) -> None: ...

    def on_update(self, old: T_contra, new: T_contra) -> None: ...

    def on_delete(self, obj: T_contra) -> None: ...

    def on_invalid(self, raw: Mapping[str, Any], error: Exception) -> None: ...


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """Where a resource lives in the API and how to turn its JSON into our type."""

    name: str  # for logs and metrics: "pods", "nodes", ...
    path: str  # the collection: "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"
    decode: Callable[[Mapping[str, Any], str], Any]  # (object, where) -> typed object; raises KubeschedError


class _Gone(Exception):
    """The version we hold is too old: list again."""


def _meta(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}  # a mangled object still reaches on_invalid


def object_key(raw: Mapping[str, Any]) -> str:
    meta = _meta(raw)
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _version(raw: Mapping[str, Any]) -> str:
    return str(_meta(raw).get("resourceVersion", ""))


def _uid(raw: Mapping[str, Any]) -> str:
    return str(_meta(raw).get("uid", ""))


class Reflector(Generic[T]):
    """List and watch one resource with one selector into a cache, telling ``handler`` of every change."""

    def __init__(
        self,
        client: WatchableApi,
        kind: ResourceKind,
        handler: ReflectorHandler[T],
        *,
        field_selector: str = "",
        label_selector: str = "",
        watch_timeout: tuple[int, int] = (MIN_WATCH_TIMEOUT, MAX_WATCH_TIMEOUT),
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``sleep`` waits out the backoff between failed attempts (injectable, so tests read the delays)."""
        self.client = client
        self.kind = kind
        self.handler = handler
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.synced = asyncio.Event()
        self._list_failed = asyncio.Event()  # an attempt failed before the first list filled the cache
        self.resource_version = ""
        # key -> (resourceVersion, uid, decoded object)
        self._items: dict[str, tuple[str, str, T]] = {}
        self._rng = rng or random.Random()
        self._sleep = sleep
        self.lists = 0
        self.watches = 0
        self.last_error: str = ""
        self._streamed = False  # the current watch delivered an event or a bookmark
        # When the cache was last known to be current (loop time): None while a watch is open (it is current
        # as events arrive); the end of the last list or watch otherwise. Readers that must not serve a stale
        # cache as fresh (the cluster agent's member view) read it through current_as_of().
        self._current_at: float | None = float("-inf")  # nothing listed yet
        self._delivered = False  # the current watch delivered an event (not only bookmarks)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[T]:
        return [obj for _, _, obj in self._items.values()]

    async def wait_listed(self) -> None:
        """Return once the first list has filled the cache; raise :class:`KubeTransportError` with the last error
        as soon as an attempt has failed before that (the reflector goes on retrying), so a caller that needs the
        cache answers "unavailable" at once instead of waiting out its deadline."""
        if self.synced.is_set():
            return
        waits = [asyncio.ensure_future(self.synced.wait()), asyncio.ensure_future(self._list_failed.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if not self.synced.is_set():
            raise KubeTransportError(f"{self.kind.name} could not be listed: {self.last_error}")

    def current_as_of(self, now: float) -> float:
        """The loop time as of which the cache is known to hold the server's state: ``now`` while watching."""
        return now if self._current_at is None else self._current_at

    def _where(self, raw: Mapping[str, Any]) -> str:
        return f"{self.kind.name} {object_key(raw)}"

    def _selectors(self) -> dict[str, str]:
        query: dict[str, str] = {}
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        return query

    # ---- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = Backoff(INITIAL_BACKOFF, MAX_BACKOFF)
        failures = 0  # in a row: the attempt number of the next retry
        need_list = True
        while True:
            self._streamed = False
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    failures = 0
                await self._watch()
                if self._streamed:  # an event or a bookmark: the stream worked
                    failures = 0
                continue  # a normal close (timeoutSeconds): watch again from the last version at once
            except _Gone:
                log.info("%s: resourceVersion %s is gone; listing again", self.kind.name, self.resource_version)
                need_list = True
                continue
            except (KubeApiError, KubeTransportError) as error:
                self.last_error = str(error)
                if isinstance(error, KubeApiError) and error.status == 410:
                    need_list = True
                    continue
                if self._streamed:  # the watch worked before it broke: this is a new failure, not a repeat
                    failures = 0
                log.warning("%s: %s; retrying in %.1f s", self.kind.name, error, backoff.step(failures))
            except Exception as error:  # a bug (ours or a handler's) must not end the informer for good
                self.last_error = f"{type(error).__name__}: {error}"
                log.exception("%s: unexpected failure; listing again in %.1f s", self.kind.name, backoff.step(failures))
                need_list = True
            if not self.synced.is_set():
                self._list_failed.set()
            await self._sleep(backoff.delay(failures, self._rng))
            failures += 1

    async def _list(self) -> None:
        objects: list[Mapping[str, Any]] = []
        query = {**self._selectors(), "limit": str(LIST_PAGE_SIZE)}
        version = ""
        while True:
            page = await self.client.request("GET", self.kind.path, query=query)
            if not isinstance(page, Mapping) or not isinstance(page.get("items"), list):
                raise KubeTransportError(f"GET {self.kind.path}: the answer is not a list")
            objects.extend(item for item in page["items"] if isinstance(item, Mapping))
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion", ""))
            token = meta.get("continue")
            if not token:
                break
            query = {**query, "continue": str(token)}
        self.lists += 1
        self._replace(objects)
        self.resource_version = version
        self._current_at = asyncio.get_running_loop().time()
        self.synced.set()

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        """Make the cache hold exactly ``objects``, telling the handler what changed (the relist diff)."""
        seen: set[str] = set()
        for raw in objects:
            key = object_key(raw)
            seen.add(key)
            self._apply("ADDED", raw, key)
        for key in [key for key in self._items if key not in seen]:
            _, _, gone = self._items.pop(key)
            self.handler.on_delete(gone)

    async def _watch(self) -> bool:
        """One watch connection; True when it delivered at least one event."""
        timeout = self._rng.randint(*self.watch_timeout)
        query = {
            **self._selectors(),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(timeout),
        }
        self.watches += 1
        self._delivered = False
        started = asyncio.get_running_loop().time()
        async with self.client.stream_lines(self.kind.path, query, read_timeout=timeout + READ_MARGIN_SECONDS) as lines:
            self._current_at = None
            try:
                await self._events(lines)
            finally:
                self._current_at = asyncio.get_running_loop().time()
        if not self._streamed and asyncio.get_running_loop().time() - started < SHORT_WATCH_SECONDS:
            raise KubeTransportError(f"{self.kind.name} watch: closed at once, with no event and no bookmark")
        return self._delivered

    async def _events(self, lines: AsyncIterator[bytes]) -> None:
        """Apply one watch stream's events to the cache, until the stream ends."""
        async for line in lines:
            try:
                event = jsonwire.loads(line)
                kind, raw = event["type"], event["object"]
            except (ValueError, KeyError, TypeError) as error:
                text = line[:200].decode(errors="replace")
                raise KubeTransportError(f"{self.kind.name} watch: an event that is not JSON: {text!r}") from error
            if not isinstance(raw, Mapping):
                raise KubeTransportError(f"{self.kind.name} watch: a {kind} event without an object")
            if kind != "ERROR":
                self._streamed = True
            if kind == "ERROR":
                if raw.get("code") == 410:
                    raise _Gone
                raise KubeApiError.from_response(int(raw.get("code") or 500), raw, None)
            if kind == "BOOKMARK":
                self.resource_version = _version(raw) or self.resource_version
                continue
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                log.warning("%s watch: unknown event type %r skipped", self.kind.name, kind)
                continue
            self._apply(kind, raw, object_key(raw))
            self.resource_version = _version(raw) or self.resource_version
            self._delivered = True

    def _apply(self, kind: str, raw: Mapping[str, Any], key: str) -> None:
        known = self._items.get(key)
        if kind == "DELETED":
            if known is not None:
                del self._items[key]
                self.handler.on_delete(known[2])
            return
        version, uid = _version(raw), _uid(raw)
        if known is not None and known[0] == version and known[1] == uid:
            return  # a relist or a repeated event with nothing new
        try:
            obj: T = self.kind.decode(raw, self._where(raw))
        except (KubeschedError, ValueError, TypeError, KeyError) as error:
            if known is not None:
                del self._items[key]
                self.handler.on_delete(known[2])
            self.handler.on_invalid(raw, error)
            return
        # The cache takes the object only once the handler has: if the handler raises, the next relist
        # delivers it again instead of finding it "unchanged".
        if known is None:
            self.handler.on_add(obj)
        elif known[1] != uid:  # deleted and created again under the same name while we were not watching
            del self._items[key]
            self.handler.on_delete(known[2])
            self.handler.on_add(obj)
        else:
            self.handler.on_update(known[2], obj)
        self._items[key] = (version, uid, obj)
