"""A KafkaMirrorMaker2 whose target is not the Connect cluster's own Kafka (issue 23), on the real stack.

MirrorMaker 2 run as Connect connectors writes its records through the worker's producer: into
the worker's Kafka cluster (the stack's ``kafka_a``), whatever ``target.cluster.bootstrap.servers``
says. With the aliases reversed (source = kafka_a, target = kafka_b) the mirror used to write into
its own source, where its output matched the mirror again: dozens of ``east.east.east.…`` topics
on both clusters within minutes. The operator now compares the cluster ids first.

Covers: the reversed mirror creates no connector and no topic on either cluster over several
drift passes, with a condition naming both ids; swapping the aliases mirrors records into the
worker's cluster; reversing a running mirror stops (not deletes) its connectors with a Warning
Event; ``writeToTarget: producerOverride`` mirrors into kafka_b through ``producer.override.*`` on a
worker whose policy allows it, and is refused with Connect's own message by one whose policy is
``None`` (a dedicated worker), creating nothing there.
"""

from __future__ import annotations

import contextlib
import copy
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from connect_offsets.vocabulary import MIRRORS as PLURAL
from tests.conftest import OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.support import (
    GROUP,
    VERSION,
    connect_state,
    connector_config,
    create_cluster,
    create_mm2,
    free_port,
    get_mm2,
    read_topic,
    wait_events,
    wait_mm2_condition,
)

KINDS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
pytestmark = pytest.mark.xdist_group("mirrormaker2")  # runs MirrorMaker 2: see test_mirrormaker2.py


def cluster_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer: its handle serves the future
    found: str = admin.describe_cluster().result(timeout=20).cluster_id
    return found


def topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).topics)


def mirror_topics(bootstrap: str, *aliases: str) -> set[str]:
    """The topics a mirror of these aliases could create: every name MirrorMaker 2 gives a topic
    holds an alias (``<source>.<topic>``, ``<source>.checkpoints.internal``,
    ``mm2-offset-syncs.<target>.internal``), except the heartbeat connector's ``heartbeats``, which
    only the MirrorMaker 2 tests create, one after another in their xdist group. Topics the other
    tests create meanwhile are not among them."""
    return {t for t in topics(bootstrap) if t == "heartbeats" or any(alias in t for alias in aliases)}


def drop_mirror_topics(stack: dict[str, Any], east: str, west: str) -> None:
    """Delete what a mirror of these (unique) aliases created on either cluster: other tests mirror
    the same two clusters and count the topics and partitions they see."""
    for bootstrap in (stack["kafka_a"], stack["kafka_b"]):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        doomed = [t for t in topics(bootstrap) if t.startswith(f"{east}.") or t == f"mm2-offset-syncs.{west}.internal"]
        for future in (admin.delete_topics(doomed, operation_timeout=30) if doomed else {}).values():
            future.result(timeout=40)


def produce(bootstrap: str, topic: str, count: int) -> list[bytes]:
    values = [f"record-{i}".encode() for i in range(count)]
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0
    return values


def mirror_spec(
    source: str, target: str, topic: str, write_to_target: str | None = None, *, heartbeats: bool = True
) -> dict[str, Any]:
    """All three connectors; ``heartbeats=False`` leaves out the heartbeat connector, which would
    create a ``heartbeats`` topic on the target that every later mirror from it replicates."""
    mirror: dict[str, Any] = {
        "sourceCluster": source,
        "targetCluster": target,
        "topicsPattern": topic,
        "sourceConnector": {
            "tasksMax": 1,
            "config": {
                "replication.factor": 1,
                "offset-syncs.topic.replication.factor": 1,
                "heartbeats.replication.enabled": False,  # B may hold others' heartbeats
                "sync.topic.acls.enabled": False,
                "refresh.topics.interval.seconds": 5,
            },
        },
        "checkpointConnector": {"config": {"checkpoints.topic.replication.factor": 1}},
    }
    if heartbeats:
        mirror["heartbeatConnector"] = {"config": {"heartbeats.topic.replication.factor": 1}}
    if write_to_target is not None:
        mirror["writeToTarget"] = write_to_target
    return mirror


def connector_names(source: str, target: str) -> list[str]:
    return [f"{source}->{target}.{kind}" for kind in KINDS]


@contextlib.contextmanager
def mirror_resource(
    custom: Any,
    namespace: str,
    name: str,
    clusters: list[dict[str, Any]],
    mirror: dict[str, Any],
    connect: httpx.Client,
    stack: dict[str, Any],
) -> Iterator[None]:
    """A KafkaMirrorMaker2 for the block; afterwards its connectors and the topics it made are gone."""
    create_mm2(custom, namespace, name, clusters, [mirror])
    names = connector_names(mirror["sourceCluster"], mirror["targetCluster"])
    try:
        yield
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for(
            "connectors deleted with the resource",
            lambda: not set(names) & set(connect.get("/connectors").json()),
            timeout=90,
        )
        drop_mirror_topics(stack, mirror["sourceCluster"], mirror["targetCluster"])


@pytest.fixture
def aliases() -> Iterator[tuple[str, str, str]]:
    unique = uuid.uuid4().hex[:6]
    yield f"east{unique}", f"west{unique}", f"orders-{unique}"


@pytest.mark.timeout(420)
def test_reversed_mirror_creates_nothing_and_the_right_direction_mirrors(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    aliases: tuple[str, str, str],
) -> None:
    east, west, topic = aliases
    kafka_a, kafka_b = stack["kafka_a"], stack["kafka_b"]  # kafka_a is the Connect worker's cluster
    id_a, id_b = cluster_id(kafka_a), cluster_id(kafka_b)
    assert connect.get("/").json()["kafka_cluster_id"] == id_a
    names = connector_names(east, west)
    reversed_clusters = [{"alias": east, "bootstrapServers": kafka_a}, {"alias": west, "bootstrapServers": kafka_b}]
    right_clusters = [{"alias": east, "bootstrapServers": kafka_b}, {"alias": west, "bootstrapServers": kafka_a}]
    produce(kafka_a, topic, 5)
    before_a, before_b = mirror_topics(kafka_a, east, west), mirror_topics(kafka_b, east, west)
    create_cluster(custom, namespace, connect_url)
    name = "reversed"
    with mirror_resource(custom, namespace, name, reversed_clusters, mirror_spec(east, west, topic), connect, stack):
        ready = wait_mm2_condition(custom, namespace, name, "Ready", reason="TargetIsNotConnectCluster", status="False")
        assert id_a in ready["message"] and id_b in ready["message"], ready["message"]
        assert "into its source" in ready["message"] and "writeToTarget: producerOverride" in ready["message"]
        entries = {e["name"]: e for e in get_mm2(custom, namespace, name)["status"]["connectors"]}
        assert sorted(entries) == sorted(names)
        assert all(e["reason"] == "TargetIsNotConnectCluster" and not e["ready"] for e in entries.values())

        time.sleep(16)  # three drift passes (5 s each): still nothing may happen
        assert not set(names) & set(connect.get("/connectors").json())
        assert mirror_topics(kafka_a, east, west) == before_a
        assert mirror_topics(kafka_b, east, west) == before_b

        # The right direction: source kafka_b, target kafka_a (the worker's cluster).
        values = produce(kafka_b, topic, 5)
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, {"spec": {"clusters": right_clusters}}
        )
        wait_mm2_condition(custom, namespace, name, "Ready", reason="ConnectorsReady")
        assert read_topic(kafka_a, f"{east}.{topic}", 5, timeout=90) == values
        assert f"{east}.{topic}" not in topics(kafka_b)

        # Reversed again while running (a re-pointed cluster looks the same to the operator):
        # stopped, not deleted, and said so.
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, {"spec": {"clusters": copy.deepcopy(reversed_clusters)}}
        )
        wait_mm2_condition(custom, namespace, name, "Ready", reason="TargetIsNotConnectCluster", status="False")
        for connector in names:
            wait_for(f"{connector} stopped", lambda c=connector: connect_state(connect, c) == "STOPPED", timeout=60)
        stopped = wait_events(core, namespace, name, "MirrorStopped", count=len(names))
        assert sorted(e.message.split(" ", 1)[0] for e in stopped) == sorted(names), [e.message for e in stopped]
        assert all(e.type == "Warning" and id_b in e.message for e in stopped)
        config = connector_config(connect, names[0])
        assert config["source.cluster.bootstrap.servers"] == kafka_b  # the config of the last allowed pass
        assert f"{east}.{east}.{topic}" not in topics(kafka_a) | topics(kafka_b)


@pytest.mark.timeout(300)
def test_producer_override_writes_into_the_target(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    aliases: tuple[str, str, str],
) -> None:
    """The stack's worker runs with ``connector.client.config.override.policy=All``."""
    east, west, topic = aliases
    kafka_a, kafka_b = stack["kafka_a"], stack["kafka_b"]
    names = connector_names(east, west)[:2]
    clusters = [{"alias": east, "bootstrapServers": kafka_a}, {"alias": west, "bootstrapServers": kafka_b}]
    values = produce(kafka_a, topic, 5)
    create_cluster(custom, namespace, connect_url)
    mirror = mirror_spec(east, west, topic, "producerOverride", heartbeats=False)
    with mirror_resource(custom, namespace, "override", clusters, mirror, connect, stack):
        wait_mm2_condition(custom, namespace, "override", "Ready", reason="ConnectorsReady")
        for connector in names:
            config = connector_config(connect, connector)
            assert config["producer.override.bootstrap.servers"] == kafka_b, connector
        assert read_topic(kafka_b, f"{east}.{topic}", 5, timeout=90) == values
        time.sleep(6)  # a refresh of MM2's topic list: its output must not become its input
        assert not {t for t in topics(kafka_a) if t.startswith(f"{east}.")}
        assert f"{east}.{east}.{topic}" not in topics(kafka_b)


@pytest.mark.timeout(400)
def test_producer_override_refused_by_the_worker_policy_creates_nothing(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    aliases: tuple[str, str, str],
) -> None:
    east, west, topic = aliases
    worker = DedicatedWorker(name="nooverride", extra_props=("connector.client.config.override.policy=None",))
    worker.start()
    try:
        create_cluster(custom, namespace, worker.url, name="strict")
        clusters = [
            {"alias": east, "bootstrapServers": stack["kafka_a"]},
            {"alias": west, "bootstrapServers": stack["kafka_b"]},
        ]
        create_mm2(
            custom,
            namespace,
            "strict",
            clusters,
            [mirror_spec(east, west, topic, "producerOverride")],
            cluster="strict",
        )
        ready = wait_mm2_condition(
            custom, namespace, "strict", "Ready", reason="ProducerOverrideRefused", status="False"
        )
        # Connect's own words, verbatim: AbstractConnectorClientConfigOverridePolicy.
        assert (
            "producer.override.bootstrap.servers: The 'None' policy does not allow 'bootstrap.servers' to be "
            "overridden in the connector configuration." in ready["message"]
        ), ready["message"]
        time.sleep(11)  # two drift passes
        assert httpx.get(f"{worker.url}/connectors", timeout=10).json() == []
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "strict")
    finally:
        worker.stop()


@pytest.mark.timeout(400)
def test_an_allowlist_policy_without_bootstrap_servers_is_named_in_the_refusal(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    aliases: tuple[str, str, str],
) -> None:
    """Kafka Connect 4.2+ (KIP-1188): ``connector.client.config.override.policy=Allowlist`` with an
    allowlist that lacks ``bootstrap.servers``. Connect's refusal verbatim, and the settings the
    allowlist must name for this mirror."""
    east, west, topic = aliases
    worker = DedicatedWorker(
        name="allowlist",
        extra_props=(
            "connector.client.config.override.policy=Allowlist",
            "connector.client.config.override.allowlist=client.id",
        ),
    )
    worker.start()
    try:
        create_cluster(custom, namespace, worker.url, name="listed")
        clusters = [
            {"alias": east, "bootstrapServers": stack["kafka_a"]},
            {"alias": west, "bootstrapServers": stack["kafka_b"]},
        ]
        create_mm2(
            custom,
            namespace,
            "listed",
            clusters,
            [mirror_spec(east, west, topic, "producerOverride")],
            cluster="listed",
        )
        ready = wait_mm2_condition(
            custom, namespace, "listed", "Ready", reason="ProducerOverrideRefused", status="False"
        )
        message = ready["message"]
        assert "The 'Allowlist' policy does not allow 'bootstrap.servers' to be overridden" in message, message
        assert "connector.client.config.override.allowlist listing the settings this mirror overrides: " in message
        assert message.endswith("overrides: bootstrap.servers"), message
        assert httpx.get(f"{worker.url}/connectors", timeout=10).json() == []
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "listed")
    finally:
        worker.stop()


@pytest.mark.timeout(240)
def test_an_unreachable_target_creates_nothing_and_is_retried_with_back_off(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    aliases: tuple[str, str, str],
) -> None:
    east, west, topic = aliases
    dead = f"127.0.0.1:{free_port()}"
    names = connector_names(east, west)
    clusters = [{"alias": east, "bootstrapServers": stack["kafka_b"]}, {"alias": west, "bootstrapServers": dead}]
    create_cluster(custom, namespace, connect_url)
    create_mm2(custom, namespace, "unreachable", clusters, [mirror_spec(east, west, topic)])
    try:
        ready = wait_mm2_condition(
            custom, namespace, "unreachable", "Ready", reason="MirrorClusterUnreachable", status="False"
        )
        assert dead in ready["message"] and "nothing is created" in ready["message"], ready["message"]
        wait_for("a second, backed-off retry", lambda: "retrying in 4s" in operator.log(), timeout=90)
        assert not set(names) & set(connect.get("/connectors").json())
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "unreachable")
