"""One Connect snapshot per cluster: every connector's config and status from one call, shared by
every resource bound to the cluster.

Why: reading config, status and topics per connector per pass made the idle cost three REST calls
per connector per drift interval (5,674 calls/min at 1,000 connectors, ~95 requests/s on one
worker just to be watched). ``GET /connectors?expand=status&expand=info`` answers the same for
all of them at once. The snapshot is refreshed once per drift interval (by the ConnectCluster's
own pass, or by the first reader that finds it too old) and compared with the previous one: the
connectors whose config or status changed behind our back are reported (``on_change``), so their
resources are woken and repaired within one interval, whatever the scale.

Where the snapshot is not trusted, a connector is read on its own (``GET .../config``,
``.../status``), as before:
- after the operator's own write to it (``ConnectClient.last_write``): a snapshot sent before
  the write's answer may predate it;
- when the worker left the connector out or answered only part of it (deleted meanwhile, a
  rebalance): absent is confirmed before anything is re-created;
- when the caller asks for fresh state (a destructive offsets change decides on it);
- when the cluster's answer is larger than ``MAX_SNAPSHOT_BYTES``, or the endpoint refuses the
  listing for good (a 4xx other than 401/403/409/429: an authorizing REST extension, a proxy that
  only routes per-connector paths); then never again for this endpoint. 401 and 403 are raised:
  they are about credentials, which the ConnectCluster reports.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connect_offsets.clients.connect import (
    ConnectClient,
    ConnectError,
    ConnectHTTPError,
    ConnectResponseTooLarge,
    ExpandedConnector,
)
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.models.connect import ConnectorStatus

__all__ = ["TOPICS_REFRESH_S", "ConnectorRead", "ConnectorsSnapshot", "ListingPending"]

log = logging.getLogger(__name__)

#: ``GET .../topics`` has no bulk form: a RUNNING connector's topics are read at most this often
#: (a connector that is not running uses no new topics), instead of on every pass.
TOPICS_REFRESH_S = 300.0

#: After a failed refresh, readers get the same error for this long instead of asking again: a
#: frozen worker finds one request queued per interval, not one per resource.
FAILED_REFRESH_HOLD_S = 2.0

#: While a refresh is in flight, readers are answered from a snapshot up to this many ``max_age``
#: old (plus how long the last listing took) instead of waiting for it.
STALE_WHILE_REFRESHING = 2.0

#: While the process's start is under way (``hold``: its first checks), a snapshot up to this old
#: is not refreshed. Why: each check is a look at its connector already, from the snapshot the
#: start took; listing every endpoint again each drift interval meanwhile cost the workers 91 s of
#: CPU (and the operator the parsing) in a 211 s first start at 20,000 connectors, on the two cores
#: the API server's 40,000 writes need (bench_cold_start, 2026-11-29). Bounded (the hold ends 300 s
#: after the start at the latest): drift found during a start is at most this late.
START_HOLD_MAX_S = 300.0


@dataclass(frozen=True)
class ConnectorRead:
    """What a pass knows of one connector: config and status (None: absent). ``digest`` is set when
    both came from the snapshot, so two passes can tell that nothing changed in Connect."""

    config: dict[str, str] | None
    status: ConnectorStatus | None
    digest: str | None = None


class ListingPending(ConnectOffsetsError):
    """A check that would wait for its cluster's first listing gives its worker back instead (not a
    failure: a signal to come back when ``listing`` ends, raised on purpose, so under the one root).

    Why: after a start, the first ``GET /connectors?expand=...`` of 5,000 connectors takes Connect
    ~7.7 s, and every check of the cluster waited for it on a worker of its namespace's share:
    a ``list`` asked meanwhile waited behind them (bench_cold_start: p99 6.9 s). The pass ends
    before it has written anything, and its key is queued again when ``listing`` completes.
    """

    def __init__(self, listing: asyncio.Future[Any]) -> None:
        super().__init__("the cluster's first connector listing is under way")
        self.listing = listing


@dataclass(frozen=True)
class _Taken:
    connectors: dict[str, ExpandedConnector]
    at: float  # monotonic, when the request was sent
    seq: int  # the client's write_seq when the request was sent


class ConnectorsSnapshot:
    """The snapshot of one Connect cluster, for one ``ConnectClient``."""

    def __init__(
        self,
        client: ConnectClient,
        max_age: float,
        on_change: Callable[[set[str]], None] | None = None,
        hold: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._clock = clock
        self.max_age = max_age
        #: Whether the process's start is under way (``START_HOLD_MAX_S``).
        self.hold = hold
        #: Told the names of connectors whose config or status changed between two snapshots.
        self.on_change = on_change
        self._taken: _Taken | None = None
        self._inflight: asyncio.Task[_Taken] | None = None  # the listing under way
        self._failed: tuple[float, ConnectError] | None = None
        self._off: str | None = None  # why snapshots are not used for this endpoint
        self._topics_at: dict[str, float] = {}
        #: How long the last listing took: a snapshot is at least that old when it arrives.
        self._took = 0.0
        #: The snapshot was served past ``max_age`` because the start's hold kept it: when the hold
        #: ends it is served while its refresh runs, however old, rather than every reader waiting.
        self._kept_for_start = False

    @property
    def usable(self) -> bool:
        return self._off is None

    @property
    def client(self) -> ConnectClient:
        return self._client

    def connectors(self) -> dict[str, ExpandedConnector] | None:
        """Every connector of the last snapshot (None: none taken yet, or snapshots are off)."""
        return None if self._taken is None or self._off is not None else self._taken.connectors

    async def refresh(self, older_than: float = 0.0) -> None:
        """Take a new snapshot now, unless the last one is younger than ``older_than`` seconds
        (one request however many callers wait for it)."""
        self._settle()
        if self._off is not None:
            return
        if self._taken is not None and self._clock() - self._taken.at < older_than:
            return
        if self._held_for_start():
            return
        if self._inflight is None and self._failed is not None and self._held():
            failure = self._failed[1]
            if isinstance(failure, ConnectHTTPError):
                # The listing that just failed got an answer (a 500 after Connect's own 90 s, say),
                # which opens no breaker: a caller that waited for it (a pass the listing deferred)
                # must not ask an overloaded worker for its heaviest request again at once; it
                # reports this and backs off (attack review of issue 45, F2). A failure without an
                # answer opened the breaker, which refuses the next listing itself, in its words.
                raise failure
        if self._inflight is None:
            self._start_listing()
        task = self._inflight
        assert task is not None
        try:
            await asyncio.shield(task)
        except ConnectResponseTooLarge:
            return  # snapshots are off now (``_landed``)
        except ConnectHTTPError as error:
            if error.retryable or error.status_code in (401, 403):
                raise
            return  # refused for good: snapshots are off now

    def _start_listing(self) -> None:
        """A listing that keeps its own outcome (``_landed``, its first callback), whoever awaits
        it: a listing everyone stopped waiting for (a pass cancelled with its Lease, a deferred
        check) still ends the wait of the checks it holds, and its failure is held for them."""
        task = asyncio.get_running_loop().create_task(self._take())
        task.add_done_callback(self._landed)
        self._inflight = task

    def _landed(self, task: asyncio.Task[_Taken]) -> None:
        """A listing ended: it is no longer under way, and a failure is held (``_failed``) or
        turns snapshots off. A success installed itself (``_take``)."""
        if self._inflight is task:
            self._inflight = None
        if task.cancelled():
            return
        error = task.exception()
        if error is None or (self._failed is not None and self._failed[1] is error):
            return
        if isinstance(error, ConnectResponseTooLarge) or (
            isinstance(error, ConnectHTTPError) and not error.retryable and error.status_code not in (401, 403)
        ):
            self._turn_off(str(error))
        elif isinstance(error, ConnectError):
            self._failed = (self._clock(), error)
        else:  # a bug of ours: logged with its traceback, and held as any failure (no tight loop)
            log.error("the connector listing failed unexpectedly", exc_info=error)
            self._failed = (self._clock(), ConnectError(f"the connector listing failed unexpectedly: {error!r}"))

    def _settle(self) -> None:
        """Apply the outcome of a listing that ended and whose callback has not run yet."""
        if self._inflight is not None and self._inflight.done():
            self._landed(self._inflight)

    def _turn_off(self, why: str) -> None:
        log.warning("connector snapshots off for this Connect endpoint (%s); connectors are read one by one", why)
        self._off = why

    async def _take(self) -> _Taken:
        """One request, installed and compared once, here in the task every caller awaits.

        Not in ``refresh`` after the await: thousands of resources wait on the same request, and
        each of them comparing 5,000 connectors made the idle operator spend 60 % of a core on
        the comparison alone (bench_steady_state, 5 s interval). Installing here also keeps a
        late waiter of an older request from putting its snapshot back over a newer one.
        """
        at, seq = self._clock(), self._client.write_seq
        taken = _Taken(await self._client.list_connectors_expanded(), at, seq)
        self._took = self._clock() - at
        previous, self._taken, self._failed = self._taken, taken, None
        self._kept_for_start = False
        if previous is not None and self.on_change is not None:
            changed = {
                name
                for name in previous.connectors.keys() | taken.connectors.keys()
                if (old := previous.connectors.get(name)) is None
                or (new := taken.connectors.get(name)) is None
                or old.digest != new.digest
            }
            if changed:
                self.on_change(changed)
        return taken

    def first_listing(self, *, start: bool = True) -> asyncio.Future[Any] | None:
        """The cluster's first listing while a reader would wait for it, started if none is under
        way (unless not ``start``). None once a snapshot is taken, while snapshots are off, or
        once a first listing failed, until one succeeds: only the first attempt is waited for by
        giving workers back; after a failure a reader gets the held error at once, or waits for
        the next listing in its pass, and reports what it got with back-off (attack review of
        issue 45, A: with a deferral per attempt, a failing endpoint was asked again by every
        pass that came back after the hold, with no back-off and no status)."""
        self._settle()
        if self._taken is not None or self._off is not None or self._failed is not None:
            return None
        if self._inflight is None and start:
            self._start_listing()
        return self._inflight

    async def read(self, name: str, *, fresh: bool = False, asked: bool = False, defer: bool = False) -> ConnectorRead:
        """The connector from a snapshot at most ``max_age`` old, or read on its own (see module).

        ``asked``: the pass carries a user's request. Before the first snapshot is taken it reads
        the connector on its own instead of waiting for the listing: after a start, the first
        listing of 5,000 connectors took a worker 10-15 s under the backlog of first checks, and
        every ``list`` asked meanwhile waited for it (bench_cold_start's restart: p99 13.5 s).
        Nor does it read a snapshot past ``max_age`` that only the start's hold keeps (up to
        ``START_HOLD_MAX_S``): a user's request decides on what Connect holds now (attack review
        of issue 45, helper-37 F2). Nor does it wait for the listing that replaces a snapshot
        too old to be served meanwhile (``_too_stale``): it starts that listing and reads its
        connector on its own (bench_cold_start: a ``list`` waited 7.5 s for a listing of 5,000
        connectors). In between, it is answered from the snapshot while a refresh runs, as checks
        are: two requests per connector there would be more than the one listing (helper-41).
        ``defer``: a reader that would wait for the first listing raises ``ListingPending``."""
        if asked and not fresh and self._taken is not None and self._too_stale():
            self._refresh_behind()
            fresh = True
        if asked and (self._taken is None or (self._age() > self.max_age and self._held_for_start())):
            fresh = True
        if defer and not fresh and (listing := self.first_listing()) is not None:
            raise ListingPending(listing)
        if not fresh and self._off is None:
            taken = await self._current()
            if taken is not None and self._client.last_write(name) <= taken.seq:
                entry = taken.connectors.get(name)
                if entry is not None and entry.complete:
                    return ConnectorRead(entry.config, entry.status, entry.digest)
        return await self._read_one(name)

    async def _current(self) -> _Taken | None:
        taken = self._taken
        age = None if taken is None else self._age()
        if age is not None and age <= self.max_age:
            return taken
        if age is not None and self._held_for_start():
            self._kept_for_start = True
            return taken
        if age is not None and (age <= STALE_WHILE_REFRESHING * self.max_age + self._took or self._kept_for_start):
            # 5,000 connectors take Connect seconds to list, 20,000 minutes: answer from the last
            # snapshot while a refresh is on its way (started here if none is) rather than queue
            # every check behind it. A listing slower than the interval would otherwise make each
            # check wait for one (bench_steady_state at 20,000: one check a second). Changes it
            # finds still wake their resources (on_change); writes and fresh reads never come here.
            # A snapshot the start's hold kept is answered so too when the hold ends: every check
            # of a namespace waited 5 s for the new listing then, and held the workers a user's
            # request needed (bench_cold_start: a `list` asked then took 5.7 s).
            self._settle()
            if self._inflight is None and not self._held():
                self._start_listing()
            return taken
        if self._failed is not None and self._held():
            raise self._failed[1]
        await self.refresh()
        return self._taken

    def _too_stale(self) -> bool:
        """Past what a user's request is answered from while a refresh runs (checks are answered
        from a snapshot the start's hold kept however old, ``_current``; a request is not: it
        would decide on it for as long as listings fail, attack review helper-42, 5)."""
        if self._held_for_start() or self._off is not None:
            return False
        return self._age() > STALE_WHILE_REFRESHING * self.max_age + self._took

    def _refresh_behind(self) -> None:
        """Start the listing that replaces a stale snapshot, unless one is under way or one failed
        just now (``FAILED_REFRESH_HOLD_S``: not asked again; the request reads on its own)."""
        self._settle()
        if self._off is None and self._inflight is None and not self._held():
            self._start_listing()

    def _age(self) -> float:
        """Seconds since the snapshot's listing was sent (infinite: none taken yet)."""
        return float("inf") if self._taken is None else self._clock() - self._taken.at

    def _held_for_start(self) -> bool:
        """A snapshot taken, younger than ``START_HOLD_MAX_S``, while the start is under way."""
        return self._age() < START_HOLD_MAX_S and self.hold()

    def _held(self) -> bool:
        """Whether the last listing failed less than ``FAILED_REFRESH_HOLD_S`` ago."""
        return self._failed is not None and self._clock() - self._failed[0] < FAILED_REFRESH_HOLD_S

    async def _read_one(self, name: str) -> ConnectorRead:
        # One after the other, not concurrently: against a frozen or overloaded worker each retry
        # must leave one request behind, not two (the fault tests bound the requests queued).
        config = await self._client.get_connector_config(name)
        status = await self._client.get_connector_status(name) if config is not None else None
        return ConnectorRead(config, status)

    def topics_due(self, name: str, running: bool) -> bool:
        """Whether this pass should read the connector's topics (``TOPICS_REFRESH_S``); marks it read."""
        if not running:
            return False
        now = self._clock()
        if now - self._topics_at.get(name, float("-inf")) < TOPICS_REFRESH_S:
            return False
        self._topics_at[name] = now
        return True

    def names(self) -> set[str] | None:
        """The connectors the last snapshot listed (None: no snapshot yet)."""
        return None if self._taken is None else set(self._taken.connectors)
