"""A Connect worker older than 3.6 (no offsets REST API, KIP-875): one clear ConnectTooOld condition.

Unit level with the respx fake worker (tests/fakes.py) answering ``GET /`` with an old version; the
same condition on a real 3.5.2 worker is in tests/integration/test_connect_versions.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import respx

from connect_offsets.models.connect import offsets_api_refusal
from connect_offsets.reconcile.cluster_service import ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, CONNECTORS
from tests.fakes import FakeConnect, FakeKube

pytestmark = pytest.mark.unit

NS, URL, NAME = "team-a", "http://connect.test:8083", "orders"


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        ("3.5.2", True),
        ("2.8.0", True),
        ("3.6.0", False),
        ("4.1.1", False),
        ("7.5.0-ccs", True),  # Confluent Platform 7.5 ships Kafka 3.5
        ("7.6.0-ccs", False),
        ("garbage", False),  # unparsable: given the benefit of the doubt, as before
    ],
)
def test_offsets_api_refusal(version: str, refused: bool) -> None:
    refusal = offsets_api_refusal(version)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert "3.6.0" in refusal and "KIP-875" in refusal


def test_the_refusal_never_echoes_the_raw_version() -> None:
    refusal = offsets_api_refusal("3.5.1-token=s3cr3t")
    assert refusal is not None and "s3cr3t" not in refusal and "3.5.1" in refusal


@pytest.fixture
async def old_worker() -> AsyncIterator[tuple[FakeKube, FakeConnect, ClusterRegistry]]:
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
    kube.put_resource(
        CONNECTORS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "KafkaConnector",
            "metadata": {"name": NAME, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
            "spec": {
                "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasksMax": 1,
                "state": "running",
                "config": {"file": "/data/orders.txt", "topic": "orders"},
            },
        },
    )
    connect = FakeConnect(URL, version="3.5.2")
    with respx.mock(assert_all_called=False) as router:
        # The fake serves no plugin list; ClusterService asks for one after GET /.
        router.route(method="GET", url__regex=r"/connector-plugins/?(\?.*)?$").respond(200, json=[])
        connect.install(router)
        clusters = ClusterRegistry(kube)  # type: ignore[arg-type]
        yield kube, connect, clusters
        await clusters.aclose()


def _ready(kube: FakeKube, plural: str, name: str) -> dict[str, str]:
    status = kube.resource(plural, NS, name).get("status") or {}
    return next(c for c in status["conditions"] if c["type"] == "Ready")


async def test_a_connector_on_a_too_old_worker_is_refused_once_not_retried(
    old_worker: tuple[FakeKube, FakeConnect, ClusterRegistry],
) -> None:
    kube, connect, clusters = old_worker
    service = ConnectorService(kube, clusters)  # type: ignore[arg-type]
    outcome = await service.reconcile(NS, NAME)
    ready = _ready(kube, CONNECTORS, NAME)
    assert ready["status"] == "False" and ready["reason"] == "ConnectTooOld", ready
    assert "Connect 3.5.2" in ready["message"] and "3.6.0" in ready["message"], ready
    assert outcome.transient_error is None  # a user error: no retry loop
    assert [s for s in connect.sent() if s.method != "GET" or s.path != "/"] == []  # nothing else asked


async def test_the_cluster_itself_says_connect_too_old(
    old_worker: tuple[FakeKube, FakeConnect, ClusterRegistry],
) -> None:
    kube, _, clusters = old_worker
    outcome = await ClusterService(kube, clusters).reconcile(NS, "local")  # type: ignore[arg-type]
    ready = _ready(kube, CLUSTERS, "local")
    assert ready["status"] == "False" and ready["reason"] == "ConnectTooOld", ready
    assert kube.resource(CLUSTERS, NS, "local")["status"]["version"] == "3.5.2"
    assert outcome.transient_error is None
