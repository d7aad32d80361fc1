"""MirrorMaker 2 failover where the default setup hid gaps (issue 46), on the real stack.

* **Checkpoints written in transactions.** The stack's exactly-once worker (``connect-eos``:
  ``exactly.once.source.support=enabled``, its Kafka is cluster C) runs a MirrorMaker 2 B -> C with
  checkpoints, so every checkpoint batch is a transaction and the checkpoints topic holds commit
  markers after its records (checked: its end offset is past its last record). On site B a consumer
  group, and the group of a sink connector of site B (``connect-<name>``: a sink connector's offsets
  are its group's, which is all ``fromMirror`` reads; tests/integration/test_moving_offsets.py does
  the same with a running sink connector), consume ``t`` to offset N; more records follow. Then
  ``kubectl connect-offsets failover-group`` commits the translated offset on C, and a sink
  connector on C created with ``initialOffsets.fromMirror`` starts from its group's translated
  offset: each reads every record from there on once, none skipped (the records read again are
  counted and printed; ``read_again_after_failover`` says why they are not bounded here).
* **A chain of two mirrors.** MirrorMaker 2 never mirrors a topic back to a cluster it came from,
  so a two-hop topic needs three clusters: B -> C (alias ``y``: ``t`` becomes ``y.t`` on C,
  written through a producer override, the stack's workers use Kafka A) and C -> A (alias ``x``,
  with checkpoints: ``y.t`` becomes ``x.y.t`` on A), both in one KafkaMirrorMaker2 on the stack's
  worker. A group that consumed ``y.t`` on C to N fails over to ``x.y.t`` on A, its records
  checked one by one as above.

The test reads checkpoints itself with ``isolation.level=read_committed`` until the end of the
partition (librdkafka's end-of-partition event, not the record offsets: the commit markers are
never delivered, so counting offsets up to the end offset would never finish).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kubernetes.client.exceptions import ApiException

from connect_offsets.clients.kafka_groups import decode_checkpoint
from connect_offsets.vocabulary import MIRRORS
from tests.conftest import OperatorProcess, wait_for
from tests.integration.kafka_records import committed, consume, drop_topics, produce
from tests.integration.support import (
    FILE_SINK,
    GROUP,
    VERSION,
    create_cluster,
    create_connector,
    create_mm2,
    get_connector,
    get_mm2,
    read_topic,
)

pytestmark = pytest.mark.local_stack  # the stack's exactly-once worker and its third Kafka cluster

REPO = Path(__file__).resolve().parents[2]
STACK = [sys.executable, str(REPO / "hack" / "stack.py")]
PLUGIN = str(Path(sys.executable).parent / "kubectl-connect_offsets")
STRINGS = {
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
}
#: MirrorSourceConnector's offset.lag.max here: an offset sync at least every 10 records.
LAG_MAX = 10
#: Records on the source, and where the groups of the source site stopped.
TOTAL, N = 60, 35


@pytest.fixture(scope="module")
def third_site(stack: dict[str, Any]) -> dict[str, Any]:
    """Kafka C and the exactly-once worker on it, started if not running (``up`` only starts what is missing)."""
    subprocess.run([*STACK, "up", "connect-eos"], check=True, capture_output=True, timeout=300)
    info: dict[str, Any] = json.loads(subprocess.run([*STACK, "info"], check=True, capture_output=True).stdout)
    assert info["running"]["kafka-c"] and info["running"]["connect-eos"]
    return info


def plugin(stack: dict[str, Any], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    return subprocess.run([PLUGIN, *args], capture_output=True, text=True, env=env, timeout=timeout)


def committed_records(bootstrap: str, topic: str) -> list[Any]:
    """Every committed record of partition 0, read to the end of the partition (read_committed:
    records of open or aborted transactions and the markers are not delivered)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        records: list[Any] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return records
                continue
            records.append(message)
        raise AssertionError(f"{topic}: the end of partition 0 not reached in 60 s ({len(records)} records read)")
    finally:
        consumer.close()


def checkpoints(bootstrap: str, topic: str) -> dict[tuple[str, str, int], tuple[int, int]]:
    """The newest checkpoint per (group, topic, partition) in MirrorMaker 2's checkpoints topic."""
    found: dict[tuple[str, str, int], tuple[int, int]] = {}
    for message in committed_records(bootstrap, topic):
        checkpoint = decode_checkpoint(message.key(), message.value())
        found[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = (checkpoint.upstream, checkpoint.downstream)
    return found


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()


def source_config(**extra: Any) -> dict[str, Any]:
    return {
        "replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "heartbeats.replication.enabled": False,  # the source may hold others' heartbeats
        "sync.topic.acls.enabled": False,
        "refresh.topics.interval.seconds": 2,
        "offset.lag.max": LAG_MAX,
        **extra,
    }


#: Checkpoints every second; sink connectors' groups (connect-<name>) are excluded by default.
CHECKPOINT_CONFIG = {
    "checkpoints.topic.replication.factor": 1,
    "emit.checkpoints.interval.seconds": 1,
    "refresh.groups.interval.seconds": 2,
    "groups.exclude": "console-consumer-.*, __.*",
}


def fail_over(stack: dict[str, Any], namespace: str, mirror: str, group: str, remote: str, translated: int) -> None:
    """``failover-group``: the dry run shows the translation and commits nothing; then the group is
    committed at the translated offset on the target, and the KafkaMirrorMaker2 records it."""
    preview = plugin(stack, "failover-group", group, "--mirror", mirror, "-n", namespace, "--dry-run")
    assert preview.returncode == 0, (preview.stdout, preview.stderr)
    wanted = {"partition": {"kafka_topic": remote, "kafka_partition": 0}, "offset": {"kafka_offset": translated}}
    assert json.loads(preview.stdout)["offsets"] == [wanted], preview.stdout
    done = plugin(stack, "failover-group", group, "--mirror", mirror, "-n", namespace)
    assert done.returncode == 0, (done.stdout, done.stderr)


def read_again_after_failover(bootstrap: str, remote: str, group: str, upstream: int) -> int:
    """The group on the target reads every record from its translated offset on, once, none skipped
    (none of those it had not read on the source); returns how many it had read there already.

    Not bounded by ``offset.lag.max`` here: MirrorMaker 2 (3.5 and later, KAFKA-14666) keeps fewer
    offset syncs the older they are, so a group far behind the mirror's newest sync is translated
    further back (12 records with ``offset.lag.max`` 10, seen here). Re-reading is what MirrorMaker 2
    promises; skipping would be the bug."""
    read = consume(bootstrap, remote, group, None)
    first = int(read[0].removeprefix("r-"))
    assert read == [f"r-{i}" for i in range(first, TOTAL)]  # none skipped, none twice
    assert first <= upstream, f"records {upstream} to {first - 1} skipped"
    return upstream - first


def delete_mirror(custom: Any, namespace: str, mirror: str, worker: str, aliases: list[str]) -> None:
    with contextlib.suppress(ApiException):
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, mirror)
    with httpx.Client(base_url=worker, timeout=30) as client:
        wait_for(
            "the mirror's connectors deleted",
            lambda: not [c for c in client.get("/connectors").json() if c.split("->")[0] in aliases],
            timeout=90,
        )


@pytest.mark.timeout(600)
def test_failover_through_checkpoints_written_in_transactions(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    third_site: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    kafka_b, kafka_c, eos_url = third_site["kafka_b"], third_site["kafka_c"], third_site["connect_eos_url"]
    b, c = f"b{unique}", f"c{unique}"
    t, remote, checkpoints_topic = f"t-{unique}", f"b{unique}.t-{unique}", f"b{unique}.checkpoints.internal"
    group, sink_b, sink_a, mirror = f"orders-app-{unique}", f"sink-b-{unique}", f"sink-c-{unique}", f"dr-{unique}"
    sink_group = f"connect-{sink_b}"
    create_cluster(custom, namespace, eos_url)  # site C's Connect cluster: the exactly-once worker
    try:
        # Site B: a consumer group and a sink connector's group consume t to offset N; more records follow.
        produce(kafka_b, t, 0, N)
        for g in (group, sink_group):
            assert consume(kafka_b, t, g, N) == [f"r-{i}" for i in range(N)]
        produce(kafka_b, t, N, TOTAL)

        create_mm2(
            custom,
            namespace,
            mirror,
            [{"alias": b, "bootstrapServers": kafka_b}, {"alias": c, "bootstrapServers": kafka_c}],
            [
                {
                    "sourceCluster": b,
                    "targetCluster": c,
                    "topicsPattern": re.escape(t),
                    "sourceConnector": {"config": source_config()},
                    "checkpointConnector": {"config": CHECKPOINT_CONFIG},
                }
            ],
        )
        assert read_topic(kafka_c, remote, TOTAL, timeout=120) == [f"r-{i}".encode() for i in range(TOTAL)]
        wait_for(
            "checkpoints of both groups at upstream offset N",
            lambda: all(
                checkpoints(kafka_c, checkpoints_topic).get((g, remote, 0), (None,))[0] == N
                for g in (group, sink_group)
            ),
            timeout=180,
            interval=2,
        )
        # The exactly-once worker wrote them in transactions: a commit marker follows the last record
        # (what a reader counting record offsets up to the end offset never got past).
        last = committed_records(kafka_c, checkpoints_topic)[-1].offset()
        assert end_offset(kafka_c, checkpoints_topic) > last + 1
        found = checkpoints(kafka_c, checkpoints_topic)
        upstream, translated = found[(group, remote, 0)]

        fail_over(stack, namespace, mirror, group, remote, translated)
        assert committed(kafka_c, group) == {(remote, 0): translated}
        records = get_mm2(custom, namespace, mirror)["status"]["groupFailovers"]
        assert [(r["group"], r["result"], r.get("dryRun")) for r in records][-1] == (group, "Succeeded", None)
        again = read_again_after_failover(kafka_c, remote, group, upstream)
        print(f"group: committed {N} on B, translated {translated}, {again} record(s) read again on C")

        # The sink connector fails over with its data: created on C from its group's checkpoints.
        out = tmp_path / "out-c.txt"
        spec = {
            "class": FILE_SINK,
            "tasksMax": 1,
            "config": {"file": str(out), "topics": remote, **STRINGS},
            "initialOffsets": {"fromMirror": {"mirror": mirror, "sourceConnector": sink_b}},
        }
        create_connector(custom, namespace, sink_a, spec)

        def applied() -> dict[str, Any] | None:
            initial = (get_connector(custom, namespace, sink_a).get("status") or {}).get("initialOffsets") or {}
            return initial if initial.get("step") == "Applied" else None

        initial = wait_for(f"{sink_a}: initial offsets applied", applied, timeout=180)
        assert f"the group of connector {sink_b} through the checkpoints" in initial["message"], initial
        _, sink_translated = found[(sink_group, remote, 0)]
        wait_for("the sink on C wrote to the end", lambda: out.exists() and f"r-{TOTAL - 1}\n" in out.read_text(), 90)
        written = out.read_text().splitlines()
        start = int(written[0].removeprefix("r-"))
        assert start == sink_translated and written == [f"r-{i}" for i in range(start, TOTAL)]
        assert start <= N  # it resumes at or before where the group stopped on B: nothing skipped
        print(f"sink: stopped at {N} on B, resumed at {start} on C, {N - start} record(s) written again")
    finally:
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", sink_a)
        delete_mirror(custom, namespace, mirror, eos_url, [b])
        drop_topics(kafka_c, [remote, checkpoints_topic])
        drop_topics(kafka_b, [t, f"mm2-offset-syncs.{c}.internal"])


@pytest.mark.timeout(600)
def test_a_group_fails_over_along_a_chain_of_two_mirrors_to_a_two_hop_topic(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect_url: str,
    stack: dict[str, Any],
    third_site: dict[str, Any],
    unique: str,
) -> None:
    kafka_a, kafka_b, kafka_c = third_site["kafka_a"], third_site["kafka_b"], third_site["kafka_c"]
    y, x, a = f"y{unique}", f"x{unique}", f"a{unique}"
    t = f"t-{unique}"
    one_hop, two_hops = f"{y}.{t}", f"{x}.{y}.{t}"  # y.t on C, x.y.t on A
    checkpoints_topic, group, mirror = f"{x}.checkpoints.internal", f"chain-app-{unique}", f"chain-{unique}"
    create_cluster(custom, namespace, connect_url)  # the stack's worker: its Kafka is A
    try:
        produce(kafka_b, t, 0, TOTAL)
        create_mm2(
            custom,
            namespace,
            mirror,
            [
                {"alias": y, "bootstrapServers": kafka_b},
                {"alias": x, "bootstrapServers": kafka_c},
                {"alias": a, "bootstrapServers": kafka_a},
            ],
            [
                {  # the first hop writes into C, which is not the worker's Kafka
                    "sourceCluster": y,
                    "targetCluster": x,
                    "writeToTarget": "producerOverride",
                    "topicsPattern": re.escape(t),
                    "sourceConnector": {"config": source_config()},
                },
                {
                    "sourceCluster": x,
                    "targetCluster": a,
                    "topicsPattern": re.escape(one_hop),
                    "sourceConnector": {"config": source_config()},
                    "checkpointConnector": {"config": CHECKPOINT_CONFIG},
                },
            ],
        )
        # Site C: the group consumes the one-hop topic to N; the rest is read after the failover.
        assert read_topic(kafka_c, one_hop, TOTAL, timeout=120) == [f"r-{i}".encode() for i in range(TOTAL)]
        assert consume(kafka_c, one_hop, group, N) == [f"r-{i}" for i in range(N)]
        assert read_topic(kafka_a, two_hops, TOTAL, timeout=120) == [f"r-{i}".encode() for i in range(TOTAL)]
        wait_for(
            "a checkpoint of the group at upstream offset N",
            lambda: checkpoints(kafka_a, checkpoints_topic).get((group, two_hops, 0), (None,))[0] == N,
            timeout=180,
            interval=2,
        )
        upstream, translated = checkpoints(kafka_a, checkpoints_topic)[(group, two_hops, 0)]

        fail_over(stack, namespace, mirror, group, two_hops, translated)
        assert committed(kafka_a, group) == {(two_hops, 0): translated}
        again = read_again_after_failover(kafka_a, two_hops, group, upstream)
        print(f"chain: committed {N} on C ({one_hop}), translated {translated} on A ({two_hops}), {again} read again")
    finally:
        delete_mirror(custom, namespace, mirror, connect_url, [y, x])
        drop_topics(kafka_a, [two_hops, checkpoints_topic])
        drop_topics(kafka_c, [one_hop, f"mm2-offset-syncs.{a}.internal"])
        drop_topics(kafka_b, [t, f"mm2-offset-syncs.{x}.internal"])
