"""A check that would wait for its cluster's first connector listing gives its worker back (issue 45,
cold start): the attacker's findings on that change (helper-34), each failing without its fix.

- A listing whose only awaiter was cancelled (a ConnectCluster's pass, its Lease lost) and that then
  failed was handed out for ever as a finished task: every deferred key came back at once, deferred
  again, and spun through the queue (29,500 deferrals of two keys in 0.5 s).
- A hostile Connect answering the listing with JSON nested deeper than Python parses raised
  ``RecursionError``, which nothing held: the listing was asked again at once, in a loop.
- With the circuit breaker open, a listing was refused twice and its error logged as never retrieved.
- Every wake-up of a deferred key (a ConfigMap edit, a resync) added one more callback to the same
  listing, for as long as a slow listing lasts.
- A restart annotation or a spec change still waited for the listing inside the pass.
- A tenant refused by another namespace's ConnectCluster started a listing on that cluster's Connect.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, ConnectError
from connect_offsets.clients.connect.breaker import CircuitBreaker
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import Controller
from connect_offsets.reconcile.cluster_service import ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from connect_offsets.vocabulary import API_GROUP, CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CLUSTERS, CONNECTORS, asks_now
from tests.polling import until
from tests.reconcile_pass import NAME, NS, Stack, held_listing

pytestmark = pytest.mark.unit

URL = "http://connect.test:8083"


@dataclass
class Kube:
    """What the controller reads of ``KubernetesApi``: the watch cache."""

    cache: ResourceCache = field(default_factory=ResourceCache)


def resource(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "1", "generation": 1, "labels": {}},
        "status": {"observedGeneration": 1},
    }


@dataclass
class Deferring:
    """A controller whose KafkaConnectors' checks ask ``snapshot`` for its first listing."""

    controller: Controller
    asked: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)


def deferring(snapshot: ConnectorsSnapshot, names: list[str]) -> Deferring:
    made = Deferring(cast(Controller, None))

    async def reconcile(namespace: str, name: str) -> Outcome:
        made.passes.append(name)
        return Outcome()

    def first_listing(namespace: str, name: str) -> asyncio.Future[Any] | None:
        made.asked.append(name)
        return snapshot.first_listing()

    made.controller = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=2)
    made.controller.first_listing = first_listing
    for name in names:
        made.controller.observe(CONNECTORS, "team-a", name, resource(name))
    return made


def failing_client(release: asyncio.Event) -> ConnectClient:
    """A client whose listings fail (500) once ``release`` is set."""
    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(lambda r: httpx.Response(200)))

    async def listing() -> Any:
        await release.wait()
        raise ConnectError("500 Request timed out")

    client.list_connectors_expanded = listing  # type: ignore[method-assign]
    return client


async def test_a_failed_listing_nobody_awaited_any_more_is_held_not_handed_out_again() -> None:
    release = asyncio.Event()
    client = failing_client(release)
    snapshot = ConnectorsSnapshot(client, max_age=60)
    cluster_pass = asyncio.create_task(snapshot.refresh())  # the ConnectCluster's pass
    await asyncio.sleep(0.01)
    made = deferring(snapshot, ["c0", "c1"])
    made.controller.start()
    try:
        await until(lambda: len(made.asked) == 2)
        assert made.passes == []  # both wait for the listing under way
        cluster_pass.cancel()  # its Lease is lost: the listing's only awaiter is gone
        await asyncio.sleep(0.01)
        release.set()  # then the listing fails
        await until(lambda: sorted(made.passes) == ["c0", "c1"])
        await asyncio.sleep(0.3)
        # Each key came back once and ran its pass (which reports the held failure): no spinning.
        assert len(made.asked) <= 4 and sorted(made.passes) == ["c0", "c1"]
        assert snapshot.first_listing() is None and snapshot._failed is not None
        assert len(made.controller.first_checks) == 0
    finally:
        await made.controller.stop()
        await client.aclose()


async def test_a_listing_nested_deeper_than_python_parses_is_a_held_failure_not_a_loop() -> None:
    listings: list[str] = []
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

    def answer(request: httpx.Request) -> httpx.Response:
        listings.append(request.url.path)
        return httpx.Response(200, content=deep, headers={"Content-Type": "application/json"})

    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(answer))
    snapshot = ConnectorsSnapshot(client, max_age=60)
    made = deferring(snapshot, ["c0"])
    made.controller.start()
    try:
        await until(lambda: made.passes == ["c0"])
        await asyncio.sleep(0.5)
        assert listings == ["/connectors"] and made.passes == ["c0"]  # one listing; its failure held
        with pytest.raises(ConnectError, match="unexpected response"):
            await snapshot.read("c0")
    finally:
        await made.controller.stop()
        await client.aclose()


async def test_an_open_breaker_refuses_one_listing_and_no_error_goes_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    breaker: CircuitBreaker[ConnectError] = CircuitBreaker(first_backoff=60)
    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(refuse), breaker=breaker)
    with pytest.raises(ConnectError):
        await client.server_info()  # the breaker opens
    refusals = breaker.refusals
    snapshot = ConnectorsSnapshot(client, max_age=60)
    listing = snapshot.first_listing()
    assert listing is not None
    listing.add_done_callback(lambda _: None)  # as Controller._after
    for _ in range(10):
        await asyncio.sleep(0)
    del listing
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        gc.collect()
        await asyncio.sleep(0)
    assert breaker.refusals - refusals == 1
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
    assert snapshot.first_listing() is None  # the refusal is held: passes report it
    await client.aclose()


async def test_a_deferred_key_woken_again_and_again_holds_one_callback_and_is_not_resynced() -> None:
    listing: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def reconcile(namespace: str, name: str) -> Outcome:
        return Outcome()

    made = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=2)
    made.first_listing = lambda namespace, name: listing
    names = [f"c{i}" for i in range(50)]
    for name in names:
        made.observe(CONNECTORS, "team-a", name, resource(name))
    made.start()
    try:
        await until(lambda: len(made._deferred) == len(names))
        for _ in range(20):  # ConfigMap edits, progress changes: every key woken again
            for name in names:
                made.wake(CONNECTORS, "team-a", name)
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
        assert len(listing._callbacks) == len(names)  # type: ignore[attr-defined]
        assert not any(made.queue.has((CONNECTORS, "team-a", name)) for name in names)
    finally:
        listing.set_result(None)
        await made.stop()


async def test_a_restart_asked_during_the_first_listing_reads_its_connector_on_its_own(stack: Stack) -> None:
    await stack.created("running")
    # The operator restarted: a new registry, whose first listing is slow.
    stack.clusters = ClusterRegistry(stack.kube)  # type: ignore[arg-type]
    stack.service = ConnectorService(stack.kube, stack.clusters)  # type: ignore[arg-type]
    client, _ = await stack.clusters.client_for(NS, "local")
    release = held_listing(client)
    stack.annotate(restart="connector")
    assert asks_now(stack.kube.resource(CONNECTORS, NS, NAME))  # the controller runs it, not defers it
    outcome = await asyncio.wait_for(stack.service.reconcile(NS, NAME), 2)
    release.set()
    assert outcome.after is None
    sent = [str(r) for r in stack.connect.requests]
    assert f"GET /connectors/{NAME}/config" in sent and f"GET /connectors/{NAME}/status" in sent  # on its own


async def test_a_tenant_refused_by_another_namespaces_cluster_starts_no_listing_there(stack: Stack) -> None:
    await stack.clusters.client_for(NS, "local")  # that cluster resolved (its ConnectCluster's pass)
    stack.kube.put_resource(
        CONNECTORS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "KafkaConnector",
            "metadata": {
                "name": "intruder",
                "namespace": "team-b",
                "labels": {CLUSTER_LABEL: "local", CLUSTER_NAMESPACE_LABEL: NS},
            },
            "spec": {"class": "x", "tasksMax": 1, "config": {}},
        },
    )
    stack.connect.requests.clear()
    assert stack.service.first_listing("team-b", "intruder") is None  # the pass checks the binding first
    await asyncio.sleep(0.05)
    assert stack.connect.requests == []


async def test_the_controllers_pre_check_joins_a_listing_under_way_and_never_starts_one(stack: Stack) -> None:
    """Found by test_shared_memory on the real stack: a ConnectCluster whose ``GET /`` answer is too
    large has a client entry but is unusable; the pre-check started a listing on it, which the
    pass (refused in ``resolve_cluster``) never would. Listings are started by passes only."""
    stack.connector("stopped")
    client, _ = await stack.clusters.client_for(NS, "local")
    stack.connect.requests.clear()
    assert stack.service.first_listing(NS, NAME) is None
    await asyncio.sleep(0.05)
    assert stack.connect.requests == []
    release = held_listing(client)
    snapshot = stack.clusters.snapshot(NS, "local")
    assert snapshot is not None
    refreshing = asyncio.create_task(snapshot.refresh())  # the ConnectCluster's pass lists
    await asyncio.sleep(0.01)
    assert stack.service.first_listing(NS, NAME) is snapshot._inflight is not None
    release.set()
    await refreshing
    assert stack.service.first_listing(NS, NAME) is None


async def test_a_connect_clusters_pass_does_not_wait_for_the_first_listing(stack: Stack) -> None:
    """bench_cold_start after the checks' deferral: the lists asked during a restart still waited
    7 s, 1.4 s after each endpoint's first listing ended. The namespace's one worker share was now
    the ConnectCluster's own pass, waiting in ``refresh`` for that listing. It comes back when the
    listing lands (``Outcome.after``) and writes nothing meanwhile (Ready True only once the
    endpoint listed: test_first_listing_changes); then it measures and writes as before."""
    service = ClusterService(stack.kube, stack.clusters)  # type: ignore[arg-type]
    client, _ = await stack.clusters.client_for(NS, "local")
    release = held_listing(client)
    outcome = await asyncio.wait_for(service.reconcile(NS, "local"), 2)
    assert outcome.after is not None and not outcome.after.done() and outcome.transient_error is None
    assert "status" not in stack.kube.resource(CLUSTERS, NS, "local")
    release.set()
    await asyncio.wait([outcome.after], timeout=2)
    assert (await service.reconcile(NS, "local")).after is None
    conditions = stack.kube.resource(CLUSTERS, NS, "local")["status"]["conditions"]
    assert [c["status"] for c in conditions if c["type"] == "Ready"] == ["True"]
    assert [str(r) for r in stack.connect.requests].count("GET /connectors") == 1
