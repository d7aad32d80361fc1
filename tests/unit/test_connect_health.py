"""The worker's own word (KIP-1017 ``GET /health``, 3.9+) and plugin versions (KIP-891, 4.1+), at
unit level with the fake worker (tests/fakes.py); the same on real workers of every version is in
tests/integration/test_connect_versions.py.

* ``GET /health`` parsed: 200 healthy, 503 starting, 500 unhealthy, with the worker's message;
* a ConnectCluster whose worker is starting is Ready False (WorkerStarting) and says so in
  status.health; an offsets change of a KafkaConnector on it waits (ConnectWorkerNotReady,
  nothing sent to Connect) and runs once the worker is healthy;
* spec.version on a worker older than 4.1 is refused (PluginVersionUnsupported), nothing created;
  on 4.1+ a change of spec.version backs the offsets up first, once, and says so in an Event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, ConnectNotFound
from connect_offsets.models.connect import health_endpoint_supported, plugin_version_refusal
from connect_offsets.reconcile.cluster_service import ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, CONNECTORS
from tests.fakes import FakeConnect, FakeConnector, FakeKube
from tests.reconcile_pass import checked

pytestmark = pytest.mark.unit

NS, URL, NAME = "team-a", "http://connect.test:8083", "orders"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


@pytest.mark.parametrize(("code", "state"), [(200, "healthy"), (503, "starting"), (500, "unhealthy")])
async def test_worker_health_is_read_from_its_answer(code: int, state: str) -> None:
    answer = httpx.Response(code, json={"status": state, "message": f"Worker says {state}."})
    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(lambda request: answer))
    async with client:
        assert await client.worker_health() == (state, f"Worker says {state}.")
    old = httpx.Response(404, json={"error_code": 404, "message": "HTTP 404 Not Found"})
    async with ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(lambda request: old)) as client:
        with pytest.raises(ConnectNotFound):
            await client.worker_health()


def test_which_versions_have_which_feature() -> None:
    assert [health_endpoint_supported(v) for v in ("3.8.1", "3.9.0", "4.1.1", "7.8.0-ccs")] == [
        False,
        True,
        True,
        False,  # Confluent Platform 7.8 ships Kafka 3.8
    ]
    refusal = plugin_version_refusal("4.0.1")
    assert refusal is not None and "4.1.0" in refusal and "KIP-891" in refusal and "4.0.1" in refusal
    assert plugin_version_refusal("4.1.0") is None and plugin_version_refusal("custom") is None


def connector_body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": NAME, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
        "spec": {
            "class": FILE_SOURCE,
            "tasksMax": 1,
            "config": {"file": "/data/orders.txt", "topic": "orders"},
            **spec,
        },
    }


@pytest.fixture
async def world(request: pytest.FixtureRequest) -> AsyncIterator[tuple[FakeKube, FakeConnect, ClusterRegistry]]:
    kube = FakeKube([])
    kube.put_resource(
        CLUSTERS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "ConnectCluster",
            "metadata": {"name": "local", "namespace": NS},
            "spec": {"url": URL},
        },
    )
    connect = FakeConnect(URL, version=request.param)
    with respx.mock(assert_all_called=False) as router:
        router.route(method="GET", url__regex=r"/connector-plugins/?(\?.*)?$").respond(200, json=[])
        connect.install(router)
        clusters = ClusterRegistry(kube)  # type: ignore[arg-type]
        yield kube, connect, clusters
        await clusters.aclose()


def condition(kube: FakeKube, plural: str, name: str, kind: str = "Ready") -> dict[str, str]:
    status = kube.resource(plural, NS, name).get("status") or {}
    return next(c for c in status["conditions"] if c["type"] == kind)


@pytest.mark.parametrize("world", ["4.1.1"], indirect=True)
async def test_an_offsets_change_waits_while_the_worker_is_starting(
    world: tuple[FakeKube, FakeConnect, ClusterRegistry],
) -> None:
    kube, connect, clusters = world
    position = [{"partition": {"filename": "/data/orders.txt"}, "offset": {"position": 30}}]
    connect.connectors[NAME] = FakeConnector(
        {
            "connector.class": FILE_SOURCE,
            "name": NAME,
            "file": "/data/orders.txt",
            "topic": "orders",
            "tasks.max": "1",
            f"{API_GROUP}/owner": f"{NS}/{NAME}",
        },
        "STOPPED",
        position,
    )
    kube.put_resource(CONNECTORS, connector_body(state="stopped"))
    kube.annotate(CONNECTORS, NS, NAME, connector_offsets="reset")
    cluster_pass, connectors = ClusterService(kube, clusters), ConnectorService(kube, clusters)  # type: ignore[arg-type]
    connect.health = "starting"
    await cluster_pass.reconcile(NS, "local")
    ready = condition(kube, CLUSTERS, "local")
    assert (ready["status"], ready["reason"]) == ("False", "WorkerStarting") and "Worker is starting" in ready[
        "message"
    ]
    assert kube.resource(CLUSTERS, NS, "local")["status"]["health"] == "starting"
    outcome = await checked(connectors, NS, NAME)
    ready = condition(kube, CONNECTORS, NAME)
    assert (ready["status"], ready["reason"]) == ("False", "ConnectWorkerNotReady"), ready
    assert outcome.transient_error is not None  # retried with back-off
    assert connect.changes() == [] and connect.connectors[NAME].offsets == position
    connect.health = "healthy"
    await checked(cluster_pass, NS, "local")  # Ready True once the endpoint's first listing landed
    assert condition(kube, CLUSTERS, "local")["status"] == "True"
    await checked(connectors, NS, NAME)
    assert connect.changes() == [f"DELETE /connectors/{NAME}/offsets"]
    assert kube.resource(CONNECTORS, NS, NAME)["status"]["lastOffsetsOperation"]["result"] == "Succeeded"


@pytest.mark.parametrize("world", ["3.9.2"], indirect=True)
async def test_spec_version_is_refused_before_4_1(world: tuple[FakeKube, FakeConnect, ClusterRegistry]) -> None:
    kube, connect, clusters = world
    kube.put_resource(CONNECTORS, connector_body(version="3.9.2"))
    outcome = await checked(ConnectorService(kube, clusters), NS, NAME)  # type: ignore[arg-type]
    ready = condition(kube, CONNECTORS, NAME)
    assert (ready["status"], ready["reason"]) == ("False", "PluginVersionUnsupported")
    assert "Kafka Connect 4.1.0 or newer" in ready["message"] and "3.9.2" in ready["message"]
    assert outcome.transient_error is None and connect.changes() == []


@pytest.mark.parametrize("world", ["4.1.1"], indirect=True)
async def test_a_version_change_backs_the_offsets_up_first_once(
    world: tuple[FakeKube, FakeConnect, ClusterRegistry],
) -> None:
    kube, connect, clusters = world
    service = ConnectorService(kube, clusters)  # type: ignore[arg-type]
    kube.put_resource(CONNECTORS, connector_body(version="4.1.1"))
    await checked(service, NS, NAME)
    assert connect.connectors[NAME].config["connector.plugin.version"] == "4.1.1"
    connect.connectors[NAME].offsets = [{"partition": {"filename": "/data/orders.txt"}, "offset": {"position": 7}}]
    body = kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["version"] = "[4.1,5.0)"
    kube.put_resource(CONNECTORS, body)
    await checked(service, NS, NAME)
    await checked(service, NS, NAME)
    assert connect.connectors[NAME].config["connector.plugin.version"] == "[4.1,5.0)"
    upgrade = kube.resource(CONNECTORS, NS, NAME)["status"]["pluginUpgrade"]
    assert (upgrade["fromVersion"], upgrade["toVersion"]) == ("4.1.1", "[4.1,5.0)")
    backups = kube.configmaps_labelled(f"{API_GROUP}/backup-of={NAME}")
    assert list(backups) == [upgrade["backup"]]
    assert json.loads(backups[upgrade["backup"]]["data"]["offsets.json"])["offsets"][0]["offset"]["position"] == 7
    assert [e.reason for e in kube.events].count("PluginVersionChanged") == 1
    sent = [str(r) for r in connect.requests]
    assert sent.count(f"PUT /connectors/{NAME}/config") == 1  # the one upgrade (created with POST)
    assert sent.index(f"GET /connectors/{NAME}/offsets") < sent.index(f"PUT /connectors/{NAME}/config")


@pytest.mark.parametrize("world", ["4.1.1"], indirect=True)
async def test_a_worker_without_the_endpoint_stays_ready_on_get_root(
    world: tuple[FakeKube, FakeConnect, ClusterRegistry],
) -> None:
    """A 3.9+ version behind a proxy that routes only some paths: GET /health answers 404, and
    readiness stays GET /, asked again only with the probe (not every pass)."""
    kube, connect, clusters = world
    connect.fail("GET", "/health", 404, "HTTP 404 Not Found")
    service = ClusterService(kube, clusters)  # type: ignore[arg-type]
    outcome = await checked(service, NS, "local")
    await checked(service, NS, "local")
    assert (condition(kube, CLUSTERS, "local")["reason"], outcome.transient_error) == ("Reachable", None)
    assert "health" not in kube.resource(CLUSTERS, NS, "local")["status"]
    assert len(connect.sent("GET", "/health")) == 1
