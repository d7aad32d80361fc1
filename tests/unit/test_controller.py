"""The controller core (issue 35): the work queue and the workers that replaced a daemon per resource.

Covers the queue (``controller/queue.py``): a key queued once however often it is added; never
handed to two workers at once, and ready again once done if added meanwhile; the earliest timer
wins; back-off 2, 4, 8 ... 60 s until forgotten; a removed key is gone; namespaces take turns (one
namespace's backlog delays another's key by at most one turn); a Connect cluster at its cap holds
no more workers. And the controller (``controller/core.py``) with a scripted reconcile and the real
``ResourceCache``: a resource is checked on its timer and at once when woken; a request is never
lost to a removal echo coalesced with the next identical request, nor to one that arrived during a
pass (issue 30's deaf resource); a deleted resource's key is dropped; a paused peer does not work;
another shard's keys are not taken.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connect_offsets.clients.annotations_patch import finalizers_patch
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesUnavailable
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import (
    FINALIZER,
    Controller,
    Deletions,
    Shard,
    WorkQueue,
    awaiting_deletion,
    owner_of,
)
from connect_offsets.controller.queue import MAX_DELAY_S, due_on_grid
from connect_offsets.controller.sharding import needs_finalizer, stale_finalizers
from connect_offsets.reconcile.runner import accounted_view
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, CLUSTER_LABEL, CONNECTORS
from tests.polling import until

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(namespace: str, name: str) -> tuple[str, str, str]:
    return (CONNECTORS, namespace, name)


async def take(queue: WorkQueue) -> tuple[str, str, str]:
    found, _ = await asyncio.wait_for(queue.get(), timeout=1.0)
    return found


async def nothing_ready(queue: WorkQueue) -> bool:
    try:
        await asyncio.wait_for(queue.get(), timeout=0.05)
    except TimeoutError:
        return True
    return False


# --- the queue ---------------------------------------------------------------------------------------


async def test_a_key_is_queued_once_and_never_processed_twice_at_once() -> None:
    queue = WorkQueue()
    for _ in range(3):
        queue.add(key("a", "x"))
    assert queue.depth()[CONNECTORS] == 1
    assert await take(queue) == key("a", "x")
    queue.add(key("a", "x"))  # added while processing: not handed to another worker
    assert await nothing_ready(queue)
    queue.done(key("a", "x"))  # ... but ready once the first pass ends
    assert await take(queue) == key("a", "x")
    queue.done(key("a", "x"))
    assert await nothing_ready(queue)


async def test_the_earliest_timer_wins_and_an_add_supersedes_it() -> None:
    clock = Clock()
    queue = WorkQueue(clock=clock)
    queue.add_after(key("a", "x"), 30)
    queue.add_after(key("a", "x"), 5)
    queue.add_after(key("a", "x"), 60)  # later: the 5 s one stays
    assert queue.scheduled() == 1
    clock.now += 4.9
    assert await nothing_ready(queue)
    clock.now += 0.2
    assert await take(queue) == key("a", "x")
    queue.done(key("a", "x"))
    queue.add_after(key("a", "y"), 30)
    queue.add(key("a", "y"))  # a watch event: now, and the timer is superseded
    assert await take(queue) == key("a", "y")
    queue.done(key("a", "y"))
    clock.now += 31
    assert await nothing_ready(queue)


async def test_back_off_doubles_to_a_minute_and_forget_starts_over() -> None:
    queue = WorkQueue(clock=Clock())
    delays = [queue.add_rate_limited(key("a", "x")) for _ in range(8)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, MAX_DELAY_S, MAX_DELAY_S, MAX_DELAY_S]
    queue.forget(key("a", "x"))
    assert queue.add_rate_limited(key("a", "x")) == 2.0
    assert queue.stats.retries[CONNECTORS] == 9


async def test_a_removed_key_is_gone_from_the_ready_queue_and_the_timers() -> None:
    clock = Clock()
    queue = WorkQueue(clock=clock)
    queue.add(key("a", "x"))
    queue.add_after(key("a", "y"), 1)
    queue.remove(key("a", "x"))
    queue.remove(key("a", "y"))
    clock.now += 2
    assert await nothing_ready(queue)
    assert queue.depth()[CONNECTORS] == 0 and queue.scheduled() == 0


async def test_namespaces_take_turns() -> None:
    """Namespace A has 100 keys ready; B's one key, added last, is taken second."""
    queue = WorkQueue()
    for i in range(100):
        queue.add(key("a", f"x{i}"))
    queue.add(key("b", "y"))
    first, second = await take(queue), await take(queue)
    assert {first[1], second[1]} == {"a", "b"}
    taken = [await take(queue) for _ in range(99)]
    assert [k[1] for k in taken] == ["a"] * 99  # A's keys in their order
    assert [k[2] for k in taken] == [f"x{i}" for i in range(1, 100)]


async def test_a_cluster_at_its_cap_holds_no_more_workers() -> None:
    """Two workers' share per cluster: a third key of the slow cluster waits, another cluster's runs."""
    clusters = {key("a", f"slow{i}"): "slow" for i in range(3)} | {key("a", "fast"): "fast"}
    queue = WorkQueue(cluster_of=lambda k: clusters.get(k), cluster_cap=2)
    for name in ("slow0", "slow1", "slow2", "fast"):
        queue.add(key("a", name))
    # The namespace's clusters take turns too: the fast cluster's key does not wait behind the slow backlog.
    assert [await take(queue) for _ in range(3)] == [key("a", "slow0"), key("a", "fast"), key("a", "slow1")]
    assert await nothing_ready(queue)  # slow2 waits for a slot
    queue.done(key("a", "slow0"))
    assert await take(queue) == key("a", "slow2")


async def test_a_shut_down_queue_releases_its_workers() -> None:
    queue = WorkQueue()
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, timeout=1.0)


async def test_a_change_wakes_one_waiting_worker_and_one_keeps_the_timer() -> None:
    """Eight idle workers, keys arriving one at a time and on timers: each key costs about one
    look at the queue, not one per idle worker (waking all of them cost 7 looks and 7 event-loop
    timers per key at 5,000 resources)."""
    queue = WorkQueue()
    looks = 0
    real_take = queue._take

    def counting_take() -> tuple[tuple[str, str, str], float] | None:
        nonlocal looks
        looks += 1
        return real_take()

    queue._take = counting_take  # type: ignore[method-assign]
    taken: list[tuple[str, str, str]] = []

    async def worker() -> None:
        while True:
            item, _ = await queue.get()
            taken.append(item)
            queue.done(item)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    await asyncio.sleep(0.01)
    looks = 0
    for i in range(50):
        queue.add(key("a", f"now{i}"))
        await asyncio.sleep(0)
    for i in range(50):
        queue.add_after(key("a", f"later{i}"), 0.01 + i * 0.002)
    assert await until(lambda: len(taken) == 100)
    assert sorted(taken) == sorted(
        [key("a", f"now{i}") for i in range(50)] + [key("a", f"later{i}") for i in range(50)]
    )
    assert looks <= 4 * 100, looks  # 8 and more per key when every change woke every idle worker
    queue.shut_down()
    await asyncio.gather(*workers, return_exceptions=True)


# --- the controller ----------------------------------------------------------------------------------

NS, NAME = "team-a", "orders"
#: Far beyond a test's patience: a second check that happens came from a wake-up, not the timer.
DRIFT = 3600.0


@dataclass
class Kube:
    """What the controller reads of ``KubernetesApi``: the watch cache."""

    cache: ResourceCache = field(default_factory=ResourceCache)


def body(version: int, request: str | None = None, cluster: str = "local") -> dict[str, Any]:
    annotations = {ANNOTATION_OFFSETS: request} if request else {}
    return {
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "resourceVersion": str(version),
            "annotations": annotations,
            "labels": {CLUSTER_LABEL: cluster},
        }
    }


def controller(
    reconcile: Callable[[str, str], Awaitable[Outcome]], *, shard: Shard | None = None
) -> tuple[Controller, Kube]:
    kube = Kube()
    made = Controller(
        cast(KubernetesApi, kube),
        {CONNECTORS: reconcile},
        drift_interval=DRIFT,
        workers=2,
        shard=shard,
    )
    return made, kube


async def test_a_resource_is_checked_on_its_timer_and_at_once_when_woken() -> None:
    checks: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        checks.append(name)
        return Outcome(requeue_after=0.05 if len(checks) == 2 else None)

    made, _ = controller(reconcile)
    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, body(1))
        assert await until(lambda: len(checks) == 1)
        await asyncio.sleep(0.1)
        assert len(checks) == 1  # the drift interval is an hour away
        made.connectors_changed({("ns", "any")}, {"anything"})  # not its connector: nothing
        made.observe(CONNECTORS, NS, NAME, body(2, "list"))  # what it asks for changed: at once
        assert await until(lambda: len(checks) == 2)
        assert await until(lambda: len(checks) == 3)  # the plan's 0.05 s requeue
        made.observe(CONNECTORS, NS, NAME, body(4, "list"))  # only the version changed: no wake-up
        await asyncio.sleep(0.1)
        assert len(checks) == 3
    finally:
        await made.stop()


async def test_a_removal_echo_coalesced_with_the_next_identical_request_still_wakes() -> None:
    """Pass 1 handles `list` (version 1) and removes the annotation (version 2); the user annotates
    `list` again (version 3); the watch delivers only version 3, whose view equals the one the
    controller last saw. The resource is checked again at once."""
    passes: list[str] = []
    made, kube = controller(lambda ns, name: handle(ns, name))

    async def handle(namespace: str, name: str) -> Outcome:
        current = kube.cache.get(CONNECTORS, namespace, name)
        assert current is not None
        passes.append(current["metadata"]["resourceVersion"])
        if len(passes) == 1:
            kube.cache.observe(CONNECTORS, NS, NAME, body(2), watched=False)  # our removal's answer
            made.observe(CONNECTORS, NS, NAME, copy.deepcopy(body(3, "list")))  # the one event for 2 and 3
            return Outcome(seen=accounted_view(current, [ANNOTATION_OFFSETS]))
        return Outcome(seen=accounted_view(current))

    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, body(1, "list"))
        assert await until(lambda: len(passes) == 2)
        assert passes == ["1", "3"]
    finally:
        await made.stop()


async def test_a_request_arriving_during_a_pass_that_saw_none_is_checked_at_once() -> None:
    """The pass planned from a body without a request; the request arrived in the cache before the
    pass ended, in a way no event reported (the view the controller held matched it)."""
    passes: list[str] = []
    made, kube = controller(lambda ns, name: handle(ns, name))

    async def handle(namespace: str, name: str) -> Outcome:
        current = kube.cache.get(CONNECTORS, namespace, name)
        assert current is not None
        passes.append(current["metadata"]["resourceVersion"])
        if len(passes) == 1:
            kube.cache.observe(CONNECTORS, NS, NAME, body(2, "list"))
        return Outcome(seen=accounted_view(current))

    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, body(1))
        assert await until(lambda: len(passes) == 2)
        assert passes == ["1", "2"]
    finally:
        await made.stop()


async def test_an_idle_resource_waits_for_its_interval() -> None:
    passes: list[str] = []
    made, kube = controller(lambda ns, name: handle(ns, name))

    async def handle(namespace: str, name: str) -> Outcome:
        current = kube.cache.get(CONNECTORS, namespace, name)
        assert current is not None
        passes.append(name)
        return Outcome(seen=accounted_view(current))

    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, body(1))
        assert await until(lambda: len(passes) == 1)
        await asyncio.sleep(0.2)
        assert passes == [NAME]
    finally:
        await made.stop()


async def test_a_transient_failure_backs_off_and_a_deleted_resource_is_dropped() -> None:
    checks: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        checks.append(name)
        return Outcome(transient_error="Connect unreachable")

    made, _ = controller(reconcile)
    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, body(1))
        assert await until(lambda: len(checks) == 1)
        assert made.queue.failures(key(NS, NAME)) == 1 and made.queue.scheduled() == 1  # 2 s back-off
        made.observe(CONNECTORS, NS, NAME, None)  # deleted
        assert made.queue.scheduled() == 0 and made.queue.failures(key(NS, NAME)) == 0
    finally:
        await made.stop()


def test_a_shard_takes_the_keys_of_its_connect_clusters_only() -> None:
    """40 resources, each bound to a ConnectCluster of its own, seen by both replicas of two
    shards: each resource is queued in exactly one, and both shards get some."""

    async def reconcile(namespace: str, name: str) -> Outcome:
        return Outcome()

    replicas = [controller(reconcile, shard=Shard(index, 2))[0] for index in range(2)]
    names = [f"r{i}" for i in range(40)]
    for replica in replicas:
        for name in names:
            bound = body(1, cluster=f"cluster-{name}")
            bound["metadata"]["name"] = name
            replica.observe(CONNECTORS, NS, name, bound)
    taken = [[name for name in names if replica.queue.has(key(NS, name))] for replica in replicas]
    assert sorted(taken[0] + taken[1]) == sorted(names)  # each by exactly one
    assert taken[0] and taken[1]


def test_delayed_keys_come_due_on_a_grid_never_early_and_little_late() -> None:
    """A drift interval's re-checks come due in batches (one wake-up per step, issue 35): never
    earlier than asked, at most a sixteenth of the delay (and 1 s) later."""
    for now in (0.0, 3.7, 1234.567):
        for delay in (0.05, 2.0, 5.0, 30.0, 600.0):
            due = due_on_grid(now, delay)
            assert now + delay <= due <= now + delay + min(1.0, delay / 16) + 1e-9
    # 5,000 resources re-checked every 30 s, one every 6 ms: 30 distinct due times, not 5,000.
    dues = {due_on_grid(1000.0 + i * 0.006, 30.0) for i in range(5000)}
    assert len(dues) == 31


async def test_keys_due_on_the_same_step_are_ready_together() -> None:
    clock = Clock()
    clock.now = 1000.1
    queue = WorkQueue(clock=clock)
    for i in range(10):  # asked for 1030.1 ... 1030.55: all due on the step at 1031
        queue.add_after(key("a", f"k{i}"), 30)
        clock.now += 0.05
    clock.now = 1030.99
    assert await nothing_ready(queue)
    clock.now = 1031.0
    taken = []
    for _ in range(10):
        item = await take(queue)
        taken.append(item)
        queue.done(item)
    assert sorted(taken) == sorted(key("a", f"k{i}") for i in range(10))


def test_rendezvous_hashing_moves_about_one_in_n_clusters_when_the_shard_count_changes() -> None:
    """Modulo hashing moved 131 of 200 clusters on 2 -> 3 (issue 44); rendezvous hashing moves only
    those the new shard wins, about a third, and never one between two old shards."""
    clusters = [(f"team-{i % 7}", f"cluster-{i}") for i in range(200)]
    before = {c: owner_of(c, 2) for c in clusters}
    after = {c: owner_of(c, 3) for c in clusters}
    moved = [c for c in clusters if before[c] != after[c]]
    assert all(after[c] == 2 for c in moved)  # only to the new shard
    assert 50 <= len(moved) <= 85, len(moved)  # about 200 / 3
    shrunk = {c: owner_of(c, 2) for c in clusters}
    assert shrunk == before  # and back again
    counts = [sum(1 for c in clusters if after[c] == i) for i in range(3)]
    assert min(counts) >= 45, counts  # spread over all three


def test_one_finalizer_whatever_the_shard_count_and_the_old_per_shard_ones_are_stale() -> None:
    """The finalizer no longer depends on the shard count (issue 44): the per-shard names of
    earlier versions are stale, to be replaced on a live resource and released after the delete
    logic on one being deleted."""
    assert FINALIZER == "connect-offsets.io/finalizer"
    live = body(1)
    live["metadata"]["finalizers"] = ["other.io/keep", f"{FINALIZER}-shard-1"]
    assert stale_finalizers(live) == [f"{FINALIZER}-shard-1"]
    assert needs_finalizer(live)
    live["metadata"]["finalizers"] = ["other.io/keep", FINALIZER]
    assert not needs_finalizer(live)
    assert not needs_finalizer(deleting())  # a finalizer cannot be added once deletion began


def deleting(*finalizers: str) -> dict[str, Any]:
    made = body(2)
    made["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    made["metadata"]["finalizers"] = list(finalizers)
    return made


def test_a_deletion_is_ours_while_one_of_our_finalizers_holds_it() -> None:
    assert awaiting_deletion(deleting(FINALIZER, "other.io/keep"))
    assert awaiting_deletion(deleting(f"{FINALIZER}-shard-1"))  # an older version's name
    assert not awaiting_deletion(deleting("other.io/keep"))  # nothing of ours holds it
    living = body(2)
    living["metadata"]["finalizers"] = [FINALIZER]
    assert not awaiting_deletion(living)


def test_the_finalizers_patch_removes_by_place_behind_a_test() -> None:
    patch = json.loads(
        finalizers_patch([FINALIZER, "other.io/keep", f"{FINALIZER}-shard-1"], {FINALIZER, f"{FINALIZER}-shard-1"})
    )
    assert patch == [
        {"op": "test", "path": "/metadata/finalizers/2", "value": f"{FINALIZER}-shard-1"},
        {"op": "remove", "path": "/metadata/finalizers/2"},
        {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]


async def test_a_deletion_runs_its_delete_logic_once_then_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resource being deleted waits on our finalizer (or an older version's per-shard one): the
    controller runs the delete logic once and removes our finalizers; a failed release is tried
    again without running the delete logic again. Only the owning shard does it."""
    monkeypatch.setattr("connect_offsets.controller.queue.BASE_DELAY_S", 0.01)
    ran: list[tuple[str, str, bool]] = []
    released: list[set[str]] = []
    failures = [1]

    async def run(plural: str, namespace: str, name: str, body: dict[str, Any], give_up: bool) -> str:
        ran.append((plural, name, give_up))
        return "connector deleted in Connect"

    async def release(plural: str, namespace: str, name: str, finalizers: set[str]) -> None:
        if failures[0]:
            failures[0] -= 1
            raise KubernetesUnavailable("patch: 500", status=500)
        released.append(finalizers)

    async def reconcile(namespace: str, name: str) -> Outcome:
        return Outcome()

    owner = owner_of((NS, "local"), 2)
    made, other = (
        Controller(
            cast(KubernetesApi, Kube()),
            {CONNECTORS: reconcile},
            drift_interval=DRIFT,
            workers=2,
            shard=Shard(index, 2),
            deletions=Deletions(run=run, release=release),
        )
        for index in (owner, 1 - owner)
    )
    made.start()
    other.start()
    try:
        for replica in (made, other):
            replica.observe(CONNECTORS, NS, NAME, deleting(f"{FINALIZER}-shard-1", "other.io/keep", FINALIZER))
        assert await until(lambda: len(released) == 1)
        assert ran == [(CONNECTORS, NAME, False)]
        assert released == [{FINALIZER, f"{FINALIZER}-shard-1"}]
        await asyncio.sleep(0.05)
        assert len(ran) == 1 and len(released) == 1
    finally:
        await made.stop()
        await other.stop()


async def test_a_key_left_without_a_check_is_queued_again_within_a_drift_interval() -> None:
    """The resync (client-go's): a key of a held cluster that is neither queued, waiting for its
    timer nor being processed comes back within a drift interval, however it was lost (issue 44's
    benchmarks lost some when a Lease lapsed and came back, or the API server restarted)."""
    checks: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        checks.append(name)
        return Outcome()

    kube = Kube()
    made = Controller(cast(KubernetesApi, kube), {CONNECTORS: reconcile}, drift_interval=0.2, workers=1)
    made.observe(CONNECTORS, NS, NAME, body(1))
    made.queue.remove(key(NS, NAME))  # lost, by whatever path
    assert not made.queue.has(key(NS, NAME))
    made.start()
    try:
        assert await until(lambda: checks == [NAME], timeout=2.0)
    finally:
        await made.stop()
