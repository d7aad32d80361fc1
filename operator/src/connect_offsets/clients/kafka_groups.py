"""Consumer groups and MirrorMaker 2 checkpoints on a tenant's Kafka cluster: what a failover needs.

A consumer group fails over to the other site by way of MirrorMaker 2's checkpoints: the checkpoint
connector writes, for every group it replicates, records keyed ``(group, topic, partition)`` (the
topic as named on the target: ``<source alias>.<topic>``) whose value holds the group's upstream
offset and its translation downstream, into ``<source alias>.checkpoints.internal`` on the target
cluster, partition 0 (``Checkpoint.java``; ``MirrorClient.remoteConsumerOffsets`` reads it from the
beginning and keeps the newest record per partition, which ``checkpoints`` does too). Then the
translated offsets are committed for the group on the target (``commit``), which Kafka accepts only
while the group has no active members (``describe`` tells, and the commit's own answer is checked
again: ``GroupActive``).

Every call runs in the tenant pool (``clients.tenant_io``, through ``clients.kafka.tenant_call``):
a limit per namespace, failures remembered per address. Answers are bounded (16 MiB per response;
at most ``MAX_CHECKPOINT_RECORDS`` records read within ``timeout``, at most
``MAX_CHECKPOINT_PARTITIONS`` partitions kept for the group; a record naming no valid topic
partition counts as undecodable). ``KafkaGroups`` bundles the
calls so that a test (the unit simulation) can put a fake in its place.

Checkpoints written in transactions (a checkpoint connector on a worker with
``exactly.once.source.support=enabled``, issue 46): the topic then holds commit and abort markers,
which librdkafka never hands to the application, and records of aborted transactions. The reader
uses ``isolation.level=read_committed`` (aborted records skipped, as MirrorMaker 2's own reader
does), reads up to the last stable offset (what ``get_watermark_offsets`` answers a read_committed
consumer: librdkafka's ListOffsets carries the consumer's isolation level), and measures how far it
got by the consumer's position, which librdkafka moves past control records, not by the offsets of
the messages it saw: a topic whose last record is a commit marker would otherwise never be read to
its end.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from connect_offsets import fencing
from connect_offsets.clients.kafka import (
    MAX_KAFKA_RESPONSE_BYTES,
    KafkaAdminError,
    admin_client,
    client_settings,
    kafka_text,
    tenant_call,
)
from connect_offsets.errors import UserError

__all__ = [
    "ACTIVE_GROUP_ERRORS",
    "MAX_CHECKPOINT_PARTITIONS",
    "MAX_CHECKPOINT_RECORDS",
    "TP",
    "Checkpoint",
    "CheckpointConsumer",
    "CheckpointMessage",
    "CheckpointRead",
    "GroupActive",
    "GroupState",
    "KafkaGroups",
    "decode_checkpoint",
    "encode_checkpoint",
    "read_checkpoints",
]

TP = tuple[str, int]

#: A checkpoints topic holds one record per group, partition and emission (compacted to the newest
#: per key); reading more than this many records is refused rather than holding the operator's memory.
MAX_CHECKPOINT_RECORDS: Final = 2_000_000

#: A group's distinct (topic, partition) checkpoints kept by one read: a checkpoints topic is the
#: tenant's, and one group's records could each name another partition; past this the read ends.
MAX_CHECKPOINT_PARTITIONS: Final = 100_000
#: Kafka's topic names (``Topic.validate``): at most 249 bytes of these characters, not "." or "..".
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

#: What Kafka answers an offset commit for a group that has members (classic and KIP-848 groups).
ACTIVE_GROUP_ERRORS: Final = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
        KafkaError.GROUP_SUBSCRIBED_TO_TOPIC,
        KafkaError.NON_EMPTY_GROUP,
    }
)

#: ``Checkpoint.KEY_SCHEMA``: group (STRING), topic (STRING), partition (INT32), big-endian; a STRING
#: is an INT16 length then UTF-8. ``VALUE_SCHEMA_V0`` after an INT16 version header: upstreamOffset
#: (INT64), offset (INT64), metadata (STRING).
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint record: a group's offset upstream and where it translates to downstream."""

    group: str
    topic: str  # as named on the target cluster (``<source alias>.<topic>`` by the default policy)
    partition: int
    upstream: int
    downstream: int


@dataclass(frozen=True)
class CheckpointRead:
    """The newest checkpoint of one group per downstream partition, and what was read to find them."""

    exists: bool  # the checkpoints topic exists on the cluster
    checkpoints: dict[TP, Checkpoint]
    records: int  # records read, all groups
    undecodable: int  # records skipped: not a checkpoint of a version this reader knows


@dataclass(frozen=True)
class GroupState:
    """A consumer group as the cluster describes it."""

    state: str  # Kafka's name: EMPTY, STABLE, DEAD, ...
    members: int


class GroupActive(UserError):
    """The group has active members: Kafka does not let its offsets be changed (and must not)."""


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, at)
    at += _INT16.size
    if length < 0 or at + length > len(data):
        raise ValueError("a string runs past the record")
    return data[at : at + length].decode(), at + length


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    """A record of the checkpoints topic; ValueError for anything else (another version, garbage)."""
    try:
        group, at = _string(key, 0)
        topic, at = _string(key, at)
        (partition,) = _INT32.unpack_from(key, at)
        (version,) = _INT16.unpack_from(value, 0)
        if version != 0:
            raise ValueError(f"checkpoint value version {version}")
        (upstream,) = _INT64.unpack_from(value, _INT16.size)
        (downstream,) = _INT64.unpack_from(value, _INT16.size + _INT64.size)
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(str(error)) from error
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", "..") or partition < 0:
        raise ValueError("not a Kafka topic partition")  # no checkpoint MirrorMaker 2 writes
    return Checkpoint(group, topic, partition, upstream, downstream)


def encode_checkpoint(checkpoint: Checkpoint, metadata: str = "") -> tuple[bytes, bytes]:
    """The record MirrorMaker 2 writes for ``checkpoint`` (key, value): tests and fakes write these."""

    def string(text: str) -> bytes:
        data = text.encode()
        return _INT16.pack(len(data)) + data

    key = string(checkpoint.group) + string(checkpoint.topic) + _INT32.pack(checkpoint.partition)
    value = _INT16.pack(0) + _INT64.pack(checkpoint.upstream) + _INT64.pack(checkpoint.downstream) + string(metadata)
    return key, value


def _group_error(error: KafkaException) -> KafkaError | None:
    found = error.args[0] if error.args else None
    return found if isinstance(found, KafkaError) else None


class CheckpointMessage(Protocol):
    """What ``read_checkpoints`` uses of a confluent_kafka ``Message``."""

    def error(self) -> KafkaError | None: ...

    def offset(self) -> int | None: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...


class CheckpointConsumer(Protocol):
    """What ``read_checkpoints`` uses of a confluent_kafka ``Consumer`` (a fake stands in for it in
    unit tests)."""

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = ..., cached: bool = ...
    ) -> tuple[int, int]: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def consume(self, num_messages: int = ..., timeout: float = ...) -> Sequence[CheckpointMessage]: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...


def read_checkpoints(
    consumer: CheckpointConsumer,
    topic: str,
    group: str,
    where: str,
    *,
    timeout: float,
    deadline_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> CheckpointRead:
    """Partition 0 of ``topic`` (it exists) read from its start to its end: the newest checkpoint of
    ``group`` per downstream partition.

    The end is what ``get_watermark_offsets`` answers: with ``isolation.level=read_committed`` the
    last stable offset (records of a transaction still open are not waited for). Progress is the
    consumer's position, which librdkafka moves past commit and abort markers and past aborted
    records it drops; the offset of the last message seen stops short of a trailing marker.
    """
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
    newest: dict[TP, Checkpoint] = {}
    records = undecodable = 0
    if high <= low:
        return CheckpointRead(True, newest, records, undecodable)
    consumer.assign([TopicPartition(topic, 0, low)])
    position = low
    started = clock()
    while position < high:
        if records >= MAX_CHECKPOINT_RECORDS:
            raise KafkaAdminError(
                f"checkpoints topic {topic} on {where}: more than {MAX_CHECKPOINT_RECORDS} records; not read to its end"
            )
        if clock() - started > deadline_s:
            raise KafkaAdminError(
                f"checkpoints topic {topic} on {where}: not read to its end within {deadline_s:.0f} s "
                f"(at offset {position} of {low}..{high}, {records} record(s) read)"
            )
        for message in consumer.consume(num_messages=1000, timeout=1.0):
            failure = message.error()
            if failure is not None:
                raise KafkaAdminError(f"reading {topic} on {where}: {failure.str()}")
            records += 1
            position = max(position, (message.offset() or 0) + 1)
            key, value = message.key(), message.value()
            if key is None or value is None:
                continue  # a tombstone: no checkpoint
            try:
                checkpoint = decode_checkpoint(key, value)
            except ValueError:
                undecodable += 1
                continue
            if checkpoint.group == group:
                tp = (checkpoint.topic, checkpoint.partition)
                if tp not in newest and len(newest) >= MAX_CHECKPOINT_PARTITIONS:
                    raise KafkaAdminError(
                        f"checkpoints topic {topic} on {where}: group {group} has checkpoints for more than "
                        f"{MAX_CHECKPOINT_PARTITIONS} partitions; not read to its end"
                    )
                newest[tp] = checkpoint
        # Past control records and aborted transactions, which no message stands for.
        (at,) = consumer.position([TopicPartition(topic, 0)])
        if at.error is None and at.offset is not None and at.offset >= 0:
            position = max(position, at.offset)
    return CheckpointRead(True, newest, records, undecodable)


class KafkaGroups:
    """The consumer-group and checkpoint calls of a failover, against the brokers of ``config``
    (librdkafka settings, ``clients.kafka.librdkafka_config``), for a resource of ``namespace``."""

    def __init__(self, timeout: float = 15.0) -> None:
        self.timeout = timeout

    async def checkpoints(self, config: Mapping[str, Any], topic: str, group: str, *, namespace: str) -> CheckpointRead:
        """The newest checkpoint of ``group`` per partition in ``topic`` (partition 0, read from the
        beginning to its end offset, as ``MirrorClient.remoteConsumerOffsets`` does)."""
        settings = {
            **client_settings(dict(config), self.timeout),
            "group.id": "connect-offsets-checkpoints-reader",  # assign() only: it never joins a group
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # Transactional checkpoints: aborted records skipped, the end is the last stable offset.
            "isolation.level": "read_committed",
            "fetch.max.bytes": MAX_KAFKA_RESPONSE_BYTES // 2,
            "max.partition.fetch.bytes": MAX_KAFKA_RESPONSE_BYTES // 2,
            "queued.max.messages.kbytes": 16384,
        }
        where = f"cluster {config.get('bootstrap.servers', '?')}"
        deadline_s = self.timeout * 2

        def run() -> CheckpointRead:
            try:
                consumer = Consumer(settings)
            except KafkaException as error:
                raise KafkaAdminError(f"client settings for {where}: {kafka_text(error)}") from error
            try:
                metadata = consumer.list_topics(topic, timeout=self.timeout)
                found = metadata.topics.get(topic)
                if found is None or found.error is not None:
                    if found is not None and found.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise KafkaAdminError(f"checkpoints topic {topic} on {where}: {found.error.str()}")
                    return CheckpointRead(False, {}, 0, 0)
                return read_checkpoints(consumer, topic, group, where, timeout=self.timeout, deadline_s=deadline_s)
            except KafkaException as error:
                raise KafkaAdminError(f"checkpoints topic {topic} on {where}: {kafka_text(error)}") from error
            finally:
                consumer.close()

        return await tenant_call(namespace, dict(config), run)

    async def committed(self, config: Mapping[str, Any], group: str, *, namespace: str) -> dict[TP, int]:
        """The group's committed offsets (partitions without one are left out)."""
        settings = client_settings(dict(config), self.timeout)
        where = f"cluster {config.get('bootstrap.servers', '?')}"

        def run() -> dict[TP, int]:
            admin = admin_client(settings)
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
            )
            try:
                answer = futures[group].result(timeout=self.timeout + 5)
            except KafkaException as error:
                raise KafkaAdminError(f"offsets of group {group} on {where}: {kafka_text(error)}") from error
            except Exception as error:  # timeouts surface as concurrent.futures errors
                raise KafkaAdminError(f"offsets of group {group} on {where}: {type(error).__name__}") from error
            return {
                (tp.topic, tp.partition): int(tp.offset)
                for tp in answer.topic_partitions or []
                if tp.error is None and tp.offset is not None and tp.offset >= 0
            }

        return await tenant_call(namespace, dict(config), run)

    async def describe(self, config: Mapping[str, Any], group: str, *, namespace: str) -> GroupState:
        """The group's state and number of members (a group that does not exist: DEAD, 0)."""
        settings = client_settings(dict(config), self.timeout)
        where = f"cluster {config.get('bootstrap.servers', '?')}"

        def run() -> GroupState:
            admin = admin_client(settings)
            futures = admin.describe_consumer_groups([group], request_timeout=self.timeout)
            try:
                described = futures[group].result(timeout=self.timeout + 5)
            except KafkaException as error:
                found = _group_error(error)
                if found is not None and found.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    return GroupState("DEAD", 0)
                raise KafkaAdminError(f"describe group {group} on {where}: {kafka_text(error)}") from error
            except Exception as error:  # timeouts surface as concurrent.futures errors
                raise KafkaAdminError(f"describe group {group} on {where}: {type(error).__name__}") from error
            state = getattr(described.state, "name", str(described.state))
            return GroupState(str(state), len(described.members or []))

        return await tenant_call(namespace, dict(config), run)

    async def commit(self, config: Mapping[str, Any], group: str, offsets: Mapping[TP, int], *, namespace: str) -> None:
        """Commit ``offsets`` for ``group``; GroupActive when Kafka refuses because it has members."""
        await fencing.before_write(f"commit offsets of group {group}")  # under a Lease: this term only
        settings = client_settings(dict(config), self.timeout)
        where = f"cluster {config.get('bootstrap.servers', '?')}"
        partitions = [
            TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())
        ]

        def run() -> None:
            admin = admin_client(settings)
            fencing.check(f"commit offsets of group {group}")  # again: the thread may have waited
            futures = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=self.timeout
            )
            try:
                answer = futures[group].result(timeout=self.timeout + 5)
            except KafkaException as error:
                found = _group_error(error)
                if found is not None and found.code() in ACTIVE_GROUP_ERRORS:
                    raise GroupActive(
                        f"Kafka refused the commit for group {group} on {where}: {found.name()} (the group has "
                        "active members; stop its consumers first)"
                    ) from error
                raise KafkaAdminError(f"commit offsets of group {group} on {where}: {kafka_text(error)}") from error
            except Exception as error:  # timeouts surface as concurrent.futures errors
                raise KafkaAdminError(f"commit offsets of group {group} on {where}: {type(error).__name__}") from error
            failed = [tp for tp in answer.topic_partitions or [] if tp.error is not None]
            if failed:
                first = failed[0].error
                if isinstance(first, KafkaError) and first.code() in ACTIVE_GROUP_ERRORS:
                    raise GroupActive(f"Kafka refused the commit for group {group} on {where}: {first.name()}")
                raise KafkaAdminError(
                    f"commit offsets of group {group} on {where}: {len(failed)} partition(s) refused, first "
                    f"{failed[0].topic}-{failed[0].partition}: {first}"
                )

        await tenant_call(namespace, dict(config), run)

    async def existing_topics(self, config: Mapping[str, Any], names: Collection[str], *, namespace: str) -> set[str]:
        """Which of ``names`` exist on the cluster (one metadata request)."""
        settings = client_settings(dict(config), self.timeout)
        where = f"cluster {config.get('bootstrap.servers', '?')}"

        def run() -> set[str]:
            admin = admin_client(settings)
            try:
                metadata = admin.list_topics(timeout=self.timeout)
            except KafkaException as error:
                raise KafkaAdminError(f"list topics on {where}: {kafka_text(error)}") from error
            return {name for name in names if name in metadata.topics and metadata.topics[name].error is None}

        return await tenant_call(namespace, dict(config), run)
