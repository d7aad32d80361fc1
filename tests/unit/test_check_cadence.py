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

import httpx
import pytest

from connect_offsets.controller import next_check_delay
from connect_offsets.controller.core import MIN_DRIFT_GAP
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


async def test_readers_use_the_last_snapshot_while_a_refresh_is_in_flight() -> None:
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=5.0)
    await snapshot.refresh()
    assert snapshot._taken is not None
    release = asyncio.Event()
    real_take = snapshot._take

    async def slow_take() -> snapshots._Taken:
        await release.wait()  # Connect listing 5,000 connectors
        return await real_take()

    snapshot._take = slow_take  # type: ignore[method-assign]
    # Older than max_age, within STALE_WHILE_REFRESHING x max_age, a refresh running: answered now.
    snapshot._taken = snapshots._Taken(snapshot._taken.connectors, time.monotonic() - 7.0, snapshot._taken.seq)
    refreshing = asyncio.create_task(snapshot.refresh())
    await asyncio.sleep(0)
    read = await asyncio.wait_for(snapshot.read("a"), timeout=1.0)
    assert read.config == {"k": "v"} and read.digest is not None
    # Too old even for that: the reader waits for the refresh.
    snapshot._taken = snapshots._Taken(
        snapshot._taken.connectors, time.monotonic() - snapshots.STALE_WHILE_REFRESHING * 5.0 - 1, snapshot._taken.seq
    )
    waiting = asyncio.create_task(snapshot.read("a"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    release.set()
    await refreshing
    assert (await waiting).config == {"k": "v"}
    assert time.monotonic() - snapshot._taken.at < 1.0  # the new one
    await client.aclose()


async def test_readers_in_the_stale_window_start_one_listing_between_them() -> None:
    """A burst of checks that find the snapshot stale starts one background listing, not one each:
    the first reader marks the listing under way before the next reader looks."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=5.0)
    await snapshot.refresh()
    assert snapshot._taken is not None
    release = asyncio.Event()
    real_take = snapshot._take
    takes = 0

    async def slow_take() -> snapshots._Taken:
        nonlocal takes
        takes += 1
        await release.wait()
        return await real_take()

    snapshot._take = slow_take  # type: ignore[method-assign]
    snapshot._taken = snapshots._Taken(snapshot._taken.connectors, time.monotonic() - 7.0, snapshot._taken.seq)
    reads = await asyncio.wait_for(asyncio.gather(*(snapshot.read("a") for _ in range(50))), timeout=1.0)
    assert all(read.config == {"k": "v"} for read in reads)
    assert len(snapshot._background) == 1
    release.set()
    while snapshot._background:
        await asyncio.sleep(0.01)
    assert takes == 1
    assert time.monotonic() - snapshot._taken.at < 1.0  # installed by the one listing
    assert snapshot._inflight is None
    await client.aclose()
