"""Direct access to a Connect worker's offset store: Kafka topics or the standalone file.

Why bypass Connect's REST API here: the offline tool (KIP-199) works while workers are down,
for MirrorMaker 2 in dedicated mode (no REST offsets API) and for history (``--from-beginning``),
none of which REST offers. The price is that we must do what the worker does, exactly:

- read every partition of the offsets topic with ``read_committed`` (exactly-once source
  connectors write in transactions; aborted records must not count), until each partition's end;
- read the config topic the same way, to learn each connector's target state and its own
  ``offsets.storage.topic`` (KIP-618), and read that topic too;
- write with the key bytes Connect uses (offline/records.py), to the partition Java's murmur2
  partitioner picks (computed by us and passed explicitly; ``partitioner=murmur2_random`` is set
  as well so nothing falls back to librdkafka's CRC32 default), all in one transaction so a
  failure leaves nothing half-written;
- replace the standalone file atomically (temp file, fsync, rename) after a backup copy, since
  the worker silently loads a missing or truncated file as empty.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.tools import kafka
from connect_offsets.tools.offline.offsets_file import decode_offsets_file, encode_offsets_file
from connect_offsets.tools.offline.records import KafkaPosition, StoredRecord, decode_key, decode_value, last_per_key

__all__ = [
    "ConnectorInfo",
    "PlannedWrite",
    "TopicReadStats",
    "WorkerStoreError",
    "iter_offsets_topic",
    "read_config_topic",
    "read_offsets_file",
    "read_offsets_file_raw",
    "read_offsets_topic",
    "topic_partition_count",
    "write_offsets_file",
    "write_transaction",
]

#: Progress callback: (records read or written so far, expected total or None).
Progress = Callable[[int, int | None], None]


class WorkerStoreError(ConnectOffsetsError):
    """Reading or writing the store failed; the message names the topic/file and the cause."""


# --------------------------------------------------------------------------- reading topics


@dataclass
class TopicReadStats:
    topic: str
    partitions: int = 0
    records: int = 0
    skipped_keys: int = 0  # keys Connect itself would ignore (not ["name", {...}])
    bad_values: list[str] = field(default_factory=list)


#: What to check when the worker's Kafka cannot be reached (the servers come from its config).
UNREACHABLE_HINT = (
    "check bootstrap.servers in the worker config (or the connector's producer.override.bootstrap.servers) "
    "and that the brokers are up"
)


@dataclass
class _Client:
    """A confluent_kafka client with its librdkafka log (tools/kafka.py), for one-line errors."""

    client: Any  # a Consumer or a Producer
    log: kafka.LibrdkafkaLog
    servers: str

    def error(self, error: KafkaException | KafkaError, what: str, timeout: float) -> WorkerStoreError:
        message = kafka.failure_message(
            self.client, self.log, error, servers=self.servers, what=what, hint=UNREACHABLE_HINT, timeout=timeout
        )
        return WorkerStoreError(message)


def _servers(settings: dict[str, Any]) -> str:
    return str(settings.get("bootstrap.servers", "?"))


def _consumer(settings: dict[str, Any]) -> _Client:
    log = kafka.LibrdkafkaLog()
    consumer = kafka.consumer(
        {
            **settings,
            "group.id": f"connect-offsets-cli-{uuid.uuid4().hex[:12]}",  # never committed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        },
        log,
    )
    return _Client(consumer, log, _servers(settings))


def _partitions(handle: _Client, topic: str, timeout: float) -> list[int]:
    try:
        metadata = handle.client.list_topics(topic, timeout=timeout)
    except KafkaException as error:
        raise handle.error(error, f"topic {topic}: cannot fetch metadata", timeout) from None
    described = metadata.topics.get(topic)
    if described is None or described.error is not None or not described.partitions:
        reason = described.error if described is not None and described.error is not None else "no partitions"
        if (
            described is not None
            and described.error is not None
            and described.error.code()
            in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError._UNKNOWN_TOPIC,
            )
        ):
            reason = "it does not exist"
        raise WorkerStoreError(f"topic {topic} cannot be read: {reason}")
    return sorted(described.partitions)


def topic_partition_count(settings: dict[str, Any], topic: str, *, timeout: float = 30.0) -> int:
    handle = _consumer(settings)
    try:
        return len(_partitions(handle, topic, timeout))
    finally:
        handle.client.close()


def _read_raw(
    settings: dict[str, Any],
    topic: str,
    *,
    timeout: float,
    progress: Progress | None,
    stats: TopicReadStats,
) -> Iterator[Any]:
    """Every committed record of ``topic`` from the start, partition by partition in log order."""
    handle = _consumer(settings)
    consumer = handle.client
    try:
        partitions = _partitions(handle, topic, timeout)
        stats.partitions = len(partitions)
        expected = 0
        pending: set[int] = set()
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                expected += high - low
                pending.add(p)
        if not pending:
            return
        consumer.assign([TopicPartition(topic, p, -2) for p in sorted(pending)])  # -2: OFFSET_BEGINNING
        deadline = time.monotonic() + timeout
        while pending:
            batch = consumer.consume(num_messages=1000, timeout=1.0)
            if not batch and time.monotonic() > deadline:
                raise WorkerStoreError(
                    f"topic {topic}: no progress for {timeout:.0f}s with partitions {sorted(pending)} unfinished"
                )
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
                        continue
                    raise WorkerStoreError(f"topic {topic}: read failed: {error}")
                deadline = time.monotonic() + timeout
                stats.records += 1
                if progress is not None:
                    progress(stats.records, expected)
                yield message
    except KafkaException as error:
        raise handle.error(error, f"topic {topic}: read failed", timeout) from None
    finally:
        consumer.close()


def iter_offsets_topic(
    settings: dict[str, Any],
    topic: str,
    stats: TopicReadStats,
    *,
    connectors: Iterable[str] | None = None,
    timeout: float = 30.0,
    progress: Progress | None = None,
) -> Iterator[StoredRecord]:
    """The offsets records of ``topic`` (of ``connectors`` if given), streamed in log order per
    partition; ``stats`` fills in as they go."""
    wanted = None if connectors is None else set(connectors)
    for message in _read_raw(settings, topic, timeout=timeout, progress=progress, stats=stats):
        key = decode_key(message.key())
        if key is None:
            stats.skipped_keys += 1
            continue
        if wanted is not None and key.connector not in wanted:
            continue
        try:
            offset = decode_value(message.value())
        except ValueError as error:
            stats.bad_values.append(f"{topic}[{message.partition()}]@{message.offset()}: {error}")
            continue
        _, timestamp = message.timestamp()
        position = KafkaPosition(topic, message.partition(), message.offset(), timestamp if timestamp >= 0 else None)
        yield StoredRecord(key, offset, position)


def read_offsets_topic(
    settings: dict[str, Any],
    topic: str,
    *,
    connectors: Iterable[str] | None = None,
    timeout: float = 30.0,
    progress: Progress | None = None,
    history: bool = True,
) -> tuple[list[StoredRecord], TopicReadStats]:
    """The offsets records of ``topic`` (of ``connectors`` if given), in log order per partition.

    ``history=False`` keeps only the last record per key (tombstones included) while reading, so
    memory follows the number of source partitions, not the length of the topic's history.
    """
    stats = TopicReadStats(topic)
    stream = iter_offsets_topic(settings, topic, stats, connectors=connectors, timeout=timeout, progress=progress)
    records = list(stream) if history else last_per_key(stream)
    return records, stats


# --------------------------------------------------------------------------- the config topic


@dataclass
class ConnectorInfo:
    """A connector as the config topic describes it."""

    name: str
    config: dict[str, str] | None = None  # None: deleted (or never created)
    target_state: str = "STARTED"  # STARTED | PAUSED | STOPPED (Connect's TargetState)

    @property
    def exists(self) -> bool:
        return self.config is not None

    @property
    def offsets_topic(self) -> str | None:
        return None if self.config is None else self.config.get("offsets.storage.topic") or None

    @property
    def offsets_bootstrap(self) -> str | None:
        """KIP-618: a per-connector topic lives on the cluster the connector's producer targets."""
        return None if self.config is None else self.config.get("producer.override.bootstrap.servers") or None


def read_config_topic(settings: dict[str, Any], topic: str, *, timeout: float = 30.0) -> dict[str, ConnectorInfo]:
    """Connector configs and target states from the worker's ``config.storage.topic``."""
    connectors: dict[str, ConnectorInfo] = {}
    stats = TopicReadStats(topic)
    for message in _read_raw(settings, topic, timeout=timeout, progress=None, stats=stats):
        raw_key = message.key()
        if raw_key is None:
            continue
        key = raw_key.decode("utf-8", errors="replace")
        try:
            value = decode_value(message.value())
        except ValueError:
            continue
        if key.startswith("connector-"):
            info = connectors.setdefault(key[len("connector-") :], ConnectorInfo(key[len("connector-") :]))
            props = None if value is None else value.get("properties")
            info.config = {str(k): str(v) for k, v in props.items()} if isinstance(props, dict) else None
            if value is None:
                info.target_state = "STARTED"  # a re-created connector starts over
        elif key.startswith("target-state-"):
            name = key[len("target-state-") :]
            info = connectors.setdefault(name, ConnectorInfo(name))
            if value is None:
                info.target_state = "STARTED"
            else:
                # STOPPED is written as {"state": "PAUSED", "state.v2": "STOPPED"} for old workers.
                info.target_state = str(value.get("state.v2") or value.get("state") or "STARTED")
    return connectors


# --------------------------------------------------------------------------- writing topics


@dataclass(frozen=True)
class PlannedWrite:
    """One record to produce, fully decided (so a dry run shows exactly this)."""

    topic: str
    partition: int
    key: bytes
    value: bytes | None
    connector: str
    note: str  # "new key", "existing key", ...


def write_transaction(
    settings: dict[str, Any],
    writes: list[PlannedWrite],
    *,
    transactional_id: str,
    timeout: float = 60.0,
    progress: Progress | None = None,
) -> None:
    """Produce ``writes`` in one transaction; on any error abort it and raise."""
    log = kafka.LibrdkafkaLog()
    producer = kafka.producer(
        {
            **settings,
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        },
        log,
    )
    handle = _Client(producer, log, _servers(settings))
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            failures.append(f"{message.topic()}[{message.partition()}]: {error}")

    try:
        producer.init_transactions(timeout)
        producer.begin_transaction()
        for done, write in enumerate(writes, start=1):
            while True:
                try:
                    producer.produce(
                        write.topic, key=write.key, value=write.value, partition=write.partition, on_delivery=delivered
                    )
                    break
                except BufferError:
                    producer.poll(0.5)
            producer.poll(0)
            if progress is not None and done % 500 == 0:
                progress(done, len(writes))
        remaining = producer.flush(timeout)
        if remaining or failures:
            raise WorkerStoreError(
                "write failed, transaction aborted: "
                + ("; ".join(failures[:5]) if failures else f"{remaining} record(s) not delivered in {timeout:.0f}s")
            )
        producer.commit_transaction(timeout)
        if progress is not None:
            progress(len(writes), len(writes))
    except KafkaException as error:
        _abort(producer, timeout)
        raise handle.error(error, "write failed, transaction aborted", timeout) from None
    except BaseException:
        _abort(producer, timeout)
        raise


def _abort(producer: Producer, timeout: float) -> None:
    # Not in a transaction (init failed) or the broker is gone: nothing was committed either way.
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(timeout)


# --------------------------------------------------------------------------- the standalone file


def read_offsets_file(path: Path) -> list[StoredRecord]:
    """The standalone worker's offsets; tombstones (null values) included, as stored."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise WorkerStoreError(f"cannot read {path}: {error.strerror}") from None
    try:
        entries = decode_offsets_file(data)
    except ValueError as error:
        raise WorkerStoreError(f"{path}: {error}") from None
    records = []
    for raw_key, raw_value in entries.items():
        key = decode_key(raw_key)
        if key is None:
            continue
        try:
            records.append(StoredRecord(key, decode_value(raw_value)))
        except ValueError:
            continue
    return records


def read_offsets_file_raw(path: Path) -> dict[bytes, bytes | None]:
    try:
        return decode_offsets_file(path.read_bytes()) if path.exists() else {}
    except ValueError as error:
        raise WorkerStoreError(f"{path}: {error}") from None


def write_offsets_file(path: Path, entries: dict[bytes, bytes | None]) -> Path | None:
    """Replace ``path`` atomically with ``entries``; returns the backup of the old file (if any)."""
    data = encode_offsets_file(entries)
    backup: Path | None = None
    if path.exists():
        backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}.bak")
        shutil.copy2(path, backup)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with temp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as error:
        temp.unlink(missing_ok=True)
        raise WorkerStoreError(f"cannot write {path}: {error.strerror}") from None
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return backup
