"""Records on the stack's Kafka clusters as the MirrorMaker 2 tests read and write them: numbered
values (``r-0``, ``r-1``, ...) produced, a group's reads committed exactly, its committed offsets,
topics dropped at the end. Shared by the disaster-recovery tests of test_moving_offsets.py and the
exactly-once and chained-mirror tests of test_mirrormaker2_exactly_once.py."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

__all__ = ["committed", "consume", "drop_topics", "produce"]


def produce(bootstrap: str, topic: str, start: int, stop: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, stop):
        producer.produce(topic, value=f"r-{i}".encode())
    assert producer.flush(20) == 0


def consume(bootstrap: str, topic: str, group: str, count: int | None, timeout: float = 60) -> list[str]:
    """Read ``topic`` as ``group`` from its committed offset (else the start) until ``count`` records
    (None: until the end), commit exactly what was read, leave the group."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.subscribe([topic])
        values: list[str] = []
        last: int | None = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (count is None or len(values) < count):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if count is None and message.error().code() == KafkaError._PARTITION_EOF:  # the end
                    break
                continue
            values.append(message.value().decode())
            last = message.offset()
        if last is not None:
            consumer.commit(offsets=[TopicPartition(topic, 0, last + 1)], asynchronous=False)
        return values
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=20)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}


def drop_topics(bootstrap: str, doomed: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    present = [t for t in doomed if t in admin.list_topics(timeout=20).topics]
    for future in (admin.delete_topics(present, operation_timeout=30) if present else {}).values():
        future.result(timeout=40)
