"""A deterministic simulation of the operator against the unit fakes, with a fault after any write.

Why: "exactly once" is promised across crashes and failures at every point of every flow, and a
handful of hand-picked crash points cannot show that (issue 30). Here every external write —
Kubernetes status patches, annotation patches, ConfigMap creates/patches/deletes, Events, and every
request to Connect that is not a GET — goes through one counter (``Faults``); a test arms a fault
for the N-th write of a flow and chooses what happens there:

* ``crash``: the write happens, then the process dies (``Crash``, a BaseException nothing in the
  operator catches); every later write of the dead process is refused, as a SIGKILL would;
* ``conflict`` / ``unavailable``: the write does not happen, the server answers 409 / 5xx;
* ``timeout``: the write does not happen and the client gives up waiting;
* ``timeout-after``: the write happens, and the client gives up waiting anyway (the answer lost).

After a crash the operator restarts from what persisted — the API objects and the Connect
worker's state — with empty caches (``Sim.restart``), and the simulation runs the resource's checks
until nothing more is written (``Sim.settle``).

Shared by tests/unit/test_simulation.py (every write of every flow, and a hypothesis state
machine of user actions, faults and crashes).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import respx

from connect_offsets.clients.connect import CircuitBreaker
from connect_offsets.clients.kafka import ClusterIdCache, KafkaAdminError
from connect_offsets.clients.kafka_groups import TP, Checkpoint, CheckpointRead, GroupActive, GroupState
from connect_offsets.clients.kubernetes import ConfigMapData, KubernetesError, KubernetesUnavailable
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.planning.plan import STATE_CHANGE_SETTLE_S
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.reconcile.mirrormaker2 import MirrorMaker2Service
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, CONNECTORS, MIRRORS
from tests.fakes import FakeConnect, FakeKube
from tests.reconcile_pass import checked

T = TypeVar("T")

#: The test report property holding what a simulation test explored: printed at the end of the
#: run's output (tests/unit/conftest.py), so its size and time are seen without ``-s``, from
#: xdist workers too.
EXPLORED = "exactly-once simulation"

NS = "team-a"
URL = "http://connect.test:8083"
#: The Kafka cluster ids the fake clusters report: the Connect worker writes into "k1" (west).
CLUSTER_IDS = {"east:9092": "k0", "west:9092": "k1"}
FAULT_KINDS = ("crash", "conflict", "unavailable", "timeout", "timeout-after")


class Crash(BaseException):
    """The operator process dies here (a BaseException, so no ``except Exception`` catches it)."""


@dataclass
class Faults:
    """Counts every external write and injects at most one fault: the ``kind`` at write ``at``."""

    at: int | None = None
    kind: str = "crash"
    count: int = 0  # writes since the fault was armed
    total: int = 0  # writes since the simulation began
    dead: bool = False
    writes: list[str] = field(default_factory=list)  # what was written since armed, in order
    hit: str | None = None  # the write the fault hit
    user: bool = False  # a person's write (``Sim.as_user``): not the operator's, never faulted
    #: Called before each of the operator's writes with the number made since armed: a person's
    #: action at that write boundary (an edit while the connector stops), made between two writes
    #: of one pass as easily as between two passes.
    boundary: Callable[[int], None] | None = None

    def arm(self, at: int | None, kind: str = "crash") -> None:
        self.at, self.kind, self.count, self.writes, self.hit = at, kind, 0, [], None

    def before(self, what: str) -> str | None:
        """Called before a write: the failure to answer instead of writing, if any."""
        if self.user:
            return None
        if self.boundary is not None:
            self.boundary(self.count)
        if self.dead:
            raise Crash(f"the process is dead: no {what}")
        self.count += 1
        self.total += 1
        self.writes.append(what)
        if self.count == self.at and self.kind in ("conflict", "unavailable", "timeout"):
            self.hit = what
            return self.kind
        return None

    def after(self, what: str) -> bool:
        """Called after a write happened: True when its answer is lost (timeout-after); dies on crash."""
        if self.user or self.count != self.at:
            return False
        if self.kind == "crash":
            self.hit, self.dead = what, True
            raise Crash(f"killed right after {what}")
        if self.kind == "timeout-after":
            self.hit = what
            return True
        return False


class SimKube(FakeKube):
    """The Kubernetes fake with every write going through ``Faults``."""

    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    async def _write(self, what: str, write: Callable[[], Awaitable[T]]) -> T:
        failure = self.faults.before(f"kube: {what}")
        if failure is not None:
            status = {"conflict": 409, "unavailable": 503}.get(failure)
            raise KubernetesUnavailable(f"{what}: {status or 'ReadTimeoutError'} (injected)", status)
        result = await write()
        if self.faults.after(f"kube: {what}"):
            raise KubernetesUnavailable(f"{what}: ReadTimeoutError (injected, after the write)", None)
        return result

    async def create_configmap_uid(self, namespace: str, body: dict[str, Any]) -> str:
        return await self._write(
            f"create ConfigMap {body['metadata']['name']}",
            lambda: super(SimKube, self).create_configmap_uid(namespace, body),
        )

    async def patch_configmap(
        self, namespace: str, name: str, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> ConfigMapData:
        return await self._write(
            f"patch ConfigMap {name}",
            lambda: super(SimKube, self).patch_configmap(namespace, name, patch, resource_version=resource_version),
        )

    async def delete_configmap(self, namespace: str, name: str) -> None:
        await self._write(f"delete ConfigMap {name}", lambda: super(SimKube, self).delete_configmap(namespace, name))

    async def remove_annotations(
        self,
        plural: str,
        namespace: str,
        name: str,
        expected: dict[str, str],
        *,
        set_also: dict[str, str] | None = None,
    ) -> list[str]:
        return await self._write(
            f"annotations of {name}",
            lambda: super(SimKube, self).remove_annotations(plural, namespace, name, expected, set_also=set_also),
        )

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any] | None:
        return await self._write(
            f"status of {name}", lambda: super(SimKube, self).patch_status(plural, namespace, name, status)
        )

    async def post_event(self, *, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        # The real client posts Events best effort: a failure is logged, never raised.
        failure = self.faults.before(f"kube: Event {reason}")
        if failure is None:
            await super().post_event(involved=involved, event_type=event_type, reason=reason, message=message)
            self.faults.after(f"kube: Event {reason}")


@dataclass(frozen=True)
class Applied:
    """An offsets change the worker applied."""

    method: str
    connector: str
    body: str  # canonical JSON of the PATCH body ("" for DELETE)


class SimConnect(FakeConnect):
    """The Connect fake with every request but a GET going through ``Faults``; it records the
    offsets changes it applied (``applied``). Connectors in ``moving`` advance by one position each
    time their offsets are read: a copy's source that keeps running."""

    def __init__(self, faults: Faults) -> None:
        super().__init__(URL)
        self.faults = faults
        self.applied: list[Applied] = []
        self.moving: set[str] = set()

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            response = super().handle(request)
            parts = request.url.path.rstrip("/").split("/")
            if len(parts) == 4 and parts[3] == "offsets" and parts[2] in self.moving and parts[2] in self.connectors:
                for entry in self.connectors[parts[2]].offsets:
                    entry["offset"]["position"] += 1
            return response
        what = f"connect: {request.method} {request.url.path}"
        failure = self.faults.before(what)
        if failure == "conflict":
            return self._error(409, "Cannot complete request momentarily due to stale configuration (injected)")
        if failure == "unavailable":
            return self._error(500, "Request cannot be completed because a rebalance is expected (injected)")
        if failure == "timeout":
            raise httpx.ReadTimeout("injected: no answer", request=request)
        response = super().handle(request)
        path = request.url.path.rstrip("/")
        if path.endswith("/offsets") and response.status_code < 300:
            body = json.dumps(json.loads(request.content), sort_keys=True) if request.content else ""
            self.applied.append(Applied(request.method, path.split("/")[2], body))
        if self.faults.after(what):
            raise httpx.ReadTimeout("injected: the answer was lost", request=request)
        return response


@dataclass(frozen=True)
class Committed:
    """A consumer-group commit the Kafka fake applied."""

    cluster: str
    group: str
    offsets: tuple[tuple[TP, int], ...]


class SimKafka:
    """Consumer groups and MirrorMaker 2 checkpoints of the fake clusters (``clients.kafka_groups``'s
    calls); a commit is a write, through ``Faults``, recorded in ``applied``."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        #: checkpoints topic -> the records in it, in order (the newest per partition wins).
        self.records: dict[str, list[Checkpoint]] = {}
        #: (cluster bootstrap, group) -> committed offsets; active members.
        self.groups: dict[tuple[str, str], dict[TP, int]] = {}
        self.members: dict[tuple[str, str], int] = {}
        self.topics: dict[str, set[str]] = {}
        self.applied: list[Committed] = []

    async def checkpoints(self, config: dict[str, Any], topic: str, group: str, *, namespace: str) -> CheckpointRead:
        if topic not in self.records:
            return CheckpointRead(False, {}, 0, 0)
        newest = {(c.topic, c.partition): c for c in self.records[topic] if c.group == group}
        return CheckpointRead(True, newest, len(self.records[topic]), 0)

    async def committed(self, config: dict[str, Any], group: str, *, namespace: str) -> dict[TP, int]:
        return dict(self.groups.get((str(config["bootstrap.servers"]), group), {}))

    async def describe(self, config: dict[str, Any], group: str, *, namespace: str) -> GroupState:
        members = self.members.get((str(config["bootstrap.servers"]), group), 0)
        return GroupState("STABLE" if members else "EMPTY", members)

    async def existing_topics(self, config: dict[str, Any], names: Any, *, namespace: str) -> set[str]:
        return set(names) & self.topics.get(str(config["bootstrap.servers"]), set())

    async def commit(self, config: dict[str, Any], group: str, offsets: Any, *, namespace: str) -> None:
        cluster = str(config["bootstrap.servers"])
        what = f"kafka: commit group {group} on {cluster}"
        failure = self.faults.before(what)
        if failure is not None:
            raise KafkaAdminError(f"{what}: {failure} (injected)")
        if self.members.get((cluster, group), 0):
            raise GroupActive(f"group {group} has active members (UNKNOWN_MEMBER_ID)")
        self.groups[(cluster, group)] = {**self.groups.get((cluster, group), {}), **dict(offsets)}
        self.applied.append(Committed(cluster, group, tuple(sorted(dict(offsets).items()))))
        if self.faults.after(what):
            raise KafkaAdminError(f"{what}: no answer (injected, after the commit)")


@dataclass
class World:
    """What persists across a restart: the API objects, the worker's state and the Kafka groups (deep copies)."""

    objects: dict[str, Any]
    resources: dict[tuple[str, str, str], Any]
    secrets: dict[str, Any]
    version: int
    connectors: dict[str, Any]
    committed: dict[tuple[str, str], dict[TP, int]]


class Sim:
    """The operator (its KafkaConnector and KafkaMirrorMaker2 services) against the fakes, one
    namespace, with faults; driven check by check."""

    def __init__(self) -> None:
        self.faults = Faults()
        self.kube = SimKube(self.faults)
        self.connect = SimConnect(self.faults)
        self.kafka = SimKafka(self.faults)
        self.restarts = 0
        self.kube.put_resource(
            CLUSTERS,
            {
                "apiVersion": f"{API_GROUP}/v1beta1",
                "kind": "ConnectCluster",
                "metadata": {"name": "local", "namespace": NS},
                "spec": {"url": URL},
            },
        )
        self._start()

    def _start(self) -> None:
        """A process starting: empty caches, the watch's initial list in the cache."""
        self.kube.cache = ResourceCache()
        for (plural, namespace, name), body in self.kube.resources.items():
            self.kube.cache.observe(plural, namespace, name, body)
        # The circuit breaker is in (its refusals and probes are code paths the faults go through),
        # with no back-off: the simulation moves write by write, not in time, and a real 2 s would
        # turn every pass after an injected time-out into a refusal (test_connect_breaker has the timing).
        # For the same reason every look at a stop or resume sent finds its settle window over
        # (the fake's status does not lag; test_exactly_once has the lagging status).
        self.clusters = ClusterRegistry(
            self.kube,  # type: ignore[arg-type]
            new_breaker=lambda: CircuitBreaker(first_backoff=0.0, max_backoff=0.0),
            state_clock=itertools.count(step=int(STATE_CHANGE_SETTLE_S)).__next__,
        )
        self.connectors = ConnectorService(self.kube, self.clusters, kafka_groups=self.kafka)  # type: ignore[arg-type]
        self.mirrors = MirrorMaker2Service(self.kube, self.clusters)  # type: ignore[arg-type]
        self.mirrors.failovers.kafka = self.kafka  # type: ignore[assignment]

        async def cluster_id(config: dict[str, Any], namespace: str) -> str:
            return CLUSTER_IDS[str(config["bootstrap.servers"])]

        self.mirrors.cluster_ids = ClusterIdCache(probe=cluster_id)

    async def restart(self) -> None:
        """The process died: a new one starts from what persisted."""
        with contextlib.suppress(Exception):
            await self.clusters.aclose()
        self.faults.dead = False
        self.restarts += 1
        self._start()

    @contextlib.contextmanager
    def as_user(self) -> Iterator[None]:
        """Writes in this block are a person's (kubectl), not the operator's: not counted, never faulted."""
        self.faults.user = True
        try:
            yield
        finally:
            self.faults.user = False

    def edit_configmap(self, name: str, key: str, text: str) -> None:
        """A person replaces ``key`` of ConfigMap ``name`` (kubectl apply), at once: callable from a
        write boundary (``Faults.boundary``), inside the operator's pass."""
        obj = self.kube.objects[name]
        obj.setdefault("data", {})[key] = text
        self.kube.version += 1
        obj["metadata"]["resourceVersion"] = str(self.kube.version)

    def save(self) -> World:
        return World(
            copy.deepcopy(self.kube.objects),
            copy.deepcopy(self.kube.resources),
            copy.deepcopy(self.kube.secrets),
            self.kube.version,
            copy.deepcopy(self.connect.connectors),
            copy.deepcopy(self.kafka.groups),
        )

    async def load(self, world: World) -> None:
        """Back to a saved world, with a fresh process and empty logs."""
        self.kube.objects = copy.deepcopy(world.objects)
        self.kube.resources = copy.deepcopy(world.resources)
        self.kube.secrets = copy.deepcopy(world.secrets)
        self.kube.version = world.version
        self.kube.events.clear()
        self.kube.status_patches.clear()
        self.connect.connectors = copy.deepcopy(world.connectors)
        self.connect.requests.clear()
        self.connect.applied.clear()
        self.connect.failures.clear()
        self.kafka.groups = copy.deepcopy(world.committed)
        self.kafka.applied.clear()
        self.faults.arm(None)
        self.faults.boundary = None
        await self.restart()

    async def check(self, plural: str, name: str) -> Outcome:
        """One check of one resource as its loop runs it; a crash restarts the process."""
        service = self.connectors if plural == CONNECTORS else self.mirrors
        try:
            return await checked(service, NS, name)
        except KubernetesError as error:
            return Outcome(transient_error=str(error))
        except Crash:
            await self.restart()
            return Outcome(transient_error="crashed")

    async def delete(self, plural: str, name: str) -> str:
        """The delete handler (kopf's finalizer) of a resource, then the resource gone."""
        service = self.connectors if plural == CONNECTORS else self.mirrors
        body = self.kube.resources.get((plural, NS, name))
        if body is None:
            return "gone"
        try:
            result = await service.delete(NS, name, copy.deepcopy(body), give_up=False)
        except Crash:
            await self.restart()
            return "crashed"
        except Exception as error:  # retried by kopf
            return f"retry: {error}"
        del self.kube.resources[(plural, NS, name)]
        self.kube.cache.observe(plural, NS, name, None)
        return result

    async def settle(self, resources: list[tuple[str, str]], max_rounds: int = 60) -> int:
        """Check every resource until two rounds in a row write nothing; the rounds it took.

        Each round also refreshes the cluster's connector snapshot, as the ConnectCluster's own
        pass does every drift interval, so checks read from it as an idle operator's do.
        """
        quiet = 0
        for rounds in range(1, max_rounds + 1):
            before = self.faults.total
            snapshot = self.clusters.snapshot(NS, "local")
            if snapshot is not None:
                with contextlib.suppress(Exception):
                    await snapshot.refresh()
            for plural, name in resources:
                await self.check(plural, name)
            quiet = quiet + 1 if self.faults.total == before else 0
            if quiet == 2:
                return rounds
        raise AssertionError(f"still writing after {max_rounds} rounds: {self.faults.writes[-12:]}")


@contextlib.asynccontextmanager
async def simulation() -> AsyncIterator[Sim]:
    sim = Sim()
    with respx.mock(assert_all_called=False) as router:
        router.route(url__startswith=URL).mock(side_effect=sim.connect.handle)
        try:
            yield sim
        finally:
            with contextlib.suppress(Exception):
                await sim.clusters.aclose()


def resource(sim: Sim, plural: str, name: str) -> dict[str, Any]:
    return sim.kube.resources[(plural, NS, name)]


def mirrors_status_entry(sim: Sim, name: str, connector: str) -> dict[str, Any]:
    for entry in (resource(sim, MIRRORS, name).get("status") or {}).get("connectors", []):
        if entry.get("name") == connector:
            return dict(entry)
    return {}
