"""The controller: a bounded pool of workers taking resource keys from the one work queue and
running their reconcile, as client-go's controllers do (issue 35).

Why: a kopf daemon per resource cost memory and a timer per resource and bounded nothing. Here the
watch handlers (``handlers/``) only record the newest body and put the key in the queue when what it
asks for changed; timers (the drift interval, a requeue, a back-off) are the queue's; and
``workers`` tasks run the passes. What a pass returns (``Outcome``) decides when its key comes back:

* a transient error: the key's back-off (2 s ... 60 s);
* otherwise the key's next slot, at most the drift interval after the pass's start (or the
  requeue the plan asked for): each key has its own place in the interval, so checks are spread
  evenly over it;
* and at once when the resource's watched body already asks for something the pass did not
  account for (``Outcome.seen``): a wake-up is never lost to events that arrived mid-pass or
  were coalesced (issue 30).

Keys are (plural, namespace, name): KafkaConnectors, KafkaMirrorMaker2s, ConnectClusters, and
``LAG`` keys, the replication-lag measurements of a KafkaMirrorMaker2 (its own schedule; it
wakes the resource's key when status would change).

High availability and shards: with kopf peering a replica works only while it is the active peer
(``Presence``: kopf stops the presence daemons of a paused operator); with ``--shard-count`` it
takes only the keys whose ConnectCluster hashes to its shard (``sharding``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Histogram

from connect_offsets import metrics
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.controller.queue import Key, WorkQueue
from connect_offsets.controller.sharding import Shard, cluster_of, orphaned_deletion, stale_finalizers
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.reconcile.settings import MAX_RETRY_DELAY_S, Outcome
from connect_offsets.vocabulary import CLUSTERS, CONNECTORS, MIRRORS, request_view

__all__ = [
    "DELETE_ATTEMPTS",
    "LAG",
    "MIN_DRIFT_GAP",
    "Controller",
    "OrphanedDeletions",
    "Presence",
    "Reconcilers",
    "check_slot",
    "next_check_delay",
]

log = logging.getLogger(__name__)

#: The key kind of a KafkaMirrorMaker2's replication-lag measurements.
LAG = "replication-lag"

#: A check that starts this near before its slot (a share of the drift interval) is the slot's
#: check: the next comes an interval later. A timer may fire a clock tick early.
ON_SLOT = 0.01

#: The key kinds of deletions kopf will not run (``sharding.orphaned_deletion``), by the resource's plural.
DELETIONS = {CONNECTORS: "deletion-kafkaconnectors", MIRRORS: "deletion-kafkamirrormaker2s"}
_DELETION_OF = {kind: plural for plural, kind in DELETIONS.items()}

#: A deletion's delete logic is tried this often before the resource is released anyway (the
#: delete handlers' retries too): an unreachable Connect cluster must not block a namespace's
#: deletion for ever.
DELETE_ATTEMPTS = 8

#: The shortest wait between two drift checks of one resource, as a share of the drift interval.
MIN_DRIFT_GAP = 0.2

#: The metrics' name of each key kind.
KINDS = {
    CONNECTORS: "KafkaConnector",
    MIRRORS: "KafkaMirrorMaker2",
    CLUSTERS: "ConnectCluster",
    LAG: "ReplicationLag",
    DELETIONS[CONNECTORS]: "KafkaConnectorDeletion",
    DELETIONS[MIRRORS]: "KafkaMirrorMaker2Deletion",
}


def check_slot(key: Key, drift_interval: float) -> float:
    """Where in each drift interval this key's checks belong: a stable hash of the key, spread
    evenly over the interval (seconds from any multiple of the interval on the monotonic clock)."""
    plural, namespace, name = key
    return zlib.crc32(f"{plural}/{namespace}/{name}".encode()) / 2**32 * drift_interval


def next_check_delay(
    outcome: Outcome, failures: int, drift_interval: float, elapsed: float, to_slot: float | None = None
) -> float:
    """How long until a resource's next check (a wake-up may bring it sooner).

    After a transient failure: back-off (2 s ... ``MAX_RETRY_DELAY_S``). Otherwise the drift
    interval counted from the check's start, not its end: at 5,000 resources a check may wait
    seconds for the cluster's snapshot, and "an interval after the end" checked each resource only
    every ~2 intervals (bench_steady_state). ``MIN_DRIFT_GAP`` keeps a check slower than the
    interval from becoming a busy loop. A requeue the plan asked for can only shorten the wait.

    ``to_slot``: seconds from the check's start to the key's next slot (``check_slot``). The next
    check then comes at that slot, never later than one interval after the start, so every
    resource is still checked once per interval. Why: resources checked together stay together.
    1,000 created at once, or first checked when a slow cluster's listing arrived, were all due in
    the same 7 s of every interval (bench_fair_queue: 145-180 checks a second, then none), and
    another tenant's requests waited behind each burst. On their slots, they are due evenly over
    the interval. A key whose slot is nearer than ``MIN_DRIFT_GAP`` of the interval is checked
    once at that gap, and from there at its slot: one extra check, once.
    """
    if outcome.transient_error is not None:
        return float(min(2.0**failures, MAX_RETRY_DELAY_S))
    due = drift_interval
    if to_slot is not None and to_slot >= ON_SLOT * drift_interval:  # nearer: this check was the slot's
        due = max(to_slot, MIN_DRIFT_GAP * drift_interval)
    delay = max(due - elapsed, MIN_DRIFT_GAP * drift_interval)
    if outcome.requeue_after is not None:
        delay = min(delay, outcome.requeue_after)
    return delay


@dataclass
class Presence:
    """Whether this replica may work now. Standalone: always. With kopf peering: while at least one
    of its presence daemons runs — kopf runs them only in the active peer, and stops them all when
    it pauses in favour of another (the operator's pause is global)."""

    standalone: bool = True
    running: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def active(self) -> bool:
        return self.standalone or self.running > 0

    def arrived(self) -> None:
        self.running += 1
        self._changed.set()

    def left(self) -> None:
        self.running -= 1
        self._changed.set()

    async def wait_active(self) -> None:
        while not self.active:
            self._changed.clear()
            await self._changed.wait()


#: The reconcile of each key kind: (namespace, name) -> what the pass found.
Reconcilers = Mapping[str, Callable[[str, str], Awaitable[Outcome]]]
#: A KafkaMirrorMaker2's lag measurement: body -> (seconds until the next, whether status changes).
LagMeasure = Callable[[Mapping[str, Any]], Awaitable[tuple[float, bool]]]


@dataclass(frozen=True)
class OrphanedDeletions:
    """How the owner finishes a deletion kopf will not run (``sharding.orphaned_deletion``): the
    resource's delete logic, as its delete handler runs it, then the release of our stale finalizers."""

    #: (plural, namespace, name, body, give_up) -> what was done; DeletionPending: not yet.
    run: Callable[[str, str, str, dict[str, Any], bool], Awaitable[str]]
    #: (plural, namespace, name, finalizers): remove these finalizers.
    release: Callable[[str, str, str, set[str]], Awaitable[None]]


class Controller:
    """Workers, the queue, and what wakes which key."""

    def __init__(
        self,
        kube: KubernetesApi,
        reconcilers: Reconcilers,
        *,
        drift_interval: float,
        workers: int,
        cluster_workers: int | None = None,
        shard: Shard | None = None,
        presence: Presence | None = None,
        measure_lag: LagMeasure | None = None,
        forget_lag: Callable[[str, str], None] | None = None,
        orphaned_deletions: OrphanedDeletions | None = None,
    ) -> None:
        self.kube = kube
        self.reconcilers = reconcilers
        self.drift_interval = drift_interval
        self.workers = max(1, workers)
        self.shard = shard or Shard()
        self.presence = presence or Presence()
        self.measure_lag = measure_lag
        self.forget_lag = forget_lag
        self.orphaned_deletions = orphaned_deletions
        #: Orphaned deletions whose delete logic ran: a failed release does not run it again.
        self._deletion_ran: set[Key] = set()
        cap = cluster_workers if cluster_workers is not None else max(1, self.workers // 2)
        self.queue = WorkQueue(cluster_of=self._cluster, cluster_cap=cap)
        self._seen: dict[Key, tuple[Any, ...] | None] = {}
        self._configmaps: dict[Key, set[str]] = {}
        self._connectors: dict[Key, set[str]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._kind_timers: dict[str, tuple[Histogram, Histogram]] = {}

    # --- what handlers call ---------------------------------------------------------------------

    def observe(self, plural: str, namespace: str, name: str, body: Mapping[str, Any] | None) -> bool:
        """A watch event: keep the body (``None``: deleted) and queue the key if what the resource
        asks for changed (our own status writes do not change it). True: it was queued."""
        self.kube.cache.observe(plural, namespace, name, body)
        key = (plural, namespace, name)
        if body is None:
            self.forget(key)
            return False
        if not self.owns(key):
            self.forget(key)  # another shard's (its ConnectCluster label may just have changed)
            return False
        if (
            plural in DELETIONS
            and self.orphaned_deletions is not None
            and orphaned_deletion(body, self.shard.finalizer)
        ):
            self.queue.add((DELETIONS[plural], namespace, name))
        view = request_view(body)
        if key not in self._seen and plural == MIRRORS and self.measure_lag is not None:
            self.queue.add((LAG, namespace, name))
        if self._seen.get(key, ()) == view:
            return False
        self._seen[key] = view
        self.queue.add(key)
        return True

    def forget(self, key: Key) -> None:
        """The resource is gone: its key, its lag key and what wakes them."""
        self.queue.remove(key)
        self._seen.pop(key, None)
        self._configmaps.pop(key, None)
        self._connectors.pop(key, None)
        if key[0] in DELETIONS:
            deletion = (DELETIONS[key[0]], key[1], key[2])
            self.queue.remove(deletion)
            self._deletion_ran.discard(deletion)
        if key[0] == MIRRORS:
            self.queue.remove((LAG, key[1], key[2]))
            if self.forget_lag is not None:
                self.forget_lag(key[1], key[2])

    def configmap_changed(self, namespace: str, name: str) -> None:
        """A ConfigMap changed: the resources that read it check again (a failed alter may now work)."""
        for key, names in list(self._configmaps.items()):
            if key[1] == namespace and name in names:
                self.queue.add(key)

    def connectors_changed(self, names: set[str]) -> None:
        """A cluster's snapshot found these connectors changed behind the operator's back (deleted,
        reconfigured, paused, failed): the resources that declare them check now, not at their next
        drift pass, so a repair takes one snapshot interval at any scale."""
        for key, declared in list(self._connectors.items()):
            if declared & names:
                self.queue.add(key)

    def cluster_changed(self, namespace: str) -> None:
        """A ConnectCluster changed: the resources of its namespace that may have waited for it check."""
        for key in list(self._seen):
            if key[0] in (CONNECTORS, MIRRORS) and key[1] == namespace:
                self.queue.add(key)

    def wake(self, plural: str, namespace: str, name: str) -> None:
        """Something only this operator measures changed for the resource (its progress): its
        pass runs now and writes it, the one status writer."""
        key = (plural, namespace, name)
        if key in self._seen and self.owns(key):
            self.queue.add(key)

    def owns(self, key: Key) -> bool:
        """Whether this replica's shard takes the key."""
        cluster = self._cluster(key)
        return cluster is None or self.shard.owns(cluster)

    # --- running --------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._work(i), name=f"worker-{i}") for i in range(self.workers)]
        self._tasks.append(loop.create_task(metrics.watch_queue(self.queue, KINDS), name="queue-metrics"))

    async def stop(self) -> None:
        self.queue.shut_down()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self, index: int) -> None:
        while True:
            await self.presence.wait_active()
            key, waited = await self.queue.get()
            queue_seconds, work_seconds = self._timers(key[0])
            queue_seconds.observe(waited)
            started = time.monotonic()
            try:
                await self._process(key)
            except Exception:  # one key must never stop a worker; log and back off
                log.exception("processing %s failed unexpectedly", "/".join(key))
                self.queue.add_rate_limited(key)
            finally:
                work_seconds.observe(time.monotonic() - started)
                self.queue.done(key)

    def _timers(self, plural: str) -> tuple[Histogram, Histogram]:
        """The queue-wait and work histograms of a kind, looked up once: ``labels()`` on every
        check was a tenth of the idle operator's CPU at 5,000 resources (issue 35)."""
        timers = self._kind_timers.get(plural)
        if timers is None:
            kind = KINDS.get(plural, plural)
            timers = self._kind_timers[plural] = (metrics.QUEUE_SECONDS.labels(kind), metrics.WORK_SECONDS.labels(kind))
        return timers

    async def _process(self, key: Key) -> None:
        plural, namespace, name = key
        if plural == LAG:
            await self._measure_lag(key)
            return
        if plural in _DELETION_OF:
            await self._finish_deletion(key)
            return
        if self.kube.cache.resource_version(plural, namespace, name) is None:
            return  # gone (deleted, or never seen): nothing to check, nothing to schedule
        started = time.monotonic()
        try:
            outcome = await self.reconcilers[plural](namespace, name)
        except KubernetesError as error:
            outcome = Outcome(transient_error=str(error))
        self._configmaps[key] = outcome.referenced_configmaps
        self._connectors[key] = outcome.connectors
        if outcome.transient_error is not None:
            metrics.RECONCILE_ERRORS.labels(KINDS[plural]).inc()
            delay = self.queue.add_rate_limited(key)
            # The words the fault tests read (tests/integration/test_faults.py), the resource last.
            log.warning(
                "transient failure, retrying in %.0fs: %s [%s %s/%s]",
                delay,
                outcome.transient_error,
                KINDS[plural],
                namespace,
                name,
            )
        else:
            self.queue.forget(key)
            to_slot = (check_slot(key, self.drift_interval) - started) % self.drift_interval
            elapsed = time.monotonic() - started
            self.queue.add_after(key, next_check_delay(outcome, 0, self.drift_interval, elapsed, to_slot))
        if outcome.seen is not None:
            self._seen[key] = outcome.seen
            current = self.kube.cache.request_view(plural, namespace, name)
            if current is not None and current != outcome.seen:
                self.queue.add(key)  # asks for what this pass did not see: again, at once

    async def _measure_lag(self, key: Key) -> None:
        _, namespace, name = key
        body = self.kube.cache.get(MIRRORS, namespace, name)
        if body is None or self.measure_lag is None:
            return
        delay, changed = await self.measure_lag(body)
        if changed:
            self.queue.add((MIRRORS, namespace, name))
        self.queue.add_after(key, delay)

    async def _finish_deletion(self, key: Key) -> None:
        """Run the delete logic of a resource kopf will not (``sharding.orphaned_deletion``) once,
        then release it; with back-off while Connect or the API server fails, and after
        ``DELETE_ATTEMPTS`` the delete logic gives up as the delete handlers do."""
        kind, namespace, name = key
        plural = _DELETION_OF[kind]
        body = self.kube.cache.get(plural, namespace, name)
        deletions = self.orphaned_deletions
        if body is None or deletions is None or not orphaned_deletion(body, self.shard.finalizer):
            self.queue.forget(key)
            return
        try:
            if key not in self._deletion_ran:
                give_up = self.queue.failures(key) >= DELETE_ATTEMPTS - 1
                result = await deletions.run(plural, namespace, name, body, give_up)
                self._deletion_ran.add(key)
                log.info(
                    "%s [%s %s/%s, deleted before its owner's finalizer was on it]",
                    result,
                    KINDS[plural],
                    namespace,
                    name,
                )
            await deletions.release(plural, namespace, name, set(stale_finalizers(body, self.shard.finalizer)))
        except DeletionPending as error:  # the connector is stopping (offsetsOnDelete: reset)
            self.queue.add_after(key, error.delay)
        except (ConnectOffsetsError, KubernetesError) as error:
            delay = self.queue.add_rate_limited(key)
            log.warning(
                "deletion failed, retrying in %.0fs: %s [%s %s/%s]", delay, error, KINDS[plural], namespace, name
            )
        else:
            self.queue.forget(key)

    # --- inside ---------------------------------------------------------------------------------

    def _cluster(self, key: Key) -> tuple[str, str] | None:
        """The ConnectCluster a key is bound to, from its cached body (None: not cached)."""
        plural, namespace, name = key
        resource = MIRRORS if plural == LAG else _DELETION_OF.get(plural, plural)
        labels = self.kube.cache.labels(resource, namespace, name)
        if labels is None:
            return None
        return cluster_of(resource, namespace, name, labels)
