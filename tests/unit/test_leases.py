"""Leases per ConnectCluster (issue 44): ``controller/leases.py``'s ``LeaseKeeper`` against an
in-memory API server, and the controller working under it (``controller/core.py``).

Every replica has its own monotonic clock, moved only by the test, and its own wall clock, skewed
on purpose: a keeper must judge a Lease by when *it* saw the record change, on its own clock, never
by the timestamps another replica wrote. What is covered, client-go's leader election per cluster:

* one holder at a time; a take-over only after the record stood unchanged for a whole lease
  duration on the taker's clock, whatever the holder's wall clock says, and only once the holder
  stopped renewing;
* a holder that cannot renew stops at its renew deadline, before anyone may take over; a frozen
  holder's fence is invalid the moment it wakes, and a fence never comes back in a later term;
* absent Leases are created at once and worked under only a lease duration later (another
  replica may still believe it holds a deleted one, made and deleted unseen between two lists),
  released ones are taken at once; release and deletion of what is no
  longer wanted, and release on shutdown;
* a renewal whose answer was lost is adopted from the next list; a Lease rewritten or deleted
  behind the holder is lost at its next look;
* the controller queues a cluster's keys only under its Lease, cancels the passes in flight when
  it is lost, and runs each pass under the Lease's fence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from kubernetes import client as kube_client

from connect_offsets import fencing
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesUnavailable
from connect_offsets.clients.leases import LeaseApi, LeaseConflict, LeaseRecord, LeaseWrite
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import Controller, LeaseKeeper, LeaseTimings, lease_name
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, CLUSTER_LABEL, CONNECTORS
from tests.fakes import FakeClock, FakeLeases, lease_keeper_for
from tests.polling import until

pytestmark = pytest.mark.unit

Cluster = tuple[str, str]

PREFIX = FakeLeases.prefix
CLUSTER: Cluster = ("team-a", "local")
OTHER: Cluster = ("team-b", "analytics")
#: client-go's defaults: another replica waits 15 s, a holder works 10 s without a renewal.
TIMINGS = LeaseTimings(duration=15.0, renew_deadline=10.0, retry_period=2.0)
DURATION = TIMINGS.duration
DEADLINE = TIMINGS.renew_deadline
#: What every replica's wall clock reads when the test starts it (plus the replica's skew).
WALL_ZERO = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
CALLS = ("list", "create", "replace", "delete")


def name_of(cluster: Cluster) -> str:
    return lease_name(PREFIX, cluster)


# --- the API server (tests/fakes.py's FakeLeases) ------------------------------------------------


def timeout(call: str) -> KubernetesUnavailable:
    return KubernetesUnavailable(f"{call} Lease: ReadTimeoutError (no answer within 5 s)")


# --- replicas ---------------------------------------------------------------------------------------


class Wall:
    """A replica's wall clock: ``WALL_ZERO`` when it started, off by ``skew``, then moving with its
    monotonic clock."""

    def __init__(self, clock: FakeClock, skew: timedelta) -> None:
        self.clock = clock
        self.start = clock.now
        self.skew = skew

    def __call__(self) -> datetime:
        return WALL_ZERO + self.skew + timedelta(seconds=self.clock.now - self.start)


@dataclass
class Replica:
    """A LeaseKeeper with its store connection, clocks, and what it wants and was told."""

    identity: str
    store: FakeLeases
    clock: FakeClock
    wall: Wall
    wants: set[Cluster]
    referenced: set[Cluster]
    acquired: list[set[Cluster]] = field(default_factory=list)
    lost: list[set[Cluster]] = field(default_factory=list)
    keeper: LeaseKeeper = field(init=False)

    def __post_init__(self) -> None:
        self.keeper = LeaseKeeper(
            self.store,
            self.identity,
            wanted=lambda: set(self.wants),
            exists=lambda cluster: cluster in self.referenced,
            on_acquired=self.acquired.append,
            on_lost=self.lost.append,
            timings=TIMINGS,
            clock=self.clock,
            wall=self.wall,
        )

    def holds(self, cluster: Cluster = CLUSTER) -> bool:
        return self.keeper.holds(cluster)

    def fence(self, cluster: Cluster = CLUSTER) -> fencing.Fence:
        fence = self.keeper.fence(cluster)
        assert fence is not None, f"{self.identity} does not hold {cluster}"
        return fence

    async def tick(self) -> None:
        await self.keeper.tick()

    async def after(self, seconds: float) -> None:
        """``seconds`` pass on this replica's clock, then it looks at the Leases."""
        self.clock.now += seconds
        await self.keeper.tick()


def replica(
    store: FakeLeases,
    identity: str,
    *,
    start: float,
    skew: timedelta = timedelta(0),
    wants: Iterable[Cluster] = (CLUSTER,),
) -> Replica:
    clock = FakeClock(start)
    wanted = set(wants)
    return Replica(identity, store, clock, Wall(clock, skew), wanted, set(wanted))


async def together(replicas: list[Replica], seconds: float, step: float = 0.5) -> None:
    """``seconds`` pass on every replica's clock, each looking every ``step``, in turn."""
    for _ in range(round(seconds / step)):
        for each in replicas:
            await each.after(step)


# --- 1. one holder, and a take-over only after a whole duration on the taker's clock ---------------


@pytest.mark.parametrize("skew", [timedelta(hours=-6), timedelta(hours=6)], ids=["holder-behind", "holder-ahead"])
async def test_one_holder_and_a_take_over_only_after_a_whole_duration_on_the_taker_s_clock(skew: timedelta) -> None:
    """Two replicas want one cluster: exactly one holds it, and while it renews the other never
    takes it, however long it watches. Once the holder stops renewing, the other takes it over
    exactly one lease duration after it first saw the holder's last record, on its *own* clock.

    Why: the replicas' clocks are unrelated (monotonic clocks start anywhere) and their wall
    clocks disagree. The holder's renewTime here is six hours behind (a reader trusting it would
    take over at once, while the holder still works) or ahead (one would wait six hours); the
    keeper never reads it, so neither changes when the take-over comes."""
    store = FakeLeases()
    a = replica(store, "a", start=1_000.0, skew=skew)
    b = replica(store.replica(), "b", start=7_777_777.0)
    await a.tick()  # absent: a creates it, and works on it a whole duration later
    await b.tick()
    await together([a, b], DURATION)
    assert (a.holds(), b.holds()) == (True, False)
    assert store.holder(CLUSTER) == "a" and a.acquired == [{CLUSTER}]

    await together([a, b], 120.0)  # a renews every 5 s: b's wait starts over each time
    assert (a.holds(), b.holds()) == (True, False)
    assert b.acquired == [] and a.lost == [] and a.store.calls.count("replace") >= 20

    last = store.record(CLUSTER)
    await a.after(5.0)  # a's last renewal; then it stops
    record = store.record(CLUSTER)
    assert record is not None and last is not None and record.resource_version != last.resource_version
    renewed_at = store.written(CLUSTER).renewed
    assert abs((renewed_at - b.wall()).total_seconds() - skew.total_seconds()) < 60  # hours off b's clock

    await b.tick()  # b first sees a's last record now
    await b.after(DURATION - 0.5)
    assert not b.holds() and store.holder(CLUSTER) == "a"
    await b.after(0.5)
    assert b.holds() and b.acquired == [{CLUSTER}]
    taken = store.record(CLUSTER)
    assert taken is not None and (taken.holder, taken.transitions) == ("b", 1)
    assert b.fence().holder == "b/1"


# --- 2. a holder that cannot renew ------------------------------------------------------------------


@pytest.mark.parametrize("failing", [{"replace"}, set(CALLS)], ids=["renewals-fail", "api-server-down"])
async def test_a_holder_that_cannot_renew_stops_at_its_renew_deadline_before_a_take_over(failing: set[str]) -> None:
    """The holder's renewals fail (its writes, or every call): it holds the cluster, and its
    fence is valid, until exactly its renew deadline after the last successful renewal, then
    neither, without waiting for its next look; ``on_lost`` is called once, at that look.

    Why: the other replica may take over one lease duration after it saw that renewal; the renew
    deadline is shorter, so the holder has stopped before anyone can have started. Reported once:
    the controller cancels the passes once, and a failing re-acquisition is no new loss."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=50.0)
    b = replica(store.replica(), "b", start=90_000.0)
    await a.tick()
    await b.tick()  # b sees a's first record now
    fence = a.fence()
    a.store.failing = failing

    await together([a, b], DEADLINE - 0.5)
    assert a.holds() and fence.valid() and a.lost == []
    a.clock.now += 0.5
    assert not a.holds() and not fence.valid() and a.keeper.fence(CLUSTER) is None  # before any look
    await a.tick()
    assert a.lost == [{CLUSTER}] and a.keeper.held() == set()

    await b.after(0.5)  # b's clock at the holder's deadline too: far from its take-over
    assert not b.holds()
    await together([a, b], DURATION - DEADLINE - 0.5)
    assert not b.holds() and store.holder(CLUSTER) == "a"
    await together([a, b], 0.5)  # a lease duration after b saw a's last renewal
    assert b.holds() and b.acquired == [{CLUSTER}]

    a.store.failing = set()  # a hears from the API server again: b's now, no second loss, no grab
    await together([a, b], 30.0)
    assert a.lost == [{CLUSTER}] and a.acquired == [{CLUSTER}]
    assert store.holder(CLUSTER) == "b" and b.holds()


async def test_a_holder_whose_looks_come_as_late_as_the_jitter_allows_renews_in_time() -> None:
    """Timings the chart accepts (retry period 4.5 s, renew deadline 10 s) and looks 4.8 s, then
    5.4 s apart, as client-go's jitter (up to 1.2 retry periods) allows: the holder renews at the
    4.8 s look although it is not yet 5 s (``renew_every``) old, because its next look might come
    after the deadline. Before the fix it waited for 5 s, looked again at 10.2 s, found itself past
    its deadline, and lost the Lease (and cancelled its passes, and began a new term) whenever two
    looks fell so, with a healthy API server."""
    timings = LeaseTimings(duration=15.0, renew_deadline=10.0, retry_period=4.5)
    store = FakeLeases()
    store.seed_released(CLUSTER)
    clock = FakeClock(0.0)
    lost: list[set[Cluster]] = []
    keeper = LeaseKeeper(
        store,
        "a",
        wanted=lambda: {CLUSTER},
        exists=lambda cluster: True,
        on_acquired=lambda clusters: None,
        on_lost=lost.append,
        timings=timings,
        clock=clock,
    )
    await keeper.tick()
    assert keeper.holds(CLUSTER)
    for gap in [4.8, 5.4] * 20:
        clock.now += gap
        await keeper.tick()
        assert keeper.holds(CLUSTER), clock.now
    assert lost == []
    record = store.record(CLUSTER)
    assert record is not None and (record.holder, record.transitions) == ("a", 1)


# --- 3. a frozen holder -----------------------------------------------------------------------------


async def test_a_frozen_holder_s_fence_is_invalid_on_waking_and_never_valid_again() -> None:
    """The holder freezes (a GC pause, SIGSTOP, a frozen node): its clock jumps past the lease
    duration with no look in between, while the other replica takes the Lease over. The fence of
    the pass it was running is invalid the moment it wakes, before its next look (the pass must not
    write once more); at that look it finds the Lease gone to the other and reports it lost. When
    the other releases it and the first holds it again, that is a new term: the old fence stays
    invalid, only passes begun in the new term write."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=300.0)
    b = replica(store.replica(), "b", start=12.0)
    await a.tick()
    await b.tick()
    frozen = a.fence()
    assert frozen.valid() and frozen.holder == "a/1"

    await together([b], DURATION)  # a is frozen: only b's clock and looks go on
    assert b.holds() and store.holder(CLUSTER) == "b"
    a.clock.now += DURATION + 5.0  # a wakes: its clock counted the freeze
    assert not frozen.valid() and not a.holds()
    await a.tick()
    assert a.lost == [{CLUSTER}] and not a.holds() and store.holder(CLUSTER) == "b"

    b.wants.clear()  # b gives the cluster up (it still exists): released
    await b.tick()
    await a.after(0.5)  # released: a takes it at once
    assert a.holds() and a.acquired == [{CLUSTER}, {CLUSTER}]
    again = a.fence()
    assert again.valid() and again.holder == "a/3"
    assert not frozen.valid()


async def test_a_holder_frozen_past_its_deadline_only_re_acquires_in_a_new_term() -> None:
    """Frozen past its renew deadline but not the lease duration, nobody took over: at its next look
    the holder reports the Lease lost and takes it again at once (the record still names it), in a
    new term. The fence from before the freeze stays invalid: the pass it guarded was cancelled
    with the loss, and a pass of the old term must not write in the new one."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    await a.tick()
    frozen = a.fence()
    a.clock.now += DEADLINE + 2.0
    assert not frozen.valid()
    await a.tick()
    assert a.lost == [{CLUSTER}] and a.acquired == [{CLUSTER}, {CLUSTER}]
    assert a.fence().valid() and a.fence().holder == "a/2"
    assert not frozen.valid()


async def test_a_fence_never_comes_back_even_when_a_re_created_lease_restarts_its_term_count() -> None:
    """The Lease is deleted under its holder and, a lease duration later, created again by the same
    replica: ``leaseTransitions`` starts over at 0, so the new term's holder reads ``a/0`` as the
    old one did. The old fence stays invalid all the same (the keeper counts its acquisitions)."""
    store = FakeLeases()
    a = replica(store, "a", start=0.0)
    await a.tick()
    await together([a], DURATION)
    old = a.fence()
    assert old.holder == "a/0"
    store.remove(CLUSTER)
    await a.after(0.5)
    assert a.lost == [{CLUSTER}] and not old.valid()
    await together([a], DURATION + 1.0)
    assert a.holds() and a.acquired == [{CLUSTER}, {CLUSTER}]
    new = a.fence()
    assert new.holder == "a/0" and new.valid()
    assert not old.valid()


# --- 4. absent and released Leases ------------------------------------------------------------------


async def test_an_absent_lease_is_created_at_once_and_worked_on_a_whole_duration_later() -> None:
    """No Lease for a wanted cluster: the replica creates it (term 0) at its first look, renews it,
    and works on the cluster (``holds``, a fence, told ``on_acquired``) only one lease duration
    after the create's answer. Why: a Lease may have been deleted while another replica still
    believes it holds it; that replica stops at its renew deadline, within the wait."""
    store = FakeLeases()
    a = replica(store, "a", start=0.0)
    await a.tick()
    record = store.record(CLUSTER)
    assert record is not None and (record.holder, record.transitions) == ("a", 0)
    assert record.cluster == "team-a/local"
    assert not a.holds() and a.keeper.fence(CLUSTER) is None and a.acquired == []
    await together([a], DURATION - 0.5)
    assert not a.holds() and a.acquired == [] and a.lost == [] and store.calls.count("replace") >= 2
    await a.after(0.5)
    assert a.holds() and a.acquired == [{CLUSTER}] and a.fence().holder == "a/0"


def never_both(a: Replica, other: fencing.Fence) -> None:
    assert not (a.holds() and other.valid()), "two replicas may work on one cluster"


async def creates_and_deletes(a: Replica, frozen: Replica, other: fencing.Fence, seconds: float) -> None:
    """``seconds`` pass in a's looks (0.5 s apart) and on the frozen replica's clock (a frozen
    process's monotonic clock runs on), its fence ``other`` kept by a pass; never both working."""
    for _ in range(round(seconds / 0.5)):
        frozen.clock.now += 0.5
        await a.after(0.5)
        never_both(a, other)


async def test_a_lease_made_and_deleted_between_two_looks_is_never_worked_on_twice() -> None:
    """Attack review helper-41, 1: a and b see the Lease absent; b creates it between two of a's
    lists and gets a fence; someone deletes it before a's next list. a never saw b's record: it
    creates the Lease at once, and works on it only after b's fence has run out (b frozen)."""
    store = FakeLeases()
    a = replica(store, "a", start=0.0)
    b = replica(store.replica(), "b", start=300.0)
    store.failing.add("create")  # a's creates fail meanwhile (b's connection does not)
    await a.tick()
    store.failing.clear()
    await b.tick()
    await together([b], DURATION)
    b_fence = b.fence()
    store.remove(CLUSTER)  # b frozen from now on
    await a.tick()
    assert store.holder(CLUSTER) == "a" and not a.holds()
    await creates_and_deletes(a, b, b_fence, DURATION + 1.0)
    assert a.holds() and not b_fence.valid()


async def test_a_term_hidden_by_failing_lists_is_never_worked_on_twice() -> None:
    """Attack review helper-41, 2: a's lists fail while b creates the Lease and works; then the
    Lease is deleted. a's first list that answers shows it absent: it creates it and works only
    once b (frozen at the deletion) is past its deadline."""
    store = FakeLeases()
    a = replica(store, "a", start=0.0)
    b = replica(store.replica(), "b", start=300.0)
    store.down = True
    await a.tick()
    await b.tick()
    await together([b], DURATION)
    b_fence = b.fence()
    store.remove(CLUSTER)
    store.down = False
    await a.tick()
    assert store.holder(CLUSTER) == "a" and not a.holds()
    await creates_and_deletes(a, b, b_fence, DURATION + 1.0)
    assert a.holds()


async def test_a_create_that_lands_after_another_came_and_went_is_not_worked_on_at_once() -> None:
    """Attack review helper-41, 3: between a's list and a's create, b's create lands and b's
    Lease is deleted; a's create then succeeds. And the lost-answer form: a's create applied, its
    answer lost; a adopts the record naming it at its next look. Either way a works only a
    duration after, b's fence run out by then."""
    for lost_answer in (False, True):
        store = FakeLeases()
        a = replica(store, "a", start=0.0)
        b = replica(store.replica(), "b", start=300.0)
        await b.tick()
        await together([b], DURATION)
        b_fence = b.fence()
        name = name_of(CLUSTER)
        store.remove(CLUSTER)  # b frozen, its Lease deleted: a's list below shows it absent
        if lost_answer:
            store.fail("create", timeout("create"), written=True)
        await a.tick()
        never_both(a, b_fence)
        assert store.record(CLUSTER) is not None and store.records[name].holder == "a"
        await creates_and_deletes(a, b, b_fence, DURATION + 3.0)
        assert a.holds() and not b_fence.valid()


async def test_a_lease_made_and_given_up_before_it_was_worked_under_is_not_handed_on_at_once() -> None:
    """Attack review helper-42, 1: b works, its Lease is deleted; a makes it again and gives it up
    before its ``works_from`` (a resize: no longer wanted; a SIGTERM). Cleared (holder ""), c
    would take it at its next look while b's fence still runs. It is left to expire instead, so c
    waits a whole duration after seeing a's record; and a, wanting it again, keeps its floor."""
    for stop in ("unwanted", "shutdown"):
        store = FakeLeases()
        store.seed_released(CLUSTER)
        b = replica(store.replica(), "b", start=0.0)
        await b.tick()
        b_fence = b.fence()
        store.remove(CLUSTER)
        a = replica(store.replica(), "a", start=100.0)
        c = replica(store.replica(), "c", start=900.0)
        await a.tick()  # made it
        assert store.holder(CLUSTER) == "a" and not a.holds()
        if stop == "unwanted":
            a.wants.clear()
            await a.after(0.5)
        else:
            await a.keeper.release_all()
        assert store.holder(CLUSTER) == "a", "a Lease not worked under yet is not cleared"
        for _ in range(round((DURATION + 2.0) / 0.5)):
            b.clock.now += 0.5
            await c.after(0.5)
            assert not (c.holds() and b_fence.valid()), "two replicas may work on one cluster"
            if stop == "unwanted":
                assert not (a.holds() and b_fence.valid())
        assert c.holds() and not b_fence.valid()


async def test_a_term_dropped_before_it_was_worked_under_keeps_its_floor_when_taken_again() -> None:
    """Attack review helper-42, 2: a made the Lease; a renewal of it meets a conflict and the term
    is dropped before its ``works_from``; the record still names a, at a version a wrote. Taking
    it again is no shortcut past the first term's floor."""
    store = FakeLeases()
    a = replica(store, "a", start=0.0)
    await a.tick()  # made at 0: works from 15
    store.fail("replace", LeaseConflict("update Lease: 409 Conflict", 409))
    await together([a], 6.0)  # the renewal at 5 s is refused: dropped, and taken again
    assert a.keeper._epochs == 2 and store.holder(CLUSTER) == "a"  # dropped, and taken again
    await together([a], DURATION - 6.0 - 0.5)
    assert not a.holds()
    await together([a], 1.0)
    assert a.holds()


def replica_timed(store: FakeLeases, identity: str, start: float, timings: LeaseTimings) -> Replica:
    made = replica(store, identity, start=start)
    made.keeper.timings = timings
    return made


async def test_a_fractional_lease_duration_is_written_rounded_up_so_no_take_over_comes_early() -> None:
    """Attack review helper-43, 1: ``--lease-duration 10.4 --renew-deadline 10.3`` is valid, but
    the Lease's integer field said 10 (rounded): the taker waited 10 s while the holder, cut off
    from the API server, worked 10.3 s. Written rounded up (11), no two replicas work at once."""
    timings = LeaseTimings(duration=10.4, renew_deadline=10.3, retry_period=2.0)
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica_timed(store.replica(), "a", 0.0, timings)
    await a.tick()
    assert a.holds()
    record = store.record(CLUSTER)
    assert record is not None and record.duration_s == 11.0
    b = replica_timed(store, "b", 500.0, timings)
    a.store.down = True  # a's API calls fail from now on: it works until its renew deadline
    for _ in range(round(14.0 / 0.05)):
        await a.after(0.05)
        await b.after(0.05)
        assert not (a.holds() and b.holds()), "two replicas may work on one cluster"
    assert b.holds() and not a.holds()


async def test_a_lease_made_after_a_longer_timed_holders_deletion_waits_that_holders_duration() -> None:
    """Attack review helper-43, 2: a replica still on longer timings (40 / 30 / 2, a rolling
    change of the flags) holds the Lease, is cut off, and the Lease is deleted. The replica on the
    defaults makes it again; it works only once the longest lease duration it has seen has passed
    since its create, not its own 15 s (a had 30 s of renew deadline)."""
    long = LeaseTimings(duration=40.0, renew_deadline=30.0, retry_period=2.0)
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica_timed(store.replica(), "a", 0.0, long)
    b = replica(store, "b", start=500.0)
    await a.tick()
    await b.tick()  # b sees a's Lease (40 s)
    a_fence = a.fence()
    a.store.down = True
    store.remove(CLUSTER)
    for _ in range(round(45.0 / 0.5)):
        a.clock.now += 0.5
        await b.after(0.5)
        assert not (b.holds() and a_fence.valid()), "two replicas may work on one cluster"
    assert b.holds() and not a_fence.valid()


async def test_a_lease_deleted_behind_its_holder_is_made_again_and_worked_on_a_duration_later() -> None:
    """a holds the Lease; someone deletes it. a loses it at its next look, makes it again at the
    one after, and works on it only a whole duration later."""
    store = FakeLeases()
    a = replica(store, "a", start=0.0)
    await a.tick()
    await together([a], DURATION)
    assert a.holds()
    store.remove(CLUSTER)
    await a.after(0.5)  # lost, and made again in the same look
    assert not a.holds() and a.lost == [{CLUSTER}] and store.holder(CLUSTER) == "a"
    await together([a], DURATION - 0.5)
    assert not a.holds()
    await together([a], 1.0)
    assert a.holds() and a.acquired == [{CLUSTER}, {CLUSTER}]


async def test_a_take_over_write_that_fails_is_retried_at_the_next_look_not_a_duration_later() -> None:
    """The expired record a waited out stands unchanged after a's replace failed (503): its
    holder is as long gone as before, so the next look takes it, without another duration."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    store.overwrite(CLUSTER, "b")  # b held it, and b is gone
    a = replica(store, "a", start=0.0)
    await a.tick()
    store.fail("replace", KubernetesUnavailable("update Lease: 503"))
    await a.after(DURATION)
    assert not a.holds() and store.holder(CLUSTER) == "b"
    await a.after(2.0)
    assert a.holds()


async def test_a_lease_deleted_under_a_frozen_holder_is_made_again_and_worked_on_after_its_deadline() -> None:
    """b holds the Lease and freezes; someone deletes the Lease. a had watched b's record for a
    while; it creates the Lease at its next look, and works on it only one lease duration after
    its create, when b's fence has long run out."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    b = replica(store.replica(), "b", start=0.0)
    a = replica(store, "a", start=500.0)
    await b.tick()
    b_fence = b.fence()
    await a.tick()  # a sees b's record
    await a.after(1.0)
    store.remove(CLUSTER)  # b is frozen, never looks again
    await a.after(0.5)  # a sees the absence: creates it
    assert store.holder(CLUSTER) == "a" and not a.holds()
    await creates_and_deletes(a, b, b_fence, DURATION + 1.0)
    assert a.holds() and store.holder(CLUSTER) == "a"


async def test_a_lease_deleted_between_the_holders_look_and_its_renewal_is_not_made_again_by_it() -> None:
    """make test retried test_replicas' deleted Leases: the API server creates a Lease on update
    (the stale resourceVersion then ignored), and a renewal sent right after the deletion made the
    Lease again under the old holder, which never saw it go. The renewal names the uid (409 then,
    as FakeLeases answers like the API server): the holder drops the Lease at that look, and it is
    made again only a whole duration after its absence was seen (attack review helper-37)."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    await a.tick()
    assert a.holds()
    looked = store.list

    async def look_then_delete() -> dict[str, LeaseRecord]:
        records = await looked()
        store.remove(CLUSTER)  # kubectl delete lease, right after the holder's look
        return records

    store.list = look_then_delete  # type: ignore[method-assign]
    await a.after(TIMINGS.renew_every)  # the renewal is due at this look
    store.list = looked  # type: ignore[method-assign]
    assert store.record(CLUSTER) is None and a.lost == [{CLUSTER}] and not a.holds()
    await a.after(0.5)  # its next look sees the Lease absent
    absent_since = a.clock.now
    while not a.holds():
        await a.after(0.5)
    assert store.holder(CLUSTER) == "a" and a.clock.now - absent_since >= DURATION


async def test_the_fake_makes_a_lease_on_update_as_the_api_server_does_unless_the_uid_is_named() -> None:
    """What the test above rests on (checked on the stack's API server: 200 and a new uid without
    the uid in the body, 409 with it)."""
    store = FakeLeases()
    record = store.seed_released(CLUSTER)
    store.remove(CLUSTER)
    now = datetime.now(UTC)
    with pytest.raises(LeaseConflict) as refused:
        await store.replace(record, LeaseWrite("a", 3.0, 0, now, now))
    assert refused.value.status == 409 and store.record(CLUSTER) is None
    made = await store.replace(dataclasses.replace(record, uid=""), LeaseWrite("a", 3.0, 0, now, now))
    assert store.record(CLUSTER) == made and made.uid != record.uid


async def test_a_released_lease_is_taken_at_once() -> None:
    """A Lease without a holder was released on purpose (a shutdown, a cluster given up): nobody
    works under it, so it is taken at the first look, in the next term."""
    store = FakeLeases()
    store.seed_released(CLUSTER, transitions=4)
    a = replica(store, "a", start=0.0)
    await a.tick()
    assert a.holds() and a.acquired == [{CLUSTER}]
    record = store.record(CLUSTER)
    assert record is not None and (record.holder, record.transitions) == ("a", 5)


async def test_two_replicas_reaching_for_a_released_lease_at_once_get_one_holder() -> None:
    """Both saw the Lease released in the same list; both write against that record's version, and
    the API server takes only the first: the second gets 409 and holds nothing."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    b = replica(store.replica(), "b", start=0.0)
    await asyncio.gather(a.tick(), b.tick())
    assert a.store.calls.count("replace") == b.store.calls.count("replace") == 1  # both tried
    assert [a.holds(), b.holds()].count(True) == 1
    assert store.holder(CLUSTER) in ("a", "b") and len(a.acquired) + len(b.acquired) == 1


# --- 5. release -------------------------------------------------------------------------------------


async def test_a_cluster_no_longer_wanted_is_released_and_the_next_owner_takes_it_at_once() -> None:
    """a no longer wants the cluster (a shard count change moved it), but it still exists: a
    clears the holder at its next look and reports the cluster lost. b, which wants it and saw a's
    record change a moment ago, takes it at its next look, without waiting a lease duration."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    b = replica(store.replica(), "b", start=40.0)
    await a.tick()
    await together([a, b], 6.0)  # a renewed; b saw it
    a.wants.clear()
    await a.after(0.5)
    assert a.lost == [{CLUSTER}] and not a.holds()
    released = store.record(CLUSTER)
    assert released is not None and (released.holder, released.transitions) == ("", 1)
    await b.after(0.5)
    assert b.holds() and store.holder(CLUSTER) == "b"


async def test_a_cluster_nothing_refers_to_any_more_has_its_lease_deleted() -> None:
    """The cluster's resources are gone: its Lease is deleted rather than left behind, released."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    await a.tick()
    a.wants.clear()
    a.referenced.clear()
    await a.after(0.5)
    assert a.lost == [{CLUSTER}] and store.record(CLUSTER) is None


async def test_a_stopping_replica_releases_every_lease_and_reports_them_lost() -> None:
    """Shutdown (``run`` cancelled: SIGTERM): every held Lease is released, so the next owner takes
    it at its next look instead of a lease duration later, and ``on_lost`` stops the passes."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    store.seed_released(OTHER)
    a = replica(store, "a", start=0.0, wants=[CLUSTER, OTHER])
    running = asyncio.create_task(a.keeper.run())
    assert await until(lambda: a.keeper.held() == {CLUSTER, OTHER})
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert a.lost == [{CLUSTER, OTHER}] and a.keeper.held() == set()
    assert not a.holds(CLUSTER) and not a.holds(OTHER)
    assert store.holder(CLUSTER) == "" and store.holder(OTHER) == ""
    b = replica(store.replica(), "b", start=0.0, wants=[CLUSTER, OTHER])
    await b.tick()
    assert b.keeper.held() == {CLUSTER, OTHER}


# --- 6. a renewal whose answer was lost -------------------------------------------------------------


async def test_a_renewal_whose_answer_was_lost_is_adopted_from_the_next_list() -> None:
    """The renewal reached the API server but its answer did not reach the holder (a timeout): the
    holder's record is one version behind. The next list shows the newer record, still the
    holder's, in the same term: it is adopted, the next renewal is written against it (no 409),
    and the Lease, the term and the running pass's fence are kept."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    await a.tick()
    fence = a.fence()
    before = store.record(CLUSTER)
    a.store.fail("replace", timeout("update"), written=True)
    await a.after(5.0)
    written = store.record(CLUSTER)
    assert before is not None and written is not None
    assert int(written.resource_version) > int(before.resource_version) and written.holder == "a"
    await a.after(0.5)  # adopted, and renewed against it
    renewed = store.record(CLUSTER)
    assert renewed is not None and int(renewed.resource_version) > int(written.resource_version)
    assert a.lost == [] and a.acquired == [{CLUSTER}] and renewed.transitions == 1
    await a.after(DEADLINE - 1.0)  # past the first renewal's deadline: the adopted one counts
    assert a.holds() and fence.valid() and a.lost == []


async def test_a_failed_renewal_is_retried_and_the_lease_kept() -> None:
    """One renewal fails outright (503): the next look retries it, well before the deadline."""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    await a.tick()
    a.store.fail("replace", KubernetesUnavailable("update Lease: 503 Service Unavailable", 503))
    await together([a], 30.0, step=2.0)
    assert a.holds() and a.lost == [] and store.holder(CLUSTER) == "a"


# --- 7. a Lease changed behind its holder -----------------------------------------------------------


@pytest.mark.parametrize("change", ["taken", "deleted"])
async def test_a_lease_rewritten_or_deleted_behind_its_holder_is_lost_at_its_next_look(change: str) -> None:
    """Someone else wrote the Lease (another holder, a new term) or deleted it while a held it:
    at its next look a reports it lost, holds nothing, and the fence of its passes is invalid.
    (Until that look its fence still answers: a write behind the holder's back is not a take-over
    the protocol allows, only the renew deadline bounds it.)"""
    store = FakeLeases()
    store.seed_released(CLUSTER)
    a = replica(store, "a", start=0.0)
    await a.tick()
    fence = a.fence()
    if change == "taken":
        store.overwrite(CLUSTER, "intruder")
    else:
        store.remove(CLUSTER)
    await a.after(0.5)
    assert a.lost == [{CLUSTER}] and not a.holds() and not fence.valid()
    assert a.keeper.fence(CLUSTER) is None
    await a.after(0.5)
    assert a.lost == [{CLUSTER}] and not a.holds()  # reported once
    # Taken: the intruder's; deleted: made again by a, worked on only a duration later.
    assert store.holder(CLUSTER) == ("intruder" if change == "taken" else "a")


# --- 8. the controller under Leases -----------------------------------------------------------------

NS = CLUSTER[0]
#: Two KafkaConnectors of ``CLUSTER``: a pass on the first never ends on its own (only a
#: cancellation ends it), one on the second ends at once and waits for its drift check.
STUCK, QUICK = "orders", "payments"
#: Far beyond a test's patience: a second pass that happens came from a wake-up, not the timer.
DRIFT = 3600.0
#: A retry period of hours: the keeper's own loop looks once, at start; the test makes the others.
SLOW = LeaseTimings(duration=30_000.0, renew_deadline=20_000.0, retry_period=10_000.0)


@dataclass
class Kube:
    """What the controller reads of ``KubernetesApi``: the watch cache."""

    cache: ResourceCache = field(default_factory=ResourceCache)


def resource(name: str, version: int, request: str | None = None) -> dict[str, Any]:
    """A KafkaConnector of ConnectCluster ``CLUSTER``."""
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "resourceVersion": str(version),
            "annotations": {ANNOTATION_OFFSETS: request} if request else {},
            "labels": {CLUSTER_LABEL: CLUSTER[1]},
        }
    }


async def test_the_controller_works_on_a_cluster_only_under_its_lease() -> None:
    """Resources seen before their cluster's Lease is acquired are not queued; once it is, their
    keys are queued and their passes run under the Lease's fence (``identity/term``). When the
    Lease is lost the pass in flight is cancelled (it would otherwise go on while another replica
    works on the cluster), the keys leave the queue (the drift timer of a finished pass too), and
    changes to the resources no longer queue them. When the Lease comes back, in a new term, the
    keys are queued again and their passes run under the new term's fence."""
    store = FakeLeases()
    clock = FakeClock(0.0)
    fences: dict[str, list[fencing.Fence | None]] = {STUCK: [], QUICK: []}
    cancelled: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        fences[name].append(fencing.current())
        if name == QUICK:
            return Outcome()
        try:
            await asyncio.Event().wait()  # a pass that ends only when cancelled
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return Outcome()

    def passes(name: str) -> int:
        return len(fences[name])

    kube = Kube()
    made = Controller(
        cast(KubernetesApi, kube), {CONNECTORS: reconcile}, drift_interval=DRIFT, workers=2, cluster_workers=2
    )
    keeper = lease_keeper_for(made, store, "replica-0", clock=clock, timings=SLOW)
    stuck, quick = (CONNECTORS, NS, STUCK), (CONNECTORS, NS, QUICK)
    made.observe(*stuck, resource(STUCK, 1))
    made.observe(*quick, resource(QUICK, 1))
    assert made.wanted_clusters() == {CLUSTER} and made.cluster_exists(CLUSTER)
    assert not made.queue.has(stuck) and not made.queue.has(quick) and not made.owns(stuck)
    made.start()
    try:
        assert await until(lambda: store.calls.count("list") == 1)  # the keeper's first look: absent
        assert await until(lambda: store.record(CLUSTER) is not None)  # created, not worked on yet
        await asyncio.sleep(0.05)
        assert passes(STUCK) == passes(QUICK) == 0 and not made.owns(stuck)

        for _ in range(3):  # a lease duration after its creation, renewed meanwhile: acquired
            clock.now += SLOW.retry_period
            await keeper.tick()
        assert made.owns(stuck)
        assert await until(lambda: passes(STUCK) == 1 and made.queue.scheduled() == 1)  # QUICK's timer
        first = fences[STUCK][0]
        assert first is not None and first.holder == "replica-0/0" and first.valid()
        quick_fence = fences[QUICK][0]
        assert quick_fence is not None and quick_fence.holder == "replica-0/0"

        store.overwrite(CLUSTER, "replica-1")  # another replica's term now
        await keeper.tick()
        assert await until(lambda: cancelled == [STUCK])
        assert await until(lambda: not made.queue.has(stuck))
        assert not made.queue.has(quick) and made.queue.scheduled() == 0
        assert not first.valid() and not made.owns(stuck)
        made.observe(*stuck, resource(STUCK, 2, "list"))  # asks for something: not this replica's
        made.wake(*quick)
        await asyncio.sleep(0.05)
        assert not made.queue.has(stuck) and not made.queue.has(quick)
        assert passes(STUCK) == passes(QUICK) == 1

        store.overwrite(CLUSTER, "", transitions=1)  # replica-1 released it (same term count)
        await keeper.tick()
        assert await until(lambda: passes(STUCK) == 2 and passes(QUICK) == 2)
        second = fences[STUCK][1]
        assert second is not None and second.holder == "replica-0/2" and second.valid()
        assert not first.valid()
    finally:
        await made.stop()
    assert cancelled == [STUCK, STUCK]  # stopping cancels the second pass
    assert store.holder(CLUSTER) == ""  # and releases the Lease


# --- 9. timings and names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("duration", "renew_deadline", "retry_period"),
    [(15, 10, 10), (15, 10, 12), (15, 15, 2), (10, 15, 2), (15, 10, 0), (15, 10, -1)],
)
def test_lease_timings_must_be_retry_below_renew_deadline_below_duration(
    duration: float, renew_deadline: float, retry_period: float
) -> None:
    """A renew deadline not below the duration lets a holder work on after another replica may have
    taken over; a retry period not below the deadline leaves no look to renew in time."""
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseTimings(duration, renew_deadline, retry_period)


def test_default_timings_are_client_go_s_and_a_lease_is_renewed_twice_per_deadline() -> None:
    assert LeaseTimings() == LeaseTimings(duration=15.0, renew_deadline=10.0, retry_period=2.0)
    assert LeaseTimings().renew_every == 5.0
    assert LeaseTimings(3.0, 2.0, 0.5).renew_every == 1.0
    assert LeaseTimings(30.0, 20.0, 15.0).renew_every == 15.0  # never more often than the looks


def test_lease_names_are_stable_short_valid_and_one_per_cluster() -> None:
    """The name is how replicas of different versions and shard counts find the same Lease: it
    must not change between releases (pinned here), fit a name (63 characters, DNS-1123) however
    long the namespace and cluster name, and differ between clusters."""
    assert name_of(("team-a", "orders")) == "connect-offsets-75c1a60b898072af8282"
    assert name_of(("team-a", "orders")) == name_of(("team-a", "orders"))
    longest = name_of(("n" * 63, "c" * 253))
    assert len(longest) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", longest)
    clusters = [(f"team-{i % 17}", f"cluster-{i}") for i in range(2000)]
    clusters += [("team-a", "bc"), ("team-ab", "c"), ("team-a", "b-c"), ("team-a-b", "c")]
    assert len({name_of(cluster) for cluster in clusters}) == len(clusters)
    assert lease_name("other-install", CLUSTER) != name_of(CLUSTER)


async def test_a_renewal_names_the_leases_uid_so_that_it_cannot_make_a_deleted_lease_again() -> None:
    """The API server creates a Lease on update and then ignores the stale resourceVersion: a
    renewal sent right after the Lease was deleted made it again under the old holder, which never
    saw it go (test_replicas' deleted Leases, retried in make test). With the uid in the body the
    API server refuses it (409, checked on the stack), and the holder drops the Lease."""
    sent: list[dict[str, Any]] = []

    class Coordination:
        def replace_namespaced_lease(self, name: str, namespace: str, body: dict[str, Any], **_: Any) -> Any:
            sent.append(body)
            return kube_client.V1Lease(
                metadata=kube_client.V1ObjectMeta(name=name, resource_version="8", uid="u-1"),
                spec=kube_client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=3, lease_transitions=2),
            )

    api = LeaseApi(kube_client.ApiClient(), "team-a", "connect-offsets")
    api._api = Coordination()  # type: ignore[assignment]
    now = datetime.now(UTC)
    record = LeaseRecord("l", "a", 3.0, 2, "7", "team-a/local", uid="u-1")
    renewed = await api.replace(record, LeaseWrite("a", 3.0, 2, now, now))
    assert sent[0]["metadata"]["uid"] == "u-1" and sent[0]["metadata"]["resourceVersion"] == "7"
    assert (renewed.uid, renewed.resource_version) == ("u-1", "8")  # the next renewal names it too
