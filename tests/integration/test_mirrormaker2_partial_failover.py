"""A partial group failover and a failed declared failover, on the real stack (issue 46, items 1 and 5).

MirrorMaker 2 B -> A (the stack's worker, whose Kafka is A) with checkpoints every second:

* Group ``app`` consumed ``t`` (mirrored) and ``u`` (not mirrored) on B. Its failover is partial:
  ``u-0`` cannot be translated. Asked with ``connect-offsets.io/failover-group`` it is refused
  (``UntranslatablePartitions``), nothing committed on A, and the record lists each partition: the
  translated ``<b>.t-0`` with its offset, ``u-0`` with ``TopicNotReplicated``. Asked again with
  ``connect-offsets.io/allow-partial=true`` it commits ``<b>.t-0`` at the checkpoint's translation,
  and only that.
* The wedge (item 1): group ``busy`` declared in ``spec.mirrors[].groupFailover`` while a consumer
  of it is active on A fails (``ConsumerGroupActive``) in the current generation. The resource
  then still answers a ``list`` annotation on its source connector (before the fix every pass
  raised ``UnboundLocalError``, the status froze and annotations were never answered), and the
  failed group is not tried again: nothing is committed for it even after its consumer left.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kubernetes.client.exceptions import ApiException

from connect_offsets.clients.kafka_groups import KafkaGroups
from connect_offsets.vocabulary import MIRRORS
from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate_mm2,
    create_cluster,
    create_mm2,
    get_mm2,
    read_topic,
    wait_mm2_annotations_removed,
    watch_until,
)

pytestmark = pytest.mark.local_stack


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"r-{i}".encode(), partition=0)
    assert producer.flush(20) == 0


def _commit(bootstrap: str, group: str, offsets: dict[str, int]) -> None:
    """Commit ``offsets`` (topic: offset, partition 0) for ``group``, as a consumer that read them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, 0, o) for t, o in offsets.items()])
    admin.alter_consumer_group_offsets([request])[group].result(timeout=30)


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=20)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}


def _record(custom: Any, namespace: str, mirror: str, group: str, key: str, timeout: float = 120) -> dict[str, Any]:
    """The group's newest failover record that has a result and whose request_id (or source) is ``key``."""

    def check(body: dict[str, Any]) -> dict[str, Any] | None:
        for record in reversed((body.get("status") or {}).get("groupFailovers") or []):
            mine = record.get("source") == "spec" if key == "spec" else record.get("requestId") == key
            if record.get("group") == group and record.get("result") and mine:
                return dict(record)
        return None

    return watch_until(custom, namespace, MIRRORS, mirror, f"failover record of {group} ({key})", check, timeout)


@pytest.mark.timeout(600)
def test_a_partial_failover_is_refused_then_allowed_and_a_failed_declared_one_does_not_wedge(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    unique: str,
) -> None:
    kafka_a, kafka_b = stack["kafka_a"], stack["kafka_b"]
    b, a = f"pb{unique}", f"pa{unique}"
    t, u = f"pt-{unique}", f"pu-{unique}"
    app, busy, mirror = f"app-{unique}", f"busy-{unique}", f"partial-{unique}"
    source_connector = f"{b}->{a}.MirrorSourceConnector"
    remote, checkpoints_topic = f"{b}.{t}", f"{b}.checkpoints.internal"
    create_cluster(custom, namespace, connect_url)
    try:
        _produce(kafka_b, t, 20)
        _produce(kafka_b, u, 5)
        _commit(kafka_b, app, {t: 20, u: 5})
        _commit(kafka_b, busy, {t: 10})
        create_mm2(
            custom,
            namespace,
            mirror,
            [{"alias": b, "bootstrapServers": kafka_b}, {"alias": a, "bootstrapServers": kafka_a}],
            [
                {
                    "sourceCluster": b,
                    "targetCluster": a,
                    "topicsPattern": t,
                    "sourceConnector": {
                        "config": {
                            "replication.factor": 1,
                            "offset-syncs.topic.replication.factor": 1,
                            "heartbeats.replication.enabled": False,
                            "sync.topic.acls.enabled": False,
                            "refresh.topics.interval.seconds": 5,
                            "offset.lag.max": 10,
                        },
                        "listOffsets": {"toConfigMap": {"name": f"{mirror}-offsets"}},
                    },
                    "checkpointConnector": {
                        "config": {
                            "checkpoints.topic.replication.factor": 1,
                            "emit.checkpoints.interval.seconds": 1,
                            "refresh.groups.interval.seconds": 5,
                            "groups.exclude": "console-consumer-.*, __.*",
                        }
                    },
                }
            ],
        )
        assert len(read_topic(kafka_a, remote, 20, timeout=120)) == 20
        groups = KafkaGroups(timeout=10)

        def checkpointed(group: str, upstream: int) -> int | None:
            read = asyncio.run(
                groups.checkpoints({"bootstrap.servers": kafka_a}, checkpoints_topic, group, namespace=namespace)
            )
            found = read.checkpoints.get((remote, 0))
            return found.downstream if found is not None and found.upstream == upstream else None

        translated = wait_for("app's checkpoint at 20", lambda: checkpointed(app, 20), timeout=180, interval=2)
        wait_for("busy's checkpoint at 10", lambda: checkpointed(busy, 10) is not None, timeout=180, interval=2)

        # Partial: refused, nothing committed, every partition listed with what would happen to it.
        annotate_mm2(custom, namespace, mirror, {"failover-group": app, "request-id": "r1"})
        refused = _record(custom, namespace, mirror, app, "r1")
        assert (refused["result"], refused["reason"]) == ("Failed", "UntranslatablePartitions"), refused
        assert f"{remote}-0: translated to offset {translated}" in refused["message"], refused["message"]
        assert f"{u}-0 (offset 5): TopicNotReplicated" in refused["message"], refused["message"]
        assert "allow-partial=true" in refused["message"]
        assert _committed(kafka_a, app) == {}

        # Allowed: the translated partition is committed, and only it.
        annotate_mm2(custom, namespace, mirror, {"failover-group": app, "request-id": "r2", "allow-partial": "true"})
        done = _record(custom, namespace, mirror, app, "r2")
        assert (done["result"], done["partitions"]) == ("Succeeded", 1), done
        assert (
            "partial (allowPartial)" in done["message"] and f"{u}-0 (offset 5): TopicNotReplicated" in done["message"]
        )
        assert _committed(kafka_a, app) == {(remote, 0): translated}

        # The wedge: a declared failover of busy while it has an active consumer on A.
        active = Consumer({"bootstrap.servers": kafka_a, "group.id": busy, "auto.offset.reset": "latest"})
        try:
            active.subscribe([remote])
            wait_for("the consumer joined", lambda: active.poll(0.5) is not None or bool(active.assignment()), 60)
            body = get_mm2(custom, namespace, mirror)
            mirrors = body["spec"]["mirrors"]
            mirrors[0]["groupFailover"] = {"groups": [busy]}
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, MIRRORS, mirror, {"spec": {"mirrors": mirrors}}
            )
            failed = _record(custom, namespace, mirror, busy, "spec")
            assert (failed["result"], failed["reason"]) == ("Failed", "ConsumerGroupActive"), failed
            generation = get_mm2(custom, namespace, mirror)["metadata"]["generation"]
            assert failed["generation"] == generation
        finally:
            active.close()

        # The resource still answers: a list of its source connector's offsets.
        annotate_mm2(
            custom, namespace, mirror, {"connector-offsets": "list", "mirrormaker-connector": source_connector}
        )
        body = wait_mm2_annotations_removed(custom, namespace, mirror)
        operation = body["status"]["lastOffsetsOperation"]
        assert (operation["operation"], operation["result"]) == ("list", "Succeeded"), operation
        # The failed declared group stays Failed, its own reason, not tried again.
        record = next(r for r in body["status"]["groupFailovers"] if r["group"] == busy and r["source"] == "spec")
        assert (record["result"], record["reason"], record["time"]) == ("Failed", "ConsumerGroupActive", failed["time"])
        since = time.monotonic()
        wait_for("two more drift intervals", lambda: time.monotonic() - since > 12, timeout=30, interval=1)
        assert _committed(kafka_a, busy) == {}
    finally:
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, mirror)
        wait_for(
            "the mirror's connectors deleted",
            lambda: not [c for c in connect.get("/connectors").json() if c.startswith(f"{b}->")],
            timeout=90,
        )
        admin_a, admin_b = AdminClient({"bootstrap.servers": kafka_a}), AdminClient({"bootstrap.servers": kafka_b})
        for admin, doomed in (
            (admin_a, [remote, checkpoints_topic]),
            (admin_b, [t, u, f"mm2-offset-syncs.{a}.internal"]),
        ):
            present = [x for x in doomed if x in admin.list_topics(timeout=20).topics]
            for future in (admin.delete_topics(present, operation_timeout=30) if present else {}).values():
                with contextlib.suppress(Exception):
                    future.result(timeout=40)
