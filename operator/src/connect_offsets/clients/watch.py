"""The operator's own watch of its resources: list, then watch from the list's resourceVersion,
one thread per stream, events handed to the event loop in order (client-go's reflector).

Why not kopf's watching: kopf hands every listed object to a task of its own and runs each event
through its causes and handler machinery, about 0.5 ms of event-loop time an event. After a
restart at 20,000 resources, 20,000 such tasks became ready at once and a user's request waited
behind all of them (``bench_cold_start``: lists p99 12.7 s). Here a stream's thread reads and
parses the JSON, and the loop takes the parsed events in bounded batches (``EventPump``): a
listing of 20,000 is 100 turns of the loop, and a request's event is handled a few milliseconds
after it arrives.

What a stream does, as client-go's reflector:

- lists in pages (``limit``/``continue``), then watches from the list's resourceVersion with
  bookmarks, so a reconnect resumes where it was without listing again;
- on ``410 Gone`` (the version is older than the API server keeps), lists again and reports as
  deleted what it knew and the new listing no longer has (a deletion missed while disconnected);
- when a listing's ``continue`` token expires between two pages (etcd compacted the version it
  pins: a listing slower than the compaction interval), lists again in one request, without pages
  (client-go's pager, ``FullListIfExpired``): paging again from the start could expire again, for
  ever, on a listing that is slow for the same reason;
- after any other failure (a dropped connection, RBAC not granted yet, the CRD not installed yet),
  tries again with exponential back-off up to ``MAX_BACKOFF_S``.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import quote

import urllib3
from kubernetes import client

from connect_offsets.errors import TransientError

__all__ = [
    "EventPump",
    "EventSink",
    "WatchEvent",
    "WatchStream",
    "Watched",
]

log = logging.getLogger(__name__)

#: Objects a listing page asks for: the API server's own default page for its watch cache.
PAGE_SIZE = 500
#: The API server closes a watch after this long (``timeoutSeconds``); the stream reconnects from
#: its last version. Short enough that a connection dropped silently is noticed within it.
WATCH_TIMEOUT_S = 300
#: Read time-out on the client side: the server's time-out plus a margin (bookmarks arrive about
#: once a minute, so a read that waits this long means a dead connection).
READ_TIMEOUT_S = WATCH_TIMEOUT_S + 30
CONNECT_TIMEOUT_S = 10.0
MAX_BACKOFF_S = 30.0
#: Loop time one turn of the pump may take (it ends after the event that passes it).
TURN_BUDGET_S = 0.01
#: Bytes a listing page may take before it is parsed: a tenant may fill its objects up to the API
#: server's object limit (1.5 MiB), and 500 of them would be 750 MiB. A larger page is asked
#: again at half the size (one object always fits).
MAX_PAGE_BYTES = 128 * 1024 * 1024
#: Bytes one watch event may take before it is parsed (the API server's object limit, with room
#: for JSON escaping); a longer line ends the watch, which is opened again.
MAX_EVENT_BYTES = 16 * 1024 * 1024

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class Watched:
    """A kind the operator watches: its API group (``""`` for the core group), version, plural,
    and a label selector the API server filters with."""

    group: str
    version: str
    plural: str
    label_selector: str | None = None
    #: Only the objects' metadata is streamed (``PartialObjectMetadata``): for a kind whose
    #: events only say which object changed, a tenant's large object costs the stream nothing.
    metadata_only: bool = False

    def path(self, namespace: str | None) -> str:
        prefix = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        scope = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
        return f"{prefix}{scope}/{self.plural}"

    def describe(self, namespace: str | None) -> str:
        return f"{self.plural}{'.' + self.group if self.group else ''} in {namespace or 'all namespaces'}"


@dataclass(frozen=True)
class WatchEvent:
    """One object's change: ``body`` is the object as the API server sent it (a fresh dict no one
    else holds), or ``None`` for a deletion the stream inferred from a new listing."""

    kind: Watched
    type: EventType
    namespace: str
    name: str
    body: dict[str, Any] | None
    #: The object's resourceVersion in the event ("" for a deletion a new listing inferred): a
    #: deletion older than the body already held is not applied.
    version: str = ""


class EventSink(Protocol):
    def put(self, events: list[WatchEvent]) -> None:
        """Called from a stream's thread, in the stream's order."""


class ResourceVersionGone(TransientError):
    """The watch's resourceVersion is older than the API server keeps (410): list again."""


class EventPump:
    """Watch events from the streams' threads to the event loop, in arrival order, at most
    ``per_turn`` of them a turn of the loop.

    Why bounded: a listing hands over hundreds of objects at once; handling them all in one
    callback would hold the loop for as long, and every pass (a user's request among them) would
    wait that long for its next step. And bounded the other way: a stream's thread waits in
    ``put`` while ``max_pending`` events are not handed over yet, so a listing of 20,000 is not
    held parsed in memory ahead of the loop (the thread reads ahead by a few pages, no more).
    """

    def __init__(
        self, loop: Any, handle: Callable[[WatchEvent], None], *, per_turn: int = 200, max_pending: int = 2000
    ) -> None:
        self._loop = loop
        self._handle = handle
        self._per_turn = per_turn
        self._max_pending = max_pending
        self._events: collections.deque[WatchEvent] = collections.deque()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._scheduled = False
        self._closed = False

    def put(self, events: list[WatchEvent]) -> None:
        """From a stream's thread, never the loop's (it may wait for the loop)."""
        if not events:
            return
        with self._room:
            self._room.wait_for(lambda: self._closed or len(self._events) < self._max_pending)
            if self._closed:
                return
            self._events.extend(events)
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._drain)

    def close(self) -> None:
        """Stopping: nothing more is handed over, and no stream's thread waits for room."""
        with self._room:
            self._closed = True
            self._events.clear()
            self._room.notify_all()

    def _drain(self) -> None:
        # A turn ends after ``per_turn`` events or TURN_BUDGET_S of handling, whichever first: a
        # tenant's costly events (a deeply nested config) hold the loop for one budget at a time.
        ends = time.perf_counter() + TURN_BUDGET_S
        for _ in range(self._per_turn):
            try:
                event = self._events.popleft()
            except IndexError:
                break
            try:
                self._handle(event)
            except Exception:  # one bad event must not stop the others
                log.exception(
                    "handling the watch event of %s %s/%s failed", event.kind.plural, event.namespace, event.name
                )
            if time.perf_counter() > ends:
                break  # at least one event a turn
        with self._room:
            self._room.notify_all()
            if not self._events or self._closed:
                self._scheduled = False
                return
        self._loop.call_soon(self._drain)


def _name_of(body: dict[str, Any]) -> tuple[str, str]:
    metadata = body.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _version_of(body: dict[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")


class WatchStream:
    """One list-then-watch stream of ``kind`` in ``namespace`` (``None``: cluster-wide), run by a
    daemon thread of its own; events go to ``pump``."""

    def __init__(
        self,
        api_client: client.ApiClient,
        kind: Watched,
        namespace: str | None,
        pump: EventSink,
        *,
        page_size: int = PAGE_SIZE,
        watch_timeout_s: int = WATCH_TIMEOUT_S,
    ) -> None:
        self._api = api_client
        self.kind = kind
        self.namespace = namespace
        self._pump = pump
        self._page_size = page_size
        self._watch_timeout_s = watch_timeout_s
        self._stopped = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._thread: threading.Thread | None = None
        #: (namespace, name) of every object the last listing and the events since then showed:
        #: what a new listing is compared with to find deletions missed while disconnected.
        self._known: set[tuple[str, str]] = set()
        #: Listings made (the first, and one after each 410 Gone).
        self.lists = 0
        #: The last resourceVersion this stream handed over (a listing's, an event's, a
        #: bookmark's): a watch that ends or fails resumes from here, never from where it began,
        #: so no event is handed over twice (a deletion replayed after a re-creation would drop the
        #: new object). None: list first.
        self._version: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"watch-{self.kind.plural}-{self.namespace or 'all'}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Ends the stream: an open watch is cut at its socket, so the thread ends at once."""
        self._stopped.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed
                log.debug("closing the watch of %s", self.kind.describe(self.namespace), exc_info=True)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                if self._version is None:
                    self._version = self._list()
                    failures = 0
                self._watch()
                failures = 0
            except ResourceVersionGone:
                log.info("the watch of %s is too old to resume: listing again", self.kind.describe(self.namespace))
                self._version = None
            except Exception as error:
                if self._stopped.is_set():
                    break
                failures += 1
                delay = min(MAX_BACKOFF_S, 0.5 * 2 ** min(failures, 8))
                log.warning(
                    "watching %s failed (%s); again in %.0f s",
                    self.kind.describe(self.namespace),
                    _describe(error),
                    delay,
                )
                self._stopped.wait(delay)

    def _request(
        self, query: list[tuple[str, str]], *, read_timeout: float, watching: bool = False
    ) -> urllib3.BaseHTTPResponse:
        accept = "application/json"
        if self.kind.metadata_only:
            as_kind = "PartialObjectMetadata" if watching else "PartialObjectMetadataList"
            accept = f"application/json;as={as_kind};g=meta.k8s.io;v=v1,application/json"
        _, url, headers, _, _ = self._api.param_serialize(
            "GET",
            self.kind.path(self.namespace),
            query_params=query,
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        response: urllib3.BaseHTTPResponse = self._api.rest_client.pool_manager.request(
            "GET",
            url,
            headers=headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=read_timeout),
        )
        if response.status >= 400:
            body = response.read(64 * 1024)
            response.close()
            if response.status == 410:
                raise ResourceVersionGone()
            raise StreamFailed(response.status, body.decode(errors="replace"))
        return response

    def _query(self) -> list[tuple[str, str]]:
        return [("labelSelector", self.kind.label_selector)] if self.kind.label_selector else []

    def _list(self) -> str:
        """Lists every object, page by page, handing each page to the pump; returns the listing's
        resourceVersion. Objects known before and not listed now are reported deleted."""
        listed: set[tuple[str, str]] = set()
        handed: set[tuple[str, str]] = set()  # by a listing that expired: gone unless listed again
        token = ""
        version = ""
        page_size = self._page_size
        while True:
            query = [*self._query(), *([("limit", str(page_size))] if page_size else [])]
            if token:
                query.append(("continue", token))
            try:
                response = self._request(query, read_timeout=READ_TIMEOUT_S)
            except ResourceVersionGone:
                if not token:
                    raise
                log.info(
                    "the listing of %s expired between pages: listing again in one request",
                    self.kind.describe(self.namespace),
                )
                handed |= listed
                listed, token, version, page_size = set(), "", "", 0
                continue
            try:
                data = response.read(MAX_PAGE_BYTES + 1)
            except BaseException:
                response.close()
                raise
            if len(data) > MAX_PAGE_BYTES:
                response.close()  # the rest is left unread: its connection is not reused
                if page_size == 0:  # a listing in one request: the next attempt pages again
                    raise StreamFailed(
                        0, f"the listing of {self.kind.plural} in one request is over {MAX_PAGE_BYTES} bytes"
                    )
                if page_size == 1:
                    raise StreamFailed(0, f"one object of {self.kind.plural} is over {MAX_PAGE_BYTES} bytes")
                page_size = max(1, page_size // 2)
                log.warning(
                    "a page of %s was over %d bytes: asking again %d at a time",
                    self.kind.describe(self.namespace),
                    MAX_PAGE_BYTES,
                    page_size,
                )
                continue
            response.release_conn()
            page = json.loads(data)
            metadata = page.get("metadata") or {}
            version = version or str(metadata.get("resourceVersion") or "")
            events: list[WatchEvent] = []
            for item in page.get("items") or []:
                namespace, name = _name_of(item)
                listed.add((namespace, name))
                events.append(WatchEvent(self.kind, "ADDED", namespace, name, item, _version_of(item)))
            self._pump.put(events)
            token = str(metadata.get("continue") or "")
            if not token:
                break
        gone = (self._known | handed) - listed
        self._pump.put([WatchEvent(self.kind, "DELETED", ns, name, None) for ns, name in sorted(gone)])
        self._known = listed
        self.lists += 1
        return version

    def _watch(self) -> None:
        """Watches from the last version handed over until the server ends the watch, keeping the
        version of each event and bookmark as it goes."""
        query = [
            *self._query(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self._version or ""),
            ("timeoutSeconds", str(self._watch_timeout_s)),
        ]
        response = self._request(query, read_timeout=self._watch_timeout_s + 30, watching=True)
        self._response = response
        try:
            if self._stopped.is_set():
                return
            for line in _lines(response):
                event = json.loads(line)
                kind = event.get("type")
                body = event.get("object") or {}
                if kind == "ERROR":
                    if body.get("code") == 410:
                        raise ResourceVersionGone()
                    raise StreamFailed(int(body.get("code") or 0), str(body.get("message") or body))
                version = _version_of(body)
                if kind != "BOOKMARK":
                    namespace, name = _name_of(body)
                    if kind == "DELETED":
                        self._known.discard((namespace, name))
                        self._pump.put([WatchEvent(self.kind, "DELETED", namespace, name, None, version)])
                    elif kind in ("ADDED", "MODIFIED"):
                        self._known.add((namespace, name))
                        self._pump.put([WatchEvent(self.kind, kind, namespace, name, body, version)])
                # Only once handed over: a stream stopped in ``put`` resumes with this event.
                self._version = version or self._version
        finally:
            self._response = None
            response.close()


class StreamFailed(TransientError):
    """The API server refused the list or watch, or ended a watch with an error other than 410."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message[:500]}")
        self.status = status


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """The newline-separated JSON documents of a watch response, as they arrive."""
    pending = bytearray()
    scanned = 0  # where the search for the next newline goes on: each byte is looked at once
    for chunk in response.stream(64 * 1024, decode_content=True):
        pending += chunk
        begin = 0
        while (end := pending.find(b"\n", max(begin, scanned))) >= 0:
            line = bytes(pending[begin:end])
            begin = end + 1
            if line.strip():
                yield line
        del pending[:begin]
        scanned = len(pending)
        if scanned > MAX_EVENT_BYTES:
            raise StreamFailed(0, f"a watch event over {MAX_EVENT_BYTES} bytes")
    if pending.strip():
        yield bytes(pending)


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return text[:300]
