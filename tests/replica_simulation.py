"""N writers: 2-4 operator replicas over one API server, one Connect worker, one Lease store and one
clock, each replica with its own watch cache, services and Lease keeper (issue 44).

Why: "exactly once across replicas" is promised for replicas that freeze (a long GC pause,
SIGSTOP, a frozen node) and wake after another took their Leases over, for Leases lost, and for
two shard counts running together during a resize; a real-stack test can reach a few of those
moments, this reaches every one. A replica's writes go through its *gate* first: armed at write N
(counted from the start of a flow), the replica stops there, before the write and its fence
check, as a frozen process stops between two of its steps. The driver then moves the clock, lets
the other replicas look at the Leases and work, and wakes the frozen one, whose pass goes on from
where it stopped.

What a replica runs is what the controller runs: per key, the pass under the fence of its cluster's
Lease (``fencing.acting_under(keeper.fence(cluster))``), the finalizer put on, the delete logic of
a resource being deleted, our finalizers taken off (``controller/core.py``). The Lease keeper is the
real one, on the simulation's clock; each replica's wall clock is skewed by its own offset, which
must change nothing (Leases are judged by each replica's own monotonic clock).

Shared by tests/unit/test_replica_simulation.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
import respx

from connect_offsets import fencing
from connect_offsets.clients.connect import CircuitBreaker
from connect_offsets.clients.kubernetes import KubernetesError, KubernetesUnavailable
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import FINALIZER, LeaseKeeper, LeaseTimings, Shard, awaiting_deletion, cluster_of
from connect_offsets.controller.sharding import needs_finalizer, stale_finalizers
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.planning.plan import STATE_CHANGE_SETTLE_S
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.reconcile.mirrormaker2 import MirrorMaker2Service
from connect_offsets.reconcile.status import fenced_pass_on
from connect_offsets.vocabulary import CLUSTERS, CONNECTORS
from tests.fakes import FakeClock, FakeKube, FakeLeases
from tests.reconcile_pass import checked
from tests.simulation import NS, URL, Faults, SimConnect, SimKafka, SimKube

T = TypeVar("T")

NAME, CM = "orders", "orders-offsets"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE = "/data/orders.txt"

#: client-go's timings, as the chart's defaults.
TIMINGS = LeaseTimings(duration=15.0, renew_deadline=10.0, retry_period=2.0)
EPOCH = datetime(2026, 11, 28, tzinfo=UTC)

_CURRENT: ContextVar[Replica | None] = ContextVar("simulated_replica", default=None)


@contextlib.contextmanager
def acting_as(replica: Replica | None) -> Iterator[None]:
    token = _CURRENT.set(replica)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@dataclass
class Gate:
    """Where one replica freezes: before its ``at``-th write since armed (None: never)."""

    at: int | None = None
    count: int = 0
    hit: str | None = None
    frozen: bool = False
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    #: Called at each write boundary with the count (a driver's action there, without freezing).
    boundary: Callable[[int, str], None] | None = None
    #: Count (and freeze at) Connect writes at the wire instead: past every fence check of
    #: ``before_write``, waiting for a connection, right before httpcore's last look
    #: (``fencing.at_the_wire``) and the first byte.
    at_wire: bool = False

    def arm(self, at: int | None, *, at_wire: bool = False) -> None:
        self.at, self.count, self.hit, self.frozen, self.at_wire = at, 0, None, False, at_wire
        self._release = asyncio.Event()

    async def passing(self, what: str, *, wire: bool = False) -> None:
        if wire != self.at_wire:
            return
        self.count += 1
        if self.boundary is not None:
            self.boundary(self.count, what)
        if self.count == self.at:
            self.hit, self.frozen = what, True
            await self._release.wait()

    def release(self) -> None:
        self.frozen = False
        self._release.set()


async def _gate(what: str, *, wire: bool = False) -> None:
    replica = _CURRENT.get()
    if replica is not None:
        await replica.gate.passing(what, wire=wire)


class SharedKube(SimKube):
    """One API server for every replica: the storage is shared, each replica reads through its own
    watch cache (the one of the replica running), and every change is delivered to the caches of
    the replicas that are not frozen (a frozen one catches up when woken). Writes pass the running
    replica's gate, then its fence, as ``KubernetesApi._write`` checks it."""

    def __init__(self, faults: Faults, replicas: list[Replica]) -> None:
        self._replicas = replicas
        self._own_cache = ResourceCache()
        #: Resources deleted for good, for the caches of replicas frozen meanwhile.
        self.gone: list[tuple[str, str, str]] = []
        super().__init__(faults)

    @property
    def cache(self) -> ResourceCache:
        replica = _CURRENT.get()
        return replica.cache if replica is not None else self._own_cache

    @cache.setter
    def cache(self, value: ResourceCache) -> None:
        self._own_cache = value

    def _deliver(self, plural: str, namespace: str, name: str) -> None:
        body = self.resources.get((plural, namespace, name))
        self._own_cache.observe(plural, namespace, name, body)
        for replica in self._replicas:
            if not replica.gate.frozen:
                replica.cache.observe(plural, namespace, name, body)

    async def _write(self, what: str, write: Callable[[], Awaitable[T]]) -> T:
        await _gate(f"kube: {what}")
        fencing.check(what)
        return await super()._write(what, write)

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any] | None:
        async def conditional() -> dict[str, Any] | None:
            obj = self.resources.get((plural, namespace, name))
            if (
                obj is not None
                and resource_version is not None
                and obj["metadata"]["resourceVersion"] != resource_version
            ):
                raise KubernetesUnavailable(f"patch status of {name}: 409 the object has been modified", 409)
            return await FakeKube.patch_status(self, plural, namespace, name, status)

        return await self._write(f"status of {name}", conditional)

    async def replace_finalizers(self, plural: str, namespace: str, name: str, add: str, remove: set[str]) -> None:
        async def change() -> None:
            obj = self.resources.get((plural, namespace, name))
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                return
            held = list(obj["metadata"].get("finalizers") or [])
            wanted = [f for f in held if f not in remove] + ([] if add in held else [add])
            obj["metadata"]["finalizers"] = wanted
            obj["metadata"]["resourceVersion"] = self._bump()
            self._deliver(plural, namespace, name)

        await self._write(f"finalizers of {name}", change)

    async def remove_finalizers(self, plural: str, namespace: str, name: str, remove: set[str]) -> None:
        async def change() -> None:
            obj = self.resources.get((plural, namespace, name))
            if obj is None:
                return
            obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f not in remove]
            obj["metadata"]["resourceVersion"] = self._bump()
            if obj["metadata"].get("deletionTimestamp") and not obj["metadata"]["finalizers"]:
                del self.resources[(plural, namespace, name)]
                self.gone.append((plural, namespace, name))
            self._deliver(plural, namespace, name)

        await self._write(f"finalizers of {name}", change)

    def delete_resource(self, plural: str, name: str) -> None:
        """A person deletes the resource: marked for deletion while finalizers hold it, else gone."""
        obj = self.resources[(plural, NS, name)]
        if obj["metadata"].get("finalizers"):
            obj["metadata"]["deletionTimestamp"] = "2026-11-28T00:00:00Z"
            obj["metadata"]["resourceVersion"] = self._bump()
        else:
            del self.resources[(plural, NS, name)]
            self.gone.append((plural, NS, name))
        self._deliver(plural, NS, name)


class SharedKafka(SimKafka):
    """Kafka's groups, with a commit passing the running replica's gate and fence first."""

    async def commit(self, config: dict[str, Any], group: str, offsets: Any, *, namespace: str) -> None:
        await _gate(f"kafka: commit group {group}")
        await fencing.before_write(f"commit offsets of group {group}")
        await super().commit(config, group, offsets, namespace=namespace)


class Replica:
    """One operator process: its watch cache, services, shard and Lease keeper."""

    def __init__(self, world: World, name: str, shard: Shard, skew: float) -> None:
        self.world = world
        self.name = name
        self.shard = shard
        self.skew = skew
        self.cache = ResourceCache()
        self.gate = Gate()
        self.identity = f"{name}_sim"
        self.fenced_off = 0
        #: How far this replica's monotonic clock has jumped ahead of the others' (a clock that
        #: ran fast: it then sees another's Lease expire early).
        self.jump = 0.0
        for (plural, namespace, resource), body in world.kube.resources.items():
            self.cache.observe(plural, namespace, resource, body)
        with acting_as(self):
            # No back-off, as in tests/simulation.py: the simulation moves step by step, not in time.
            self.clusters = ClusterRegistry(
                world.kube,  # type: ignore[arg-type]
                new_breaker=lambda: CircuitBreaker(first_backoff=0.0, max_backoff=0.0),
                clock=lambda: world.clock.now + self.jump,
            )
            self.connectors = ConnectorService(world.kube, self.clusters, kafka_groups=world.kafka)  # type: ignore[arg-type]
            self.mirrors = MirrorMaker2Service(world.kube, self.clusters)  # type: ignore[arg-type]
        self.keeper = LeaseKeeper(
            world.leases,
            self.identity,
            wanted=self.wanted,
            exists=lambda cluster: True,
            on_acquired=lambda clusters: None,
            on_lost=lambda clusters: None,
            timings=TIMINGS,
            clock=lambda: world.clock.now + self.jump,
            wall=lambda: EPOCH + timedelta(seconds=world.clock.now + skew),
        )

    def wanted(self) -> set[tuple[str, str]]:
        """The clusters of this replica's shard among the resources its cache holds."""
        found: set[tuple[str, str]] = set()
        for plural, namespace, name in self.world.kube.resources:
            labels = self.cache.labels(plural, namespace, name)
            if labels is not None:
                cluster = cluster_of(plural, namespace, name, labels)
                if self.shard.owns(cluster):
                    found.add(cluster)
        return found

    async def tick(self) -> None:
        """The Lease keeper's look (a frozen replica's keeper is frozen with it)."""
        if not self.gate.frozen:
            with acting_as(self):
                await self.keeper.tick()

    async def check(self, plural: str, name: str) -> str:
        """One pass of one key, as the controller's worker runs it; what happened."""
        with acting_as(self):
            body = self.cache.get(plural, NS, name)
            if body is None:
                return "gone"
            meta = body["metadata"]
            cluster = cluster_of(plural, NS, name, meta.get("labels") or {})
            fence = self.keeper.fence(cluster) if self.shard.owns(cluster) else None
            if fence is None:
                return "not held"
            with fencing.acting_under(fence):
                try:
                    return await self._pass(plural, name, body)
                except fencing.FencedOff:
                    self.fenced_off += 1
                    return "fenced off"
                except (KubernetesError, ConnectOffsetsError) as error:
                    return f"retry: {error}"

    async def _pass(self, plural: str, name: str, body: dict[str, Any]) -> str:
        if needs_finalizer(body):
            await self.world.kube.replace_finalizers(plural, NS, name, FINALIZER, set(stale_finalizers(body)))
            return "finalizer"
        if awaiting_deletion(body):
            body = copy.deepcopy(body)
            fenced_pass_on(self.world.kube, plural, body)  # type: ignore[arg-type]
            service = self.connectors if plural == CONNECTORS else self.mirrors
            try:
                result = await service.delete(NS, name, body, give_up=False)
            except DeletionPending:
                return "deletion pending"
            await self.world.kube.remove_finalizers(plural, NS, name, {FINALIZER, *stale_finalizers(body)})
            self.world.deletions.append((self.name, name, result))
            return result
        service = self.connectors if plural == CONNECTORS else self.mirrors
        outcome = await checked(service, NS, name)
        return f"checked: {outcome.transient_error or 'ok'}"

    def wake(self) -> None:
        """The process runs again: its watch catches up, then its pass goes on."""
        for (plural, namespace, name), body in list(self.world.kube.resources.items()):
            self.cache.observe(plural, namespace, name, body)
        for gone in self.world.kube.gone:
            self.cache.observe(*gone, None)
        self.gate.release()


class World:
    """The API server, the Connect worker, Kafka, the Leases and the clock the replicas share."""

    def __init__(self) -> None:
        self.faults = Faults()
        self.replicas: list[Replica] = []
        self.kube = SharedKube(self.faults, self.replicas)
        self.connect = SimConnect(self.faults)
        self.kafka = SharedKafka(self.faults)
        self.leases = FakeLeases()
        self.clock = FakeClock()  # every replica's monotonic clock (their rates agree; see Replica.jump)
        #: (replica, resource, what its delete logic reported), per run of a delete logic.
        self.deletions: list[tuple[str, str, str]] = []
        self.kube.put_resource(
            CLUSTERS,
            {
                "apiVersion": "connect-offsets.io/v1beta1",
                "kind": "ConnectCluster",
                "metadata": {"name": "local", "namespace": NS},
                "spec": {"url": URL},
            },
        )

    def add(self, name: str, shard: Shard | None = None, skew: float = 0.0) -> Replica:
        replica = Replica(self, name, shard or Shard(), skew)
        self.replicas.append(replica)
        return replica

    def holder(self) -> Replica | None:
        """The replica that holds the Lease of cluster ``local`` now, if any."""
        for replica in self.replicas:
            if replica.keeper.holds((NS, "local")):
                return replica
        return None

    async def advance(self, seconds: float, step: float | None = None) -> None:
        """Time passes; every running replica looks at the Leases each retry period."""
        step = step or TIMINGS.retry_period
        end = self.clock.now + seconds
        while self.clock.now < end:
            self.clock.now = min(end, self.clock.now + step)
            for replica in self.replicas:
                await replica.tick()

    async def settle(self, resources: list[tuple[str, str]], max_rounds: int = 80) -> int:
        """Every running replica checks every resource, time moving on, until nothing is written
        for longer than a stop or resume is held back after a take-over (``STATE_CHANGE_SETTLE_S``)
        under the same Lease term; the rounds it took."""
        quiet = 0
        # A term begun during a round's advance has its checks one round later: one round more.
        enough = math.ceil(STATE_CHANGE_SETTLE_S / TIMINGS.retry_period) + 2
        term: str | None = None
        for rounds in range(1, max_rounds + 1):
            before = self.faults.total
            for replica in self.replicas:
                if replica.gate.frozen:
                    continue
                snapshot = replica.clusters.snapshot(NS, "local")
                if snapshot is not None:
                    with acting_as(replica), contextlib.suppress(Exception):
                        await snapshot.refresh()
                for plural, name in resources:
                    await replica.check(plural, name)
            await self.advance(TIMINGS.retry_period)
            holder = self.holder()  # a Lease to be made again first (after a deletion)
            fence = holder.keeper.fence((NS, "local")) if holder is not None else None
            now_term = fence.holder if fence is not None else None
            # A new term (a take-over during the settling) holds its stops and resumes back anew.
            same_term = now_term is not None and now_term == term
            quiet = quiet + 1 if self.faults.total == before and same_term else 0
            term = now_term
            if quiet == enough:
                return rounds
        raise AssertionError(f"still writing after {max_rounds} rounds: {self.faults.writes[-12:]}")

    async def close(self) -> None:
        for replica in self.replicas:
            with contextlib.suppress(Exception):
                await replica.clusters.aclose()


@contextlib.asynccontextmanager
async def replica_world() -> AsyncIterator[World]:
    world = World()
    with respx.mock(assert_all_called=False) as router:

        async def on_the_wire(request: httpx.Request) -> httpx.Response:
            """What httpcore does with a request before its first byte: the write's gate at the
            wire, then the ``trace`` callback's headers event (the fence's last look)."""
            if request.method != "GET":
                await _gate(f"connect: {request.method} {request.url.path}", wire=True)
                trace = request.extensions.get("trace")
                if trace is not None:
                    await trace("http11.send_request_headers.started", {"request": request})
            return world.connect.handle(request)

        router.route(url__startswith=URL).mock(side_effect=on_the_wire)
        original = fencing.before_write

        async def gated(what: str) -> None:
            await _gate(f"connect: {what}")
            await original(what)

        fencing.before_write = gated
        try:
            yield world
        finally:
            fencing.before_write = original
            await world.close()


def position(at: int) -> list[dict[str, Any]]:
    return [{"partition": {"filename": FILE}, "offset": {"position": at}}]


def document(entries: list[dict[str, Any]]) -> str:
    return json.dumps({"offsets": entries})


def connector_body(name: str, **spec: Any) -> dict[str, Any]:
    """A RUNNING file source bound to ConnectCluster ``local``, listing to and altering from ``CM``."""
    return {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": NS, "labels": {"connect-offsets.io/cluster": "local"}},
        "spec": {
            "class": FILE_SOURCE,
            "tasksMax": 1,
            "state": "running",
            "config": {"file": FILE, "topic": "orders"},
            "listOffsets": {"toConfigMap": {"name": CM}},
            "alterOffsets": {"fromConfigMap": {"name": CM}},
            **spec,
        },
    }


__all__ = [
    "CM",
    "NAME",
    "TIMINGS",
    "Gate",
    "Replica",
    "SharedKube",
    "World",
    "acting_as",
    "connector_body",
    "document",
    "position",
    "replica_world",
]
