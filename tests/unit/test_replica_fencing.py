"""Exactly once across replicas (issue 44): the holes an attacker review found, each kept shut.

The review wrote one test per way around "every write happens once, by the replica whose Lease
term it is", each passing while the attack worked. Here each asserts the fix instead
(``controller/core.py``, ``controller/leases.py``, ``clients/kafka.py``):

* the full reset's deletion of MirrorMaker2's offset-syncs topic, a Kafka write, is fenced like
  every other write: refused under a Lease term that has ended;
* no write to Connect before our finalizer is on: the finalizer patch comes first in the pass, and
  a failed patch means no reconcile in that pass (else a resource deleted meanwhile goes without
  its delete logic, and its connector stays behind in Connect);
* a resource's delete logic runs in the resource's own key, so never beside its own pass (which
  would go on writing to Connect after the delete logic deleted the connector);
* a resource relabelled to another ConnectCluster has the pass in flight under the old cluster's
  Lease cancelled: that fence stays valid, so only the cancellation ends the pass before the new
  cluster's holder starts one of its own;
* ``FencedOff`` while this replica still holds the Lease (its cache one claim behind, at a
  hand-over) requeues the key with back-off, where it used to drop the key and leave the request
  pending for good; with the Lease gone it is still dropped;
* a Lease is released (on shutdown, or given up) only after the passes cancelled under it ended:
  the next holder takes a released Lease at its next look and must not meet our last writes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from connect_offsets import fencing
from connect_offsets.clients import kafka as kafka_client
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesUnavailable
from connect_offsets.clients.leases import LeaseRecord, LeaseWrite
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import (
    FINALIZER,
    Controller,
    Deletions,
    LeaseKeeper,
    LeaseTimings,
    Shard,
    lease_name,
    owner_of,
)
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, CLUSTER_LABEL, CONNECTORS
from tests.fakes import FakeClock, FakeLeases, lease_keeper_for
from tests.polling import until

pytestmark = pytest.mark.unit

NS, NAME = "team-a", "orders"
#: Far beyond a test's patience: a second pass that happens came from a requeue, not the timer.
DRIFT = 3600.0
#: A retry period of hours: the keepers look only when the test says so.
SLOW = LeaseTimings(duration=30_000.0, renew_deadline=20_000.0, retry_period=10_000.0)
#: A requeue's back-off in these tests (the queue's 2 s, shortened).
BACK_OFF = 0.05


def connector(
    version: int, cluster: str = "local", *, finalizers: list[str] | None = None, deleting: bool = False
) -> dict[str, Any]:
    """A KafkaConnector of ConnectCluster ``cluster`` asking for a reset (offsetsOnDelete: reset)."""
    meta: dict[str, Any] = {
        "name": NAME,
        "namespace": NS,
        "uid": "u-1",
        "resourceVersion": str(version),
        "labels": {CLUSTER_LABEL: cluster},
        "annotations": {ANNOTATION_OFFSETS: "reset"},
        "finalizers": list(finalizers or []),
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    return {"metadata": meta, "spec": {"offsetsOnDelete": "reset"}}


def clusters_of_two_shards() -> tuple[tuple[str, str], tuple[str, str]]:
    """Two ConnectClusters that two shards own, one each."""
    clusters = [(NS, f"c{index}") for index in range(50)]
    return clusters[0], next(c for c in clusters[1:] if owner_of(c, 2) != owner_of(clusters[0], 2))


def watch_only() -> KubernetesApi:
    """What the controller reads of ``KubernetesApi`` when the passes are scripted: the watch cache."""
    return cast(KubernetesApi, SimpleNamespace(cache=ResourceCache()))


class JournaledLeases(FakeLeases):
    """Leases whose releases (and deletions) go into the test's journal, beside the passes' steps."""

    def __init__(self, journal: list[str]) -> None:
        super().__init__()
        self.journal = journal

    async def replace(self, record: LeaseRecord, write: LeaseWrite) -> LeaseRecord:
        written = await super().replace(record, write)
        if not write.holder:
            self.journal.append("Lease released")
        return written

    async def delete(self, record: LeaseRecord) -> None:
        await super().delete(record)
        self.journal.append("Lease deleted")


def slow_to_end(journal: list[str]) -> Callable[[str, str], Awaitable[Outcome]]:
    """A pass that runs until cancelled, then makes one last write (a cleanup: the shards of a
    ConfigMap write it gave up, a status write) before it ends: ``pass started``, ``pass
    cancelled``, ``last write answered`` (unless cancelled again meanwhile), ``pass ended``."""

    async def reconcile(namespace: str, name: str) -> Outcome:
        journal.append("pass started")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            journal.append("pass cancelled")
            try:
                await asyncio.sleep(0.05)  # the last write, on its way
                journal.append("last write answered")
            finally:
                journal.append("pass ended")
            raise
        return Outcome()

    return reconcile


# --- 1. the offset-syncs topic deletion is fenced ---------------------------------------------------


async def test_the_offset_syncs_topic_delete_is_refused_under_an_ended_lease_term(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attack: a replica woken after another took its Lease over (a long GC pause, SIGSTOP)
    went on with its MirrorMaker2 full reset; the offset-syncs topic deletion
    (``clients.kafka.delete_topic``) had no fence check, so the woken zombie deleted the topic
    again, after the new holder had reset and restarted the mirror. Now it is refused with
    ``FencedOff`` like every Kafka and Connect write, and goes out under a term that holds."""
    from connect_offsets.clients import kafka as kafka_client
    from connect_offsets.reconcile import mirrormaker2 as mm2

    sent: list[str] = []

    async def tenant_call(namespace: str, config: dict[str, Any], call: Any) -> Any:
        sent.append("DeleteTopics mm2-offset-syncs.dst.internal")
        return True

    monkeypatch.setattr(kafka_client, "_tenant_call", tenant_call)

    class Events:
        async def post_event(self, **_: Any) -> None:
            return None

    service = mm2.MirrorMaker2Service.__new__(mm2.MirrorMaker2Service)
    service.kube = cast(Any, Events())
    resource = SimpleNamespace(
        metadata=SimpleNamespace(namespace=NS),
        spec=SimpleNamespace(
            clusters=[SimpleNamespace(alias="src", config={}, secret_config=[], bootstrap_servers="src:9092")]
        ),
    )
    target = SimpleNamespace(name="src->dst.MirrorSourceConnector", config={"source.cluster.alias": "src"})
    plan = SimpleNamespace(offset_syncs_reset=(target.name, "mm2-offset-syncs.dst.internal", "src"), targets=[target])
    hook = service._offset_syncs_hook(
        cast(Any, resource), cast(Any, plan), target.name, {"metadata": {"namespace": NS, "name": "dr"}}
    )
    assert hook is not None
    reset = SimpleNamespace(kind="reset_offsets")

    ended = fencing.Fence(holder="zombie/3", valid=lambda: False)
    with fencing.acting_under(ended), pytest.raises(fencing.FencedOff, match="term zombie/3 has ended: delete topic"):
        await hook(cast(Any, reset))
    assert sent == []

    with fencing.acting_under(fencing.Fence(holder="holder/4", valid=lambda: True)):
        said = await hook(cast(Any, reset))
    assert sent == ["DeleteTopics mm2-offset-syncs.dst.internal"]
    assert "deleted topic mm2-offset-syncs.dst.internal on cluster src" in said


# --- 2. the finalizer before any Connect write ------------------------------------------------------


@dataclass
class FinalizerKube:
    """The watch cache, and a finalizer patch the API server answers 500 to ``failures`` times
    (etcd timing out), then takes, a moment later; what happened goes into ``journal``."""

    journal: list[str]
    failures: int
    cache: ResourceCache = field(default_factory=ResourceCache)

    async def replace_finalizers(self, plural: str, namespace: str, name: str, add: str, remove: set[str]) -> None:
        if self.failures > 0:
            self.failures -= 1
            self.journal.append("finalizer patch: 500")
            raise KubernetesUnavailable("patch finalizers: 500 etcdserver: request timed out", status=500)
        await asyncio.sleep(0.05)  # a slow answer: the pass waits for it
        body = self.cache.get(plural, namespace, name)
        assert body is not None
        body["metadata"]["finalizers"] = [add]
        self.cache.observe(plural, namespace, name, body, watched=False)  # the patch's answer
        self.journal.append("finalizer on")


def finalized_controller(kube: FinalizerKube) -> Controller:
    """A controller whose pass creates the connector in Connect and whose delete logic resets
    and deletes it, each step journaled."""

    async def reconcile(namespace: str, name: str) -> Outcome:
        kube.journal.append("connect: POST /connectors")
        return Outcome()

    async def run(plural: str, namespace: str, name: str, body: dict[str, Any], give_up: bool) -> str:
        kube.journal.append("delete logic: reset offsets, DELETE /connectors/orders")
        return "reset + deleted"

    async def release(plural: str, namespace: str, name: str, finalizers: set[str]) -> None:
        kube.journal.append("finalizer off")

    return Controller(
        cast(KubernetesApi, kube),
        {CONNECTORS: reconcile},
        drift_interval=DRIFT,
        workers=2,
        deletions=Deletions(run=run, release=release),
    )


@pytest.mark.parametrize("patch", ["fails-for-good", "fails-once"])
async def test_no_connect_write_before_the_finalizer_is_on(patch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: the finalizer was put on by a key of its own, beside the resource's pass; with
    the patch failing (or merely slower) the pass created the connector in Connect, the user
    deleted the resource, which, with no finalizer on, was gone at once: the delete logic
    (offsetsOnDelete: reset) never ran and the connector and its offsets stayed in Connect.
    Now the pass puts the finalizer on first, and a failed patch ends the pass before the
    reconcile (retried with back-off). ``fails-for-good``: deleted meanwhile, the resource leaves
    nothing behind in Connect. ``fails-once``: once the API server takes the patch (slowly), the
    connector is created, and the user's deletion waits for the delete logic."""
    monkeypatch.setattr("connect_offsets.controller.queue.BASE_DELAY_S", BACK_OFF)
    journal: list[str] = []
    made = finalized_controller(FinalizerKube(journal, failures={"fails-for-good": 1_000, "fails-once": 1}[patch]))
    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, connector(1))
        if patch == "fails-for-good":
            assert await until(lambda: journal.count("finalizer patch: 500") >= 3)  # retried, with back-off
            made.observe(CONNECTORS, NS, NAME, None)  # deleted: no finalizer held it
            await asyncio.sleep(4 * BACK_OFF)
        else:
            assert await until(lambda: "connect: POST /connectors" in journal)
            made.observe(CONNECTORS, NS, NAME, connector(2, finalizers=[FINALIZER], deleting=True))
            assert await until(lambda: "finalizer off" in journal)
    finally:
        await made.stop()
    if patch == "fails-for-good":
        assert set(journal) == {"finalizer patch: 500"}, journal
    else:
        assert journal == [
            "finalizer patch: 500",
            "finalizer on",
            "connect: POST /connectors",
            "delete logic: reset offsets, DELETE /connectors/orders",
            "finalizer off",
        ]


# --- 3. the delete logic in the resource's own key --------------------------------------------------


async def test_the_delete_logic_waits_for_the_resource_s_pass_in_flight() -> None:
    """The attack: the deletion had a key of its own, so a deletion arriving while the resource's
    pass was between two Connect writes (its stop and its offsets PATCH, or a create) ran the
    delete logic at once beside it, under the same fence and claim (nothing told them apart);
    the pass then wrote to Connect after the delete logic had deleted the connector. Now the
    deletion is the resource's own key, which the queue never hands to two workers: with eight
    workers free, the delete logic starts only once the pass ended."""
    journal: list[str] = []
    in_pass, go_on = asyncio.Event(), asyncio.Event()

    async def reconcile(namespace: str, name: str) -> Outcome:
        journal.append("pass: PUT /connectors/orders/stop")
        in_pass.set()
        await go_on.wait()
        journal.append("pass: PATCH /connectors/orders/offsets")
        return Outcome()

    async def run(plural: str, namespace: str, name: str, body: dict[str, Any], give_up: bool) -> str:
        journal.append("delete logic: DELETE /connectors/orders")
        return "deleted"

    async def release(plural: str, namespace: str, name: str, finalizers: set[str]) -> None:
        journal.append("finalizer off")

    made = Controller(
        watch_only(),
        {CONNECTORS: reconcile},
        drift_interval=DRIFT,
        workers=8,  # the default: 4 passes per Connect cluster at once
        deletions=Deletions(run=run, release=release),
    )
    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, connector(1, finalizers=[FINALIZER]))
        await asyncio.wait_for(in_pass.wait(), 1)
        made.observe(CONNECTORS, NS, NAME, connector(2, finalizers=[FINALIZER], deleting=True))
        await asyncio.sleep(0.2)
        assert journal == ["pass: PUT /connectors/orders/stop"], "the delete logic ran beside the pass"
        go_on.set()
        assert await until(lambda: "finalizer off" in journal)
    finally:
        await made.stop()
    assert journal == [
        "pass: PUT /connectors/orders/stop",
        "pass: PATCH /connectors/orders/offsets",
        "delete logic: DELETE /connectors/orders",
        "finalizer off",
    ]


# --- 4. a relabel cancels the pass under the old cluster's Lease ------------------------------------


async def test_a_relabelled_resource_s_pass_under_the_old_cluster_s_lease_is_cancelled() -> None:
    """The attack: a KafkaConnector moved from ConnectCluster ``a`` (whose Lease r1 holds) to
    ``b`` (r2's) while r1's pass on it ran. r1 forgot the key but let the pass run on, under a
    fence that stayed valid (r1 still holds ``a``), while r2 started a pass of the same resource
    under ``b``'s: two passes of one resource, each under a valid fence, only the watched claim
    between them. Now r1's watch event of the relabel cancels its pass; r2's pass runs alone.

    (Until r1's watch delivers the relabel, the claim, ``status.claimedBy``, stands between the
    two: once r2 has claimed the resource, r1's conditional status writes fail, and its Connect
    writes are refused as soon as its watch shows that claim.)"""
    a, b = clusters_of_two_shards()
    store, clock = FakeLeases(), FakeClock()
    store.seed_released(a)
    store.seed_released(b)
    journal: list[str] = []
    fences: dict[str, fencing.Fence | None] = {}

    def replica(identity: str, cluster: tuple[str, str]) -> tuple[Controller, LeaseKeeper]:
        async def reconcile(namespace: str, name: str) -> Outcome:
            if name != NAME:
                return Outcome()
            fences[identity] = fencing.current()
            journal.append(f"{identity}: pass started")
            try:
                await asyncio.Event().wait()  # between two of its Connect writes
            except asyncio.CancelledError:
                journal.append(f"{identity}: pass cancelled")
                raise
            return Outcome()

        made = Controller(
            watch_only(), {CONNECTORS: reconcile}, drift_interval=DRIFT, workers=2, shard=Shard(owner_of(cluster, 2), 2)
        )
        return made, lease_keeper_for(made, store.replica(), identity, clock=clock, timings=SLOW)

    r1, k1 = replica("r1", a)
    r2, k2 = replica("r2", b)
    r1.observe(CONNECTORS, NS, NAME, connector(1, a[1]))
    other = connector(1, b[1])
    other["metadata"]["name"] = "payments"
    r2.observe(CONNECTORS, NS, "payments", other)  # r2 wants b for a resource of its own
    await k1.tick()
    await k2.tick()
    assert k1.holds(a) and k2.holds(b)
    r1.start()
    r2.start()
    try:
        assert await until(lambda: journal == ["r1: pass started"])
        moved = connector(2, b[1])
        r1.observe(CONNECTORS, NS, NAME, moved)  # each replica's watch delivers the relabel
        assert await until(lambda: "r1: pass cancelled" in journal)
        r2.observe(CONNECTORS, NS, NAME, moved)
        assert await until(lambda: "r2: pass started" in journal)
        first, second = fences["r1"], fences["r2"]
        assert first is not None and first.holder.startswith("r1/") and first.valid()  # a's Lease: still r1's
        assert second is not None and second.holder.startswith("r2/") and second.valid()
        assert journal == ["r1: pass started", "r1: pass cancelled", "r2: pass started"]
        assert not r1.queue.has((CONNECTORS, NS, NAME)) and not r1.owns((CONNECTORS, NS, NAME))
    finally:
        await r1.stop()
        await r2.stop()


# --- 5. FencedOff with the Lease still held ---------------------------------------------------------


@pytest.mark.parametrize("lease", ["still-held", "term-ended"])
async def test_fenced_off_requeues_the_key_while_the_lease_is_still_held(
    lease: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the worker took every ``FencedOff`` for "the Lease went to another replica"
    and dropped the key, no requeue, no drift timer. But a pass is also fenced off while its
    replica holds the Lease: its claim's conditional write finds ``claimedBy`` naming a term it
    never read (its watch one claim behind at a hand-over; see the next test). Nothing then
    brought the key back (a status-only event does not change what the resource asks for): the
    reset request stayed pending for ever. Now the key comes back after its back-off while this
    replica still holds the Lease, and the pass that follows ends the request; with the term
    ended but the Lease not dropped yet, the key is kept (never lost) until the keeper's next look
    decides: here it takes a new term, and the pass runs under it."""
    monkeypatch.setattr("connect_offsets.controller.queue.BASE_DELAY_S", BACK_OFF)
    store, clock = FakeLeases(), FakeClock()
    store.seed_released((NS, "local"))
    fences: list[fencing.Fence | None] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        fences.append(fencing.current())
        if len(fences) == 1:
            if lease == "term-ended":
                clock.now += SLOW.renew_deadline  # no renewal in time: the term is over
            raise fencing.FencedOff("connectors team-a/orders is claimed by 'r0/2' now, not 'r1/1'")
        return Outcome()

    made = Controller(watch_only(), {CONNECTORS: reconcile}, drift_interval=DRIFT, workers=1)
    keeper = lease_keeper_for(made, store, "r1", clock=clock, timings=SLOW)
    made.observe(CONNECTORS, NS, NAME, connector(1))
    made.start()  # the keeper's first look takes the Lease and queues the key; its next is hours away
    try:
        assert await until(lambda: len(fences) == 1)
        status_only = connector(2)
        status_only["status"] = {"claimedBy": "r0/2"}
        made.observe(CONNECTORS, NS, NAME, status_only)  # the other claim arrives: nothing new asked
        if lease == "still-held":
            assert await until(lambda: len(fences) == 2, timeout=20 * BACK_OFF)
            again = fences[1]
            assert again is not None and again.valid() and again.holder == "r1/1"
            assert keeper.holds((NS, "local"))
        else:
            await asyncio.sleep(10 * BACK_OFF)
            assert len(fences) == 1  # no pass under a term that ended
            # Kept (never lost) until the keeper decides: its next look drops the Lease, and the
            # key goes with it, for the next holder to check.
            assert made.queue.has((CONNECTORS, NS, NAME))
            await keeper.tick()  # drops the term; the Lease still names r1, so it takes a new one
            assert await until(lambda: len(fences) == 2)
            first, again = fences
            assert first is not None and again is not None and again.valid() and again.holder != first.holder
    finally:
        await made.stop()


async def test_a_legit_holder_fenced_off_by_a_cache_one_claim_behind_ends_the_request_on_its_next_pass() -> None:
    """What triggers the previous test in the N-writer simulation (the trigger is still there,
    and cannot go: a watch may lag): ``a`` holds the Lease, re-acquires it in a new term (the API
    server silent past its renew deadline), claims the resource in that term, stops the connector
    for a reset and is stopped (SIGTERM: its Lease released). ``b``'s watch is behind (``a``'s
    new claim not delivered): ``b`` takes the released Lease at once, its pass reads claimedBy
    ``a_sim/0`` and its claim's conditional write finds ``a_sim/1``, outside what it read and its
    own term: fenced off, although ``b`` holds the Lease. So the controller requeues the key (the
    previous test), and that pass, from the re-read claim, ends the request: the offsets reset
    and the connector resumed once each, the stop not repeated."""
    from tests.replica_simulation import NAME as SIM_NAME
    from tests.replica_simulation import TIMINGS, connector_body, replica_world
    from tests.simulation import NS as SIM_NS

    local = (SIM_NS, "local")
    async with replica_world() as world:
        world.kube.put_resource(CONNECTORS, connector_body(SIM_NAME))
        a = world.add("a", Shard(), 0.0)
        await a.tick()
        await world.advance(TIMINGS.duration)
        b = world.add("b", Shard(), 0.0)
        await world.settle([(CONNECTORS, SIM_NAME)])
        resource = world.kube.resources[(CONNECTORS, SIM_NS, SIM_NAME)]
        assert resource["status"]["claimedBy"] == "a_sim/0"

        b.gate.frozen = True  # b's watch lags from here (its keeper idles: nothing to acquire)
        world.leases.down = True
        await world.advance(TIMINGS.renew_deadline + TIMINGS.retry_period)
        world.leases.down = False
        await a.tick()  # the record still names a: re-acquired at once, a new term
        fence = a.keeper.fence(local)
        assert fence is not None and fence.holder == "a_sim/1"
        world.kube.annotate(CONNECTORS, SIM_NS, SIM_NAME, connector_offsets="reset", stop_connector="true")
        await a.check(CONNECTORS, SIM_NAME)  # claims a_sim/1, stops the connector
        assert resource["status"]["claimedBy"] == "a_sim/1"
        await a.keeper.release_all()  # a stops (SIGTERM)

        b.gate.frozen = False  # b runs on; its watch has not caught up yet
        await b.tick()
        assert b.keeper.holds(local)
        assert await b.check(CONNECTORS, SIM_NAME) == "fenced off"
        assert b.keeper.holds(local), "still b's key: the controller requeues it"
        await world.settle([(CONNECTORS, SIM_NAME)])  # the requeued pass, and the ones it asks for
        assert b.keeper.holds(local) and b.fenced_off == 1

        resource = world.kube.resources[(CONNECTORS, SIM_NS, SIM_NAME)]
        assert "connect-offsets.io/connector-offsets" not in resource["metadata"]["annotations"]
        assert resource["status"]["lastOffsetsOperation"]["result"] == "Succeeded"
        assert resource["status"]["claimedBy"] == "b_sim/2"
        writes = [f"{r.method} {r.path}" for r in world.connect.requests if r.method != "GET"]
        assert writes == [
            "POST /connectors",
            "PUT /connectors/orders/stop",
            "DELETE /connectors/orders/offsets",
            "PUT /connectors/orders/resume",
        ]


# --- 6. a Lease released only after the cancelled passes ended --------------------------------------


async def test_a_stopping_replica_releases_its_lease_only_after_its_passes_ended() -> None:
    """The review's finding: on shutdown the workers and the Lease keeper were cancelled together.
    Releasing, the keeper cancelled the passes once more and released the Lease in the same
    breath: a cancelled pass's last write (its cleanup) was cut off mid-flight, where it may
    still reach Connect or the API server, or, had it been slower, went out after the release;
    a released Lease is taken at the next replica's next look, so the new holder could meet it.
    Now the workers stop first (their passes cancelled, their last writes answered under a term
    that still holds, ended), and only then is the Lease released."""
    journal: list[str] = []
    store, clock = JournaledLeases(journal), FakeClock()
    store.seed_released((NS, "local"))
    made = Controller(watch_only(), {CONNECTORS: slow_to_end(journal)}, drift_interval=DRIFT, workers=2)
    lease_keeper_for(made, store, "r1", clock=clock, timings=SLOW)
    made.observe(CONNECTORS, NS, NAME, connector(1))
    made.start()  # the keeper's first look takes the released Lease
    try:
        assert await until(lambda: journal == ["pass started"])
    finally:
        await made.stop()
    assert journal == ["pass started", "pass cancelled", "last write answered", "pass ended", "Lease released"]
    assert store.holder((NS, "local")) == ""


@pytest.mark.parametrize("way", ["given-up", "released"])
async def test_a_lease_given_up_or_released_goes_only_after_the_passes_under_it_ended(way: str) -> None:
    """The same when the keeper lets a Lease go by itself, which the next holder may then take at
    once: ``given-up``, at a look, because nothing of its shard is bound to the cluster any more
    (here the resource moved to another shard's cluster, which cancelled its pass); ``released``,
    when the keeper stops while a pass still runs (one that outlived ``Controller.stop``'s wait
    for the workers). The pass has ended before the Lease goes (``LeaseKeeper.drain``); what it
    still did after the Lease was let go ran under a term that had ended, past no fence."""
    a, b = clusters_of_two_shards()
    journal: list[str] = []
    store, clock = JournaledLeases(journal), FakeClock()
    store.seed_released(a)
    made = Controller(
        watch_only(),
        {CONNECTORS: slow_to_end(journal)},
        drift_interval=DRIFT,
        workers=2,
        shard=Shard(owner_of(a, 2), 2),
    )
    keeper = lease_keeper_for(made, store, "r1", clock=clock, timings=SLOW)
    made.observe(CONNECTORS, NS, NAME, connector(1, a[1]))
    await keeper.tick()
    assert keeper.holds(a)
    made.start()
    try:
        assert await until(lambda: journal == ["pass started"])
        if way == "given-up":
            made.observe(CONNECTORS, NS, NAME, connector(2, b[1]))
            await keeper.tick()  # a is wanted no more: given up (deleted, nothing refers to it)
        else:
            await keeper.release_all()
        assert not keeper.holds(a)
        let_go = journal[-1]
        assert let_go == {"given-up": "Lease deleted", "released": "Lease released"}[way], journal
        assert journal[:2] == ["pass started", "pass cancelled"] and journal.index("pass ended") < len(journal) - 1
    finally:
        await made.stop()


async def test_a_deletion_counts_its_own_attempts_not_the_resource_s_failed_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Second attacker pass: the delete logic runs in the resource's own key, whose back-off the
    resource's failed passes had raised; counted there, the first deletion attempt after a few
    minutes of Connect outage was told to give up (a reset left undone, the finalizer off). It has
    its own count: the first attempt never gives up."""
    monkeypatch.setattr("connect_offsets.controller.queue.BASE_DELAY_S", 0.001)
    passes: list[int] = []
    attempts: list[bool] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        passes.append(1)
        return Outcome(transient_error="Connect unreachable: ConnectTimeout")

    async def run(plural: str, namespace: str, name: str, body: dict[str, Any], give_up: bool) -> str:
        attempts.append(give_up)
        return "gave up" if give_up else "done"

    async def release(plural: str, namespace: str, name: str, finalizers: set[str]) -> None:
        return None

    made = Controller(
        watch_only(),
        {CONNECTORS: reconcile},
        drift_interval=DRIFT,
        workers=1,
        deletions=Deletions(run=run, release=release),
    )
    made.start()
    try:
        made.observe(CONNECTORS, NS, NAME, connector(1, finalizers=[FINALIZER]))
        assert await until(lambda: len(passes) >= 7)  # ~3 min of outage at the real 2..60 s back-off
        made.observe(CONNECTORS, NS, NAME, connector(2, finalizers=[FINALIZER], deleting=True))
        assert await until(lambda: attempts)
    finally:
        await made.stop()
    assert attempts[0] is False, f"the first attempt after {len(passes)} failed passes gave up"


async def test_a_kafka_write_in_a_thread_lands_before_the_lease_is_released(monkeypatch: pytest.MonkeyPatch) -> None:
    """Second attacker pass: a Kafka admin write runs in a thread that cancelling its pass does
    not stop (librdkafka holds DeleteTopics until the controller is known). The cancelled pass now
    ends only once the thread did, and the Lease is released after that, never before: the next
    holder's work (re-creating the offset-syncs topic) cannot be undone by our late write."""
    journal: list[str] = []
    entered, gate = threading.Event(), threading.Event()

    class Future:
        def result(self, timeout: float | None = None) -> None:
            entered.set()
            gate.wait(10)  # librdkafka holds the request until the controller is known
            journal.append("DeleteTopics landed on the broker")

    class Admin:
        def delete_topics(self, topics: list[str], **_: Any) -> dict[str, Future]:
            return {t: Future() for t in topics}

    monkeypatch.setattr(kafka_client, "_admin", lambda settings: Admin())

    async def reconcile_a(namespace: str, name: str) -> Outcome:
        journal.append("a: pass, delete offset-syncs")
        await kafka_client.delete_topic({"bootstrap.servers": "k:9092"}, "mm2-offset-syncs.b.internal", namespace=NS)
        journal.append("a: delete answered")
        return Outcome()

    async def reconcile_b(namespace: str, name: str) -> Outcome:
        journal.append("b: pass (redoes the reset, resumes the mirror: offset-syncs re-created)")
        return Outcome()

    store, clock = JournaledLeases(journal), FakeClock()
    store.seed_released((NS, "local"))
    a = Controller(watch_only(), {CONNECTORS: reconcile_a}, drift_interval=DRIFT, workers=2)
    lease_keeper_for(a, store, "a", clock=clock, timings=SLOW)
    b = Controller(watch_only(), {CONNECTORS: reconcile_b}, drift_interval=DRIFT, workers=2)
    kb = lease_keeper_for(b, store.replica(), "b", clock=clock, timings=SLOW)
    a.observe(CONNECTORS, NS, NAME, connector(1))
    b.observe(CONNECTORS, NS, NAME, connector(1))
    a.start()
    try:
        assert await until(lambda: entered.is_set())
    finally:
        stopping = asyncio.ensure_future(a.stop())
        await asyncio.sleep(0.2)
        gate.set()  # Kafka answers while the replica stops
        await stopping  # SIGTERM: workers first, then the Lease released
    await kb.tick()  # b's next look: the released Lease is b's at once
    b.start()
    try:
        assert await until(lambda: any(x.startswith("b: pass") for x in journal))
    finally:
        await b.stop()
    landed = journal.index("DeleteTopics landed on the broker")
    assert landed < journal.index("Lease released"), journal
    assert landed < journal.index("b: pass (redoes the reset, resumes the mirror: offset-syncs re-created)"), journal


async def test_a_slow_renewal_does_not_hold_back_the_next_look() -> None:
    """Second attacker pass: one Lease call answered late but in bound (up to 6 s) held the whole
    tick, and a Lease not due in that tick passed its renew deadline before the next look (lost,
    its passes cancelled, with every call succeeding). Each renewal now runs in a task of its own
    and a tick waits for them at most a retry period (real time, short timings)."""
    timings = LeaseTimings(duration=3.0, renew_deadline=1.0, retry_period=0.2)
    store = FakeLeases()
    a, b = (NS, "a"), (NS, "b")
    store.seed_released(a)
    store.seed_released(b)
    lost: list[set[tuple[str, str]]] = []
    answer = asyncio.Event()
    slow_name = lease_name(store.prefix, b)
    plain_replace = store.replace

    async def replace(record: LeaseRecord, write: LeaseWrite) -> LeaseRecord:
        if record.name == slow_name and record.holder == write.holder == "r1" and not answer.is_set():
            await answer.wait()  # b's renewal: the API server answers late
        return await plain_replace(record, write)

    store.replace = replace  # type: ignore[method-assign]
    keeper = LeaseKeeper(
        store,
        "r1",
        wanted=lambda: {a, b},
        exists=lambda c: True,
        on_acquired=lambda c: None,
        on_lost=lost.append,
        timings=timings,
    )
    await keeper.tick()
    assert keeper.holds(a) and keeper.holds(b)
    started = time.monotonic()
    while time.monotonic() - started < 2.5 * timings.renew_deadline:  # b's renewal hangs meanwhile
        await keeper.tick()
        await asyncio.sleep(timings.retry_period)
    assert keeper.holds(a), "a, renewed on time in its own task, is still held"
    assert {a} not in lost
    answer.set()
    await keeper.release_all()
