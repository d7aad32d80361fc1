"""When a resource is checked again (controller/core.next_check_delay), and what a check reads while
its cluster's snapshot is being refreshed (reconcile/snapshots.py).

Why these matter at scale: with 5,000 resources on one Connect, listing every connector takes
Connect seconds; checks that waited for it and then a whole interval more checked each resource
only every ~2 intervals (bench/bench_steady_state.py). Covers: the interval counts from a check's
start; a slow check does not become a busy loop; back-off and requeues as before; readers are
answered from the last snapshot while a refresh is in flight, within a bound, and wait otherwise.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx
import pytest

from connect_offsets.clients.connect import ConnectClient
from connect_offsets.controller import next_check_delay
from connect_offsets.controller.cadence import MIN_DRIFT_GAP, ON_SLOT, check_slot
from connect_offsets.reconcile import snapshots
from connect_offsets.reconcile.settings import MAX_RETRY_DELAY_S, Outcome
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from tests.fakes import FakeConnect
from tests.reconcile_pass import URL, client_for

pytestmark = pytest.mark.unit


def test_the_drift_interval_counts_from_the_check_start() -> None:
    assert next_check_delay(Outcome(), 0, 5.0, elapsed=0.1) == pytest.approx(4.9)
    assert next_check_delay(Outcome(), 0, 5.0, elapsed=3.0) == pytest.approx(2.0)
    # Slower than the interval: the next check soon, but never at once.
    assert next_check_delay(Outcome(), 0, 5.0, elapsed=9.0) == pytest.approx(MIN_DRIFT_GAP * 5.0)


def test_back_off_and_requeues_are_unchanged() -> None:
    failing = Outcome(transient_error="Connect unreachable")
    assert [next_check_delay(failing, n, 30.0, elapsed=0.0) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert next_check_delay(failing, 20, 30.0, elapsed=0.0) == MAX_RETRY_DELAY_S
    assert next_check_delay(Outcome(requeue_after=2.0), 0, 30.0, elapsed=1.0) == 2.0
    assert next_check_delay(Outcome(requeue_after=0.0), 0, 30.0, elapsed=1.0) == 0.0
    assert next_check_delay(Outcome(requeue_after=60.0), 0, 30.0, elapsed=1.0) == pytest.approx(29.0)


def test_a_check_comes_back_at_its_slot_and_never_later_than_one_interval() -> None:
    assert next_check_delay(Outcome(), 0, 30.0, elapsed=1.0, to_slot=20.0) == pytest.approx(19.0)
    assert next_check_delay(Outcome(), 0, 30.0, elapsed=0.5, to_slot=29.9) == pytest.approx(29.4)
    # A slot nearer than the gap: once at the gap, and from there at the slot.
    assert next_check_delay(Outcome(), 0, 30.0, elapsed=0.0, to_slot=1.0) == pytest.approx(MIN_DRIFT_GAP * 30.0)
    # On its slot (or a clock tick before it): the next slot, an interval later.
    assert next_check_delay(Outcome(), 0, 30.0, elapsed=0.5, to_slot=0.0) == pytest.approx(29.5)
    assert next_check_delay(Outcome(), 0, 30.0, elapsed=0.5, to_slot=1e-9) == pytest.approx(29.5)
    assert next_check_delay(Outcome(requeue_after=2.0), 0, 30.0, elapsed=0.0, to_slot=20.0) == 2.0
    failing = Outcome(transient_error="Connect unreachable")
    assert next_check_delay(failing, 1, 30.0, elapsed=0.0, to_slot=20.0) == 2.0


def test_resources_checked_together_are_spread_over_the_interval_within_two_checks() -> None:
    """1,000 resources whose checks all began in the same second (created at once, or released
    together by a slow cluster's listing): two checks later each is on its own slot, the checks
    of any one second are near the even share, and no resource waited longer than the interval."""
    interval = 30.0
    keys = [("kafkaconnectors", "tenant-a", f"c-{i:04d}") for i in range(1000)]
    starts = {key: 1000.0 + (i % 10) / 10 for i, key in enumerate(keys)}  # the burst: one second
    gaps: list[float] = []
    for _ in range(2):
        for key, started in starts.items():
            to_slot = (check_slot(key, interval) - started) % interval
            delay = next_check_delay(Outcome(), 0, interval, elapsed=0.05, to_slot=to_slot)
            gaps.append(delay + 0.05)
            starts[key] = started + 0.05 + delay
    per_second = [0] * int(interval)
    for key, started in starts.items():
        early = (check_slot(key, interval) - started) % interval
        assert early < ON_SLOT * interval + 1e-9  # on its slot (or within the tolerance before it)
        per_second[int(started % interval)] += 1
    assert max(gaps) <= interval
    assert max(per_second) <= 2.5 * len(keys) / interval, per_second  # 33 a second on average
    assert min(per_second) > 0


@dataclass
class SlowListing:
    """A snapshot of one connector whose next listings wait for ``release`` (Connect listing 5,000
    connectors), counted in ``takes``."""

    snapshot: ConnectorsSnapshot
    client: ConnectClient
    release: asyncio.Event = field(default_factory=asyncio.Event)
    takes: int = 0

    def age(self, seconds: float) -> None:
        """Make the last snapshot ``seconds`` old."""
        taken = self.snapshot._taken
        assert taken is not None
        self.snapshot._taken = snapshots._Taken(taken.connectors, time.monotonic() - seconds, taken.seq)


async def slow_listing() -> SlowListing:
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=5.0)
    await snapshot.refresh()
    listing = SlowListing(snapshot, client)
    real_take = snapshot._take

    async def slow_take() -> snapshots._Taken:
        listing.takes += 1
        await listing.release.wait()
        return await real_take()

    snapshot._take = slow_take  # type: ignore[method-assign]
    return listing


async def test_readers_use_the_last_snapshot_while_a_refresh_is_in_flight() -> None:
    listing = await slow_listing()
    snapshot = listing.snapshot
    # Older than max_age, within STALE_WHILE_REFRESHING x max_age, a refresh running: answered now.
    listing.age(7.0)
    refreshing = asyncio.create_task(snapshot.refresh())
    await asyncio.sleep(0)
    read = await asyncio.wait_for(snapshot.read("a"), timeout=1.0)
    assert read.config == {"k": "v"} and read.digest is not None
    # Too old even for that: the reader waits for the refresh.
    listing.age(snapshots.STALE_WHILE_REFRESHING * 5.0 + 1)
    waiting = asyncio.create_task(snapshot.read("a"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    listing.release.set()
    await refreshing
    assert (await waiting).config == {"k": "v"}
    assert snapshot._taken is not None and time.monotonic() - snapshot._taken.at < 1.0  # the new one
    await listing.client.aclose()


async def test_readers_in_the_stale_window_start_one_listing_between_them() -> None:
    """A burst of checks that find the snapshot stale starts one background listing, not one each:
    the first reader marks the listing under way before the next reader looks."""
    listing = await slow_listing()
    snapshot = listing.snapshot
    listing.age(7.0)
    reads = await asyncio.wait_for(asyncio.gather(*(snapshot.read("a") for _ in range(50))), timeout=1.0)
    assert all(read.config == {"k": "v"} for read in reads)
    assert listing.takes == 1 and snapshot._inflight is not None
    listing.release.set()
    while snapshot._inflight is not None:
        await asyncio.sleep(0.01)
    assert listing.takes == 1
    assert snapshot._taken is not None and time.monotonic() - snapshot._taken.at < 1.0  # installed by the one listing
    assert snapshot._inflight is None
    await listing.client.aclose()
