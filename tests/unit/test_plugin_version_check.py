"""spec.version checked before it is sent (issue 49 item 4), at reconcile level with the fake
worker (tests/fakes.py) and respx: a version the workers do not have is refused with the versions
they have, once as an Event, nothing sent to Connect; the listing is asked once per Connect cluster,
not per pass or per connector. The same on the real stack: tests/integration/test_plugin_versions.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, InstalledPlugins, PluginInfo
from connect_offsets.clients.connect import plugins as plugins_module
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, CONNECTORS
from tests.fakes import FakeConnect, FakeKube
from tests.reconcile_pass import checked

pytestmark = pytest.mark.unit

NS, URL = "team-a", "http://connect.test:8083"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
#: GET /connector-plugins?connectorsOnly=false as a 4.3.1 worker answers it (a part).
LISTING = [
    {"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink", "version": "4.3.1"},
    {"class": FILE_SOURCE, "type": "source", "version": "4.3.1"},
    {"class": "org.apache.kafka.connect.json.JsonConverter", "type": "converter", "version": "4.3.1"},
    {"class": "org.apache.kafka.connect.runtime.isolation.PluginsTest$TestConverter", "type": "converter"},
]


def connector_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
        "spec": {"class": FILE_SOURCE, "tasksMax": 1, "config": {"file": "/data/o.txt", "topic": "o"}, **spec},
    }


class World:
    def __init__(self, kube: FakeKube, connect: FakeConnect, clusters: ClusterRegistry, listing: respx.Route):
        self.kube, self.connect, self.clusters, self.listing = kube, connect, clusters, listing
        self.service = ConnectorService(kube, clusters)  # type: ignore[arg-type]

    def ready(self, name: str) -> dict[str, str]:
        status = self.kube.resource(CONNECTORS, NS, name).get("status") or {}
        return next(c for c in status["conditions"] if c["type"] == "Ready")

    def listings(self) -> list[str]:
        return [str(call.request.url.params) for call in self.listing.calls]


@pytest.fixture
async def world() -> AsyncIterator[World]:
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
    connect = FakeConnect(URL, version="4.3.1")
    with respx.mock(assert_all_called=False) as router:
        listing = router.route(method="GET", url__regex=r"/connector-plugins/?(\?.*)?$").respond(200, json=LISTING)
        connect.install(router)
        clusters = ClusterRegistry(kube)  # type: ignore[arg-type]
        yield World(kube, connect, clusters, listing)
        await clusters.aclose()


async def test_a_range_no_worker_has_is_refused_naming_the_installed_version(world: World) -> None:
    world.kube.put_resource(CONNECTORS, connector_body("orders", version="[9.0,10.0)"))
    outcome = await checked(world.service, NS, "orders")
    ready = world.ready("orders")
    assert (ready["status"], ready["reason"]) == ("False", "PluginVersionNotInstalled")
    assert ready["message"].startswith(
        f"spec.version '[9.0,10.0)' matches no installed version of {FILE_SOURCE}: the Connect worker of "
        "ConnectCluster local has 4.3.1. Nothing was created or changed"
    )
    assert outcome.transient_error is None and outcome.requeue_after == 30.0  # a user error: looked at again
    assert world.connect.changes() == [] and "orders" not in world.connect.connectors
    events = [(e.type, e.reason, e.message) for e in world.kube.events]
    assert events == [("Warning", "PluginVersionNotInstalled", ready["message"])]
    assert world.listings() == ["connectorsOnly=false"]
    await checked(world.service, NS, "orders")
    assert [e.reason for e in world.kube.events] == ["PluginVersionNotInstalled"]  # once, not per pass
    assert world.connect.changes() == []


async def test_the_installed_version_is_accepted_and_the_connector_created(world: World) -> None:
    world.kube.put_resource(CONNECTORS, connector_body("orders", version="4.3.1"))
    outcome = await checked(world.service, NS, "orders")
    assert outcome.transient_error is None
    assert world.connect.changes()[0] == "POST /connectors"
    assert world.connect.connectors["orders"].config["connector.plugin.version"] == "4.3.1"


async def test_the_listing_is_asked_once_per_connect_cluster_not_per_pass_or_connector(world: World) -> None:
    for name in ("a", "b", "c"):
        world.kube.put_resource(CONNECTORS, connector_body(name, version="[4.0,5.0)"))
    for _ in range(2):
        for name in ("a", "b", "c"):
            await checked(world.service, NS, name)
    assert world.listings() == ["connectorsOnly=false"]
    assert sorted(world.connect.connectors) == ["a", "b", "c"]


async def test_without_a_version_the_listing_is_not_asked(world: World) -> None:
    world.kube.put_resource(CONNECTORS, connector_body("orders"))
    await checked(world.service, NS, "orders")
    assert world.listings() == [] and "orders" in world.connect.connectors


async def test_a_converter_version_in_spec_config_is_checked_too(world: World) -> None:
    config = {
        "file": "/data/o.txt",
        "topic": "o",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.plugin.version": "[9.0,10.0)",
    }
    world.kube.put_resource(CONNECTORS, connector_body("orders", config=config))
    await checked(world.service, NS, "orders")
    ready = world.ready("orders")
    assert ready["reason"] == "PluginVersionNotInstalled"
    assert "spec.config.value.converter.plugin.version '[9.0,10.0)'" in ready["message"]
    assert world.connect.changes() == []


async def test_a_version_maven_cannot_read_is_invalid_and_nothing_is_sent(world: World) -> None:
    world.kube.put_resource(CONNECTORS, connector_body("orders", version="[4.0,5.0"))
    await checked(world.service, NS, "orders")
    ready = world.ready("orders")
    assert ready["reason"] == "InvalidSpec" and "Unbounded range: [4.0,5.0" in ready["message"]
    assert [e.reason for e in world.kube.events] == ["InvalidSpec"] and world.connect.changes() == []


async def test_a_refusal_reads_the_listing_again_before_refusing_if_it_is_older_than_30_s(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin installed (workers restarted) after the listing was read is seen on the next pass."""
    world.kube.put_resource(CONNECTORS, connector_body("a", version="4.3.1"))
    await checked(world.service, NS, "a")
    world.listing.respond(200, json=[*LISTING, {"class": FILE_SOURCE, "type": "source", "version": "9.1.0"}])
    clock = plugins_module.now
    monkeypatch.setattr(plugins_module, "now", lambda: clock() + 60.0)
    world.kube.put_resource(CONNECTORS, connector_body("b", version="[9.0,10.0)"))
    await checked(world.service, NS, "b")
    assert world.listings() == ["connectorsOnly=false"] * 2
    assert world.connect.connectors["b"].config["connector.plugin.version"] == "[9.0,10.0)"


async def test_a_failed_listing_leaves_the_version_to_connect_and_is_not_asked_every_pass(world: World) -> None:
    world.listing.respond(403, json={"error_code": 403, "message": "not for you"})
    world.kube.put_resource(CONNECTORS, connector_body("orders", version="4.3.1"))
    await checked(world.service, NS, "orders")
    await checked(world.service, NS, "orders")
    assert len(world.listings()) == 1
    assert "orders" in world.connect.connectors  # Connect's own answer decides


async def test_concurrent_callers_share_one_listing() -> None:
    calls = 0

    async def fetch() -> list[PluginInfo]:
        nonlocal calls
        calls += 1
        return [PluginInfo(FILE_SOURCE, "source", "4.3.1")]

    cache = InstalledPlugins(fetch)
    answers = await asyncio.gather(*(cache.get(max_age=300.0) for _ in range(20)))
    assert calls == 1 and all(a == [PluginInfo(FILE_SOURCE, "source", "4.3.1")] for a in answers)


async def test_the_client_reads_every_plugin_with_its_version() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/connector-plugins" and request.url.params["connectorsOnly"] == "false"
        return httpx.Response(200, json=LISTING)

    async with ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(answer)) as client:
        plugins = await client.plugin_versions()
    assert plugins[0] == PluginInfo("org.apache.kafka.connect.file.FileStreamSinkConnector", "sink", "4.3.1")
    assert plugins[-1] == PluginInfo(
        "org.apache.kafka.connect.runtime.isolation.PluginsTest$TestConverter", "converter", None
    )
