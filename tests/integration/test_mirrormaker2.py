"""KafkaMirrorMaker2 on the real stack: two KRaft clusters, one Connect worker, the operator running.

Covers: connectors created with the right names and settings; list of the source connector
(partition {cluster, partition, topic}, last replicated offset) into Strimzi's ConfigMap key;
stop + alter to replay from upstream offset N (written as N - 1) + resume; a typo in
mirrormaker-connector; a checkpoint alter to a non-zero offset refused before any call; reset
with reset-offset-syncs=true (offset-syncs topic deleted, replay from the start); removal of the
connectors with the resource.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from connect_offsets.vocabulary import MIRRORS as PLURAL
from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate_mm2,
    connect_log,
    connect_offsets,
    connect_state,
    connector_config,
    create_cluster,
    create_mm2,
    get_mm2,
    offsets_requests,
    topic_values,
    wait_connect_state,
    wait_events,
    wait_mm2_annotations_removed,
    wait_mm2_condition,
)

# MirrorMaker 2 replicates every heartbeats topic of its source cluster, whatever its topic filter: mirrors
# of other tests running at the same time would add partitions to this one's offsets. The tests that run
# MirrorMaker 2 connectors on the stack's Kafka clusters share one xdist worker, one after another.
pytestmark = pytest.mark.xdist_group("mirrormaker2")


def test_mirrormaker2_offsets_flow(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
) -> None:
    unique = uuid.uuid4().hex[:6]
    east, west = f"east{unique}", f"west{unique}"
    topic = f"orders-{unique}"
    downstream = f"{east}.{topic}"
    source_name = f"{east}->{west}.MirrorSourceConnector"
    checkpoint_name = f"{east}->{west}.MirrorCheckpointConnector"
    heartbeat_name = f"{east}->{west}.MirrorHeartbeatConnector"
    source_key = f"{east}--{west}.MirrorSourceConnector.json"
    checkpoint_key = f"{east}--{west}.MirrorCheckpointConnector.json"
    cm = "mm2-offsets"

    producer = Producer({"bootstrap.servers": stack["kafka_b"]})
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=f"order-{i}".encode())
    producer.flush(10)

    mirrors = [
        {
            "sourceCluster": east,
            "targetCluster": west,
            "topicsPattern": topic,
            "groupsPattern": f"group-{unique}",
            "sourceConnector": {
                "tasksMax": 1,
                "config": {
                    "replication.factor": 1,
                    "offset-syncs.topic.replication.factor": 1,
                    "heartbeats.replication.enabled": False,  # B may hold others' heartbeats
                    "sync.topic.acls.enabled": False,
                    "refresh.topics.interval.seconds": 5,
                },
                "listOffsets": {"toConfigMap": {"name": cm}},
                "alterOffsets": {"fromConfigMap": {"name": cm}},
            },
            "checkpointConnector": {
                "tasksMax": 1,
                "config": {"checkpoints.topic.replication.factor": 1, "emit.checkpoints.interval.seconds": 5},
                "listOffsets": {"toConfigMap": {"name": cm}},
                "alterOffsets": {"fromConfigMap": {"name": cm}},
            },
            "heartbeatConnector": {"config": {"heartbeats.topic.replication.factor": 1}},
        }
    ]
    create_cluster(custom, namespace, connect_url)
    name = "mirror"
    clusters = [
        {"alias": east, "bootstrapServers": stack["kafka_b"]},
        {"alias": west, "bootstrapServers": stack["kafka_a"]},
    ]
    create_mm2(custom, namespace, name, clusters, mirrors)

    def set_source_state(state: str) -> None:
        mirrors[0]["sourceConnector"]["state"] = state
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, {"spec": {"mirrors": copy.deepcopy(mirrors)}}
        )

    try:
        wait_mm2_condition(custom, namespace, name, "Ready", reason="ConnectorsReady")
        config = connector_config(connect, source_name)
        assert config["source.cluster.bootstrap.servers"] == stack["kafka_b"]
        assert config["target.cluster.alias"] == west
        assert config["topics"] == topic
        assert [v.decode() for v in topic_values(stack["kafka_a"], downstream, 10)] == [f"order-{i}" for i in range(10)]
        partition = {"cluster": east, "partition": 0, "topic": topic}
        wait_for(
            "MM2 committed offset 9",
            lambda: connect_offsets(connect, source_name) == [{"partition": partition, "offset": {"offset": 9}}],
        )

        # a connector dropped from the mirror is deleted in Connect
        wait_connect_state(connect, heartbeat_name, "RUNNING")
        del mirrors[0]["heartbeatConnector"]
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, {"spec": {"mirrors": copy.deepcopy(mirrors)}}
        )
        wait_for("heartbeat connector deleted", lambda: connect_state(connect, heartbeat_name) is None)
        wait_for(
            "status lists the two remaining connectors",
            lambda: (
                [c["name"] for c in get_mm2(custom, namespace, name)["status"]["connectors"]]
                == [source_name, checkpoint_name]
            ),
        )

        # list
        annotate_mm2(custom, namespace, name, {"connector-offsets": "list", "mirrormaker-connector": source_name})
        wait_mm2_annotations_removed(custom, namespace, name)
        listed = json.loads(core.read_namespaced_config_map(cm, namespace).data[source_key])
        assert listed == {"offsets": [{"partition": partition, "offset": {"offset": 9}}]}

        # a typo in the connector name: a condition listing the valid names, nothing else
        annotate_mm2(custom, namespace, name, {"connector-offsets": "list", "mirrormaker-connector": "east->west.typo"})
        found = wait_mm2_condition(custom, namespace, name, "InvalidAnnotation", reason="UnknownConnector")
        assert source_name in found["message"] and checkpoint_name in found["message"]
        annotate_mm2(custom, namespace, name, {"connector-offsets": None, "mirrormaker-connector": None})

        # checkpoint offsets must be exactly 0: refused before any call, connector untouched
        checkpoint_before = connect_offsets(connect, checkpoint_name)
        core.patch_namespaced_config_map(
            cm,
            namespace,
            {
                "data": {
                    checkpoint_key: json.dumps(
                        {
                            "offsets": [
                                {
                                    "partition": {"group": f"group-{unique}", "topic": topic, "partition": 0},
                                    "offset": {"offset": 5},
                                }
                            ]
                        }
                    )
                }
            },
        )
        annotate_mm2(custom, namespace, name, {"connector-offsets": "alter", "mirrormaker-connector": checkpoint_name})
        found = wait_mm2_condition(custom, namespace, name, "OffsetsOperationFailed", reason="InvalidOffsets")
        assert "only accepted value is 0" in found["message"]
        assert connect_state(connect, checkpoint_name) == "RUNNING"
        assert connect_offsets(connect, checkpoint_name) == checkpoint_before
        # the worker's own request log (local stack only): the refused document never reached Connect
        assert (
            stack.get("external")
            or [r for r in offsets_requests(connect_log(stack), {checkpoint_name}) if r.method != "GET"] == []
        )
        annotate_mm2(custom, namespace, name, {"connector-offsets": None, "mirrormaker-connector": None})

        # replay from upstream offset 5: MirrorSourceConnector resumes at offset + 1; the operator
        # takes the request in those terms ({"replayFrom": 5}) and stores 4
        set_source_state("stopped")
        wait_connect_state(connect, source_name, "STOPPED")
        listed["offsets"][0]["offset"] = {"replayFrom": 5}
        core.patch_namespaced_config_map(cm, namespace, {"data": {source_key: json.dumps(listed)}})
        annotate_mm2(custom, namespace, name, {"connector-offsets": "alter", "mirrormaker-connector": source_name})
        body = wait_mm2_annotations_removed(custom, namespace, name)
        assert connect_offsets(connect, source_name) == [{"partition": partition, "offset": {"offset": 4}}]
        assert body["status"]["lastOffsetsOperation"]["operation"] == "alter"
        set_source_state("running")
        values = [v.decode() for v in topic_values(stack["kafka_a"], downstream, 15)]
        assert values[10:] == [f"order-{i}" for i in range(5, 10)]

        # safe operations on a MirrorMaker 2 connector: a dry run while it runs, then
        # stop -> change -> resume with a request id
        wait_connect_state(connect, source_name, "RUNNING")
        wait_for(
            "MM2 committed offset 9 again",
            lambda: connect_offsets(connect, source_name) == [{"partition": partition, "offset": {"offset": 9}}],
        )
        listed["offsets"][0]["offset"] = {"replayFrom": 7}
        core.patch_namespaced_config_map(cm, namespace, {"data": {source_key: json.dumps(listed)}})
        annotate_mm2(
            custom,
            namespace,
            name,
            {"connector-offsets": "alter", "mirrormaker-connector": source_name, "dry-run": "true"},
        )
        body = wait_mm2_annotations_removed(custom, namespace, name)
        assert "dry-run" not in str(body["metadata"].get("annotations") or {})
        diff = json.loads(core.read_namespaced_config_map(cm, namespace).data[f"dry-run.{source_key}"])
        assert diff["changed"] == [{"partition": partition, "old": {"offset": 9}, "new": {"offset": 6}}]
        assert connect_state(connect, source_name) == "RUNNING"
        assert connect_offsets(connect, source_name) == [{"partition": partition, "offset": {"offset": 9}}]
        annotate_mm2(
            custom,
            namespace,
            name,
            {
                "connector-offsets": "alter",
                "mirrormaker-connector": source_name,
                "stop-connector": "true",
                "request-id": f"replay-{unique}",
            },
        )
        body = wait_mm2_annotations_removed(custom, namespace, name)
        entry = next(c for c in body["status"]["connectors"] if c["name"] == source_name)
        assert entry["lastOffsetsOperation"]["result"] == "Succeeded", entry
        assert entry["lastOffsetsOperation"]["requestId"] == f"replay-{unique}"
        assert "pendingOffsetsOperation" not in entry
        assert body["status"]["handledRequestIds"] == [f"replay-{unique}"]
        wait_connect_state(connect, source_name, "RUNNING")
        values = [v.decode() for v in topic_values(stack["kafka_a"], downstream, 18)]
        assert values[15:] == [f"order-{i}" for i in range(7, 10)]

        # full reset: connector offsets and the offset-syncs topic on the source cluster
        set_source_state("stopped")
        wait_connect_state(connect, source_name, "STOPPED")
        syncs_topic = f"mm2-offset-syncs.{west}.internal"
        admin = AdminClient({"bootstrap.servers": stack["kafka_b"]})
        assert syncs_topic in admin.list_topics(timeout=10).topics
        reset_at_ms = int(time.time() * 1000)
        annotate_mm2(
            custom,
            namespace,
            name,
            {"connector-offsets": "reset", "mirrormaker-connector": source_name, "reset-offset-syncs": "true"},
        )
        body = wait_mm2_annotations_removed(custom, namespace, name)
        assert connect_offsets(connect, source_name) == []
        assert "offset-syncs: deleted topic" in body["status"]["lastOffsetsOperation"]["message"]
        assert wait_events(core, namespace, name, "OffsetSyncsReset")
        set_source_state("running")
        values = [v.decode() for v in topic_values(stack["kafka_a"], downstream, 28)]
        assert values[18:] == [f"order-{i}" for i in range(10)]
        wait_for("offset-syncs topic recreated", lambda: syncs_topic in admin.list_topics(timeout=10).topics)
        consumer = Consumer(
            {"bootstrap.servers": stack["kafka_b"], "group.id": f"probe-{unique}", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([syncs_topic])
        timestamps = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                timestamps.append(message.timestamp()[1])
        consumer.close()
        assert timestamps, "MM2 wrote no offset syncs after the reset"
        assert min(timestamps) >= reset_at_ms
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for(
            "MM2 connectors removed with the resource",
            lambda: connect_state(connect, source_name) is None and connect_state(connect, checkpoint_name) is None,
        )
