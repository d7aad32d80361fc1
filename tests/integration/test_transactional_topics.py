"""Topics written in transactions, on the real stack (issue 46, items 2 and 3).

* The checkpoint reader (``KafkaGroups.checkpoints``) on a checkpoints topic written by a
  transactional producer, committed and aborted transactions, ending in a commit marker: it finishes,
  skips the aborted checkpoints and returns the newest committed one per partition, and does not wait
  for a transaction still open.
* Progress of a FileStreamSink on a topic written by a transactional producer (committed and
  aborted transactions): its group commits the last record + 1, where the commit marker sits, so
  its committed offset stays below the end for ever. Once caught up it is ``Progressing=True/
  UpToDate`` with lag 0, and stays so after ``stallAfter`` (15 s) has passed (it read
  ``NotAdvancing`` before, with 1 record waiting). A transaction opened and left open: it stays
  ``UpToDate``, its message counting the open transaction's records (the sink reads
  ``read_committed``). Then its file, a named pipe, is no longer read:
  the next committed transaction (more than the pipe's buffer) blocks the task in ``put()``, nothing
  is committed, and it turns ``False/NotAdvancing`` with the records waiting. The pipe is read
  again before the connector is deleted, so no blocked task thread is left in the shared worker.
* A MirrorMaker 2 (B -> A) replicating a topic written in transactions, ending in a commit marker
  after an aborted transaction: its replication lag reaches 0 (it stayed at 1 or more: MirrorMaker 2
  never replicates markers).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from connect_offsets.clients.kafka_groups import Checkpoint, KafkaGroups, encode_checkpoint
from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.support import (
    FILE_SINK,
    GROUP,
    VERSION,
    CrdKeeper,
    create_cluster,
    create_connector_kept,
    create_mm2,
    get_connector,
    get_mm2,
    read_topic,
    wait_condition,
)

STALL_AFTER_S = 15


@pytest.fixture(autouse=True)
def this_branch_crds(stack: dict[str, Any]) -> Iterator[None]:
    """The CRDs of this checkout, applied again (another session's older CRDs prune spec.progress)."""
    with CrdKeeper(stack, REPO / "crds"):
        yield


def _topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def _transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def _send(producer: Producer, topic: str, checkpoints: list[Checkpoint], *, commit: bool) -> None:
    producer.begin_transaction()
    for checkpoint in checkpoints:
        key, value = encode_checkpoint(checkpoint)
        producer.produce(topic, key=key, value=value, partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_transactional_checkpoints_are_read_to_their_end(stack: dict[str, Any], unique: str) -> None:
    bootstrap = stack["kafka_a"]
    topic = f"east.checkpoints.internal-{unique}"
    _topic(bootstrap, topic)
    producer = _transactional(bootstrap, f"checkpoints-{unique}")
    first = Checkpoint("app", "east.orders", 0, 10, 9)
    _send(producer, topic, [first, Checkpoint("other", "east.orders", 0, 3, 3)], commit=True)
    _send(producer, topic, [Checkpoint("app", "east.orders", 0, 99, 99)], commit=False)
    newest = Checkpoint("app", "east.orders", 1, 7, 6)
    _send(producer, topic, [newest], commit=True)  # the topic ends in a commit marker
    groups = KafkaGroups(timeout=10)
    config = {"bootstrap.servers": bootstrap}

    read = asyncio.run(groups.checkpoints(config, topic, "app", namespace=f"t-{unique}"))
    assert read.exists and read.records == 3 and read.undecodable == 0
    assert read.checkpoints == {("east.orders", 0): first, ("east.orders", 1): newest}

    # A transaction still open: its checkpoint is not waited for, nor read.
    producer.begin_transaction()
    key, value = encode_checkpoint(Checkpoint("app", "east.orders", 0, 50, 50))
    producer.produce(topic, key=key, value=value, partition=0)
    producer.flush(30)
    try:
        read = asyncio.run(groups.checkpoints(config, topic, "app", namespace=f"t-{unique}"))
        assert read.checkpoints == {("east.orders", 0): first, ("east.orders", 1): newest}
    finally:
        producer.abort_transaction(30)


class PausablePipeReader:
    """Reads a named pipe in a thread while ``reading`` is set (``cat pipe > /dev/null`` that can be
    paused); paused, it keeps the pipe open, so the writer blocks once the pipe's buffer is full."""

    def __init__(self, pipe: Path) -> None:
        self.pipe = pipe
        self.bytes = 0
        self.reading = threading.Event()
        self.reading.set()
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        with self.pipe.open("rb", buffering=0) as reader:
            while True:
                self.reading.wait()
                chunk = reader.read(4096)
                if not chunk:
                    return
                self.bytes += len(chunk)


def _progressing(body: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in body["status"]["conditions"] if c["type"] == "Progressing")


def test_a_sink_on_a_transactional_topic_is_up_to_date_then_not_advancing_when_blocked(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    bootstrap = stack["kafka_a"]
    topic = name = f"txsink-{unique}"
    _topic(bootstrap, topic)
    producer = _transactional(bootstrap, f"sink-{unique}")

    def transaction(count: int, *, commit: bool, size: int = 10) -> None:
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=json.dumps(f"{i:0{size}d}").encode(), partition=0)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    transaction(5, commit=True)
    transaction(3, commit=False)
    transaction(4, commit=True)  # the log ends in a commit marker
    pipe = tmp_path / "sink.fifo"
    os.mkfifo(pipe)
    reader = PausablePipeReader(pipe)
    reader.thread.start()
    create_cluster(custom, namespace, connect_url, kafka={"bootstrapServers": bootstrap})
    create_connector_kept(
        custom,
        namespace,
        name,
        {
            "class": FILE_SINK,
            "tasksMax": 1,
            # read_committed, as the progress check sees the topic (Connect's default reads uncommitted).
            "config": {"topics": topic, "file": str(pipe), "consumer.override.isolation.level": "read_committed"},
            "progress": {"stallAfter": f"{STALL_AFTER_S}s"},
        },
    )
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_condition(custom, namespace, name, "Progressing", status="True", reason="UpToDate", timeout=120)
        body = get_connector(custom, namespace, name)
        assert body["status"]["progress"]["totalLag"] == 0, body["status"]["progress"]
        # Past stallAfter (and a few drift intervals), the caught-up sink is still up to date.
        since = time.monotonic()
        wait_for("stallAfter passed", lambda: time.monotonic() - since > STALL_AFTER_S + 15, timeout=60, interval=1)
        body = get_connector(custom, namespace, name)
        condition = _progressing(body)
        assert (condition["status"], condition["reason"]) == ("True", "UpToDate"), condition
        assert body["status"]["progress"]["totalLag"] == 0, body["status"]["progress"]

        # A transaction opened and left open: the caught-up sink is still up to date, and says why.
        transaction_open = 7
        producer.begin_transaction()
        for i in range(transaction_open):
            producer.produce(topic, value=json.dumps(f"open-{i}").encode(), partition=0)
        producer.flush(30)
        try:
            condition = wait_for(
                "the open transaction in the Progressing message",
                lambda: (
                    (c := _progressing(get_connector(custom, namespace, name))) and "still open" in c["message"] and c
                ),
                timeout=90,
                interval=1,
            )
            assert (condition["status"], condition["reason"]) == ("True", "UpToDate"), condition
            assert f"{transaction_open} record(s) of a transaction still open on 1 partition(s)" in condition["message"]
        finally:
            producer.abort_transaction(30)

        reader.reading.clear()  # nobody reads the pipe any more
        transaction(3000, commit=True, size=100)  # ~300 KB: more than the pipe's buffer
        condition = wait_condition(custom, namespace, name, "Progressing", status="False", timeout=180)
        assert condition["reason"] == "NotAdvancing", condition
        assert "record(s) waiting on 1 partition(s)" in condition["message"], condition
        progress = get_connector(custom, namespace, name)["status"]["progress"]
        assert progress["totalLag"] > 0 and progress["partitionsBehind"] == 1, progress
    finally:
        reader.reading.set()  # never leave the task blocked in the shared worker
        connect.delete(f"/connectors/{name}")
        reader.thread.join(timeout=60)


def test_a_mirror_of_a_transactional_topic_reaches_lag_zero(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    unique: str,
) -> None:
    source, target = stack["kafka_b"], stack["kafka_a"]
    east, west = f"txe{unique}", f"txw{unique}"
    topic, name = f"txlag-{unique}", f"txlag-{unique}"
    _topic(source, topic)
    producer = _transactional(source, f"lag-{unique}")
    for count, commit in ((4, True), (3, False), (2, True)):  # committed, aborted, committed: ends in a marker
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=f"r-{i}".encode(), partition=0)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    create_cluster(custom, namespace, connect_url)
    mirrors = [
        {
            "sourceCluster": east,
            "targetCluster": west,
            "topicsPattern": topic,
            "sourceConnector": {
                "tasksMax": 1,
                "config": {
                    "replication.factor": 1,
                    "offset-syncs.topic.replication.factor": 1,
                    "sync.topic.acls.enabled": False,
                    "refresh.topics.interval.seconds": 5,
                    "heartbeats.replication.enabled": False,
                },
            },
        }
    ]
    clusters = [{"alias": east, "bootstrapServers": source}, {"alias": west, "bootstrapServers": target}]
    create_mm2(custom, namespace, name, clusters, mirrors, replicationLag={"intervalSeconds": 2})
    try:
        assert len(read_topic(target, f"{east}.{topic}", 6, timeout=120)) >= 6  # the committed records
        status = wait_for(
            "replication lag 0, measured",
            lambda: (
                (lag := (get_mm2(custom, namespace, name).get("status") or {}).get("replicationLag") or {})
                and lag.get("total") == 0
                and not lag.get("stale")
                and lag.get("mirrors")
                and lag
            ),
            timeout=120,
            interval=1,
        )
        assert status["mirrors"][0]["connector"] == f"{east}->{west}.MirrorSourceConnector", status
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", name)
        wait_for(
            "the mirror's connectors deleted",
            lambda: not [c for c in connect.get("/connectors").json() if c.startswith(f"{east}->")],
            timeout=90,
        )
