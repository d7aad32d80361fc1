"""Topics written in transactions, on the real stack (issue 46, items 2 and 3).

* The checkpoint reader (``KafkaGroups.checkpoints``) on a checkpoints topic written by a
  transactional producer, committed and aborted transactions, ending in a commit marker: it finishes,
  skips the aborted checkpoints and returns the newest committed one per partition, and does not wait
  for a transaction still open.
"""

from __future__ import annotations

import asyncio
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from connect_offsets.clients.kafka_groups import Checkpoint, KafkaGroups, encode_checkpoint


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
