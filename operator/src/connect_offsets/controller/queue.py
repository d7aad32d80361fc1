"""One work queue for every resource the operator reconciles: client-go's workqueue, fair across
namespaces, with a share of the workers per namespace and a cap per Connect cluster, and user
requests ahead of background checks.

Why one queue instead of a daemon per resource: a daemon per resource cost ~60 KiB each and a
timer each, and gave no place to decide *who runs next* — one tenant's 1,000 slow resources were
1,000 concurrent passes (issue 35). Here a resource is a key; watch events, timers (the drift
interval, a requeue, a back-off) and wake-ups from other resources only put its key in the queue,
and a fixed number of workers take keys out:

* a key is queued at most once (adding it again while it waits does nothing) and is never handed
  to two workers at once (added while it is being processed, it comes back once that ends);
* keys due later wait in one heap, ordered by when they are due (one timer for all of them), on
  a grid (``due_on_grid``) so that many come due at once;
* two levels: **urgent** keys (a change a user made: an annotation, a spec change, a ConfigMap the
  resource reads; or a request under way) are taken before **background** ones (first checks
  after a start or a Lease, drift checks, resyncs, wake-ups by progress), except that every
  ``BACKGROUND_EVERY``-th take goes to a waiting background key, so a flood of requests cannot
  starve the checks for ever (controller-runtime's priority queue, with that one guard added);
* ready keys wait per namespace and namespaces take turns, so one namespace's backlog delays
  another's key by at most one turn of each worker;
* **a share of the workers per namespace**, decided when a worker is given (issue 45): with k
  namespaces that have keys ready or passes running, a namespace with ``(workers - 1) // k``
  passes running (at least 1) takes another only if no namespace under its share can take one
  and a worker stays free after it (from ``RESERVE_FROM`` workers on). That last free worker is
  the reserve: a namespace with nothing running finds it at once, however long another
  namespace's passes wait for a dead endpoint, and the others' ended passes go to the namespaces
  under their share first. Max-min fair: idle workers are not held back from a busy namespace
  beyond that one;
* a key whose Connect cluster already has ``cluster_cap`` passes running is skipped until one
  ends: a slow Connect cluster holds at most its share of the workers; a cluster **in doubt** (its
  circuit breaker open or probing, ``in_doubt``) may have one pass running: a dead endpoint holds
  one worker with its probe while its other resources wait (and then fail fast), not a half;
* failures back off per key, 2 s doubling to 60 s, until ``forget``;
* a change wakes one waiting worker, not all of them, and only one waiting worker keeps the timer
  of the next due key: waking every idle worker on every change cost 7 wake-ups (and 7 timers on
  the event loop) per key at 5,000 resources, 40 % more CPU per key than one worker
  (bench/README.md, the work queue's wake-ups).

The queue is pure asyncio and knows nothing of Kubernetes: keys are tuples, the cluster of a key,
whether a key is urgent, and the clock are given.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

__all__ = ["BACKGROUND_EVERY", "BASE_DELAY_S", "MAX_DELAY_S", "Key", "QueueStats", "WorkQueue", "due_on_grid"]

#: (plural, namespace, name) of a resource, or another kind of work of the operator's own.
Key = tuple[str, str, str]

#: Back-off of a failing key: 2 s, doubling, at most 60 s (as the daemons' before).
BASE_DELAY_S = 2.0
MAX_DELAY_S = 60.0

#: While urgent keys wait, every this-many-th take goes to a background key that waits too.
BACKGROUND_EVERY = 8

#: From this many workers on, one is kept free for a namespace with nothing running.
RESERVE_FROM = 4

#: The two levels of ready keys, taken in this order (``BACKGROUND_EVERY`` aside).
URGENT, BACKGROUND = 0, 1
_LEVELS = (URGENT, BACKGROUND)

#: Delayed keys come due on a grid whose step is this fraction of their delay, at most
#: ``MAX_GRID_S`` (``due_on_grid``).
GRID_FRACTION = 1 / 16
MAX_GRID_S = 1.0


def due_on_grid(now: float, delay: float) -> float:
    """When a key delayed by ``delay`` from ``now`` comes due: at the next step of a grid of at most
    a sixteenth of the delay (1 s at most), never earlier than asked.

    Why: every resource's next check is one drift interval after its last, so at 5,000 resources
    and 30 s a key came due every 6 ms, each time a timer, a wake-up and a loop turn for one
    check; that wake-up machinery was a quarter of the idle operator's CPU (py-spy at 5,000,
    issue 35). On a grid, the keys of one step come due together and the workers take them back
    to back: one wake-up per step.
    """
    step = min(MAX_GRID_S, delay * GRID_FRACTION)
    due = now + delay
    if step <= 0:
        return due
    return max(due, math.ceil(due / step) * step)


@dataclass
class QueueStats:
    """What the queue did, for its metrics: per kind (a key's first element)."""

    adds: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    #: Keys taken, by level ("urgent", "background").
    taken: Counter[str] = field(default_factory=Counter)
    #: Takes by a namespace past its share (a worker it found free, with the reserve left).
    past_share: int = 0


class WorkQueue:
    """Deduplicating, delaying, rate-limited, prioritised and fair; see the module docstring."""

    def __init__(
        self,
        *,
        cluster_of: Callable[[Key], Hashable | None] = lambda key: None,
        cluster_cap: int = 0,
        workers: int = 0,
        urgent_of: Callable[[Key], bool] = lambda key: False,
        in_doubt: Callable[[Hashable], bool] = lambda cluster: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cluster_of = cluster_of
        self._cluster_cap = cluster_cap  # 0: no cap
        self._workers = workers  # 0: no share per namespace
        # The worker kept free for a namespace with nothing running; with fewer than
        # ``RESERVE_FROM`` workers one would be too large a part of them.
        self._reserve = 1 if workers >= RESERVE_FROM else 0
        self._urgent_of = urgent_of
        self._in_doubt = in_doubt
        self._clock = clock
        # Ready keys per level, per namespace, and inside it per Connect cluster (FIFO each): a
        # namespace's turn takes the first key of a cluster under its cap without scanning that
        # cluster's backlog.
        self._ready: tuple[dict[str, dict[Hashable | None, deque[Key]]], ...] = ({}, {})
        # Namespaces with ready keys, in turn (a linked order: the first, a move to the end and a
        # removal are O(1) with ten thousand namespaces).
        self._turns: tuple[OrderedDict[str, None], ...] = (OrderedDict(), OrderedDict())
        self._queued: dict[Key, tuple[float, Hashable | None, int]] = {}  # ready -> (since, cluster, level)
        self._delayed: list[tuple[float, int, Key]] = []  # heap of (due, tie-breaker, key)
        self._due: dict[Key, float] = {}  # the earliest due time of each delayed key
        self._processing: dict[Key, Hashable | None] = {}  # key -> its cluster while a worker has it
        self._taken_urgent: set[Key] = set()  # keys being processed that were taken as urgent
        self._dirty: dict[Key, bool] = {}  # added while processing (urgent?): ready again once done
        self._inflight: Counter[Hashable] = Counter()  # passes running per cluster
        self._running: Counter[str] = Counter()  # passes running per namespace
        # Ready keys plus passes running, per namespace: its keys are the namespaces that want
        # workers (``_share``), kept as keys come and go rather than gathered at every take.
        self._load: Counter[str] = Counter()
        self._urgent_streak = 0  # urgent takes in a row while background keys waited
        self._failures: Counter[Key] = Counter()
        self._seq = 0
        # Workers waiting for a key, oldest first; one of them (``_keeper``) also waits for the
        # next due key's time.
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._keeper: asyncio.Future[None] | None = None
        self._shut = False
        self.stats = QueueStats()

    # --- adding ---------------------------------------------------------------------------------

    def add(self, key: Key, *, urgent: bool = False) -> None:
        """Ready now (unless already waiting, or being processed: then once that ends). ``urgent``:
        a change a user made asks for it (else ``urgent_of`` decides); an urgent add of a key waiting
        as background moves it ahead."""
        if self._shut:
            return
        self.stats.adds[key[0]] += 1
        self._make_ready(key, urgent)

    def _make_ready(self, key: Key, urgent: bool = False) -> None:
        if key in self._processing:
            self._dirty[key] = self._dirty.get(key, False) or urgent
            return
        queued = self._queued.get(key)
        if queued is not None:
            if queued[2] == BACKGROUND and (urgent or self._urgent_of(key)):
                self._unready(key)  # to the urgent level, below
            else:
                return
        self._due.pop(key, None)  # a timer due later is superseded
        cluster = self._cluster_of(key)
        level = URGENT if urgent or self._urgent_of(key) else BACKGROUND
        since = queued[0] if queued is not None else self._clock()
        self._queued[key] = (since, cluster, level)
        namespace = key[1]
        self._load[namespace] += 1
        ready = self._ready[level]
        if namespace not in ready:
            ready[namespace] = {}
            self._turns[level][namespace] = None
        ready[namespace].setdefault(cluster, deque()).append(key)
        self._wake_one()

    def add_after(self, key: Key, delay: float) -> None:
        """Ready in ``delay`` seconds, or sooner if it is added again meanwhile; a key already ready,
        or due sooner, keeps that."""
        if self._shut:
            return
        if delay <= 0:
            self.add(key)
            return
        self.stats.adds[key[0]] += 1
        if key in self._queued:
            return
        due = due_on_grid(self._clock(), delay)
        current = self._due.get(key)
        if current is not None and current <= due:
            return
        earliest = self._next_due()
        self._due[key] = due
        self._seq += 1
        heapq.heappush(self._delayed, (due, self._seq, key))
        if earliest is None or due < earliest:
            self._wake_keeper()  # its timer is for a later time

    def add_rate_limited(self, key: Key) -> float:
        """Ready after the key's back-off (2 s, doubling with each failure, at most 60 s); the delay."""
        self._failures[key] += 1
        self.stats.retries[key[0]] += 1
        delay = float(min(BASE_DELAY_S * 2 ** (self._failures[key] - 1), MAX_DELAY_S))
        self.add_after(key, delay)
        return delay

    def failures(self, key: Key) -> int:
        return self._failures[key]

    def forget(self, key: Key) -> None:
        """The key succeeded: its back-off starts over."""
        self._failures.pop(key, None)

    def remove(self, key: Key) -> None:
        """The resource is gone: drop the key from everywhere (a pass under way still ends)."""
        self._failures.pop(key, None)
        self._due.pop(key, None)
        self._dirty.pop(key, None)
        if key in self._queued:
            self._unready(key)

    def _unready(self, key: Key) -> None:
        """Take a ready key out of its level's lists."""
        _, cluster, level = self._queued.pop(key)
        self._unload(key[1])
        ready = self._ready[level]
        by_cluster = ready[key[1]]
        by_cluster[cluster].remove(key)
        if not by_cluster[cluster]:
            del by_cluster[cluster]
        if not by_cluster:
            del ready[key[1]]
            del self._turns[level][key[1]]

    # --- taking ---------------------------------------------------------------------------------

    async def get(self) -> tuple[Key, float]:
        """The next key to process and how long it waited ready; blocks until there is one a worker
        may take (its cluster under the cap, its namespace within its share). Raises
        ``asyncio.CancelledError`` once shut down."""
        while True:
            self._promote_due()
            taken = self._take()
            if taken is not None:
                if self._queued:
                    self._wake_one()  # more may be takeable: the next waiting worker looks
                return taken
            if self._shut:
                raise asyncio.CancelledError("work queue shut down")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            keeps_timer = self._keeper is None
            wait = self._next_due_in() if keeps_timer else None
            if keeps_timer:
                self._keeper = waiter
            else:
                self._waiters.append(waiter)
            try:
                async with asyncio.timeout(wait):
                    await waiter
            except TimeoutError:
                pass
            finally:
                if self._keeper is waiter:
                    self._keeper = None
                    self._wake_one()  # another waiting worker keeps the timer now

    def done(self, key: Key) -> None:
        """The worker finished ``key``: its cluster's and namespace's slots are free, and a key added
        meanwhile is ready."""
        if key not in self._processing:
            return
        cluster = self._processing.pop(key)
        self._taken_urgent.discard(key)
        self._running[key[1]] -= 1
        if self._running[key[1]] <= 0:
            del self._running[key[1]]
        self._unload(key[1])
        if cluster is not None:
            self._inflight[cluster] -= 1
            if self._inflight[cluster] <= 0:
                del self._inflight[cluster]
        if key in self._dirty:
            self._make_ready(key, self._dirty.pop(key))
        elif self._queued:
            self._wake_one()  # a key a cap or a share held back may be takeable now

    def shut_down(self) -> None:
        self._shut = True
        for waiter in (*self._waiters, self._keeper):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    # --- inside ---------------------------------------------------------------------------------

    def _promote_due(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:  # else superseded: added sooner, or removed
                del self._due[key]
                self._make_ready(key)

    def _next_due(self) -> float | None:
        while self._delayed and self._due.get(self._delayed[0][2]) != self._delayed[0][0]:
            heapq.heappop(self._delayed)  # superseded entries
        return self._delayed[0][0] if self._delayed else None

    def _next_due_in(self) -> float | None:
        due = self._next_due()
        return None if due is None else max(due - self._clock(), 0.0)

    def _wake_one(self) -> None:
        """One waiting worker looks again; if none waits but the timer's keeper, it does."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._wake_keeper()

    def _wake_keeper(self) -> None:
        if self._keeper is not None and not self._keeper.done():
            self._keeper.set_result(None)

    def _share(self) -> int | None:
        """Passes a namespace may have running while others want workers: (workers - reserve) // k
        over the k namespaces with keys ready or passes running, at least 1 (None: no share)."""
        if not self._workers:
            return None
        return max(1, (self._workers - self._reserve) // max(1, len(self._load)))

    def _unload(self, namespace: str) -> None:
        self._load[namespace] -= 1
        if self._load[namespace] <= 0:
            del self._load[namespace]

    def _cap(self, cluster: Hashable) -> float:
        """Passes a cluster may have running: 1 while it is in doubt (it failed and has not answered
        since), so that a dead endpoint holds one worker with its probe, not ``cluster_cap``."""
        if self._in_doubt(cluster):
            return 1
        return self._cluster_cap or math.inf

    def _take(self) -> tuple[Key, float] | None:
        """The first ready key a worker may take now: urgent before background (but see
        ``BACKGROUND_EVERY``); namespaces in turn within their share, then - if nobody within its
        share could take one - past it, as long as a worker stays free for someone else."""
        levels = _LEVELS
        if self._ready[URGENT] and self._ready[BACKGROUND] and self._urgent_streak >= BACKGROUND_EVERY - 1:
            levels = (BACKGROUND, URGENT)
        share = self._share()
        for level in levels:
            taken = self._take_from(level, share)
            if taken is not None:
                return taken
        if share is not None and self._workers - len(self._processing) > self._reserve:
            for level in levels:
                taken = self._take_from(level, None)
                if taken is not None:
                    self.stats.past_share += 1
                    return taken
        return None

    def _take_from(self, level: int, share: int | None) -> tuple[Key, float] | None:
        """The first key of ``level`` whose namespace has fewer than ``share`` passes running (any,
        if None) and whose cluster is under its cap; namespaces, and their clusters, in turn."""
        ready, turns = self._ready[level], self._turns[level]
        for _ in range(len(turns)):
            namespace = next(iter(turns))
            turns.move_to_end(namespace)  # whatever happens, the next namespace goes first next time
            if share is not None and self._running[namespace] >= share:
                continue
            by_cluster = ready[namespace]
            for cluster in by_cluster:  # (changed only right before the return: no copy needed)
                if cluster is not None and self._inflight[cluster] >= self._cap(cluster):
                    continue
                keys = by_cluster.pop(cluster)
                key = keys.popleft()
                if keys:
                    by_cluster[cluster] = keys  # to the end: the namespace's clusters take turns too
                if not by_cluster:
                    del ready[namespace]
                    del turns[namespace]
                since, _, _ = self._queued.pop(key)
                self._processing[key] = cluster
                self._running[namespace] += 1
                if cluster is not None:
                    self._inflight[cluster] += 1
                if level == URGENT:
                    self._taken_urgent.add(key)
                    self._urgent_streak = self._urgent_streak + 1 if self._ready[BACKGROUND] else 0
                    self.stats.taken["urgent"] += 1
                else:
                    self._urgent_streak = 0
                    self.stats.taken["background"] += 1
                return key, self._clock() - since
        return None

    # --- reading --------------------------------------------------------------------------------

    def depth(self) -> Counter[str]:
        """Ready keys per kind."""
        return Counter(key[0] for key in self._queued)

    def taken_urgent(self, key: Key) -> bool:
        """Whether the key, being processed, was taken at the urgent level (a user's change)."""
        return key in self._taken_urgent

    def has(self, key: Key) -> bool:
        """Whether the key is ready, waiting for its timer, or being processed."""
        return key in self._queued or key in self._due or key in self._processing

    def scheduled(self) -> int:
        """Keys waiting for their timer."""
        return len(self._due)

    def processing(self) -> int:
        return len(self._processing)
