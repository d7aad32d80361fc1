"""Tail reads of sink progress and mirror lag (``clients.kafka._read_tails``; attacker review of
issue 46, F2): several tails of one partition - sinks sharing a topic, at different committed
offsets - are read by one assignment from the lowest offset asked, each decided on its own (empty:
only markers, and read_committed aborted records, before its end; full: a record there), and a
backlog between two tails is skipped (seek), not read.

The consumer is a fake of librdkafka's as the reader uses it: records in offset order from the
assigned or sought offset, a position moved past what it never delivers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from connect_offsets.clients import kafka as kafka_module

pytestmark = pytest.mark.unit

TP = ("orders", 0)


@dataclass
class _Message:
    offset_: int

    def topic(self) -> str:
        return TP[0]

    def partition(self) -> int:
        return TP[1]

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self.offset_


@dataclass
class _Consumer:
    """One partition: ``records`` are the offsets it delivers, up to ``end`` (past it: nothing)."""

    records: set[int]
    end: int
    batch: int = 50
    at: int = -1001
    delivered: int = 0
    seeks: list[int] = field(default_factory=list)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.at = partitions[0].offset

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[_Message]:
        out: list[_Message] = []
        while self.at < self.end and len(out) < self.batch:
            if self.at in self.records:
                out.append(_Message(self.at))
            self.at += 1
        self.delivered += len(out)
        return out

    def seek(self, partition: TopicPartition) -> None:
        self.seeks.append(partition.offset)
        self.at = partition.offset

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(TP[0], TP[1], self.at) for _ in partitions]

    def pause(self, partitions: list[TopicPartition]) -> None:
        pass

    def close(self) -> None:
        pass


def _read(monkeypatch: pytest.MonkeyPatch, consumer: _Consumer, tails: list[tuple[Any, int, int]]) -> Any:
    monkeypatch.setattr(kafka_module, "Consumer", lambda settings: consumer)
    return kafka_module._read_tails({"bootstrap.servers": "k:9092"}, tails, 5.0, read_committed=True)


def test_two_tails_of_one_partition_are_each_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    # records 0..6, a commit marker at 7: a stuck sink at 0, a caught-up one at 7
    empty, full = _read(monkeypatch, _Consumer(set(range(7)), end=8), [(TP, 0, 8), (TP, 7, 8)])
    assert (empty, full) == ({(TP, 7, 8)}, {(TP, 0, 8)})


def test_a_backlog_between_two_tails_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = _Consumer(set(range(100_000)), end=100_001)  # a marker at 100,000
    empty, full = _read(monkeypatch, consumer, [(TP, 0, 100_001), (TP, 100_000, 100_001)])
    assert (empty, full) == ({(TP, 100_000, 100_001)}, {(TP, 0, 100_001)})
    assert consumer.seeks == [100_000] and consumer.delivered <= consumer.batch


def test_a_tail_whose_first_record_is_past_its_end_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    # a record produced after the end was taken: nothing between the tail's start and its end
    consumer = _Consumer({5}, end=6)
    assert _read(monkeypatch, consumer, [(TP, 3, 5)]) == ({(TP, 3, 5)}, frozenset())
