"""Offsets history as Spark tables: decode, latest, history, as-of.

Why Spark: a worker's offsets topic keeps every commit until the log cleaner removes it, which on a
busy Connect cluster is millions of records; answering "what were the offsets at 14:02 yesterday" means
scanning all of them. The scan is embarrassingly parallel per Kafka partition and the reduction is a
group-by, so it runs in Spark (embedded ``local[*]`` or on a cluster) with the decoding in Spark SQL's
JSON functions: no Python UDF, no per-record Python at all on the hot path.

Semantics, matched to the worker (reference: connect-offsets-api.md §8.2):

- a key is ``["<connector>", {partition}]``; anything else (not JSON, not a two-element array with a
  string and an object, ``["c", null]``) is skipped, as Connect's ``OffsetUtils.processPartitionKey`` does;
- a null value (or the JSON text ``null``) is a tombstone: "no offset";
- records of one source partition are ordered by record timestamp, then by topic (the order the
  sources were given, so a connector's own topic can be listed after the worker's), Kafka partition
  and offset. Within one Kafka partition that is log order whenever timestamps do not go backwards
  (Connect's producer stamps wall-clock CreateTime);
- a source partition is identified by its canonical JSON text (sorted keys, compact: ``to_json`` of a
  VARIANT), so ``{"a":1,"b":2}`` and ``{"b":2,"a":1}`` are one partition, as they are for Connect's
  ``connectorPartitions``. The documents carry the partition exactly as it was stored (number types
  kept: ``1.0`` stays a double), so applying them addresses the same key.

Compaction cannot be seen record by record, but it leaves holes in the Kafka offsets. Each record
carries ``removed_before``: how many offsets below it in its Kafka partition are missing (compacted,
deleted by retention, aborted or transaction markers). A source partition whose first retained record is
after T and has ``removed_before > 0`` may have had an offset at T that is gone: as-of lists it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "AsOfResult",
    "KafkaSource",
    "PipelineError",
    "as_of",
    "decode_kafka",
    "history_summary",
    "latest",
    "read_export",
    "read_kafka",
    "write_history",
]

#: Records as the jobs see them, whatever the source.
RECORD_COLUMNS = (
    "connector",  # string
    "partition",  # canonical JSON text of the partition map
    "partition_stored",  # the partition map as stored (key order and number types of the writer)
    "offset",  # offset map JSON text as stored; null for a tombstone
    "tombstone",  # boolean
    "kafka_topic",  # string (null for an export without Kafka positions)
    "kafka_partition",  # int
    "kafka_offset",  # long
    "timestamp",  # timestamp (UTC), null when the source has none
    "source_rank",  # int: position of the source in the list given
    "seq",  # long: order within the source when it has no Kafka positions
    "removed_before",  # long: missing Kafka offsets below this record in its Kafka partition (null: unknown)
)

#: What ``history`` writes (the internal ordering helpers are left out).
HISTORY_COLUMNS = (
    "connector",
    "partition",
    "offset",
    "tombstone",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "timestamp",
    "removed_before",
)

_EXPORT_SCHEMA = (
    "map<string, array<struct<partition: string, offset: string, "
    "kafka: struct<topic: string, partition: int, offset: bigint, timestamp: bigint>>>>"
)


class PipelineError(Exception):
    """A job cannot produce a correct answer; the message names the source, connector or time."""


@dataclass(frozen=True)
class KafkaSource:
    """One offsets topic: the worker's ``offset.storage.topic`` or a connector's own (KIP-618)."""

    bootstrap_servers: str
    topic: str
    options: dict[str, str] = field(default_factory=dict)  # kafka.* consumer settings (security, ...)
    isolation_level: str = "read_committed"

    def describe(self) -> str:
        return f"{self.topic} at {self.bootstrap_servers}"


# --------------------------------------------------------------------------- reading


def read_kafka(spark: SparkSession, source: KafkaSource, rank: int = 0) -> DataFrame:
    """Every record of ``source`` (batch, earliest to latest), decoded to RECORD_COLUMNS."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", source.isolation_level)
        # Offsets vanish under compaction between planning and reading; that is expected here.
        .option("failOnDataLoss", "false")
    )
    for key, value in source.options.items():
        reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
    return decode_kafka(reader.load(), rank)


def decode_kafka(raw: DataFrame, rank: int = 0) -> DataFrame:
    """Decode the Kafka source's rows (key/value binary, topic, partition, offset, timestamp).

    Must be applied straight to the source: ``removed_before`` uses each row's position inside its
    Spark partition, which for Spark's Kafka batch source is exactly one Kafka partition's offset range
    read from the earliest offset, in log order.
    """
    from pyspark.sql import functions as F

    positioned = raw.select(
        F.col("key").cast("string").alias("key_text"),
        F.col("value").cast("string").alias("value_text"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").cast("int").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp"),
        # row index inside the Spark partition = records of this Kafka partition read before this one
        (F.col("offset") - F.expr("monotonically_increasing_id() & 8589934591")).alias("removed_before"),
    )
    return _decode(positioned, rank, seq=F.col("kafka_offset"))


def _decode(frame: DataFrame, rank: int, seq: Column) -> DataFrame:
    """key_text/value_text + positions -> RECORD_COLUMNS, dropping keys Connect would skip."""
    from pyspark.sql import functions as F

    parts = frame.withColumn("key_parts", F.expr("from_json(key_text, 'array<string>')"))
    valid_key = (
        F.col("key_text").rlike(r'^\s*\[\s*"')  # first element is a JSON string
        & (F.size("key_parts") == 2)
        & F.col("key_parts")[1].startswith("{")  # second is an object (from_json keeps its JSON text)
    )
    value = F.when(F.trim(F.col("value_text")) == "null", F.lit(None)).otherwise(F.col("value_text"))
    return parts.where(valid_key).select(
        F.col("key_parts")[0].alias("connector"),
        F.expr("to_json(parse_json(key_parts[1]))").alias("partition"),
        F.col("key_parts")[1].alias("partition_stored"),
        value.alias("offset"),
        value.isNull().alias("tombstone"),
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "timestamp",
        F.lit(rank).alias("source_rank"),
        seq.alias("seq"),
        "removed_before",
    )


def read_export(spark: SparkSession, path: str, rank: int = 0) -> DataFrame:
    """A ``connect-offsets export`` file (KIP-199), with or without ``--from-beginning`` Kafka positions.

    The file is one JSON document, so it is read whole (one task): fine for what the exporter writes;
    for the full history of a large cluster read the topics instead.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    text = spark.read.text(path, wholetext=True)
    by_connector = text.select(F.explode(F.expr(f"from_json(value, '{_EXPORT_SCHEMA}')")).alias("connector", "entries"))
    entries = by_connector.select("connector", F.posexplode("entries").alias("seq", "entry"))
    stored = F.col("entry.partition")
    offset = F.col("entry.offset")
    frame = entries.select(
        "connector",
        stored.alias("stored"),
        F.when(F.trim(offset) == "null", F.lit(None)).otherwise(offset).alias("offset"),
        F.col("entry.kafka.topic").alias("kafka_topic"),
        F.col("entry.kafka.partition").alias("kafka_partition"),
        F.col("entry.kafka.offset").alias("kafka_offset"),
        F.timestamp_millis(F.col("entry.kafka.timestamp")).alias("timestamp"),
        F.col("seq").cast("long").alias("seq"),
    ).where(stored.isNotNull() & F.col("entry.partition").startswith("{"))
    in_partition = Window.partitionBy("kafka_topic", "kafka_partition").orderBy("kafka_offset")
    removed = F.when(F.col("kafka_offset").isNotNull(), F.col("kafka_offset") - (F.row_number().over(in_partition) - 1))
    return frame.select(
        "connector",
        F.expr("to_json(parse_json(stored))").alias("partition"),
        F.col("stored").alias("partition_stored"),
        "offset",
        F.col("offset").isNull().alias("tombstone"),
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "timestamp",
        F.lit(rank).alias("source_rank"),
        "seq",
        removed.alias("removed_before"),
    )


def union_sources(frames: Sequence[DataFrame]) -> DataFrame:
    if not frames:
        raise PipelineError("no source given: name at least one offsets topic or an export file")
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def only_connectors(records: DataFrame, connectors: Sequence[str] | None) -> DataFrame:
    from pyspark.sql import functions as F

    return records if not connectors else records.where(F.col("connector").isin(list(connectors)))


# --------------------------------------------------------------------------- the jobs


def _order() -> Column:
    """Later records win: by timestamp, then source, Kafka partition and offset, then file order."""
    from pyspark.sql import functions as F

    return F.struct("timestamp", "source_rank", "kafka_partition", "kafka_offset", "seq")


def _payload() -> Column:
    from pyspark.sql import functions as F

    return F.struct("partition_stored", "offset", "tombstone", "timestamp")


def latest(records: DataFrame) -> DataFrame:
    """connector, partition, partition_stored, offset, timestamp: the current offsets (tombstones honoured)."""
    from pyspark.sql import functions as F

    last = records.groupBy("connector", "partition").agg(F.max_by(_payload(), _order()).alias("last"))
    return last.where(~F.col("last.tombstone")).select(
        "connector", "partition", "last.partition_stored", "last.offset", "last.timestamp"
    )


@dataclass
class AsOfResult:
    at: datetime
    documents: dict[str, dict[str, Any]]  # connector -> {"offsets": [...]} (only non-empty ones)
    compacted: list[dict[str, Any]]  # partitions whose offset at T may have been removed from the log
    not_covered: list[str]  # connectors whose retained history starts after T
    rows: int  # source partitions considered


def as_of(records: DataFrame, at: datetime) -> AsOfResult:
    """Per connector, the offsets at ``at``: the last record with timestamp <= at; tombstone = no offset.

    Documents list every partition that has an offset at T, plus ``"offset": null`` for partitions that
    have one now but had none at T, so applying the document through ``alterOffsets`` puts the connector
    exactly where it was (a PATCH leaves unlisted partitions alone).
    """
    from pyspark.sql import functions as F

    at_utc = _utc(at)
    cutoff = F.timestamp_millis(F.lit(_millis(at_utc)))
    before = F.col("timestamp") <= cutoff
    order = _order()
    per_partition = records.groupBy("connector", "partition").agg(
        F.max_by(_payload(), order).alias("now"),
        F.max_by(_payload(), F.when(before, order)).alias("then"),
        F.min_by(F.struct("timestamp", "removed_before"), order).alias("first"),
        F.min("timestamp").alias("earliest"),
    )
    # One pass over the records: the earliest time comes back with the (small) per-partition rows.
    rows = per_partition.select(
        "connector",
        "partition",
        F.col("now.partition_stored").alias("stored_now"),
        (~F.col("now.tombstone")).alias("has_now"),
        F.col("then.partition_stored").alias("stored_then"),
        F.col("then.offset").alias("offset_then"),
        F.unix_millis("first.timestamp").alias("first_time"),
        F.col("first.removed_before").alias("removed_before"),
        F.unix_millis("earliest").alias("earliest"),
    ).collect()
    if not rows:
        raise PipelineError("the sources hold no offsets records for the selected connectors")
    earliest = [r["earliest"] for r in rows if r["earliest"] is not None]
    if not earliest:
        raise PipelineError(
            "the records carry no timestamps (an export without --from-beginning?): as-of needs the topic "
            "or an export made with `connect-offsets export --from-beginning`"
        )
    first = _from_millis(min(earliest))
    assert first is not None
    if at_utc < first:
        raise PipelineError(
            f"time {_iso(at_utc)} is before the earliest retained record ({_iso(first)}): nothing is known about "
            "the offsets then (older records were compacted or deleted)"
        )
    documents: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    compacted: list[dict[str, Any]] = []
    covered: set[str] = set()
    connectors: set[str] = set()
    for row in rows:
        connector, partition = row["connector"], row["partition"]
        connectors.add(connector)
        if row["stored_then"] is not None:
            covered.add(connector)
        if row["stored_then"] is not None and row["offset_then"] is not None:
            entry = {"partition": json.loads(row["stored_then"]), "offset": json.loads(row["offset_then"])}
        elif row["has_now"]:
            entry = {"partition": json.loads(row["stored_now"]), "offset": None}
        else:
            entry = None
        if entry is not None:
            documents.setdefault(connector, []).append((partition, entry))
        if row["stored_then"] is None and (row["removed_before"] or 0) > 0:
            compacted.append(
                {
                    "connector": connector,
                    "partition": json.loads(partition),
                    "first_retained": _iso(_from_millis(row["first_time"])),
                    "missing_offsets_before": int(row["removed_before"]),
                }
            )
    compacted.sort(key=lambda c: (c["connector"], json.dumps(c["partition"], sort_keys=True)))
    return AsOfResult(
        at=at_utc,
        documents={
            c: {"offsets": [e for _, e in sorted(entries, key=lambda x: x[0])]}
            for c, entries in sorted(documents.items())
        },
        compacted=compacted,
        not_covered=sorted(connectors - covered),
        rows=len(rows),
    )


def latest_documents(records: DataFrame) -> dict[str, dict[str, Any]]:
    """connector -> ``{"offsets": [...]}`` of its current offsets (partitions sorted canonically)."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row in latest(records).collect():
        entry = {"partition": json.loads(row["partition_stored"]), "offset": json.loads(row["offset"])}
        found.setdefault(row["connector"], []).append((row["partition"], entry))
    return {c: {"offsets": [e for _, e in sorted(entries, key=lambda x: x[0])]} for c, entries in sorted(found.items())}


def history_table(records: DataFrame) -> DataFrame:
    return records.select(*HISTORY_COLUMNS)


def write_history(records: DataFrame, path: str, mode: str = "overwrite") -> None:
    """The history as Parquet, partitioned by connector (the usual filter), sorted in log order."""
    (
        history_table(records)
        .repartition("connector")
        .sortWithinPartitions("connector", "partition", "timestamp", "kafka_offset")
        .write.mode(mode)
        .partitionBy("connector")
        .parquet(path)
    )


def history_summary(records: DataFrame) -> list[dict[str, Any]]:
    """Per connector: records, tombstones, source partitions, first/last record time, topics."""
    from pyspark.sql import functions as F

    rows = (
        records.groupBy("connector")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.col("tombstone").cast("long")).alias("tombstones"),
            F.countDistinct("partition").alias("partitions"),
            F.unix_millis(F.min("timestamp")).alias("first"),
            F.unix_millis(F.max("timestamp")).alias("last"),
            F.array_sort(F.collect_set("kafka_topic")).alias("topics"),
        )
        .orderBy("connector")
        .collect()
    )
    return [
        {
            "connector": r["connector"],
            "records": int(r["records"]),
            "tombstones": int(r["tombstones"]),
            "partitions": int(r["partitions"]),
            "first": _iso(_from_millis(r["first"])),
            "last": _iso(_from_millis(r["last"])),
            "topics": list(r["topics"]),
        }
        for r in rows
    ]


# --------------------------------------------------------------------------- time helpers


# Times cross the Python/JVM boundary as epoch milliseconds: Python datetimes collected from Spark are
# naive and in the driver's local zone, which is not something a result should depend on.


def _utc(value: datetime) -> datetime:
    """Naive datetimes given by users mean UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _millis(value: datetime) -> int:
    return int(_utc(value).timestamp() * 1000)


def _from_millis(millis: int | None) -> datetime | None:
    return None if millis is None else datetime.fromtimestamp(millis / 1000, tz=UTC)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    """``--at``: ISO-8601 (``Z`` or an offset; no zone means UTC) or epoch milliseconds."""
    stripped = text.strip()
    if stripped.isdigit():
        millis = int(stripped)
        return datetime.fromtimestamp(millis / 1000, tz=UTC)
    try:
        parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PipelineError(
            f"--at {text!r}: expected an ISO-8601 time such as 2026-11-22T14:02:00Z or epoch milliseconds"
        ) from None
    return _utc(parsed)
