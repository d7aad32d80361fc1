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

High availability and shards: with ``--shard-count`` a replica wants only the keys whose
ConnectCluster hashes to its shard (``sharding``); with Leases (``leases``, the chart's default) it
works on a cluster's keys only while it holds the cluster's Lease, cancels the passes in flight the
moment it loses it, and runs each pass under the Lease's term (``fencing``). Deletion is ours too:
the controller puts the one ``FINALIZER`` on, runs the delete logic of a resource being deleted and
takes the finalizer off, all under the same Lease, so it runs once whatever the shard counts.

Why one module of over 600 lines: the workers' loop, a pass's scheduling, deletions and what a
Lease brings and takes all read and write the same state (the queue, the keys by cluster, the
passes running); split, each part reached into the others'.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from prometheus_client import Histogram

from connect_offsets import fencing, metrics
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.controller.cadence import MIN_DRIFT_GAP, check_slot, next_check_delay
from connect_offsets.controller.first_checks import FirstChecks
from connect_offsets.controller.leases import LeaseKeeper
from connect_offsets.controller.queue import Key, WorkQueue
from connect_offsets.controller.references import References
from connect_offsets.controller.sharding import (
    FINALIZER,
    Shard,
    awaiting_deletion,
    cluster_of,
    needs_finalizer,
    stale_finalizers,
)
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.reconcile.status import fenced_pass_on
from connect_offsets.vocabulary import CLUSTERS, CONNECTORS, MIRRORS, USER_CHANGE, asks_now, request_view

__all__ = [
    "DELETE_ATTEMPTS",
    "LAG",
    "MIN_DRIFT_GAP",
    "Controller",
    "Deletions",
    "Reconcilers",
    "check_slot",
    "next_check_delay",
]

log = logging.getLogger(__name__)

#: The key kind of a KafkaMirrorMaker2's replication-lag measurements.
LAG = "replication-lag"

#: The kinds whose resources carry our finalizer: their delete logic runs in their own key's pass.
FINALIZED = frozenset({CONNECTORS, MIRRORS})

#: A deletion's delete logic is tried this often before the resource is released anyway: an
#: unreachable Connect cluster must not block a namespace's deletion for ever.
DELETE_ATTEMPTS = 8

#: Seconds a stopping replica, or one giving a Lease up, waits for its cancelled passes to end
#: before it releases their Leases (a pass ends at its next await once cancelled).
DRAIN_TIMEOUT_S = 5.0

#: The metrics' name of each key kind.
KINDS = {
    CONNECTORS: "KafkaConnector",
    MIRRORS: "KafkaMirrorMaker2",
    CLUSTERS: "ConnectCluster",
    LAG: "ReplicationLag",
}


#: The reconcile of each key kind: (namespace, name) -> what the pass found.
Reconcilers = Mapping[str, Callable[[str, str], Awaitable[Outcome]]]
#: A KafkaMirrorMaker2's lag measurement: body -> (seconds until the next, whether status changes).
LagMeasure = Callable[[Mapping[str, Any]], Awaitable[tuple[float, bool]]]


@dataclass(frozen=True)
class Deletions:
    """How the controller carries out a deletion: the resource's delete logic, then the release of
    our finalizers."""

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
        measure_lag: LagMeasure | None = None,
        forget_lag: Callable[[str, str], None] | None = None,
        deletions: Deletions | None = None,
    ) -> None:
        self.kube = kube
        self.reconcilers = reconcilers
        self.drift_interval = drift_interval
        self.workers = max(1, workers)
        self.shard = shard or Shard()
        self.measure_lag = measure_lag
        self.forget_lag = forget_lag
        self.deletions = deletions
        #: None: one replica without Leases (works on every key of its shard, unfenced).
        self.leases: LeaseKeeper | None = None
        #: Deletions whose delete logic ran: a failed release does not run it again.
        self._deletion_ran: set[Key] = set()
        #: Failed attempts at each deletion's delete logic: its own count, not the key's back-off
        #: (which the resource's failed passes before its deletion raised, and which gave up at once).
        self._deletion_failures: dict[Key, int] = {}
        cap = cluster_workers if cluster_workers is not None else max(1, self.workers // 2)
        #: Whether a ConnectCluster's endpoint is in doubt (its circuit breaker open or probing): its
        #: keys then run one at a time. Set by the start-up once the cluster registry exists.
        self.cluster_in_doubt: Callable[[tuple[str, str]], bool] = lambda cluster: False
        #: A KafkaConnector's cluster's first connector listing while its check would wait for it
        #: (``ConnectorService.first_listing``; None: run the pass). Set by the start-up too.
        self.first_listing: Callable[[str, str], asyncio.Future[Any] | None] = lambda namespace, name: None
        self.queue = WorkQueue(
            cluster_of=self._cluster,
            cluster_cap=cap,
            workers=self.workers,
            urgent_of=self._asks_now,
            in_doubt=lambda cluster: self.cluster_in_doubt(cast(tuple[str, str], cluster)),
        )
        self._seen: dict[Key, tuple[Any, ...] | None] = {}
        self._references = References()
        #: The keys queued on first sight still waiting for their first pass (a start's backlog).
        self.first_checks = FirstChecks()
        #: The keys of this shard's resources, by ConnectCluster: what a Lease brings and takes.
        self._by_cluster: dict[tuple[str, str], set[Key]] = {}
        #: The passes running now, by ConnectCluster (cancelled when its Lease is lost) and by key
        #: (cancelled when the resource is gone or bound to another cluster).
        self._running: dict[tuple[str, str], set[asyncio.Task[None]]] = {}
        self._running_keys: dict[Key, asyncio.Task[None]] = {}
        #: Keys whose check waits for their cluster's first connector listing (``_after``): one
        #: callback a key and listing, and no resync of them meanwhile.
        self._deferred: dict[Key, asyncio.Future[Any]] = {}
        #: Keys whose pass for a user's change failed and is retried: the retry is still the user's
        #: (urgent, ``USER_CHANGE``), which the body alone may not show (a ConfigMap edit).
        self._user_retries: set[Key] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._kind_timers: dict[str, tuple[Histogram, Histogram]] = {}

    # --- what handlers call ---------------------------------------------------------------------

    def observe(
        self, plural: str, namespace: str, name: str, body: Mapping[str, Any] | None, *, owned: bool = False
    ) -> bool:
        """A watch event: keep the body (``None``: deleted; ``owned``: handed over, kept without a
        copy) and queue the key if what the resource asks for changed (our own status writes do
        not change it). True: it was queued."""
        self.kube.cache.observe(plural, namespace, name, body, owned=owned)
        key = (plural, namespace, name)
        if body is None:
            self.forget(key)
            return False
        return self._consider(key, body)

    def _consider(self, key: Key, body: Mapping[str, Any]) -> bool:
        """Queue what a resource's newest body asks for, if this replica works on it now."""
        plural, namespace, name = key
        cluster = cluster_of(plural, namespace, name, (body.get("metadata") or {}).get("labels") or {})
        if not self.shard.owns(cluster):
            self.forget(key)  # another shard's (its ConnectCluster label may just have changed)
            return False
        self._index(key, cluster)
        if not self._holds(cluster):
            return False  # queued when the Lease is acquired (``_acquired``)
        view = request_view(body)
        if key not in self._seen and plural == MIRRORS and self.measure_lag is not None:
            self.queue.add((LAG, namespace, name))
        previous = self._seen.get(key)
        if previous == view:
            return False
        self._seen[key] = view
        # A change to what a resource seen before asks for is a user's: ahead of the checks. A
        # first sight (start-up, a Lease taken) is a check, unless it carries a request (``_asks_now``).
        self.queue.add(key, urgent=previous is not None)
        if previous is None:
            self.first_checks.waiting(key)
        return True

    def forget(self, key: Key) -> None:
        """The resource is gone (or another shard's): its key, its lag key and what wakes them."""
        self.queue.remove(key)
        self._seen.pop(key, None)
        self._references.forget(key)
        self.first_checks.discard(key)
        self._unindex(key)
        self._deletion_ran.discard(key)
        self._deletion_failures.pop(key, None)
        self._deferred.pop(key, None)
        self._user_retries.discard(key)
        if key[0] == MIRRORS:
            self.queue.remove((LAG, key[1], key[2]))
            if self.forget_lag is not None:
                self.forget_lag(key[1], key[2])

    def configmap_changed(self, namespace: str, name: str) -> None:
        """A ConfigMap changed: the resources that read it check again (a failed alter may now work)."""
        for key in self._references.readers(namespace, name):
            self.queue.add(key, urgent=True)  # a user's edit of what the resource reads

    def connectors_changed(self, clusters: set[tuple[str, str]], names: set[str]) -> None:
        """A snapshot of the endpoint ``clusters`` name found these connectors changed behind the
        operator's back (deleted, reconfigured, paused, failed): the resources of those clusters that
        declare them check now, not at their next drift pass, so a repair takes one snapshot
        interval at any scale. Another cluster's connector of the same name wakes nothing."""
        for key in self._references.declaring(names):
            if self._cluster(key) in clusters:
                self.queue.add(key)

    def observe_cluster(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> None:
        """A ConnectCluster's watch event (its body handed over). The resources bound to it check again when it appears,
        goes, or its spec changes: what they wait for may be there now, or they must say it is
        gone. Its annotations, labels and status do not concern them, and each wake-up looks only
        at that cluster's resources (the index), not at every key: a tenant annotating its
        ConnectCluster in a loop costs the loop one small event each (attacker review, F2)."""
        before = self.kube.cache.peek(CLUSTERS, namespace, name)
        was = None if before is None else _spec_of(before)
        self.observe(CLUSTERS, namespace, name, body, owned=True)
        if body is None or was is None or was != _spec_of(body):
            cluster = (namespace, name)
            for key in list(self._by_cluster.get(cluster, ())):
                if key[0] in (CONNECTORS, MIRRORS) and self._holds(cluster):
                    self.queue.add(key)

    def cluster_changed(self, namespace: str) -> None:
        """Something every resource of ``namespace`` may have waited for is back (its Kafka)."""
        for key in list(self._seen):
            if key[0] in (CONNECTORS, MIRRORS) and key[1] == namespace:
                self.queue.add(key)

    def kafka_recovered(self, namespace: str) -> None:
        """A Kafka address that ``namespace`` calls answered again after a remembered failure: its
        resources and mirrors' lag measurements check now, not at the end of their back-off."""
        self.cluster_changed(namespace)
        for key in [k for k in self._seen if k[0] == MIRRORS and k[1] == namespace and self.measure_lag]:
            self.queue.add((LAG, namespace, key[2]))

    def wake(self, plural: str, namespace: str, name: str) -> None:
        """Something only this operator measures changed for the resource (its progress): its
        pass runs now and writes it, the one status writer."""
        key = (plural, namespace, name)
        if key in self._seen and self.owns(key):
            self.queue.add(key)

    def cluster_recovered(self, clusters: set[tuple[str, str]]) -> None:
        """A Connect cluster answered again after its circuit breaker had opened: the resources of
        these ConnectClusters check now, instead of at the end of their back-off."""
        for cluster in clusters:
            for key in list(self._by_cluster.get(cluster, ())):
                if self._holds(cluster):
                    self.queue.add(key)

    def _asks_now(self, key: Key) -> bool:
        """Whether the key's resource waits for a request to be carried out (``urgency``), or its
        user's change is being retried."""
        if key in self._user_retries:
            return True
        body = self.kube.cache.peek(*key) if key[0] in (CONNECTORS, MIRRORS) else None
        return body is not None and asks_now(body)

    def owns(self, key: Key) -> bool:
        """Whether this replica works on the key now: its shard's, and the Lease held."""
        cluster = self._cluster(key)
        return cluster is None or (self.shard.owns(cluster) and self._holds(cluster))

    # --- Leases ---------------------------------------------------------------------------------

    def use_leases(self, keeper_for: Callable[[Controller], LeaseKeeper]) -> LeaseKeeper:
        """Work only under Leases, from ``keeper_for(self)`` (its callbacks are this controller's)."""
        self.leases = keeper_for(self)
        return self.leases

    def wanted_clusters(self) -> set[tuple[str, str]]:
        """The ConnectClusters this shard owns among the cached resources: the Leases it wants."""
        return set(self._by_cluster)

    def cluster_exists(self, cluster: tuple[str, str]) -> bool:
        """Whether anything cached still refers to ``cluster`` (its Lease is kept for a new owner)."""
        return self.kube.cache.get(CLUSTERS, *cluster) is not None or cluster in self._by_cluster

    def leases_acquired(self, clusters: set[tuple[str, str]]) -> None:
        """Leases gained: every key of those clusters is checked now, from the watch cache."""
        for cluster in clusters:
            for key in list(self._by_cluster.get(cluster, ())):
                self._seen.pop(key, None)
                body = self.kube.cache.get(*key)
                if body is not None:
                    self._consider(key, body)

    def leases_lost(self, clusters: set[tuple[str, str]]) -> None:
        """Leases lost: the passes running on those clusters are cancelled (the next holder's
        passes start from what persisted, as after a crash), and their keys leave the queue."""
        for cluster in clusters:
            for task in self._running.get(cluster, set()):
                task.cancel()
            for key in self._by_cluster.get(cluster, set()):
                self.queue.remove(key)
                self._seen.pop(key, None)
                self.first_checks.discard(key)
                self._user_retries.discard(key)
                if key[0] == MIRRORS:
                    self.queue.remove((LAG, key[1], key[2]))

    async def drain(self, clusters: set[tuple[str, str]]) -> bool:
        """Wait (a bounded while) for the passes on ``clusters`` to end after their cancellation:
        a Lease is released only then, so the next holder does not meet our last writes. False:
        one still runs (a Kafka write in a thread that Kafka has not answered): the Lease is left
        to expire instead."""
        tasks = {task for cluster in clusters for task in self._running.get(cluster, set())}
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=DRAIN_TIMEOUT_S)
        return not pending

    def _still_wanted(self, key: Key) -> bool:
        """Whether the key's cluster is this replica's and its Lease not dropped (held, if perhaps
        past its deadline for a moment: the keeper decides, and ``leases_lost`` removes the key)."""
        cluster = self._cluster(key)
        if cluster is None:
            return False
        return self.shard.owns(cluster) and (self.leases is None or cluster in self.leases.held())

    async def _resync(self) -> None:
        """Every drift interval, every key of a held cluster that is neither queued, waiting for
        its timer, nor being processed is queued (client-go's informer resync). Why: a key must
        never be lost, and a Lease lapsing and coming back, or an API server restarted mid-pass,
        left some without a timer in the benchmarks at 10,000 and 20,000 resources (340 and 7
        resources never checked again); whatever the cause, this bounds the wait to an interval."""
        while True:
            await asyncio.sleep(self.drift_interval)
            for cluster, keys in list(self._by_cluster.items()):
                if not self._holds(cluster):
                    continue
                for key in list(keys):
                    if key in self._deferred:
                        continue  # back when its cluster's first listing ends (``_after``)
                    if not self.queue.has(key) and self.kube.cache.peek(*key) is not None:
                        log.info("resync: %s had no check scheduled", "/".join(key))
                        self.queue.add(key)

    def _holds(self, cluster: tuple[str, str]) -> bool:
        return self.leases is None or self.leases.holds(cluster)

    def _index(self, key: Key, cluster: tuple[str, str]) -> None:
        keys = self._by_cluster.setdefault(cluster, set())
        if key in keys:
            return
        self._unindex(key)  # its cluster label changed: a pass under the old cluster's Lease ends
        keys.add(key)

    def _unindex(self, key: Key) -> None:
        task = self._running_keys.pop(key, None)
        if task is not None:
            task.cancel()
        for cluster, keys in list(self._by_cluster.items()):
            if key in keys:
                keys.discard(key)
                if not keys:
                    del self._by_cluster[cluster]
                return

    # --- running --------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._work(i), name=f"worker-{i}") for i in range(self.workers)]
        self._tasks.append(loop.create_task(metrics.watch_queue(self.queue, KINDS), name="queue-metrics"))
        self._tasks.append(loop.create_task(self._resync(), name="resync"))
        if self.leases is not None:
            self._tasks.append(loop.create_task(self.leases.run(), name="leases"))

    async def stop(self) -> None:
        """Workers first (their passes cancelled and ended), then the Leases released: the next
        holder, which starts within a retry period of a release, never meets a write of ours."""
        self.queue.shut_down()
        # Passes under way may finish first (a bounded while): one cancelled between its Connect
        # write and the status write that records it is repeated by the next holder (a resume sent
        # twice in a 2 -> 3 shard change on the real stack, old pods stopping mid-pass).
        running = {task for tasks in self._running.values() for task in tasks}
        if running:
            await asyncio.wait(running, timeout=DRAIN_TIMEOUT_S)
        leases = [task for task in self._tasks if task.get_name() == "leases"]
        others = [task for task in self._tasks if task not in leases]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=DRAIN_TIMEOUT_S)
        for task in leases:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self, index: int) -> None:
        while True:
            key, waited = await self.queue.get()
            queue_seconds, work_seconds = self._timers(key[0])
            queue_seconds.observe(waited)
            started = time.monotonic()
            user_change = USER_CHANGE.set(self.queue.taken_urgent(key))  # the pass's task copies it
            try:
                await self._fenced(key)
            except fencing.FencedOff as error:  # the Lease, or the resource's claim, went to another replica
                log.warning("pass ended: %s [%s]", error, "/".join(key))
                if self._still_wanted(key):
                    # Still ours (a claim our watch had not seen yet): look again, from fresh reads.
                    self._retry(key)
            except Exception:  # one key must never stop a worker; log and back off
                log.exception("processing %s failed unexpectedly", "/".join(key))
                self._retry(key)
            finally:
                USER_CHANGE.reset(user_change)
                work_seconds.observe(time.monotonic() - started)
                self.queue.done(key)

    async def _fenced(self, key: Key) -> None:
        """Run the key's pass under its cluster's Lease term, as a task the Lease's loss cancels.
        Without the Lease (lost while the key waited) the key is dropped: the next holder checks it."""
        cluster = self._cluster(key)
        if self.leases is None or cluster is None:
            await self._process(key)
            return
        fence = self.leases.fence(cluster)
        if fence is None:
            if cluster in self.leases.held():
                # Past its renew deadline while a renewal is still on its way: the keeper either
                # renews it (then this key must come back) or drops it (then ``leases_lost`` takes
                # the key out again): look again after a retry period, never drop it here.
                self.queue.add_after(key, self.leases.timings.retry_period)
            else:
                self.first_checks.discard(key)  # dropped: the cluster's holder checks it
            return
        with fencing.acting_under(fence):
            task = asyncio.get_running_loop().create_task(self._process(key), name=f"pass-{'/'.join(key)}")
        running = self._running.setdefault(cluster, set())
        running.add(task)
        self._running_keys[key] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the worker itself is stopping
            log.warning(
                "pass cancelled: the Lease of %s/%s is lost, or the resource moved [%s]", *cluster, "/".join(key)
            )
        finally:
            running.discard(task)
            if not running:
                self._running.pop(cluster, None)
            if self._running_keys.get(key) is task:
                del self._running_keys[key]

    def _timers(self, plural: str) -> tuple[Histogram, Histogram]:
        """The queue-wait and work histograms of a kind, looked up once: ``labels()`` on every
        check was a tenth of the idle operator's CPU at 5,000 resources (issue 35)."""
        timers = self._kind_timers.get(plural)
        if timers is None:
            kind = KINDS.get(plural, plural)
            timers = self._kind_timers[plural] = (metrics.QUEUE_SECONDS.labels(kind), metrics.WORK_SECONDS.labels(kind))
        return timers

    async def _process(self, key: Key) -> None:
        waited = self.first_checks.term(key)
        deferred = False
        try:
            deferred = await self._pass(key)
        finally:
            if not deferred:  # a deferred pass checked nothing: the key still waits for its first
                self.first_checks.checked(key, waited)

    async def _pass(self, key: Key) -> bool:
        """One pass of the key; True: deferred until its cluster's first listing (nothing done)."""
        plural, namespace, name = key
        if plural == LAG:
            await self._measure_lag(key)
            return False
        body = self.kube.cache.peek(plural, namespace, name)
        if body is None:
            return False  # gone (deleted, or never seen): nothing to check, nothing to schedule
        if plural in FINALIZED and self.deletions is not None and awaiting_deletion(body):
            await self._finish_deletion(key)
            return False
        user = USER_CHANGE.get() or asks_now(body)
        listing = self.first_listing(namespace, name) if plural == CONNECTORS and not user else None
        if listing is not None:
            # A check with no user waiting gives its worker back rather than wait seconds for the
            # listing: a request of its namespace is answered meanwhile (bench_cold_start).
            self._after(key, listing)
            return True
        started = time.monotonic()
        try:
            if plural in FINALIZED and self.deletions is not None and needs_finalizer(body):
                # Before any write to Connect: a resource deleted without our finalizer on would
                # go without its delete logic (its connector left running).
                await self.kube.replace_finalizers(plural, namespace, name, FINALIZER, set(stale_finalizers(body)))
            outcome = await self.reconcilers[plural](namespace, name)
        except KubernetesError as error:
            outcome = Outcome(transient_error=str(error))
        if not self._known(key):
            return False  # deleted (or another shard's) while its pass ran: nothing to record or schedule
        self._references.record(key, outcome.referenced_configmaps, outcome.connectors)
        if outcome.after is not None:  # its connector read would have waited for the first listing
            self._after(key, outcome.after)
            return True
        if outcome.transient_error is not None:
            metrics.RECONCILE_ERRORS.labels(KINDS[plural]).inc()
            delay = self._retry(key)
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
            self._user_retries.discard(key)
            to_slot = (check_slot(key, self.drift_interval) - started) % self.drift_interval
            elapsed = time.monotonic() - started
            self.queue.add_after(key, next_check_delay(outcome, 0, self.drift_interval, elapsed, to_slot))
        if outcome.seen is not None:
            self._seen[key] = outcome.seen
            current = self.kube.cache.request_view(plural, namespace, name)
            if current is not None and current != outcome.seen:
                self.queue.add(key)  # asks for what this pass did not see: again, at once
        return False

    def _retry(self, key: Key) -> float:
        """Back off and run the key again; a failed pass for a user's change stays the user's
        (attack review of issue 45, B: its background retry deferred behind the first listing)."""
        if USER_CHANGE.get():
            self._user_retries.add(key)
        return self.queue.add_rate_limited(key)

    def _after(self, key: Key, listing: asyncio.Future[Any]) -> None:
        """Queue the key again when ``listing`` ends, however it ends (a failed listing's error is
        held for the passes that come back, which report it: ``ConnectorsSnapshot``). A user's
        change meanwhile queues it at once, as ever (``_consider``)."""
        if self._deferred.get(key) is listing:
            return  # already called back by this listing: one callback a key, however often it defers
        self._deferred[key] = listing

        def landed(done: asyncio.Future[Any]) -> None:
            if self._deferred.get(key) is done:
                del self._deferred[key]
            if self._still_wanted(key):
                self.queue.add(key)

        listing.add_done_callback(landed)

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
        """A resource being deleted that waits on our finalizer: run its delete logic once, then
        take our finalizers off; with back-off while Connect or the API server fails, and after
        ``DELETE_ATTEMPTS`` the delete logic gives up (an unreachable Connect must not block a
        namespace's deletion for ever). In the resource's own key, so that no pass of it runs
        beside its delete logic (the queue never hands one key to two workers)."""
        plural, namespace, name = key
        body = self.kube.cache.get(plural, namespace, name)
        deletions = self.deletions
        if body is None or deletions is None or not awaiting_deletion(body):
            self.queue.forget(key)
            return
        ours = {FINALIZER, *stale_finalizers(body)}
        try:
            if key not in self._deletion_ran:
                fenced_pass_on(self.kube, plural, body)
                give_up = self._deletion_failures.get(key, 0) >= DELETE_ATTEMPTS - 1
                result = await deletions.run(plural, namespace, name, body, give_up)
                self._deletion_ran.add(key)
                log.info("%s [%s %s/%s]", result, KINDS[plural], namespace, name)
            await deletions.release(plural, namespace, name, ours)
        except DeletionPending as error:  # the connector is stopping (offsetsOnDelete: reset)
            # An expected wait, not a failure: INFO (log-based alerting watches WARNING and ERROR).
            log.info("deletion waits %.0fs: %s [%s %s/%s]", error.delay, error, KINDS[plural], namespace, name)
            self.queue.add_after(key, error.delay)
        except (ConnectOffsetsError, KubernetesError) as error:
            if isinstance(error, fencing.FencedOff):
                raise
            self._deletion_failures[key] = self._deletion_failures.get(key, 0) + 1
            delay = self.queue.add_rate_limited(key)
            log.warning(
                "deletion failed, retrying in %.0fs: %s [%s %s/%s]", delay, error, KINDS[plural], namespace, name
            )
        else:
            self.queue.forget(key)

    # --- inside ---------------------------------------------------------------------------------

    def _known(self, key: Key) -> bool:
        """Whether the key is still one of this shard's (``forget`` takes a deleted one out)."""
        cluster = self._cluster(key)
        return cluster is not None and key in self._by_cluster.get(cluster, ())

    def _cluster(self, key: Key) -> tuple[str, str] | None:
        """The ConnectCluster a key is bound to, from its cached body (None: not cached)."""
        plural, namespace, name = key
        resource = MIRRORS if plural == LAG else plural
        labels = self.kube.cache.labels(resource, namespace, name)
        if labels is None:
            return None
        return cluster_of(resource, namespace, name, labels)


def _spec_of(body: Mapping[str, Any]) -> tuple[Any, Any]:
    """What of a ConnectCluster its resources depend on: its spec (generation) and its deletion."""
    metadata = body.get("metadata") or {}
    return metadata.get("generation"), metadata.get("deletionTimestamp")
