"""Sink connectors seek to a time: records with known timestamps in a real topic, ListOffsets by
timestamp through the ConnectCluster's spec.kafka, the alter with backup and stop -> change -> resume,
and the sink re-delivering exactly the records from that time on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    FILE_SINK,
    FILE_SOURCE,
    annotate,
    connect_offsets,
    create_cluster,
    create_connector,
    get_connector,
    patch_connector,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
)

BASE_MS = 1_700_000_000_000  # records at BASE + i seconds


def rfc3339(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def produce_timed(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # The records carry 2023 timestamps; under the broker's default 7-day retention the next retention
    # check (every 5 minutes) would delete them mid-test and the sink would find nothing to re-deliver.
    unbounded = {"retention.ms": "-1"}
    new_topic = NewTopic(topic, num_partitions=len(per_partition), replication_factor=1, config=unbounded)
    admin.create_topics([new_topic])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in per_partition.items():
        for i in range(count):
            value = json.dumps(f"p{partition}-r{i}").encode()
            producer.produce(topic, value=value, partition=partition, timestamp=BASE_MS + i * 1000)
    assert producer.flush(30) == 0


def test_sink_seeks_to_a_timestamp(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """seek-to T: partition 0 goes to its first record at or after T, partition 1 (all records older
    than T) to its end; the dry run shows it; the real run backs up, stops, alters, resumes, and the
    sink writes records 3..5 of partition 0 again -- nothing else."""
    topic, name, cm = f"seek-{unique}", f"seek-{unique}", "seek-offsets"
    produce_timed(stack["kafka_a"], topic, {0: 6, 1: 3})
    out = tmp_path / "sink.txt"
    create_cluster(custom, namespace, connect_url, kafka={"bootstrapServers": stack["kafka_a"]})
    create_connector(
        custom,
        namespace,
        name,
        {
            "class": FILE_SINK,
            "config": {"topics": topic, "file": str(out)},
            "listOffsets": {"toConfigMap": {"name": cm}},
        },
    )
    try:
        wait_for("sink wrote all 9 records", lambda: out.exists() and len(out.read_text().splitlines()) == 9)
        wait_for(
            "sink committed",
            lambda: (
                sorted(
                    (o["partition"]["kafka_partition"], o["offset"]["kafka_offset"])
                    for o in connect_offsets(connect, name)
                )
                == [(0, 6), (1, 3)]
            ),
        )
        when = rfc3339(BASE_MS + 3000)

        annotate(custom, namespace, name, connector_offsets="alter", seek_to=when, dry_run="true")
        body = wait_annotation_removed(custom, namespace, name)
        assert "0 added, 1 changed, 0 removed, 1 unchanged" in body["status"]["lastOffsetsOperation"]["message"]
        diff = json.loads(core.read_namespaced_config_map(cm, namespace).data["dry-run.json"])
        assert diff["changed"] == [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": 0},
                "old": {"kafka_offset": 6},
                "new": {"kafka_offset": 3},
            }
        ]
        assert len(out.read_text().splitlines()) == 9  # nothing re-delivered by a dry run

        annotate(custom, namespace, name, connector_offsets="alter", seek_to=when, stop_connector="true")
        body = wait_annotation_removed(custom, namespace, name, timeout=90)
        last = body["status"]["lastOffsetsOperation"]
        assert last["result"] == "Succeeded", last
        backup = json.loads(core.read_namespaced_config_map(last["backup"], namespace).data["offsets.json"])
        assert sorted(o["offset"]["kafka_offset"] for o in backup["offsets"]) == [3, 6]
        wait_connect_state(connect, name, "RUNNING")
        wait_for("records 3..5 of partition 0 re-delivered", lambda: len(out.read_text().splitlines()) == 12)
        assert sorted(out.read_text().splitlines()[9:]) == ["p0-r3", "p0-r4", "p0-r5"]

        # A time after every record: both partitions go to their end, nothing is re-delivered.
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        annotate(custom, namespace, name, connector_offsets="alter", seek_to="2099-01-01T00:00:00+02:00")
        wait_annotation_removed(custom, namespace, name)
        assert sorted(
            (o["partition"]["kafka_partition"], o["offset"]["kafka_offset"]) for o in connect_offsets(connect, name)
        ) == [(0, 6), (1, 3)]

        # Not a time: refused before anything happens.
        annotate(custom, namespace, name, connector_offsets="alter", seek_to="yesterday 10:00")
        found = wait_condition(custom, namespace, name, "OffsetsOperationFailed", reason="InvalidTimestamp")
        assert "RFC 3339" in found["message"]
        annotate(custom, namespace, name, connector_offsets=None, seek_to=None)
    finally:
        connect.delete(f"/connectors/{name}")


def test_seek_needs_a_sink_and_kafka_access(
    custom: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """A source connector, or a ConnectCluster without spec.kafka: a specific refusal, nothing changed."""
    source = tmp_path / "src.txt"
    source.write_text("x\n")
    create_cluster(custom, namespace, connect_url, kafka={"bootstrapServers": stack["kafka_a"]})
    create_cluster(custom, namespace, connect_url, name="nokafka")
    src, sink = f"seeksrc-{unique}", f"seeksink-{unique}"
    create_connector(
        custom,
        namespace,
        src,
        {"class": FILE_SOURCE, "state": "stopped", "config": {"file": str(source), "topic": f"t-{unique}"}},
    )
    create_connector(
        custom,
        namespace,
        sink,
        {"class": FILE_SINK, "state": "stopped", "config": {"topics": f"t-{unique}", "file": str(tmp_path / "o")}},
        cluster="nokafka",
    )
    try:
        for name in (src, sink):
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
            annotate(custom, namespace, name, connector_offsets="alter", seek_to="2026-11-21T10:00:00Z")
        found = wait_condition(custom, namespace, src, "OffsetsOperationFailed", reason="NotASink")
        assert "needs a sink connector; Connect reports type source" in found["message"]
        found = wait_condition(custom, namespace, sink, "OffsetsOperationFailed", reason="SeekFailed")
        assert "ConnectCluster nokafka has no spec.kafka" in found["message"]
        assert connect_offsets(connect, sink) == []
        assert get_connector(custom, namespace, sink)["metadata"]["annotations"]["connect-offsets.io/seek-to"]
    finally:
        connect.delete(f"/connectors/{src}")
        connect.delete(f"/connectors/{sink}")
