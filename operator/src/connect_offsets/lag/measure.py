"""One measurement of one mirror: what its MirrorSourceConnector replicated, against the source
cluster's log end offsets.

``measure_mirror`` makes one ``GET /connectors/{c}/offsets`` plus one metadata request and one
batched ListOffsets on the source cluster (a second one for start offsets only while some
partitions have no offset yet); ``replicated_offsets`` and ``partition_lags`` are the pure
arithmetic it applies (unit-tested without I/O). A failed measurement is a result, never an
exception: ``MirrorLag.error`` says why, and the last good numbers stay.

Source topics written in transactions (issue 46): MirrorMaker 2 never replicates commit/abort
markers, so a partition whose last record is followed by a marker would stay at lag 1 (and more
after aborted transactions) for ever. A partition whose replicated offset stayed below the end
since the last measurement has that tail read by one consumer of the mirror's isolation level
(``clients.kafka.empty_tails``): only markers (and, read_committed, aborted records) there is lag 0
(``tails_to_read``, ``settled``). The end and that consumer follow what MirrorMaker 2's own
consumer reads (``reads_committed``): with ``isolation.level=read_committed`` (exactly-once) the
last stable offset (ListOffsets READ_COMMITTED); otherwise - its default - the high watermark,
since it replicates aborted records and those of open transactions too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from connect_offsets.clients.connect import ConnectClient, ConnectError, ConnectNotFound
from connect_offsets.clients.kafka import KafkaAdminError, empty_tails, librdkafka_config, log_offsets
from connect_offsets.planning import ConnectorTarget
from connect_offsets.planning.mirror_topics import mirrored_topic_filter

TP = tuple[str, int]


def reads_committed(config: Mapping[str, str]) -> bool:
    """Whether a MirrorSourceConnector's consumer reads only committed records
    (``MirrorSourceConfig.sourceConsumerConfig``: ``consumer.`` then ``source.consumer.`` settings;
    ``MirrorSourceConnector.consumerUsesReadCommitted`` compares with ``read_committed`` exactly)."""
    level = config.get("source.consumer.isolation.level", config.get("consumer.isolation.level"))
    return level == "read_committed"


# --- arithmetic ---------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class PartitionLag:
    topic: str
    partition: int
    lag: int
    end: int
    replicated: int | None  # the last replicated upstream offset; None: nothing replicated yet


def replicated_offsets(document: Mapping[str, Any], source_alias: str) -> dict[TP, int]:
    """``GET /connectors/{c}/offsets`` of a MirrorSourceConnector -> {(topic, partition): last replicated}.

    Entries of other clusters or of unexpected shapes are ignored: they cannot be compared with
    this source cluster's offsets.
    """
    found: dict[TP, int] = {}
    for entry in document.get("offsets") or []:
        if not isinstance(entry, dict):
            continue
        partition, offset = entry.get("partition"), entry.get("offset")
        if not isinstance(partition, dict) or not isinstance(offset, dict):
            continue
        topic, number, position = partition.get("topic"), partition.get("partition"), offset.get("offset")
        if partition.get("cluster") != source_alias or not isinstance(topic, str):
            continue
        if type(number) is not int or type(position) is not int:
            continue
        found[(topic, number)] = position
    return found


def partition_lags(
    replicated: Mapping[TP, int], ends: Mapping[TP, int], starts: Mapping[TP, int]
) -> list[PartitionLag]:
    """Lag of every partition in ``ends`` (the mirrored partitions), sorted by topic and partition.

    With an offset n: ``end - (n + 1)``; without one: ``end - start`` (the whole backlog). Never
    negative (an end offset read just before MM2 commits a newer offset would go below zero).
    """
    result = []
    for tp in sorted(ends):
        end = ends[tp]
        if tp in replicated:
            lag = end - (replicated[tp] + 1)
            last: int | None = replicated[tp]
        else:
            lag = end - starts.get(tp, 0)
            last = None
        result.append(PartitionLag(tp[0], tp[1], max(0, lag), end, last))
    return result


def tails_to_read(lags: tuple[PartitionLag, ...], previous: tuple[PartitionLag, ...]) -> dict[TP, tuple[int, int]]:
    """Partitions behind whose replicated offset did not move since ``previous`` (a mirror that moves
    is catching up anyway): (first offset not replicated, end) for each, to be read for records."""
    before = {(p.topic, p.partition): p.replicated for p in previous}
    return {
        (p.topic, p.partition): (p.replicated + 1, p.end)
        for p in lags
        if p.lag > 0 and p.replicated is not None and before.get((p.topic, p.partition)) == p.replicated
    }


def settled(lags: tuple[PartitionLag, ...], empty: frozenset[tuple[TP, int, int]]) -> tuple[PartitionLag, ...]:
    """``lags`` with the partitions whose tail holds only markers and aborted records at lag 0."""
    return tuple(
        replace(p, lag=0)
        if p.replicated is not None and ((p.topic, p.partition), p.replicated + 1, p.end) in empty
        else p
        for p in lags
    )


# --- one mirror's measurements ------------------------------------------------------------------


@dataclass(frozen=True)
class MirrorLag:
    """The latest state of one mirror: the last good numbers, and whether the last attempt failed."""

    connector: str
    source: str
    target: str
    lags: tuple[PartitionLag, ...] = ()
    measured_at: datetime | None = None  # of the last successful measurement
    attempted_at: datetime | None = None
    error: str | None = None  # why the last attempt failed; None: it succeeded
    above_since: datetime | None = None  # first measurement of the current run above the threshold
    requests: int = 0  # Connect + Kafka requests of the last attempt
    seconds: float = 0.0  # wall time of the last attempt

    @property
    def mirror(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def measured(self) -> bool:
        return self.measured_at is not None

    @property
    def total(self) -> int:
        return sum(p.lag for p in self.lags)

    @property
    def max(self) -> int:
        return max((p.lag for p in self.lags), default=0)

    @property
    def worst(self) -> PartitionLag | None:
        # Largest lag; ties go to the first topic/partition, so the answer is stable.
        return min(self.lags, key=lambda p: (-p.lag, p.topic, p.partition), default=None)


def next_above_since(
    previous: datetime | None, total: int, threshold: int | None, measured_at: datetime
) -> datetime | None:
    """When the current run of measurements above the threshold began (None: not above now)."""
    if threshold is None or total <= threshold:
        return None
    return previous or measured_at


# --- measuring ----------------------------------------------------------------------------------


def source_kafka_config(target: ConnectorTarget) -> dict[str, Any]:
    """Admin-client settings for the mirror's source cluster."""
    return mirror_kafka_config(target, "source")


def mirror_kafka_config(target: ConnectorTarget, side: Literal["source", "target"]) -> dict[str, Any]:
    """Admin-client settings for one of a mirror's clusters, from the connector config the planner
    built (the cluster's ``config`` plus its resolved ``secretConfig``)."""
    prefix = f"{side}.cluster."
    java = {
        key[len(prefix) :]: value
        for key, value in target.config.items()
        if key.startswith(prefix) and key not in (f"{prefix}alias", f"{prefix}bootstrap.servers")
    }
    return librdkafka_config(target.config[f"{prefix}bootstrap.servers"], java)


async def measure_mirror(
    client: ConnectClient,
    target: ConnectorTarget,
    previous: MirrorLag | None,
    threshold: int | None,
    *,
    namespace: str,
    timeout: float = 10.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> MirrorLag:
    """One measurement of one mirror, for a resource of ``namespace`` (whose limit and remembered
    failures its Kafka calls count against). Never raises for Connect or Kafka trouble: the result
    says it."""
    source = target.config["source.cluster.alias"]
    target_alias = target.config["target.cluster.alias"]
    base = previous or MirrorLag(target.name, source, target_alias)
    started = time.monotonic()
    now = clock()
    requests = 1
    try:
        try:
            document = await client.get_offsets(target.name)
        except ConnectNotFound as error:
            raise _MeasureFailed(f"connector {target.name} does not exist in Connect (yet)") from error
        except ConnectError as error:
            raise _MeasureFailed(f"Connect offsets of {target.name}: {error}") from error
        replicated = replicated_offsets(document, source)
        try:
            select = mirrored_topic_filter(target.config)
        except ValueError as error:
            raise _MeasureFailed(str(error)) from error
        if select is None:  # a custom topic filter: only the partitions MM2 has offsets for
            topics = {topic for topic, _ in replicated}
            select = topics.__contains__
        try:
            offsets = await log_offsets(
                source_kafka_config(target),
                select,
                replicated.keys(),
                namespace=namespace,
                timeout=timeout,
                read_committed=reads_committed(target.config),
            )
        except KafkaAdminError as error:
            raise _MeasureFailed(f"source cluster {source}: {error}") from error
        requests += offsets.requests
    except _MeasureFailed as failure:
        return replace(
            base,
            attempted_at=now,
            error=str(failure)[:512],
            requests=requests,
            seconds=time.monotonic() - started,
        )
    lags = tuple(partition_lags(replicated, offsets.ends, offsets.starts))
    tails = tails_to_read(lags, base.lags)
    if tails:
        requests += 1
        try:
            empty, _ = await empty_tails(
                source_kafka_config(target),
                tails,
                namespace=namespace,
                timeout=timeout,
                read_committed=reads_committed(target.config),
            )
        except KafkaAdminError:
            empty = frozenset()  # not known: the offsets' lag stands
        lags = settled(lags, empty)
    total = sum(p.lag for p in lags)
    return MirrorLag(
        connector=target.name,
        source=source,
        target=target_alias,
        lags=lags,
        measured_at=now,
        attempted_at=now,
        error=None,
        above_since=next_above_since(base.above_since, total, threshold, now),
        requests=requests,
        seconds=time.monotonic() - started,
    )


class _MeasureFailed(Exception):
    pass
