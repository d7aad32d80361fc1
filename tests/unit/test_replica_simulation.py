"""Exactly once across replicas, by enumeration (issue 44): every write boundary of every flow, every
failure kind, 2-4 writers, both shard generations of a resize, skewed clocks.

The replica holding the cluster's Lease (``a``) is stopped before its N-th write of the flow (its
gate, ``tests/replica_simulation.py``), for every N the flow has, and then:

* ``take-over``: frozen past the Lease duration; another replica takes the Lease over and finishes
  the request; ``a`` wakes and its pass goes on from where it stopped;
* ``take-over at the wire``: the same, with ``a`` frozen at its N-th Connect write *after* the
  fence's checks, while the request waits for a connection (only the last look right before the
  first byte, ``fencing.at_the_wire``, stands between it and a repeated write);
* ``pause``: frozen for half the renew deadline: nobody takes over; ``a`` wakes and finishes;
* ``lease-deleted``: the Lease is deleted there (a person, a restore of etcd) and ``a`` goes on;
* ``api-silent``: the API server does not answer Lease calls for longer than the renew deadline
  while ``a`` waits there, then answers again;
* ``fast-clock``: the other replicas' clocks jump a Lease duration ahead while ``a`` waits there
  briefly: they take the Lease over while ``a``'s own clock says its term still holds, so only
  the claim on the resource (``status.claimedBy``, its conditional writes, the watched claim
  before a Connect write) stops ``a``.

Writers: two or three replicas of one shard, and the two generations of a shard-count change
2 -> 3 (the old and the new owner of the cluster, with or without replicas of other shards).
Every replica's wall clock is skewed (hours), which must not matter.

Invariants after everything settled: each of the flow's Connect writes reached the worker exactly
once (a stop, the offsets change, a resume, a connector deletion), the request ended (annotation
removed, Succeeded, nothing pending) or the deletion ran its delete logic and the resource is gone,
and status names as ``claimedBy`` the last replica that wrote a change to it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from connect_offsets.controller import Shard, owner_of
from connect_offsets.vocabulary import CONNECTORS
from tests.replica_simulation import (
    CM,
    NAME,
    TIMINGS,
    Replica,
    World,
    acting_as,
    connector_body,
    document,
    position,
    replica_world,
)
from tests.simulation import EXPLORED, NS

pytestmark = pytest.mark.unit

KINDS = ("take-over", "take-over at the wire", "pause", "lease-deleted", "api-silent", "fast-clock")
RESOURCES = [(CONNECTORS, NAME)]


def writers() -> dict[str, list[tuple[str, Shard, float]]]:
    """The replicas of each case: name, shard, wall-clock skew (s); ``a`` holds the Lease first."""
    local = (NS, "local")
    old, new = owner_of(local, 2), owner_of(local, 3)
    return {
        "two of one shard": [("a", Shard(), -3600.0), ("b", Shard(), 3600.0)],
        "three of one shard": [("a", Shard(), -3600.0), ("b", Shard(), 3600.0), ("c", Shard(), 7.0)],
        "resize 2 -> 3": [("a", Shard(old, 2), -3600.0), ("b", Shard(new, 3), 3600.0)],
        "resize 2 -> 3, four replicas": [
            ("a", Shard(old, 2), -3600.0),
            ("b", Shard(new, 3), 3600.0),
            ("c", Shard((new + 1) % 3, 3), 0.0),
            ("d", Shard(1 - old, 2), 7.0),
        ],
    }


@dataclass(frozen=True)
class ReplicaFlow:
    name: str
    trigger: Callable[[World], Awaitable[None]]
    #: The Connect writes the flow makes, each exactly once: (method, path suffix).
    writes: tuple[tuple[str, str], ...]
    deletes: bool = False


async def _alter(world: World) -> None:
    await _document(world)
    world.kube.annotate(CONNECTORS, NS, NAME, connector_offsets="alter", stop_connector="true")


async def _reset(world: World) -> None:
    world.kube.annotate(CONNECTORS, NS, NAME, connector_offsets="reset", stop_connector="true")


async def _delete(world: World) -> None:
    world.kube.delete_resource(CONNECTORS, NAME)


async def _document(world: World) -> None:
    world.faults.user = True
    try:
        await world.kube.create_configmap(
            NS, {"metadata": {"name": CM}, "data": {"offsets.json": document(position(6))}}
        )
    finally:
        world.faults.user = False


STOP = ("PUT", f"/connectors/{NAME}/stop")
RESUME = ("PUT", f"/connectors/{NAME}/resume")
FLOWS = [
    ReplicaFlow("alter --stop-connector", _alter, (STOP, ("PATCH", f"/connectors/{NAME}/offsets"), RESUME)),
    ReplicaFlow("reset --stop-connector", _reset, (STOP, ("DELETE", f"/connectors/{NAME}/offsets"), RESUME)),
    ReplicaFlow(
        "delete, offsetsOnDelete: reset",
        _delete,
        (STOP, ("DELETE", f"/connectors/{NAME}/offsets"), ("DELETE", f"/connectors/{NAME}")),
        deletes=True,
    ),
]


async def begin(world: World, cast: list[tuple[str, Shard, float]], flow: ReplicaFlow) -> Replica:
    """The replicas started, ``a`` holding the Lease, the connector RUNNING in Connect at 30; the
    flow asked. Returns ``a``."""
    spec: dict[str, Any] = {"offsetsOnDelete": "reset"} if flow.deletes else {}
    world.kube.put_resource(CONNECTORS, connector_body(NAME, **spec))
    first = world.add(*cast[0])
    await first.tick()  # no Lease: made now, worked on a duration later (someone may have held one)
    await world.advance(TIMINGS.duration)
    assert first.keeper.holds((NS, "local"))
    for name, shard, skew in cast[1:]:
        world.add(name, shard, skew)
    await world.settle(RESOURCES)
    world.connect.connectors[NAME].offsets = position(30)
    await flow.trigger(world)
    return first


async def run_case(flow: ReplicaFlow, cast: list[tuple[str, Shard, float]], kind: str, at: int) -> tuple[bool, World]:
    """One case; False when the flow made fewer than ``at`` writes in ``a`` (nothing to explore)."""
    async with replica_world() as world:
        a = await begin(world, cast, flow)
        seen = len(world.connect.requests)
        if kind == "lease-deleted":

            def delete_lease(count: int, what: str) -> None:
                if count == at:
                    world.leases.records.clear()

            a.gate.boundary = delete_lease
            a.gate.arm(None)
        else:
            a.gate.arm(at, at_wire=kind == "take-over at the wire")

        async def alone() -> None:
            """``a`` works (the others only look at the Leases) until the flow is done."""
            for _ in range(30):
                for plural, name in RESOURCES:
                    await a.check(plural, name)
                await world.advance(TIMINGS.retry_period)

        work = asyncio.create_task(alone())
        while not work.done() and not a.gate.frozen:
            await asyncio.sleep(0)
        if kind == "lease-deleted":
            await work
            reached = a.gate.count >= at
        elif not a.gate.frozen:
            await work
            return False, world
        else:
            reached = True
            if kind in ("take-over", "take-over at the wire"):
                await world.advance(TIMINGS.duration + 2 * TIMINGS.retry_period)
                assert world.holder() not in (None, a), "another replica took the Lease over"
                await world.settle(RESOURCES)
            elif kind == "pause":
                await world.advance(TIMINGS.renew_deadline / 2)
                assert world.holder() is a or world.holder() is None
            elif kind == "fast-clock":
                frozen_at = world.clock.now
                for other in world.replicas[1:]:
                    other.jump += TIMINGS.duration + TIMINGS.retry_period
                await world.advance(TIMINGS.retry_period)
                assert any(r.keeper.holds((NS, "local")) for r in world.replicas[1:]), "taken over early"
                await world.settle(RESOURCES)
                a.jump -= world.clock.now - frozen_at  # a's clock counted none of it
                assert a.keeper.holds((NS, "local")), "a's own clock: its term still holds"
            elif kind == "api-silent":
                world.leases.down = True
                await world.advance(TIMINGS.renew_deadline + TIMINGS.retry_period)
                world.leases.down = False
                await world.advance(TIMINGS.duration + 2 * TIMINGS.retry_period)
                await world.settle(RESOURCES)
            a.wake()
            await work
        if not reached:
            return False, world
        await world.settle(RESOURCES)
        check_invariants(world, flow, seen, f"{flow.name}, {kind} at write {at}: {a.gate.hit}")
        return True, world


def check_invariants(world: World, flow: ReplicaFlow, seen: int, case: str) -> None:
    sent = Counter((r.method, r.path) for r in world.connect.requests[seen:] if r.method != "GET")
    assert sent == Counter(flow.writes), f"{case}: Connect writes {sorted(sent.items())}"
    if flow.deletes:
        assert (CONNECTORS, NS, NAME) not in world.kube.resources, f"{case}: the resource still waits"
        assert [d for d in world.deletions if d[1] == NAME], f"{case}: no delete logic ran"
        return
    body = world.kube.resources[(CONNECTORS, NS, NAME)]
    annotations = body["metadata"].get("annotations") or {}
    assert "connect-offsets.io/connector-offsets" not in annotations, f"{case}: the request never ended"
    status = body["status"]
    assert status["lastOffsetsOperation"]["result"] == "Succeeded", f"{case}: {status['lastOffsetsOperation']}"
    assert "pendingOffsetsOperation" not in status, f"{case}: {status['pendingOffsetsOperation']}"
    # The claim names the last replica that wrote a status change: a holder that finds the work
    # done has nothing to write, and a claim alone is never written (``write_status``).
    assert world.holder() is not None, f"{case}: nobody holds the Lease"
    assert any(status["claimedBy"].startswith(r.identity) for r in world.replicas), f"{case}: {status['claimedBy']}"
    assert world.connect.connectors[NAME].state == "RUNNING", f"{case}: left {world.connect.connectors[NAME].state}"


@pytest.mark.parametrize("case", list(writers()))
@pytest.mark.parametrize("flow", FLOWS, ids=lambda f: f.name)
async def test_every_write_boundary_every_failure_every_writer_count(
    flow: ReplicaFlow, case: str, record_property: Callable[[str, object], None]
) -> None:
    cast = writers()[case]
    started = time.monotonic()
    runs = fenced = 0
    for kind in KINDS:
        for at in range(1, 40):
            explored, world = await run_case(flow, cast, kind, at)
            if not explored:
                break
            runs += 1
            fenced += sum(r.fenced_off for r in world.replicas)
    assert runs >= 4 * len(KINDS), f"{flow.name}: only {runs} cases"
    record_property(
        EXPLORED,
        f"replicas, {flow.name}, {case}: {runs} cases x {len(cast)} writers, "
        f"{fenced} passes fenced off, {time.monotonic() - started:.1f}s",
    )


async def test_a_woken_replica_is_fenced_off_before_its_next_connect_write() -> None:
    """The scenario of issue 44 in one run: ``a`` frozen right before it stops the connector, ``b``
    takes over and finishes; woken, ``a``'s pass ends at the fence: one stop, not two."""
    flow, cast = FLOWS[0], writers()["two of one shard"]
    for at in range(1, 40):
        explored, world = await run_case(flow, cast, "take-over", at)
        assert explored, "the flow stops the connector"
        a = world.replicas[0]
        if a.gate.hit is not None and a.gate.hit.endswith(f"/connectors/{NAME}/stop"):
            break
    assert a.fenced_off == 1, a.fenced_off
    stops = [r for r in world.connect.requests if (r.method, r.path) == STOP]
    assert len(stops) == 1, stops


# --- interleavings ------------------------------------------------------------------------------------


class ReplicaInterleavings(RuleBasedStateMachine):
    """Three replicas (two of one shard, one of the next shard count), the clock, freezes at any
    write, Leases deleted, a silent API server, clocks jumping ahead, and requests, in any order,
    against one RUNNING KafkaConnector.

    Invariants: never more stops, resumes or offsets changes than requests asked; after ``settle``
    (every replica woken, time moving on) every request has ended, once each.
    """

    runs = 0
    steps = 0
    fenced = 0

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.context = replica_world()
        self.world = self.loop.run_until_complete(self.context.__aenter__())
        self.requests = 0
        self.tasks: dict[int, asyncio.Task[str]] = {}
        ReplicaInterleavings.runs += 1

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        ReplicaInterleavings.fenced += sum(r.fenced_off for r in self.world.replicas)
        for task in self.tasks.values():
            task.cancel()
        self.loop.run_until_complete(self.context.__aexit__(None, None, None))
        self.loop.close()

    @initialize()
    def start(self) -> None:
        local = (NS, "local")
        cast = [("a", Shard(), -3600.0), ("b", Shard(), 3600.0), ("c", Shard(owner_of(local, 3), 3), 7.0)]
        self.run(begin(self.world, cast, ReplicaFlow("none", _document, ())))

    def replica(self, index: int) -> Replica:
        return self.world.replicas[index % len(self.world.replicas)]

    async def _until_frozen_or_done(self, index: int) -> None:
        """Run the loop until the replica's pass is done or frozen at its gate (a task the pass
        started, a clean-up after its answer, may be the one frozen: then the pass is done)."""
        task = self.tasks.get(index)
        replica = self.replica(index)
        if task is None:
            for _ in range(100):
                await asyncio.sleep(0)
            return
        while not task.done() and not replica.gate.frozen:
            await asyncio.sleep(0)
        if task.done():
            del self.tasks[index]
            task.result()

    def pending(self) -> bool:
        body = self.world.kube.resources[(CONNECTORS, NS, NAME)]
        return "connect-offsets.io/connector-offsets" in (body["metadata"].get("annotations") or {})

    @precondition(lambda self: not self.pending())
    @rule(operation=st.sampled_from(["alter", "reset"]))
    def ask(self, operation: str) -> None:
        self.world.kube.annotate(CONNECTORS, NS, NAME, connector_offsets=operation, stop_connector="true")
        self.requests += 1

    @rule(index=st.integers(0, 2))
    def check(self, index: int) -> None:
        if index % 3 in self.tasks:
            return  # frozen mid-pass
        self.tasks[index % 3] = self.loop.create_task(self.replica(index).check(CONNECTORS, NAME))
        self.run(self._until_frozen_or_done(index % 3))

    @rule(index=st.integers(0, 2), at=st.integers(1, 6))
    def freeze(self, index: int, at: int) -> None:
        """The replica stops before its at-th write from now (a GC pause, SIGSTOP)."""
        gate = self.replica(index).gate
        if not gate.frozen:
            gate.at = gate.count + at

    @rule(index=st.integers(0, 2))
    def wake(self, index: int) -> None:
        replica = self.replica(index)
        if replica.gate.frozen:
            replica.gate.at = None
            replica.wake()
            self.run(self._until_frozen_or_done(index % 3))

    @rule(at=st.integers(1, 8), seconds=st.sampled_from([4.0, 17.0, 30.0]), others=st.integers(0, 3))
    def stall(self, at: int, seconds: float, others: int) -> None:
        """The holder stops before its at-th write of a pass; time passes, the others work; it
        wakes (the issue's frozen leader, at any point of any pass)."""
        holder = self.world.holder()
        if holder is None:
            return
        index = self.world.replicas.index(holder)
        if index in self.tasks:
            return
        holder.gate.at = holder.gate.count + at
        self.check(index)
        if not holder.gate.frozen:
            holder.gate.at = None
            return
        self.advance(seconds)
        for _ in range(others):
            for other in range(len(self.world.replicas)):
                if other != index:
                    self.check(other)
        self.wake(index)

    @rule(seconds=st.sampled_from([1.0, 2.0, 5.0, 11.0, 17.0]))
    def advance(self, seconds: float) -> None:
        self.run(self.world.advance(seconds))

    @rule()
    def delete_leases(self) -> None:
        self.world.leases.records.clear()

    @rule(seconds=st.sampled_from([3.0, 12.0]))
    def api_silent(self, seconds: float) -> None:
        self.world.leases.down = True
        self.run(self.world.advance(seconds))
        self.world.leases.down = False

    @rule(index=st.integers(0, 2), seconds=st.sampled_from([5.0, 17.0]))
    def clock_jumps(self, index: int, seconds: float) -> None:
        self.replica(index).jump += seconds

    @rule()
    def settle(self) -> None:
        """Everyone woken, time moving on: every request ends, each write once per request."""
        for replica in self.world.replicas:
            replica.gate.at = None  # a freeze armed but not reached yet would stop the settling
        for index in list(self.tasks):
            self.wake(index)
        for index in list(self.tasks):
            self.run(self._until_frozen_or_done(index))
        self.run(self.world.settle(RESOURCES))
        assert not self.pending(), "a request never ended"
        status = self.world.kube.resources[(CONNECTORS, NS, NAME)].get("status") or {}
        assert "pendingOffsetsOperation" not in status, status
        sent = self.sent()
        assert sent[STOP] == sent[RESUME] == self.requests, (sorted(sent.items()), self.requests)
        assert self.world.connect.connectors[NAME].state == "RUNNING"

    def sent(self) -> Counter[tuple[str, str]]:
        return Counter((r.method, r.path) for r in self.world.connect.requests if r.method != "GET")

    @invariant()
    def count_steps(self) -> None:
        ReplicaInterleavings.steps += 1

    @invariant()
    def never_more_writes_than_requests(self) -> None:
        if not hasattr(self, "world"):
            return
        sent = self.sent()
        changes = sent[("PATCH", f"/connectors/{NAME}/offsets")] + sent[("DELETE", f"/connectors/{NAME}/offsets")]
        assert max(sent[STOP], sent[RESUME], changes) <= self.requests, (sorted(sent.items()), self.requests)


def test_replica_interleavings(request: pytest.FixtureRequest) -> None:
    started = time.monotonic()
    ReplicaInterleavings.runs = ReplicaInterleavings.steps = ReplicaInterleavings.fenced = 0
    test = ReplicaInterleavings.TestCase
    test.settings = settings(
        max_examples=300, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck)
    )
    test().runTest()
    request.node.user_properties.append(
        (
            EXPLORED,
            f"replica interleavings: {ReplicaInterleavings.runs} runs, {ReplicaInterleavings.steps} steps, "
            f"{ReplicaInterleavings.fenced} passes fenced off, {time.monotonic() - started:.1f}s",
        )
    )
    assert ReplicaInterleavings.runs >= 300
    assert ReplicaInterleavings.fenced > 0  # the machine reached what it is for


async def test_a_replica_whose_clock_ran_slow_does_not_take_a_claim_back() -> None:
    """``b``'s clock ran fast, so it took the Lease over and claimed the resource while ``a``'s own
    clock still says its term holds. ``a`` then reads ``b``'s claim: before replacing another
    replica's claim it asks the API server, which names ``b``, and its pass ends there; ``b``'s
    request goes on alone, each write once (without that question ``a`` took the claim back and
    did a step of ``b``'s request)."""
    flow = FLOWS[1]
    async with replica_world() as world:
        a = await begin(world, writers()["two of one shard"], flow)
        b = world.replicas[1]
        seen = len(world.connect.requests)
        b.jump += TIMINGS.duration + TIMINGS.retry_period
        await b.tick()
        local = (NS, "local")
        assert a.keeper.holds(local) and b.keeper.holds(local), "both believe they hold it"
        assert (await b.check(CONNECTORS, NAME)).startswith("checked")  # b claims and stops
        claimed = world.kube.resources[(CONNECTORS, NS, NAME)]["status"]["claimedBy"]
        assert claimed.startswith(b.identity)
        assert await a.check(CONNECTORS, NAME) == "fenced off"
        assert world.kube.resources[(CONNECTORS, NS, NAME)]["status"]["claimedBy"] == claimed
        await world.settle(RESOURCES)
        check_invariants(world, flow, seen, "a slow clock")


async def _idle_take_over_by_a_fast_clock(world: World, flow: ReplicaFlow) -> tuple[Replica, Replica]:
    """``a`` settles the idle resource (its claim on it); ``b``'s clock runs fast, so ``b`` takes
    the Lease over while ``a``'s own clock says its term holds, and re-checks the idle resource,
    writing nothing (a claim alone is never written): the resource still names ``a``'s term."""
    a = await begin(world, writers()["two of one shard"], ReplicaFlow("idle", _document, (), deletes=flow.deletes))
    b = world.replicas[1]
    await world.settle(RESOURCES)
    assert world.kube.resources[(CONNECTORS, NS, NAME)]["status"]["claimedBy"].startswith(a.identity)
    b.jump += TIMINGS.duration + TIMINGS.retry_period
    await b.tick()
    local = (NS, "local")
    assert a.keeper.holds(local) and b.keeper.holds(local), "both believe they hold it"
    assert (await b.check(CONNECTORS, NAME)).startswith("checked")
    assert world.kube.resources[(CONNECTORS, NS, NAME)]["status"]["claimedBy"].startswith(a.identity)
    return a, b


async def test_a_stale_replica_reading_its_own_old_claim_writes_nothing_to_connect() -> None:
    """The attacker's case against claims not written at a take-over: ``a``'s term ended on the API
    server (``b`` holds the Lease) but not on ``a``'s slow clock, and the idle resource still says
    ``a``'s term. A request comes; ``a``'s pass must not write to Connect: its first Connect write
    writes the claim and asks the API server's Lease, which names ``b``."""
    async with replica_world() as world:
        a, _ = await _idle_take_over_by_a_fast_clock(world, FLOWS[1])
        await _reset(world)
        seen = len(world.connect.requests)
        assert await a.check(CONNECTORS, NAME) == "fenced off"
        assert [(r.method, r.path) for r in world.connect.requests[seen:] if r.method != "GET"] == []


@pytest.mark.parametrize("at", range(1, 12))
@pytest.mark.parametrize("flow", [FLOWS[1], FLOWS[2]], ids=lambda f: f.name)
async def test_a_stale_replica_frozen_mid_pass_after_an_idle_take_over_repeats_nothing(
    flow: ReplicaFlow, at: int
) -> None:
    """The same, with ``a``'s pass frozen at each of its writes while ``b`` carries the request
    out, then woken with its watch not yet showing ``b``'s claim: every Connect write once (two
    stops before the fix, for a reset and for a deletion with ``offsetsOnDelete: reset``)."""
    async with replica_world() as world:
        a, b = await _idle_take_over_by_a_fast_clock(world, flow)
        await flow.trigger(world)
        seen = len(world.connect.requests)
        a.gate.arm(at)
        task = asyncio.create_task(a.check(CONNECTORS, NAME))
        while not task.done() and not a.gate.frozen:
            await asyncio.sleep(0)
        if not task.done():
            frozen_at = world.clock.now
            for _ in range(3):
                await b.check(CONNECTORS, NAME)
                await world.advance(TIMINGS.retry_period)
            a.jump -= world.clock.now - frozen_at  # a's clock counted none of it
            a.wake()
        fenced = await task
        a.gate.arm(None)  # a's pass ended (before its at-th write, if it never froze): no more freezes
        await world.settle(RESOURCES)
        check_invariants(world, flow, seen, f"{flow.name}, a frozen at write {at} ({fenced})")


@pytest.mark.parametrize("lag", [1, 2, 3])  # status reads within the new term's hold (INHERITED_HOLD_S)
async def test_a_lease_released_at_a_rollout_and_taken_at_once_repeats_none_of_the_old_holders_changes(
    lag: int,
) -> None:
    """``a`` stops the connector for an alter, then stops itself (a rollout): it releases its Lease
    and ``b`` takes it at its next look, while Connect's status still shows RUNNING for ``lag``
    reads. ``b`` knows nothing of ``a``'s stop (that record was in ``a``'s memory): its term
    followed another, so it holds back stops and resumes while ``a``'s may not show yet, and every
    write still happens once (found by the attacker review of 7ddf1a7: the stop went out twice)."""
    flow, cast = FLOWS[0], writers()["two of one shard"]
    async with replica_world() as world:
        a = await begin(world, cast, flow)
        seen = len(world.connect.requests)
        world.connect.status_lag = lag
        for _ in range(3):
            await a.check(CONNECTORS, NAME)
            if any((r.method, r.path) == STOP for r in world.connect.requests[seen:]):
                break
        assert [r for r in world.connect.requests[seen:] if (r.method, r.path) == STOP], "a stopped it"
        with acting_as(a):
            await a.keeper.release_all()
        world.replicas.remove(a)
        await world.settle(RESOURCES)
        assert world.holder() is world.replicas[0], "b took the released Lease over"
        check_invariants(world, flow, seen, f"released with the status {lag} read(s) behind")
