"""A reconcile pass without the stack: one namespace with a ConnectCluster, a KafkaConnector and a
fake Connect worker (tests/fakes.py, mounted with respx), driven pass by pass.

Shared by the reconcile-layer unit tests (offsets requests, idle cost, check cadence); the
``stack`` fixture is registered for tests/unit in tests/unit/conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx
import respx

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint
from connect_offsets.clients.kubernetes import KubernetesError
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, API_GROUP, CLUSTERS, CONNECTORS
from tests.fakes import FakeConnect, FakeKube

NS = "team-a"
URL = "http://connect.test:8083"
NAME = "orders"
CM = "orders-offsets"
FILE = "/data/orders.txt"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
#: A source connector of Connect's test framework: any partitions, so documents can be large.
ANY_SOURCE = "org.apache.kafka.connect.integration.MonitorableSourceConnector"
OFFSETS_PATH = f"/connectors/{NAME}/offsets"
BACKUPS = f"{API_GROUP}/backup-of={NAME}"


def position(at: int) -> list[dict[str, Any]]:
    return [{"partition": {"filename": FILE}, "offset": {"position": at}}]


def document(entries: list[dict[str, Any]]) -> str:
    return json.dumps({"offsets": entries})


class Reconciler(Protocol):
    async def reconcile(self, namespace: str, name: str) -> Outcome: ...


async def checked(service: Reconciler, namespace: str, name: str) -> Outcome:
    """A resource's check as the controller runs it: a pass that gave its worker back for its
    cluster's first connector listing (``Outcome.after``) runs again once the listing has landed."""
    outcome = await service.reconcile(namespace, name)
    if outcome.after is not None:
        await asyncio.wait([outcome.after])
        outcome = await service.reconcile(namespace, name)
        assert outcome.after is None, "deferred twice: the listing landed"
    return outcome


class Stack:
    """One namespace with a ConnectCluster, a KafkaConnector and a Connect worker, driven pass by pass."""

    def __init__(self, kube: FakeKube, connect: FakeConnect, journal: list[str]) -> None:
        self.kube = kube
        self.connect = connect
        self.journal = journal
        self.clusters = ClusterRegistry(kube)  # type: ignore[arg-type]
        self.service = ConnectorService(kube, self.clusters)  # type: ignore[arg-type]

    def connector(self, state: str = "running", cls: str = FILE_SOURCE, config: dict[str, str] | None = None) -> None:
        self.kube.put_resource(
            CONNECTORS,
            {
                "apiVersion": f"{API_GROUP}/v1beta1",
                "kind": "KafkaConnector",
                "metadata": {"name": NAME, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
                "spec": {
                    "class": cls,
                    "tasksMax": 1,
                    "state": state,
                    "config": config if config is not None else {"file": FILE, "topic": "orders"},
                    "listOffsets": {"toConfigMap": {"name": CM}},
                    "alterOffsets": {"fromConfigMap": {"name": CM}},
                },
            },
        )

    async def created(self, state: str = "running", offsets: list[dict[str, Any]] | None = None, **kw: Any) -> None:
        """The connector as the operator created it in Connect, holding ``offsets``."""
        self.connector(state, **kw)
        await self.reconcile()
        assert NAME in self.connect.connectors, self.status()
        self.connect.connectors[NAME].offsets = offsets if offsets is not None else position(30)
        self.connect.requests.clear()
        self.journal.clear()

    async def applying_on_change(
        self, state: str = "running", offsets: list[dict[str, Any]] | None = None, **kw: Any
    ) -> None:
        """The connector created (``created``) with applyOnChange, its ConfigMap's content (the
        offsets it holds) already applied once."""
        await self.created(state, offsets, **kw)
        await self.put_document(document(offsets or position(30)))
        body = self.kube.resource(CONNECTORS, NS, NAME)
        body["spec"]["alterOffsets"]["applyOnChange"] = True
        self.kube.put_resource(CONNECTORS, body)
        for _ in range(6):
            await self.reconcile()
        assert self.status()["appliedOffsets"]["result"] == "Succeeded", self.status()
        self.connect.requests.clear()
        self.kube.events.clear()

    async def refresh_snapshot(self) -> None:
        """Take the cluster's connector snapshot now (the ConnectCluster's pass does it each interval):
        passes then read the connector from it, as an idle operator does."""
        snapshot = self.clusters.snapshot(NS, "local")
        assert snapshot is not None, "no Connect client resolved yet"
        await snapshot.refresh()

    async def put_document(self, text: str) -> None:
        await self.kube.create_configmap(NS, {"metadata": {"name": CM}, "data": {"offsets.json": text}})
        self.journal.clear()

    def annotate(self, **annotations: str) -> None:
        self.kube.annotate(CONNECTORS, NS, NAME, **annotations)

    async def reconcile(self) -> Outcome:
        """One check, as the controller runs it: an API-server error ends it as transient, to be
        retried; a pass that gave its worker back for the cluster's first listing
        (``Outcome.after``) runs again once the listing has landed."""
        try:
            return await checked(self.service, NS, NAME)
        except KubernetesError as error:
            return Outcome(transient_error=str(error))

    async def until_request_done(self, passes: int = 8) -> list[Outcome]:
        """Reconcile until the offsets annotation is gone (the request finished)."""
        outcomes = []
        for _ in range(passes):
            outcomes.append(await self.reconcile())
            if ANNOTATION_OFFSETS not in self.annotations():
                return outcomes
        raise AssertionError(f"request not finished after {passes} passes: {self.status()}")

    def annotations(self) -> dict[str, str]:
        return dict(self.kube.resource(CONNECTORS, NS, NAME)["metadata"]["annotations"])

    def status(self) -> dict[str, Any]:
        return dict(self.kube.resource(CONNECTORS, NS, NAME).get("status") or {})

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.status().get("conditions", []) if c["type"] == kind), None)

    def backups(self) -> dict[str, dict[str, Any]]:
        return self.kube.configmaps_labelled(BACKUPS)


@contextlib.asynccontextmanager
async def running_stack() -> AsyncIterator[Stack]:
    """A fresh namespace, its ConnectCluster and the fake worker, mounted for the block."""
    journal: list[str] = []
    kube = FakeKube(journal)
    kube.put_resource(
        CLUSTERS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "ConnectCluster",
            "metadata": {"name": "local", "namespace": NS},
            "spec": {"url": URL},
        },
    )
    connect = FakeConnect(URL, journal=journal)
    with respx.mock(assert_all_called=False) as router:
        connect.install(router)
        stack = Stack(kube, connect, journal)
        yield stack
        await stack.clusters.aclose()


def client_for(connect: FakeConnect) -> ConnectClient:
    """A real ConnectClient whose requests the fake worker answers (no respx router needed)."""
    return ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(connect.handle))


def held_listing(client: ConnectClient) -> asyncio.Event:
    """The client's listings wait until the returned event is set (a worker slow to list)."""
    listing = asyncio.Event()
    real = client.list_connectors_expanded

    async def slow_listing() -> Any:
        await listing.wait()
        return await real()

    client.list_connectors_expanded = slow_listing  # type: ignore[method-assign]
    return listing
