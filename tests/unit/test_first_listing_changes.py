"""Changes during a Connect cluster's first connector listing (issue 45, cold start): the second
attacker review of the deferral (helper-35), each test failing without its fix.

- F1: the ConnectCluster deleted, or moved to another URL, while its first listing hangs: the
  woken checks deferred again on the old endpoint's listing (for up to 4 x requestTimeoutSeconds)
  instead of saying the cluster is gone or creating their connectors on the new endpoint.
- F2: a first listing that failed was asked again at once by the ConnectCluster's pass that had
  deferred on it, and that pass had written Ready=True before it landed (True, False, True, ...
  every back-off, while the listing never succeeded).
- F3: an edit of an ``applyOnChange`` ConfigMap (a user's change the resource's body does not
  show) deferred behind the whole listing like a resync.

Then the review of those fixes (helper-36):

- A: a ConnectCluster pass that came back after the failed listing's 2 s hold started a new
  listing and deferred again: no status, no back-off, a listing per pass (201 in 1 s).
- B: a user's change whose pass met one Connect error was retried as a resync, and deferred.

A full controller (Controller, ConnectorService, ClusterService, ClusterRegistry) over FakeKube
and two fake Connect workers, with the watch's dispatch done by hand (``World.cluster_event``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
import respx

from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.controller import Controller
from connect_offsets.reconcile import snapshots
from connect_offsets.reconcile.cluster_service import ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, CONNECTORS
from tests.fakes import FakeConnect, FakeKube
from tests.polling import until
from tests.reconcile_pass import ANY_SOURCE, CM, NAME, Stack, document, held_listing

pytestmark = pytest.mark.unit

NS = "team-a"
URL = "http://connect.test:8083"
URL2 = "http://connect2.test:8083"


def connector_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
        "spec": {
            "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasksMax": 1,
            "state": "running",
            "config": {"file": "/data/x.txt", "topic": name},
        },
    }


def cluster_body(url: str = URL) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "ConnectCluster",
        "metadata": {"name": "local", "namespace": NS},
        "spec": {"url": url},
    }


@dataclass
class World:
    kube: FakeKube
    connect: FakeConnect
    connect2: FakeConnect
    clusters: ClusterRegistry
    controller: Controller

    def cluster_event(self, body: dict[str, Any] | None) -> None:
        """What handlers/watching.py's dispatch does with a ConnectCluster's watch event."""
        self.controller.observe_cluster(NS, "local", body)
        if body is None:
            asyncio.get_running_loop().create_task(self.clusters.forget(NS, "local"))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.kube.resources[(CONNECTORS, NS, name)].get("status") or {})

    def ready_history(self) -> list[str]:
        """The ConnectCluster's Ready status as its status writes changed it."""
        seen: list[str] = []
        for patch in self.kube.status_patches:
            for condition in patch.get("conditions") or (patch.get("status") or {}).get("conditions") or []:
                if condition.get("type") == "Ready" and (not seen or seen[-1] != condition["status"]):
                    seen.append(condition["status"])
        return seen


class SlowSecrets(FakeKube):
    """Secret reads take an API round trip, as against a real API server (long enough for the
    woken checks to run before the ConnectCluster's pass has built the new endpoint)."""

    async def get_secret_data(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.02)
        return await super().get_secret_data(*args, **kwargs)


@contextlib.asynccontextmanager
async def world(kube: FakeKube | None = None) -> AsyncIterator[World]:
    kube = kube if kube is not None else FakeKube()
    connect, connect2 = FakeConnect(URL), FakeConnect(URL2)
    with respx.mock(assert_all_called=False) as router:
        connect.install(router)
        connect2.install(router)
        clusters = ClusterRegistry(kube, drift_interval=3600.0)  # type: ignore[arg-type]
        connectors = ConnectorService(kube, clusters)  # type: ignore[arg-type]
        cluster_service = ClusterService(kube, clusters)  # type: ignore[arg-type]
        controller = Controller(
            cast(KubernetesApi, kube),
            {CONNECTORS: connectors.reconcile, CLUSTERS: cluster_service.reconcile},
            drift_interval=3600.0,
            workers=4,
        )
        controller.first_listing = connectors.first_listing
        try:
            yield World(kube, connect, connect2, clusters, controller)
        finally:
            await controller.stop()
            await clusters.aclose()


async def deferred_on_a_hung_listing(w: World) -> asyncio.Event:
    """Two KafkaConnectors deferred on their ConnectCluster's first listing, which hangs until the
    returned event is set."""
    w.kube.put_resource(CLUSTERS, cluster_body())
    client, _ = await w.clusters.client_for(NS, "local")
    release = held_listing(client)
    for name in ("c0", "c1"):
        w.kube.put_resource(CONNECTORS, connector_body(name))
    w.controller.observe_cluster(NS, "local", w.kube.cache.get(CLUSTERS, NS, "local"))
    w.controller.start()
    snapshot = w.clusters.snapshot(NS, "local")
    assert snapshot is not None
    assert await until(lambda: snapshot._inflight is not None)
    for name in ("c0", "c1"):
        w.controller.observe(CONNECTORS, NS, name, w.kube.cache.get(CONNECTORS, NS, name))
    assert await until(lambda: all((CONNECTORS, NS, n) in w.controller._deferred for n in ("c0", "c1")))
    return release


def started_with_failing_listings(w: World, count: int) -> None:
    """The ConnectCluster and the controller, its endpoint answering ``count`` listings with
    Connect's own 500 after 90 s ("Request timed out": an answer, no breaker opens)."""
    for _ in range(count):
        w.connect.fail("GET", "/connectors", 500, "Request timed out")
    w.kube.put_resource(CLUSTERS, cluster_body())
    w.controller.observe_cluster(NS, "local", w.kube.cache.get(CLUSTERS, NS, "local"))
    w.controller.start()


async def test_a_connect_cluster_deleted_during_its_first_listing_is_reported_at_once() -> None:
    async with world() as w:
        release = await deferred_on_a_hung_listing(w)
        del w.kube.resources[(CLUSTERS, NS, "local")]
        w.kube.cache.observe(CLUSTERS, NS, "local", None)
        w.cluster_event(None)
        try:
            for name in ("c0", "c1"):
                assert await until(lambda n=name: "not found" in str(w.status(n)), timeout=2), w.status(name)  # type: ignore[misc]
        finally:
            release.set()


async def test_a_connect_cluster_moved_during_its_first_listing_serves_its_connectors_on_the_new_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS", "true")
    kube = SlowSecrets()
    labels = {f"{API_GROUP}/credentials": "true"}
    kube.secrets["token"] = {"labels": labels, "annotations": {}, "data": {"token": b"t0k3n"}}
    async with world(kube) as w:
        release = await deferred_on_a_hung_listing(w)
        # The user moves the ConnectCluster (the old endpoint hangs) to one with a token: the watch
        # hands the new body over, and the cache follows it in observe_cluster.
        body = copy.deepcopy(w.kube.resources[(CLUSTERS, NS, "local")])
        body["spec"] = {"url": URL2, "authentication": {"type": "bearer", "secretName": "token", "tokenKey": "token"}}
        body["metadata"]["generation"] += 1
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1000)
        w.kube.resources[(CLUSTERS, NS, "local")] = body
        w.cluster_event(copy.deepcopy(body))
        try:
            assert await until(lambda: {"c0", "c1"} <= set(w.connect2.connectors), timeout=2), w.connect2.requests
        finally:
            release.set()
        assert w.connect.sent("POST", "/connectors") == []


async def test_a_failed_first_listing_is_not_asked_again_by_the_pass_that_deferred_on_it() -> None:
    """Connect answers a listing it cannot finish in 90 s with 500 'Request timed out' (an answer:
    no breaker opens). One listing per back-off, not two in a row."""
    async with world() as w:
        started_with_failing_listings(w, 20)
        assert await until(lambda: w.ready_history() != [], timeout=2)
        await asyncio.sleep(1.0)  # within the key's first back-off
        assert len(w.connect.sent("GET", "/connectors")) == 1, [str(r) for r in w.connect.requests]
        assert w.ready_history() == ["False"]


async def test_a_first_listing_that_keeps_failing_never_shows_ready_true() -> None:
    async with world() as w:
        started_with_failing_listings(w, 50)
        assert await until(lambda: len(w.connect.sent("GET", "/connectors")) >= 3, timeout=10)
        assert w.ready_history() == ["False"]


@contextlib.asynccontextmanager
async def restarted_over_a_hung_first_listing(stack: Stack) -> AsyncIterator[Controller]:
    """The operator restarts over ``stack``'s applyOnChange connector: a new registry whose first
    listing hangs until the end, and a controller whose check of the connector deferred on it."""
    await stack.applying_on_change(
        "stopped",
        [{"partition": {"file": "f0"}, "offset": {"position": 0}}],
        cls=ANY_SOURCE,
        config={"topic": "orders"},
    )
    clusters = ClusterRegistry(stack.kube)  # type: ignore[arg-type]
    service = ConnectorService(stack.kube, clusters)  # type: ignore[arg-type]
    client, _ = await clusters.client_for(NS, "local")
    release = held_listing(client)
    controller = Controller(
        cast(KubernetesApi, stack.kube), {CONNECTORS: service.reconcile}, drift_interval=3600.0, workers=4
    )
    controller.first_listing = service.first_listing
    controller.observe(CONNECTORS, NS, NAME, stack.kube.cache.get(CONNECTORS, NS, NAME))
    controller.start()
    try:
        assert await until(lambda: (CONNECTORS, NS, NAME) in controller._deferred)
        stack.connect.requests.clear()
        yield controller
    finally:
        release.set()
        await controller.stop()
        await clusters.aclose()


async def edit_the_configmap(stack: Stack, controller: Controller) -> None:
    """The user edits the ConfigMap the connector applies on change (the watch's event)."""
    edited = document([{"partition": {"file": "f0"}, "offset": {"position": 500}}])
    await stack.kube.patch_configmap(NS, CM, {"data": {"offsets.json": edited}})
    controller.configmap_changed(NS, CM)


async def test_an_apply_on_change_edit_during_the_first_listing_is_applied_without_waiting_for_it(
    stack: Stack,
) -> None:
    async with restarted_over_a_hung_first_listing(stack) as controller:
        await edit_the_configmap(stack, controller)
        # One settle delay (2 s: the stop's status) and the PATCH, the listing still hanging.
        assert await until(lambda: stack.connect.sent("PATCH", "/offsets") != [], timeout=5), stack.connect.requests
        assert stack.connect.sent("GET", "/connectors") == []


async def test_a_connect_clusters_pass_coming_back_after_the_hold_reports_the_failed_listing() -> None:
    """ClusterService alone: its pass defers on the first listing, which fails with a 500; the
    pass comes back after the failure's 2 s hold (it waited behind the start's checks)."""
    async with world() as w:
        for _ in range(5):
            w.connect.fail("GET", "/connectors", 500, "Request timed out")
        w.kube.put_resource(CLUSTERS, cluster_body())
        service = ClusterService(w.kube, w.clusters)  # type: ignore[arg-type]
        first = await service.reconcile(NS, "local")
        assert first.after is not None
        await asyncio.wait([first.after])
        await asyncio.sleep(snapshots.FAILED_REFRESH_HOLD_S + 0.1)
        second = await service.reconcile(NS, "local")
        assert second.after is None and second.transient_error is not None, second
        assert "Request timed out" in second.transient_error
        assert len(w.connect.sent("GET", "/connectors")) == 1
        assert w.ready_history() == ["False"]


async def test_a_failing_first_listing_is_asked_once_per_back_off_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full controller; a queue wait past the 2 s hold modelled by a hold of 0."""
    monkeypatch.setattr(snapshots, "FAILED_REFRESH_HOLD_S", 0.0)
    async with world() as w:
        started_with_failing_listings(w, 200)
        await asyncio.sleep(1.0)  # within the first back-off (2 s)
        assert len(w.connect.sent("GET", "/connectors")) == 1, [str(r) for r in w.connect.requests]
        assert w.ready_history() == ["False"]


async def test_a_users_change_retried_after_a_connect_error_does_not_wait_for_the_first_listing(
    stack: Stack,
) -> None:
    async with restarted_over_a_hung_first_listing(stack) as controller:
        # The worker is busy: the edit's own read of its connector meets one 500 (an answer).
        stack.connect.fail("GET", f"/connectors/{NAME}/config", 500, "Request timed out")
        await edit_the_configmap(stack, controller)
        # Its 2 s back-off, a settle delay (2 s) and the PATCH, the listing still hanging.
        assert await until(lambda: stack.connect.sent("PATCH", "/offsets") != [], timeout=8), stack.connect.requests
        assert stack.connect.sent("GET", "/connectors") == []
