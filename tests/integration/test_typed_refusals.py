"""Typed validation on the real stack: a sink connector's bad alter and bad backup never reach Connect.

Issue 21, item 6. The sink checks (Kafka topic-partitions, offsets, topics the connector consumes)
were proven by unit tests only, and ``restore`` skipped them altogether: a backup ConfigMap edited
by hand reached Connect, which reports such mistakes as a 500 after the connector was stopped. Here
a real FileStreamSink connector gets two valid alters (each backed up first), then a bad alter
document and a restore of a backup edited to hold bad entries. Each refusal must name the entry and
what was expected, and the worker's own request log must show no PATCH beyond the two valid ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from tests.conftest import wait_for
from tests.integration.support import (
    annotate,
    connect_log,
    connect_offsets,
    create_cluster,
    create_connector,
    get_connector,
    offsets_requests,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.local_stack]  # reads the local worker's request log

FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def sink_offsets(topic: str, offset: int, partition: Any = 0) -> dict[str, Any]:
    return {
        "offsets": [
            {"partition": {"kafka_topic": topic, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}
        ]
    }


def last_operation(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    status = get_connector(custom, namespace, name).get("status") or {}
    return dict(status.get("lastOffsetsOperation") or {})


def test_sink_alter_and_restore_refusals_never_patch(
    stack: dict[str, Any],
    operator: Any,
    connect: httpx.Client,
    connect_url: str,
    core: Any,
    custom: Any,
    namespace: str,
    tmp_path: Path,
    unique: str,
) -> None:
    topic, name, cm = f"typed-{unique}", f"typed-sink-{unique}", "sink-offsets"
    producer = Producer({"bootstrap.servers": stack["kafka_a"]})
    for i in range(6):
        producer.produce(topic, value=f"r{i}".encode())
    producer.flush(10)
    create_cluster(custom, namespace, connect_url)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": cm}, "data": {"offsets.json": "{}"}})
    spec = {
        "class": FILE_SINK,
        "tasksMax": 1,
        "state": "stopped",
        "config": {"file": str(tmp_path / "out.txt"), "topics": topic},
        "alterOffsets": {"fromConfigMap": {"name": cm}},
    }
    create_connector(custom, namespace, name, spec)
    log = connect_log(stack)

    def patches() -> list[Any]:  # applied ones: a 409 while the shared worker rebalances changed nothing
        return [r for r in offsets_requests(log, {name}) if r.method == "PATCH" and r.is_change]

    def alter(document: dict[str, Any]) -> None:
        core.patch_namespaced_config_map(cm, namespace, {"data": {"offsets.json": json.dumps(document)}})
        annotate(custom, namespace, name, connector_offsets="alter")

    try:
        wait_connect_state(connect, name, "STOPPED")
        for at in (2, 5):  # two valid alters: the second one's backup holds offset 2
            alter(sink_offsets(topic, at))
            wait_annotation_removed(custom, namespace, name)
            assert last_operation(custom, namespace, name)["result"] == "Succeeded"
            assert connect_offsets(connect, name) == sink_offsets(topic, at)["offsets"]
        backup = last_operation(custom, namespace, name)["backup"]
        assert backup
        assert len(patches()) == 2

        # A bad alter: the partition as a string, a topic the connector does not consume, a negative offset.
        bad = {
            "offsets": [
                {"partition": {"kafka_topic": topic, "kafka_partition": "0"}, "offset": {"kafka_offset": 1}},
                {"partition": {"kafka_topic": f"other-{unique}", "kafka_partition": 0}, "offset": {"kafka_offset": 1}},
                {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": -1}},
            ]
        }
        alter(bad)
        refused = wait_condition(custom, namespace, name, "OffsetsOperationFailed", "True", reason="InvalidOffsets")
        for fragment in ("offsets[0].partition.kafka_partition", "offsets[1]", "offsets[2].offset.kafka_offset"):
            assert fragment in refused["message"], refused["message"]
        annotate(custom, namespace, name, connector_offsets=None)

        # A backup edited by hand: restore must refuse it with the same typed checks.
        core.patch_namespaced_config_map(
            backup, namespace, {"data": {"offsets.json": json.dumps(sink_offsets(topic, -3))}}
        )
        annotate(custom, namespace, name, connector_offsets="restore", restore_from=backup)
        refused = wait_condition(custom, namespace, name, "OffsetsOperationFailed", "True", reason="InvalidBackup")
        assert f"backup {backup} is not valid for this connector" in refused["message"]
        assert "offsets[0].offset.kafka_offset" in refused["message"]

        # Connect saw nothing but the two valid alters, and still has the second one's offsets.
        wait_for("the operator to settle", lambda: last_operation(custom, namespace, name)["result"] == "Failed")
        assert len(patches()) == 2, patches()
        assert connect_offsets(connect, name) == sink_offsets(topic, 5)["offsets"]
    finally:
        connect.delete(f"/connectors/{name}")
