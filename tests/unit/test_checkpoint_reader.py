"""The checkpoint reader finishes on topics written in transactions (issue 46, item 2).

MirrorMaker 2's checkpoint connector on a worker with ``exactly.once.source.support=enabled`` writes
its checkpoints topic in transactions: commit and abort markers take offsets, and librdkafka hands
neither them nor (with ``read_committed``) aborted records to the application. The reader counted
the offsets of the messages it was given up to the end offset, so a topic ending in a marker was
never read to its end: the read timed out, was taken for transient, and failover retried for ever.
It now follows the consumer's position, which librdkafka moves past what it does not deliver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from confluent_kafka import TopicPartition

from connect_offsets.clients.kafka import KafkaAdminError
from connect_offsets.clients.kafka_groups import Checkpoint, encode_checkpoint, read_checkpoints

pytestmark = pytest.mark.unit

TOPIC = "east.checkpoints.internal"


@dataclass
class FakeMessage:
    offset_: int
    key_: bytes | None
    value_: bytes | None

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self.offset_

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes | None:
        return self.value_


@dataclass
class FakeConsumer:
    """A partition as a read_committed librdkafka consumer sees it: ``log`` maps each offset to a
    delivered record, or None for what it never delivers (markers, aborted records); its position
    moves past those once the batch holding them is consumed, as librdkafka's does."""

    log: dict[int, tuple[bytes, bytes] | None]
    end: int  # the last stable offset
    start: int = 0
    batch: int = 3
    advances_past_markers: bool = True
    at: int = -1
    assigned: list[TopicPartition] = field(default_factory=list)
    consumed_calls: int = 0

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = 0, cached: bool = False
    ) -> tuple[int, int]:
        return self.start, self.end

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions
        self.at = partitions[0].offset

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        self.consumed_calls += 1
        out: list[FakeMessage] = []
        last_delivered = self.at
        offset = self.at
        while offset < self.end and offset < self.at + self.batch:
            record = self.log.get(offset)
            if record is not None:
                out.append(FakeMessage(offset, *record))
                last_delivered = offset + 1
            offset += 1
        self.at = offset if self.advances_past_markers else last_delivered
        return out

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, 0, self.at)]


def record(group: str, topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    return encode_checkpoint(Checkpoint(group, topic, partition, upstream, downstream))


def test_a_topic_ending_in_a_commit_marker_is_read_to_its_end() -> None:
    # 0-1 committed, 2 commit marker, 3-4 aborted, 5 abort marker, 6 committed, 7 commit marker.
    log = {
        0: record("app", "east.orders", 0, 10, 9),
        1: record("other", "east.orders", 0, 5, 5),
        2: None,
        3: None,  # aborted records: never delivered under read_committed
        4: None,
        5: None,
        6: record("app", "east.orders", 0, 20, 18),
        7: None,
    }
    consumer = FakeConsumer(log, end=8)
    read = read_checkpoints(consumer, TOPIC, "app", "cluster west", timeout=1, deadline_s=10)
    assert read.exists and read.records == 3 and read.undecodable == 0
    assert read.checkpoints == {("east.orders", 0): Checkpoint("app", "east.orders", 0, 20, 18)}


def test_a_topic_of_markers_and_aborted_records_only_reads_nothing_and_ends() -> None:
    consumer = FakeConsumer(dict.fromkeys(range(6)), end=6, batch=2)
    read = read_checkpoints(consumer, TOPIC, "app", "cluster west", timeout=1, deadline_s=10)
    assert (read.exists, read.checkpoints, read.records) == (True, {}, 0)
    assert consumer.consumed_calls == 3


def test_records_of_an_open_transaction_are_not_waited_for() -> None:
    # The last stable offset is 2: records 2.. belong to a transaction still open.
    log = {0: record("app", "east.orders", 1, 4, 4), 1: None, 2: record("app", "east.orders", 1, 8, 8)}
    consumer = FakeConsumer(log, end=2)
    read = read_checkpoints(consumer, TOPIC, "app", "cluster west", timeout=1, deadline_s=10)
    assert read.checkpoints == {("east.orders", 1): Checkpoint("app", "east.orders", 1, 4, 4)}


def test_an_empty_topic_is_not_assigned() -> None:
    consumer = FakeConsumer({}, start=5, end=5)
    read = read_checkpoints(consumer, TOPIC, "app", "cluster west", timeout=1, deadline_s=10)
    assert (read.exists, read.records, consumer.assigned) == (True, 0, [])


def test_a_read_that_stops_moving_fails_with_where_it_stopped() -> None:
    """A consumer whose position stays behind its last message (what the old reader assumed of
    markers) ends at the deadline with a message saying where, not by looping for ever."""
    log = {0: record("app", "east.orders", 0, 1, 1), 1: None}
    consumer = FakeConsumer(log, end=2, advances_past_markers=False)
    ticks = iter(range(100))
    with pytest.raises(KafkaAdminError) as raised:
        read_checkpoints(
            consumer, TOPIC, "app", "cluster west", timeout=1, deadline_s=3, clock=lambda: float(next(ticks))
        )
    assert "not read to its end within 3 s" in str(raised.value) and "at offset 1 of 0..2" in str(raised.value)


def _key(group: str, topic: bytes, partition: int) -> bytes:
    return (
        len(group).to_bytes(2, "big")
        + group.encode()
        + len(topic).to_bytes(2, "big")
        + topic
        + partition.to_bytes(4, "big", signed=True)
    )


def test_a_record_naming_no_kafka_topic_partition_is_undecodable() -> None:
    """Attacker review of issue 46, P3: a checkpoints topic is the tenant's; a record whose topic is
    over 249 bytes, has a character Kafka forbids, or whose partition is negative, is no checkpoint
    MirrorMaker 2 writes: counted undecodable, not kept."""
    _, value = record("app", "east.orders", 0, 1, 1)
    bad = [b"t" * 250, b"east orders", b"east/orders", "\u00e9t\u00e9".encode(), b".", b".."]
    log: dict[int, tuple[bytes, bytes] | None] = {i: (_key("app", topic, 0), value) for i, topic in enumerate(bad)}
    log[len(bad)] = (_key("app", b"east.orders", -1), value)
    log[len(bad) + 1] = (_key("app", b"t" * 249, 0), value)
    consumer = FakeConsumer(log, end=len(log))
    read = read_checkpoints(consumer, TOPIC, "app", "cluster west", timeout=1, deadline_s=10)
    assert read.undecodable == len(bad) + 1 and list(read.checkpoints) == [("t" * 249, 0)]


def test_a_group_with_too_many_partitions_ends_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """P3: distinct partitions kept per group are capped (memory), the read ends saying so."""
    from connect_offsets.clients import kafka_groups

    monkeypatch.setattr(kafka_groups, "MAX_CHECKPOINT_PARTITIONS", 5)
    log: dict[int, tuple[bytes, bytes] | None] = {i: record("app", f"east.t{i}", 0, 1, 1) for i in range(6)}
    log.update({6 + i: record("app", "east.t0", 0, 2 + i, 2 + i) for i in range(10)})
    within = FakeConsumer({k: v for k, v in log.items() if k != 5}, end=16)
    assert len(read_checkpoints(within, TOPIC, "app", "cluster west", timeout=1, deadline_s=10).checkpoints) == 5
    with pytest.raises(KafkaAdminError, match=r"group app has checkpoints for more than 5 partitions"):
        read_checkpoints(FakeConsumer(log, end=16), TOPIC, "app", "cluster west", timeout=1, deadline_s=10)
