"""Ownership as data: one ``coordination.k8s.io`` Lease per ConnectCluster, held by the replica
that works on it, acquired and renewed as client-go's leader election does.

Why one Lease per ConnectCluster, not one per shard: a shard is a function of the shard count, and
during a resize (2 -> 3, both generations running, as a StatefulSet with ``Parallel`` pod
management starts them) a shard-0 of three and a shard-0 of two own different clusters under the
same name. A Lease per shard therefore cannot say who may work on a cluster that moves; a Lease per
cluster says it whatever the shard counts of the replicas that want it: the old owner works on it
until it releases the Lease (it no longer wants it, or it stops) or the Lease expires, and only then
the new owner starts (issue 44 measured 5 of 8 resets sent twice without this). The price is one
small write per held cluster every ``renew_every`` (200 clusters: 40 writes a second across the
replicas, docs/operator-guide.md#high-availability-and-shards; bench/bench_leases.py).

The timings are client-go's: a holder renews well before its renew deadline and stops working the
moment the deadline passes without a successful renewal (``valid``, checked before every write,
``fencing``); another replica takes a Lease over only once it has seen the same record, unchanged,
for the Lease's whole duration, measured on *its own* monotonic clock from when it first saw that
record. Neither side reads the other's timestamps, so clock skew between replicas does not matter;
only the rate of the clocks does. A Lease that is absent is created at the next look, but its
new holder works on it only one lease duration after the create's answer (``works_from``): the
Lease may have been deleted while another replica still believed it held it, frozen or not, and a
record made and deleted between two of our lists, or between our list and our create, leaves no
trace to wait out (attack review helper-41). Any such holder sent its last successful renewal
before the deletion, so before our create landed, and stops at that renewal plus its renew
deadline: before our ``works_from``, whatever we saw. The same holds for a record naming us that
we cannot account for (a create of ours whose answer was lost).

Each acquisition starts a new *term* (``leaseTransitions`` + 1, and a local epoch): a pass begun in
an earlier term stays fenced off even if the same replica holds the Lease again later.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from connect_offsets.clients.kubernetes import KubernetesError
from connect_offsets.clients.leases import LeaseConflict, LeaseRecord, LeaseWrite
from connect_offsets.fencing import Fence

__all__ = ["LeaseKeeper", "LeaseStore", "LeaseTimings", "lease_name"]

log = logging.getLogger(__name__)

Cluster = tuple[str, str]

#: client-go's jitter factor: the wait between two looks is the retry period times up to this.
JITTER = 1.2


class LeaseStore(Protocol):
    """Where Leases are read and written (``clients.leases.LeaseApi``; an in-memory one in tests)."""

    prefix: str

    async def list(self) -> dict[str, LeaseRecord]: ...

    async def get(self, name: str) -> LeaseRecord | None: ...

    async def create(self, name: str, cluster: str, write: LeaseWrite) -> LeaseRecord: ...

    async def replace(self, record: LeaseRecord, write: LeaseWrite) -> LeaseRecord: ...

    async def delete(self, record: LeaseRecord) -> None: ...


@dataclass(frozen=True)
class LeaseTimings:
    """client-go's three timings (seconds), with its defaults."""

    #: How long another replica waits, after it last saw the record change, before taking over.
    duration: float = 15.0
    #: How long a holder keeps working without a successful renewal.
    renew_deadline: float = 10.0
    #: How often a replica looks at the Leases (acquires what is free, renews what is due).
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < JITTER * self.retry_period < self.renew_deadline < self.duration:
            raise ValueError(
                f"Lease timings must be 0 < {JITTER} x retry period < renew deadline < lease duration "
                f"(client-go's rule: a look, jittered, comes before the renew deadline), got retry period "
                f"{self.retry_period}, renew deadline {self.renew_deadline}, lease duration {self.duration}"
            )

    @property
    def renew_every(self) -> float:
        """A held Lease is renewed once this old: twice per renew deadline, so one failed
        renewal is survived, at a third of client-go's write rate (it renews every retry period,
        for one Lease; here every cluster has one). Sooner when the next look, a jittered retry
        period away, might come after the renew deadline (``LeaseKeeper._keep``)."""
        return max(self.retry_period, self.renew_deadline / 2)


def lease_name(prefix: str, cluster: Cluster) -> str:
    """The Lease of a ConnectCluster: a hash, since namespace and name together are longer than a
    name may be (the cluster is in an annotation for people)."""
    digest = hashlib.sha256(f"{cluster[0]}/{cluster[1]}".encode()).hexdigest()[:20]
    return f"{prefix}-{digest}"


@dataclass
class _Held:
    record: LeaseRecord
    #: Monotonic time the last successful write of it was *sent* (the answer may come later).
    renewed: float
    acquired: datetime
    #: This process's count of acquisitions: tells terms apart even when a re-created Lease
    #: restarts ``leaseTransitions``.
    epoch: int
    #: Monotonic time from which this replica may work under the term (0: at once). Why it may be
    #: later: see the module (a Lease that was absent).
    works_from: float = 0.0
    #: Monotonic time the term began, when it followed another replica's term of the same Lease
    #: (released or expired; None: the Lease was new, or ours before): that holder's last stops
    #: and resumes may not show in Connect's status yet (``Fence.after_another``).
    followed_at: float | None = None


@dataclass
class _Seen:
    """A Lease's record, at the resourceVersion this replica first saw it at, and when: a take-over
    waits until that record has stood unchanged for its whole duration. (An absence needs no entry:
    a Lease made now is worked under a duration later, ``_not_before``.)"""

    version: str
    since: float


@dataclass
class LeaseKeeper:
    """Acquires the Leases of the clusters this replica wants, renews them, releases those it no
    longer wants, and tells the controller what it gained and lost."""

    store: LeaseStore
    identity: str
    #: The clusters this replica's shard owns now (from the watch cache).
    wanted: Callable[[], set[Cluster]]
    #: Whether a cluster is still referenced by anything (else its Lease is deleted on release).
    exists: Callable[[Cluster], bool]
    on_acquired: Callable[[set[Cluster]], None]
    on_lost: Callable[[set[Cluster]], None]
    #: Waits for the passes ``on_lost`` cancelled to end, before a Lease is released: the next
    #: holder starts within a retry period of a release, and must not meet our last writes.
    drain: Callable[[set[Cluster]], Awaitable[bool]] | None = None
    timings: LeaseTimings = field(default_factory=LeaseTimings)
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = lambda: datetime.now(UTC)
    _held: dict[Cluster, _Held] = field(default_factory=dict)
    _seen: dict[str, _Seen] = field(default_factory=dict)
    #: The resourceVersion of the last write of ours each Lease answered (acquisition, renewal).
    _ours: dict[str, str] = field(default_factory=dict)
    #: For a Lease made (or found naming us unaccounted for): no term of ours under it works before
    #: this monotonic time, whichever term (a drop and a re-acquisition in between, attack review
    #: helper-42, 2).
    _not_before: dict[str, float] = field(default_factory=dict)
    #: The longest ``leaseDurationSeconds`` seen on any of our prefix's Leases.
    _longest_seen: float = 0.0
    _epochs: int = 0
    #: When each cluster's term was last confirmed on the API server (epoch, monotonic time).
    _confirmed: dict[Cluster, tuple[int, float]] = field(default_factory=dict)
    #: The acquisition in flight of each wanted Lease, and those acquired not yet told.
    _acquiring: dict[Cluster, asyncio.Task[None]] = field(default_factory=dict)
    _gained: set[Cluster] = field(default_factory=set)
    #: The renewal (or release) in flight of each held Lease.
    _keeping: dict[Cluster, asyncio.Task[None]] = field(default_factory=dict)

    # --- what the controller asks -------------------------------------------------------------

    def holds(self, cluster: Cluster) -> bool:
        """Whether this replica may work on ``cluster`` now: its term is renewed in time, and its
        ``works_from`` has come."""
        held = self._held.get(cluster)
        return held is not None and self._in_term(held) and self.clock() >= held.works_from

    def _in_term(self, held: _Held) -> bool:
        return self.clock() - held.renewed < self.timings.renew_deadline

    def fence(self, cluster: Cluster) -> Fence | None:
        """The fence of a pass on ``cluster`` starting now (None: not held)."""
        held = self._held.get(cluster)
        if held is None or not self.holds(cluster):
            return None
        epoch = held.epoch

        def valid() -> bool:
            now = self._held.get(cluster)
            return now is not None and now.epoch == epoch and self.clock() - now.renewed < self.timings.renew_deadline

        async def confirm(fresh: bool = False) -> bool:
            now = self._held.get(cluster)
            if now is None or now.epoch != epoch:
                return False
            confirmed = self._confirmed.get(cluster)
            if (
                not fresh
                and confirmed is not None
                and confirmed[0] == epoch
                and self.clock() - confirmed[1] < self.timings.retry_period
            ):
                return True  # one read serves the claims of a retry period (a take-over claims many)
            asked = self.clock()
            try:
                record = await self.store.get(now.record.name)
            except KubernetesError:
                return False
            ours = record is not None and (record.holder, record.transitions) == (self.identity, now.record.transitions)
            if ours:
                self._confirmed[cluster] = (epoch, asked)
            return ours

        followed_at = held.followed_at
        after_another = None if followed_at is None else (lambda: self.clock() - followed_at)
        return Fence(
            holder=f"{self.identity}/{held.record.transitions}",
            valid=valid,
            confirm=confirm,
            cluster=cluster,
            after_another=after_another,
        )

    def held(self) -> set[Cluster]:
        return set(self._held)

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Tick every retry period (with client-go's jitter) until cancelled, then release."""
        try:
            while True:
                await self.tick()
                await asyncio.sleep(self.timings.retry_period * random.uniform(1.0, JITTER))
        finally:
            await asyncio.shield(self.release_all())

    async def tick(self) -> None:
        """One look at the Leases: drop what ran past its deadline or changed hands, renew what is
        due, release what is no longer wanted, acquire what is free or expired."""
        lost = {c for c, held in self._held.items() if not self._in_term(held)}
        try:
            records: dict[str, LeaseRecord] | None = await self.store.list()
        except KubernetesError as error:
            log.warning("Leases not read, none acquired this round: %s", error)
            records = None
        now = self.clock()
        wanted = self.wanted()
        if records is not None:
            self._longest_seen = max([self._longest_seen, *(r.duration_s for r in records.values())])
            self._observe(records, wanted, now)
            for cluster, held in self._held.items():
                record = records.get(held.record.name)
                if record is None or record.holder != self.identity or record.transitions != held.record.transitions:
                    lost.add(cluster)  # deleted, or written by someone else: not ours any more
                elif record.resource_version != held.record.resource_version:
                    held.record = record  # a renewal of ours whose answer was lost
                    self._ours[record.name] = record.resource_version
        self._drop(lost)
        self._keep_all(wanted)
        if records is not None:
            for cluster in sorted(wanted - set(self._held)):
                running = self._acquiring.get(cluster)
                if running is None or running.done():
                    self._acquiring[cluster] = asyncio.create_task(self._acquire(cluster, records, now))
        # Each renewal, release and acquisition is a task of its own, waited for a retry period at
        # most: one slow answer (up to the call's bound, 6 s) must not hold the next look back, or
        # Leases that were not due yet pass their renew deadline meanwhile.
        busy = [task for task in (*self._keeping.values(), *self._acquiring.values()) if not task.done()]
        if busy:
            await asyncio.wait(busy, timeout=self.timings.retry_period)
        self._acquiring = {c: t for c, t in self._acquiring.items() if not t.done()}
        self._keeping = {c: t for c, t in self._keeping.items() if not t.done() or c in self._held}
        # Told once this replica may work on them (``works_from``), at this look or a later one.
        acquired = {c for c in self._gained if self.holds(c)}
        self._gained = {c for c in self._gained - acquired if c in self._held}
        if acquired:
            self.on_acquired(acquired)

    async def _acquire(self, cluster: Cluster, records: dict[str, LeaseRecord], now: float) -> None:
        if await self._try_acquire(cluster, records, now):
            self._gained.add(cluster)  # told at the end of this look, or the next one

    def _keep_all(self, wanted: set[Cluster]) -> None:
        """Start the renewal (or the release) of every held Lease not already under way."""
        for cluster in list(self._held):
            running = self._keeping.get(cluster)
            if running is None or running.done():
                self._keeping[cluster] = asyncio.create_task(self._keep(cluster, wanted), name=f"keep-{cluster[1]}")

    async def release_all(self) -> None:
        """Stopping: release every held Lease so another replica takes over at once, not after
        the Lease expires (client-go's ``ReleaseOnCancel``)."""
        keeping = [task for task in (*self._keeping.values(), *self._acquiring.values()) if not task.done()]
        for task in keeping:
            task.cancel()
        await asyncio.gather(*keeping, return_exceptions=True)
        held, self._held = self._held, {}
        if held:
            self.on_lost(set(held))
            if self.drain is not None and not await self.drain(set(held)):
                log.warning("a pass still writes: the Leases expire instead of being released")
                return
        await asyncio.gather(*(self._release(c, h) for c, h in held.items()), return_exceptions=True)

    # --- inside -------------------------------------------------------------------------------

    def _observe(self, records: dict[str, LeaseRecord], wanted: set[Cluster], now: float) -> None:
        """Remember when each wanted Lease's current record was first seen."""
        names = {lease_name(self.store.prefix, c) for c in wanted}
        self._seen = {
            name: seen
            for name, seen in self._seen.items()
            if name in names and (record := records.get(name)) is not None and record.resource_version == seen.version
        }
        for name in names:
            record = records.get(name)
            if record is not None and name not in self._seen:
                self._seen[name] = _Seen(record.resource_version, now)
        self._not_before = {n: t for n, t in self._not_before.items() if t > now}
        # Forgotten, a record naming us would count as unaccounted: a wait, never a shortcut.
        self._ours = {n: v for n, v in self._ours.items() if n in names}

    def _drop(self, lost: set[Cluster]) -> None:
        if not lost:
            return
        for cluster in lost:
            self._held.pop(cluster, None)
        log.warning("lost the Lease of %s: its work stops here", ", ".join(sorted("/".join(c) for c in lost)))
        self.on_lost(lost)

    async def _keep(self, cluster: Cluster, wanted: set[Cluster]) -> None:
        held = self._held.get(cluster)
        if held is None:
            return
        if cluster not in wanted:
            self._held.pop(cluster)
            self.on_lost({cluster})
            if self.drain is not None and not await self.drain({cluster}):
                return  # a pass still writes: the Lease expires instead of being released
            await self._release(cluster, held)
            return
        age = self.clock() - held.renewed
        if (
            age < self.timings.renew_every
            and age + (1 + JITTER) * self.timings.retry_period < self.timings.renew_deadline
        ):
            return  # not due, and the next look is in time (a tick waits a retry period at most, then a jittered one)
        sent = self.clock()
        write = LeaseWrite(self.identity, self.timings.duration, held.record.transitions, held.acquired, self.wall())
        try:
            record = await self.store.replace(held.record, write)
        except LeaseConflict:
            if self._held.get(cluster) is held:
                self._drop({cluster})
            return
        except KubernetesError as error:
            log.warning("Lease of %s/%s not renewed (retrying until its deadline): %s", *cluster, error)
            return
        if self._held.get(cluster) is held:
            held.record, held.renewed = record, sent
            self._ours[record.name] = record.resource_version

    async def _release(self, cluster: Cluster, held: _Held) -> None:
        """Give a Lease up: delete it when nothing refers to its cluster any more, else clear the
        holder so that the new owner takes it at its next look (a resize, a shutdown). A Lease we
        made and do not work under yet (``works_from``) is not cleared: the next owner would take
        it at once while the holder of the Lease deleted before ours may still work (attack review
        helper-42, 1); it expires instead, or is deleted (a Lease made after that waits again)."""
        try:
            if not self.exists(cluster):
                await self.store.delete(held.record)
            elif self.clock() < held.works_from:
                log.info("Lease of %s/%s left to expire: made by us, not worked under yet", *cluster)
            else:
                now = self.wall()
                await self.store.replace(held.record, LeaseWrite("", 1, held.record.transitions, now, now))
        except KubernetesError as error:  # it expires on its own
            log.info("Lease of %s/%s not released (it expires instead): %s", *cluster, error)

    async def _try_acquire(self, cluster: Cluster, records: dict[str, LeaseRecord], now: float) -> bool:
        name = lease_name(self.store.prefix, cluster)
        record = records.get(name)
        seen = self._seen.get(name)
        waited = now - seen.since if seen is not None else 0.0
        if record is not None and record.holder not in ("", self.identity) and waited < max(record.duration_s, 1.0):
            return False  # another replica's record, not yet unchanged for its whole duration
        # Made now (absent), or a record naming us that no write of ours answered: whoever held a
        # Lease of this name before stops within a renew deadline of its deletion; we start later.
        unaccounted = record is None or (
            record.holder == self.identity and record.resource_version != self._ours.get(name)
        )
        sent = self.clock()
        acquired = self.wall()
        transitions = record.transitions + 1 if record is not None else 0
        write = LeaseWrite(self.identity, self.timings.duration, transitions, acquired, acquired)
        try:
            if record is None:
                written = await self.store.create(name, f"{cluster[0]}/{cluster[1]}", write)
            else:
                written = await self.store.replace(record, write)
        except KubernetesError:  # someone else was quicker, or the API server did not answer
            return False
        self._ours[name] = written.resource_version
        if unaccounted:
            # The longest lease duration any operator Lease has shown, if longer than ours: a
            # replica still on other timings (a rolling change of the flags) may have held the
            # deleted Lease with a longer renew deadline (attack review helper-43, 2).
            self._not_before[name] = self.clock() + max(self.timings.duration, self._longest_seen)
        works_from = self._not_before.get(name, 0.0)
        self._epochs += 1
        # Our own earlier term's changes are in this process's memory (``StateChanges``); a
        # released record names nobody, so it may have been anyone's.
        followed_at = sent if record is not None and record.holder != self.identity else None
        self._held[cluster] = _Held(written, sent, acquired, self._epochs, works_from, followed_at)
        if unaccounted:
            log.info(
                "acquired the Lease of %s/%s (term %d); working on it in %.0f s (a Lease made now)",
                cluster[0],
                cluster[1],
                written.transitions,
                self.timings.duration,
            )
        else:
            log.info("acquired the Lease of %s/%s (term %d)", cluster[0], cluster[1], written.transitions)
        return True
