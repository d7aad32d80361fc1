"""Direct Kafka access, used only where Connect's REST API cannot help.

Today that is sink connectors' progress (their consumer groups against the end offsets,
``sink_positions``), MirrorMaker 2's full reset (its ``mm2-offset-syncs.<alias>.internal`` topic lives
in Kafka, not behind Connect), its replication lag (the source cluster's log end offsets, which
Connect does not know), which clusters a mirror reads and writes (their ids) and a sink's seek to a
time. confluent-kafka's AdminClient is synchronous (futures), so calls run in a thread, and since
the brokers are ones a tenant chose, in the tenant pool with its per-namespace limit and remembered
failures (``clients.tenant_io``). Every client reads answers of at most ``MAX_KAFKA_RESPONSE_BYTES``
(a hostile "broker" may claim any size). Java client settings from a resource are mapped to
librdkafka's names; settings librdkafka does not know are dropped rather than passed (it rejects
unknown keys).

Over 600 lines: the tail reads of sinks and mirrors (``_read_tails``, several tails of a partition
in one assignment) live with the admin calls whose tenant pool, settings and bounds they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from connect_offsets import fencing
from connect_offsets.clients.tenant_io import address_key, tenant_network
from connect_offsets.errors import TransientError

__all__ = [
    "MAX_KAFKA_RESPONSE_BYTES",
    "MAX_TAIL_PROBES",
    "ClusterIdCache",
    "KafkaAdminError",
    "LogOffsets",
    "SinkPositions",
    "Tail",
    "TimestampOffsets",
    "admin_client",
    "client_settings",
    "cluster_id",
    "delete_topic",
    "empty_tails",
    "kafka_text",
    "librdkafka_config",
    "log_offsets",
    "offsets_for_timestamp",
    "sink_positions",
    "tenant_call",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The largest answer a Kafka client of the operator reads (librdkafka's
#: ``receive.message.max.bytes``; its default is 100 MB). Metadata of 100,000 partitions is a few
#: MiB; a "broker" claiming more is cut off at the size field, before anything is allocated.
MAX_KAFKA_RESPONSE_BYTES: Final = 16 * 1024 * 1024

#: Java client settings with the same meaning (and name) in librdkafka.
_SAME = {
    "security.protocol",
    "ssl.endpoint.identification.algorithm",
    "client.id",
}
_RENAMED = {
    "sasl.mechanism": "sasl.mechanisms",
}
_JAAS_USER = re.compile(r'username\s*=\s*"([^"]*)"')
_JAAS_PASSWORD = re.compile(r'password\s*=\s*"([^"]*)"')


class KafkaAdminError(TransientError):
    """A Kafka admin call failed; the message has the operation and Kafka's error (no credentials)."""


def librdkafka_config(bootstrap_servers: str, java_config: dict[str, str]) -> dict[str, Any]:
    """Admin-client settings from a cluster's Java-style settings (PLAIN/SCRAM JAAS credentials included)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    for key, value in java_config.items():
        if key in _SAME:
            config[key] = value
        elif key in _RENAMED:
            config[_RENAMED[key]] = value
        elif key == "sasl.jaas.config":
            user, password = _JAAS_USER.search(value), _JAAS_PASSWORD.search(value)
            if user and password:
                config["sasl.username"], config["sasl.password"] = user.group(1), password.group(1)
        elif key == "ssl.truststore.location" and value.endswith((".pem", ".crt")):
            config["ssl.ca.location"] = value
    return config


def _client_settings(config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """An admin client's settings for a tenant's brokers: short timeouts, answers capped, and no
    reconnect within one call (a broker that never answers costs one connection per attempt)."""
    millis = int(timeout * 1000)
    return {
        **config,
        "socket.timeout.ms": millis,
        "socket.connection.setup.timeout.ms": millis,
        "reconnect.backoff.ms": millis,
        "reconnect.backoff.max.ms": millis,
        "receive.message.max.bytes": MAX_KAFKA_RESPONSE_BYTES,
        # librdkafka would print every failed connection attempt to stderr; the caller reports
        # the failure once, with the cluster it was about.
        "logger": log,
    }


def _admin(settings: dict[str, Any]) -> AdminClient:
    """An admin client; settings librdkafka refuses (a tenant's SASL mechanism it was not built
    with, say) are a KafkaAdminError like any other failure, not an unexpected exception."""
    try:
        return AdminClient(settings)
    except KafkaException as error:
        where = f"cluster {settings.get('bootstrap.servers', '?')}"
        raise KafkaAdminError(f"client settings for {where}: {_kafka_text(error)}") from error


def _remembered(error: TransientError, backoff: float) -> TransientError:
    return KafkaAdminError(f"{error} (not asked again for {backoff:.0f} s)")


async def _tenant_call(namespace: str, config: dict[str, Any], call: Callable[[], T]) -> T:
    """``call`` against the brokers of ``config`` through the tenant pool (``clients.tenant_io``)."""
    address = address_key(str(config.get("bootstrap.servers", "")))
    return await tenant_network().run(namespace, address, call, _remembered)


async def cluster_id(config: dict[str, Any], *, namespace: str, timeout: float = 10.0) -> str:
    """The id of the Kafka cluster at ``config``'s bootstrap servers (one DescribeCluster request).

    Raises ``KafkaAdminError`` within about ``timeout`` seconds when the cluster does not answer,
    or at once while an earlier failure of that address is remembered for ``namespace``.
    """

    settings = _client_settings(config, timeout)
    where = f"cluster {config.get('bootstrap.servers', '?')}"

    def run() -> str:
        admin = _admin(settings)
        try:
            described = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 5)
        except KafkaException as error:
            raise KafkaAdminError(f"describe {where}: {_kafka_text(error)}") from error
        except Exception as error:  # timeouts surface as concurrent.futures errors
            raise KafkaAdminError(
                f"describe {where}: no answer within {timeout:.0f} s ({type(error).__name__})"
            ) from error
        found = getattr(described, "cluster_id", None)
        if not isinstance(found, str) or not found:
            raise KafkaAdminError(f"describe {where}: the cluster reported no id")
        return found

    return await _tenant_call(namespace, config, run)


class ClusterIdCache:
    """Kafka cluster ids by client settings, kept for ``ttl`` seconds.

    A mirror's clusters are checked on every reconcile pass; their ids change only when an address
    is re-pointed at another cluster, which ``ttl`` bounds. Failures are remembered by the tenant
    pool (``clients.tenant_io``), per namespace and address, for their back-off. Concurrent asks
    for the same settings (a resource's mirrors share clusters) wait for one probe.
    """

    def __init__(
        self,
        ttl: float = 300.0,
        probe: Callable[[dict[str, Any], str], Awaitable[str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self._probe = probe or (lambda config, namespace: cluster_id(config, namespace=namespace))
        self._clock = clock
        self._found: dict[str, tuple[float, str]] = {}
        self._asking: dict[tuple[str, str], asyncio.Future[str]] = {}

    async def get(self, config: dict[str, Any], *, namespace: str) -> str:
        key = hashlib.sha256(json.dumps(sorted(config.items()), default=str).encode()).hexdigest()
        now = self._clock()
        cached = self._found.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        asking = self._asking.get((namespace, key))
        if asking is not None:
            return await asyncio.shield(asking)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._asking[(namespace, key)] = future
        try:
            found = await self._probe(config, namespace)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as error:
            future.set_exception(error)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            self._asking.pop((namespace, key), None)
        future.set_result(found)
        self._found = {k: v for k, v in self._found.items() if now - v[0] < self.ttl}
        self._found[key] = (now, found)
        return found


async def delete_topic(config: dict[str, Any], topic: str, *, namespace: str, timeout: float = 30.0) -> bool:
    """Delete a topic. Returns False if it did not exist (nothing to do), True if deleted."""
    await fencing.before_write(f"delete topic {topic}")  # under a Lease: this term only
    settings = _client_settings(config, timeout)

    def run() -> bool:
        admin = _admin(settings)
        fencing.check(f"delete topic {topic}")  # again: the thread may have waited for a slot
        futures = admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)
        try:
            futures[topic].result(timeout=timeout + 5)
        except KafkaException as error:
            kafka_error = error.args[0] if error.args else None
            if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise KafkaAdminError(f"delete topic {topic}: {kafka_error}") from error
        except Exception as error:  # timeouts surface as concurrent.futures errors
            raise KafkaAdminError(f"delete topic {topic}: {type(error).__name__}: {error}") from error
        return True

    return await _tenant_call(namespace, config, run)


@dataclass(frozen=True)
class LogOffsets:
    """Log end (and, where asked, start) offsets of the selected topics' partitions."""

    ends: dict[tuple[str, int], int]
    starts: dict[tuple[str, int], int]
    requests: int  # admin requests made: one metadata request plus one ListOffsets per offset kind


async def log_offsets(
    config: dict[str, Any],
    select_topic: Callable[[str], bool],
    with_position: Collection[tuple[str, int]],
    *,
    namespace: str,
    timeout: float = 10.0,
    read_committed: bool = False,
) -> LogOffsets:
    """End offsets of every partition of the topics ``select_topic`` accepts, in one batched ListOffsets
    (``read_committed``: the last stable offsets, what a read_committed consumer can reach).

    Start offsets are asked (a second batched ListOffsets) only for partitions *not* in
    ``with_position``: the caller needs them for partitions nothing has read yet. Short timeouts
    so that an unreachable cluster fails within about ``timeout`` seconds instead of hanging.
    """

    def run() -> LogOffsets:
        admin, where, partitions = _selected_partitions(config, select_topic, timeout)
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        ends = _list(admin, partitions, latest, timeout, f"end offsets on {where}", read_committed=read_committed)
        known = set(with_position)
        fresh = [tp for tp in partitions if tp not in known]
        earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        starts = _list(admin, fresh, earliest, timeout, f"start offsets on {where}")
        return LogOffsets(ends, starts, 1 + (1 if partitions else 0) + (1 if fresh else 0))

    return await _tenant_call(namespace, config, run)


def _selected_partitions(
    config: dict[str, Any], select_topic: Callable[[str], bool], timeout: float
) -> tuple[AdminClient, str, list[tuple[str, int]]]:
    """An admin client with short timeouts, the cluster's name for messages, and the sorted
    partitions of the topics ``select_topic`` accepts (one metadata request)."""
    admin = _admin(_client_settings(config, timeout))
    where = f"cluster {config.get('bootstrap.servers', '?')}"
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as error:
        raise KafkaAdminError(f"list topics on {where}: {_kafka_text(error)}") from error
    partitions = sorted(
        (name, partition)
        for name, topic in metadata.topics.items()
        if topic.error is None and select_topic(name)
        for partition in topic.partitions
    )
    return admin, where, partitions


def _list(
    admin: AdminClient,
    partitions: list[tuple[str, int]],
    spec: OffsetSpec,
    timeout: float,
    what: str,
    *,
    read_committed: bool = False,
) -> dict[tuple[str, int], int]:
    """One batched ListOffsets; ``read_committed``: with IsolationLevel READ_COMMITTED, for which
    the broker answers the latest offset with the last stable offset (KIP-98), not the high watermark."""
    if not partitions:
        return {}
    isolation = {"isolation_level": IsolationLevel.READ_COMMITTED} if read_committed else {}
    try:
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in partitions}, request_timeout=timeout, **isolation
        )
        return {(tp.topic, tp.partition): int(f.result(timeout=timeout + 5).offset) for tp, f in futures.items()}
    except KafkaException as error:
        raise KafkaAdminError(f"{what}: {_kafka_text(error)}") from error
    except Exception as error:  # timeouts surface as concurrent.futures errors
        raise KafkaAdminError(f"{what}: {type(error).__name__}: {error}") from error


def _kafka_text(error: KafkaException) -> str:
    kafka_error = error.args[0] if error.args else None
    if isinstance(kafka_error, KafkaError):
        return f"{kafka_error.name()}: {kafka_error.str()}"
    return str(error)


@dataclass(frozen=True)
class TimestampOffsets:
    """For a seek to time T: per partition the first offset with a timestamp >= T, or the end offset."""

    offsets: dict[tuple[str, int], int]
    at_end: list[tuple[str, int]]  # partitions with no record at or after T: their end offset


async def offsets_for_timestamp(
    config: dict[str, Any],
    select_topic: Callable[[str], bool],
    timestamp_ms: int,
    *,
    namespace: str,
    timeout: float = 10.0,
) -> TimestampOffsets:
    """ListOffsets by timestamp for every partition of the selected topics (one batched request), and
    the end offsets of partitions that have no such record (Kafka answers -1 for them)."""

    def run() -> TimestampOffsets:
        admin, where, partitions = _selected_partitions(config, select_topic, timeout)
        spec = OffsetSpec.for_timestamp(timestamp_ms)
        found = _list(admin, partitions, spec, timeout, f"offsets for timestamp {timestamp_ms} on {where}")
        missing = sorted(tp for tp, offset in found.items() if offset < 0)
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        ends = _list(admin, missing, latest, timeout, f"end offsets on {where}")
        return TimestampOffsets({**found, **ends}, missing)

    return await _tenant_call(namespace, config, run)


TP = tuple[str, int]
TP3 = tuple[TP, int, int]
#: A tail to read: (partition, from offset, end offset, read_committed) - the end is the last stable
#: offset for a read_committed consumer, the high watermark for a read_uncommitted one.
Tail = tuple[TP, int, int, bool]


#: Partitions whose tail (committed offset .. last stable offset) one round reads at most, and what
#: one read may fetch: enough to see whether a data record is there, not to read a backlog.
MAX_TAIL_PROBES: Final = 256
_TAIL_FETCH_BYTES: Final = 1024 * 1024


@dataclass(frozen=True)
class SinkPositions:
    """One cluster's round of sink progress (``sink_positions``)."""

    topics: dict[str, int]  # the metadata used: partitions per topic
    ends: dict[TP, int]  # last stable offsets: the end a read_committed consumer can reach
    starts: dict[TP, int]  # earliest offsets, of the partitions a read group has no commit for
    committed: dict[str, dict[TP, int]]  # per group read: its committed offsets (a partition absent: none)
    group_errors: dict[str, str]  # groups whose read failed, and why
    requests: dict[str, int]  # Kafka requests made, by kind: metadata, list_offsets, group_offsets, tail_reads
    #: High watermarks (read_uncommitted ends): above ``ends`` while a transaction is open.
    highs: dict[TP, int] = field(default_factory=dict)
    #: Tails read (``tails_to_read``) that hold no record their consumer is given - only commit/abort
    #: markers (and, read_committed, aborted records): (partition, from, to, read_committed).
    empty_tails: frozenset[Tail] = frozenset()
    #: Tails read that hold a record before their end (records wait there), the same way.
    full_tails: frozenset[Tail] = frozenset()


async def sink_positions(
    config: dict[str, Any],
    *,
    topics: dict[str, int] | None,
    partitions_of: Callable[[dict[str, int]], Collection[TP]],
    groups_to_read: Callable[[dict[TP, int], dict[TP, int]], dict[str, list[TP]]],
    tails_to_read: Callable[[dict[str, dict[TP, int]], dict[TP, int], dict[TP, int]], Collection[Tail]] | None = None,
    namespace: str,
    timeout: float = 10.0,
) -> SinkPositions:
    """End offsets of every partition the cluster's sink connectors consume, and the committed offsets
    of the consumer groups worth reading, in one call in the tenant pool (``clients.tenant_io``).

    Requests: a metadata request only when ``topics`` is None (the caller keeps the answer for a
    while), two batched ListOffsets for every partition of every sink (``partitions_of``): the last
    stable offsets (READ_COMMITTED) and the high watermarks, which differ only while a transaction
    is open; then one ListConsumerGroupOffsets per group ``groups_to_read`` names once it has seen
    the end offsets (last stable, high) (a group whose input did not move and that had nothing
    waiting is not read), all sent at once on one connection, and one more batched ListOffsets
    (earliest) only for partitions such a group has no commit for. librdkafka takes one group per
    ListConsumerGroupOffsets (confluent-kafka 2.16 refuses more: "Currently we support listing only
    1 consumer groups offset information"), so the groups are not one request; idle groups cost
    nothing.

    Topics written in transactions: a sink that read everything commits its last record + 1, and
    the commit marker sits at that offset, so the committed offset stays one (or, after aborted
    transactions, more) below the last stable offset for ever. ``tails_to_read`` (given the
    committed offsets, the last stable offsets and the high watermarks) names the tails worth a
    look, in the order to take them (at most ``MAX_TAIL_PROBES``); one consumer per isolation level
    reads them (``_read_tails``) and tells which hold no record it is given before their end
    (``empty_tails``) and which do (``full_tails``): librdkafka hands it no markers (read_committed:
    no aborted records either), and moves its position past them.
    """

    def run() -> SinkPositions:
        requests = {"metadata": 0, "list_offsets": 0, "group_offsets": 0, "tail_reads": 0}
        admin = _admin(_client_settings(config, timeout))
        where = f"cluster {config.get('bootstrap.servers', '?')}"
        known = topics
        if known is None:
            try:
                metadata = admin.list_topics(timeout=timeout)
            except KafkaException as error:
                raise KafkaAdminError(f"list topics on {where}: {_kafka_text(error)}") from error
            requests["metadata"] += 1
            known = {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}
        partitions = sorted(set(partitions_of(known)))
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        ends = _list(admin, partitions, latest, timeout, f"last stable offsets on {where}", read_committed=True)
        highs = _list(admin, partitions, latest, timeout, f"end offsets on {where}")
        requests["list_offsets"] += 2 if partitions else 0
        reads = groups_to_read(ends, highs)
        futures = {}
        for group, wanted in reads.items():
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in wanted] or None)
            futures[group] = admin.list_consumer_group_offsets([request], request_timeout=timeout)[group]
        requests["group_offsets"] += len(futures)
        committed: dict[str, dict[TP, int]] = {}
        errors: dict[str, str] = {}
        for group, future in futures.items():
            try:
                answer = future.result(timeout=timeout + 5)
            except KafkaException as error:
                errors[group] = f"committed offsets of group {group} on {where}: {_kafka_text(error)}"
                continue
            except Exception as error:  # timeouts surface as concurrent.futures errors
                errors[group] = f"committed offsets of group {group} on {where}: {type(error).__name__}"
                continue
            committed[group] = {
                (tp.topic, tp.partition): int(tp.offset)
                for tp in answer.topic_partitions or []
                if tp.offset != OFFSET_INVALID and tp.offset >= 0 and tp.error is None
            }
        uncommitted = sorted(
            {tp for group, wanted in reads.items() if group in committed for tp in wanted if tp not in committed[group]}
        )
        earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        starts = _list(admin, uncommitted, earliest, timeout, f"start offsets on {where}")
        requests["list_offsets"] += 1 if uncommitted else 0
        empty: set[Tail] = set()
        full: set[Tail] = set()
        if tails_to_read is not None:
            chosen: dict[Tail, None] = {}
            for tail in tails_to_read(committed, ends, highs):
                if tail[1] < tail[2] and len(chosen) < MAX_TAIL_PROBES:
                    chosen[tail] = None
            for read_committed in (True, False):
                mine = [(tp, start, end) for tp, start, end, isolation in chosen if isolation is read_committed]
                if mine:
                    requests["tail_reads"] += 1
                    found, waiting = _read_tails(config, mine, timeout, read_committed=read_committed)
                    empty |= {(*tail, read_committed) for tail in found}
                    full |= {(*tail, read_committed) for tail in waiting}
        return SinkPositions(known, ends, starts, committed, errors, requests, highs, frozenset(empty), frozenset(full))

    return await _tenant_call(namespace, config, run)


async def empty_tails(
    config: dict[str, Any],
    tails: dict[TP, tuple[int, int]],
    *,
    namespace: str,
    timeout: float = 10.0,
    read_committed: bool = True,
) -> tuple[frozenset[TP3], frozenset[TP3]]:
    """``_read_tails`` in the tenant pool, for callers that know their tails without a round of
    ``sink_positions`` (a mirror's replication lag); at most ``MAX_TAIL_PROBES`` partitions:
    (the empty tails, the tails holding a record)."""
    chosen = [(tp, start, end) for tp, (start, end) in sorted(tails.items())[:MAX_TAIL_PROBES]]
    if not chosen:
        return frozenset(), frozenset()
    return await _tenant_call(
        namespace, config, lambda: _read_tails(config, chosen, timeout, read_committed=read_committed)
    )


def _read_tails(
    config: dict[str, Any], tails: Collection[TP3], timeout: float, *, read_committed: bool
) -> tuple[frozenset[TP3], frozenset[TP3]]:
    """Which of ``tails`` (partition, from, end) hold no record the consumer (``read_committed`` or
    not) is given before their end, and which do.

    Several tails of one partition (sinks sharing a topic, at different committed offsets) are read
    by one assignment from the lowest ``from``: a record at offset r decides every tail from at most
    r (records wait there); once the lowest tails are decided the partition jumps (seek) to the next
    ``from`` still open, so a backlog between two sinks is not read. A tail is empty once the
    consumer's position reaches its end with no record at or after its ``from`` - librdkafka moves
    the position past markers (and, read_committed, past aborted records). Within ``timeout``; a
    tail not decided in time, or whose read failed, is in neither set (counted as records waiting)."""
    isolation = "read_committed" if read_committed else "read_uncommitted"
    settings = {
        **_client_settings(config, timeout),
        "group.id": "connect-offsets-progress-tails",  # assign() only: it never joins or commits
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "isolation.level": isolation,
        "fetch.max.bytes": _TAIL_FETCH_BYTES,
        "max.partition.fetch.bytes": _TAIL_FETCH_BYTES // 4,
        "queued.max.messages.kbytes": _TAIL_FETCH_BYTES // 1024,
    }
    # per partition: the tails still open, lowest from first
    pending: dict[TP, list[tuple[int, int]]] = {}
    for tp, start, end in tails:
        if start < end:
            pending.setdefault(tp, []).append((start, end))
    for starts in pending.values():
        starts.sort()
    empty: set[TP3] = set()
    full: set[TP3] = set()
    if not pending:
        return frozenset(), frozenset()
    try:
        consumer = Consumer(settings)
    except KafkaException as error:
        log.debug("tail reads on %s: %s", config.get("bootstrap.servers", "?"), _kafka_text(error))
        return frozenset(), frozenset()
    try:
        consumer.assign([TopicPartition(t, p, starts[0][0]) for (t, p), starts in sorted(pending.items())])
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            seen: dict[TP, int] = {}  # the highest record offset given this turn, per partition
            decided: list[TP] = []
            for message in consumer.consume(num_messages=500, timeout=0.5):
                topic, partition = message.topic(), message.partition()
                tp = (topic or "", partition if partition is not None else -1)
                open_tails = pending.get(tp)
                if open_tails is None:
                    continue
                if message.error() is not None:
                    pending.pop(tp)  # not known: in neither set
                    decided.append(tp)
                    continue
                offset = message.offset() or 0
                seen[tp] = max(seen.get(tp, -1), offset)
                # the first record at or after a tail's start: before its end, records wait there;
                # at or past it, nothing was between (records come in offset order)
                while open_tails and open_tails[0][0] <= offset:
                    start, end = open_tails.pop(0)
                    (full if offset < end else empty).add((tp, start, end))
                if not open_tails:
                    pending.pop(tp)
                    decided.append(tp)
            for tp, last in seen.items():
                open_tails = pending.get(tp)
                if open_tails and open_tails[0][0] > last + 1:
                    # skip what lies before the next open tail (no tail starts there); refused: read on
                    with contextlib.suppress(KafkaException):
                        consumer.seek(TopicPartition(tp[0], tp[1], open_tails[0][0]))
            movable = [tp for tp in pending if tp not in seen]
            for at in consumer.position([TopicPartition(t, p) for t, p in movable]) if movable else []:
                tp = (at.topic, at.partition)
                open_tails = pending.get(tp)
                if open_tails is None or at.error is not None or at.offset is None or at.offset < 0:
                    continue
                while open_tails and at.offset >= open_tails[0][1]:
                    start, end = open_tails.pop(0)
                    empty.add((tp, start, end))
                if not open_tails:
                    pending.pop(tp)
                    decided.append(tp)
            if decided:
                consumer.pause([TopicPartition(t, p) for t, p in decided])
    except KafkaException as error:
        log.debug("tail reads on %s: %s", config.get("bootstrap.servers", "?"), _kafka_text(error))
    finally:
        consumer.close()
    return frozenset(empty), frozenset(full)


# The helpers above, for the other modules of clients that talk to tenants' brokers (kafka_groups):
# one way to build a client for a tenant's brokers and one way to run it, whichever module calls.
client_settings = _client_settings
admin_client = _admin
kafka_text = _kafka_text
tenant_call = _tenant_call
